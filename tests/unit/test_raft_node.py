"""Targeted scenarios for the Raft core, driven by hand through ``support.raft_sim.Cluster``."""

from __future__ import annotations

import dataclasses
import random

import pytest
from riverlog.controller.raft import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Entry,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    HardState,
    NotLeaderError,
    OffsetAndEpoch,
    RaftConfig,
    RaftNode,
    Role,
    SafetyError,
    Storage,
    VoteRequest,
    VoteResponse,
    parse_leader_change,
)
from support.raft_sim import UNIT_RAFT_CONFIG, Cluster

pytestmark = pytest.mark.unit


def test_single_voter_elects_itself_and_commits_at_once() -> None:
    c = Cluster(voters=(1,))
    c.run(10)
    node = c.nodes[1]
    assert node.role is Role.LEADER and node.epoch == 1
    offset = node.propose([b"a", b"b"])
    r = node.ready()
    # Same Ready: entries to persist and (after persisting) to apply.
    assert [e.data for e in r.entries] == [b"a", b"b"]
    assert [e.data for e in r.committed] == [b"a", b"b"]
    assert offset == 2 and r.high_watermark == 3  # offset 0 is the leader-change entry


def test_three_voters_elect_replicate_and_commit() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    first = c.readys[leader][0].entries
    control = [e for r in c.readys[leader] for e in r.entries if e.control]
    assert control and parse_leader_change(control[0].data) == (leader, [1, 2, 3])
    assert first == [] or first[0].offset == 0
    assert c.nodes[leader].epoch_start_offset == control[0].offset
    assert c.nodes[leader].applied_offset > control[0].offset  # ready to decide as controller
    c.propose(b"x", b"y")
    c.run(100)
    for i in (1, 2, 3):
        assert c.applied[i] == [b"x", b"y"]
        assert c.nodes[i].high_watermark == c.nodes[leader].log_end_offset


def test_vote_is_persisted_in_the_ready_that_answers() -> None:
    node = RaftNode(1, [1, 2, 3], config=UNIT_RAFT_CONFIG)
    node.ready()
    node.step(VoteRequest(2, 1, epoch=5, last_epoch=0, end_offset=0))
    r = node.ready()
    assert r.hard_state == HardState(epoch=5, voted_for=2, leader_id=None)
    assert r.messages == [VoteResponse(1, 2, 5, True, None)]
    # A second candidate of the same epoch is refused, even with a longer log.
    node.step(VoteRequest(3, 1, epoch=5, last_epoch=4, end_offset=9))
    r = node.ready()
    assert r.hard_state is None and r.messages == [VoteResponse(1, 3, 5, False, None)]
    # The refusal survives a restart: the vote came back from disk.
    again = RaftNode(1, [1, 2, 3], Storage(HardState(5, 2, None)), UNIT_RAFT_CONFIG)
    again.step(VoteRequest(3, 1, epoch=5, last_epoch=4, end_offset=9))
    assert again.ready().messages == [VoteResponse(1, 3, 5, False, None)]


def test_vote_refused_to_a_less_up_to_date_log() -> None:
    log = [Entry(0, 3, b""), Entry(1, 3, b"")]
    node = RaftNode(1, [1, 2, 3], Storage(HardState(3), None, log), UNIT_RAFT_CONFIG)
    node.step(VoteRequest(2, 1, epoch=4, last_epoch=2, end_offset=5))  # older last epoch
    node.step(VoteRequest(3, 1, epoch=4, last_epoch=3, end_offset=1))  # same epoch, shorter
    refused = [m for m in node.ready().messages if isinstance(m, VoteResponse)]
    assert [(m.dst, m.granted) for m in refused] == [(2, False), (3, False)]
    node.step(VoteRequest(3, 1, epoch=4, last_epoch=3, end_offset=2))  # as up to date: granted
    granted = node.ready().messages[-1]
    assert isinstance(granted, VoteResponse) and granted.granted and granted.epoch == 4


