"""SR1 and SR1I (issue #20, acceptance 7): how many requests a second Riverlog's schema registry
answers, phase by phase, with ``clients`` concurrent HTTP clients (aiohttp, one connection each,
in the benchmark's own process).

The registry under test is Riverlog's, either standalone (``riverlog schema-registry``, a process
of its own, on a Riverlog or an Apache Kafka broker: the same registry code, so the two columns
differ only in the broker under ``_schemas``) or inside the broker (``schema.registry.listeners``,
Riverlog only). Confluent's own registry is not on Maven Central, so it is not compared.

The phases, in this order, each a fixed list of requests (lookups pick their subject or id with a
seeded ``random.Random``, so every run asks the same questions):

- ``register_new``: a new Avro schema under each of ``subjects`` subjects. Every one is a write
  to ``_schemas`` (acks=all, then read back before the answer) made under the registry's write
  lock: one write at a time, whatever the concurrency.
- ``register_existing``: the same schemas again (the idempotent path: found, nothing written).
- ``get_by_id`` (``GET /schemas/ids/{id}``), ``get_latest`` (``GET
  /subjects/{s}/versions/latest``), ``lookup`` (``POST /subjects/{s}``: which version holds this
  schema; the body is parsed), ``compatibility`` (``POST
  /compatibility/subjects/{s}/versions/latest`` with a compatible evolution: parse and judge).

An answer other than 200, or an id or version not the expected one, fails the run: a fast wrong
answer is not a rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from support.brokers import BrokerProcess, free_port
from support.sr_registry import V1_JSON, RegistryProcess, http

from harness import systems

PHASES = ("register_new", "register_existing", "get_by_id", "get_latest", "lookup", "compatibility")
REQUEST_TIMEOUT_S = 60.0  # a write waits for acks=all and the read-back; a stuck one fails the run


def subject(i: int) -> str:
    return f"bench-{i:05d}-value"


def avro_schema(i: int, evolved: bool = False) -> str:
    """A small record schema of its own per subject (a distinct id each); ``evolved`` adds a field
    with a default, which BACKWARD (the default mode) accepts."""
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": f"tag{i}", "type": ["null", "string"], "default": None},
    ]
    if evolved:
        fields.append({"name": "note", "type": "string", "default": ""})
    return json.dumps({"type": "record", "name": f"Order{i}", "namespace": "bench", "fields": fields})


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: dict[str, Any] | None
    check: Callable[[Any], bool]  # the decoded answer is the right one


@dataclass(frozen=True)
class PhaseResult:
    requests: int
    seconds: float
    latencies_ms: list[float]

    def values(self, name: str) -> dict[str, float]:
        ordered = sorted(self.latencies_ms)
        return {f"{name}_s": self.requests / self.seconds, f"{name}_p50_ms": percentile(ordered, 0.50),
                f"{name}_p99_ms": percentile(ordered, 0.99)}


def percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank percentile of sorted values (the harness's other workloads do the same)."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def plan(subjects: int, lookups: int, seed: int) -> dict[str, list[Call]]:
    """Every phase's requests. Ids are not known before registering, so ``get_by_id`` takes them
    from ``register_new``'s answers: it is built by :func:`id_calls` later."""
    rng = random.Random(seed)
    registered: dict[str, list[Call]] = {
        phase: [Call("POST", f"/subjects/{subject(i)}/versions", {"schema": avro_schema(i)},
                     lambda body: isinstance(body, dict) and isinstance(body.get("id"), int))
                for i in range(subjects)]
        for phase in ("register_new", "register_existing")
    }
    picks = [rng.randrange(subjects) for _ in range(lookups)]
    return {
        **registered,
        "get_latest": [Call("GET", f"/subjects/{subject(i)}/versions/latest", None,
                            lambda body: body.get("version") == 1) for i in picks],
        "lookup": [Call("POST", f"/subjects/{subject(i)}", {"schema": avro_schema(i)},
                        lambda body: body.get("version") == 1) for i in picks],
        "compatibility": [Call("POST", f"/compatibility/subjects/{subject(i)}/versions/latest",
                               {"schema": avro_schema(i, evolved=True)},
                               lambda body: body.get("is_compatible") is True) for i in picks],
    }


