"""The classic group protocol of the pure state machine: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, timeouts and static membership, with Kafka's error codes on every path."""

from __future__ import annotations

import re

import pytest
from riverlog.coordinator.config import GroupConfig
from riverlog.coordinator.group import GroupState
from riverlog.coordinator.membership import LeavingMember
from riverlog.coordinator.records import GroupMetadataKey
from riverlog.protocol.errors import ErrorCode
from support.group_harness import Harness

pytestmark = pytest.mark.unit

E = ErrorCode
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


# JoinGroup --------------------------------------------------------------------------------


def test_first_join_v4_requires_member_id_and_ids_are_client_id_dash_uuid() -> None:
    h = Harness()
    first = h.join(client_id="my-client")
    assert h.error(first) == E.MEMBER_ID_REQUIRED
    member_id = h.replies[first]["member_id"]
    assert re.fullmatch(f"my-client-{UUID_RE}", member_id)
    assert h.group().is_pending_member(member_id)
    second = h.join(member_id, client_id="my-client")
    h.advance(0)
    body = h.replies[second]
    assert body["error_code"] == E.NONE
    assert body["member_id"] == member_id and body["leader"] == member_id
    assert body["generation_id"] == 1 and body["protocol_name"] == "range" and body["protocol_type"] == "consumer"
    assert body["members"] == [{"member_id": member_id, "group_instance_id": None, "metadata": b"meta"}]
    assert h.group().state is GroupState.COMPLETING_REBALANCE


def test_join_before_v4_gets_a_member_id_at_once() -> None:
    h = Harness()
    token = h.join(version=3)
    h.advance(0)
    assert h.error(token) == E.NONE
    assert h.replies[token]["member_id"].startswith("client-")


def test_new_group_is_recorded_even_when_no_rebalance_completes() -> None:
    h = Harness()
    h.join()  # MEMBER_ID_REQUIRED only
    assert [r.key for r in h.written] == [GroupMetadataKey("g")]
    value = h.written[0].value
    assert value is not None and value.generation == 0 and value.members == ()


def test_unknown_member_id_for_unknown_group_or_member() -> None:
    h = Harness()
    assert h.error(h.join("nobody-1")) == E.UNKNOWN_MEMBER_ID
    h.stable_group(1)
    assert h.error(h.join("nobody-2")) == E.UNKNOWN_MEMBER_ID


def test_inconsistent_group_protocol() -> None:
    h = Harness()
    assert h.error(h.join(protocols=())) == E.INCONSISTENT_GROUP_PROTOCOL  # nothing to choose from
    assert h.error(h.join(protocol_type="")) == E.INCONSISTENT_GROUP_PROTOCOL
    h.stable_group(1)
    assert h.error(h.join(protocol_type="connect")) == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.error(h.join(protocols=(("roundrobin", b""),))) == E.INCONSISTENT_GROUP_PROTOCOL
    # A member listing the group's protocol among others may join.
    assert h.error(h.join(protocols=(("roundrobin", b""), ("range", b"")))) == E.MEMBER_ID_REQUIRED


def test_protocol_selected_by_votes_among_protocols_all_members_support() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=100))
    tokens = [
        h.join_new(protocols=(("range", b"a"), ("roundrobin", b"a"), ("sticky", b"a"))),
        h.join_new(protocols=(("roundrobin", b"b"), ("range", b"b"))),
        h.join_new(protocols=(("roundrobin", b"c"), ("range", b"c"))),
    ]
    h.advance(100)  # members kept arriving: the initial delay is extended once
    h.advance(100)
    assert {h.replies[t]["protocol_name"] for t in tokens} == {"roundrobin"}
    leader = next(h.replies[t] for t in tokens if h.replies[t]["members"])
    assert sorted(m["metadata"] for m in leader["members"]) == [b"a", b"b", b"c"]


