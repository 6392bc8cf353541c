"""Running a server in the foreground until SIGTERM or SIGINT (the broker, a dedicated
controller, the dev cluster): start, wait for a signal, stop cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


async def run_until_signalled(start: Callable[[], Awaitable[object]], stop: Callable[[], Awaitable[object]],
                              what: str) -> None:
    await start()
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    log.info("shutting down %s", what)
    await stop()