def test_stale_epochs_are_rejected_and_higher_epochs_depose() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    node = c.nodes[leader]
    epoch = node.epoch
    follower = next(i for i in (1, 2, 3) if i != leader)
    # A vote request from an older epoch: refused, with the current epoch and leader.
    node.step(VoteRequest(follower, leader, epoch - 1, 99, 99))
    vr = node.ready().messages[-1]
    assert isinstance(vr, VoteResponse) and not vr.granted and vr.epoch == epoch and vr.leader_id == leader
    # A fetch in an older epoch: FENCED_LEADER_EPOCH, naming the leader so the fetcher catches up.
    node.step(FetchRequest(follower, leader, epoch - 1, 0, 0))
    fr = node.ready().messages[-1]
    assert isinstance(fr, FetchResponse) and fr.error is ErrorCode.FENCED_LEADER_EPOCH and fr.leader_id == leader
    # BeginQuorumEpoch of an older epoch changes nothing.
    f = c.nodes[follower]
    f.step(BeginQuorumEpochRequest(leader, follower, epoch - 1))
    assert f.leader_id == leader and f.epoch == epoch
    f.ready()
    # A response carrying a later epoch deposes the leader.
    node.step(VoteResponse(follower, leader, epoch + 3, False, None))
    assert node.role is Role.FOLLOWER and node.epoch == epoch + 3
    with pytest.raises(NotLeaderError):
        node.propose([b"late"])


def test_split_vote_is_resolved_by_randomized_timeouts() -> None:
    # Four voters without pre-vote: two candidates in the same epoch split the others' votes.
    cfg = dataclasses.replace(UNIT_RAFT_CONFIG, pre_vote=False)
    c = Cluster(voters=(1, 2, 3, 4), config=cfg)
    # Both 1 and 2 time out at the same moment and campaign in epoch 1.
    for i in (1, 2):
        c.nodes[i]._election_deadline = 10
    c.now = 10
    for i in (1, 2):
        c.nodes[i].tick(10)
        c.collect(i)
    # Voter 3 hears 1 first, voter 4 hears 2 first: two votes each, nobody has three.
    c.inbox = type(c.inbox)(sorted(c.inbox, key=lambda m: (m.dst, 0 if m.src == m.dst - 2 else 1)))
    c.deliver()
    assert c.leader() is None
    votes = {i: c.nodes[i].voted_for for i in (1, 2, 3, 4)}
    assert votes == {1: 1, 2: 2, 3: 1, 4: 2}
    # Their next timeouts differ, so one of them starts epoch 2 first and wins.
    leader = c.wait_for_leader()
    assert c.nodes[leader].epoch >= 2
    assert sum(1 for n in c.nodes.values() if n.role is Role.LEADER) == 1


def test_ex_leader_uncommitted_tail_is_truncated() -> None:
    c = Cluster()
    old = c.wait_for_leader()
    c.propose(b"committed")
    c.run(100)
    # Cut the leader off; it keeps accepting proposals that can never commit.
    c.isolate(old)
    c.nodes[old].propose([b"lost-1", b"lost-2", b"lost-3"])
    c.collect(old)
    c.run(600)
    new = c.leader()
    assert new is not None and new != old
    c.propose(b"after")
    c.run(100)
    old_node = c.nodes[old]
    assert old_node.role is not Role.LEADER  # check quorum made it step down
    c.heal()
    c.run(500)
    # Rejoining, the old leader fetched, was told where its log diverged, and cut the tail.
    truncations = [r.truncate_to for r in c.readys[old] if r.truncate_to is not None]
    assert truncations, "no truncation reported in a Ready"
    logs = {i: c.nodes[i].log.slice(0, c.nodes[i].log_end_offset) for i in (1, 2, 3)}
    assert logs[old] == logs[new]
    assert b"lost-1" not in [e.data for e in logs[old]]
    assert c.applied[old] == [b"committed", b"after"]


