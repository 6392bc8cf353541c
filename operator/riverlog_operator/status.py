"""Status conditions (Ready, Reconciling, Degraded) following the Kubernetes API conventions:
a transition time that changes only when the status does, a reason in CamelCase, a message
for people, and the generation the condition was computed for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def condition(type_: str, status: bool, reason: str, message: str, generation: int, now: str,
              previous: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    value = "True" if status else "False"
    since = now
    for old in previous:
        if old.get("type") == type_ and old.get("status") == value and old.get("lastTransitionTime"):
            since = str(old["lastTransitionTime"])
    return {"type": type_, "status": value, "reason": reason, "message": message,
            "lastTransitionTime": since, "observedGeneration": generation}


@dataclass(frozen=True)
class BrokerState:
    """What the brokers themselves say, through the admin client."""

    registered: tuple[int, ...]
    active_controller: int
    under_replicated: int
    offline: int


@dataclass(frozen=True)
class ClusterObservation:
    desired: int
    current: int  # the StatefulSet's size
    ready: int
    brokers: BrokerState | None
    unreachable: str | None = None  # why the brokers could not be asked
    paused: bool = False
    # Work under way (reason, message): RollingRestart, DrainingBrokers, Rebalancing, Scaling.
    activity: tuple[str, str] | None = None
    # Something that stops progress until people act (reason, message).
    problem: tuple[str, str] | None = None


def cluster_conditions(obs: ClusterObservation, generation: int, now: str,
                       previous: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    def cond(type_: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        return condition(type_, status, reason, message, generation, now, previous)

    ready_text = f"{obs.ready}/{obs.desired} brokers ready"

    # Degraded: something is wrong that the operator cannot fix by waiting.
    if obs.problem:
        degraded = cond("Degraded", True, *obs.problem)
    elif obs.brokers and obs.brokers.offline:
        degraded = cond("Degraded", True, "OfflinePartitions", f"{obs.brokers.offline} partitions have no leader")
    elif obs.brokers and obs.brokers.under_replicated and not obs.activity:
        degraded = cond("Degraded", True, "UnderReplicatedPartitions",
                        f"{obs.brokers.under_replicated} partitions are under-replicated")
    elif obs.brokers is None and obs.ready > 0:
        degraded = cond("Degraded", True, "BrokersUnreachable", obs.unreachable or "the brokers did not answer")
    else:
        degraded = cond("Degraded", False, "Healthy", ready_text)

    if obs.paused:
        reconciling = cond("Reconciling", False, "ReconciliationPaused",
                           "the riverlog.dev/pause-reconciliation annotation is set")
    elif obs.activity:
        reconciling = cond("Reconciling", True, *obs.activity)
    elif obs.current != obs.desired or obs.ready < obs.desired:
        reconciling = cond("Reconciling", True, "WaitingForBrokers", ready_text)
    else:
        reconciling = cond("Reconciling", False, "Reconciled", "the brokers match the spec")

    if obs.brokers is None:
        reason = "BrokersNotReady" if obs.ready == 0 else "BrokersUnreachable"
        message = ready_text if obs.ready == 0 else (obs.unreachable or ready_text)
        ready = cond("Ready", False, reason, message)
    elif obs.ready < obs.desired or obs.current != obs.desired:
        ready = cond("Ready", False, "BrokersNotReady", ready_text)
    elif obs.brokers.active_controller < 0:
        ready = cond("Ready", False, "NoActiveController", "the metadata quorum has no leader")
    elif degraded["status"] == "True":
        ready = cond("Ready", False, degraded["reason"], degraded["message"])
    else:
        ready = cond("Ready", True, "ClusterReady",
                     f"{ready_text}, active controller {obs.brokers.active_controller}")
    return [ready, reconciling, degraded]


def topic_ready(ok: bool, reason: str, message: str, generation: int, now: str,
                previous: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    return [condition("Ready", ok, reason, message, generation, now, previous)]
