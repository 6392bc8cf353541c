"""Authorization denials: logged once per (principal, resource) per interval, always counted.

A client retrying a denied request (librdkafka retries Metadata every few hundred milliseconds)
would otherwise fill the log with one line per attempt; the count, labelled only by resource
type and operation so a client cannot grow the series, shows the rate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("riverlog.authorizer")

LOG_INTERVAL_S = 60.0
MAX_REMEMBERED = 10000  # (principal, resource) pairs whose last log time is kept


class DenialLog:
    def __init__(self, count: Callable[[str, str], None], clock: Callable[[], float],
                 interval_s: float = LOG_INTERVAL_S) -> None:
        self._count = count  # (resource type, operation) -> metric increment
        self._clock = clock
        self._interval = interval_s
        self._last: dict[tuple[str, str], float] = {}

    def denied(self, principal: str, host: str, operation: str, resource_type: str, name: str) -> None:
        self._count(resource_type, operation)
        key = (principal, f"{resource_type}:{name}")
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            return
        if len(self._last) >= MAX_REMEMBERED:
            self._last.clear()  # forgetting only means one more line per pair
        self._last[key] = now
        log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s "
                 "(further denials of this principal on this resource are counted, not logged, for %.0fs)",
                 principal, operation, host, resource_type, name, self._interval)


__all__ = ["LOG_INTERVAL_S", "DenialLog"]