def test_snapshot_install_on_a_lagging_follower() -> None:
    cfg = dataclasses.replace(UNIT_RAFT_CONFIG, snapshot_chunk_bytes=16, snapshot_trailing_entries=0)
    c = Cluster(config=cfg)
    leader = c.wait_for_leader()
    lagging = next(i for i in (1, 2, 3) if i != leader)
    c.crash(lagging)
    for i in range(20):
        c.propose(f"v{i}".encode())
    c.run(100)
    snap = c.snapshot(leader)
    assert snap is not None and c.nodes[leader].log_start_offset == snap.end_offset
    assert c.readys[leader][-1].snapshot == snap and c.readys[leader][-1].log_start == snap.end_offset
    c.propose(b"tail")
    c.start(lagging)
    c.run(500)
    follower = c.nodes[lagging]
    chunks = [m for m in c.sent if isinstance(m, FetchSnapshotRequest) and m.src == lagging]
    assert len(chunks) > 2  # downloaded in several pieces
    installs = [r for r in c.readys[lagging] if r.restore is not None]
    assert len(installs) == 1 and installs[0].snapshot == installs[0].restore
    assert installs[0].restore is not None and installs[0].restore.id == OffsetAndEpoch(snap.end_offset, snap.epoch)
    assert follower.log_start_offset == snap.end_offset
    assert c.applied[lagging] == c.applied[leader] == [*(f"v{i}".encode() for i in range(20)), b"tail"]


def test_snapshot_being_downloaded_outlives_a_newer_one() -> None:
    cfg = dataclasses.replace(UNIT_RAFT_CONFIG, snapshot_chunk_bytes=8, snapshot_trailing_entries=0)
    c = Cluster(config=cfg)
    leader = c.wait_for_leader()
    lagging = next(i for i in (1, 2, 3) if i != leader)
    c.crash(lagging)
    for i in range(10):
        c.propose(f"a{i}".encode())
    c.run(100)
    first = c.snapshot(leader)
    assert first is not None
    c.start(lagging)
    # Let the download begin, then have the leader snapshot again before it ends.
    c.deliver_until(lambda m: isinstance(m, FetchSnapshotRequest) and m.position > 0)
    c.blocked |= {(lagging, leader), (leader, lagging)}
    for i in range(5):
        c.propose(f"b{i}".encode())
    c.run(100)
    second = c.snapshot(leader)
    c.heal()
    assert second is not None and second.end_offset > first.end_offset
    # The leader keeps the log from the first snapshot on, so the replica can go on from there.
    assert c.nodes[leader].log_start_offset <= first.end_offset
    c.run(500)
    installs = [r.restore for r in c.readys[lagging] if r.restore is not None]
    assert [s.id for s in installs if s is not None] == [first.id]
    assert c.applied[lagging] == c.applied[leader]
    c.run(2 * cfg.fetch_timeout_ms)  # once nobody downloads it, the log is compacted after all
    assert c.nodes[leader].log_start_offset == second.end_offset


def test_observer_discovers_the_leader_and_does_not_count_for_commit() -> None:
    c = Cluster(voters=(1, 2, 3), observers=(9,))
    leader = c.wait_for_leader()
    c.propose(b"a")
    c.run(300)
    assert c.nodes[9].leader_id == leader and c.applied[9] == [b"a"]
    assert not any(isinstance(m, VoteRequest) for m in c.sent if m.src == 9)
    # With the two other voters gone, the observer's fetches must not make anything commit.
    for i in (1, 2, 3):
        if i != leader:
            c.crash(i)
    hw = c.nodes[leader].high_watermark
    c.nodes[leader].propose([b"b"])
    c.collect(leader)
    c.run(200)
    assert c.nodes[9].log_end_offset == c.nodes[leader].log_end_offset  # replicated...
    assert c.nodes[leader].high_watermark == hw  # ...but not committed
    assert c.applied[9] == [b"a"]


def test_leader_steps_down_when_it_loses_the_quorum() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    c.isolate(leader)
    c.run(UNIT_RAFT_CONFIG.check_quorum_timeout_ms + 50)
    node = c.nodes[leader]
    assert node.role is Role.RESIGNED
    assert any(r.soft_state is not None and r.soft_state.role is Role.RESIGNED for r in c.readys[leader])
    ends = [m for m in c.sent if isinstance(m, EndQuorumEpochRequest) and m.src == leader]
    assert ends
    with pytest.raises(NotLeaderError):
        node.propose([b"x"])
    # The majority side elects someone else.
    c.run(1000)
    assert c.leader() not in (None, leader)


