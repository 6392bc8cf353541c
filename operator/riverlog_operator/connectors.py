"""What a ``Connector`` resource (issue #19) asks of its Connect cluster, as pure data: the config
to PUT, the drift between it and what the REST API holds, the state change to make, and the
resource's status from the REST API's answer.

The reconcile handler (I/O: the Kubernetes API and the workers' REST API at
``builders.connect.rest_url``) applies these, as ``handlers/user.py`` applies ``users.py``:

- absent (``GET /connectors/<name>`` is 404): ``POST /connectors`` with ``create_request``
  (Connect 3.7+ takes the initial state with it, so a paused or stopped connector never runs);
- else ``PUT /connectors/<name>/config`` with ``connector_config`` when ``config_drift`` of it
  and ``GET /connectors/<name>/config`` is not empty, and ``PUT /connectors/<name>/<action>``
  for ``state_action`` of the spec's state and ``GET /connectors/<name>/status``;
- deleted: ``DELETE /connectors/<name>``;
- FAILED (the connector or a task) with ``spec.autoRestart``: ``POST /connectors/<name>/restart``
  (``ConnectRest.restart_failed``) when ``auto_restart`` says so.

The same functions serve a Mirror's three connectors (``builders/mirror.py`` gives their configs).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from riverlog.client.connect_rest import connector_path

from .connect_model import STATE_PAUSED, STATE_RUNNING, STATE_STOPPED, ConnectorSpec

# The CRD's states and the REST API's (ConnectorStatus, KIP-875's STOPPED).
REST_STATES = {STATE_RUNNING: "RUNNING", STATE_PAUSED: "PAUSED", STATE_STOPPED: "STOPPED"}
# PUT /connectors/<name>/<action> (pause and resume since Kafka 0.10, stop since 3.5).
ACTIONS = {STATE_RUNNING: "resume", STATE_PAUSED: "pause", STATE_STOPPED: "stop"}
# The keys that have fields of their own; the CRD refuses them in spec.config.
OWN_FIELDS = ("connector.class", "tasks.max", "name")


def connector_config(name: str, spec: ConnectorSpec) -> dict[str, str]:
    """The body of ``PUT /connectors/<name>/config``: spec.config with the class, tasks.max and
    the name (which must match the URL's)."""
    return {**spec.config, "connector.class": spec.class_name, "tasks.max": str(spec.tasks_max), "name": name}


def create_request(name: str, spec: ConnectorSpec) -> dict[str, Any]:
    """The body of ``POST /connectors``, created straight into the spec's state (KIP-980)."""
    return {"name": name, "config": connector_config(name, spec), "initial_state": REST_STATES[spec.state]}


def config_drift(desired: Mapping[str, str], live: Mapping[str, Any]) -> list[str]:
    """Keys whose live value differs from the desired one, or that only one side has, sorted.
    Connect's REST API returns every value as a string, as submitted."""
    return sorted(key for key in set(desired) | set(live)
                  if key not in desired or key not in live or str(live[key]) != desired[key])


def state_action(desired_state: str, live_state: str | None) -> str | None:
    """``"pause"``, ``"resume"`` or ``"stop"`` to move the connector from ``live_state`` (the
    REST API's ``connector.state``: RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED, RESTARTING)
    to ``desired_state`` (running, paused, stopped), or None when nothing is to be done.

    A connector that failed or has no worker yet is where its target state says, as far as a
    state change goes: restarting a FAILED one is another call (``POST .../restart``). Any
    target state can follow any other (PAUSED from STOPPED starts the tasks paused).
    """
    if live_state is None:
        return None  # not there yet: created with its initial state (create_request)
    if desired_state == STATE_RUNNING:
        return ACTIONS[STATE_RUNNING] if live_state in ("PAUSED", "STOPPED") else None
    if desired_state == STATE_PAUSED:
        return None if live_state == "PAUSED" else ACTIONS[STATE_PAUSED]
    if desired_state == STATE_STOPPED:
        return None if live_state == "STOPPED" else ACTIONS[STATE_STOPPED]
    raise ValueError(f"unknown connector state {desired_state!r}")


def action_path(name: str, action: str) -> str:
    """``PUT`` this path (no body) to pause, resume or stop a connector."""
    if action not in ACTIONS.values():
        raise ValueError(f"unknown connector action {action!r}")
    return connector_path(name, action)


def task_states(rest_status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``status.tasks`` from ``GET /connectors/<name>/status``: id, state, worker, and the first
    line of a failed task's trace (the whole trace is in the REST API and the worker's log)."""
    out = []
    for task in sorted(rest_status.get("tasks") or [], key=lambda t: int(t.get("id", 0))):
        item: dict[str, Any] = {"id": int(task.get("id", 0)), "state": str(task.get("state", "")),
                                "workerId": str(task.get("worker_id", ""))}
        trace = task.get("trace")
        if trace:
            item["trace"] = str(trace).splitlines()[0][:512]
        out.append(item)
    return out


def connector_ready(spec: ConnectorSpec, rest_status: Mapping[str, Any] | None,
                    drift: Sequence[str] = ()) -> tuple[bool, str, str]:
    """(ready, reason, message) for the Ready condition: the connector in the spec's state,
    every task too when it runs, and its config as the spec says."""
    if rest_status is None:
        return False, "ConnectorNotFound", "the Connect cluster does not have the connector (yet)"
    state = str((rest_status.get("connector") or {}).get("state", ""))
    tasks = task_states(rest_status)
    if state == "FAILED":
        trace = str((rest_status.get("connector") or {}).get("trace") or "").splitlines()
        return False, "ConnectorFailed", trace[0][:512] if trace else "the connector failed"
    failed = [t for t in tasks if t["state"] == "FAILED"]
    if failed:
        return False, "TasksFailed", f"{len(failed)} of {len(tasks)} tasks failed: " + \
            ", ".join(f"task {t['id']}: {t.get('trace', 'failed')}" for t in failed[:3])
    if state != REST_STATES[spec.state]:
        return False, "StateMismatch", f"the connector is {state or 'unknown'}, the spec says {spec.state}"
    if drift:
        return False, "ConfigDrift", "the live config differs from the spec in " + ", ".join(drift)
    if spec.state == STATE_RUNNING:
        running = sum(1 for t in tasks if t["state"] == "RUNNING")
        if not tasks or running < len(tasks):
            return False, "TasksNotRunning", f"{running}/{len(tasks)} tasks running"
        return True, "ConnectorRunning", f"{running} tasks running"
    return True, "Connector" + spec.state.capitalize(), f"the connector is {spec.state}"


def failed(rest_status: Mapping[str, Any] | None) -> bool:
    """The connector or one of its tasks is FAILED."""
    if rest_status is None:
        return False
    states = [str((rest_status.get("connector") or {}).get("state", ""))]
    states += [str(t.get("state", "")) for t in rest_status.get("tasks") or []]
    return "FAILED" in states


def restart_delay_seconds(count: int) -> int:
    """How long after the ``count``-th restart in a row the next may come: Strimzi's schedule,
    n(n+1) minutes (2, 6, 12, 20, 30, 42, 56), at most an hour; none before the first. A
    connector that fails for a reason a restart cannot fix is not restarted in a tight loop."""
    return 60 * min(count * (count + 1), 60)


def _parse_time(text: object) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


def auto_restart(spec: ConnectorSpec, rest_status: Mapping[str, Any] | None, previous: Mapping[str, Any] | None,
                 now: datetime.datetime) -> tuple[bool, dict[str, Any] | None]:
    """Whether to restart the connector now, and ``status.autoRestart`` afterwards (``count``
    restarts in a row, ``lastRestartTime``; None: nothing to write).

    Only a connector meant to run, with ``spec.autoRestart.enabled``, that is FAILED itself or
    has a FAILED task; the first restart at once, each next one ``restart_delay_seconds`` after
    the last, none past ``maxRestarts``. The count starts again once the connector has gone
    without failing for as long as its next wait would have been.
    """
    previous = dict(previous or {})
    count = int(previous.get("count") or 0)
    last = _parse_time(previous.get("lastRestartTime"))
    since = (now - last).total_seconds() if last is not None else float("inf")
    kept = previous or None
    if not spec.auto_restart or spec.state != STATE_RUNNING:
        return False, kept
    if not failed(rest_status):
        if count and since >= restart_delay_seconds(count):
            return False, {**previous, "count": 0}
        return False, kept
    if spec.max_restarts is not None and count >= spec.max_restarts:
        return False, kept
    if since < restart_delay_seconds(count):
        return False, kept
    return True, {"count": count + 1, "lastRestartTime": now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def connector_status(rest_status: Mapping[str, Any] | None, drift: Sequence[str]) -> dict[str, Any]:
    """The resource's status fields besides conditions and observedGeneration."""
    connector = (rest_status or {}).get("connector") or {}
    return {"connectorState": str(connector.get("state", "")) or None,
            "workerId": str(connector.get("worker_id", "")) or None,
            "tasks": task_states(rest_status or {}), "drift": list(drift)}