def test_initial_rebalance_is_delayed_and_extended_while_members_arrive() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=3000))
    a = h.join_new(rebalance=10_000)
    h.advance(2000)
    b = h.join_new(rebalance=10_000)
    h.advance(1000)  # the first delay ends, but a member arrived: extended
    assert h.reply(a) is None and h.reply(b) is None
    h.advance(2999)
    assert h.reply(a) is None
    h.advance(1)
    assert h.error(a) == E.NONE and h.error(b) == E.NONE
    assert h.replies[a]["generation_id"] == h.replies[b]["generation_id"] == 1
    leader_reply = h.replies[a] if h.replies[a]["members"] else h.replies[b]
    assert len(leader_reply["members"]) == 2


def test_initial_rebalance_delay_is_bounded_by_the_rebalance_timeout() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=3000))
    first = h.join_new(rebalance=5000)
    for _ in range(10):
        h.advance(1000)
        if h.reply(first) is not None:
            break
        h.join_new(rebalance=5000)
    assert h.reply(first) is not None
    assert h.now - 1_000_000 <= 6000


def test_invalid_session_timeouts_and_group_ids_are_checked_by_the_handler_not_here() -> None:
    # (INVALID_SESSION_TIMEOUT and INVALID_GROUP_ID come from handlers/groups.py, tested live.)
    h = Harness()
    assert h.error(h.join(session=1)) == E.MEMBER_ID_REQUIRED


def test_group_max_size() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, max_size=2))
    h.stable_group(2)
    token = h.join()
    assert h.error(token) == E.GROUP_MAX_SIZE_REACHED
    assert h.replies[token]["member_id"] == ""


# SyncGroup --------------------------------------------------------------------------------


def test_followers_wait_for_the_leader_and_get_their_assignment_once_it_is_stored() -> None:
    h = Harness()
    a, b = h.join_new(), h.join_new()
    h.advance(0)
    leader = h.replies[a]["leader"]
    follower = h.replies[b]["member_id"] if h.replies[a]["member_id"] == leader else h.replies[a]["member_id"]
    follower_sync = h.sync(follower, 1)
    assert h.reply(follower_sync) is None
    h.hold_writes = True
    leader_sync = h.sync(leader, 1, {leader: b"L", follower: b"F"})
    assert h.reply(leader_sync) is None and h.reply(follower_sync) is None
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    h.release_writes()
    assert h.replies[leader_sync]["assignment"] == b"L"
    assert h.replies[follower_sync]["assignment"] == b"F"
    assert h.replies[follower_sync]["protocol_name"] == "range"
    assert h.group().state is GroupState.STABLE
    # A late SyncGroup in Stable gets the stored assignment.
    assert h.replies[h.sync(follower, 1)]["assignment"] == b"F"


def test_a_member_the_leader_left_out_gets_an_empty_assignment() -> None:
    h = Harness()
    a, b = h.join_new(), h.join_new()
    h.advance(0)
    leader = h.replies[a]["leader"]
    other = next(h.replies[t]["member_id"] for t in (a, b) if h.replies[t]["member_id"] != leader)
    t = h.sync(other, 1)
    h.sync(leader, 1, {leader: b"x"})
    assert h.replies[t] == {"error_code": E.NONE, "protocol_type": "consumer", "protocol_name": "range",
                            "assignment": b""}


def test_failed_assignment_write_sends_members_back_to_rejoin() -> None:
    h = Harness()
    a = h.join_new()
    h.advance(0)
    leader = h.replies[a]["member_id"]
    h.hold_writes = True
    t = h.sync(leader, 1, {leader: b"x"})
    h.release_writes(E.NOT_COORDINATOR)
    assert h.error(t) == E.NOT_COORDINATOR
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_sync_errors() -> None:
    h = Harness()
    assert h.error(h.sync("m", 1)) == E.UNKNOWN_MEMBER_ID  # no such group
    leader, follower = h.stable_group(2)
    assert h.error(h.sync("stranger", 1)) == E.UNKNOWN_MEMBER_ID
    assert h.error(h.sync(follower, 0)) == E.ILLEGAL_GENERATION
    assert h.error(h.sync(follower, 1, protocol_type="consumer", protocol_name="roundrobin")) == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert h.error(h.sync(follower, 1, protocol_type="connect", protocol_name="range")) == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert h.error(h.sync(follower, 1, protocol_type="consumer", protocol_name="range")) == E.NONE
    h.join(leader)  # the leader rejoining starts a rebalance
    assert h.error(h.sync(follower, 1)) == E.REBALANCE_IN_PROGRESS


