"""Offsets and group administration of the pure state machine: OffsetCommit/Fetch/Delete,
DeleteGroups, DescribeGroups, ListGroups, offset expiry, and rebuilding from the log."""

from __future__ import annotations

import pytest
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.group import GroupState
from riverlog.coordinator.membership import LeavingMember
from riverlog.coordinator.records import GroupMetadataKey, OffsetCommitKey
from riverlog.coordinator.shard import GROUP_AUTHORIZED_OPERATIONS
from riverlog.protocol.errors import ErrorCode
from support.group_harness import Harness, subscription

pytestmark = pytest.mark.unit

E = ErrorCode
DAY = 24 * 3_600_000


# OffsetCommit -----------------------------------------------------------------------------


def test_standalone_commit_creates_a_simple_group() -> None:
    h = Harness()
    token = h.commit({("t", 0): 5, ("t", 1): 7, ("u", 0): 1})
    assert set(h.commit_errors(token).values()) == {E.NONE}
    assert h.fetch({"t": [0, 1, 2]}) == {("t", 0): 5, ("t", 1): 7, ("t", 2): -1}
    group = h.group()
    assert group.state is GroupState.EMPTY and group.protocol_type is None
    assert [r.key for r in h.written] == [OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 1),
                                          OffsetCommitKey("g", "u", 0)]


def test_offsets_are_visible_only_once_durable() -> None:
    h = Harness(hold_writes=True)
    token = h.commit({("t", 0): 5})
    assert h.reply(token) is None
    assert h.fetch({"t": [0]}) == {("t", 0): -1}
    h.release_writes()
    assert h.commit_errors(token) == {("t", 0): E.NONE}
    assert h.fetch({"t": [0]}) == {("t", 0): 5}


def test_failed_commit_write_reports_the_coordinator_error() -> None:
    h = Harness(hold_writes=True)
    token = h.commit({("t", 0): 5})
    h.release_writes(E.NOT_COORDINATOR)
    assert h.commit_errors(token) == {("t", 0): E.NOT_COORDINATOR}
    assert h.fetch({"t": [0]}) == {("t", 0): -1}


def test_commit_by_members_checks_generation_and_member() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    ok = h.commit({("t", 0): 3}, generation=1, member_id=follower)
    assert h.commit_errors(ok) == {("t", 0): E.NONE}
    assert h.commit_errors(h.commit({("t", 0): 3}, generation=0, member_id=follower)) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit_errors(h.commit({("t", 0): 3}, generation=1, member_id="stranger")) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    # Generation -1 without a member id on a group in use: not a standalone commit.
    assert h.commit_errors(h.commit({("t", 0): 3})) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_commit_to_unknown_group_with_a_generation() -> None:
    h = Harness()
    assert h.commit_errors(h.commit({("t", 0): 1}, generation=3, member_id="m", version=8)) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit_errors(h.commit({("t", 0): 1}, generation=3, member_id="m", version=9)) == \
        {("t", 0): E.GROUP_ID_NOT_FOUND}


def test_commit_during_completing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    token = h.join_new()
    h.advance(0)
    member = h.replies[token]["member_id"]
    assert h.commit_errors(h.commit({("t", 0): 1}, generation=1, member_id=member)) == \
        {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_commit_by_fenced_static_member() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=["i-1", "i-2"])
    assert h.commit_errors(h.commit({("t", 0): 1}, generation=1, member_id=follower, instance="i-1")) == \
        {("t", 0): E.FENCED_INSTANCE_ID}


def test_oversized_metadata_is_refused_per_partition() -> None:
    h = Harness(GroupConfig(offset_metadata_max_bytes=10))
    token = h.commit({("t", 0): 1}, metadata="x" * 11)
    assert h.commit_errors(token) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert h.written == []
    token = h.commit({("t", 0): 1}, metadata="x" * 10)
    assert h.commit_errors(token) == {("t", 0): E.NONE}


def test_commit_keeps_a_member_session_alive() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, session=6000)
    for _ in range(4):
        h.advance(4000)
        h.heartbeat(leader, 1)
        assert h.commit_errors(h.commit({("t", 0): 1}, generation=1, member_id=follower)) == {("t", 0): E.NONE}
    assert follower in h.group().members


# OffsetFetch ------------------------------------------------------------------------------


def test_fetch_all_and_unknown_group() -> None:
    h = Harness()
    h.commit({("b", 1): 4, ("a", 0): 2})
    assert h.fetch(None) == {("a", 0): 2, ("b", 1): 4}
    assert h.fetch(None, group="other") == {}
    assert h.fetch({"a": [0]}, group="other") == {("a", 0): -1}