def id_calls(ids: Sequence[int], lookups: int, seed: int) -> list[Call]:
    rng = random.Random(seed + 1)
    return [Call("GET", f"/schemas/ids/{rng.choice(ids)}", None, lambda body: "schema" in body)
            for _ in range(lookups)]


async def _drive(url: str, calls: Sequence[Call], clients: int) -> tuple[PhaseResult, list[Any]]:
    """``clients`` workers take the next call until none is left; every call's latency, and the
    answers in call order."""
    answers: list[Any] = [None] * len(calls)
    latencies: list[float] = []
    next_call = iter(range(len(calls)))
    headers = {"Content-Type": V1_JSON, "Accept": V1_JSON}
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout, headers=headers) as session:

        async def worker() -> None:
            for index in next_call:
                call = calls[index]
                sent = time.perf_counter()
                async with session.request(call.method, call.path, json=call.body) as response:
                    body = await response.json(content_type=None)
                    if response.status != 200 or not call.check(body):
                        raise AssertionError(f"{call.method} {call.path}: {response.status} {body}")
                latencies.append((time.perf_counter() - sent) * 1e3)
                answers[index] = body

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        seconds = time.perf_counter() - started
    return PhaseResult(len(calls), seconds, latencies), answers


def run_phases(url: str, subjects: int, lookups: int, clients: int, seed: int,
               on_phase: Callable[[str], None] = lambda name: None) -> dict[str, float]:
    """Every phase against the registry at ``url``; requests/s, p50 and p99 of each.
    ``on_phase(name)`` is called after each phase (the caller's CPU laps)."""
    calls = plan(subjects, lookups, seed)
    values: dict[str, float] = {}
    ids: list[int] = []
    for name in PHASES:
        phase_calls = id_calls(ids, lookups, seed) if name == "get_by_id" else calls[name]
        result, answers = asyncio.run(_drive(url, phase_calls, clients))
        if name == "register_new":
            ids = [answer["id"] for answer in answers]
            if len(set(ids)) != subjects:
                raise AssertionError(f"{subjects} new schemas got {len(set(ids))} distinct ids")
        elif name == "register_existing" and [answer["id"] for answer in answers] != ids:
            raise AssertionError("re-registering an existing schema answered another id")
        values.update(result.values(name))
        on_phase(name)
    return values


# --- the registry processes ------------------------------------------------------------------------

@dataclass(frozen=True)
class Registry:
    """A registry that answers, with its writer elected: its URL, the broker, and the pid whose
    CPU and memory are the registry's (the broker's own pid when it runs inside the broker)."""

    url: str
    broker: BrokerProcess
    pid: Callable[[], int | None]


@contextlib.contextmanager
def standalone(system: str, workdir: Path) -> Iterator[Registry]:
    """A broker of ``system`` and a ``riverlog schema-registry`` process on it."""
    with systems.single_broker(system, workdir / "broker") as broker:
        process = RegistryProcess(workdir / "registry", broker.bootstrap)
        try:
            process.start(timeout=systems.START_TIMEOUT)
            process.wait_writer_elected(timeout=60)
            yield Registry(process.url, broker, lambda: process.proc.pid if process.proc is not None else None)
        finally:
            process.kill()


@contextlib.contextmanager
def in_broker(workdir: Path) -> Iterator[Registry]:
    """A Riverlog broker with its registry inside (``schema.registry.listeners``)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with systems.single_broker("riverlog", workdir / "broker", {"schema.registry.listeners": url}) as broker:
        _wait_writer(url, timeout=60)
        yield Registry(url, broker, lambda: broker.pid)


def _wait_writer(url: str, timeout: float) -> None:
    """Until a write works: the embedded registry starts after the broker serves, then elects."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, body = http(url, "PUT", "/config/_probe_", {"compatibility": "BACKWARD"})
        except OSError as exc:
            status, body = 0, repr(exc)
        if status == 200:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the in-broker registry at {url} took no write in {timeout:.0f}s: {status} {body}")
        time.sleep(0.3)
