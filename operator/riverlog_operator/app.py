"""Kopf wiring: settings, handlers for Cluster, Topic, User, Connect, Connector and Mirror, metrics,
peering.

Importing this module registers the handlers in kopf's default registry; ``__main__`` runs
them. Every handler calls one level-triggered reconcile function (``handlers/``).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from . import GROUP, VERSION, metrics
from .handlers.cluster import ReconcileError, reconcile_cluster
from .handlers.common import STATE
from .handlers.connect import ConnectRetry, reconcile_connect
from .handlers.connector import ConnectorRetry, delete_connector, reconcile_connector
from .handlers.mirror import delete_mirror, reconcile_mirror
from .handlers.topic import TopicRetry, delete_topic, reconcile_topic
from .handlers.user import UserRetry, delete_user, reconcile_user
from .kubeapi import ApiError, KubeApi

log = logging.getLogger(__name__)

PEERING_NAME = "riverlog-operator"
RESYNC_SECONDS = float(os.environ.get("RIVERLOG_OPERATOR_RESYNC_SECONDS", "10"))
TOPIC_RESYNC_SECONDS = float(os.environ.get("RIVERLOG_OPERATOR_TOPIC_RESYNC_SECONDS", "30"))
# Connectors and Mirrors: state, tasks and drift change on the workers without any event here.
CONNECTOR_RESYNC_SECONDS = float(os.environ.get("RIVERLOG_OPERATOR_CONNECTOR_RESYNC_SECONDS",
                                                str(TOPIC_RESYNC_SECONDS)))
RETRY_SECONDS = float(os.environ.get("RIVERLOG_OPERATOR_RETRY_SECONDS", "5"))


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Kopf's own bookkeeping goes into annotations under our domain, not into status (the CRD's
    # structural schema would prune an unknown status.kopf and kopf would loop).
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    port = int(os.environ.get("RIVERLOG_OPERATOR_METRICS_PORT", "8080"))
    if port:
        metrics.serve(port, os.environ.get("RIVERLOG_OPERATOR_METRICS_HOST", "0.0.0.0"))
    STATE.kube()  # credentials load now, so a bad kubeconfig fails at start
    try:
        policies = STATE.connect_network_policy()
    except ValueError as exc:
        # Permanent: the operator stops rather than run Connect workers with a guard it cannot build.
        raise kopf.PermanentError(str(exc)) from exc
    # Once, here: whether Connect and Mirror REST APIs are guarded, and if not why.
    (log.info if policies.peer is not None else log.warning)("%s", policies.note)
    if not settings.peering.standalone and settings.peering.clusterwide:
        await _ensure_peering(api_name=settings.peering.name)


async def _ensure_peering(api_name: str) -> None:
    """Kopf patches its peering object but never creates it; do that once."""
    api = STATE.kube()
    if await api.get("ClusterKopfPeering", api_name) is None:
        try:
            await api.create({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
                              "metadata": {"name": api_name}})
        except ApiError as exc:
            if exc.status != 409:  # another replica was faster
                raise


@kopf.on.cleanup()
async def cleanup(**_: Any) -> None:
    if STATE.api is not None:
        await STATE.api.close()
        STATE.api = None


async def _cluster(body: kopf.Body) -> None:
    async with STATE.lock(body["metadata"]["uid"]):
        with metrics.timed("Cluster"):
            try:
                # Kopf's body is a live view; reconcile from a fresh read so a queued event
                # never acts on an old spec.
                fresh = await STATE.kube().get("Cluster", body["metadata"]["name"], body["metadata"]["namespace"])
                if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                    return
                await reconcile_cluster(STATE.kube(), fresh, STATE.default_image)
            except (ReconcileError, ApiError) as exc:
                raise kopf.TemporaryError(str(exc), delay=RETRY_SECONDS) from exc


# Clusters with a pod-triggered reconcile already waiting for the lock: a burst of pod events
# (deletion, recreation, readiness) needs one more pass, not one per event.
_POD_TRIGGERED: set[tuple[str, str]] = set()


async def _cluster_of_pod(namespace: str, cluster: str) -> None:
    key = (namespace, cluster)
    if key in _POD_TRIGGERED:
        return
    _POD_TRIGGERED.add(key)
    try:
        body = await STATE.kube().get("Cluster", cluster, namespace)
        if body is None:
            return
        async with STATE.lock(body["metadata"]["uid"]):
            _POD_TRIGGERED.discard(key)  # events from now on need a pass after this one
            fresh = await STATE.kube().get("Cluster", cluster, namespace)
            if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                return
            with metrics.timed("Cluster"):
                await reconcile_cluster(STATE.kube(), fresh, STATE.default_image)
    finally:
        _POD_TRIGGERED.discard(key)


Reconcile = Callable[[KubeApi, Mapping[str, Any]], Awaitable[None]]


async def _reconcile_fresh(kind: str, body: kopf.Body, reconcile: Reconcile,
                           retry: tuple[type[Exception], ...]) -> None:
    """Reconcile the object as it is now (kopf's body may be stale), one at a time per object;
    ``retry`` errors (and the API server's) make kopf try again later."""
    transient: tuple[type[Exception], ...] = (*retry, ApiError)
    async with STATE.lock(body["metadata"]["uid"]):
        with metrics.timed(kind):
            try:
                fresh = await STATE.kube().get(kind, body["metadata"]["name"], body["metadata"]["namespace"])
                if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                    return
                await reconcile(STATE.kube(), fresh)
            except transient as exc:
                raise kopf.TemporaryError(str(exc), delay=RETRY_SECONDS) from exc


async def _topic(body: kopf.Body) -> None:
    await _reconcile_fresh("Topic", body, reconcile_topic, (TopicRetry,))


@kopf.on.resume(GROUP, VERSION, "clusters")
@kopf.on.create(GROUP, VERSION, "clusters")
@kopf.on.update(GROUP, VERSION, "clusters")
async def cluster_changed(body: kopf.Body, **_: Any) -> None:
    await _cluster(body)


@kopf.on.delete(GROUP, VERSION, "clusters", optional=True)
async def cluster_deleted(body: kopf.Body, **_: Any) -> None:
    # Owner references delete what the Cluster made; only the operator's own metrics remain.
    # optional: no finalizer is added for this (a missed deletion leaves a stale series only).
    metrics.forget_ca_expiry(body["metadata"]["namespace"], body["metadata"]["name"])


@kopf.timer(GROUP, VERSION, "clusters", interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
async def cluster_resync(body: kopf.Body, **_: Any) -> None:
    # Rolling restarts, drains and status follow pods and brokers, which change without any
    # event on the Cluster: look again periodically.
    await _cluster(body)


@kopf.on.event("", "v1", "pods", labels={"app.kubernetes.io/managed-by": "riverlog-operator",
                                         "app.kubernetes.io/component": "broker"})
async def broker_pod_event(body: kopf.Body, **_: Any) -> None:
    # A broker pod went away, came back or changed readiness: the status (Degraded, ready
    # brokers) and the next rolling-restart step follow now rather than at the next resync.
    meta = body["metadata"]
    cluster = (meta.get("labels") or {}).get("riverlog.dev/cluster")
    if not cluster:
        return
    try:
        await _cluster_of_pod(meta["namespace"], cluster)
    except (ReconcileError, ApiError) as exc:
        log.warning("cluster %s/%s: reconcile after a pod event failed (the resync retries): %s",
                    meta["namespace"], cluster, exc)


@kopf.on.resume(GROUP, VERSION, "topics")
@kopf.on.create(GROUP, VERSION, "topics")
@kopf.on.update(GROUP, VERSION, "topics")
async def topic_changed(body: kopf.Body, **_: Any) -> None:
    await _topic(body)


@kopf.timer(GROUP, VERSION, "topics", interval=TOPIC_RESYNC_SECONDS, initial_delay=TOPIC_RESYNC_SECONDS)
async def topic_resync(body: kopf.Body, **_: Any) -> None:
    # Drift: someone changed the topic with Kafka's tools; put it back and say so.
    await _topic(body)


@kopf.on.delete(GROUP, VERSION, "topics")
async def topic_deleted(body: kopf.Body, **_: Any) -> None:
    await _clean_up("TopicDeletion", body, delete_topic, (TopicRetry,))


async def _clean_up(kind: str, body: kopf.Body, clean_up: Reconcile, retry: tuple[type[Exception], ...]) -> None:
    """Before a finalizer goes (kopf's body is the last state there is); ``retry`` errors (and the
    API server's) keep the finalizer and make kopf try again later."""
    transient: tuple[type[Exception], ...] = (*retry, ApiError)
    async with STATE.lock(body["metadata"]["uid"]):
        with metrics.timed(kind):
            try:
                await clean_up(STATE.kube(), body)
            except transient as exc:
                raise kopf.TemporaryError(str(exc), delay=RETRY_SECONDS) from exc


def peering_priority() -> int:
    """Distinct per replica: kopf pauses every replica when two share the top priority."""
    configured = os.environ.get("RIVERLOG_OPERATOR_PRIORITY")
    return int(configured) if configured else random.randint(1, 1 << 30)


async def _user(body: kopf.Body) -> None:
    await _reconcile_fresh("User", body, reconcile_user, (UserRetry,))


@kopf.on.resume(GROUP, VERSION, "users")
@kopf.on.create(GROUP, VERSION, "users")
@kopf.on.update(GROUP, VERSION, "users")
async def user_changed(body: kopf.Body, **_: Any) -> None:
    await _user(body)


@kopf.timer(GROUP, VERSION, "users", interval=TOPIC_RESYNC_SECONDS, initial_delay=TOPIC_RESYNC_SECONDS)
async def user_resync(body: kopf.Body, **_: Any) -> None:
    # ACLs or quotas changed with Kafka's tools, or a certificate due for renewal: put it right.
    await _user(body)


@kopf.on.delete(GROUP, VERSION, "users")
async def user_deleted(body: kopf.Body, **_: Any) -> None:
    await _clean_up("UserDeletion", body, delete_user, (UserRetry,))


# --- Kafka Connect (issue #19) ------------------------------------------------------------------


async def _reconcile_connect(api: KubeApi, body: Mapping[str, Any]) -> None:
    await reconcile_connect(api, body, STATE.default_connect_image, STATE.connect_network_policy().peer)


async def _reconcile_mirror(api: KubeApi, body: Mapping[str, Any]) -> None:
    await reconcile_mirror(api, body, STATE.default_connect_image, STATE.connect_network_policy().peer)


async def _connect(body: kopf.Body) -> None:
    await _reconcile_fresh("Connect", body, _reconcile_connect, (ConnectRetry,))


@kopf.on.resume(GROUP, VERSION, "connects")
@kopf.on.create(GROUP, VERSION, "connects")
@kopf.on.update(GROUP, VERSION, "connects")
async def connect_changed(body: kopf.Body, **_: Any) -> None:
    await _connect(body)


@kopf.timer(GROUP, VERSION, "connects", interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
async def connect_resync(body: kopf.Body, **_: Any) -> None:
    # Ready workers follow the Deployment, rotated credentials the Secrets: neither is an event
    # on the Connect. (Owner references delete the workers with it: no finalizer.)
    await _connect(body)


async def _connector(body: kopf.Body) -> None:
    await _reconcile_fresh("Connector", body, reconcile_connector, (ConnectorRetry,))


@kopf.on.resume(GROUP, VERSION, "connectors")
@kopf.on.create(GROUP, VERSION, "connectors")
@kopf.on.update(GROUP, VERSION, "connectors")
async def connector_changed(body: kopf.Body, **_: Any) -> None:
    await _connector(body)


@kopf.timer(GROUP, VERSION, "connectors", interval=CONNECTOR_RESYNC_SECONDS,
            initial_delay=CONNECTOR_RESYNC_SECONDS)
async def connector_resync(body: kopf.Body, **_: Any) -> None:
    # State and tasks change on the workers; a config changed through the REST API is drift.
    await _connector(body)


@kopf.on.delete(GROUP, VERSION, "connectors")
async def connector_deleted(body: kopf.Body, **_: Any) -> None:
    await _clean_up("ConnectorDeletion", body, delete_connector, (ConnectorRetry,))


async def _mirror(body: kopf.Body) -> None:
    await _reconcile_fresh("Mirror", body, _reconcile_mirror, (ConnectRetry, ConnectorRetry))


@kopf.on.resume(GROUP, VERSION, "mirrors")
@kopf.on.create(GROUP, VERSION, "mirrors")
@kopf.on.update(GROUP, VERSION, "mirrors")
async def mirror_changed(body: kopf.Body, **_: Any) -> None:
    await _mirror(body)


@kopf.timer(GROUP, VERSION, "mirrors", interval=CONNECTOR_RESYNC_SECONDS, initial_delay=CONNECTOR_RESYNC_SECONDS)
async def mirror_resync(body: kopf.Body, **_: Any) -> None:
    await _mirror(body)


@kopf.on.delete(GROUP, VERSION, "mirrors")
async def mirror_deleted(body: kopf.Body, **_: Any) -> None:
    # The connectors' configs live in the workers' config topic, which outlives the Deployment.
    await _clean_up("MirrorDeletion", body, delete_mirror, (ConnectorRetry,))
