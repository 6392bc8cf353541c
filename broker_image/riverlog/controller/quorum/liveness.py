"""Fast fencing of brokers whose process is gone.

A broker is fenced when its heartbeats stop for ``broker.session.timeout.ms``. That timeout has
to cover pauses and network trouble, where the broker may come back; but when a broker's
process has died (kill -9, a crash, a deleted pod on a machine that kept its address), nothing
listens on its port any more and a TCP connection to it is refused at once. So when a heartbeat
is late, the active controller tries to connect to the broker's listener: refused means the
process is gone and the broker is fenced now, without waiting out the session; an accepted
connection (a paused process still has its socket: the kernel accepts for it) or a timeout (a
network partition) changes nothing, and the session timeout decides as before.
"""

from __future__ import annotations

import asyncio
import contextlib

from ..image import BrokerImage

# A heartbeat this many intervals overdue gets the broker's listener probed.
LATE_HEARTBEATS = 1.25
PROBE_TIMEOUT_S = 0.5
_ANY_ADDRESS = {"", "0.0.0.0", "::"}


def probe_address(broker: BrokerImage, listener: str | None) -> tuple[str, int] | None:
    """The registered address to probe (the inter-broker listener's), if it names a host."""
    ep = broker.endpoint(listener) or broker.endpoint()
    if ep is None or ep.host in _ANY_ADDRESS:
        return None
    return ep.host, ep.port


async def nothing_listens(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True only if a connection to ``host:port`` is refused; False if accepted, timed out or
    failed any other way (which proves nothing about the process)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except ConnectionRefusedError:
        return True
    except (TimeoutError, OSError):
        return False
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return False
