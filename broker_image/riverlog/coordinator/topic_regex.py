"""Regular expression subscriptions of KIP-848 consumer groups, evaluated by the coordinator.

Kafka compiles them with RE2/J and matches whole topic names; RE2 (``google-re2``) shares RE2/J's
syntax, where Python's ``re`` does not (no backreferences or lookarounds, RE2's classes). Internal
topics never match, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2

from ..controller.topic_names import INTERNAL_TOPICS


class InvalidRegex(ValueError):
    pass


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is the client's error, answered, not logged


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise InvalidRegex(reason.decode() if isinstance(reason, bytes) else str(reason)) from exc


def matching_topics(pattern: str, topics: Iterable[str]) -> list[str]:
    compiled = compile_regex(pattern)
    return [t for t in topics if t not in INTERNAL_TOPICS and compiled.fullmatch(t) is not None]
