"""Reconcile a Mirror (issue #19): its own Connect workers on the target cluster (the Connect
handler's ``reconcile_workers`` with ``builders/mirror.py``'s inputs) and MirrorMaker 2's three
connectors on them (the Connector handler's ``converge_connector`` with
``mirror_connector_configs``), each connector's state in ``status.connectors``. Behind a
finalizer, deleting the Mirror deletes its connectors; owner references remove the workers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..builders.connect import OperatorPeer
from ..builders.mirror import CHECKPOINT_CONNECTOR, CONNECTORS, mirror_connector_configs, mirror_worker_inputs
from ..connect_model import STATE_RUNNING, ConnectorSpec, MirrorSpec
from ..connect_rest import ConnectRest, ConnectRestError, ConnectUnreachable
from ..connectors import OWN_FIELDS, connector_ready
from ..kubeapi import KubeApi
from .connect import ConnectRetry, reconcile_workers, rest_url_of, worker_ref, workers_reachable
from .connector import ConnectorRetry, converge_connector, delete_connectors, rest_problem

log = logging.getLogger(__name__)


def connector_spec(mirror: str, config: Mapping[str, str]) -> ConnectorSpec:
    """A mirror connector's config as a ConnectorSpec, so ``connectors.py`` plans it as any
    other (``connector_config`` of it gives ``config`` back)."""
    return ConnectorSpec(connect=mirror, class_name=config["connector.class"], tasks_max=int(config["tasks.max"]),
                         config={k: v for k, v in config.items() if k not in OWN_FIELDS}, state=STATE_RUNNING)


async def reconcile_mirror(api: KubeApi, body: Mapping[str, Any], default_image: str,
                           operator_peer: OperatorPeer | None) -> None:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    generation = int(meta.get("generation") or 0)
    status_now: dict[str, Any] = dict(body.get("status") or {})
    previous = status_now.get("conditions") or []
    spec_changed = status_now.get("observedGeneration") != generation
    spec = MirrorSpec.from_dict(body.get("spec") or {})
    ref = worker_ref("Mirror", body)

    workers = await reconcile_workers(
        api, ref, spec.replicas, [spec.source.endpoint, spec.target.endpoint],
        lambda endpoints, version: mirror_worker_inputs(ref, spec, endpoints[0], endpoints[1], default_image,
                                                        version), operator_peer)
    ok, reason, message = workers.ready_condition()
    states: dict[str, str] = {}
    retry: str | None = None
    if workers.problem is None and workers_reachable(body, workers.ready):
        source, target = workers.endpoints
        url = rest_url_of(body, ref)
        problems: list[str] = []
        drifted: list[str] = []
        try:
            async with ConnectRest(url) as rest:
                for connector, config in mirror_connector_configs(spec, source, target).items():
                    cspec = connector_spec(name, config)
                    rest_status, drift = await converge_connector(rest, connector, cspec, spec_changed)
                    states[connector] = str((rest_status or {}).get("connector", {}).get("state", "")) or "UNKNOWN"
                    c_ok, c_reason, c_message = connector_ready(cspec, rest_status)
                    if not c_ok and connector == CHECKPOINT_CONNECTOR and not (rest_status or {}).get("tasks") \
                            and states[connector] == "RUNNING":
                        # MirrorCheckpointConnector starts no task while no consumer group matches.
                        c_ok = True
                    if not c_ok:
                        problems.append(f"{connector}: {c_reason}: {c_message}")
                    drifted += [f"{connector}.{key}" for key in drift]
        except (ConnectUnreachable, ConnectRestError) as exc:
            reason, message, transient = rest_problem(exc, url)
            ok = False
            if transient:
                retry = message
        else:
            if problems:
                ok, reason, message = False, "ConnectorsNotReady", "; ".join(problems)
            elif ok:
                reason, message = "MirrorRunning", f"{message}; {', '.join(CONNECTORS)} running"
            if drifted:
                message += "; put back config changed outside the operator: " + ", ".join(drifted)
    elif workers.problem is None and ok is False:
        message += "; the connectors are configured once a worker is ready"

    status = workers.status(ref, generation, ok, reason, message, previous)
    if states:
        status["connectors"] = states
    await api.merge_patch("Mirror", name, namespace, {"status": status}, subresource="status")
    if workers.failure is not None:
        raise ConnectRetry(str(workers.failure))
    if retry is not None:
        raise ConnectorRetry(retry)


async def delete_mirror(api: KubeApi, body: Mapping[str, Any]) -> None:
    """Before the finalizer goes: delete the three connectors from the Mirror's workers (their
    configs live in the workers' config topic on the target, which outlives the Deployment)."""
    meta = body["metadata"]
    ref = worker_ref("Mirror", body)
    ready = int((body.get("status") or {}).get("readyReplicas") or 0)
    if not workers_reachable(body, ready):
        log.warning("mirror %s/%s: no worker runs; not deleting its connectors from the workers", meta["namespace"],
                    meta["name"])
        return
    await delete_connectors(rest_url_of(body, ref), list(CONNECTORS))