def test_two_groups_keep_independent_offsets() -> None:
    h = Harness()
    h.commit({("t", 0): 10}, group="g1")
    h.commit({("t", 0): 20}, group="g2")
    assert h.fetch({"t": [0]}, group="g1") == {("t", 0): 10}
    assert h.fetch({"t": [0]}, group="g2") == {("t", 0): 20}


# OffsetDelete -----------------------------------------------------------------------------


def _delete_offsets(h: Harness, topics: dict[str, list[int]], group: str = "g") -> dict:
    token = h.run(h.shard.delete_offsets, group, list(topics.items()))
    return h.replies[token]


def test_offset_delete() -> None:
    h = Harness()
    assert _delete_offsets(h, {"t": [0]})["error_code"] == E.GROUP_ID_NOT_FOUND
    h.commit({("t", 0): 1, ("t", 1): 2})
    body = _delete_offsets(h, {"t": [0]})
    assert body == {"error_code": E.NONE, "topics": [("t", [(0, E.NONE)])]}
    assert h.fetch({"t": [0, 1]}) == {("t", 0): -1, ("t", 1): 2}
    assert h.written[-1].key == OffsetCommitKey("g", "t", 0) and h.written[-1].value is None


def test_offset_delete_refuses_topics_a_consumer_group_subscribes_to() -> None:
    h = Harness()
    h.stable_group(1, protocols=(("range", subscription("orders")),))
    body = _delete_offsets(h, {"orders": [0], "other": [0]})
    assert body["error_code"] == E.NONE
    assert body["topics"] == [("orders", [(0, E.GROUP_SUBSCRIBED_TO_TOPIC)]), ("other", [(0, E.NONE)])]


def test_offset_delete_on_a_non_consumer_group_in_use_is_non_empty_group() -> None:
    h = Harness()
    h.stable_group(1, protocol_type="connect")
    assert _delete_offsets(h, {"t": [0]})["error_code"] == E.NON_EMPTY_GROUP


# DeleteGroups -----------------------------------------------------------------------------


def test_delete_groups() -> None:
    h = Harness()
    h.stable_group(1, group="busy")
    h.commit({("t", 0): 1}, group="idle")
    token = h.run(h.shard.delete_groups, ["busy", "idle", "nope"])
    assert h.replies[token]["results"] == [
        {"group_id": "busy", "error_code": E.NON_EMPTY_GROUP},
        {"group_id": "idle", "error_code": E.NONE},
        {"group_id": "nope", "error_code": E.GROUP_ID_NOT_FOUND},
    ]
    assert "idle" not in h.shard.groups
    assert h.fetch({"t": [0]}, group="idle") == {("t", 0): -1}
    tombstones = [r.key for r in h.written if r.value is None]
    assert tombstones == [OffsetCommitKey("idle", "t", 0), GroupMetadataKey("idle")]


# DescribeGroups / ListGroups --------------------------------------------------------------


def test_describe_groups() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=["i-1", None])
    (described,) = h.shard.describe_groups(["g"], 5, True)
    assert described["group_state"] == "Stable" and described["protocol_type"] == "consumer"
    assert described["protocol_data"] == "range"
    assert described["authorized_operations"] == GROUP_AUTHORIZED_OPERATIONS
    members = {m["member_id"]: m for m in described["members"]}
    assert members[leader]["group_instance_id"] == "i-1"
    assert members[follower]["member_metadata"] == b"meta"
    assert members[follower]["member_assignment"] == follower.encode()
    assert members[follower]["client_host"] == "/127.0.0.1" and members[follower]["client_id"] == "client"
    h.join(leader, instance="i-1")  # rebalance: no protocol or metadata while not Stable
    (described,) = h.shard.describe_groups(["g"], 5, False)
    assert described["group_state"] == "PreparingRebalance" and described["protocol_data"] == ""
    assert all(m["member_metadata"] == b"" for m in described["members"])
    assert described["authorized_operations"] == -(1 << 31)


def test_describe_unknown_group() -> None:
    h = Harness()
    (old,) = h.shard.describe_groups(["nope"], 5, False)
    assert old["error_code"] == E.NONE and old["group_state"] == "Dead"
    (new,) = h.shard.describe_groups(["nope"], 6, False)
    assert new["error_code"] == E.GROUP_ID_NOT_FOUND and new["group_state"] == "Dead"


