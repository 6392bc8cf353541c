"""Schema registry processes for the integration and cluster tiers."""

from __future__ import annotations

import base64
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.brokers import BrokerProcess, free_port, riverlog_env
from support.process_control import SignalledProcess

V1_JSON = "application/vnd.schemaregistry.v1+json"


class RegistryProcess(SignalledProcess):
    """``riverlog schema-registry`` on a free loopback port. With ``scheme="https"`` (TLS settings
    in ``extra``) the harness checks it with ``ca``; ``user_info`` (``user:password``) is what the
    harness's own requests authenticate with when basic auth is on."""

    def __init__(self, workdir: Path, bootstrap: str, *, name: str = "registry", topic: str = "_schemas",
                 extra: dict[str, str] | None = None, scheme: str = "http", ca: Path | None = None,
                 user_info: str | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.bootstrap = bootstrap
        self.port = free_port()
        self.topic = topic
        self.extra = extra or {}
        self.scheme = scheme
        self.context = ssl.create_default_context(cafile=str(ca)) if ca is not None else None
        self.auth = {"Authorization": "Basic " + base64.b64encode(user_info.encode()).decode()} if user_info else {}
        super().__init__(self.workdir / f"{name}.log")

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        """One request as the harness: its credentials and CA."""
        return http(self.url, method, path, body, headers={"Content-Type": V1_JSON, **self.auth},
                    context=self.context)

    def start(self, timeout: float = 60.0) -> RegistryProcess:
        cmd = [sys.executable, "-m", "riverlog", "schema-registry", "--bootstrap-server", self.bootstrap,
               "--listeners", self.url, "--set", f"kafkastore.topic={self.topic}"]
        for key, value in self.extra.items():
            cmd += ["--set", f"{key}={value}"]
        self._spawn(cmd, cwd=self.workdir, env=riverlog_env())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}\n{self.log_tail()}")
            try:
                status, _ = self.request("GET", "/")
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.kill()
        raise AssertionError(f"{self.name} did not answer within {timeout:.0f}s\n{self.log_tail()}")

    def wait_writer_elected(self, timeout: float = 30.0) -> None:
        """Until a write through this instance works (some instance is the elected writer)."""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.request("PUT", "/config/_probe_", {"compatibility": "BACKWARD"})
            if status == 200:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no writer after {timeout:.0f}s: {status} {body}\n{self.log_tail()}")
            time.sleep(0.3)

    def stop(self, timeout: float = 20.0) -> None:
        self.terminate()
        self.wait_exit(timeout)

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def http(url: str, method: str, path: str, body: object = None, *, raw: bytes | None = None,
         headers: dict[str, str] | None = None, timeout: float = 30.0,
         context: ssl.SSLContext | None = None) -> tuple[int, Any]:
    """One request; (status, decoded JSON body or text)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers=headers if headers is not None else {"Content-Type": V1_JSON})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, payload = exc.code, exc.read()
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode(errors="replace")


@contextmanager
def broker_with_registry(base: Path) -> Iterator[RegistryProcess]:
    """One broker and one registry on it, its writer elected; both stopped on exit."""
    broker = BrokerProcess(base / "broker", name="broker", overrides={"group.initial.rebalance.delay.ms": "0"})
    process = RegistryProcess(base / "registry", broker.bootstrap)
    try:
        broker.start()
        process.start()
        process.wait_writer_elected()
        yield process
    finally:
        process.stop()
        broker.close()
