"""Wall-clock time in milliseconds, as Kafka's records, retention and sessions count it.

One definition for the whole broker: timestamps written to logs, retention ages and group
session deadlines must all agree on what "now" is.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
