"""Seeded simulation of the Raft core under crashes, torn writes, pauses, clock skew, message
loss / duplication / reordering / delay and (asymmetric) partitions; see ``support/raft_sim.py``
for the invariants checked at every step.

Default run: 70 seeds x 3000 steps (30 s of simulated time each) in a few seconds.
``RIVERLOG_RAFT_SOAK=N`` runs 20*N times as many seeds with 10000 steps each;
``RIVERLOG_RAFT_SEED=<seed>`` runs only that seed of every scenario (to replay a failure).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest
from riverlog.controller.raft import RaftNode
from riverlog.controller.raft.messages import VoteRequest
from support.raft_sim import SIM_RAFT_CONFIG, InvariantViolation, NodeFactory, SimConfig, Simulation, Stats

pytestmark = pytest.mark.unit

SOAK = int(os.environ.get("RIVERLOG_RAFT_SOAK", "0") or 0)
ONLY_SEED = os.environ.get("RIVERLOG_RAFT_SEED")
STEPS = 10_000 if SOAK else 3000

SCENARIOS: dict[str, tuple[SimConfig, int]] = {
    "3-voters": (SimConfig(voters=3, observers=1, steps=STEPS), 25),
    "5-voters": (SimConfig(voters=5, observers=1, steps=STEPS), 25),
    "3-voters-no-prevote": (
        SimConfig(voters=3, observers=1, steps=STEPS, raft=dataclasses.replace(SIM_RAFT_CONFIG, pre_vote=False)),
        8,
    ),
    "5-voters-no-prevote": (
        SimConfig(voters=5, observers=1, steps=STEPS, raft=dataclasses.replace(SIM_RAFT_CONFIG, pre_vote=False)),
        4,
    ),
    # Few entries per fetch (a follower just out-runs the proposal rate), no trailing entries
    # after snapshots, frequent snapshots in tiny chunks.
    "5-voters-small-fetches": (
        SimConfig(voters=5, observers=2, steps=STEPS, snapshot_every=(5, 15), raft=dataclasses.replace(
            SIM_RAFT_CONFIG, max_fetch_entries=4, snapshot_trailing_entries=0, snapshot_chunk_bytes=16)),
        4,
    ),
    "1-voter": (SimConfig(voters=1, observers=2, steps=STEPS), 4),
}


def cases() -> Iterator[object]:
    for name, (_, seeds) in SCENARIOS.items():
        if ONLY_SEED is not None:
            yield pytest.param(name, int(ONLY_SEED), id=f"{name}-seed{ONLY_SEED}")
            continue
        for seed in range(seeds * 20 * SOAK if SOAK else seeds):
            yield pytest.param(name, seed, id=f"{name}-seed{seed}")


@pytest.mark.parametrize(("scenario", "seed"), list(cases()))
def test_simulation(scenario: str, seed: int) -> None:
    config, _ = SCENARIOS[scenario]
    stats = Simulation(seed, config).run()
    assert stats.calm_periods >= 2 and len(stats.recovery_steps) >= stats.calm_periods - 1
    assert stats.committed > 100


def test_simulation_exercises_the_faults() -> None:
    """The schedules really do reach the interesting paths (else the checks prove little)."""
    total = Stats()
    for seed in range(6):
        stats = Simulation(seed, SimConfig(voters=3 if seed % 2 else 5, steps=3000)).run()
        for f in dataclasses.fields(Stats):
            if f.type == "int" or f.type is int:
                setattr(total, f.name, getattr(total, f.name) + getattr(stats, f.name))
    assert total.elections >= 30
    assert total.crashes >= 50 and total.torn_writes >= 5 and total.pauses >= 10
    assert total.truncations >= 20  # uncommitted tails cut after leader changes
    assert total.snapshots_taken >= 100 and total.snapshots_installed >= 20
    assert total.step_downs >= 5 and total.resigns >= 3
    assert total.committed >= 3000


# The checkers must be able to fail: broken copies of the node are caught. ------------------


class DoubleVoter(RaftNode):
    """Forgets that it already voted in this epoch."""

    def _can_grant_vote(self, m: VoteRequest) -> bool:
        return self._log_up_to_date(m)


class NoLogCheckVoter(RaftNode):
    """Votes for candidates whatever their log (breaks Raft's election restriction)."""

    def _log_up_to_date(self, m: VoteRequest) -> bool:
        return True


class NoConsistencyCheck(RaftNode):
    """A leader that accepts every fetch position (no diverging-epoch answer, no truncation)."""

    def _check_fetch_position(self, offset: int, last_epoch: int) -> tuple[None, bool]:
        return None, offset < self.log.start


class EagerCommitter(RaftNode):
    """A leader that commits what it has appended without waiting for a majority."""

    def _maybe_advance_high_watermark(self) -> None:
        if self.log.end > self.high_watermark:
            self.high_watermark = self.log.end
            self._wake_parked()


def first_violation(factory: NodeFactory, config: SimConfig, seeds: int = 30) -> str:
    for seed in range(seeds):
        try:
            Simulation(seed, dataclasses.replace(config, voters=3 if seed % 2 == 0 else 5), factory).run()
        except InvariantViolation as exc:
            return str(exc)
    raise AssertionError(f"{factory.__name__}: no violation found in {seeds} seeds")


@pytest.mark.parametrize(
    ("factory", "pre_vote", "expected"),
    [
        (DoubleVoter, False, "election safety"),
        (NoLogCheckVoter, True, "leader completeness"),
        (NoConsistencyCheck, True, "log matching|state machine safety"),
        (EagerCommitter, True, "leader completeness|state machine safety|truncates committed"),
    ],
)
def test_checker_catches_a_broken_node(factory: NodeFactory, pre_vote: bool, expected: str) -> None:
    config = SimConfig(raft=dataclasses.replace(SIM_RAFT_CONFIG, pre_vote=pre_vote))
    message = first_violation(factory, config)
    assert any(word in message for word in expected.split("|")), message
