"""Operator decisions without Kubernetes: conditions, replica moves, rolling order, and the
broker pod's entrypoint."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from riverlog.config import BrokerConfig
from riverlog_operator.placement import PlacementError, drain_plan, replication_plan, spread_plan
from riverlog_operator.pod_entrypoint import (
    EntrypointError,
    broker_argv,
    main,
    ordinal_of,
    per_pod_properties,
    rack_from_annotations,
)
from riverlog_operator.rolling import PodState, next_pod_to_roll
from riverlog_operator.status import BrokerState, ClusterObservation, cluster_conditions, condition

pytestmark = pytest.mark.unit

NOW = "2026-01-02T03:04:05Z"
EARLIER = "2026-01-01T00:00:00Z"


def by_type(conditions: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {c["type"]: c for c in conditions}


# --- conditions -------------------------------------------------------------------------------

def test_condition_keeps_transition_time_while_status_holds() -> None:
    old = [{"type": "Ready", "status": "True", "lastTransitionTime": EARLIER}]
    assert condition("Ready", True, "ClusterReady", "ok", 4, NOW, old) == {
        "type": "Ready", "status": "True", "reason": "ClusterReady", "message": "ok",
        "lastTransitionTime": EARLIER, "observedGeneration": 4}
    assert condition("Ready", False, "BrokersNotReady", "x", 4, NOW, old)["lastTransitionTime"] == NOW


def test_healthy_cluster_is_ready() -> None:
    obs = ClusterObservation(3, 3, 3, BrokerState((0, 1, 2), 1, 0, 0))
    c = by_type(cluster_conditions(obs, 7, NOW))
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("True", "ClusterReady")
    assert c["Ready"]["message"] == "3/3 brokers ready, active controller 1"
    assert (c["Reconciling"]["status"], c["Reconciling"]["reason"]) == ("False", "Reconciled")
    assert (c["Degraded"]["status"], c["Degraded"]["reason"]) == ("False", "Healthy")
    assert {x["observedGeneration"] for x in c.values()} == {7}


def test_new_cluster_without_ready_brokers() -> None:
    c = by_type(cluster_conditions(ClusterObservation(3, 3, 0, None, unreachable="no broker is ready"), 1, NOW))
    assert (c["Ready"]["status"], c["Ready"]["reason"], c["Ready"]["message"]) == (
        "False", "BrokersNotReady", "0/3 brokers ready")
    assert (c["Reconciling"]["status"], c["Reconciling"]["reason"]) == ("True", "WaitingForBrokers")
    assert c["Degraded"]["status"] == "False"


def test_ready_pods_that_do_not_answer_are_degraded() -> None:
    obs = ClusterObservation(3, 3, 3, None, unreachable="cannot query the brokers at x:9092: refused")
    c = by_type(cluster_conditions(obs, 1, NOW))
    assert (c["Ready"]["reason"], c["Degraded"]["status"], c["Degraded"]["reason"]) == (
        "BrokersUnreachable", "True", "BrokersUnreachable")
    assert "refused" in str(c["Degraded"]["message"])


def test_under_replication_degrades_unless_work_explains_it() -> None:
    urp = BrokerState((0, 1, 2), 0, 4, 0)
    idle = by_type(cluster_conditions(ClusterObservation(3, 3, 3, urp), 1, NOW))
    assert (idle["Degraded"]["status"], idle["Degraded"]["reason"]) == ("True", "UnderReplicatedPartitions")
    assert idle["Ready"]["status"] == "False"
    rolling = by_type(cluster_conditions(
        ClusterObservation(3, 3, 3, urp, activity=("RollingRestart", "restarting demo-2")), 1, NOW))
    assert rolling["Degraded"]["status"] == "False"
    assert (rolling["Reconciling"]["status"], rolling["Reconciling"]["reason"]) == ("True", "RollingRestart")


def test_offline_partitions_and_problems() -> None:
    offline = by_type(cluster_conditions(ClusterObservation(3, 3, 3, BrokerState((0, 1, 2), 0, 1, 2)), 1, NOW))
    assert offline["Degraded"]["reason"] == "OfflinePartitions"
    blocked = by_type(cluster_conditions(ClusterObservation(
        2, 3, 3, BrokerState((0, 1, 2), 0, 0, 0), problem=("ScaleDownBlocked", "nope")), 1, NOW))
    assert (blocked["Degraded"]["status"], blocked["Degraded"]["reason"]) == ("True", "ScaleDownBlocked")
    assert blocked["Ready"]["reason"] == "BrokersNotReady"  # 3 brokers running, 2 wanted


def test_no_quorum_leader_is_not_ready() -> None:
    c = by_type(cluster_conditions(ClusterObservation(3, 3, 3, BrokerState((0, 1, 2), -1, 0, 0)), 1, NOW))
    assert c["Ready"]["reason"] == "NoActiveController"


def test_paused() -> None:
    c = by_type(cluster_conditions(ClusterObservation(3, 3, 3, None, paused=True), 1, NOW))
    assert (c["Reconciling"]["status"], c["Reconciling"]["reason"]) == ("False", "ReconciliationPaused")


# --- placement --------------------------------------------------------------------------------

def loads(assignment: dict[tuple[str, int], list[int]]) -> Counter[int]:
    return Counter(r for replicas in assignment.values() for r in replicas)


def test_drain_moves_every_replica_off_removed_brokers() -> None:
    current = {("t", 0): [3, 0], ("t", 1): [1, 3], ("t", 2): [2, 4], ("u", 0): [0, 1]}
    plan = drain_plan(current, removed=[3, 4], remaining=[0, 1, 2])
    assert plan == {("t", 0): [2, 0], ("t", 1): [1, 2], ("t", 2): [2, 0]}
    merged = {**current, **plan}
    assert not {3, 4} & set(loads(merged))
    assert all(len(set(r)) == len(r) for r in merged.values())


def test_drain_refuses_when_replicas_cannot_fit() -> None:
    with pytest.raises(PlacementError, match="more than the 2 brokers"):
        drain_plan({("t", 0): [0, 1, 2]}, removed=[2], remaining=[0, 1])


def test_spread_evens_out_new_brokers_moving_followers_first() -> None:
    current = {("t", p): [p % 3, (p + 1) % 3] for p in range(6)}
    plan = spread_plan(current, range(5))
    merged = {**current, **plan}
    counts = loads(merged)
    assert max(counts.values()) - min(counts[b] for b in range(5)) <= 1
    # Preferred leaders (first replicas) did not move.
    assert all(merged[tp][0] == current[tp][0] for tp in current)
    assert spread_plan(merged, range(5)) == {}


def test_spread_of_a_balanced_cluster_is_empty() -> None:
    assert spread_plan({("t", 0): [0, 1], ("t", 1): [1, 2], ("t", 2): [2, 0]}, [0, 1, 2]) == {}


def test_replication_factor_up_and_down() -> None:
    topic = {("t", 0): [0], ("t", 1): [1], ("t", 2): [2]}
    up = replication_plan(topic, 2, [0, 1, 2])
    assert all(len(r) == 2 and len(set(r)) == 2 for r in up.values())
    assert [up[tp][0] for tp in sorted(up)] == [0, 1, 2]  # leaders kept
    assert max(loads(up).values()) - min(loads(up).values()) <= 1
    down = replication_plan({("t", 0): [0, 1, 2]}, 1, [0, 1, 2])
    assert down == {("t", 0): [0]}
    assert replication_plan(topic, 1, [0, 1, 2]) == {}
    with pytest.raises(PlacementError, match="larger than the 3 available brokers"):
        replication_plan(topic, 4, [0, 1, 2])


# --- rolling ----------------------------------------------------------------------------------

def pods(*specs: tuple[int, str, bool]) -> list[PodState]:
    return [PodState(f"demo-{o}", o, rev, ready) for o, rev, ready in specs]


def test_nothing_to_roll() -> None:
    decision = next_pod_to_roll(pods((0, "new", True), (1, "new", True)), "new", safe=True, voters=3)
    assert decision.pod is None and decision.outdated == ()


def test_roll_brokers_then_voters_then_the_active_controller() -> None:
    state = pods((0, "old", True), (1, "old", True), (2, "old", True), (3, "old", True), (4, "old", True))
    order = []
    for _ in range(5):
        decision = next_pod_to_roll(state, "new", safe=True, voters=3, active_controller=1)
        assert decision.pod is not None
        order.append(decision.pod)
        state = [PodState(p.name, p.ordinal, "new" if p.name == decision.pod else p.revision, True) for p in state]
    assert order == ["demo-4", "demo-3", "demo-2", "demo-0", "demo-1"]


def test_roll_waits_for_ready_and_in_sync() -> None:
    not_all_ready = pods((0, "old", True), (1, "new", False))
    decision = next_pod_to_roll(not_all_ready, "new", safe=True, voters=3)
    assert decision.pod is None and decision.waiting == "waiting for every broker to be ready"
    decision = next_pod_to_roll(pods((0, "old", True), (1, "new", True)), "new", safe=False, voters=3)
    assert decision.pod is None and decision.waiting == "waiting for zero under-replicated partitions"
    assert decision.outdated == ("demo-0",)


def test_outdated_pods_that_are_not_ready_go_first_and_terminating_blocks() -> None:
    decision = next_pod_to_roll(pods((0, "old", True), (1, "old", False), (2, "old", False)), "new",
                                safe=False, voters=3)
    assert decision.pod == "demo-2"
    terminating = [PodState("demo-0", 0, "old", True), PodState("demo-1", 1, "new", False, terminating=True)]
    assert next_pod_to_roll(terminating, "new", safe=True, voters=3).pod is None


# --- pod entrypoint ---------------------------------------------------------------------------

SHARED = {
    "controller.quorum.voters": "0@demo-0.demo-brokers.kafka.svc:9093,1@demo-1.demo-brokers.kafka.svc:9093,"
                                "2@demo-2.demo-brokers.kafka.svc:9093",
    "listeners": "PLAINTEXT://:9092,APPS://:9094",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,APPS:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "log.dirs": "/var/lib/riverlog/data",
}


def test_voter_pod_properties() -> None:
    props = per_pod_properties(SHARED, "demo-1", "kafka", "demo-brokers", "zone-a")
    assert props == {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://:9092,APPS://:9094,CONTROLLER://:9093",
        "advertised.listeners": "PLAINTEXT://demo-1.demo-brokers.kafka.svc:9092,"
                                "APPS://demo-1.demo-brokers.kafka.svc:9094",
        "broker.rack": "zone-a",
    }
    # The broker accepts the result.
    config = BrokerConfig({**SHARED, **props})
    assert config.node_id == 1 and [lst.name for lst in config.controller_listeners()] == ["CONTROLLER"]


def test_observer_pod_properties() -> None:
    props = per_pod_properties(SHARED, "demo-4", "kafka", "demo-brokers", None)
    assert props["process.roles"] == "broker" and "listeners" not in props and "broker.rack" not in props
    config = BrokerConfig({**SHARED, **props})
    assert config.process_roles == {"broker"} and config.controller_listeners() == []


def test_ordinal_and_rack_parsing() -> None:
    assert ordinal_of("my-cluster-12") == 12
    with pytest.raises(EntrypointError):
        ordinal_of("nodigits")
    text = 'kubernetes.io/config.seen="2026"\nriverlog.dev/rack="eu-west-1a"\n'
    assert rack_from_annotations(text) == "eu-west-1a"
    assert rack_from_annotations('other="x"\n') is None


def test_entrypoint_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in SHARED.items()))
    env = {"POD_NAME": "demo-0", "POD_NAMESPACE": "kafka", "RIVERLOG_K8S_HEADLESS_SERVICE": "demo-brokers"}
    assert main(["--config", str(config), "--dry-run"], env) == 0
    out = capsys.readouterr().out.split()
    assert out[1:6] == ["-m", "riverlog", "broker", "--config", str(config)]
    assert "node.id=0" in out and "process.roles=broker,controller" in out
    assert broker_argv(str(config), {"b": "2", "a": "1"})[-4:] == ["--set", "a=1", "--set", "b=2"]
    assert main(["--config", str(config), "--dry-run"], {"POD_NAME": "demo-0"}) == 2
