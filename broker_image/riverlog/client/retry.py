"""Retrying an operation while the cluster's routing settles (leader moves, new topics)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .cluster import Cluster
from .errors import STALE_METADATA_CODES, BrokerError, BrokerUnreachableError, ConnectionClosedError

T = TypeVar("T")


class Final(Exception):
    """Raised inside an attempt to stop retrying: wraps an error no retry can fix."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


async def with_retries(cluster: Cluster, attempt: Callable[[], Awaitable[T]], timeout: float) -> T:
    """Run ``attempt`` until it succeeds; on stale-routing errors and broken connections refresh
    metadata and try again with exponential backoff, until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    backoff = 0.05
    while True:
        try:
            return await attempt()
        except Final as final:
            raise final.error from None
        except BrokerError as exc:
            if exc.code not in STALE_METADATA_CODES or time.monotonic() + backoff > deadline:
                raise
        except (ConnectionClosedError, BrokerUnreachableError):
            if time.monotonic() + backoff > deadline:
                raise
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 1.0)
        await cluster.refresh_metadata([])
