"""Install and run a real Apache Kafka broker from Maven Central jars.

Riverlog's integration tests and benchmarks compare against Apache Kafka. This machine (and CI)
reaches Maven Central but not the Kafka download site, so instead of a release tarball we let
Maven resolve the broker, the tools and a logging backend into a flat ``libs/`` directory, and
launch the Java main classes directly with ``java -cp '<libs>/*'``.

Library use (tests/support/brokers.py and bench code):

    libs = install()                       # idempotent, quick when cached
    props = server_properties(port=..., controller_port=..., log_dir=...)
    write_properties(path, props)
    format_storage(libs, path)             # KRaft: once per fresh log dir
    proc = subprocess.Popen(server_command(libs, path), ...)
    wait_ready("127.0.0.1", port, proc)

or the all-in-one :class:`KafkaServer` context manager.

CLI:

    python bench/kafka_dist.py install     # prints the libs directory
    python bench/kafka_dist.py run --port 9092 --log-dir /tmp/k   # foreground broker
    python bench/kafka_dist.py api-usage LOG...  # API versions per client, from a broker log
                                                 # written with RIVERLOG_KAFKA_REQUEST_LOG=1
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

# 4.3.1 is the newest 4.x release whose every artifact (including kafka-tools) is on Maven
# Central; override with RIVERLOG_KAFKA_VERSION to compare against another release.
DEFAULT_KAFKA_VERSION = "4.3.1"

# Main classes in Kafka 4.x. The Scala broker entry point and the storage formatter stayed in
# the kafka_2.13 jar; the command-line tools moved to Java under org.apache.kafka.tools.
KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
TOPIC_COMMAND_MAIN = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER_MAIN = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER_MAIN = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GET_OFFSET_SHELL_MAIN = "org.apache.kafka.tools.GetOffsetShell"
DELETE_RECORDS_MAIN = "org.apache.kafka.tools.DeleteRecordsCommand"
TRANSACTIONS_MAIN = "org.apache.kafka.tools.TransactionsCommand"
CONFIG_COMMAND_MAIN = "kafka.admin.ConfigCommand"  # kafka-configs.sh
PRODUCER_PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF_MAIN = "org.apache.kafka.tools.ConsumerPerformance"

POM_PATH = Path(__file__).resolve().parent / "kafka-pom.xml"
_COMPLETE_MARKER = ".complete"

# A small heap keeps the JVM's footprint and start-up modest on a 2-core test machine; the
# single-node workloads in tests never come close to it.
DEFAULT_HEAP = "768m"


class KafkaDistError(RuntimeError):
    """Installing, formatting or starting Kafka failed; the message says why."""


def kafka_version() -> str:
    return os.environ.get("RIVERLOG_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)


def cache_root() -> Path:
    override = os.environ.get("RIVERLOG_CACHE")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "riverlog"


def libs_dir(version: str | None = None) -> Path:
    return cache_root() / f"kafka-{version or kafka_version()}" / "libs"


# Jars whose absence means the cache predates the pom's current dependencies.
def _required_jars(version: str) -> tuple[str, ...]:
    return (f"kafka_2.13-{version}.jar", f"kafka-tools-{version}.jar", f"kafka-streams-{version}.jar",
            f"connect-file-{version}.jar", f"connect-mirror-{version}.jar")


def is_installed(version: str | None = None) -> bool:
    version = version or kafka_version()
    libs = libs_dir(version)
    return (libs / _COMPLETE_MARKER).is_file() and all((libs / j).is_file() for j in _required_jars(version))


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    # Several pytest workers (or a test run and a bench run) may install at the same time; an
    # exclusive lock makes the second one wait and then find the finished copy.
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install(version: str | None = None, *, quiet: bool = True, timeout: float = 900.0) -> Path:
    """Resolve Kafka's jars into the cache and return the ``libs`` directory.

    Idempotent: returns at once when a complete copy is there. The copy is assembled in a
    temporary sibling directory and renamed into place, so an interrupted install never
    leaves a half-filled ``libs`` that later runs would trust.
    """
    version = version or kafka_version()
    target = libs_dir(version)
    if is_installed(version):
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaDistError("Maven ('mvn') is not on PATH; it is needed to fetch Kafka's jars")
    with file_lock(target.parent / ".install.lock"):
        if is_installed(version):
            return target
        staging = Path(tempfile.mkdtemp(prefix="libs-staging-", dir=target.parent))
        try:
            cmd = [
                mvn, "-B", "-f", str(POM_PATH),
                f"-Dkafka.version={version}",
                f"-Doutput.dir={staging}",
                "dependency:copy-dependencies",
            ]
            if quiet:
                cmd.insert(2, "-q")
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if result.returncode != 0:
                raise KafkaDistError(
                    f"mvn failed (exit {result.returncode}) resolving Kafka {version}:\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
                )
            jars = {p.name for p in staging.glob("*.jar")}
            for needed in _required_jars(version):
                if needed not in jars:
                    raise KafkaDistError(f"{needed} missing after mvn copy-dependencies")
            if (target / _COMPLETE_MARKER).is_file():
                # A complete copy from before a dependency was added to the pom (kafka-streams,
                # Connect's file connectors and MirrorMaker 2):
                # add the new jars beside the old ones rather than replace the directory under
                # brokers and tools that may be running from it.
                for jar in staging.glob("*.jar"):
                    if not (target / jar.name).exists():
                        jar.rename(target / jar.name)
                return target
            (staging / _COMPLETE_MARKER).write_text(version + "\n")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return target


def classpath(libs: Path) -> str:
    # The JVM expands a trailing '/*' itself to every jar in the directory.
    return f"{libs}/*"


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaDistError("'java' is not on PATH (Kafka 4.x needs Java 17 or newer)")
    return found


def java_command(
    libs: Path,
    main_class: str,
    args: Sequence[str] = (),
    *,
    heap: str = "256m",
    log_level: str = "warn",
    extra_jvm_args: Sequence[str] = (),
) -> list[str]:
    """A ``java`` command line running ``main_class`` with Kafka's jars on the class path."""
    return [
        java_executable(),
        f"-Xmx{heap}",
        "-Djava.awt.headless=true",
        # slf4j-simple's knobs: the tools' own output goes to stdout, logging to stderr.
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        *extra_jvm_args,
        "-cp",
        classpath(libs),
        main_class,
        *args,
    ]