def test_a_new_rebalance_answers_pending_syncs_with_rebalance_in_progress() -> None:
    h = Harness()
    a, b = h.join_new(), h.join_new()
    h.advance(0)
    follower = next(h.replies[t]["member_id"] for t in (a, b) if not h.replies[t]["members"])
    waiting = h.sync(follower, 1)
    h.join_new()  # a third member arrives before the leader synced
    assert h.error(waiting) == E.REBALANCE_IN_PROGRESS
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    a, _ = h.join_new(rebalance=5000), h.join_new(rebalance=5000)
    h.advance(0)
    leader = h.replies[a]["leader"]
    h.sync(leader, 1, {})
    h.advance(5000)
    group = h.group()
    assert list(group.members) == [leader]
    assert group.state is GroupState.PREPARING_REBALANCE


# Heartbeat --------------------------------------------------------------------------------


def test_heartbeat_errors() -> None:
    h = Harness()
    assert h.error(h.heartbeat("m", 0)) == E.UNKNOWN_MEMBER_ID  # no group
    leader, follower = h.stable_group(2)
    assert h.error(h.heartbeat(follower, 1)) == E.NONE
    assert h.error(h.heartbeat("stranger", 1)) == E.UNKNOWN_MEMBER_ID
    assert h.error(h.heartbeat(follower, 7)) == E.ILLEGAL_GENERATION
    h.join_new()  # a new member: rebalance
    assert h.error(h.heartbeat(follower, 1)) == E.REBALANCE_IN_PROGRESS
    # Generation errors win over the rebalance.
    assert h.error(h.heartbeat(follower, 0)) == E.ILLEGAL_GENERATION


def test_heartbeat_in_empty_group_is_unknown_member() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    h.leave(LeavingMember(member))
    assert h.group().state is GroupState.EMPTY
    assert h.error(h.heartbeat(member, 1)) == E.UNKNOWN_MEMBER_ID


def test_silent_member_expires_and_the_rest_rebalance_without_it() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, session=6000, rebalance=20_000)
    h.advance(3000)
    assert h.error(h.heartbeat(leader, 1)) == E.NONE
    h.advance(2999)
    assert h.error(h.heartbeat(leader, 1)) == E.NONE
    h.advance(1)
    # The follower never heartbeated: gone once its 6s session passed.
    assert follower not in h.group().members
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.error(h.heartbeat(leader, 1)) == E.REBALANCE_IN_PROGRESS
    rejoin = h.join(leader)
    assert h.replies[rejoin]["generation_id"] == 2
    assert [m["member_id"] for m in h.replies[rejoin]["members"]] == [leader]


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, session=30_000, rebalance=10_000)
    newcomer = h.join_new(rebalance=10_000)
    rejoin = h.join(leader, rebalance=10_000)
    h.heartbeat(follower, 1)  # alive, but does not rejoin
    h.advance(9999)
    assert h.reply(rejoin) is None
    h.advance(1)
    assert h.error(rejoin) == E.NONE and h.error(newcomer) == E.NONE
    assert follower not in h.group().members
    assert h.replies[rejoin]["generation_id"] == 2
    assert h.error(h.heartbeat(follower, 1)) == E.UNKNOWN_MEMBER_ID


def test_pending_member_that_never_comes_back_is_forgotten() -> None:
    h = Harness()
    (leader,) = h.stable_group(1, session=6000)
    first = h.join(session=6000)
    pending = h.replies[first]["member_id"]
    h.advance(3000)
    h.heartbeat(leader, 1)
    h.advance(3000)
    assert not h.group().is_pending_member(pending)
    assert h.error(h.join(pending)) == E.UNKNOWN_MEMBER_ID


