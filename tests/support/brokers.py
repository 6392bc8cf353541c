"""Broker processes for integration tests: Riverlog or, for comparison, Apache Kafka.

Every integration test talks to a broker through :class:`BrokerProcess`. Which broker runs is
chosen by the environment variable ``RIVERLOG_TEST_TARGET``:

- ``riverlog`` (default): ``python -m riverlog broker --set key=value ...`` from this repo;
- ``kafka``: Apache Kafka from Maven Central jars via ``bench/kafka_dist.py``.

Both accept Kafka's property names for overrides, so one test runs against either and the
Kafka run shows the test itself is right.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import sys
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from support.process_control import STOP_TIMEOUT, SignalledProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
BROKER_IMAGE = REPO_ROOT / "broker_image"
KAFKA_DIST_PATH = REPO_ROOT / "bench" / "kafka_dist.py"

TARGET_ENV = "RIVERLOG_TEST_TARGET"
TARGETS = ("riverlog", "kafka")

# Riverlog-only settings that Kafka does not know; Kafka would only warn about them, but keeping
# its config file clean keeps its log readable.
RIVERLOG_ONLY_KEYS = frozenset({"metrics.port", "min.incremental.fetch.session.eviction.ms",
                                "bootstrap.scram.credentials"})

DEFAULT_START_TIMEOUT = 30.0

# The single-node settings bench/kafka_dist.py gives a Kafka broker that change what a test
# waits for, given to a Riverlog broker too, so one test sees the same broker on both targets:
# no 3 s delay before a new group's first rebalance, three partitions (not fifty) per internal
# topic. A test's own overrides still win.
SINGLE_NODE_TEST_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


class BrokerStartError(RuntimeError):
    """The broker did not become ready; the message carries the tail of its log."""


def _load_kafka_dist() -> ModuleType:
    # bench/ is a folder of scripts, not a package; load the module from its file so tests
    # and benchmarks share one implementation of "install and run Kafka".
    name = "riverlog_bench_kafka_dist"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, KAFKA_DIST_PATH)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {KAFKA_DIST_PATH}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


kafka_dist = _load_kafka_dist()


def selected_target() -> str:
    target = os.environ.get(TARGET_ENV, "riverlog").strip().lower() or "riverlog"
    if target not in TARGETS:
        raise ValueError(f"{TARGET_ENV}={target!r}; expected one of {', '.join(TARGETS)}")
    return target


def free_port() -> int:
    return int(kafka_dist.free_port("127.0.0.1"))


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1, chosen together (see kafka_dist.free_ports)."""
    return list(kafka_dist.free_ports(count, "127.0.0.1"))


def start_timeout() -> float:
    return float(os.environ.get("RIVERLOG_BROKER_START_TIMEOUT", DEFAULT_START_TIMEOUT))


def riverlog_env() -> dict[str, str]:
    """The environment of a Riverlog broker process: ours, with ``broker_image`` importable."""
    env = dict(os.environ)
    parts = [str(BROKER_IMAGE)]
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    # Unbuffered output, so the log file holds the last words of a broker killed by a signal.
    env["PYTHONUNBUFFERED"] = "1"
    return env


# Brokers still running when the interpreter exits (a crashed or interrupted test session) are
# killed so they do not hold ports and CPU for the next run.
_LIVE: weakref.WeakSet[BrokerProcess] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_LIVE):
        broker.close()