def test_graceful_resign_hands_over_to_the_most_caught_up_voter() -> None:
    c = Cluster(voters=(1, 2, 3, 4, 5))
    leader = c.wait_for_leader()
    c.propose(b"a")
    c.run(100)
    epoch = c.nodes[leader].epoch
    assert c.nodes[leader].resign()
    c.collect(leader)
    end = next(m for m in c.sent if isinstance(m, EndQuorumEpochRequest))
    assert set(end.preferred_successors) == {1, 2, 3, 4, 5} - {leader}
    c.run(400)
    new = c.leader()
    assert new is not None and new != leader
    assert c.nodes[new].epoch == epoch + 1  # no split vote: the first successor won at once
    c.propose(b"b")
    c.run(200)
    assert all(c.applied[i] == [b"a", b"b"] for i in c.nodes)


def test_pre_vote_keeps_a_rejoining_node_from_deposing_the_leader() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    epoch = c.nodes[leader].epoch
    loner = next(i for i in (1, 2, 3) if i != leader)
    c.isolate(loner)
    c.run(2000)  # the loner times out again and again, but pre-votes never win
    assert c.nodes[loner].epoch == epoch
    c.heal()
    c.run(500)
    assert c.leader() == leader and c.nodes[leader].epoch == epoch
    assert c.nodes[loner].leader_id == leader


def test_without_pre_vote_a_rejoining_node_forces_an_election() -> None:
    cfg = dataclasses.replace(UNIT_RAFT_CONFIG, pre_vote=False)
    c = Cluster(config=cfg)
    leader = c.wait_for_leader()
    epoch = c.nodes[leader].epoch
    loner = next(i for i in (1, 2, 3) if i != leader)
    c.isolate(loner)
    c.run(2000)
    assert c.nodes[loner].epoch > epoch + 2
    c.heal()
    new = c.wait_for_leader()
    assert c.nodes[new].epoch > epoch


def test_a_stale_voter_with_a_fast_clock_cannot_block_elections() -> None:
    # Without pre-vote, the stale voter times out first again and again. Its candidacies move
    # the others to new epochs but must not postpone their own timeouts, or no one else would
    # ever campaign.
    cfg = dataclasses.replace(UNIT_RAFT_CONFIG, pre_vote=False)
    c = Cluster(config=cfg)
    leader = c.wait_for_leader()
    stale, current = (i for i in (1, 2, 3) if i != leader)
    c.crash(stale)
    c.propose(b"a")
    c.run(100)
    c.crash(leader)
    c.start(stale)
    c.clock_rate[stale] = 2.0
    c.run(1000)
    assert c.leader() == current
    assert c.nodes[stale].leader_id == current


def test_restarted_leader_does_not_lead_its_old_epoch_again() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    epoch = c.nodes[leader].epoch
    c.propose(b"a")
    c.run(100)
    c.crash(leader)
    node = c.start(leader)
    assert node.role is Role.RESIGNED and node.epoch == epoch
    c.run(1000)
    new = c.wait_for_leader()
    assert c.nodes[new].epoch > epoch
    c.propose(b"b")
    c.run(200)
    assert c.applied[leader] == [b"a", b"b"]


def test_late_duplicate_fetch_response_is_ignored() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    follower = next(i for i in (1, 2, 3) if i != leader)
    c.propose(b"a", b"b")
    c.run(100)
    f = c.nodes[follower]
    end = f.log_end_offset
    # A diverging answer to a fetch it sent long ago (offset 1) would cut good entries if obeyed.
    stale = FetchResponse(leader, follower, f.epoch, leader, ErrorCode.NONE, fetch_offset=1, last_fetched_epoch=0,
                          high_watermark=0, diverging=OffsetAndEpoch(0, 0))
    f.step(stale)
    assert f.log_end_offset == end
    assert f.ready().truncate_to is None


