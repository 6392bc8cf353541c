"""``schema.registry.listeners`` runs a registry instance inside the broker process (what
``make run`` uses): it creates ``_schemas``, elects itself writer and serves the REST API."""

from __future__ import annotations

import time

import pytest
from support.brokers import free_port
from support.sr_registry import http

pytestmark = pytest.mark.integration


def test_a_broker_property_starts_a_registry(broker_factory, broker_target: str) -> None:  # type: ignore[no-untyped-def]
    if broker_target == "kafka":
        pytest.fail("schema.registry.listeners is Riverlog's own broker property; Kafka has no equivalent")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    broker = broker_factory(overrides={"schema.registry.listeners": url, "group.initial.rebalance.delay.ms": "0"})
    deadline = time.monotonic() + 30
    while True:
        try:
            status, body = http(url, "PUT", "/config", {"compatibility": "FULL"})
        except OSError as exc:
            status, body = 0, exc
        if status == 200:
            break
        assert time.monotonic() < deadline, (status, body, broker.log_tail())
        time.sleep(0.3)
    assert body == {"compatibility": "FULL"}
    assert http(url, "GET", "/config") == (200, {"compatibilityLevel": "FULL"})
    assert http(url, "GET", "/subjects") == (200, [])
    log = broker.log_path.read_text()
    assert "schema registry ready" in log and f"at http://127.0.0.1:{port}" in log
    broker.stop()
    assert "shutting down broker" in broker.log_path.read_text()