def test_pending_member_holds_back_a_rebalance_until_it_joins() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    first = h.join()  # pending
    rejoin_leader = h.join(leader)
    rejoin_follower = h.join(follower)
    assert h.reply(rejoin_leader) is None  # still waiting for the pending member
    newcomer = h.join(h.replies[first]["member_id"])
    assert h.error(rejoin_leader) == h.error(rejoin_follower) == h.error(newcomer) == E.NONE
    assert h.replies[newcomer]["generation_id"] == 2


# Rejoins during Stable (eager and cooperative clients) --------------------------------------


def test_follower_rejoining_with_same_metadata_gets_current_generation_without_rebalance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    token = h.join(follower)
    assert h.replies[token]["generation_id"] == 1 and h.replies[token]["members"] == []
    assert h.group().state is GroupState.STABLE


def test_rejoin_with_new_metadata_or_by_the_leader_triggers_a_rebalance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    # A cooperative member's second join (owned partitions changed) carries new metadata.
    changed = h.join(follower, protocols=(("range", b"owned-partitions-changed"),))
    assert h.reply(changed) is None
    assert h.group().state is GroupState.PREPARING_REBALANCE
    rejoin = h.join(leader)
    assert h.error(changed) == E.NONE and h.replies[changed]["generation_id"] == 2
    assert h.replies[rejoin]["generation_id"] == 2
    assert h.group().state is GroupState.COMPLETING_REBALANCE


def test_rejoin_in_completing_rebalance_with_same_metadata_replays_the_join_answer() -> None:
    h = Harness()
    a, _ = h.join_new(), h.join_new()
    h.advance(0)
    leader = h.replies[a]["leader"]
    again = h.join(leader)
    assert h.replies[again]["members"] and h.replies[again]["generation_id"] == 1


# LeaveGroup -------------------------------------------------------------------------------


def test_leave_triggers_an_immediate_rebalance() -> None:
    h = Harness()
    leader, f1, f2 = h.stable_group(3)
    token = h.leave(LeavingMember(f2))
    assert h.replies[token] == {"error_code": E.NONE, "members": [
        {"member_id": f2, "group_instance_id": None, "error_code": E.NONE}]}
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.error(h.heartbeat(f1, 1)) == E.REBALANCE_IN_PROGRESS
    r1, r2 = h.join(leader), h.join(f1)
    assert h.error(r1) == h.error(r2) == E.NONE  # complete as soon as the remaining two are back
    assert h.replies[r1]["generation_id"] == 2


def test_last_member_leaving_empties_the_group_and_records_it() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    h.written.clear()
    h.hold_writes = True
    token = h.leave(LeavingMember(member))
    assert h.reply(token) is None  # answered once the Empty generation is stored
    h.release_writes()
    assert h.error(token) == E.NONE
    assert h.group().state is GroupState.EMPTY and h.group().generation_id == 2
    value = h.written[-1].value
    assert value.generation == 2 and value.members == () and value.protocol_type == "consumer"


def test_leave_errors_per_member() -> None:
    h = Harness()
    token = h.leave(LeavingMember("x"), group="nope")
    assert h.replies[token]["members"] == [{"member_id": "x", "group_instance_id": None,
                                            "error_code": E.UNKNOWN_MEMBER_ID}]
    leader, follower = h.stable_group(2, instances=["i-1", None])
    token = h.leave(LeavingMember("stranger"), LeavingMember("", "i-unknown"), LeavingMember(follower),
                    LeavingMember("wrong-id", "i-1"))
    codes = [m["error_code"] for m in h.replies[token]["members"]]
    assert codes == [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID, E.NONE, E.FENCED_INSTANCE_ID]


def test_static_member_removed_by_instance_id() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=["i-1", "i-2"])
    token = h.leave(LeavingMember("", "i-2"))
    assert h.error(token) == E.NONE and h.replies[token]["members"][0]["error_code"] == E.NONE
    assert follower not in h.group().members


def test_leaving_member_parked_in_join_is_released() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    parked = h.join(leader)  # rebalance; waits for the follower
    h.leave(LeavingMember(leader))
    assert h.error(parked) == E.UNKNOWN_MEMBER_ID


# Static membership ------------------------------------------------------------------------


