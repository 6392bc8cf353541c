"""Loaded by every Python process of a Pod on the e2e test node (PYTHONPATH points here).

Pods share the machine's network namespace, so two brokers both listening on ``:9092`` would
collide. An IPv4 wildcard bind (``""``/``0.0.0.0``) is narrowed to the Pod's own loopback address,
which is what a per-pod network namespace would have made equivalent. Only Python programs are
covered; anything else binds as it likes. IPv6 wildcard binds are refused.
"""

from __future__ import annotations

import errno
import os
import socket
from typing import Any

_POD_IP = os.environ.get("RIVERLOG_E2E_POD_IP", "")
_original_bind = socket.socket.bind


def _bind(self: socket.socket, address: Any) -> None:
    if _POD_IP and self.family == socket.AF_INET6 and isinstance(address, tuple) and address[0] in ("", "::"):
        # No IPv6 pod address: refused as "not available", which asyncio's create_server treats as
        # the family being disabled (it keeps the IPv4 socket and goes on).
        raise OSError(errno.EADDRNOTAVAIL, "the e2e node gives pods no IPv6 address")
    if _POD_IP and self.family == socket.AF_INET and isinstance(address, tuple) and address[0] in ("", "0.0.0.0"):
        address = (_POD_IP, *address[1:])
    _original_bind(self, address)


_original_getaddrinfo = socket.getaddrinfo


def _getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> Any:
    # A passive lookup of the wildcard (asyncio's create_server with no host) answers only the
    # pod IP, so servers listen on IPv4 there and never try an IPv6 wildcard.
    if _POD_IP and flags & socket.AI_PASSIVE and host in (None, "", "0.0.0.0", "::"):
        return _original_getaddrinfo(_POD_IP, port, socket.AF_INET, type, proto, flags)
    return _original_getaddrinfo(host, port, family, type, proto, flags)


if _POD_IP:
    socket.getaddrinfo = _getaddrinfo
    socket.socket.bind = _bind  # type: ignore[method-assign,assignment]


def _narrow_uvloop() -> None:
    # uvloop resolves the wildcard in libuv, past the getaddrinfo patch above: its loop class is
    # replaced by one that names the pod IP when a server is asked for no host.
    try:
        import uvloop
    except ImportError:
        return

    class PodLoop(uvloop.Loop):
        async def create_server(self, *args: Any, **kwargs: Any) -> Any:
            if len(args) >= 2:  # (protocol_factory, host, port, ...) as aiohttp passes them
                if args[1] in (None, "", "0.0.0.0", "::"):
                    args = (args[0], _POD_IP, *args[2:])
            elif kwargs.get("host") in (None, "", "0.0.0.0", "::") and kwargs.get("sock") is None:
                kwargs["host"] = _POD_IP
            return await super().create_server(*args, **kwargs)

    uvloop.Loop = PodLoop  # type: ignore[misc]


if _POD_IP:
    _narrow_uvloop()
