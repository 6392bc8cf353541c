"""Issue #19, acceptance 4: docs/migration.md's steps, run as written, from start to end.

An Apache Kafka 4.3.1 cluster is in use: a producer writes to ``orders`` continuously and a
consumer group ``billing`` consumes it, committing as it goes. The test takes the guide's
runnable steps in the page's order (``support/guide_steps.py``): each shell block runs with
bash, with the variables the guide names set and ``riverlog`` and ``riverlog-connect`` (this
checkout's, on Kafka's cached jars) on the PATH; the Connect worker's block runs in the
background until the end. At each application step the test does what the guide tells the
reader: stop the consumers on Kafka, start them on the target, move the producer there.

Then: every record produced, to Kafka before the move and to the target after it, was consumed
by the group; nothing was skipped; the moved group re-read no more than the guide says; and the
guide's own ``riverlog mirror verify`` passed (a failing step fails the test). With
``RIVERLOG_TEST_TARGET=kafka`` the target is Apache Kafka too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from support.brokers import REPO_ROOT, free_ports, kafka_dist, riverlog_env
from support.cluster_workload import create_topic
from support.guide_steps import APP, GuideStep, guide_steps
from support.process_cluster import ProcessCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

GUIDE = REPO_ROOT / "docs" / "migration.md"
TOPIC, GROUP, PARTITIONS = "orders", "billing", 3
MIRRORED = f"kafka.{TOPIC}"  # the guide's source alias and MM2's default replication policy
LAG_MAX = 10  # OFFSET_LAG_MAX: offset syncs this often, so re-reads stay small
RATE = 30.0  # records per second the application produces
STEP_TIMEOUT = 240.0  # a guide step of this test's small data that takes longer has failed
# One broker each: the guide's -1 replication factors take the cluster's default, 1 here.
SINGLE_NODE = {"default.replication.factor": 1, "min.insync.replicas": 1, "offsets.topic.replication.factor": 1,
               "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}


class Application:
    """The user's producer and consumer group, on Kafka first and then on the target."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.produced: list[int] = []  # sequence numbers, partition = n % PARTITIONS
        self.consumed: dict[str, list[int]] = {"kafka": [], "target": []}
        self.committed: dict[int, int] = {}  # the group's last commit on Kafka, by partition
        self._produce_to: tuple[str, str] | None = None
        self._consume_from: tuple[str, str, str] | None = None  # (phase, bootstrap, topic)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, bootstrap: str) -> None:
        self._produce_to = (bootstrap, TOPIC)
        self._consume_from = ("kafka", bootstrap, TOPIC)
        for target in (self._produce_loop, self._consume_loop):
            thread = threading.Thread(target=self._guarded(target), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _guarded(self, loop: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                loop()
            except BaseException as exc:  # reported by check(), not lost in a thread
                self.errors.append(exc)
        return run

    def _produce_loop(self) -> None:
        producer: Producer | None = None
        where: tuple[str, str] | None = None
        n = 0
        while not self._stop.is_set():
            wanted = self._produce_to
            if wanted is None:  # stopped: what was sent is delivered
                if producer is not None:
                    assert producer.flush(30) == 0
                    producer, where = None, None
                time.sleep(0.05)
                continue
            if wanted != where:
                if producer is not None:
                    assert producer.flush(30) == 0
                producer = Producer({"bootstrap.servers": wanted[0], "acks": "all", "enable.idempotence": True})
                where = wanted
            assert producer is not None
            producer.produce(wanted[1], key=str(n).encode(), value=f"order-{n:06d}".encode(),
                             partition=n % PARTITIONS)
            with self.lock:
                self.produced.append(n)
            n += 1
            if n % 10 == 0:
                assert producer.flush(30) == 0
            time.sleep(1 / RATE)
        if producer is not None:
            assert producer.flush(30) == 0

    def _consume_loop(self) -> None:
        while not self._stop.is_set():
            spec = self._consume_from
            if spec is None:  # consumers are stopped (being moved)
                time.sleep(0.05)
                continue
            phase, bootstrap, topic = spec
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                                 "auto.offset.reset": "earliest"})
            consumer.subscribe([topic])
            try:
                while self._consume_from == spec and not self._stop.is_set():
                    batch = consumer.consume(100, 0.2)
                    values = []
                    for msg in batch:
                        if msg.error():
                            raise KafkaException(msg.error())
                        values.append(int(msg.value().decode().split("-")[1]))
                    if batch:
                        # Processed, then committed: what at-least-once consumers do.
                        committed = consumer.commit(asynchronous=False)
                        with self.lock:
                            self.consumed[phase] += values
                            if phase == "kafka":
                                self.committed.update({tp.partition: tp.offset for tp in committed or []})
            finally:
                consumer.close()

    def stop_consumers(self) -> None:
        self._consume_from = None
        time.sleep(1.0)  # the consumer loop sees it within one consume() and closes

    def start_consumers(self, bootstrap: str, topic: str) -> None:
        self._consume_from = ("target", bootstrap, topic)

    def move_producers(self, bootstrap: str, topic: str) -> None:
        self._produce_to = (bootstrap, topic)

    def stop_producing(self) -> None:
        self._produce_to = None
        time.sleep(0.5)  # the producer loop sees it after its current record

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def check(self) -> None:
        if self.errors:
            raise AssertionError(f"the application failed: {self.errors[0]!r}") from self.errors[0]