def test_list_groups_with_filters() -> None:
    h = Harness()
    h.stable_group(1, group="stable")
    h.commit({("t", 0): 1}, group="simple")
    everything = {g["group_id"]: g for g in h.shard.list_groups([], [])}
    assert everything["stable"] == {"group_id": "stable", "protocol_type": "consumer", "group_state": "Stable",
                                    "group_type": "classic"}
    assert everything["simple"]["protocol_type"] == "" and everything["simple"]["group_state"] == "Empty"
    assert [g["group_id"] for g in h.shard.list_groups(["STABLE"], [])] == ["stable"]
    assert [g["group_id"] for g in h.shard.list_groups(["empty"], ["Classic"])] == ["simple"]
    assert h.shard.list_groups([], ["consumer"]) == []


# Expiry -----------------------------------------------------------------------------------


def test_offsets_of_an_empty_group_expire_after_retention_then_the_group_goes() -> None:
    config = GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=7 * DAY,
                         offsets_retention_check_interval_ms=600_000)
    h = Harness(config)
    (member,) = h.stable_group(1, protocols=(("range", subscription("t")),))
    h.commit({("t", 0): 9}, generation=1, member_id=member)
    h.advance(8 * DAY)  # still Stable and subscribed: kept
    h.heartbeat(member, 1)
    assert h.fetch({"t": [0]}) == {("t", 0): 9}
    assert member not in h.group().members  # (its session ran out meanwhile)
    assert h.group().state is GroupState.EMPTY
    h.advance(7 * DAY - 600_000)
    assert h.fetch({"t": [0]}) == {("t", 0): 9}
    h.advance(600_000)
    assert h.fetch({"t": [0]}) == {("t", 0): -1}
    assert "g" not in h.shard.groups
    tombstones = [r.key for r in h.written if r.value is None]
    assert tombstones == [OffsetCommitKey("g", "t", 0), GroupMetadataKey("g")]


def test_simple_group_offsets_expire_by_commit_time() -> None:
    config = GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=3_600_000)
    h = Harness(config)
    h.commit({("t", 0): 1})
    h.advance(12 * 3_600_000)
    h.commit({("t", 1): 1})
    h.advance(12 * 3_600_000)
    assert h.fetch({"t": [0, 1]}) == {("t", 0): -1, ("t", 1): 1}
    h.advance(12 * 3_600_000)
    assert h.fetch({"t": [0, 1]}) == {("t", 0): -1, ("t", 1): -1}
    assert "g" not in h.shard.groups


def test_commit_with_retention_time_expires_at_its_own_time() -> None:
    h = Harness(GroupConfig(offsets_retention_check_interval_ms=1000))
    h.commit({("t", 0): 1}, retention=5000, version=2)
    assert h.written[-1].value.expire_timestamp == h.now + 5000
    h.advance(4000)
    assert h.fetch({"t": [0]}) == {("t", 0): 1}
    h.advance(1000)
    assert h.fetch({"t": [0]}) == {("t", 0): -1}


def test_offsets_of_deleted_topics_are_removed() -> None:
    h = Harness()
    h.commit({("gone", 0): 1, ("kept", 0): 2})
    h._apply(h.shard.run(h.now, h.shard.tombstone_deleted_topics, {"gone"}))
    assert h.fetch(None) == {("kept", 0): 2}


# Rebuilding from the log -------------------------------------------------------------------


def test_reload_rebuilds_stable_groups_and_offsets() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=[None, "i-2"], protocols=(("range", subscription("t")),))
    h.commit({("t", 0): 42}, generation=1, member_id=follower, instance="i-2")
    h.commit({("x", 3): 7}, group="simple")
    r = h.reloaded()
    group = r.group()
    assert group.state is GroupState.STABLE and group.generation_id == 1 and group.leader_id == leader
    assert group.protocol_name == "range" and group.subscribed_topics == {"t"}
    assert group.static_member_id("i-2") == follower
    # Members carry on as if nothing happened: heartbeats, syncs and commits succeed.
    assert r.error(r.heartbeat(leader, 1)) == E.NONE
    assert r.replies[r.sync(follower, 1, instance="i-2")]["assignment"] == follower.encode()
    assert r.fetch({"t": [0]}) == {("t", 0): 42}
    assert r.fetch(None, group="simple") == {("x", 3): 7}
    # ... and members that stay silent expire as usual.
    r.advance(10_000)
    assert r.group().state is GroupState.EMPTY and not r.group().members


def test_reload_honours_tombstones() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    h.leave(LeavingMember(member))
    h.commit({("t", 0): 1}, group="doomed")
    h.run(h.shard.delete_groups, ["doomed"])
    r = h.reloaded()
    assert r.group().state is GroupState.EMPTY and r.group().generation_id == 2
    assert "doomed" not in r.shard.groups
    assert r.fetch({"t": [0]}, group="doomed") == {("t", 0): -1}
