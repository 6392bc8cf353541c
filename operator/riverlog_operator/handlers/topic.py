"""Reconcile a Topic over the Kafka protocol: create it, add partitions, keep its configs and
replication factor as the spec says, and delete it behind a finalizer (deletionPolicy).

The brokers' answer decides what is an error of the spec (shown in status, no retry loop:
the next spec change or periodic check tries again) and what is transient (retried).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from riverlog.client.admin import AdminClient
from riverlog.client.cluster import TopicInfo
from riverlog.client.errors import BrokerError
from riverlog.protocol.errors import ErrorCode

from .. import brokers
from ..kubeapi import KubeApi
from ..model import ClusterSpec, TopicSpec
from ..placement import PlacementError, replication_plan
from ..status import topic_ready
from .common import now
from .key_material import admin_endpoint

log = logging.getLogger(__name__)

# Answers that mean the spec asks for something the cluster refuses: a condition, not a retry.
SPEC_ERRORS = frozenset({
    ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.INVALID_PARTITIONS, ErrorCode.INVALID_REPLICATION_FACTOR,
    ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST,
    ErrorCode.POLICY_VIOLATION, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
})


class TopicRetry(Exception):
    """Transient: the cluster could not be reached or said "later"; kopf retries."""


async def _describe(admin: AdminClient, topic: str) -> TopicInfo | None:
    try:
        return (await admin.describe_topics([topic]))[0]
    except BrokerError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return None
        raise


async def _converge(admin: AdminClient, spec: TopicSpec, spec_changed: bool, cluster_size: int
                    ) -> tuple[TopicInfo, list[str], bool]:
    """Bring the topic to the spec. Returns its description, notes for the status message and
    whether it matches the spec (False: a difference the operator cannot fix)."""
    notes: list[str] = []
    in_sync = True
    topic = await _describe(admin, spec.topic_name)
    if topic is None:
        registered = len((await admin.describe_cluster()).brokers)
        if spec.replication_factor > registered:
            raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR, f"create topic '{spec.topic_name}'",
                              f"replication factor {spec.replication_factor} is larger than the {registered} "
                              "brokers of the cluster")
        await admin.create_topic(spec.topic_name, spec.partitions, spec.replication_factor, spec.config)
        notes.append("created")
        topic = await _describe(admin, spec.topic_name)
        assert topic is not None
        return topic, notes, True

    count = len(topic.partitions)
    if spec.partitions > count:
        await admin.create_partitions(spec.topic_name, spec.partitions)
        notes.append(f"partitions {count} -> {spec.partitions}")
    elif spec.partitions < count:
        in_sync = False
        notes.append(f"the topic has {count} partitions, more than the {spec.partitions} in the spec "
                     "(partitions cannot be removed; raise spec.partitions)")

    if topic.replication_factor != spec.replication_factor or any(
            len(p.replicas) != spec.replication_factor for p in topic.partitions):
        ongoing = {tp for tp in await admin.list_partition_reassignments() if tp[0] == spec.topic_name}
        if ongoing:
            notes.append(f"replication factor change under way ({len(ongoing)} partitions moving)")
        else:
            cluster = await admin.describe_cluster()
            everything = {(t.name, p.partition): list(p.replicas)
                          for t in await admin.list_topics(include_internal=True) for p in t.partitions}
            mine = {(spec.topic_name, p.partition): list(p.replicas) for p in topic.partitions}
            try:
                # Only the Cluster's own brokers (pod ordinals below its size): a broker being
                # drained or removed must not receive new replicas.
                members = [b.node_id for b in cluster.brokers if b.node_id < cluster_size]
                plan = replication_plan(mine, spec.replication_factor, members, everything)
            except PlacementError as exc:
                raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR, f"change the replication factor of "
                                  f"'{spec.topic_name}'", str(exc)) from None
            refusals = await brokers.reassign(admin, plan)
            if refusals:
                raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "reassign", "; ".join(refusals[:3]))
            notes.append(f"replication factor {topic.replication_factor} -> {spec.replication_factor} started")

    overrides = {e.name: e.value for e in await admin.describe_configs(spec.topic_name) if e.is_topic_override}
    to_set = {k: v for k, v in spec.config.items() if overrides.get(k) != v}
    to_delete = sorted(k for k in overrides if k not in spec.config)
    if to_set or to_delete:
        await admin.alter_configs(spec.topic_name, set=to_set, delete=to_delete)
        changed = ", ".join(sorted([*to_set, *to_delete]))
        # Without a spec change, someone changed the topic behind the operator's back.
        notes.append(f"reverted configs changed outside the operator: {changed}" if not spec_changed
                     else f"configs updated: {changed}")
    topic = await _describe(admin, spec.topic_name) or topic
    return topic, notes, in_sync


async def reconcile_topic(api: KubeApi, body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    generation = int(meta.get("generation") or 0)
    status: dict[str, Any] = dict(body.get("status") or {})
    previous = status.get("conditions") or []
    spec = TopicSpec.from_resource(name, body.get("spec") or {})
    spec_changed = status.get("observedGeneration") != generation

    async def write(ok: bool, reason: str, message: str, extra: Mapping[str, Any] | None = None) -> None:
        patch = {"observedGeneration": generation, "topicName": spec.topic_name,
                 "conditions": topic_ready(ok, reason, message, generation, now(), previous), **(extra or {})}
        await api.merge_patch("Topic", name, namespace, {"status": patch}, subresource="status")

    cluster = await api.get("Cluster", spec.cluster, namespace)
    if cluster is None:
        await write(False, "ClusterNotFound", f"no Cluster {spec.cluster!r} in namespace {namespace}")
        return
    bootstrap, security = await admin_endpoint(api, cluster)
    try:
        async with brokers.admin_client(bootstrap, security) as admin:
            topic, notes, in_sync = await _converge(admin, spec, spec_changed,
                                                    ClusterSpec.from_dict(cluster.get("spec") or {}).replicas)
    except BrokerError as exc:
        if exc.code in SPEC_ERRORS:
            await write(False, "InvalidSpec", str(exc))
            return
        await write(False, "BrokerError", str(exc))
        raise TopicRetry(str(exc)) from exc
    except brokers.UNREACHABLE_ERRORS as exc:
        message = f"cannot reach the brokers at {bootstrap}: {brokers.describe_error(exc)}"
        await write(False, "ClusterUnreachable", message)
        raise TopicRetry(message) from exc

    extra: dict[str, Any] = {"topicId": str(topic.topic_id), "partitions": len(topic.partitions),
                             "replicationFactor": topic.replication_factor}
    drift = [n for n in notes if n.startswith("reverted")]
    if drift:
        # Kept until the next correction: the Ready message moves on at the next check.
        extra["lastDrift"] = f"{now()}: {drift[0]}"
    if in_sync:
        await write(True, "TopicReady", "; ".join(notes) or "in sync with the spec", extra)
    else:
        await write(False, "DriftDetected", "; ".join(notes), extra)


async def delete_topic(api: KubeApi, body: Mapping[str, Any]) -> None:
    """Called before the finalizer goes: delete the Kafka topic unless deletionPolicy is Retain."""
    meta = body["metadata"]
    spec = TopicSpec.from_resource(meta["name"], body.get("spec") or {})
    if spec.deletion_policy == "Retain":
        log.info("topic %s/%s: deletionPolicy Retain, keeping %s", meta["namespace"], meta["name"], spec.topic_name)
        return
    cluster = await api.get("Cluster", spec.cluster, meta["namespace"])
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        return  # the whole cluster goes (or went): nothing to delete the topic from
    bootstrap, security = await admin_endpoint(api, cluster)
    try:
        async with brokers.admin_client(bootstrap, security) as admin:
            await admin.delete_topic(spec.topic_name)
    except BrokerError as exc:
        if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise TopicRetry(str(exc)) from exc
    except brokers.UNREACHABLE_ERRORS as exc:
        raise TopicRetry(f"cannot reach the brokers at {bootstrap} to delete {spec.topic_name}: "
                         f"{brokers.describe_error(exc)}") from exc
