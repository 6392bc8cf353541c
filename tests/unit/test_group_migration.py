"""Online migration between classic and KIP-848 consumer groups on the pure coordinator state
machine (Kafka's rules under group.consumer.migration.policy): a running classic group becomes a
consumer group when a consumer-protocol member joins; its classic members keep using JoinGroup,
SyncGroup and Heartbeat, answered from the consumer group's reconciliation; when the last
consumer-protocol member leaves, a classic group continues with a rebalance. No partition is ever
owned twice on the way, and the records rebuild each state."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from riverlog.client.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from riverlog.config import BrokerConfig, ConfigError
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.consumer_group import MemberState
from riverlog.coordinator.consumer_membership import HeartbeatRequest
from riverlog.coordinator.consumer_records import Assignment, TopicMetadata
from riverlog.coordinator.group import GroupState
from riverlog.coordinator.membership import LeavingMember
from riverlog.coordinator.records import GroupMetadataKey
from riverlog.coordinator.shard import GroupShard
from riverlog.protocol.errors import ErrorCode
from support.group_harness import Harness

pytestmark = pytest.mark.unit

ORDERS = TopicMetadata(uuid.UUID(int=1), "orders", 6)
REBALANCE_MS = 30_000
SESSION_MS = 10_000


def harness(**config: Any) -> Harness:
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=0, **config))
    h.shard.set_topics({"orders": ORDERS})
    return h


class ClassicClient:
    """An eager classic consumer (Java's default range assignor): it gives up everything before
    rejoining and owns what its last SyncGroup gave it."""

    def __init__(self, h: Harness, name: str) -> None:
        self.h, self.name = h, name
        self.member_id = ""
        self.generation = -1
        self.owned: set[int] = set()

    def protocols(self) -> tuple[tuple[str, bytes], ...]:
        sub = encode_subscription(["orders"], owned_partitions={}, version=3)
        return (("range", sub), ("cooperative-sticky", sub))

    def join(self) -> dict[str, Any]:
        self.owned = set()  # eager: revoked before rejoining
        token = self.h.join(self.member_id, protocols=self.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS,
                            client_id=self.name)
        body = self.h.replies[token]
        if body["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = body["member_id"]
            return self.join()
        if body["error_code"] == ErrorCode.NONE:
            self.member_id, self.generation = body["member_id"], body["generation_id"]
        return body

    def sync(self, assignments: dict[str, bytes] | None = None) -> dict[str, Any]:
        body = self.h.replies[self.h.sync(self.member_id, self.generation, assignments, protocol_type="consumer",
                                          protocol_name="range")]
        if body["error_code"] == ErrorCode.NONE:
            self.owned = set(decode_assignment(body["assignment"]).partitions.get("orders", ()))
        return body

    def heartbeat(self) -> ErrorCode:
        return self.h.error(self.h.heartbeat(self.member_id, self.generation))

    def rejoin_if_told(self) -> bool:
        """A heartbeat; on REBALANCE_IN_PROGRESS, join and sync again (as a client does)."""
        error = self.heartbeat()
        if error != ErrorCode.REBALANCE_IN_PROGRESS:
            assert error == ErrorCode.NONE, error
            return False
        assert self.join()["error_code"] == ErrorCode.NONE
        assert self.sync()["error_code"] == ErrorCode.NONE
        return True


class ConsumerClient:
    """A group.protocol=consumer member."""

    def __init__(self, h: Harness, member_id: str, instance: str | None = None) -> None:
        self.h, self.member_id, self.instance = h, member_id, instance
        self.epoch = 0
        self.owned: Assignment = {}

    def heartbeat(self) -> dict[str, Any]:
        joining = self.epoch == 0
        req = HeartbeatRequest("g", self.member_id, self.epoch, self.instance, None, REBALANCE_MS if joining else -1,
                               ("orders",) if joining else None, None, None, dict(self.owned), "c", "/127.0.0.1")
        body = self.h.replies[self.h.run(self.h.shard.consumer_group_heartbeat, req)]
        if body["error_code"] == ErrorCode.NONE:
            self.epoch = body["member_epoch"]
            if body["assignment"] is not None:
                self.owned = {tp["topic_id"]: frozenset(tp["partitions"])
                              for tp in body["assignment"]["topic_partitions"]}
        return body

    def leave(self) -> dict[str, Any]:
        req = HeartbeatRequest("g", self.member_id, -1, None, None, -1, None, None, None, None, "c", "/127.0.0.1")
        self.owned = {}
        return self.h.replies[self.h.run(self.h.shard.consumer_group_heartbeat, req)]

    def partitions(self) -> set[int]:
        return set(self.owned.get(ORDERS.topic_id, frozenset()))


def classic_group_of_two(h: Harness) -> tuple[ClassicClient, ClassicClient]:
    """A Stable classic group: a owns orders 0-2, b 3-5 (a leads and assigns)."""
    a, b = ClassicClient(h, "a"), ClassicClient(h, "b")
    first = h.join(protocols=a.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS, client_id="a")
    a.member_id = h.replies[first]["member_id"]
    second = h.join(protocols=b.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS, client_id="b")
    b.member_id = h.replies[second]["member_id"]
    ta = h.join(a.member_id, protocols=a.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS, client_id="a")
    tb = h.join(b.member_id, protocols=b.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS, client_id="b")
    h.advance(0)
    a.generation = b.generation = h.replies[ta]["generation_id"]
    assert h.replies[tb]["generation_id"] == a.generation
    leader = h.replies[ta]["leader"]
    lead, other = (a, b) if leader == a.member_id else (b, a)
    plan = {lead.member_id: encode_assignment({"orders": [0, 1, 2]}, version=3),
            other.member_id: encode_assignment({"orders": [3, 4, 5]}, version=3)}
    assert lead.sync(plan)["error_code"] == ErrorCode.NONE
    assert other.sync()["error_code"] == ErrorCode.NONE
    assert h.group().is_in(GroupState.STABLE)
    return lead, other


def owners_are_exclusive(*owners: set[int]) -> None:
    flat = [p for o in owners for p in o]
    assert len(flat) == len(set(flat)), f"a partition owned twice: {owners}"


def settle(classic: list[ClassicClient], modern: list[ConsumerClient], rounds: int = 8) -> None:
    for _ in range(rounds):
        for c in modern:
            assert c.heartbeat()["error_code"] == ErrorCode.NONE
            owners_are_exclusive(*(x.owned for x in classic), *(m.partitions() for m in modern))
        for k in classic:
            k.rejoin_if_told()
            owners_are_exclusive(*(x.owned for x in classic), *(m.partitions() for m in modern))


def reloaded(h: Harness) -> GroupShard:
    shard = GroupShard(0, h.config)
    shard.set_topics({"orders": ORDERS})
    for record in h.written:
        shard.replay(record)
    return shard


def test_a_consumer_member_upgrades_a_running_classic_group_and_shares_its_partitions() -> None:
    h = harness()
    a, b = classic_group_of_two(h)
    generation = a.generation
    c = ConsumerClient(h, "c")
    body = c.heartbeat()
    assert body["error_code"] == ErrorCode.NONE
    assert "g" not in h.shard.groups
    group = h.shard.consumer_groups["g"]
    # The classic members are members of the consumer group at their generation, holding what
    # they held; the newcomer bumped the epoch and waits for partitions they still own.
    assert group.members[a.member_id].member_epoch == generation and group.members[a.member_id].uses_classic_protocol
    assert group.group_epoch == generation + 1 and c.partitions() == set()
    assert group.members["c"].state == MemberState.UNRELEASED_PARTITIONS
    # The classic members hear of the rebalance through their heartbeats and rejoin.
    settle([a, b], [c])
    assert len(a.owned) == len(b.owned) == len(c.partitions()) == 2
    assert a.owned | b.owned | c.partitions() == set(range(6))
    assert a.generation == group.group_epoch == c.epoch
    # The records rebuild the consumer group with its classic members.
    loaded = reloaded(h).consumer_groups["g"]
    assert loaded.members[a.member_id].classic == group.members[a.member_id].classic
    assert {m: x.assigned for m, x in loaded.members.items()} == {m: x.assigned for m, x in group.members.items()}


def test_classic_member_requests_to_a_consumer_group() -> None:
    h = harness()
    a, b = classic_group_of_two(h)
    c = ConsumerClient(h, "c")
    c.heartbeat()
    assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    # A SyncGroup with the old generation is refused while it must rejoin.
    assert a.sync()["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.error(h.heartbeat(a.member_id, a.generation + 5)) == ErrorCode.ILLEGAL_GENERATION
    # The consumer-protocol member is no classic member.
    assert h.error(h.heartbeat("c", c.epoch)) == ErrorCode.UNKNOWN_MEMBER_ID
    # A new classic member gets a member id first, then joins at the current epoch.
    d = ClassicClient(h, "d")
    assert d.join()["protocol_name"] == "range" and d.generation == h.shard.consumer_groups["g"].group_epoch
    # Commits of classic members: their generation is their member epoch.
    assert h.commit_errors(h.commit({("orders", 0): 5}, generation=d.generation, member_id=d.member_id,
                                    version=7)) == {("orders", 0): ErrorCode.NONE}
    assert h.commit_errors(h.commit({("orders", 0): 5}, generation=d.generation + 1, member_id=d.member_id,
                                    version=7)) == {("orders", 0): ErrorCode.ILLEGAL_GENERATION}


def test_a_classic_member_that_does_not_rejoin_in_time_is_fenced() -> None:
    h = harness()
    a, b = classic_group_of_two(h)
    c = ConsumerClient(h, "c")
    c.heartbeat()
    assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS  # its rebalance timeout starts
    for _ in range(4):
        h.advance(REBALANCE_MS // 4)
        c.heartbeat()
        b.rejoin_if_told()
    group = h.shard.consumer_groups["g"]
    assert a.member_id not in group.members and b.member_id in group.members


def test_the_last_consumer_member_leaving_downgrades_to_a_classic_group() -> None:
    h = harness()
    a, b = classic_group_of_two(h)
    c = ConsumerClient(h, "c")
    c.heartbeat()
    settle([a, b], [c])
    epoch = h.shard.consumer_groups["g"].group_epoch
    assert c.leave()["error_code"] == ErrorCode.NONE
    assert "g" not in h.shard.consumer_groups
    classic = h.group()
    assert classic.is_in(GroupState.PREPARING_REBALANCE) and classic.generation_id == epoch
    assert set(classic.members) == {a.member_id, b.member_id} and classic.protocol_name == "range"
    # The classic group's record says Stable at the consumer group's epoch, with the targets.
    record = [r for r in h.written if isinstance(r.key, GroupMetadataKey)][-1]
    assert record.value.generation == epoch and len(record.value.members) == 2
    # The members rejoin the classic way: a new generation, the leader assigns everything.
    assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    ta = h.join(a.member_id, protocols=a.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS)
    tb = h.join(b.member_id, protocols=b.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS)
    assert h.replies[ta]["generation_id"] == h.replies[tb]["generation_id"] == epoch + 1
    loaded = reloaded(h)
    assert "g" not in loaded.consumer_groups and set(loaded.groups["g"].members) == {a.member_id, b.member_id}


def test_the_migration_policy() -> None:
    # upgrade only: the group stays a consumer group of classic members when c leaves.
    h = harness(consumer_migration_policy="upgrade")
    a, b = classic_group_of_two(h)
    c = ConsumerClient(h, "c")
    c.heartbeat()
    settle([a, b], [c])
    c.leave()
    assert "g" in h.shard.consumer_groups and len(h.shard.consumer_groups["g"].members) == 2
    settle([a, b], [])
    assert a.owned | b.owned == set(range(6))
    # downgrade only: no upgrade of a running classic group.
    h = harness(consumer_migration_policy="downgrade")
    classic_group_of_two(h)
    body = ConsumerClient(h, "c").heartbeat()
    assert body["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert body["error_message"] == "Cannot upgrade classic group g to consumer group because online upgrade " \
                                    "is disabled."


def test_a_classic_member_leaving_a_consumer_group() -> None:
    h = harness()
    a, b = classic_group_of_two(h)
    c, d = ConsumerClient(h, "c"), ConsumerClient(h, "d")
    c.heartbeat()
    d.heartbeat()
    settle([a, b], [c, d])
    body = h.replies[h.leave(LeavingMember(a.member_id), LeavingMember("nobody"))]
    assert [m["error_code"] for m in body["members"]] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    a.owned = set()
    settle([b], [c, d])
    group = h.shard.consumer_groups["g"]
    assert set(group.members) == {b.member_id, "c", "d"}
    assert b.owned | c.partitions() | d.partitions() == set(range(6))


def test_the_policy_setting() -> None:
    assert GroupConfig.from_broker(BrokerConfig({})).consumer_migration_policy == "bidirectional"
    upgrade = GroupConfig.from_broker(BrokerConfig({"group.consumer.migration.policy": "UPGRADE"}))
    assert (upgrade.upgrade_enabled, upgrade.downgrade_enabled) == (True, False)
    disabled = GroupConfig.from_broker(BrokerConfig({"group.consumer.migration.policy": "disabled"}))
    assert not disabled.classic_members_may_join_consumer_groups
    with pytest.raises(ConfigError, match="group.consumer.migration.policy"):
        GroupConfig.from_broker(BrokerConfig({"group.consumer.migration.policy": "sideways"}))


def test_a_cooperative_classic_member_revokes_before_the_consumer_member_gets_partitions() -> None:
    """A classic member using a cooperative assignor reports what it owns when it rejoins: the
    coordinator keeps it at its epoch (UNREVOKED_PARTITIONS) and gives it only what it keeps, until
    it rejoins without the rest."""
    h = harness()

    def protocols(owned: set[int]) -> tuple[tuple[str, bytes], ...]:
        sub = encode_subscription(["orders"], owned_partitions={"orders": sorted(owned)} if owned else {}, version=3)
        return (("cooperative-sticky", sub),)

    first = h.join(protocols=protocols(set()), session=SESSION_MS, rebalance=REBALANCE_MS)
    member_id = h.replies[first]["member_id"]
    token = h.join(member_id, protocols=protocols(set()), session=SESSION_MS, rebalance=REBALANCE_MS)
    h.advance(0)
    generation = h.replies[token]["generation_id"]
    h.sync(member_id, generation, {member_id: encode_assignment({"orders": list(range(6))}, version=3)})
    owned = set(range(6))
    c = ConsumerClient(h, "c")
    c.heartbeat()
    assert h.error(h.heartbeat(member_id, generation)) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = h.replies[h.join(member_id, protocols=protocols(owned), session=SESSION_MS, rebalance=REBALANCE_MS)]
    # Still owning everything: it stays at its epoch and is given only what it keeps.
    assert rejoin["generation_id"] == generation
    assert h.shard.consumer_groups["g"].members[member_id].state == MemberState.UNREVOKED_PARTITIONS
    sync = h.replies[h.sync(member_id, generation, protocol_type="consumer", protocol_name="cooperative-sticky")]
    kept = set(decode_assignment(sync["assignment"]).partitions["orders"])
    assert len(kept) == 3
    c.heartbeat()
    assert c.partitions() == set()  # nothing is free yet: the classic member has not revoked
    owned = kept  # it revokes the rest and rejoins at once (the cooperative protocol)
    again = h.replies[h.join(member_id, protocols=protocols(owned), session=SESSION_MS, rebalance=REBALANCE_MS)]
    assert again["generation_id"] == c.epoch
    c.heartbeat()
    assert c.partitions() == set(range(6)) - kept


def test_a_classic_static_member_restarting_keeps_its_place_in_a_consumer_group() -> None:
    h = harness()
    a, b = classic_group_of_two(h)
    c = ConsumerClient(h, "c")
    c.heartbeat()
    settle([a, b], [c])
    s = ClassicClient(h, "s")
    body = h.replies[h.join(protocols=s.protocols(), instance="i-s", session=SESSION_MS, rebalance=REBALANCE_MS)]
    s.member_id, s.generation = body["member_id"], body["generation_id"]
    assert s.sync()["error_code"] == ErrorCode.NONE
    settle([a, b, s], [c])
    before = set(s.owned)
    # The same instance restarts: a new member id takes its place and target, without a new epoch.
    epoch = h.shard.consumer_groups["g"].group_epoch
    again = h.replies[h.join(protocols=s.protocols(), instance="i-s", session=SESSION_MS, rebalance=REBALANCE_MS)]
    assert again["member_id"] != s.member_id and h.shard.consumer_groups["g"].group_epoch == epoch
    old_id, s.member_id, s.generation = s.member_id, again["member_id"], again["generation_id"]
    assert s.sync()["error_code"] == ErrorCode.NONE and s.owned == before
    assert h.error(h.heartbeat(old_id, s.generation, instance="i-s")) == ErrorCode.FENCED_INSTANCE_ID


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_the_group() -> None:
    # Kafka's validateOnlineDowngradeWithReplacedMember: the instance of the last consumer-protocol
    # member restarts with the classic protocol; the group goes back to classic at once.
    h = harness()
    a, b = classic_group_of_two(h)
    c = ConsumerClient(h, "c", instance="i-c")
    c.heartbeat()
    settle([a, b], [c])
    epoch = h.shard.consumer_groups["g"].group_epoch
    s = ClassicClient(h, "s")
    token = h.join(protocols=s.protocols(), instance="i-c", session=SESSION_MS, rebalance=REBALANCE_MS)
    assert "g" not in h.shard.consumer_groups
    classic = h.group()
    assert classic.is_in(GroupState.PREPARING_REBALANCE) and classic.generation_id == epoch
    assert len(classic.members) == 3 and "c" not in classic.members
    assert {m.group_instance_id for m in classic.members.values()} == {None, "i-c"}
    # The others rejoin the classic way; everyone is answered in one new generation.
    assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    ta = h.join(a.member_id, protocols=a.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS)
    tb = h.join(b.member_id, protocols=b.protocols(), session=SESSION_MS, rebalance=REBALANCE_MS)
    generations = {h.replies[t]["generation_id"] for t in (token, ta, tb)}
    assert h.replies[token]["error_code"] == ErrorCode.NONE and generations == {epoch + 1}
    assert "g" not in reloaded(h).consumer_groups


def test_a_classic_static_member_replacing_a_lone_consumer_member_makes_a_classic_group() -> None:
    h = harness()
    c = ConsumerClient(h, "c", instance="i-c")
    c.heartbeat()
    assert c.partitions() == set(range(6))
    s = ClassicClient(h, "s")
    token = h.join(protocols=s.protocols(), instance="i-c", session=SESSION_MS, rebalance=REBALANCE_MS)
    h.advance(0)
    body = h.replies[token]
    assert body["error_code"] == ErrorCode.NONE and body["leader"] == body["member_id"]
    assert "g" not in h.shard.consumer_groups and h.group().is_in(GroupState.COMPLETING_REBALANCE)
    # The consumer member's instance now belongs to the classic member: the old one is fenced.
    assert c.heartbeat()["error_code"] in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.GROUP_ID_NOT_FOUND,
                                           ErrorCode.FENCED_MEMBER_EPOCH)


def test_a_classic_static_member_replacing_a_consumer_member_beside_another_keeps_the_consumer_group() -> None:
    h = harness()
    a, b = classic_group_of_two(h)
    c, d = ConsumerClient(h, "c", instance="i-c"), ConsumerClient(h, "d")
    c.heartbeat()
    d.heartbeat()
    settle([a, b], [c, d])
    s = ClassicClient(h, "s")
    body = h.replies[h.join(protocols=s.protocols(), instance="i-c", session=SESSION_MS, rebalance=REBALANCE_MS)]
    assert body["error_code"] == ErrorCode.NONE
    assert "g" in h.shard.consumer_groups and body["member_id"] in h.shard.consumer_groups["g"].members