def test_static_member_needs_no_member_id_round_trip() -> None:
    h = Harness()
    token = h.join(instance="app-1")
    h.advance(0)
    assert h.error(token) == E.NONE
    assert re.fullmatch(f"app-1-{UUID_RE}", h.replies[token]["member_id"])


def test_static_member_restart_keeps_assignment_without_rebalance_and_fences_old_id() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=["i-1", "i-2"])
    assignment = h.group().members[follower].assignment
    h.hold_writes = True
    token = h.join(instance="i-2", version=8)  # the follower restarted: unknown member id
    assert h.reply(token) is None  # answered once the new member id is stored
    h.release_writes()
    body = h.replies[token]
    new_id = body["member_id"]
    assert body["error_code"] == E.NONE and new_id != follower and body["generation_id"] == 1
    assert body["leader"] == leader and body["members"] == []
    group = h.group()
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert h.written[-1].value.members[1].member_id == new_id
    assert h.replies[h.sync(new_id, 1, instance="i-2")]["assignment"] == assignment
    assert h.error(h.heartbeat(leader, 1, instance="i-1")) == E.NONE  # the others notice nothing
    assert h.error(h.heartbeat(follower, 1, instance="i-2")) == E.FENCED_INSTANCE_ID
    assert h.error(h.join(follower, instance="i-2")) == E.FENCED_INSTANCE_ID


def test_static_leader_restart_before_v9_is_told_the_old_leader_id() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=["i-1", "i-2"])
    token = h.join(instance="i-1", version=5)
    body = h.replies[token]
    assert body["leader"] == leader != body["member_id"]  # so it does not compute an assignment
    assert h.group().leader_id == body["member_id"]


def test_static_leader_restart_v9_skips_assignment() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=["i-1", "i-2"])
    token = h.join(instance="i-1", version=9)
    body = h.replies[token]
    assert body["leader"] == body["member_id"] and body["skip_assignment"] is True
    assert len(body["members"]) == 2


def test_static_member_rejoining_with_other_protocols_triggers_rebalance() -> None:
    h = Harness()
    h.stable_group(2, instances=["i-1", "i-2"])
    h.join(instance="i-2", protocols=(("roundrobin", b""), ("range", b"")))
    assert h.group().state is GroupState.STABLE  # range is still everyone's choice
    token = h.join(instance="i-1", protocols=(("roundrobin", b""), ("range", b"")))
    assert h.reply(token) is None
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_static_member_fencing_on_sync_and_unknown_instance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=["i-1", "i-2"])
    assert h.error(h.sync(follower, 1, instance="i-1")) == E.FENCED_INSTANCE_ID
    assert h.error(h.sync(follower, 1, instance="i-9")) == E.UNKNOWN_MEMBER_ID
    assert h.error(h.heartbeat(follower, 1, instance="i-9")) == E.UNKNOWN_MEMBER_ID


def test_static_members_are_not_dropped_for_missing_a_rebalance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, instances=["i-1", "i-2"], session=60_000, rebalance=5000)
    rejoin = h.join(leader, instance="i-1", rebalance=5000)
    h.advance(5000)
    assert h.error(rejoin) == E.NONE
    assert follower in h.group().members  # static: kept until its session expires


def test_static_member_in_completing_rebalance_restarts_the_rebalance() -> None:
    h = Harness()
    a = h.join(instance="i-1")
    b = h.join(instance="i-2")
    h.advance(0)
    assert h.error(a) == h.error(b) == E.NONE
    h.join(instance="i-2")
    assert h.group().state is GroupState.PREPARING_REBALANCE


# Unloading --------------------------------------------------------------------------------


def test_unloading_answers_parked_requests_with_not_coordinator() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    parked = h.join(leader)
    h._apply(h.shard.on_unloaded(h.now))
    assert h.error(parked) == E.NOT_COORDINATOR
    assert h.group().state is GroupState.DEAD
    assert h.error(h.heartbeat(follower, 1)) == E.COORDINATOR_NOT_AVAILABLE
    assert h.error(h.join(follower)) == E.COORDINATOR_NOT_AVAILABLE
