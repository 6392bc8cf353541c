"""A Cluster's schema registry (issue #20), reconciled as part of the Cluster: apply its ConfigMap,
Service and Deployment (``builders/schema_registry.py``) while ``spec.schemaRegistry`` is there,
delete the ones the Cluster owns once it is gone (or ``enabled: false``), and report
``status.schemaRegistry`` and the ``SchemaRegistryReady`` condition.

On a secured Cluster the registry connects as the User ``authentication.userRef`` names (read
here, to check its Cluster and type); with ``tls`` its keystore Secret is kept here (issued from
the Cluster CA, or copied from the user's Secret). The Secret keys the pods mount are hashed into
the pod template, as for Connect workers: a new password or certificate rolls the instances.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..builders.common import cluster_ca_secret_name
from ..builders.schema_registry import (
    RegistryBlocked,
    build_schema_registry,
    build_tls_secret,
    inputs_for,
    mounted_secret_keys,
    owned_objects,
    plan_tls_secret_data,
    registry_dns_names,
    registry_url,
    tls_secret_name,
)
from ..builders.secrets import decoded
from ..kubeapi import ApiError, KubeApi
from ..model import ClusterRef, ClusterSpec
from ..status import condition
from ..users import UserSpec
from .connect import secrets_version
from .key_material import cert_policy_of_spec

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


async def _user(api: KubeApi, ref: ClusterRef, spec: ClusterSpec) -> UserSpec | None:
    auth = spec.schema_registry.authentication if spec.schema_registry is not None else None
    if auth is None:
        return None
    found = await api.get("User", auth.user, ref.namespace)
    return None if found is None else UserSpec.from_resource(auth.user, found.get("spec") or {})


async def _tls_secret(api: KubeApi, ref: ClusterRef, spec: ClusterSpec, now: datetime.datetime
                      ) -> dict[str, Any]:
    """The https keystore Secret to apply; RegistryBlocked while what it comes from is missing."""
    registry = spec.schema_registry
    assert registry is not None and registry.tls
    current = decoded(await api.get("Secret", tls_secret_name(ref.name), ref.namespace))
    user_given = None
    cluster_ca: dict[str, bytes] = {}
    if registry.tls_secret is not None:
        user_given = decoded(await api.get("Secret", registry.tls_secret, ref.namespace))
    else:
        cluster_ca = decoded(await api.get("Secret", cluster_ca_secret_name(ref.name), ref.namespace))
    data = plan_tls_secret_data(cluster_ca, user_given, current, registry_dns_names(ref.name, ref.namespace), now,
                                cert_policy_of_spec(spec))
    if data is None:
        source = f"Secret {registry.tls_secret} (tls.crt and tls.key)" if registry.tls_secret \
            else f"the Cluster CA (Secret {cluster_ca_secret_name(ref.name)})"
        raise RegistryBlocked("SecretsMissing", f"spec.schemaRegistry.tls: waiting for {source}; the schema "
                              "registry is not deployed")
    return build_tls_secret(ref, data)


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
    registry = spec.schema_registry
    url = registry_url(ref.name, ref.namespace, registry.tls)
    deployment: dict[str, Any] | None = None
    try:
        inputs = inputs_for(ref, spec, default_image, await _user(api, ref, spec))
        assert inputs is not None
        if registry.tls:
            await api.apply(await _tls_secret(api, ref, spec, datetime.datetime.now(datetime.UTC)))
        version, missing = await secrets_version(api, ref.namespace, mounted_secret_keys(inputs))
        inputs = dataclasses.replace(inputs, credentials_version=version)
        for manifest in build_schema_registry(inputs):
            applied = await api.apply(manifest)
            if manifest["kind"] == "Deployment":
                deployment = applied
    except RegistryBlocked as exc:
        return RegistryOutcome({"url": None, "replicas": 0, "readyReplicas": 0}, cond(False, exc.reason, str(exc)))
    except ApiError as exc:
        return RegistryOutcome({"url": url, "replicas": 0, "readyReplicas": 0},
                               cond(False, "ApplyFailed", f"the API server refused a manifest: {exc}"), exc)
    counts = (deployment or {}).get("status") or {}
    replicas, ready = int(counts.get("replicas") or 0), int(counts.get("readyReplicas") or 0)
    desired = inputs.spec.replicas
    text = f"{ready}/{desired} instances ready at {url}"
    if missing:
        conditions = cond(False, "SecretsMissing", "the instances wait for Secret keys " + ", ".join(missing))
    elif desired == 0:
        conditions = cond(False, "ScaledToZero", "schemaRegistry.replicas is 0: no instance runs")
    elif ready < desired or replicas != desired:
        conditions = cond(False, "InstancesNotReady", text)
    else:
        conditions = cond(True, "RegistryReady", text)
    return RegistryOutcome({"url": url, "replicas": replicas, "readyReplicas": ready}, conditions)
