"""Apache Kafka's own Connect runtime, run unchanged against a cluster under test (issue #19).

A :class:`ConnectWorker` is one distributed-mode worker JVM (``ConnectDistributed``) with the jars
``bench/kafka_dist.py`` installs (connect-runtime, connect-file, connect-mirror), its REST API on
a loopback port. Workers of the same ``group.id`` form one Connect cluster through the broker's
group coordinator (protocol type ``connect``) and keep their configs, offsets and statuses in
compacted topics. :class:`ConnectRest` is a small client of the REST API.

Workers run through the Connect image's launcher, ``scripts/riverlog-connect``, as the operator's
pods do; with ``metrics_port`` it starts the Prometheus JMX exporter's agent (``metrics_agent``
resolves it from Maven Central, as the image does) with the operator's exporter rules, and
:meth:`ConnectWorker.scrape` reads what Prometheus would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from riverlog_operator.builders import connect_metrics

from support.brokers import kafka_dist

CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "scripts" / "riverlog-connect"
AGENT_JAR = "jmx_prometheus_javaagent.jar"
_POM_NS = "{http://maven.apache.org/POM/4.0.0}"

# One scraped sample: its name and its labels, sorted.
Sample = tuple[str, tuple[tuple[str, str], ...]]


def metrics_agent() -> Path:
    """The JMX exporter's agent jar at the pom's pinned version, copied from Maven Central into
    the cache once (``dependency:copy`` of bench/kafka-pom.xml, as the Connect image does)."""
    pom = kafka_dist.POM_PATH
    version = ET.parse(pom).getroot().findtext(f"{_POM_NS}properties/{_POM_NS}jmx.exporter.version")
    assert version, f"{pom} pins no jmx.exporter.version"
    target = kafka_dist.cache_root() / f"jmx-exporter-{version}" / AGENT_JAR
    if target.is_file():
        return target
    mvn = shutil.which("mvn")
    assert mvn, "Maven ('mvn') is needed to fetch the JMX exporter's agent"
    with kafka_dist.file_lock(target.parent / ".install.lock"):
        if target.is_file():
            return target
        with tempfile.TemporaryDirectory(dir=target.parent) as staging:
            proc = subprocess.run([mvn, "-B", "-q", "-f", str(pom), f"-Doutput.dir={staging}", "dependency:copy"],
                                  capture_output=True, text=True, timeout=600, check=False)
            assert proc.returncode == 0, f"mvn dependency:copy failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            (Path(staging) / AGENT_JAR).replace(target)  # atomic: others see the whole jar or none
    return target


class ConnectError(AssertionError):
    pass


def series(samples: Mapping[Sample, float], name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one metric from :meth:`ConnectWorker.scrape`: labels and value."""
    return [(dict(labels), value) for (found, labels), value in samples.items() if found == name]


class ConnectRest:
    """The Connect REST API of one worker: JSON in, JSON out; errors raise with the body."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise ConnectError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from exc
        return json.loads(text) if text else None

    def put_connector(self, name: str, config: Mapping[str, Any]) -> Any:
        return self.call("PUT", f"/connectors/{name}/config", {k: str(v) for k, v in config.items()})

    def status(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.call("GET", f"/connectors/{name}/status")
        return found

    def running(self, name: str, tasks: int | None) -> bool:
        """The connector and ``tasks`` tasks RUNNING (False while the cluster rebalances);
        ``tasks`` None: however many it has (a MirrorMaker 2 checkpoint connector has none
        until a group to checkpoint exists)."""
        try:
            status = self.status(name)
        except (ConnectError, OSError):
            return False
        states = [t["state"] for t in status.get("tasks", [])]
        wanted = len(states) if tasks is None else tasks
        return status["connector"]["state"] == "RUNNING" and states == ["RUNNING"] * wanted


class ConnectWorker:
    """One distributed Connect worker; ``start``, ``kill`` (-9) and ``restart`` it. ``heap`` is
    its -Xmx: the tests' small default, or more where many tasks each buffer a producer's and a
    consumer's batches (the benchmark's MirrorMaker 2)."""

    def __init__(self, libs: Path, workdir: Path, name: str, bootstrap: str, rest_port: int,
                 group_id: str = "riverlog-connect", replication_factor: int = 3,
                 overrides: Mapping[str, object] | None = None, metrics_port: int | None = None,
                 heap: str = "384m") -> None:
        self.libs, self.name, self.rest_port, self.metrics_port = libs, name, rest_port, metrics_port
        self.heap = heap
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.properties = self.dir / "worker.properties"
        self.log_path = self.dir / "worker.log"
        props: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER,
            "config.storage.topic": f"{group_id}-configs",
            "offset.storage.topic": f"{group_id}-offsets",
            "status.storage.topic": f"{group_id}-status",
            "config.storage.replication.factor": replication_factor,
            "offset.storage.replication.factor": replication_factor,
            "status.storage.replication.factor": replication_factor,
            "listeners": f"http://127.0.0.1:{rest_port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": rest_port,
            "offset.flush.interval.ms": 1000,
            # A worker that died gets its tasks reassigned after this delay (5 min by default).
            "scheduled.rebalance.max.delay.ms": 10000,
            **(overrides or {}),
        }
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.rest = ConnectRest(f"http://127.0.0.1:{rest_port}")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> ConnectWorker:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(["sh", str(LAUNCHER), str(self.properties)], env=self.launcher_env(),
                                         stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True)
        self.wait_ready(timeout)
        return self

    def launcher_env(self) -> dict[str, str]:
        """The launcher's settings: the JVM options kafka_dist gives its Java programs, the jars'
        directory, and with a metrics port the agent and the operator's rules."""
        assert self.libs.name == "libs", f"the launcher wants <home>/libs, not {self.libs}"
        cmd = kafka_dist.java_command(self.libs, CONNECT_MAIN, heap=self.heap, log_level="info")
        java = Path(cmd[0])
        env = {**os.environ, "PATH": f"{java.parent}{os.pathsep}{os.environ.get('PATH', '')}",
               "RIVERLOG_CONNECT_HOME": str(self.libs.parent),
               "RIVERLOG_CONNECT_JAVA_OPTS": " ".join(cmd[1:cmd.index("-cp")])}
        env.pop(connect_metrics.METRICS_PORT_ENV, None)
        if self.metrics_port is not None:
            rules = self.dir / connect_metrics.METRICS_CONFIG_FILE
            rules.write_text(connect_metrics.exporter_config_text())
            env.update({connect_metrics.METRICS_PORT_ENV: f"127.0.0.1:{self.metrics_port}",
                        connect_metrics.METRICS_CONFIG_ENV: str(rules),
                        "RIVERLOG_CONNECT_METRICS_AGENT": str(metrics_agent())})
        return env

    def scrape(self) -> dict[Sample, float]:
        """The agent's /metrics as Prometheus reads it: every sample by name and labels."""
        assert self.metrics_port is not None, f"worker {self.name} runs without metrics"
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def wait_ready(self, timeout: float) -> None:
        """Until the REST API answers for the joined cluster (GET /connectors needs the herder)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ConnectError(f"worker {self.name} exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                self.rest.call("GET", "/connectors", timeout=5)
                return
            except (ConnectError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ConnectError(f"worker {self.name} not ready in {timeout:.0f}s:\n{self.log_tail()}")
            time.sleep(0.5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, lines: int = 80) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
