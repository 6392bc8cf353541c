"""A Cluster's schema registry (issue #20), reconciled as part of the Cluster: apply its ConfigMap,
Service and Deployment (``builders/schema_registry.py``) while ``spec.schemaRegistry`` is there,
delete the ones the Cluster owns once it is gone (or ``enabled: false``), and report
``status.schemaRegistry`` and the ``SchemaRegistryReady`` condition."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..builders.schema_registry import (
    RegistryBlocked,
    build_schema_registry,
    inputs_for,
    owned_objects,
    registry_url,
)
from ..kubeapi import ApiError, KubeApi
from ..model import ClusterRef, ClusterSpec
from ..status import condition

log = logging.getLogger(__name__)

CONDITION = "SchemaRegistryReady"


@dataclass(frozen=True)
class RegistryOutcome:
    """What the Cluster's status gets: ``status`` for ``status.schemaRegistry`` (None: no registry,
    the field is removed), ``conditions`` (none without a registry)."""

    status: dict[str, Any] | None = None
    conditions: list[dict[str, Any]] = field(default_factory=list)
    failure: ApiError | None = None


async def remove_registry(api: KubeApi, ref: ClusterRef) -> list[str]:
    """Delete the registry's objects that this Cluster owns (a same-named object of someone
    else's stays); the names deleted."""
    gone = []
    for kind, name in owned_objects(ref.name):
        found = await api.get(kind, name, ref.namespace)
        if found is None or ref.uid not in {o.get("uid") for o in found["metadata"].get("ownerReferences") or []}:
            continue
        # The uid precondition: never an object made meanwhile under that name by someone else.
        if await api.delete(kind, name, ref.namespace, preconditions={"uid": found["metadata"]["uid"]}):
            gone.append(f"{kind} {name}")
    if gone:
        log.info("cluster %s/%s: schema registry removed (%s)", ref.namespace, ref.name, ", ".join(gone))
    return gone


async def reconcile_registry(api: KubeApi, ref: ClusterRef, spec: ClusterSpec, default_image: str,
                             previous_status: Mapping[str, Any] | None, generation: int, now: str,
                             previous: Sequence[Mapping[str, Any]]) -> RegistryOutcome:
    """One pass over the registry. ``previous_status`` is ``status.schemaRegistry`` as it was: with
    no registry in the spec, objects are looked for (and deleted) only when it says one was made."""

    def cond(ok: bool, reason: str, message: str) -> list[dict[str, Any]]:
        return [condition(CONDITION, ok, reason, message, generation, now, previous)]

    if spec.schema_registry is None:
        if previous_status is not None:
            try:
                await remove_registry(api, ref)
            except ApiError as exc:
                # Kept in the status, so the next pass looks again.
                return RegistryOutcome(dict(previous_status), failure=exc)
        return RegistryOutcome()
    url = registry_url(ref.name, ref.namespace)
    try:
        inputs = inputs_for(ref, spec, default_image)
    except RegistryBlocked as exc:
        return RegistryOutcome({"url": None, "replicas": 0, "readyReplicas": 0},
                               cond(False, "KafkaSecurityUnsupported", str(exc)))
    assert inputs is not None
    deployment: dict[str, Any] | None = None
    try:
        for manifest in build_schema_registry(inputs):
            applied = await api.apply(manifest)
            if manifest["kind"] == "Deployment":
                deployment = applied
    except ApiError as exc:
        return RegistryOutcome({"url": url, "replicas": 0, "readyReplicas": 0},
                               cond(False, "ApplyFailed", f"the API server refused a manifest: {exc}"), exc)
    counts = (deployment or {}).get("status") or {}
    replicas, ready = int(counts.get("replicas") or 0), int(counts.get("readyReplicas") or 0)
    desired = inputs.spec.replicas
    text = f"{ready}/{desired} instances ready at {url}"
    if desired == 0:
        conditions = cond(False, "ScaledToZero", "schemaRegistry.replicas is 0: no instance runs")
    elif ready < desired or replicas != desired:
        conditions = cond(False, "InstancesNotReady", text)
    else:
        conditions = cond(True, "RegistryReady", text)
    return RegistryOutcome({"url": url, "replicas": replicas, "readyReplicas": ready}, conditions)
