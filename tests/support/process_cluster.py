"""A cluster of broker processes in KRaft combined mode, each node in its own network namespace.

Every node runs ``process.roles=broker,controller`` and all nodes are quorum voters, configured
with Kafka's property names, so the same files drive Apache Kafka (``RIVERLOG_TEST_TARGET=kafka``)
and Riverlog. Use::

    with ProcessCluster(tmp_path, size=3) as cluster:     # started and ready
        cluster.node(2).kill()                             # SIGKILL
        cluster.node(2).start()                            # same address and data, waits until ready
        cluster.isolate(3); cluster.heal(3)                # network faults (namespaces)

Nodes are numbered 1..size (their ``node.id``). With ``netns=True`` (needs root) node n listens
on its namespace's address, ports 9092 (clients) and 9093 (controller), and the test process
reaches it over the namespaces' bridge; with ``netns=False`` all nodes share 127.0.0.1 with free
ports and network faults are unavailable.

What Riverlog must provide for this harness (see :func:`riverlog_command`): the broker reads a
server.properties file (``--config``) with the properties of :meth:`ProcessCluster.properties`,
answers ApiVersions on its PLAINTEXT listener once it serves clients, lists every unfenced broker
in DescribeCluster, answers DescribeQuorum (forwarded to the active controller as Kafka does)
with the quorum leader, and treats SIGTERM as a controlled shutdown.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from riverlog.protocol.record_batch import Record, iter_records

from support import kafka_wire
from support.brokers import RIVERLOG_ONLY_KEYS, free_ports, kafka_dist, riverlog_env, selected_target
from support.kafka_wire import ClusterView, PartitionState, QuorumState
from support.netns import NetworkNamespaces
from support.process_control import STOP_TIMEOUT, SignalledProcess

CLIENT_PORT = 9092
CONTROLLER_PORT = 9093
METRICS_PORT = 9404
# A third listener's port, for clusters whose node-to-node traffic has its own (secured) listener.
INTERNAL_PORT = 9094
KAFKA_HEAP = "512m"
DEFAULT_READY_TIMEOUT = 120.0
ADMIN_TIMEOUT = 5.0

# Quick failure detection and a replicated cluster's internal topics. Kafka's names; Riverlog
# reads the same ones. Every value is an ordinary production knob, only smaller.
CLUSTER_DEFAULTS: dict[str, str] = {
    # A silent broker is fenced (and its leaderships moved) after the session timeout.
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    # A silent quorum leader is replaced within about fetch timeout + election timeout.
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "500",
    "controller.quorum.request.timeout.ms": "2000",
    # Requests to a dead or frozen controller/leader give up quickly so they go to the new one.
    "controller.socket.timeout.ms": "5000",
    "replica.socket.timeout.ms": "5000",
    "replica.lag.time.max.ms": "5000",
    "replica.fetch.backoff.ms": "200",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
}


class ClusterError(RuntimeError):
    """A node did not start or the cluster did not become ready; the message has log tails."""


class NodeExited(ClusterError):
    """A node that should be running has exited on its own (waiting longer will not help)."""


def _die_with_parent() -> list[str]:
    """``setpriv --pdeathsig KILL``: the node gets SIGKILL when the thread that started it
    dies, so a test process that crashes (no atexit, no fixture teardown) leaves no node
    running. setpriv and ``ip netns exec`` both exec, so the node keeps the pid we signal.
    Nodes must therefore be started from a thread that outlives them (the test's own)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def riverlog_command(config_path: Path) -> list[str]:
    """Riverlog's broker command line: the one place to change if the CLI changes."""
    return [sys.executable, "-m", "riverlog", "broker", "--config", str(config_path)]


T = TypeVar("T")

SEGMENT_NAME = re.compile(r"^\d{20}\.log$")


class ClusterNode(SignalledProcess):
    """One node process; its address and data directory survive restarts."""

    def __init__(self, cluster: ProcessCluster, node_id: int, host: str, port: int, controller_port: int,
                 metrics_port: int, internal_port: int = INTERNAL_PORT) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.host = host
        self.port = port
        self.controller_port = controller_port
        self.metrics_port = metrics_port
        self.internal_port = internal_port
        self.workdir = cluster.base_dir / f"node{node_id}"
        self.data_dir = self.workdir / "data"
        self.config_path = self.workdir / "server.properties"
        super().__init__(self.workdir / f"node{node_id}.log")
        # False once we kill or stop it: only an exit we did not cause is an error.
        self.should_run = False

    def _not_running(self) -> Exception:
        return ClusterError(f"node {self.node_id} is not running")

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def reachable(self) -> bool:
        """Running, not frozen and not cut off: expected to answer clients."""
        return self.running and not self.paused and self.node_id not in self.cluster.isolated

    # --- lifecycle ---------------------------------------------------------------------------

    def launch(self) -> None:
        """Start the process without waiting for it (several nodes must start together: a lone
        node of a quorum cannot elect a controller and never becomes ready)."""
        if self.running:
            raise ClusterError(f"node {self.node_id} is already running (pid {self.pid})")
        cmd = self.cluster.node_command(self)
        env = riverlog_env() if self.cluster.target == "riverlog" else dict(os.environ)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._spawn(cmd, cwd=self.workdir, env=env)
        self.should_run = True

    def start(self, *, wait: bool = True, timeout: float | None = None) -> ClusterNode:
        """Start on the same address and data; by default wait until it serves clients and the
        cluster lists it as a live broker."""
        self.launch()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.cluster.ready_timeout if timeout is None else timeout)
        self.cluster.wait_until(
            lambda: self._answers_api_versions() and self.node_id in self.cluster.brokers(),
            timeout=max(0.0, deadline - time.monotonic()), what=f"node {self.node_id} ready and registered",
            check=self.check_alive,
        )

    def _answers_api_versions(self) -> bool:
        try:
            kafka_dist.api_versions(self.host, self.port, timeout=2.0)
            return True
        except (OSError, kafka_dist.KafkaDistError):
            return False

    def check_alive(self) -> None:
        """Raise with the log tail if the process has exited on its own."""
        if self.should_run and self.proc is not None and self.proc.poll() is not None:
            raise NodeExited(f"node {self.node_id} exited with code {self.proc.returncode}\n{self.log_tail()}")

    def kill(self) -> None:
        """Crash it: SIGKILL, nothing flushed or closed."""
        self.should_run = False
        super().kill()

    def terminate(self) -> None:
        """Send SIGTERM (controlled shutdown) without waiting."""
        self.should_run = False
        super().terminate()

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Graceful stop: SIGTERM and wait (SIGKILL after ``timeout``). True if it was graceful."""
        self.terminate()
        return self.wait_exit(timeout)

    def restart(self, *, hard: bool = False, wait: bool = True, timeout: float | None = None) -> ClusterNode:
        """Stop (SIGTERM, or SIGKILL when ``hard``) and start again on the same address and data."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start(wait=wait, timeout=timeout)

    def isolate(self) -> None:
        self.cluster.isolate(self.node_id)

    def heal(self) -> None:
        self.cluster.heal(self.node_id)

    # --- data and diagnostics ----------------------------------------------------------------

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def read_partition(self, topic: str, partition: int) -> list[Record]:
        """Every record of this node's replica, read from its segment files (Kafka's on-disk
        format, which Riverlog shares): what this replica holds, independent of any leader."""
        directory = self.partition_dir(topic, partition)
        if not directory.is_dir():
            return []
        records: list[Record] = []
        for segment in sorted(p for p in directory.iterdir() if SEGMENT_NAME.match(p.name)):
            records.extend(record for _, record in iter_records(segment.read_bytes()))
        return records

    def log_tail(self, lines: int = 80) -> str:
        if not self.log_path.exists():
            return f"--- node {self.node_id}: no log at {self.log_path} ---"
        text = self.log_path.read_text(errors="replace").splitlines()
        return f"--- last {min(lines, len(text))} lines of {self.log_path} ---\n" + "\n".join(text[-lines:])

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"<ClusterNode {self.node_id} {self.bootstrap} {state}>"


