"""Consumer-group members as child processes (:mod:`support.group_member`), watched from a test.

:class:`MemberProcess` starts one member, collects the JSON events it prints in a background
thread and lets the test wait for an event (bounded), ask for its status, close it cleanly or
kill it with SIGKILL. Assertions are about events and generations, never about how long
something took.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

MEMBER_SCRIPT = Path(__file__).resolve().parent / "group_member.py"

Event = dict[str, Any]


class MemberProcess:
    """One group member process; ``events`` is everything it printed so far, in order."""

    def __init__(
        self,
        name: str,
        *,
        bootstrap: str,
        group: str,
        topic: str,
        log_dir: Path,
        instance_id: str | None = None,
        strategy: str = "range",
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 500,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.instance_id = instance_id
        self.events: list[Event] = []
        self.stderr_path = log_dir / f"{name}.stderr"
        self._cond = threading.Condition()
        cmd = [
            sys.executable, str(MEMBER_SCRIPT),
            "--bootstrap", bootstrap, "--group", group, "--topic", topic,
            "--client-id", name, "--strategy", strategy,
            "--session-timeout-ms", str(session_timeout_ms),
            "--heartbeat-interval-ms", str(heartbeat_interval_ms),
            *extra_args,
        ]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        log_dir.mkdir(parents=True, exist_ok=True)
        self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - closed in _reap
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
            # Its own session: signals meant for pytest do not reach it, ours reach only it.
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"{name}-events", daemon=True)
        self._reader.start()

    # --- events ---------------------------------------------------------------------------------

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "garbage", "line": line}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "exited", "t": time.monotonic()})
            self._cond.notify_all()

    def snapshot(self) -> list[Event]:
        with self._cond:
            return list(self.events)

    def wait_for(
        self,
        predicate: Callable[[list[Event]], Any],
        *,
        timeout: float,
        message: str,
    ) -> Any:
        """Wait until ``predicate(events)`` is truthy and return its value; fail the test with the
        member's recent events (and stderr) if it is not within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self.events)
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.5))
        raise AssertionError(f"{self.name}: {message} within {timeout:.0f}s\n{self.describe()}")

    def wait_event(self, kind: str, *, after: int = 0, timeout: float, message: str | None = None) -> Event:
        """The first event of ``kind`` at index ``after`` or later."""

        def find(events: list[Event]) -> Event | None:
            for e in events[after:]:
                if e["event"] == kind:
                    return e
            return None

        event: Event = self.wait_for(find, timeout=timeout, message=message or f"no {kind!r} event")
        return event

    def describe(self, last: int = 25) -> str:
        events = self.snapshot()
        lines = [f"--- last {min(last, len(events))} of {len(events)} events of {self.name} ---"]
        lines += [json.dumps(e) for e in events[-last:] if e["event"] != "record"]
        records = sum(1 for e in events if e["event"] == "record")
        lines.append(f"({records} record events)")
        try:
            err = self.stderr_path.read_text(errors="replace")[-3000:]
        except OSError:
            err = ""
        if err.strip():
            lines.append(f"--- stderr of {self.name} ---\n{err}")
        return "\n".join(lines)

    # --- derived state --------------------------------------------------------------------------

    def assignment(self, events: Iterable[Event] | None = None) -> set[int] | None:
        """Partitions held according to the rebalance callbacks; None before the first assign."""
        held: set[int] | None = None
        for e in self.snapshot() if events is None else events:
            kind = e["event"]
            if kind == "assign":
                held = (held or set()) | set(e["partitions"]) if e["incremental"] else set(e["partitions"])
            elif kind in ("revoke", "lost"):
                held = (held or set()) - set(e["partitions"]) if e["incremental"] else set()
        return held

    def rebalance_events(self, after: int = 0) -> list[Event]:
        return [e for e in self.snapshot()[after:] if e["event"] in ("assign", "revoke", "lost")]

    def records(self) -> list[Event]:
        return [e for e in self.snapshot() if e["event"] == "record"]

    def errors(self) -> list[Event]:
        return [e for e in self.snapshot() if e["event"] in ("error", "commit_failed", "garbage")]

    # --- commands -------------------------------------------------------------------------------

    def _send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def status(self, timeout: float = 15.0) -> Event:
        """Ask for (and wait for) the member's current generation, member id and assignment."""
        after = len(self.snapshot())
        self._send("status")
        return self.wait_event("status", after=after, timeout=timeout, message="no answer to 'status'")

    def close(self, timeout: float = 30.0) -> Event:
        """Clean close (LeaveGroup for a dynamic member); returns the "closed" event."""
        self._send("close")
        event = self.wait_event("closed", timeout=timeout, message="did not close cleanly")
        self._reap(timeout)
        return event

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no commit, nothing."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self._reap(10.0)

    def _reap(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10.0)
        self._reader.join(timeout=5.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self) -> None:
        """Teardown: make sure the process is gone, without waiting long."""
        if self.alive:
            self.kill()
        elif not self._stderr.closed:
            self._reap(5.0)