class BrokerProcess(SignalledProcess):
    """One broker process on loopback, controlled with POSIX signals.

    The ports and the data directory stay the same across restarts, so clients reconnect to
    the same address and the broker recovers its own data.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        overrides: Mapping[str, object] | None = None,
        target: str | None = None,
        node_id: int = 1,
        name: str = "broker",
        kafka_libs: Path | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.target = target or selected_target()
        self.name = name
        self.node_id = node_id
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        # The controller port: only Kafka uses it (its KRaft controller listener); Riverlog's
        # single-node mode runs the controller in-process.
        self.port, self.metrics_port, self.controller_port = free_ports(3)
        self.data_dir = self.workdir / "data"
        super().__init__(self.workdir / f"{name}.log")
        self.kafka_libs = kafka_libs
        # Client listeners beside PLAINTEXT (which the harness keeps using): name -> (protocol,
        # port, advertised host).
        self.extra_listeners: dict[str, tuple[str, int, str]] = {}
        # JVM system properties of a Kafka broker (set before start; Riverlog has no JVM), such as
        # the OAUTHBEARER URLs Kafka 4.x may contact (org.apache.kafka.sasl.oauthbearer.allowed.urls).
        self.jvm_system_properties: dict[str, str] = {}
        _LIVE.add(self)

    def add_listener(self, name: str, protocol: str, *, advertised_host: str = "127.0.0.1") -> int:
        """Another client listener (before start), on both targets; returns its port."""
        (port,) = free_ports(1)
        self.extra_listeners[name.upper()] = (protocol.upper(), port, advertised_host)
        return port

    def _listener_settings(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base``'s listeners, advertised listeners and protocol map with the extra listeners."""
        if not self.extra_listeners:
            return dict(base)
        listeners = [base["listeners"], *(f"{n}://{self.host}:{port}" for n, (_, port, _) in
                                          self.extra_listeners.items())]
        advertised = [base["advertised.listeners"], *(f"{n}://{host}:{port}" for n, (_, port, host) in
                                                      self.extra_listeners.items())]
        protocols = [base.get("listener.security.protocol.map") or "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                     *(f"{n}:{protocol}" for n, (protocol, _, _) in self.extra_listeners.items())]
        return {**base, "listeners": ",".join(listeners), "advertised.listeners": ",".join(advertised),
                "listener.security.protocol.map": ",".join(protocols)}

    def _not_running(self) -> Exception:
        return RuntimeError(f"{self.name} is not running")

    # --- addresses -------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """Riverlog's Prometheus endpoint; Kafka exposes JMX instead, so None there."""
        if self.target == "kafka":
            return None
        return f"http://{self.host}:{self.metrics_port}/metrics"

    # --- command lines ---------------------------------------------------------------------

    def _riverlog_command(self) -> list[str]:
        listener = f"PLAINTEXT://{self.bootstrap}"
        settings = {
            **self._listener_settings({"listeners": listener, "advertised.listeners": listener}),
            "node.id": str(self.node_id),
            "log.dirs": str(self.data_dir),
            "metrics.port": str(self.metrics_port),
            **SINGLE_NODE_TEST_SETTINGS,
            **self.overrides,
        }
        cmd = [sys.executable, "-m", "riverlog", "broker"]
        for key, value in settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def _kafka_command(self) -> list[str]:
        libs = self.kafka_libs or kafka_dist.install()
        self.kafka_libs = libs
        config_path = self.workdir / "server.properties"
        overrides = {k: v for k, v in self.overrides.items() if k not in RIVERLOG_ONLY_KEYS}
        props = kafka_dist.server_properties(
            port=self.port,
            controller_port=self.controller_port,
            log_dir=self.data_dir,
            node_id=self.node_id,
            overrides={},
        )
        props = {**self._listener_settings(props), **overrides}
        kafka_dist.write_properties(config_path, props)
        # KRaft refuses to start on an unformatted log dir; format only once so that restarts
        # keep the cluster id and the data.
        if not kafka_dist.is_formatted(self.data_dir):
            kafka_dist.format_storage(libs, config_path)
        return list(kafka_dist.server_command(libs, config_path, system_properties=self.jvm_system_properties))

    def command(self) -> list[str]:
        return self._kafka_command() if self.target == "kafka" else self._riverlog_command()

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> BrokerProcess:
        """Launch the broker and wait until a Kafka client can talk to it."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        env = riverlog_env() if self.target == "riverlog" else dict(os.environ)
        self._spawn(cmd, cwd=self.workdir, env=env)
        try:
            self._wait_ready(start_timeout() if timeout is None else timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        # Readiness has two steps: the listener accepts TCP and answers ApiVersions (checked with
        # a hand-written request, so it does not depend on any client library), then a real
        # client's metadata round trip lists this broker.
        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None
        while time.monotonic() < deadline:
            self._check_alive("while starting")
            try:
                kafka_dist.api_versions(self.host, self.port, timeout=2.0)
                break
            except (OSError, kafka_dist.KafkaDistError) as exc:
                last_error = exc
            time.sleep(0.1)
        else:
            raise BrokerStartError(
                f"{self.name} ({self.target}) did not answer ApiVersions on {self.bootstrap} "
                f"within {timeout:.0f}s; last error: {last_error!r}\n{self.log_tail()}"
            )
        while time.monotonic() < deadline:
            self._check_alive("while starting")
            remaining = max(0.5, deadline - time.monotonic())
            try:
                if self._metadata_lists_broker(min(5.0, remaining)):
                    return
            except Exception as exc:  # any client error here just means "not ready yet"
                last_error = exc
            time.sleep(0.2)
        raise BrokerStartError(
            f"{self.name} ({self.target}) answered ApiVersions but no metadata listing a broker "
            f"within {timeout:.0f}s; last error: {last_error!r}\n{self.log_tail()}"
        )

    def _metadata_lists_broker(self, timeout: float) -> bool:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap, "client.id": "riverlog-harness", "log_level": 3}
        )
        metadata = admin.list_topics(timeout=timeout)
        return len(metadata.brokers) > 0

    def _check_alive(self, when: str) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise BrokerStartError(
                f"{self.name} ({self.target}) exited with code {self.proc.returncode} {when}\n"
                f"{self.log_tail()}"
            )

    def assert_alive(self) -> None:
        """Fail with the log tail if the broker has died on its own."""
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise AssertionError(f"{self.name} is not running (exit code {code})\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Graceful stop: SIGTERM, wait; SIGKILL if it does not exit within ``timeout``."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.terminate()
            self.wait_exit(timeout)
        return self.proc.returncode

    def restart(self, *, hard: bool = False, timeout: float | None = None) -> BrokerProcess:
        """Stop (SIGTERM, or SIGKILL when ``hard``) and start again on the same ports and data."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start(timeout=timeout)

    def close(self) -> None:
        """Teardown: make sure nothing is left running, without waiting long."""
        if self.running:
            try:
                self.stop(timeout=15.0)
            except Exception:  # teardown must not mask the test's own result
                self.kill()

    # --- diagnostics -----------------------------------------------------------------------

    def log_tail(self, lines: int = 80) -> str:
        if not self.log_path.exists():
            return f"--- {self.name}: no log file at {self.log_path} ---"
        text = self.log_path.read_text(errors="replace").splitlines()
        tail = "\n".join(text[-lines:])
        return f"--- last {min(lines, len(text))} lines of {self.log_path} ---\n{tail}"

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<BrokerProcess {self.name} {self.target} {self.bootstrap} {state}>"


def wait_for_port_closed(host: str, port: int, timeout: float = 10.0) -> bool:
    """True once nothing accepts connections on host:port (used after a kill)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                pass
        except OSError:
            return True
        time.sleep(0.1)
    return False