# Clusters alive at interpreter exit (an interrupted session) are torn down.
_LIVE: weakref.WeakSet[ProcessCluster] = weakref.WeakSet()


@atexit.register
def _close_leftovers() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.close()


class ProcessCluster:
    def __init__(
        self,
        base_dir: Path,
        size: int = 3,
        *,
        target: str | None = None,
        overrides: Mapping[str, object] | None = None,
        netns: bool = True,
        kafka_libs: Path | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        node_overrides: Callable[[ClusterNode], Mapping[str, str]] | None = None,
        format_args: Sequence[str] = (),
    ) -> None:
        self.base_dir = Path(base_dir)
        self.size = size
        self.target = target or selected_target()
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.ready_timeout = ready_timeout
        self.kafka_libs = kafka_libs
        # Per-node properties (a node's own certificate) on top of ``overrides``, and extra
        # arguments of Kafka's `kafka-storage format` (``--add-scram``).
        self.node_overrides = node_overrides
        self.format_args = tuple(format_args)
        self.cluster_id = kafka_dist.random_cluster_id()
        self._admin_client: Any = None
        self._admin_lock = threading.Lock()
        self._closed = False
        _LIVE.add(self)
        self.net = NetworkNamespaces(size).create() if netns else None
        self.nodes: list[ClusterNode] = []
        ports = free_ports(4 * size) if self.net is None else []
        for n in range(1, size + 1):
            if self.net is not None:
                node = ClusterNode(self, n, self.net.address(n), CLIENT_PORT, CONTROLLER_PORT, METRICS_PORT)
            else:
                node = ClusterNode(self, n, "127.0.0.1", *ports[4 * (n - 1):4 * n])
            self.nodes.append(node)

    # --- configuration -----------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)

    def node(self, node_id: int) -> ClusterNode:
        if not 1 <= node_id <= self.size:
            raise ValueError(f"no node {node_id} in a cluster of {self.size}")
        return self.nodes[node_id - 1]

    def properties(self, node: ClusterNode) -> dict[str, str]:
        """The node's server.properties: KRaft combined mode, every node a voter."""
        props = kafka_dist.server_properties(
            port=node.port, controller_port=node.controller_port, log_dir=node.data_dir, node_id=node.node_id,
            host=node.host, overrides={**CLUSTER_DEFAULTS, "controller.quorum.voters": self.voters},
        )
        props.update(self.overrides)
        if self.node_overrides is not None:
            props.update(self.node_overrides(node))
        if self.target == "kafka":
            # Kafka gets the cluster id from `kafka-storage format`; it would only warn about these.
            return {k: v for k, v in props.items() if k not in RIVERLOG_ONLY_KEYS}
        props["metrics.port"] = str(node.metrics_port)
        props["cluster.id"] = self.cluster_id
        return props

    def node_command(self, node: ClusterNode) -> list[str]:
        kafka_dist.write_properties(node.config_path, self.properties(node))
        if self.target == "kafka":
            cmd = kafka_dist.server_command(self._libs(), node.config_path, heap=KAFKA_HEAP)
        else:
            cmd = riverlog_command(node.config_path)
        prefix = self.net.command_prefix(node.node_id) if self.net is not None else []
        return [*prefix, *_die_with_parent(), *cmd]

    def _libs(self) -> Path:
        if self.kafka_libs is None:
            self.kafka_libs = Path(kafka_dist.install())
        return self.kafka_libs

    def _format(self) -> None:
        """Kafka refuses unformatted log dirs; every node gets the same cluster id. Formatting
        happens once, so restarts keep the data."""
        if self.target != "kafka":
            return
        todo = [n for n in self.nodes if not kafka_dist.is_formatted(n.data_dir)]
        for node in todo:
            kafka_dist.write_properties(node.config_path, self.properties(node))
        errors: list[BaseException] = []

        def run(node: ClusterNode) -> None:
            try:
                kafka_dist.format_storage(self._libs(), node.config_path, self.cluster_id,
                                          extra_args=self.format_args)
            except BaseException as exc:  # re-raised below, in the caller's thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(n,)) for n in todo]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> ProcessCluster:
        """Format (first time), launch every node and wait until the cluster is ready."""
        for node in self.nodes:
            node.workdir.mkdir(parents=True, exist_ok=True)
        self._format()
        return self.start_all(timeout=timeout)

    def start_all(self, *, wait: bool = True, timeout: float | None = None) -> ProcessCluster:
        for node in self.nodes:
            if not node.running:
                node.launch()
        if wait:
            self.wait_ready(timeout)
        return self

    def stop_all(self, timeout: float = STOP_TIMEOUT) -> dict[int, bool]:
        """SIGTERM every node at once, then wait; {node: exited by itself within ``timeout``}."""
        for node in self.nodes:
            node.terminate()
        deadline = time.monotonic() + timeout
        return {node.node_id: node.wait_exit(max(0.0, deadline - time.monotonic())) for node in self.nodes}

    def kill_all(self) -> None:
        for node in self.nodes:
            node.kill()

    def close(self) -> None:
        """Teardown (idempotent): kill every node, remove the namespaces."""
        if self._closed:
            return
        self._closed = True
        _LIVE.discard(self)
        try:
            for node in self.nodes:
                with contextlib.suppress(Exception):
                    node.kill()
        finally:
            self._admin_client = None
            if self.net is not None:
                self.net.close()

    def __enter__(self) -> ProcessCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- network faults ----------------------------------------------------------------------

    @property
    def isolated(self) -> frozenset[int]:
        return self.net.isolated if self.net is not None else frozenset()

    def _net(self) -> NetworkNamespaces:
        if self.net is None:
            raise ClusterError("network faults need netns=True")
        return self.net

    def isolate(self, node_id: int) -> None:
        """Cut node ``node_id`` off from the other nodes and from the clients, both ways."""
        self._net().isolate(node_id)

    def heal(self, node_id: int) -> None:
        self._net().heal(node_id)

    def partition(self, side_a: Iterable[int], side_b: Iterable[int]) -> None:
        """Nodes of one side cannot talk to the other's; clients still reach everyone."""
        self._net().partition(side_a, side_b)

    def heal_partition(self) -> None:
        self._net().heal_partition()

    # --- cluster state through the Kafka protocol --------------------------------------------

    def admin(self) -> Any:
        """A shared confluent-kafka AdminClient bootstrapped from every node. For tests' own
        requests while the cluster is stable: the harness polls with :mod:`support.kafka_wire`
        (see there why not with librdkafka's Admin API during faults)."""
        from confluent_kafka.admin import AdminClient

        with self._admin_lock:
            if self._admin_client is None:
                self._admin_client = AdminClient({
                    "bootstrap.servers": self.bootstrap, "client.id": "process-cluster-harness", "log_level": 2,
                    "socket.timeout.ms": int(ADMIN_TIMEOUT * 1000), "reconnect.backoff.max.ms": 500,
                })
            return self._admin_client

    def metadata(self, node_id: int | None = None, timeout: float = ADMIN_TIMEOUT) -> ClusterView:
        """Metadata as node ``node_id`` sees it, or as the first reachable node that answers."""
        nodes = [self.node(node_id)] if node_id is not None else [n for n in self.nodes if n.reachable]
        errors: list[str] = []
        for node in nodes:
            try:
                return kafka_wire.metadata(node.host, node.port, timeout)
            except (OSError, kafka_wire.WireError) as exc:
                errors.append(f"node {node.node_id}: {exc!r}")
        raise ClusterError(f"no node answered Metadata: {errors}")

    def brokers(self, timeout: float = ADMIN_TIMEOUT) -> set[int]:
        """Ids of the live (registered, unfenced) brokers."""
        return set(self.metadata(timeout=timeout).brokers)

    def quorum(self, timeout: float = ADMIN_TIMEOUT) -> QuorumState:
        """The metadata quorum as the active controller reports it (DescribeQuorum, which a
        broker forwards to the controller), asked of the first reachable node that answers."""
        errors: list[str] = []
        for node in [n for n in self.nodes if n.reachable]:
            try:
                return kafka_wire.describe_quorum(node.host, node.port, timeout)
            except (OSError, kafka_wire.WireError) as exc:
                errors.append(f"node {node.node_id}: {exc!r}")
        raise ClusterError(f"no node answered DescribeQuorum: {errors}")

    def active_controller(self, timeout: float = ADMIN_TIMEOUT) -> int:
        leader = self.quorum(timeout).leader_id
        if leader < 0:
            raise ClusterError("the metadata quorum has no leader")
        return leader

    def partition_state(self, topic: str, partition: int, timeout: float = ADMIN_TIMEOUT) -> PartitionState:
        view = self.metadata(timeout=timeout)
        if (topic, partition) not in view.partitions:
            raise ClusterError(f"no metadata for {topic}-{partition} (topic errors {view.topic_errors})")
        return view.partitions[(topic, partition)]

    def all_partitions(self, timeout: float = ADMIN_TIMEOUT) -> dict[tuple[str, int], PartitionState]:
        """Every partition (internal topics included) with its leader, replicas and ISR."""
        return self.metadata(timeout=timeout).partitions

    def healthy(self, topics: Iterable[str] | None = None) -> bool:
        """Every node runs and is reachable, and each one's metadata lists every node as a live
        broker and every partition (of ``topics``, default all) with a leader and a complete
        ISR. Asking every node, not one, keeps a node with a stale view from passing."""
        if not all(n.reachable for n in self.nodes):
            return False
        wanted = None if topics is None else set(topics)
        everyone = {n.node_id for n in self.nodes}
        for node in self.nodes:
            view = self.metadata(node.node_id)
            if view.brokers != everyone:
                return False
            if wanted is not None and not wanted <= {name for name, _ in view.partitions}:
                return False
            for (name, _), state in view.partitions.items():
                if (wanted is None or name in wanted) and (state.leader < 0 or set(state.isr) != set(state.replicas)):
                    return False
        return True

    # --- waiting -----------------------------------------------------------------------------

    def check_alive(self) -> None:
        """Raise with its log tail if a node that should run has exited on its own."""
        for node in self.nodes:
            node.check_alive()

    def wait_until(
        self,
        predicate: Callable[[], T | None],
        *,
        timeout: float,
        what: str,
        interval: float = 0.2,
        check: Callable[[], None] | None = None,
    ) -> T:
        """Poll ``predicate`` until it returns something truthy; errors it raises (a client
        timeout, a node not answering yet) count as "not yet". On timeout the message carries
        the last error and every node's log tail."""
        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None
        while True:
            (check or self.check_alive)()
            try:
                value = predicate()
                if value:
                    return value
            except (NodeExited, AssertionError):
                raise
            except Exception as exc:  # "not ready yet"
                last_error = exc
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"timed out after {timeout:.0f}s waiting for {what} ({self.target}); last error: {last_error!r}\n"
                    + self.log_tails(60)
                )
            time.sleep(interval)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Every reachable running node answers and is a live broker, and the quorum has a leader."""
        def ready() -> bool:
            expected = {n.node_id for n in self.nodes if n.reachable}
            if not all(n._answers_api_versions() for n in self.nodes if n.reachable):
                return False
            return expected <= self.brokers() and self.active_controller() >= 0

        self.wait_until(ready, timeout=self.ready_timeout if timeout is None else timeout,
                        what="every node up, registered and a quorum leader")

    def log_tails(self, lines: int = 80) -> str:
        return "\n".join(node.log_tail(lines) for node in self.nodes)

    def __repr__(self) -> str:
        return f"<ProcessCluster {self.target} {self.nodes}>"