def test_truncating_committed_entries_is_refused() -> None:
    c = Cluster()
    leader = c.wait_for_leader()
    follower = next(i for i in (1, 2, 3) if i != leader)
    c.propose(b"a")
    c.run(100)
    f = c.nodes[follower]
    bad = FetchResponse(leader, follower, f.epoch, leader, ErrorCode.NONE, fetch_offset=f.log_end_offset,
                        last_fetched_epoch=f.log.last_epoch, diverging=OffsetAndEpoch(0, 0))
    with pytest.raises(SafetyError):
        f.step(bad)


def test_two_leaders_in_one_epoch_are_detected() -> None:
    node = RaftNode(1, [1, 2, 3], Storage(HardState(4, 2, 2)), UNIT_RAFT_CONFIG)
    with pytest.raises(SafetyError):
        node.step(BeginQuorumEpochRequest(3, 1, 4))


def test_fetch_validation_answers() -> None:
    # Leader log: epochs 1,1 | 2,2,2 | 4 (offset 0 .. 5), then its own leader-change entry at 6.
    log = [Entry(i, e, b"") for i, e in enumerate([1, 1, 2, 2, 2, 4])]
    node = RaftNode(1, [1, 2, 3], Storage(HardState(5, 1, None), None, log), UNIT_RAFT_CONFIG,
                    random.Random(1))
    node._become_leader()
    node.ready()

    def fetch(offset: int, last_epoch: int) -> FetchResponse:
        node.step(FetchRequest(2, 1, 5, offset, last_epoch))
        m = node.ready().messages[-1]
        assert isinstance(m, FetchResponse)
        return m

    assert fetch(2, 1).diverging is None and fetch(2, 1).entries[0].offset == 2  # matches
    assert fetch(4, 3).diverging == OffsetAndEpoch(5, 2)  # unknown epoch 3: epoch 2 ends at 5
    assert fetch(7, 2).diverging == OffsetAndEpoch(5, 2)  # epoch 2 ends before 7
    assert fetch(0, 0).diverging is None  # empty log
    assert fetch(7, 5).diverging is None  # up to date, leader-change entry included
    assert fetch(9, 5).diverging == OffsetAndEpoch(7, 5)  # claims more of the leader's epoch than it has


def test_config_rejects_long_poll_longer_than_timeouts() -> None:
    with pytest.raises(ValueError):
        RaftConfig(fetch_max_wait_ms=500, request_timeout_ms=400)


def test_survivors_of_a_dead_leader_elect_one_with_pre_vote() -> None:
    """Regression: two survivors whose timeouts fire apart used to refuse each other's pre-votes
    forever, each re-following the dead leader named in the other's refusal and counting that as
    contact with it. A hint from a third party is no sign of life."""
    import random as _random

    from riverlog.controller.raft import RaftConfig, RaftNode, Storage

    cfg = RaftConfig(election_timeout_ms=150, fetch_timeout_ms=300, fetch_max_wait_ms=50,
                     request_timeout_ms=100, check_quorum_timeout_ms=450)
    assert cfg.pre_vote
    nodes = {i: RaftNode(i, [1, 2, 3], Storage(), cfg, _random.Random(i), 0) for i in (1, 2, 3)}
    down: set[int] = set()

    def pump() -> None:
        for _ in range(50):
            queue = []
            for n in nodes.values():
                if n.id not in down:
                    while n.has_ready():
                        queue += n.ready().messages
            if not queue:
                return
            for m in queue:
                if m.dst not in down and m.src not in down:
                    nodes[m.dst].step(m)

    t = 0
    while not any(n.is_leader for n in nodes.values()):
        t += 10
        for n in nodes.values():
            n.tick(t)
        pump()
        assert t < 10_000
    leader = next(n for n in nodes.values() if n.is_leader)
    for _ in range(20):
        t += 10
        for n in nodes.values():
            n.tick(t)
        pump()
    down.add(leader.id)
    a, b = (n for n in nodes.values() if n.id not in down)
    for step in range(1000):
        t += 10
        a.tick(t)
        pump()
        if step >= 10:  # b's clock starts 100 ms later: their timeouts fire apart
            b.tick(t)
            pump()
        if a.is_leader or b.is_leader:
            break
    assert a.is_leader or b.is_leader, [(n.id, n.role, n.epoch, n.leader_id) for n in (a, b)]
    assert (a if a.is_leader else b).epoch > leader.epoch