def wait_for_split(
    members: Sequence[MemberProcess],
    partitions: Iterable[int],
    *,
    timeout: float,
    message: str = "members did not settle on a split of the partitions",
) -> dict[str, set[int]]:
    """Wait until the members' assignments cover ``partitions`` exactly once each and every member
    holds at least one; return {member name: partitions}."""
    wanted = set(partitions)
    deadline = time.monotonic() + timeout
    while True:
        held = {m.name: m.assignment() or set() for m in members}
        owned = [p for ps in held.values() for p in ps]
        if sorted(owned) == sorted(wanted) and all(held.values()):
            return held
        dead = [m.name for m in members if not m.alive]
        if dead or time.monotonic() > deadline:
            if dead:
                message = f"{message}: members {dead} exited"
            details = "\n".join(m.describe() for m in members)
            raise AssertionError(f"{message} within {timeout:.0f}s: holdings {held}\n{details}")
        time.sleep(0.1)


# --- records and committed offsets ------------------------------------------------------------------

# Broker settings every group test uses: no delay before the first rebalance of a new group
# (Kafka's default of 3 s would only slow tests down), and a small offsets topic unless a test
# wants Kafka's default of 50 partitions.
GROUP_BROKER_SETTINGS: dict[str, object] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
}


def produce_known(
    bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str, *, timeout: float = 30.0
) -> dict[tuple[int, int], str]:
    """Produce ``per_partition`` records with distinct values to each partition (acks=all);
    returns {(partition, offset): value} as acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 3})
    acked: dict[tuple[int, int], str] = {}
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = msg.value().decode()

    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{tag}-p{p}-{i}".encode(), key=f"k{i}".encode(), partition=p,
                             on_delivery=on_delivery)
    remaining = producer.flush(timeout)
    assert remaining == 0 and not errors, f"produce to {topic}: {remaining} unsent, errors {errors[:5]}"
    assert len(acked) == partitions * per_partition, f"{len(acked)} acknowledged"
    return acked


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: Iterable[int],
                      *, timeout: float = 30.0) -> dict[int, int]:
    """The group's committed offsets as kafka-python's admin client reads them (OffsetFetch), -1
    where nothing is committed: a third-party reader, independent of Riverlog's own client.

    Answers meaning "ask again" (a coordinator still loading after a broker start, or moving)
    are retried until ``timeout``, as consumers do. (Not confluent-kafka: librdkafka's admin
    ListConsumerGroupOffsets crashes the process on NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS, confluentinc/librdkafka#5040.)
    """
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError

    retriable = (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError)
    wanted = [TopicPartition(topic, p) for p in partitions]
    deadline = time.monotonic() + timeout
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="group-tests-oracle",
                             request_timeout_ms=int(timeout * 1000))
    try:
        while True:
            try:
                result = admin.list_group_offsets({group: wanted})[group]
                break
            except retriable:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in result.items()}
