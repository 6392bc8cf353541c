"""Reconcile a Connector (issue #19) through its Connect's REST API: create it in the spec's
state, keep its config as the spec says (a difference without a spec change is drift: reported
in ``status.drift`` and put back), pause, resume or stop it, restart it when it or a task
FAILED and ``spec.autoRestart`` says so (counted in ``status.autoRestart``), and report its state
and tasks; behind a finalizer, deleting the Connector deletes the connector from the workers. The
decisions are ``connectors.py``'s; this is the I/O around them, shared with the Mirror handler.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Mapping
from typing import Any

from ..connect_model import ConnectorSpec
from ..connect_rest import ConnectRest, ConnectRestError, ConnectUnreachable
from ..connectors import (
    REST_STATES,
    auto_restart,
    config_drift,
    connector_config,
    connector_ready,
    connector_status,
    create_request,
    state_action,
)
from ..kubeapi import KubeApi
from ..status import condition
from .common import now
from .connect import rest_url_of, worker_ref, workers_reachable

log = logging.getLogger(__name__)

# After a create or a state change, how long to wait for the REST status to show the new state
# (it follows asynchronously) before writing it; the periodic resync sees the rest.
SETTLE_POLLS = 6
SETTLE_INTERVAL = 0.5


class ConnectorRetry(Exception):
    """Transient: the workers did not answer or said "later" (rebalancing); kopf retries."""


def _live_state(rest_status: Mapping[str, Any] | None) -> str | None:
    if rest_status is None:
        return None
    return str((rest_status.get("connector") or {}).get("state", "")) or None


async def converge_connector(rest: ConnectRest, name: str, spec: ConnectorSpec, spec_changed: bool
                             ) -> tuple[dict[str, Any] | None, list[str]]:
    """Bring one connector to the spec. Returns its REST status afterwards and the drift found
    (config keys that differed without a spec change; they are put back)."""
    desired = connector_config(name, spec)
    live = await rest.config(name)
    drift: list[str] = []
    acted = False
    if live is None:
        log.info("connector %s: creating (%s)", name, spec.state)
        await rest.create(create_request(name, spec))
        acted = True
    else:
        differing = config_drift(desired, live)
        if differing:
            if not spec_changed:
                drift = differing
                log.warning("connector %s: config changed outside the operator (%s); putting it back", name,
                            ", ".join(differing))
            await rest.put_config(name, desired)
        action = state_action(spec.state, _live_state(await rest.status(name)))
        if action:
            log.info("connector %s: %s", name, action)
            await rest.act(name, action)
            acted = True
    rest_status = await rest.status(name)
    if acted:
        for _ in range(SETTLE_POLLS):
            if _live_state(rest_status) == REST_STATES[spec.state]:
                break
            await asyncio.sleep(SETTLE_INTERVAL)
            rest_status = await rest.status(name)
    return rest_status, drift


async def restart_if_failed(rest: ConnectRest, name: str, spec: ConnectorSpec, rest_status: dict[str, Any] | None,
                            previous: Mapping[str, Any] | None, now: datetime.datetime
                            ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Restart the connector and its FAILED tasks when ``auto_restart`` says so. Returns its
    REST status afterwards and ``status.autoRestart`` (None: nothing to write)."""
    restart, restarts = auto_restart(spec, rest_status, previous, now)
    if restart:
        assert restarts is not None
        log.warning("connector %s: FAILED; restarting it and its failed tasks (restart %d in a row)", name,
                    restarts["count"])
        await rest.restart_failed(name)
        rest_status = await rest.status(name)
    return rest_status, restarts


def rest_problem(exc: Exception, url: str) -> tuple[str, str, bool]:
    """(reason, message, retry) for a REST failure."""
    if isinstance(exc, ConnectUnreachable):
        return "ConnectUnreachable", f"the Connect REST API at {url} did not answer: {exc}", True
    assert isinstance(exc, ConnectRestError)
    if exc.status == 400:
        return "InvalidConfig", exc.message, False
    return "RestError", str(exc), exc.transient


async def reconcile_connector(api: KubeApi, body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    generation = int(meta.get("generation") or 0)
    status: dict[str, Any] = dict(body.get("status") or {})
    previous = status.get("conditions") or []
    spec = ConnectorSpec.from_dict(body.get("spec") or {})
    spec_changed = status.get("observedGeneration") != generation

    async def write(ok: bool, reason: str, message: str, extra: Mapping[str, Any] | None = None) -> None:
        patch = {"conditions": [condition("Ready", ok, reason, message, generation, now(), previous)],
                 **(extra or {})}
        await api.merge_patch("Connector", name, namespace, {"status": patch}, subresource="status")

    connect = await api.get("Connect", spec.connect, namespace)
    if connect is None:
        await write(False, "ConnectNotFound", f"no Connect {spec.connect!r} in namespace {namespace}")
        return
    ref = worker_ref("Connect", connect)
    ready_workers = int((connect.get("status") or {}).get("readyReplicas") or 0)
    if not workers_reachable(connect, ready_workers):
        await write(False, "ConnectNotReady", f"no worker of Connect {spec.connect!r} is ready")
        return
    url = rest_url_of(connect, ref)
    try:
        async with ConnectRest(url) as rest:
            rest_status, drift = await converge_connector(rest, name, spec, spec_changed)
            rest_status, restarts = await restart_if_failed(rest, name, spec, rest_status, status.get("autoRestart"),
                                                            datetime.datetime.now(datetime.UTC))
    except (ConnectUnreachable, ConnectRestError) as exc:
        reason, message, retry = rest_problem(exc, url)
        await write(False, reason, message)
        if retry:
            raise ConnectorRetry(message) from exc
        return
    ok, reason, message = connector_ready(spec, rest_status)
    if drift:
        message += "; put back config changed outside the operator: " + ", ".join(drift)
    extra = {"observedGeneration": generation, **connector_status(rest_status, drift)}
    if restarts is not None:
        extra["autoRestart"] = restarts
    await write(ok, reason, message, extra)


async def delete_connector(api: KubeApi, body: Mapping[str, Any]) -> None:
    """Before the finalizer goes: delete the connector from its Connect's workers. Nothing to do
    when the Connect is gone or going; when none of its workers runs (and no REST URL is
    annotated) nothing can be asked, and the finalizer goes with a warning."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec = ConnectorSpec.from_dict(body.get("spec") or {})
    connect = await api.get("Connect", spec.connect, namespace)
    if connect is None or connect["metadata"].get("deletionTimestamp"):
        return
    ready_workers = int((connect.get("status") or {}).get("readyReplicas") or 0)
    if not workers_reachable(connect, ready_workers):
        log.warning("connector %s/%s: no worker of Connect %s runs; not deleting it from the workers", namespace,
                    name, spec.connect)
        return
    await delete_connectors(rest_url_of(connect, worker_ref("Connect", connect)), [name])


async def delete_connectors(url: str, names: list[str]) -> None:
    try:
        async with ConnectRest(url) as rest:
            for name in names:
                if await rest.delete(name):
                    log.info("connector %s deleted from %s", name, url)
    except (ConnectUnreachable, ConnectRestError) as exc:
        raise ConnectorRetry(f"cannot delete connectors {', '.join(names)} at {url}: {exc}") from exc
