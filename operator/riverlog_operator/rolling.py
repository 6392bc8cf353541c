"""Which broker pod to restart next during a rolling update (StatefulSet ``OnDelete``).

The StatefulSet controller only recreates a pod the operator deleted, with the newest
template. One pod at a time, and only when it is safe: every broker ready and no partition
under-replicated, so the restarted broker's partitions keep their other in-sync replicas.
A pod that is not ready anyway goes first (restarting it costs nothing and may fix it); then
plain brokers, then voters, the active controller last (one controller election, not several).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PodState:
    name: str
    ordinal: int
    revision: str  # the controller-revision-hash label
    ready: bool
    terminating: bool = False


@dataclass(frozen=True)
class RollDecision:
    pod: str | None  # delete this one now
    outdated: tuple[str, ...]  # every pod still on an old revision
    waiting: str | None = None  # why nothing is restarted now (when outdated pods remain)


def next_pod_to_roll(pods: Sequence[PodState], update_revision: str, *, safe: bool, voters: int,
                     active_controller: int = -1) -> RollDecision:
    """``safe``: the brokers answered and report zero under-replicated partitions."""
    outdated = sorted((p for p in pods if p.revision != update_revision), key=lambda p: p.ordinal)
    names = tuple(p.name for p in outdated)
    if not outdated:
        return RollDecision(None, ())
    if any(p.terminating for p in pods):
        return RollDecision(None, names, "a broker pod is shutting down")
    not_ready = [p for p in outdated if not p.ready]
    if not_ready:
        return RollDecision(max(not_ready, key=lambda p: p.ordinal).name, names)
    if not all(p.ready for p in pods):
        return RollDecision(None, names, "waiting for every broker to be ready")
    if not safe:
        return RollDecision(None, names, "waiting for zero under-replicated partitions")

    def order(p: PodState) -> tuple[int, int]:
        if p.ordinal == active_controller:
            group = 2
        elif p.ordinal < voters:
            group = 1
        else:
            group = 0
        return (group, -p.ordinal)

    return RollDecision(min(outdated, key=order).name, names)
