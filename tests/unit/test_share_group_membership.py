"""KIP-932 share group membership on the pure coordinator state machine: joining, the simple
assignor sharing partitions between members, epochs, leaving, session expiry, the boundary with
consumer groups, ListGroups/DescribeGroups/DeleteGroups, the records (Kafka's types 10-14) and
loading from them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from riverlog.coordinator import records as coordinator_records
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.consumer_membership import HeartbeatRequest
from riverlog.coordinator.consumer_records import TopicMetadata
from riverlog.coordinator.shard import GroupShard
from riverlog.coordinator.share_group import simple_assign
from riverlog.protocol.errors import ErrorCode
from support.group_harness import Harness

pytestmark = pytest.mark.unit

QUEUE = TopicMetadata(uuid.UUID(int=1), "queue", 2)
OTHER = TopicMetadata(uuid.UUID(int=2), "other", 3)
SESSION_MS = 45_000


class ShareClient:
    def __init__(self, h: Harness, member_id: str, topics: tuple[str, ...] = ("queue",)) -> None:
        self.h, self.member_id, self.topics = h, member_id, topics
        self.epoch = 0
        self.assigned: dict[uuid.UUID, list[int]] = {}

    def heartbeat(self, epoch: int | None = None, group: str = "g") -> dict[str, Any]:
        joining = self.epoch == 0
        body = self.h.reply(self.h.run(self.h.shard.share_group_heartbeat, group, self.member_id,
                                       self.epoch if epoch is None else epoch, None,
                                       self.topics if joining else None, "c", "/127.0.0.1"))
        assert body is not None
        if body["error_code"] == ErrorCode.NONE and epoch is None:
            self.epoch = body["member_epoch"]
            if body["assignment"] is not None:
                self.assigned = {tp["topic_id"]: tp["partitions"] for tp in body["assignment"]["topic_partitions"]}
        return body

    def leave(self) -> dict[str, Any]:
        body = self.h.reply(self.h.run(self.h.shard.share_group_heartbeat, "g", self.member_id, -1, None, None,
                                       "c", "/127.0.0.1"))
        assert body is not None
        return body


def harness(*topics: TopicMetadata) -> Harness:
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=0))
    h.shard.set_topics({t.name: t for t in topics})
    return h


def settle(*clients: ShareClient) -> None:
    for _ in range(3):
        for c in clients:
            c.heartbeat()


def test_simple_assignor_shares_partitions_when_members_outnumber_them() -> None:
    four = simple_assign({m: frozenset({QUEUE.topic_id}) for m in "abcd"}, {QUEUE.topic_id: QUEUE})
    assert four == {"a": {QUEUE.topic_id: frozenset({0})}, "b": {QUEUE.topic_id: frozenset({1})},
                    "c": {QUEUE.topic_id: frozenset({0})}, "d": {QUEUE.topic_id: frozenset({1})}}
    one = simple_assign({"a": frozenset({QUEUE.topic_id, OTHER.topic_id})}, {QUEUE.topic_id: QUEUE,
                                                                              OTHER.topic_id: OTHER})
    assert one == {"a": {QUEUE.topic_id: frozenset({0, 1}), OTHER.topic_id: frozenset({0, 1, 2})}}
    two = simple_assign({"a": frozenset({OTHER.topic_id}), "b": frozenset({OTHER.topic_id})},
                        {OTHER.topic_id: OTHER})
    assert two == {"a": {OTHER.topic_id: frozenset({0, 2})}, "b": {OTHER.topic_id: frozenset({1})}}


def test_a_joining_member_gets_every_partition_and_the_epoch() -> None:
    h = harness(QUEUE)
    a = ShareClient(h, "a")
    body = a.heartbeat()
    assert (body["error_code"], body["member_id"], body["member_epoch"]) == (ErrorCode.NONE, "a", 1)
    assert body["heartbeat_interval_ms"] == 5000
    assert a.assigned == {QUEUE.topic_id: [0, 1]}
    # A steady heartbeat carries no assignment.
    assert a.heartbeat()["assignment"] is None


def test_four_members_on_two_partitions_all_get_one_without_revocation() -> None:
    h = harness(QUEUE)
    clients = [ShareClient(h, m) for m in "abcd"]
    settle(*clients)
    assert all(c.epoch == 4 for c in clients)
    assert sorted(c.assigned[QUEUE.topic_id][0] for c in clients) == [0, 0, 1, 1]
    group = h.shard.share_groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == (4, 4)


def test_leaving_and_session_expiry_bump_the_epoch_and_reassign() -> None:
    h = harness(QUEUE)
    a, b = ShareClient(h, "a"), ShareClient(h, "b")
    settle(a, b)
    assert a.assigned == {QUEUE.topic_id: [0]} and b.assigned == {QUEUE.topic_id: [1]}
    body = b.leave()
    assert (body["error_code"], body["member_epoch"]) == (ErrorCode.NONE, -1)
    a.heartbeat()
    assert a.assigned == {QUEUE.topic_id: [0, 1]} and a.epoch == 3
    c = ShareClient(h, "c")
    c.heartbeat()
    h.advance(SESSION_MS - 1)
    c.heartbeat()
    h.advance(1)  # a did not heartbeat for a whole session: fenced
    assert "a" not in h.shard.share_groups["g"].members
    assert c.heartbeat()["error_code"] == ErrorCode.NONE and c.assigned == {QUEUE.topic_id: [0, 1]}
    assert a.heartbeat()["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_epoch_mismatch_is_fenced_and_unknown_members_refused() -> None:
    h = harness(QUEUE)
    a = ShareClient(h, "a")
    a.heartbeat()
    assert a.heartbeat(epoch=7)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    ShareClient(h, "b").heartbeat()
    assert a.heartbeat(epoch=1)["error_code"] == ErrorCode.NONE  # still at its epoch until it heartbeats
    a.heartbeat()
    assert a.heartbeat(epoch=1)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert ShareClient(h, "x").heartbeat(epoch=3)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert ShareClient(h, "y").heartbeat(epoch=3, group="nope")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_topic_created_later_is_assigned_at_the_next_heartbeat() -> None:
    h = harness()
    a = ShareClient(h, "a")
    a.heartbeat()
    assert a.assigned == {}
    h.shard.set_topics({QUEUE.name: QUEUE})
    a.heartbeat()
    assert a.assigned == {QUEUE.topic_id: [0, 1]} and a.epoch == 2


def test_share_and_consumer_groups_do_not_share_ids() -> None:
    h = harness(QUEUE)
    ShareClient(h, "a").heartbeat()
    req = HeartbeatRequest("g", "m", 0, None, None, 300_000, ("queue",), None, None, {}, "c", "/h")
    body = h.reply(h.run(h.shard.consumer_group_heartbeat, req))
    assert body is not None and body["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    req2 = HeartbeatRequest("cg", "m", 0, None, None, 300_000, ("queue",), None, None, {}, "c", "/h")
    h.run(h.shard.consumer_group_heartbeat, req2)
    body = ShareClient(h, "s").heartbeat(group="cg")
    assert (body["error_code"], body["error_message"]) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group cg is not a share group.")


def test_describe_list_and_delete() -> None:
    h = harness(QUEUE)
    a = ShareClient(h, "a")
    a.heartbeat()
    [described] = h.shard.describe_share_groups(["g"], -(2**31))
    assert (described["group_state"], described["group_epoch"], described["assignor_name"]) == ("Stable", 1, "simple")
    assert described["members"][0]["assignment"]["topic_partitions"] == [
        {"topic_id": QUEUE.topic_id, "topic_name": "queue", "partitions": [0, 1]}]
    assert h.shard.list_groups([], ["share"]) == [
        {"group_id": "g", "protocol_type": "share", "group_state": "Stable", "group_type": "share"}]
    assert h.shard.list_groups([], ["consumer"]) == []
    [missing] = h.shard.describe_share_groups(["nope"], 0)
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.reply(h.run(h.shard.delete_groups, ["g"])) == {
        "results": [{"group_id": "g", "error_code": ErrorCode.NON_EMPTY_GROUP}]}
    a.leave()
    assert h.shard.list_groups(["empty"], ["share"])[0]["group_state"] == "Empty"
    deleted = h.reply(h.run(h.shard.delete_groups, ["g"]))
    assert deleted == {"results": [{"group_id": "g", "error_code": ErrorCode.NONE}]}
    assert "g" not in h.shard.share_groups


def test_records_round_trip_through_the_log_format_and_loading_rebuilds_the_group() -> None:
    h = harness(QUEUE)
    clients = [ShareClient(h, m) for m in "abc"]
    settle(*clients)
    clients[1].leave()
    types = set()
    loaded = GroupShard(0, h.config)
    for record in h.written:
        key, value = coordinator_records.encode(record)
        decoded = coordinator_records.decode(key, value)
        assert decoded == record
        types.add(int.from_bytes(key[:2], "big"))
        loaded.replay(decoded)
    assert types == {10, 11, 12, 13, 14, 15}
    before, after = h.shard.share_groups["g"], loaded.share_groups["g"]
    assert (after.group_epoch, after.assignment_epoch, after.target) == (before.group_epoch, before.assignment_epoch,
                                                                         before.target)
    assert after.members == before.members
    assert after.state_topics == before.state_topics == {QUEUE.topic_id: ("queue", 2)}


def test_a_coordinator_move_keeps_the_epoch_when_the_topics_did_not_change() -> None:
    # KIP-1101: the epoch record carries a hash of the subscribed topics' metadata, so the new
    # coordinator sees nothing changed and the members keep their epoch and partitions.
    h = harness(QUEUE)
    a, b = ShareClient(h, "a"), ShareClient(h, "b")
    settle(a, b)
    epoch, assigned = a.epoch, (a.assigned, b.assigned)
    assert h.shard.share_groups["g"].metadata_hash != 0
    moved = h.reloaded({QUEUE.name: QUEUE})
    a.h = b.h = moved
    settle(a, b)
    assert (a.epoch, b.epoch) == (epoch, epoch)
    assert (a.assigned, b.assigned) == assigned
    assert moved.shard.share_groups["g"].group_epoch == epoch


def test_partitions_added_while_the_group_moved_bump_the_epoch_at_the_next_heartbeat() -> None:
    h = harness(QUEUE)
    a = ShareClient(h, "a")
    settle(a)
    epoch = a.epoch
    grown = TopicMetadata(QUEUE.topic_id, QUEUE.name, 4)
    moved = h.reloaded({grown.name: grown})
    a.h = moved
    settle(a)
    assert a.epoch == epoch + 1
    assert a.assigned == {QUEUE.topic_id: [0, 1, 2, 3]}
