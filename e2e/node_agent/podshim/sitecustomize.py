"""Loaded by every Python process of a Pod on the e2e test node (PYTHONPATH points here).

Pods share the machine's network namespace, so two brokers both listening on ``:9092`` would
collide. A wildcard bind (``""``/``0.0.0.0``) is narrowed to the Pod's own loopback address,
which is what a per-pod network namespace would have made equivalent. Only Python programs are
covered; anything else binds as it likes.
"""

from __future__ import annotations

import os
import socket
from typing import Any

_POD_IP = os.environ.get("RIVERLOG_E2E_POD_IP", "")
_original_bind = socket.socket.bind


def _bind(self: socket.socket, address: Any) -> None:
    if _POD_IP and self.family == socket.AF_INET and isinstance(address, tuple) and address[0] in ("", "0.0.0.0"):
        address = (_POD_IP, *address[1:])
    _original_bind(self, address)


if _POD_IP:
    socket.socket.bind = _bind  # type: ignore[method-assign,assignment]
