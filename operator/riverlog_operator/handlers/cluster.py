"""Reconcile a Cluster: apply its manifests, scale with reassignment, roll restarts safely,
and report what the StatefulSet and the brokers say in the status.

Level-triggered: every call looks at the whole current state and takes the next step (one
pod restart, one batch of reassignments), so kopf's change handlers and the periodic timer
can all call it; a lock per object keeps them from running at once.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Mapping
from typing import Any

from riverlog.client.admin import AdminClient

from .. import brokers
from ..builders import BuildInputs, build_cluster, initial_voters
from ..builders.common import selector_string
from ..builders.config import cluster_id
from ..builders.statefulset import RACK_ANNOTATION
from ..kubeapi import ApiError, KubeApi
from ..metrics import CA_EXPIRY, forget_ca_expiry
from ..model import ClusterRef, ClusterSpec
from ..placement import PlacementError, drain_plan, spread_plan
from ..rolling import PodState, next_pod_to_roll
from ..status import ClusterObservation, cluster_conditions
from .common import BOOTSTRAP_ANNOTATION, MANUAL_ROLL_ANNOTATION, PAUSE_ANNOTATION, bootstrap_for, now, truthy
from .key_material import (
    FORCE_RENEW_ANNOTATION,
    FORCE_REPLACE_ANNOTATION,
    operator_bootstrap,
    operator_security,
    plan_key_material,
)
from .schema_registry import reconcile_registry

log = logging.getLogger(__name__)


class ReconcileError(Exception):
    """The API server refused a write; the status says so and a later reconcile retries."""


def pod_state(pod: Mapping[str, Any]) -> PodState:
    meta = pod["metadata"]
    conditions = (pod.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    ordinal = int(meta["name"].rsplit("-", 1)[1])
    return PodState(meta["name"], ordinal, (meta.get("labels") or {}).get("controller-revision-hash", ""), ready,
                    bool(meta.get("deletionTimestamp")))


async def _annotate_racks(api: KubeApi, pods: list[dict[str, Any]], topology_key: str) -> str | None:
    """Copy each scheduled pod's node label onto the pod; a problem message if a node lacks it."""
    missing = []
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        annotations = pod["metadata"].get("annotations") or {}
        if not node_name or RACK_ANNOTATION in annotations:
            continue
        node = await api.get("Node", node_name)
        value = ((node or {}).get("metadata", {}).get("labels") or {}).get(topology_key)
        if not value:
            missing.append(node_name)
            continue
        await api.merge_patch("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"],
                              {"metadata": {"annotations": {RACK_ANNOTATION: value}}})
    if missing:
        return f"nodes {', '.join(sorted(missing))} have no {topology_key} label; their brokers wait for one"
    return None


async def _scale_and_balance(admin: AdminClient | None, snap: brokers.ClusterSnapshot | None, unreachable: str | None,
                             spec: ClusterSpec, current: int, voters: int, ready: int, rebalanced: int | None
                             ) -> tuple[int, int | None, tuple[str, str] | None, tuple[str, str] | None]:
    """The StatefulSet size to apply now, the new rebalancedReplicas, and activity/problem."""
    desired = spec.replicas
    if desired < current:
        removed = list(range(desired, current))
        if desired < voters:
            return current, rebalanced, None, (
                "ScaleDownBlocked", f"{desired} brokers are fewer than the {voters} metadata quorum voters, "
                                    "which must stay")
        if snap is None or admin is None:
            return current, rebalanced, None, (
                "ScaleDownBlocked", f"cannot drain brokers {removed} before removing them: "
                                    f"{unreachable or 'no broker is ready'}")
        if snap.reassigning:
            return current, rebalanced, ("DrainingBrokers", f"waiting for {len(snap.reassigning)} partition "
                                                            f"reassignments before removing brokers {removed}"), None
        try:
            plan = drain_plan(snap.assignments, removed, range(desired))
        except PlacementError as exc:
            return current, rebalanced, None, ("ScaleDownBlocked", str(exc))
        if plan:
            refusals = await brokers.reassign(admin, plan)
            if refusals:
                return current, rebalanced, None, ("ReassignmentRefused", "; ".join(refusals[:3]))
            return current, rebalanced, ("DrainingBrokers",
                                         f"moving {len(plan)} partitions off brokers {removed}"), None
        return desired, rebalanced, ("Scaling", f"removing drained brokers {removed}"), None
    if desired > current:
        return desired, rebalanced, ("Scaling", f"adding brokers {list(range(current, desired))}"), None
    # Same size: once every broker is up, spread partitions over them (after a scale-up).
    if rebalanced == desired or snap is None or admin is None:
        return desired, rebalanced, None, None
    if ready < desired or not set(range(desired)) <= set(snap.state.registered):
        return desired, rebalanced, None, None
    if snap.reassigning:
        return desired, rebalanced, ("Rebalancing", f"waiting for {len(snap.reassigning)} partition reassignments"), \
            None
    plan = spread_plan(snap.assignments, range(desired))
    if not plan:
        return desired, desired, None, None
    refusals = await brokers.reassign(admin, plan)
    if refusals:
        return desired, rebalanced, None, ("ReassignmentRefused", "; ".join(refusals[:3]))
    return desired, rebalanced, ("Rebalancing", f"moving {len(plan)} partitions to even out {desired} brokers"), None


