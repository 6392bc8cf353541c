"""Reconcile a Connect (issue #19): resolve its Kafka endpoint, apply the workers' ConfigMap,
REST Service, the NetworkPolicy guarding that API, Deployment and PDB (``builders/connect.py``),
and report the Deployment's state.

The worker side here (``reconcile_workers``) serves a Mirror's own workers too
(``handlers/mirror.py``). Credentials are mounted from Secrets; their data is hashed into the
pod template's credentials-version annotation, so a rotated password or renewed certificate
rolls the workers (Java clients read key material once). A spec the operator cannot meet (a
missing Cluster or User, no matching listener) is a Ready=False condition, not a retry loop:
the periodic resync looks again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..builders.connect import (
    ConnectInputs,
    Endpoint,
    EndpointError,
    OperatorPeer,
    WorkerRef,
    build_connect,
    deployment_name,
    network_policy_name,
    resolve_endpoint,
    rest_url,
    selector_string,
)
from ..connect_model import ConnectSpec, KafkaEndpointSpec, SecretKeyRef
from ..connect_rest import ConnectRest, ConnectRestError, ConnectUnreachable
from ..kubeapi import ApiError, KubeApi
from ..model import ClusterSpec
from ..status import condition
from ..users import UserSpec
from .common import now

log = logging.getLogger(__name__)

# On a Connect or a Mirror: where the operator reaches the workers' REST API instead of their
# Service (an operator outside the cluster; the k8s tests' worker on loopback).
REST_URL_ANNOTATION = "riverlog.dev/connect-rest-url"


class ConnectRetry(Exception):
    """Transient: the API server refused a write; kopf retries."""


class SpecProblem(Exception):
    """The spec cannot be met as things are (reason, message for the Ready condition)."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        self.message = message
        super().__init__(message)


def worker_ref(kind: str, body: Mapping[str, Any]) -> WorkerRef:
    meta = body["metadata"]
    return WorkerRef(kind, meta["name"], meta["namespace"], meta["uid"])


def rest_url_of(body: Mapping[str, Any], ref: WorkerRef) -> str:
    """The REST API of a Connect's (or Mirror's) workers, as the operator reaches it."""
    return ((body["metadata"].get("annotations") or {}).get(REST_URL_ANNOTATION) or rest_url(ref)).rstrip("/")


def rest_overridden(body: Mapping[str, Any]) -> bool:
    return bool((body["metadata"].get("annotations") or {}).get(REST_URL_ANNOTATION))


async def resolve(api: KubeApi, spec: KafkaEndpointSpec, namespace: str) -> Endpoint:
    """The endpoint as the workers reach it (through the Cluster's bootstrap Service: the pods run
    in the cluster, so the Cluster's bootstrap-servers annotation, which is the operator's way in,
    does not apply)."""
    cluster_spec: ClusterSpec | None = None
    user_cluster: str | None = None
    if spec.cluster and not spec.bootstrap_servers:
        cluster = await api.get("Cluster", spec.cluster, namespace)
        if cluster is None:
            raise SpecProblem("ClusterNotFound", f"no Cluster {spec.cluster!r} in namespace {namespace}")
        cluster_spec = ClusterSpec.from_dict(cluster.get("spec") or {})
        user = spec.authentication.user if spec.authentication is not None else None
        if user:
            found = await api.get("User", user, namespace)
            if found is None:
                raise SpecProblem("UserNotFound", f"no User {user!r} in namespace {namespace}")
            user_cluster = UserSpec.from_resource(user, found.get("spec") or {}).cluster
    try:
        return resolve_endpoint(spec, namespace, cluster_spec, user_cluster=user_cluster)
    except EndpointError as exc:
        raise SpecProblem("InvalidEndpoint", str(exc)) from exc


async def credentials_version(api: KubeApi, namespace: str, endpoints: Sequence[Endpoint]
                              ) -> tuple[str | None, list[str]]:
    """A hash of every Secret key the workers mount (None when they mount none), and the keys
    not there yet (the pods cannot start without them)."""
    return await secrets_version(api, namespace, [ref for ep in endpoints
                                                  for ref in (ep.password, ep.keystore, ep.trusted_ca)
                                                  if ref is not None])


async def secrets_version(api: KubeApi, namespace: str, keys: Sequence[SecretKeyRef]) -> tuple[str | None, list[str]]:
    """A hash of the values of these Secret keys (None for no keys), and the keys not there."""
    refs = sorted({(ref.name, ref.key) for ref in keys})
    if not refs:
        return None, []
    digest = hashlib.sha256()
    missing = []
    secrets: dict[str, dict[str, Any]] = {}
    for name, key in refs:
        if name not in secrets:
            secrets[name] = (await api.get("Secret", name, namespace) or {}).get("data") or {}
        value = secrets[name].get(key)
        if value is None:
            missing.append(f"{name}/{key}")
        digest.update(f"{name}\0{key}\0{value or ''}\n".encode())
    return digest.hexdigest()[:16], missing