@pytest.fixture
def background() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The guide's background steps; each is killed (its whole process group) at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def step_env(tmp_path: Path, source: ProcessCluster, target: ProcessCluster, connect_port: int) -> dict[str, str]:
    """The guide's variables, and its two commands on the PATH: this checkout's ``riverlog``,
    and ``riverlog-connect`` on the Kafka jars the tests cache (``$RIVERLOG_CONNECT_HOME/libs``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    riverlog = bin_dir / "riverlog"
    riverlog.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m riverlog "$@"\n')
    riverlog.chmod(0o755)
    (bin_dir / "riverlog-connect").symlink_to(REPO_ROOT / "scripts" / "riverlog-connect")
    env = riverlog_env()
    env.update({
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "RIVERLOG_CONNECT_HOME": str(Path(kafka_dist.install()).parent),
        "RIVERLOG_CONNECT_JAVA_OPTS": "-Xmx384m",
        "KAFKA_BOOTSTRAP": source.bootstrap,
        "RIVERLOG_BOOTSTRAP": target.bootstrap,
        "CONNECT_URL": f"http://127.0.0.1:{connect_port}",
        "MIRROR_TOPICS": TOPIC,
        "MIRROR_GROUPS": GROUP,
        "SYNC_INTERVAL_SECONDS": "1",
        "OFFSET_LAG_MAX": str(LAG_MAX),
    })
    return env


def run_step(step: GuideStep, workdir: Path, env: dict[str, str], background: list[subprocess.Popen[bytes]],
             attach_log: Callable[[str, Callable[[], str]], None]) -> None:
    started = time.monotonic()
    if step.background:
        log_path = workdir / f"{step.name}.log"
        with open(log_path, "ab") as log:
            background.append(subprocess.Popen(["bash", "-euo", "pipefail", "-c", step.script], cwd=workdir, env=env,
                                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        attach_log(f"guide step {step.name} (background)",
                   lambda: "\n".join(log_path.read_text(errors="replace").splitlines()[-150:]))
        print(f"--- step {step.name} (line {step.line}): started in the background")
        return
    print(f"--- step {step.name} (line {step.line}) running", flush=True)
    try:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", step.script], cwd=workdir, env=env,
                                capture_output=True, text=True, timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"guide step {step.name} (docs/migration.md line {step.line}) still running after "
                             f"{STEP_TIMEOUT:.0f}s:\n{exc.stdout!r}\n{exc.stderr!r}") from None
    print(f"--- step {step.name} (line {step.line}), {time.monotonic() - started:.1f}s, exit {result.returncode}\n"
          f"{result.stdout}{result.stderr}")
    for proc in background:
        assert proc.poll() is None, f"a background step exited ({proc.returncode}) before step {step.name}"
    assert result.returncode == 0, (f"guide step {step.name} (docs/migration.md line {step.line}) failed "
                                    f"({result.returncode}):\n{step.script}\n{result.stdout}\n{result.stderr}")


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "migration-test-probe"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def test_migration_guide_runs_from_start_to_end(
        process_cluster_factory: Callable[..., ProcessCluster], background: list[subprocess.Popen[bytes]],
        attach_log: Callable[[str, Callable[[], str]], None], tmp_path: Path) -> None:
    steps = guide_steps(GUIDE.read_text())
    source = process_cluster_factory(1, netns=False, target="kafka", overrides=SINGLE_NODE)
    target = process_cluster_factory(1, netns=False, overrides=SINGLE_NODE)
    create_topic(source, TOPIC, partitions=PARTITIONS, replication=1)
    (connect_port,) = free_ports(1)
    env = step_env(tmp_path, source, target, connect_port)
    workdir = tmp_path / "guide"
    workdir.mkdir()

    app = Application()
    behind: dict[int, int] = {}  # how far the group was behind each partition's end when translated

    def stop_kafka_consumers() -> None:
        app.stop_consumers()

    def start_target_consumers() -> None:
        # The offsets were translated (the previous step waited for it): how far behind then.
        ends = end_offsets(source.bootstrap, TOPIC)
        behind.update({p: ends[p] - app.committed.get(p, 0) for p in range(PARTITIONS)})
        app.start_consumers(target.bootstrap, MIRRORED)

    app_steps = {"stop-kafka-consumers": stop_kafka_consumers, "start-riverlog-consumers": start_target_consumers,
                 "move-producers": lambda: app.move_producers(target.bootstrap, MIRRORED)}
    assert {s.name for s in steps if s.kind == APP} == set(app_steps), "the guide's application steps changed"

    app.start(source.bootstrap)
    try:
        time.sleep(3)  # the application has been running for a while before the migration
        for step in steps:
            app.check()
            if step.kind == APP:
                print(f"--- application step {step.name} (line {step.line})")
                app_steps[step.name]()
            else:
                run_step(step, workdir, env, background, attach_log)
        time.sleep(2)  # producers keep writing to the target after the mirror is gone
        app.stop_producing()  # then stop; everything written must be consumed
        with app.lock:
            produced = list(app.produced)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            app.check()
            with app.lock:
                seen = set(app.consumed["kafka"]) | set(app.consumed["target"])
            if seen >= set(produced):
                break
            time.sleep(0.5)
    finally:
        app.stop()
    app.check()

    with app.lock:
        on_kafka, on_target = list(app.consumed["kafka"]), list(app.consumed["target"])
    skipped = sorted(set(produced) - set(on_kafka) - set(on_target))
    assert not skipped, f"{len(skipped)} produced records were never consumed, first {skipped[:10]}"
    assert on_kafka and on_target, "the group consumed on both clusters"
    reread = {p: len({n for n in set(on_kafka) & set(on_target) if n % PARTITIONS == p}) for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        # The guide's window: offset.lag.max when caught up; behind that, back to the nearest
        # offset sync MM2 keeps, which the guide bounds by four times how far behind.
        window = LAG_MAX + 4 * behind[p]
        assert reread[p] <= window, f"partition {p}: re-read {reread[p]} records, the guide says at most {window}"
        assert reread[p] < max(app.committed.get(p, 0), 1), f"partition {p}: re-read from the beginning"
    print(f"produced {len(produced)} records; consumed {len(on_kafka)} on Kafka and {len(on_target)} on the target; "
          f"committed on Kafka {app.committed}; behind when translated {behind}; re-read per partition {reread}")
