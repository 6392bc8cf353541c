"""Readiness probes as a kubelet runs them: httpGet, tcpSocket, exec, with thresholds."""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
from typing import Any

Obj = dict[str, Any]


def _port(value: int | str, container: Obj) -> int:
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for port in container.get("ports", []):
        if port.get("name") == value:
            return int(port["containerPort"])
    raise ValueError(f"no container port named {value}")


def run_probe(probe: Obj, container: Obj, pod_ip: str, container_pid: int | None) -> bool:
    """One attempt; True on success. Blocking (the agent calls it in a worker thread)."""
    timeout = float(probe.get("timeoutSeconds", 1))
    try:
        if "httpGet" in probe:
            spec = probe["httpGet"]
            conn_cls = http.client.HTTPSConnection if spec.get("scheme") == "HTTPS" else http.client.HTTPConnection
            conn = conn_cls(spec.get("host") or pod_ip, _port(spec["port"], container), timeout=timeout)
            try:
                headers = {h["name"]: h["value"] for h in spec.get("httpHeaders", [])}
                conn.request("GET", spec.get("path", "/"), headers=headers)
                return 200 <= conn.getresponse().status < 400
            finally:
                conn.close()
        if "tcpSocket" in probe:
            spec = probe["tcpSocket"]
            with socket.create_connection((spec.get("host") or pod_ip, _port(spec["port"], container)), timeout):
                return True
        if "exec" in probe:
            if container_pid is None:
                return False
            # In the container's mount namespace, so it sees the same volumes and /etc/hosts.
            argv = ["nsenter", "-t", str(container_pid), "-m", "-u", "--", *probe["exec"]["command"]]
            return subprocess.run(argv, timeout=timeout, capture_output=True).returncode == 0
    except (OSError, ValueError, http.client.HTTPException, subprocess.TimeoutExpired):
        return False
    return False


class ProbeState:
    """Period, initial delay and success/failure thresholds of one container's readiness probe."""

    def __init__(self, probe: Obj | None, started: float) -> None:
        self.probe = probe
        self.ready = False
        self._next = started + float((probe or {}).get("initialDelaySeconds", 0))
        self._successes = 0
        self._failures = 0

    def due(self, now: float) -> bool:
        return self.probe is not None and now >= self._next

    def record(self, ok: bool, now: float) -> None:
        assert self.probe is not None
        self._next = now + float(self.probe.get("periodSeconds", 10))
        if ok:
            self._failures = 0
            self._successes += 1
            if self._successes >= int(self.probe.get("successThreshold", 1)):
                self.ready = True
        else:
            self._successes = 0
            self._failures += 1
            if self._failures >= int(self.probe.get("failureThreshold", 3)):
                self.ready = False


def monotonic() -> float:
    return time.monotonic()
