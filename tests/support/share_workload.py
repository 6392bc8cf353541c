"""Share consumers for the cluster tier's fault tests (issue #21, acceptance 4), and their checker.

Two Java ``KafkaShareConsumer``s of one share group (``tests/java/ShareClient.java``, one JVM)
are polled in turn by a thread; every record a poll returns is accepted and committed
(``commitSync``), and each delivery is remembered with whether its acceptance was confirmed (its
partition's acknowledgement did not fail). The rules, checked against a replica's log once the
faults are over and the group drained:

- every record from the share group's start on was delivered (none lost);
- the group's lag, as the admin reads it (Admin.listShareGroupOffsets: the durable state's start
  offset and the records done past it, against the high watermark), is 0 on every partition: the
  broker holds every record as done. A record whose acknowledgement *failed* may be done too
  without being delivered again -- the state write can succeed while the broker dies before
  answering, on Kafka as on Riverlog -- so the rule is the durable lag, not a confirmed acceptance
  of each record (Kafka's durable start offset itself may trail the last records done: it moves
  the start after writing);
- a record whose acceptance was confirmed is never delivered again (Kafka writes the
  share-partition's state before it answers an acknowledgement, so a broker killed after that
  cannot hand the record out again);
- every delivery carries the log's value.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from riverlog.protocol.record_batch import Record

from support.java_programs import JavaPrograms

CONSUMERS = ("share1", "share2")
POLL_MS = 300
WARM_UP_S = 120.0
# Warm-up records: numbers far above the sequenced producers', without a key, so the replica
# checker sees one more stream of increasing numbers rather than a foreign value.
WARM_UP_BASE = 10**9


@dataclass(frozen=True)
class Delivery:
    index: int  # order of deliveries as this reader saw them
    partition: int
    offset: int
    value: str | None
    delivery_count: int
    confirmed: bool  # its acceptance was committed without error


class ShareReader:
    def __init__(self, libs: Path, bootstrap: str, group: str, topic: str, log_path: Path) -> None:
        self.topic = topic
        self.session = JavaPrograms(libs).session("ShareClient", [bootstrap], log_path=log_path)
        for name in CONSUMERS:
            self.session.call("consumer", name, group, topic)
        self.deliveries: list[Delivery] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self._session_lock = threading.Lock()  # one command at a time on the JVM's stdin
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.start_offsets: dict[int, int] = {}

    def _poll(self, name: str) -> list[dict[str, Any]]:
        with self._session_lock:
            answer = self.session.call("poll", name, POLL_MS, "accept", timeout=180, expect_ok=False)
        if not answer.get("ok"):
            with self.lock:
                self.errors.append(f"{name}: {answer.get('error')}: {answer.get('message')}")
            return []
        failed = {int(str(f).split(":", 1)[0]) for f in answer["failed"]}
        records: list[dict[str, Any]] = answer["records"]
        with self.lock:
            for r in records:
                self.deliveries.append(Delivery(len(self.deliveries), r["partition"], r["offset"], r["value"],
                                                r["delivery_count"], r["partition"] not in failed))
        return records

    def warm_up(self, partitions: int) -> None:
        """Produce warm-up records until every partition delivered one: a share group starts at
        the log end, so records written after this are all the group's. Remembers each
        partition's first delivered offset (where the group started)."""
        deadline = time.monotonic() + WARM_UP_S
        round_ = 0
        while len(self.start_offsets) < partitions:
            assert time.monotonic() < deadline, f"share warm-up saw only partitions {sorted(self.start_offsets)}"
            for p in range(partitions):
                if p not in self.start_offsets:
                    self.session.call("produce", self.topic, p, str(WARM_UP_BASE + round_))
            for name in CONSUMERS:
                for r in self._poll(name):
                    self.start_offsets.setdefault(r["partition"], r["offset"])
            round_ += 1

    def start(self) -> ShareReader:
        self._thread = threading.Thread(target=self._run, name="share-reader", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for name in CONSUMERS:
                self._poll(name)

    def accepted(self) -> set[tuple[int, int]]:
        with self.lock:
            return {(d.partition, d.offset) for d in self.deliveries if d.confirmed}

    def delivered(self) -> set[tuple[int, int]]:
        with self.lock:
            return {(d.partition, d.offset) for d in self.deliveries}

    def durable_offsets(self, group: str) -> dict[int, tuple[int, int]]:
        """(start offset, lag) per share-partition as the admin reads them
        (Admin.listShareGroupOffsets); {} while the call fails (a coordinator moving)."""
        with self._session_lock:
            answer = self.session.call("offsets", group, timeout=60, expect_ok=False)
        if not answer.get("ok"):
            return {}
        return {int(p["partition"]): (int(p["start_offset"]), int(p["lag"])) for p in answer["partitions"]
                if p["topic"] == self.topic}

    def drained(self, group: str, logs: dict[int, list[Record]]) -> bool:
        """Every record from the group's start delivered and no lag left on any partition."""
        delivered = self.delivered()
        if not all((p, r.offset) in delivered for p, log in logs.items() for r in log
                   if r.offset >= self.start_offsets.get(p, 0)):
            return False
        offsets = self.durable_offsets(group)
        return all(offsets.get(p, (-1, -1))[1] == 0 for p in logs)

    def stop_polling(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=240)

    def stop(self) -> None:
        self.stop_polling()
        self.session.close()

    def problems(self, group: str, logs: dict[int, list[Record]]) -> list[str]:
        out: list[str] = []
        first_confirmed: dict[tuple[int, int], int] = {}
        again: list[tuple[int, int, int]] = []
        for d in self.deliveries:
            key = (d.partition, d.offset)
            if key in first_confirmed:
                again.append((d.partition, d.offset, d.delivery_count))
            elif d.confirmed:
                first_confirmed[key] = d.index
        if again:
            out.append(f"share group: {len(again)} records delivered again after their acceptance was confirmed "
                       f"(partition, offset, delivery count): {again[:10]}")
        values = {(d.partition, d.offset): d.value for d in self.deliveries}
        offsets = self.durable_offsets(group)
        for p, log in logs.items():
            start = self.start_offsets.get(p)
            if start is None:
                out.append(f"share group: partition {p} never delivered a record")
                continue
            mine = [r for r in log if r.offset >= start]
            lost = [r.offset for r in mine if (p, r.offset) not in values]
            if lost:
                out.append(f"share group: partition {p}: {len(lost)} records never delivered: {lost[:10]}")
            durable_start, lag = offsets.get(p, (-1, -1))
            if lag != 0:
                # Records the broker does not hold as done: the ones from its start offset on that
                # were never accepted, and how often each was delivered (the highest count seen).
                pending = [r.offset for r in mine
                           if r.offset >= durable_start and (p, r.offset) not in first_confirmed]
                counts = {o: max((d.delivery_count for d in self.deliveries if (d.partition, d.offset) == (p, o)),
                                 default=0) for o in pending[:10]}
                out.append(f"share group: partition {p}: lag {lag} (start offset {durable_start}, log end "
                           f"{log_end(log)}); not accepted from the start (offset: highest delivery count seen) "
                           f"{counts}")
            wrong = [r.offset for r in mine if (p, r.offset) in values
                     and values[(p, r.offset)] != (None if r.value is None else r.value.decode())]
            if wrong:
                out.append(f"share group: partition {p}: delivered other values than the log's at {wrong[:10]}")
        return out

    def unconfirmed_done(self, logs: dict[int, list[Record]]) -> int:
        """Records from the group's start whose acceptance never came back confirmed (the broker
        finished them all the same, when :meth:`problems` finds nothing)."""
        accepted = self.accepted()
        return sum(1 for p, log in logs.items() for r in log
                   if r.offset >= self.start_offsets.get(p, log_end(log)) and (p, r.offset) not in accepted)


def log_end(log: list[Record]) -> int:
    return log[-1].offset + 1 if log else 0
