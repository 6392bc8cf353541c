"""The KIP-848 consumer group protocol on the pure coordinator state machine: epochs, revocation
before assignment, partitions owned by nobody while they move, session and rebalance timeouts,
static members, regex subscriptions, the classic/consumer boundary, and loading from the records.

Members are driven like a client does: they heartbeat with the epoch they were given and report
the partitions they own (having revoked what the last answer took away)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.consumer_group import ConsumerGroupState, MemberState
from riverlog.coordinator.consumer_membership import HeartbeatRequest
from riverlog.coordinator.consumer_records import Assignment, TopicMetadata
from riverlog.coordinator.membership import JoinRequest
from riverlog.coordinator.metadata_hash import topics_hash
from riverlog.coordinator.shard import GroupShard
from riverlog.protocol.errors import ErrorCode
from support.group_harness import Harness, subscription

pytestmark = pytest.mark.unit

ORDERS = TopicMetadata(uuid.UUID(int=1), "orders", 6)
AUDIT = TopicMetadata(uuid.UUID(int=2), "audit", 2)
SESSION_MS = 45_000


class Client:
    """One consumer as the protocol sees it: its member id, epoch and owned partitions."""

    def __init__(self, h: Harness, member_id: str, topics: tuple[str, ...] = ("orders",),
                 regex: str | None = None, instance_id: str | None = None,
                 may_describe: Callable[[str], bool] | None = None) -> None:
        self.h, self.member_id, self.topics, self.regex, self.instance_id = h, member_id, topics, regex, instance_id
        self.may_describe = may_describe
        self.epoch = 0
        self.owned: Assignment = {}

    def heartbeat(self, full: bool = False, epoch: int | None = None) -> dict[str, Any]:
        joining = self.epoch == 0
        req = HeartbeatRequest(
            group_id="g", member_id=self.member_id, member_epoch=self.epoch if epoch is None else epoch,
            instance_id=self.instance_id, rack_id=None, rebalance_timeout_ms=300_000 if joining or full else -1,
            subscribed_topic_names=(None if self.regex else self.topics) if joining or full else None,
            subscribed_topic_regex=self.regex if joining else None, server_assignor=None,
            owned=dict(self.owned), client_id="c", client_host="/127.0.0.1", may_describe=self.may_describe)
        body = self.h.reply(self.h.run(self.h.shard.consumer_group_heartbeat, req))
        assert body is not None
        if body["error_code"] == ErrorCode.NONE and epoch is None:
            self.epoch = body["member_epoch"]
            if body["assignment"] is not None:
                # Revoke what was taken away, take what was given (a client does both at once
                # here: the coordinator only ever gives partitions nobody owns).
                self.owned = {tp["topic_id"]: frozenset(tp["partitions"])
                              for tp in body["assignment"]["topic_partitions"]}
        return body

    def leave(self, epoch: int = -1) -> dict[str, Any]:
        req = HeartbeatRequest("g", self.member_id, epoch, self.instance_id, None, -1, None, None, None, None,
                               "c", "/127.0.0.1")
        body = self.h.reply(self.h.run(self.h.shard.consumer_group_heartbeat, req))
        assert body is not None
        self.owned = {}
        return body


def harness(*topics: TopicMetadata, **config: Any) -> Harness:
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=0, **config))
    h.shard.set_topics({t.name: t for t in topics})
    return h


def owned_count(*clients: Client) -> int:
    return sum(len(p) for c in clients for p in c.owned.values())


def assert_no_double_ownership(*clients: Client) -> None:
    seen: set[tuple[uuid.UUID, int]] = set()
    for c in clients:
        for topic_id, parts in c.owned.items():
            for p in parts:
                assert (topic_id, p) not in seen, f"{topic_id}-{p} owned twice"
                seen.add((topic_id, p))


def settle(*clients: Client, rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in clients:
            c.heartbeat()
            assert_no_double_ownership(*clients)


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    h = harness(ORDERS)
    a = Client(h, "a")
    body = a.heartbeat()
    assert body["member_epoch"] == 1 and body["member_id"] == "a"
    assert body["heartbeat_interval_ms"] == 5000
    assert a.owned == {ORDERS.topic_id: frozenset(range(6))}
    group = h.shard.consumer_groups["g"]
    assert (group.group_epoch, group.assignment_epoch, group.state) == (1, 1, ConsumerGroupState.STABLE)
    # A heartbeat with nothing new answers no assignment (null: unchanged).
    assert a.heartbeat()["assignment"] is None


def test_second_member_waits_for_the_revocation() -> None:
    h = harness(ORDERS)
    a, b = Client(h, "a"), Client(h, "b")
    a.heartbeat()
    first = b.heartbeat()
    # b is at the new epoch but gets nothing yet: a still owns every partition.
    assert first["member_epoch"] == 2 and b.owned == {}
    assert h.shard.consumer_groups["g"].members["b"].state == MemberState.UNRELEASED_PARTITIONS
    revoke = a.heartbeat()
    # a keeps its epoch and is told to keep only its share.
    assert revoke["member_epoch"] == 1 and owned_count(a) == 3
    assert h.shard.consumer_groups["g"].members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert a.heartbeat()["member_epoch"] == 2  # it reported the revocation done
    b.heartbeat()
    assert owned_count(b) == 3 and b.epoch == 2
    assert_no_double_ownership(a, b)
    assert h.shard.consumer_groups["g"].state == ConsumerGroupState.STABLE


def test_members_join_and_leave_one_by_one_without_double_ownership() -> None:
    h = harness(ORDERS)
    clients = [Client(h, f"m{i}") for i in range(4)]
    active: list[Client] = []
    for c in clients:
        active.append(c)
        settle(*active)
        assert owned_count(*active) == 6
        assert max(owned_count(x) for x in active) - min(owned_count(x) for x in active) <= 1
    for c in clients[:3]:
        assert c.leave()["member_epoch"] == -1
        active.remove(c)
        settle(*active)
        assert owned_count(*active) == 6
    assert clients[3].owned == {ORDERS.topic_id: frozenset(range(6))}


def test_session_expiry_fences_and_hands_partitions_over() -> None:
    h = harness(ORDERS)
    a, b = Client(h, "a"), Client(h, "b")
    settle(a, b)
    h.now += SESSION_MS // 2
    a.heartbeat()
    h.now += SESSION_MS // 2 + 1
    h._apply(h.shard.tick(h.now))  # b's session ran out
    assert "b" not in h.shard.consumer_groups["g"].members
    settle(a)
    assert owned_count(a) == 6
    assert b.heartbeat()["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h = harness(ORDERS)
    a, b = Client(h, "a"), Client(h, "b")
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()  # asked to revoke; it never confirms (owned not sent from now on)
    for _ in range(10):
        h.now += 30_000
        h._apply(h.shard.tick(h.now))
        req = HeartbeatRequest("g", "a", a.epoch, None, None, -1, None, None, None, None, "c", "/h")
        h.run(h.shard.consumer_group_heartbeat, req)
        b.heartbeat()
    assert "a" not in h.shard.consumer_groups["g"].members
    settle(b)
    assert owned_count(b) == 6


def test_epoch_checks() -> None:
    h = harness(ORDERS)
    a = Client(h, "a")
    a.heartbeat()
    assert a.heartbeat(epoch=5)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    b, c = Client(h, "b"), Client(h, "c")
    settle(a, b)
    settle(a, b, c)
    assert a.epoch == 3
    # The previous epoch with a subset of the assignment is accepted (a lost answer) ...
    previous = h.shard.consumer_groups["g"].members["a"].previous_member_epoch
    assert a.heartbeat(epoch=previous)["error_code"] == ErrorCode.NONE
    # ... an older one is not.
    assert a.heartbeat(epoch=previous - 1)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert Client(h, "x").heartbeat(epoch=3)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_unknown_group_and_classic_boundary_without_migration() -> None:
    h = harness(ORDERS, consumer_migration_policy="disabled")
    assert Client(h, "a").heartbeat(epoch=1)["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    # With group.consumer.migration.policy=disabled a non-empty classic group is not taken over ...
    join = JoinRequest("g", "", None, "c", "/h", 10_000, 10_000, "consumer", (("range", subscription("orders")),), 3)
    h.run(h.shard.join_group, join)
    body = Client(h, "a").heartbeat()
    assert (body["error_code"], body["error_message"]) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group g to consumer group because online upgrade "
                                      "is disabled.")
    # ... and classic members cannot join a non-empty consumer group.
    h2 = harness(ORDERS, consumer_migration_policy="disabled")
    Client(h2, "a").heartbeat()
    reply = h2.reply(h2.run(h2.shard.join_group, join))
    assert reply is not None and reply["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_regex_subscription_picks_up_a_topic_created_later() -> None:
    h = harness(ORDERS)
    a = Client(h, "a", regex="orders|au.*")
    a.heartbeat()
    assert a.owned == {ORDERS.topic_id: frozenset(range(6))}
    h.shard.set_topics({t.name: t for t in (ORDERS, AUDIT)})
    body = a.heartbeat()
    assert body["member_epoch"] == 2
    assert a.owned == {ORDERS.topic_id: frozenset(range(6)), AUDIT.topic_id: frozenset(range(2))}


def test_static_member_leaves_and_comes_back_with_its_partitions() -> None:
    h = harness(ORDERS)
    a, b = Client(h, "a", instance_id="i-a"), Client(h, "b")
    settle(a, b)
    kept = dict(a.owned)
    assert a.leave(epoch=-2)["member_epoch"] == -2
    settle(b)
    assert owned_count(b) == 3  # a's partitions wait for it
    back = Client(h, "a2", instance_id="i-a")
    body = back.heartbeat()
    assert body["error_code"] == ErrorCode.NONE and back.owned == kept and back.epoch == a.epoch
    # The instance id is held: a second process with it is refused.
    assert Client(h, "a3", instance_id="i-a").heartbeat()["error_code"] == ErrorCode.UNRELEASED_INSTANCE_ID


def test_loading_the_records_rebuilds_the_group() -> None:
    h = harness(ORDERS)
    a, b = Client(h, "a"), Client(h, "b", instance_id="i-b")
    settle(a, b)
    a.heartbeat()
    loaded = GroupShard(0, h.config)
    for record in h.written:
        loaded.replay(record)
    before, after = h.shard.consumer_groups["g"], loaded.consumer_groups["g"]
    assert (after.group_epoch, after.assignment_epoch, after.target) == (before.group_epoch, before.assignment_epoch,
                                                                         before.target)
    assert after.members == before.members and after.owners == before.owners
    assert after.subscription_metadata == before.subscription_metadata
    # The epoch record carries the hash of the metadata it was bumped for (KIP-1101).
    assert after.metadata_hash == before.metadata_hash == topics_hash([ORDERS]) != 0


def test_describe_and_list() -> None:
    h = harness(ORDERS)
    a = Client(h, "a")
    a.heartbeat()
    [described] = h.shard.describe_consumer_groups(["g"], -(2**31))
    assert (described["group_state"], described["group_epoch"], described["assignor_name"]) == ("Stable", 1, "uniform")
    member = described["members"][0]
    assert member["assignment"]["topic_partitions"][0]["topic_name"] == "orders"
    [missing] = h.shard.describe_consumer_groups(["nope"], 0)
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.shard.list_groups([], ["consumer"]) == [
        {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable", "group_type": "consumer"}]
    assert h.shard.list_groups([], ["classic"]) == []


def test_a_consumer_groups_offsets_make_no_classic_group_and_go_with_it() -> None:
    """An id names one group: a consumer group's commits must not also create a "simple"
    classic group holding them (listed twice, surviving the group's deletion); loading a log
    where offsets of the earlier simple group come first gives the consumer group alone."""
    h = harness(ORDERS)
    h.commit({("orders", 0): 3})  # offsets before the group existed: a simple classic group
    a = Client(h, "a")
    a.heartbeat()
    assert "g" not in h.shard.groups  # the consumer group replaced it
    h.commit({("orders", 1): 5}, generation=a.epoch, member_id="a")
    assert "g" not in h.shard.groups
    assert [g["group_type"] for g in h.shard.list_groups([], [])] == ["consumer"]
    loaded = GroupShard(0, h.config)
    for record in h.written:
        loaded.replay(record)
    assert "g" in loaded.consumer_groups and "g" not in loaded.groups
    a.leave()
    reply = h.reply(h.run(h.shard.delete_groups, ["g"]))
    assert reply is not None and reply["results"] == [{"group_id": "g", "error_code": ErrorCode.NONE}]
    assert h.shard.list_groups([], []) == [] and h.fetch(None) == {}


def test_offsets_of_a_consumer_group_fetch_commit_in_transactions_and_delete() -> None:
    """OffsetFetch, TxnOffsetCommit and OffsetDelete know consumer groups (Kafka's
    ConsumerGroup.validateOffsetCommit / validateOffsetDelete)."""
    h = harness(ORDERS, AUDIT)
    a = Client(h, "a")
    a.heartbeat()
    h.commit({("orders", 0): 4, ("audit", 1): 2}, generation=a.epoch, member_id="a")
    assert h.fetch(None) == {("orders", 0): 4, ("audit", 1): 2}
    # Transactional commits: the member and its epoch are checked; none named is accepted.
    assert set(h.commit_errors(h.txn_commit({("orders", 1): 1}, generation=a.epoch, member_id="a")).values()) \
        == {ErrorCode.NONE}
    assert set(h.commit_errors(h.txn_commit({("orders", 1): 1}, generation=a.epoch + 5, member_id="a")).values()) \
        == {ErrorCode.STALE_MEMBER_EPOCH}
    assert set(h.commit_errors(h.txn_commit({("orders", 1): 1}, generation=a.epoch, member_id="zz")).values()) \
        == {ErrorCode.UNKNOWN_MEMBER_ID}
    assert set(h.commit_errors(h.txn_commit({("orders", 1): 1}, producer_id=8)).values()) == {ErrorCode.NONE}
    # Offsets of a topic the group subscribes to stay; others may go while it runs.
    reply = h.reply(h.run(h.shard.delete_offsets, "g", [("orders", [0]), ("audit", [1])]))
    assert reply is not None and reply["error_code"] == ErrorCode.NONE
    assert dict(reply["topics"]) == {"orders": [(0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)],
                                     "audit": [(1, ErrorCode.NONE)]}
    assert h.fetch(None) == {("orders", 0): 4}


def test_group_metrics_show_the_type_the_epoch_and_members_still_reconciling() -> None:
    from prometheus_client import generate_latest
    from riverlog.metrics import Metrics

    h = harness(ORDERS)
    h.join_new(group="classic-g")  # a classic group beside it
    a, b = Client(h, "a"), Client(h, "b")
    a.heartbeat()
    b.heartbeat()  # joins: a must give up partitions first, so a is behind the target's epoch
    summaries = {s[0]: s for s in h.shard.group_summaries()}
    assert summaries["g"] == ("g", "consumer", "Reconciling", 2, 2, 1)
    assert summaries["classic-g"][1:3] == ("classic", "PreparingRebalance") and summaries["classic-g"][4:] == (None, 0)
    metrics = Metrics()
    metrics.track_consumer_groups(lambda: [], h.shard.group_summaries)
    text = generate_latest(metrics.registry).decode()
    assert 'riverlog_consumer_group_members{group="g",type="consumer"} 2.0' in text
    assert 'riverlog_consumer_group_state{group="g",state="Reconciling",type="consumer"} 1.0' in text
    assert 'riverlog_consumer_group_epoch{group="g"} 2.0' in text
    assert 'riverlog_consumer_group_members_reconciling{group="g"} 1.0' in text
    assert 'riverlog_consumer_group_epoch{group="classic-g"}' not in text
    settle(a, b)
    assert {s[0]: s for s in h.shard.group_summaries()}["g"] == ("g", "consumer", "Stable", 2, 2, 0)


def test_offsets_of_unsubscribed_topics_expire_and_an_empty_consumer_group_goes_with_its_last() -> None:
    """Kafka's expiry for consumer groups: an offset of a topic no member subscribes to expires
    its retention after the commit, even while the group runs; once the group is empty every
    offset qualifies, and the group is removed with the last one."""
    h = harness(ORDERS, AUDIT, offsets_retention_ms=10_000, offsets_retention_check_interval_ms=1_000)
    a = Client(h, "a")
    a.heartbeat()
    h.commit({("orders", 0): 4, ("audit", 1): 2}, generation=a.epoch, member_id="a")
    h.advance(9_000)
    a.heartbeat()
    assert h.fetch(None) == {("orders", 0): 4, ("audit", 1): 2}
    h.advance(1_000)
    a.heartbeat()
    assert h.fetch(None) == {("orders", 0): 4}  # audit is not subscribed: expired; orders is
    a.leave()
    h.advance(1_000)
    assert h.fetch(None) == {} and "g" not in h.shard.consumer_groups
    assert h.shard.list_groups([], []) == []
    loaded = GroupShard(0, h.config)
    for record in h.written:
        loaded.replay(record)
    assert "g" not in loaded.consumer_groups and "g" not in loaded.groups


def test_kip1251_a_commit_with_an_older_epoch_covers_partitions_held_since_then() -> None:
    """Kafka 4.3 (KIP-1251): each partition of a member's assignment remembers the epoch it was
    assigned at; a commit at the member's epoch is accepted, a newer one refused, an older one
    accepted only for partitions the member has held since that epoch or before."""
    h = harness(ORDERS)
    a, b = Client(h, "a"), Client(h, "b")
    a.heartbeat()
    assert a.epoch == 1
    settle(a, b)
    group = h.shard.consumer_groups["g"]
    member_a, member_b = group.members["a"], group.members["b"]
    assert member_a.member_epoch == member_b.member_epoch == a.epoch == 2
    kept = sorted(a.owned[ORDERS.topic_id])
    given = sorted(b.owned[ORDERS.topic_id])
    assert {member_a.assignment_epochs[(ORDERS.topic_id, p)] for p in kept} == {1}  # held since epoch 1
    assert {member_b.assignment_epochs[(ORDERS.topic_id, p)] for p in given} == {2}

    def commit(client: Client, epoch: int, partitions: list[int]) -> set[ErrorCode]:
        token = h.commit({("orders", p): 1 for p in partitions}, generation=epoch, member_id=client.member_id)
        return set(h.commit_errors(token).values())

    assert commit(a, 2, kept) == {ErrorCode.NONE}
    assert commit(a, 1, kept) == {ErrorCode.NONE}  # older, but held since epoch 1
    assert commit(a, 1, [given[0]]) == {ErrorCode.STALE_MEMBER_EPOCH}  # moved to b since
    assert commit(a, 3, kept) == {ErrorCode.STALE_MEMBER_EPOCH}  # newer than the member's
    assert commit(b, 1, given) == {ErrorCode.STALE_MEMBER_EPOCH}  # b got them at epoch 2
    assert commit(b, 2, given) == {ErrorCode.NONE}
    # The epochs are in the records (Kafka's tagged AssignmentEpochs) and come back on loading.
    loaded = GroupShard(0, h.config)
    for record in h.written:
        loaded.replay(record)
    assert loaded.consumer_groups["g"].members["a"].assignment_epochs == member_a.assignment_epochs


def test_a_regex_takes_only_topics_its_member_may_describe() -> None:
    # KAFKA-18813: the member's principal may describe orders but not audit; both match.
    h = harness(ORDERS, AUDIT)
    allowed = {"orders"}
    a = Client(h, "a", regex="orders|audit", may_describe=lambda name: name in allowed)
    a.heartbeat()
    a.heartbeat()
    group = h.shard.consumer_groups["g"]
    assert set(group.subscription_metadata) == {"orders"}
    assert set(a.owned) == {ORDERS.topic_id}
    # Granted DESCRIBE on audit: the next heartbeat picks it up.
    allowed.add("audit")
    a.heartbeat()
    a.heartbeat()
    assert set(group.subscription_metadata) == {"orders", "audit"}
    assert set(a.owned) == {ORDERS.topic_id, AUDIT.topic_id}
    # Without an authorizer (no predicate) a regex is not filtered.
    b = Client(h, "b", regex="audit")
    b.heartbeat()
    assert "audit" in group.subscription_metadata
    a.leave()
    assert ("g", "a") not in h.shard.regex_visible
