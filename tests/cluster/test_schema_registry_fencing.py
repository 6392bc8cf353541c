"""A writer frozen (SIGSTOP) through an election and then resumed must not issue an id the new
writer issued meanwhile: its stale writes carry an old writer epoch, every reader ignores them,
and it answers an error (which clients retry) instead of a duplicate id."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from support.sr_registry import RegistryProcess, http

pytestmark = pytest.mark.cluster


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "x", "type": "long"}]})


def is_writer(registry: RegistryProcess) -> bool:
    status, text = http(registry.url, "GET", "/metrics", timeout=5)
    return status == 200 and "riverlog_schema_registry_writer 1.0" in text


def wait_until(condition, what: str, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_resumed_paused_writer_issues_no_duplicate_id(broker_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(overrides={"group.initial.rebalance.delay.ms": "0"})
    first = RegistryProcess(tmp_path / "a", broker.bootstrap, name="a").start()
    first.wait_writer_elected()
    second = RegistryProcess(tmp_path / "b", broker.bootstrap, name="b").start()
    try:
        wait_until(lambda: is_writer(first) or is_writer(second), "a writer")
        writer, other = (first, second) if is_writer(first) else (second, first)
        assert http(writer.url, "POST", "/subjects/before/versions", {"schema": schema("Before")})[0] == 200

        writer.pause()
        wait_until(lambda: is_writer(other), "the other instance takes over", timeout=40)
        status, body = http(other.url, "POST", "/subjects/during/versions", {"schema": schema("During")})
        assert status == 200, body
        during_id = body["id"]

        # Resume the old writer with a write already waiting on its socket: it may take the
        # write before its next heartbeat tells it that it lost the election.
        answers: list[tuple[int, object]] = []
        request = threading.Thread(target=lambda: answers.append(http(
            writer.url, "POST", "/subjects/after/versions", {"schema": schema("After")}, timeout=40)))
        request.start()
        time.sleep(0.3)
        writer.resume()
        request.join(60)
        (status, body), = answers
        # Either fenced (50001: its stale write was ignored) or forwarded to the new writer.
        assert status == 200 or (status, body["error_code"]) == (500, 50001), body  # type: ignore[index]
        if status != 200:
            status, body = http(other.url, "POST", "/subjects/after/versions", {"schema": schema("After")})
            assert status == 200, body
        after_id = body["id"]  # type: ignore[index]
        assert after_id != during_id

        # Every instance agrees: three schemas, three ids, each the schema registered.
        for registry in (first, second):
            wait_until(lambda r=registry: http(r.url, "GET", "/subjects")[1] == ["after", "before", "during"],
                       f"{registry.name} sees all three subjects")
            for subject, name in (("before", "Before"), ("during", "During"), ("after", "After")):
                status, found = http(registry.url, "GET", f"/subjects/{subject}/versions/latest")
                assert status == 200 and json.loads(found["schema"]) == json.loads(schema(name))
            ids = [http(registry.url, "GET", f"/subjects/{s}/versions/1")[1]["id"]
                   for s in ("before", "during", "after")]
            assert len(set(ids)) == 3, ids
    finally:
        for registry in (first, second):
            registry.resume()
            registry.kill()