async def reconcile_cluster(api: KubeApi, body: Mapping[str, Any], default_image: str) -> None:
    meta = body["metadata"]
    name, namespace, uid = meta["name"], meta["namespace"], meta["uid"]
    generation = int(meta.get("generation") or 0)
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    status: dict[str, Any] = dict(body.get("status") or {})
    previous = status.get("conditions") or []
    spec = ClusterSpec.from_dict(body.get("spec") or {})

    if truthy(annotations.get(PAUSE_ANNOTATION)):
        # Leave everything as it is; only say so.
        obs = ClusterObservation(spec.replicas, int(status.get("replicas") or 0), int(status.get("readyBrokers") or 0),
                                 None, paused=True)
        paused = [c for c in cluster_conditions(obs, generation, now(), previous) if c["type"] == "Reconciling"]
        kept = [c for c in previous if c.get("type") != "Reconciling"]
        await api.merge_patch("Cluster", name, namespace, {"status": {"conditions": kept + paused}},
                              subresource="status")
        return

    voters = int(status.get("quorumVoters") or initial_voters(spec.replicas))
    restart_token = status.get("restartToken")
    if truthy(annotations.get(MANUAL_ROLL_ANNOTATION)):
        restart_token = now()
        await api.merge_patch("Cluster", name, namespace, {"status": {"restartToken": restart_token}},
                              subresource="status")
        await api.merge_patch("Cluster", name, namespace, {"metadata": {"annotations": {MANUAL_ROLL_ANNOTATION: None}}})

    sts = await api.get("StatefulSet", name, namespace)
    current = int(sts["spec"]["replicas"]) if sts else spec.replicas
    ready = int(((sts or {}).get("status") or {}).get("readyReplicas") or 0)
    bootstrap = bootstrap_for(name, namespace, annotations, spec)
    security = None
    if spec.secured:
        # The operator's own admin calls: mutual TLS on the brokers' REPLICATION listener.
        security = await operator_security(api, name, namespace)
        if not annotations.get(BOOTSTRAP_ANNOTATION):
            bootstrap = operator_bootstrap(name, namespace)

    async with contextlib.AsyncExitStack() as stack:
        admin: AdminClient | None = None
        snap: brokers.ClusterSnapshot | None = None
        unreachable: str | None = None
        if (ready > 0 or annotations.get(BOOTSTRAP_ANNOTATION)) and (security is not None or not spec.secured):
            admin = await stack.enter_async_context(brokers.admin_client(bootstrap, security))
            try:
                snap = await brokers.snapshot(admin)
            except Exception as exc:  # any failure to ask is reported, never a crash loop
                unreachable = f"cannot query the brokers at {bootstrap}: {brokers.describe_error(exc)}"
                admin = None
        elif spec.secured and security is None:
            unreachable = "the operator's credentials for this cluster do not exist yet"
        else:
            unreachable = "no broker is ready"

        rebalanced = status.get("rebalancedReplicas")
        apply_replicas, rebalanced, activity, problem = await _scale_and_balance(
            admin, snap, unreachable, spec, current, voters, ready, rebalanced)

    inputs = BuildInputs(ClusterRef(name, namespace, uid), spec, default_image, voters, apply_replicas, restart_token)
    failure: ApiError | None = None
    key_material = None
    try:
        if not spec.secured:
            forget_ca_expiry(namespace, name)
        if spec.secured:
            # Certificates before the pods that mount them; renewed ones reach running brokers
            # through the mounted Secrets, and the brokers reload them without a restart.
            key_material = await plan_key_material(api, inputs, annotations, datetime.datetime.now(datetime.UTC))
            for secret in key_material.secrets:
                await api.apply(secret)
            if key_material.renewed:
                log.info("cluster %s/%s: %s CA made or renewed", namespace, name, " and ".join(key_material.renewed))
            done = {k: None for k in (FORCE_RENEW_ANNOTATION, FORCE_REPLACE_ANNOTATION) if annotations.get(k)}
            if done:
                await api.merge_patch("Cluster", name, namespace, {"metadata": {"annotations": done}})
            for kind, ca in key_material.status.items():
                CA_EXPIRY.labels(namespace, name, kind).set(
                    datetime.datetime.strptime(ca["notAfter"], "%Y-%m-%dT%H:%M:%SZ")
                    .replace(tzinfo=datetime.UTC).timestamp())
        for manifest in build_cluster(inputs):
            applied = await api.apply(manifest)
            if manifest["kind"] == "StatefulSet":
                sts = applied
    except ApiError as exc:
        failure = exc
        problem = ("ApplyFailed", f"the API server refused a manifest: {exc}")

    # The schema registry (spec.schemaRegistry): its objects applied, or removed once the spec is gone.
    registry = await reconcile_registry(api, inputs.ref, spec, default_image, status.get("schemaRegistry"),
                                        generation, now(), previous)

    pods: list[dict[str, Any]] = []
    if sts is not None and failure is None:
        pods = [p for p in await api.list("Pod", namespace, label_selector=selector_string(name))
                if pod_state(p).ordinal < apply_replicas]
        if spec.rack_topology_key:
            missing = await _annotate_racks(api, pods, spec.rack_topology_key)
            if missing and problem is None:
                problem = ("RackLabelMissing", missing)
        sts_status = sts.get("status") or {}
        if sts_status.get("observedGeneration") != sts["metadata"].get("generation"):
            activity = activity or ("Updating", "waiting for the StatefulSet controller to see the new spec")
        elif sts_status.get("updateRevision"):
            decision = next_pod_to_roll(
                [pod_state(p) for p in pods], sts_status["updateRevision"],
                safe=snap is not None and snap.state.under_replicated == 0, voters=voters,
                active_controller=snap.state.active_controller if snap else -1)
            if decision.pod:
                pod_uid = next(p["metadata"]["uid"] for p in pods if p["metadata"]["name"] == decision.pod)
                log.info("cluster %s/%s: restarting %s (%d pods on an old revision)", namespace, name,
                         decision.pod, len(decision.outdated))
                await api.delete("Pod", decision.pod, namespace, preconditions={"uid": pod_uid})
                activity = ("RollingRestart", f"restarting {decision.pod}; on an old revision: "
                                              f"{', '.join(decision.outdated)}")
            elif decision.outdated:
                activity = activity or ("RollingRestart", f"{decision.waiting}; on an old revision: "
                                                          f"{', '.join(decision.outdated)}")

    sts_status = (sts or {}).get("status") or {}
    obs = ClusterObservation(
        desired=spec.replicas, current=apply_replicas, ready=int(sts_status.get("readyReplicas") or 0),
        brokers=snap.state if snap else None, unreachable=unreachable, activity=activity, problem=problem)
    new_status: dict[str, Any] = {
        "observedGeneration": generation,
        "replicas": int(sts_status.get("replicas") or 0),
        "readyBrokers": obs.ready,
        "labelSelector": selector_string(name),
        "quorumVoters": voters,
        "clusterId": cluster_id(uid),
        "bootstrapServers": bootstrap,
        "activeController": snap.state.active_controller if snap else None,
        "underReplicatedPartitions": snap.state.under_replicated if snap else None,
        "offlinePartitions": snap.state.offline if snap else None,
        "restartToken": restart_token,
        "rebalancedReplicas": rebalanced,
        "conditions": cluster_conditions(obs, generation, now(), previous) + registry.conditions,
        "schemaRegistry": registry.status,  # None removes it (merge patch)
    }
    if key_material is not None:
        new_status["certificateAuthorities"] = key_material.status
    await api.merge_patch("Cluster", name, namespace, {"status": new_status}, subresource="status")
    if failure is not None:
        raise ReconcileError(str(failure))
    if registry.failure is not None:
        raise ReconcileError(f"schema registry: {registry.failure}")
