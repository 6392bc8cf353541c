"""Helpers for tests driving Java consumer group members through ``tests/java/GroupMembers.java``
(a :class:`~support.java_programs.JavaSession`): waiting for a state of the members, bounded."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from support.java_programs import JavaSession

WAIT_S = 60.0


def wait_status(s: JavaSession, done: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """Ask for the members' ``status`` until ``done`` holds (at most WAIT_S seconds)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        status = s.call("status")
        if done(status):
            return status
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {status}"
        time.sleep(0.2)


def sharing(active: list[str], wanted: set[str]) -> Callable[[dict[str, Any]], bool]:
    """Every active member owns something and together they own exactly ``wanted``, once each."""

    def done(status: dict[str, Any]) -> bool:
        owned = [set(status["members"][name]["owned"]) for name in active]
        return all(owned) and set().union(*owned) == wanted and sum(map(len, owned)) == len(wanted)

    return done