def jvm_system_properties(properties: Mapping[str, str]) -> list[str]:
    """``-Dkey=value`` JVM options."""
    return [f"-D{key}={value}" for key, value in properties.items()]


def random_cluster_id() -> str:
    # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding (what
    # `kafka-storage random-uuid` prints). Like Kafka we never hand out one that starts with
    # '-': the storage tool's argument parser would read it as an option ("expected one
    # argument"), which made one format in 64 fail.
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


def server_properties(
    *,
    port: int,
    controller_port: int,
    log_dir: Path,
    node_id: int = 1,
    host: str = "127.0.0.1",
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Properties for a single-node KRaft server acting as broker and controller.

    The internal topics get replication factor 1 because there is only one node; without
    that, group and transaction coordinators could never create their topics.
    """
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        # A static voter set: formatting then needs no --standalone/--initial-controllers.
        "controller.quorum.voters": f"{node_id}@{host}:{controller_port}",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # After a crash the restarted broker cannot re-register until the controller has
        # fenced its previous incarnation, i.e. until that session times out (9 s by default).
        # A single node has no network to ride out, so a short session makes crash restarts
        # quick without changing any client-visible behaviour.
        "broker.session.timeout.ms": "2000",
        "broker.heartbeat.interval.ms": "500",
        # Kafka's log manager waits this long after start-up before its first retention (and
        # flush) pass, whatever log.retention.check.interval.ms says; 30 s by default would
        # only make retention tests wait.
        "log.initial.task.delay.ms": "500",
    }
    if overrides:
        props.update({k: str(v) for k, v in overrides.items()})
    return props


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    # Java properties treat backslashes as escapes; our values (paths, host:port lists) have
    # none on Linux, so a plain key=value file is faithful.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def format_storage(
    libs: Path, config_path: Path, cluster_id: str | None = None, *, timeout: float = 120.0,
    extra_args: Sequence[str] = (),
) -> str:
    """Format the KRaft log dirs named in ``config_path``; returns the cluster id used.
    ``extra_args`` go to ``kafka-storage format`` (for example ``--add-scram``)."""
    cluster_id = cluster_id or random_cluster_id()
    cmd = java_command(
        libs, STORAGE_TOOL_MAIN, ["format", "-t", cluster_id, "-c", str(config_path), *extra_args]
    )
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise KafkaDistError(
            f"kafka-storage format failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return cluster_id


def is_formatted(log_dir: Path) -> bool:
    return (log_dir / "meta.properties").is_file()


def server_command(
    libs: Path,
    config_path: Path,
    *,
    heap: str = DEFAULT_HEAP,
    request_log: bool | None = None,
    system_properties: Mapping[str, str] | None = None,
) -> list[str]:
    """The command that runs the broker in the foreground.

    ``system_properties`` become ``-Dkey=value`` JVM options (for example Kafka 4.x's
    ``org.apache.kafka.sasl.oauthbearer.allowed.urls``, the URLs its OAUTHBEARER code may reach).

    ``request_log`` (default: env RIVERLOG_KAFKA_REQUEST_LOG=1) turns on Kafka's request logger
    at DEBUG, which prints every request header (API key, version, client id): that is how we
    learn which API versions each client sends.
    """
    if request_log is None:
        request_log = os.environ.get("RIVERLOG_KAFKA_REQUEST_LOG", "") not in ("", "0")
    jvm = [
        "-Xms128m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Dorg.slf4j.simpleLogger.log.kafka.request.logger="
        + ("debug" if request_log else "warn"),
        # The state-change and authorizer loggers are chatty at INFO and add nothing for tests.
        "-Dorg.slf4j.simpleLogger.log.state.change.logger=warn",
        *jvm_system_properties(system_properties or {}),
    ]
    return java_command(
        libs, KAFKA_MAIN, [str(config_path)], heap=heap, log_level="info", extra_jvm_args=jvm
    )


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """Send ApiVersions v0 over a raw socket; return {api_key: (min, max)} on success.

    Hand-rolled so that readiness checks depend on no client library: every Kafka-protocol
    broker must answer ApiVersions v0, the request clients send first.
    Raises OSError (or KafkaDistError on a bad answer) when the server is not answering yet.
    """
    client_id = b"riverlog-probe"
    correlation_id = 7
    # Request header v1: api_key, api_version, correlation_id, client_id (nullable string).
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    frame = struct.pack(">i", len(body)) + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(frame)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        if size < 10 or size > 1 << 20:
            raise KafkaDistError(f"implausible ApiVersions response size {size}")
        payload = _recv_exact(sock, size)
    got_corr, error_code, count = struct.unpack_from(">ihi", payload, 0)
    if got_corr != correlation_id:
        raise KafkaDistError(f"ApiVersions correlation id {got_corr} != {correlation_id}")
    if error_code != 0:
        raise KafkaDistError(f"ApiVersions error code {error_code}")
    versions: dict[int, tuple[int, int]] = {}
    offset = 10
    for _ in range(count):
        key, lo, hi = struct.unpack_from(">hhh", payload, offset)
        versions[key] = (lo, hi)
        offset += 6
    return versions


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by the server")
        chunks += chunk
    return bytes(chunks)


def wait_ready(
    host: str,
    port: int,
    proc: subprocess.Popen[bytes] | None = None,
    *,
    timeout: float = 60.0,
    log_file: Path | None = None,
) -> dict[int, tuple[int, int]]:
    """Wait until the server answers ApiVersions; fail early if ``proc`` exits.

    Kafka opens its client listener only once the broker has caught up with the metadata log
    and been unfenced, so an ApiVersions answer means it can serve produce and fetch.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise KafkaDistError(
                f"server exited with code {proc.returncode} before becoming ready"
                + _tail_suffix(log_file)
            )
        try:
            return api_versions(host, port, timeout=2.0)
        except (OSError, KafkaDistError) as exc:
            last_error = exc
        time.sleep(0.2)
    raise KafkaDistError(
        f"server on {host}:{port} not ready after {timeout:.0f}s (last error: {last_error!r})"
        + _tail_suffix(log_file)
    )


def _tail_suffix(log_file: Path | None, lines: int = 40) -> str:
    if log_file is None or not log_file.exists():
        return ""
    text = log_file.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- log tail ---\n" + "\n".join(text)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct unused ports. Binding port 0 lets the kernel pick one; all sockets stay
    open while choosing, because asking for one port at a time can hand out the same port twice
    (a Kafka node once got it for both its client and controller listeners and refused to
    start). Another process could still take a port before we use it, but on a test machine that
    race is rare and shows up as a clear bind error."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM (Kafka's controlled shutdown), then SIGKILL if it does not exit in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    return proc.returncode


class KafkaServer:
    """A single-node Kafka (broker + controller) in a directory; a context manager.

    Bench code uses this directly; the test harness builds its own process handling on the
    functions above so that Kafka and Riverlog share one start/stop/kill implementation.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        overrides: Mapping[str, str] | None = None,
        heap: str = DEFAULT_HEAP,
        libs: Path | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        picked = free_ports(2)
        self.port = port or picked[0]
        self.controller_port = controller_port or picked[1]
        self.log_dir = self.workdir / "data"
        self.config_path = self.workdir / "server.properties"
        self.log_file = self.workdir / "kafka.log"
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.libs = libs
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        libs = self.libs or install()
        props = server_properties(
            port=self.port,
            controller_port=self.controller_port,
            log_dir=self.log_dir,
            overrides=self.overrides,
        )
        write_properties(self.config_path, props)
        if not is_formatted(self.log_dir):
            format_storage(libs, self.config_path)
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(
                server_command(libs, self.config_path, heap=self.heap),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            wait_ready("127.0.0.1", self.port, self.proc, timeout=timeout, log_file=self.log_file)
        except BaseException:
            self.kill()
            raise

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def __enter__(self) -> KafkaServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def api_usage(log_files: Sequence[Path]) -> dict[str, dict[str, set[int]]]:
    """From broker logs written with the request logger on: {client id: {API: versions}}.

    Kafka's request logger prints one JSON document per completed request; the header names the
    API key and version and the client id. Requests on the controller listener (the broker
    talking to its own controller) are left out.
    """
    usage: dict[str, dict[str, set[int]]] = {}
    marker = "Completed request:"
    for path in log_files:
        for line in Path(path).read_text(errors="replace").splitlines():
            at = line.find(marker)
            if at < 0 or "CONTROLLER" in line[:at]:
                continue
            try:
                header = json.loads(line[at + len(marker):])["requestHeader"]
            except (ValueError, KeyError):
                continue
            api = f"{header['requestApiKeyName']}({header['requestApiKey']})"
            usage.setdefault(str(header.get("clientId")), {}).setdefault(api, set()).add(
                int(header["requestApiVersion"])
            )
    return usage


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=None, help="Kafka version (default %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="resolve the jars and print the libs directory")
    sub.add_parser("classpath", help="print the class path string for java -cp")
    run = sub.add_parser("run", help="run a single-node broker in the foreground")
    run.add_argument("--port", type=int, default=9092)
    run.add_argument("--controller-port", type=int, default=0)
    run.add_argument("--log-dir", type=Path, required=True)
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    usage = sub.add_parser(
        "api-usage",
        help="summarise which API versions each client sent, from logs of a broker run with "
        "RIVERLOG_KAFKA_REQUEST_LOG=1",
    )
    usage.add_argument("logs", nargs="+", type=Path)
    args = parser.parse_args(argv)

    if args.command == "api-usage":
        for client, apis in sorted(api_usage(args.logs).items()):
            print(client)
            for api, versions in sorted(apis.items(), key=lambda kv: int(kv[0].rsplit("(", 1)[1][:-1])):
                print(f"    {api}: v{','.join(str(v) for v in sorted(versions))}")
        return 0

    libs = install(args.version, quiet=True)
    if args.command == "install":
        print(libs)
        return 0
    if args.command == "classpath":
        print(classpath(libs))
        return 0
    overrides = dict(item.split("=", 1) for item in args.set)
    workdir = Path(args.log_dir).resolve()
    server = KafkaServer(
        workdir,
        port=args.port,
        controller_port=args.controller_port or None,
        overrides=overrides,
        libs=libs,
    )
    server.start()
    print(f"Kafka {args.version or kafka_version()} ready on {server.bootstrap}; log {server.log_file}")
    try:
        assert server.proc is not None
        server.proc.wait()
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
