"""Connector resources (issue #19), the pure side: what to PUT to the Connect REST API, the drift
between that and what the workers hold, the state changes, and the status from the REST API's
answers (shaped as Kafka 4.3's ``GET /connectors/<name>/status`` returns them)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from riverlog.client.connect_rest import restart_path
from riverlog_operator.connect_model import ConnectorSpec
from riverlog_operator.connectors import (
    action_path,
    auto_restart,
    config_drift,
    connector_config,
    connector_path,
    connector_ready,
    connector_status,
    create_request,
    failed,
    restart_delay_seconds,
    state_action,
)

pytestmark = pytest.mark.unit

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def spec(**fields: Any) -> ConnectorSpec:
    return ConnectorSpec.from_dict({"connectRef": {"name": "etl"}, "class": FILE_SOURCE, **fields})


def rest_status(state: str, *tasks: str, trace: str | None = None) -> dict[str, Any]:
    connector: dict[str, Any] = {"state": state, "worker_id": "10.0.0.7:8083"}
    if trace:
        connector["trace"] = trace
    return {"name": "lines", "connector": connector, "type": "source",
            "tasks": [{"id": i, "state": s, "worker_id": f"10.0.0.{i + 7}:8083"} for i, s in enumerate(tasks)]}


def test_spec_defaults_are_the_crds() -> None:
    assert spec() == ConnectorSpec(connect="etl", class_name=FILE_SOURCE, tasks_max=1, config={}, state="running")
    assert spec(tasksMax=4, state="paused", config={"file": "/tmp/in", "batch.size": 100}).config == \
        {"file": "/tmp/in", "batch.size": "100"}


def test_the_config_to_put_carries_class_tasks_and_name() -> None:
    desired = connector_config("lines", spec(tasksMax=2, config={"file": "/tmp/in", "topic": "lines"}))
    assert desired == {"file": "/tmp/in", "topic": "lines", "connector.class": FILE_SOURCE, "tasks.max": "2",
                       "name": "lines"}
    assert create_request("lines", spec(state="stopped")) == {
        "name": "lines", "config": connector_config("lines", spec()), "initial_state": "STOPPED"}


def test_drift_is_every_key_that_differs_or_is_on_one_side_only() -> None:
    desired = connector_config("lines", spec(config={"file": "/tmp/in", "topic": "lines"}))
    assert config_drift(desired, dict(desired)) == []
    live = {**desired, "topic": "other", "transforms": "x"}
    del live["file"]
    assert config_drift(desired, live) == ["file", "topic", "transforms"]
    # The REST API speaks strings; a number typed by someone else is the same value.
    assert config_drift({"tasks.max": "2"}, {"tasks.max": 2}) == []


@pytest.mark.parametrize(("desired", "live", "action"), [
    ("running", "RUNNING", None), ("running", "PAUSED", "resume"), ("running", "STOPPED", "resume"),
    ("running", "FAILED", None), ("running", "UNASSIGNED", None), ("running", "RESTARTING", None),
    ("paused", "RUNNING", "pause"), ("paused", "PAUSED", None), ("paused", "STOPPED", "pause"),
    ("paused", "FAILED", "pause"),
    ("stopped", "RUNNING", "stop"), ("stopped", "PAUSED", "stop"), ("stopped", "STOPPED", None),
    ("stopped", "UNASSIGNED", "stop"),
    ("running", None, None), ("stopped", None, None),  # absent: created in its initial state
])
def test_state_actions(desired: str, live: str | None, action: str | None) -> None:
    assert state_action(desired, live) == action


def test_state_action_refuses_an_unknown_state() -> None:
    with pytest.raises(ValueError):
        state_action("sleeping", "RUNNING")
    with pytest.raises(ValueError):
        action_path("lines", "delete")


def test_rest_paths_escape_the_name() -> None:
    assert action_path("lines", "pause") == "/connectors/lines/pause"
    assert connector_path("a b/c", "config") == "/connectors/a%20b%2Fc/config"


def test_status_from_the_rest_api() -> None:
    status = rest_status("RUNNING", "RUNNING", "FAILED")
    status["tasks"][1]["trace"] = "org.apache.kafka.connect.errors.ConnectException: boom\n\tat X.y(X.java:1)"
    assert connector_status(status, ["topic"]) == {
        "connectorState": "RUNNING", "workerId": "10.0.0.7:8083", "drift": ["topic"],
        "tasks": [{"id": 0, "state": "RUNNING", "workerId": "10.0.0.7:8083"},
                  {"id": 1, "state": "FAILED", "workerId": "10.0.0.8:8083",
                   "trace": "org.apache.kafka.connect.errors.ConnectException: boom"}]}
    # Gone: the fields are cleared (a merge patch removes the nulls).
    assert connector_status(None, []) == {"connectorState": None, "workerId": None, "tasks": [], "drift": []}


@pytest.mark.parametrize(("state", "status", "drift", "expected"), [
    ("running", rest_status("RUNNING", "RUNNING", "RUNNING"), [], (True, "ConnectorRunning")),
    ("running", rest_status("RUNNING", "RUNNING", "UNASSIGNED"), [], (False, "TasksNotRunning")),
    ("running", rest_status("RUNNING"), [], (False, "TasksNotRunning")),
    ("running", rest_status("RUNNING", "FAILED"), [], (False, "TasksFailed")),
    ("running", rest_status("FAILED", trace="java.lang.IllegalStateException: no file\n\tat"), [],
     (False, "ConnectorFailed")),
    ("running", rest_status("PAUSED", "PAUSED"), [], (False, "StateMismatch")),
    ("running", rest_status("RUNNING", "RUNNING"), ["file"], (False, "ConfigDrift")),
    ("paused", rest_status("PAUSED", "PAUSED"), [], (True, "ConnectorPaused")),
    ("stopped", rest_status("STOPPED"), [], (True, "ConnectorStopped")),
    ("running", None, [], (False, "ConnectorNotFound")),
])
def test_ready_condition(state: str, status: dict[str, Any] | None, drift: list[str],
                         expected: tuple[bool, str]) -> None:
    ready, reason, message = connector_ready(spec(state=state), status, drift)
    assert (ready, reason) == expected and message
    if reason == "ConnectorFailed":
        assert message == "java.lang.IllegalStateException: no file"


# --- auto restart -----------------------------------------------------------------------------

T0 = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def at(minutes: float) -> datetime.datetime:
    return T0 + datetime.timedelta(minutes=minutes)


def stamp(minutes: float) -> str:
    return at(minutes).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_failed_is_the_connector_or_a_task() -> None:
    assert failed(rest_status("FAILED")) and failed(rest_status("RUNNING", "RUNNING", "FAILED"))
    assert not failed(rest_status("RUNNING", "RUNNING")) and not failed(None)
    assert not failed(rest_status("RESTARTING", "UNASSIGNED"))
    # Only the failed tasks restart with the connector (KIP-745); the name is escaped.
    assert restart_path("a b") == "/connectors/a%20b/restart?includeTasks=true&onlyFailed=true"


def test_strimzis_backoff() -> None:
    assert [restart_delay_seconds(n) // 60 for n in range(10)] == [0, 2, 6, 12, 20, 30, 42, 56, 60, 60]


def test_auto_restart_only_when_asked_and_meant_to_run() -> None:
    broken = rest_status("RUNNING", "FAILED")
    assert auto_restart(spec(), broken, None, T0) == (False, None)
    assert auto_restart(spec(state="paused", autoRestart={"enabled": True}), broken, None, T0) == (False, None)
    # What was counted stays in the status while restarts are off.
    counted = {"count": 2, "lastRestartTime": stamp(0)}
    assert auto_restart(spec(), broken, counted, at(1)) == (False, counted)


def test_auto_restart_backs_off_then_starts_counting_again() -> None:
    on = spec(autoRestart={"enabled": True})
    broken, healthy = rest_status("RUNNING", "FAILED"), rest_status("RUNNING", "RUNNING")
    assert auto_restart(on, healthy, None, T0) == (False, None)
    # The first restart at once.
    restart, state = auto_restart(on, broken, None, T0)
    assert restart and state == {"count": 1, "lastRestartTime": stamp(0)}
    # Failed again: the second waits 2 minutes after the first, the third 6 after the second.
    assert auto_restart(on, broken, state, at(1.5)) == (False, state)
    restart, state = auto_restart(on, broken, state, at(2))
    assert restart and state == {"count": 2, "lastRestartTime": stamp(2)}
    assert not auto_restart(on, broken, state, at(7))[0]
    restart, state = auto_restart(on, broken, state, at(8))
    assert restart and state is not None and state["count"] == 3
    # Healthy, but not yet for as long as the next wait (12 minutes): the count stays.
    assert auto_restart(on, healthy, state, at(15)) == (False, state)
    restart, reset = auto_restart(on, healthy, state, at(20))
    assert not restart and reset == {"count": 0, "lastRestartTime": stamp(8)}
    # A later failure is a first one again: restarted at once.
    restart, state = auto_restart(on, broken, reset, at(21))
    assert restart and state == {"count": 1, "lastRestartTime": stamp(21)}


def test_auto_restart_stops_at_max_restarts() -> None:
    limited = spec(autoRestart={"enabled": True, "maxRestarts": 2})
    broken = rest_status("FAILED")
    state = {"count": 2, "lastRestartTime": stamp(0)}
    assert auto_restart(limited, broken, state, at(600)) == (False, state)
    assert auto_restart(spec(autoRestart={"enabled": True, "maxRestarts": 0}), broken, None, T0) == (False, None)
    assert auto_restart(limited, broken, {"count": 1, "lastRestartTime": stamp(0)}, at(2))[0]
