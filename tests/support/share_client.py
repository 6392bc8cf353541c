"""Helpers for tests that drive Java's KafkaShareConsumer through ``tests/java/ShareClient.java``
(a :class:`~support.java_programs.JavaSession`): one poll with its acknowledgements, and the
warm-up that makes a share group's share-partitions exist before the records a test counts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from support.java_programs import JavaSession

WAIT_S = 90.0
POLL_MS = 500


def poll(s: JavaSession, name: str, default: str = "accept", **rules: str) -> list[dict[str, Any]]:
    """One poll of consumer ``name``; every record is acknowledged with the type its value has in
    ``rules``, else ``default``, and committed. Fails on an acknowledgement error."""
    words = [f"{value}={ack}" for value, ack in rules.items()]
    answer = s.call("poll", name, POLL_MS, default, *words)
    assert answer["failed"] == [], answer
    records: list[dict[str, Any]] = answer["records"]
    return records


def warm_up(s: JavaSession, consumers: Sequence[str], topic: str, partitions: int,
            producer: JavaSession | None = None) -> None:
    """Produce and poll until a warm-up record of every partition was delivered: a share group
    starts at the log end (``share.auto.offset.reset`` latest), so only then does everything
    produced later reach it."""
    seen: set[int] = set()
    deadline = time.monotonic() + WAIT_S
    round_ = 0
    while seen != set(range(partitions)):
        assert time.monotonic() < deadline, f"warm-up records seen only from partitions {seen}"
        for p in range(partitions):
            (producer or s).call("produce", topic, p, f"warm-{round_}-{p}")
        for name in consumers:
            seen.update(r["partition"] for r in poll(s, name))
        round_ += 1
