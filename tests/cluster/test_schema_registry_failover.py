"""Issue #20, acceptance 3: three registry instances on a three-broker cluster; the writer is
killed with SIGKILL while clients register schemas through every instance; another instance
takes over; no id is issued twice and every registered schema is readable from every instance."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from support.sr_registry import RegistryProcess, http

pytestmark = pytest.mark.cluster


def schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"R{n}", "fields": [{"name": f"f{n}", "type": "long"}]})


def writer_of(registries: list[RegistryProcess]) -> list[RegistryProcess]:
    out = []
    for registry in registries:
        if registry.running:
            status, text = http(registry.url, "GET", "/metrics")
            if status == 200 and "riverlog_schema_registry_writer 1.0" in text:
                out.append(registry)
    return out


def register_until_done(registries: list[RegistryProcess], n: int, deadline: float) -> int:
    """Register schema n under its own subject through an instance still up (going round them),
    retrying through the failover (a retry of a write that did land returns the same id: the
    subject already has that schema)."""
    last: object = None
    attempt = 0
    while time.monotonic() < deadline:
        alive = [r for r in registries if r.running] or registries
        url = alive[(n + attempt) % len(alive)].url
        attempt += 1
        try:
            status, body = http(url, "POST", f"/subjects/failover-{n}-value/versions", {"schema": schema(n)},
                                timeout=10)
        except OSError as exc:
            status, body = 0, repr(exc)
        if status == 200:
            return int(body["id"])
        last = (status, body)
        time.sleep(0.2)
    raise AssertionError(f"schema {n} not registered through {url}: {last}")


def test_writer_killed_while_registering(process_cluster_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster = process_cluster_factory(3, netns=False, overrides={"group.initial.rebalance.delay.ms": "0"})
    registries = [RegistryProcess(tmp_path / f"registry{i}", cluster.bootstrap, name=f"registry{i}")
                  for i in range(3)]
    try:
        for registry in registries:
            registry.start()
        registries[0].wait_writer_elected()
        deadline = time.monotonic() + 30
        while len(writer_of(registries)) != 1:
            assert time.monotonic() < deadline, "no single writer"
            time.sleep(0.2)
        (writer,) = writer_of(registries)

        ids: dict[int, int] = {}
        errors: list[BaseException] = []
        stop_at = time.monotonic() + 90

        def client(numbers: range) -> None:
            try:
                for n in numbers:
                    # Each client goes round the instances, the writer included until it dies.
                    ids[n] = register_until_done(registries, n, stop_at)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(range(i * 40, i * 40 + 40),)) for i in range(3)]
        for thread in threads:
            thread.start()
        while len(ids) < 20:
            time.sleep(0.05)
        writer.kill()  # SIGKILL: no goodbye to the group, nothing flushed
        killed_at = len(ids)
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        assert len(ids) == 120 and killed_at < 120

        # No id issued twice: 120 distinct schemas, 120 distinct ids.
        assert len(set(ids.values())) == 120, sorted(ids.values())
        survivors = [r for r in registries if r.running]
        assert len(survivors) == 2
        (new_writer,) = writer_of(survivors)
        assert new_writer is not writer
        # Every registered schema readable from every instance still up.
        for registry in survivors:
            for n, schema_id in ids.items():
                status, body = http(registry.url, "GET", f"/schemas/ids/{schema_id}")
                assert status == 200 and json.loads(body["schema"]) == json.loads(schema(n)), (registry.name, n)
                status, body = http(registry.url, "GET", f"/subjects/failover-{n}-value/versions/latest")
                assert status == 200 and body["id"] == schema_id
        # And a restarted instance reads them all back from _schemas.
        writer.start()
        for n, schema_id in ids.items():
            status, body = http(writer.url, "GET", f"/subjects/failover-{n}-value/versions/1")
            assert status == 200 and body["id"] == schema_id
    finally:
        for registry in registries:
            registry.kill()