@dataclass(frozen=True)
class Workers:
    """What became of a Connect deployment in one pass."""

    desired: int
    replicas: int  # the Deployment's current size
    ready: int
    problem: tuple[str, str] | None = None  # (reason, message): why the workers cannot be (all) there
    failure: ApiError | None = None  # the API server refused a manifest: retry
    endpoints: tuple[Endpoint, ...] = ()  # as resolved (empty on a spec problem)

    def status(self, ref: WorkerRef, generation: int, ok: bool, reason: str, message: str,
               previous: list[dict[str, Any]]) -> dict[str, Any]:
        """The status fields a Connect and a Mirror share: their workers and a Ready condition."""
        return {
            "observedGeneration": generation,
            "replicas": self.replicas,
            "readyReplicas": self.ready,
            "labelSelector": selector_string(ref),
            "restApi": rest_url(ref),
            "conditions": [condition("Ready", ok, reason, message, generation, now(), previous)],
        }

    def ready_condition(self) -> tuple[bool, str, str]:
        if self.problem:
            return False, *self.problem
        text = f"{self.ready}/{self.desired} workers ready"
        if self.desired == 0:
            return False, "ScaledToZero", "replicas is 0: no worker runs"
        if self.ready < self.desired or self.replicas != self.desired:
            return False, "WorkersNotReady", text
        return True, "WorkersReady", text


def _counts(deployment: Mapping[str, Any] | None) -> tuple[int, int]:
    status = (deployment or {}).get("status") or {}
    return int(status.get("replicas") or 0), int(status.get("readyReplicas") or 0)


async def drop_network_policy(api: KubeApi, ref: WorkerRef) -> bool:
    """Delete the workers' NetworkPolicy when this resource owns one (made while the operator had
    policies on): with them off, one left behind would still isolate the workers. A policy of
    that name the resource does not own is someone else's and stays. True when one went."""
    found = await api.get("NetworkPolicy", network_policy_name(ref), ref.namespace)
    if found is None or ref.uid not in {o.get("uid") for o in found["metadata"].get("ownerReferences") or []}:
        return False
    # The uid precondition: never a policy made meanwhile by someone else under that name.
    deleted = await api.delete("NetworkPolicy", network_policy_name(ref), ref.namespace,
                               preconditions={"uid": found["metadata"]["uid"]})
    if deleted:
        log.info("%s %s/%s: deleted NetworkPolicy %s (Connect NetworkPolicies are off)", ref.kind, ref.namespace,
                 ref.name, network_policy_name(ref))
    return deleted


async def reconcile_workers(api: KubeApi, ref: WorkerRef, desired: int, endpoint_specs: Sequence[KafkaEndpointSpec],
                            make_inputs: Callable[[Sequence[Endpoint], str | None], ConnectInputs],
                            operator_peer: OperatorPeer | None) -> Workers:
    """Resolve the endpoints, apply the workers' manifests and read the Deployment back.
    ``make_inputs`` builds the builder's inputs from the resolved endpoints (in the order of
    ``endpoint_specs``) and the credentials version; ``operator_peer`` the operator's pods the
    REST API's NetworkPolicy lets in (None: no policy, and one left from before is deleted)."""
    try:
        endpoints = [await resolve(api, spec, ref.namespace) for spec in endpoint_specs]
    except SpecProblem as exc:
        replicas, ready = _counts(await api.get("Deployment", deployment_name(ref), ref.namespace))
        return Workers(desired, replicas, ready, (exc.reason, exc.message))
    version, missing = await credentials_version(api, ref.namespace, endpoints)
    inputs = make_inputs(endpoints, version)
    deployment: dict[str, Any] | None = None
    try:
        if operator_peer is None:
            await drop_network_policy(api, ref)
        for manifest in build_connect(inputs, operator_peer):
            applied = await api.apply(manifest)
            if manifest["kind"] == "Deployment":
                deployment = applied
    except ApiError as exc:
        replicas, ready = _counts(await api.get("Deployment", deployment_name(ref), ref.namespace))
        return Workers(desired, replicas, ready, ("ApplyFailed", f"the API server refused a manifest: {exc}"),
                       failure=exc, endpoints=tuple(endpoints))
    replicas, ready = _counts(deployment)
    problem = None
    if missing:
        problem = ("SecretsMissing", "the workers wait for Secret keys " + ", ".join(missing))
    return Workers(desired, replicas, ready, problem, endpoints=tuple(endpoints))


def workers_reachable(body: Mapping[str, Any], workers_ready: int) -> bool:
    """Whether the REST API can answer: some worker is ready, or the annotation names it."""
    return workers_ready > 0 or rest_overridden(body)


async def connector_plugins(url: str) -> list[dict[str, str]] | None:
    """``GET /connector-plugins`` (best effort: None when the workers do not answer)."""
    try:
        async with ConnectRest(url, timeout=5.0) as rest:
            found = await rest.plugins()
    except (ConnectUnreachable, ConnectRestError) as exc:
        log.debug("connector plugins from %s: %s", url, exc)
        return None
    return [{"class": str(p.get("class", "")), "type": str(p.get("type", "")), "version": str(p.get("version", ""))}
            for p in found]


async def reconcile_connect(api: KubeApi, body: Mapping[str, Any], default_image: str,
                            operator_peer: OperatorPeer | None) -> None:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    generation = int(meta.get("generation") or 0)
    previous = (body.get("status") or {}).get("conditions") or []
    spec = ConnectSpec.from_dict(body.get("spec") or {})
    ref = worker_ref("Connect", body)

    workers = await reconcile_workers(
        api, ref, spec.replicas, [spec.endpoint],
        lambda endpoints, version: ConnectInputs(ref, spec, default_image, endpoints[0],
                                                 credentials_version=version), operator_peer)
    status = workers.status(ref, generation, *workers.ready_condition(), previous)
    if workers.problem is None and workers_reachable(body, workers.ready):
        plugins = await connector_plugins(rest_url_of(body, ref))
        if plugins is not None:
            status["connectorPlugins"] = plugins
    await api.merge_patch("Connect", name, namespace, {"status": status}, subresource="status")
    if workers.failure is not None:
        raise ConnectRetry(str(workers.failure))
