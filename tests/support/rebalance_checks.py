"""Checks of a consumer group's behaviour while its membership changes (issue #21, acceptance 1
and 2): no partition owned by two members at once, committed offsets never going back.

Ownership is judged from the members' own rebalance callbacks, numbered by one counter shared by
every member (``tests/java/GroupMembers.java`` numbers them in its JVM; the confluent-kafka tests
poll every consumer from one thread and number them there). A partition moves only through the
coordinator: the member giving it up finishes its revocation callback before its client tells
the coordinator, and the coordinator hands it out only after that, so in a correct run the
revocation's number is below the assignment's. Replaying the events in number order is then a
check without clocks: an assignment of a partition some other member still holds is an overlap.

Committed offsets are read by a third party while the group runs (:class:`CommittedOffsetsWatch`,
kafka-python's admin client, OffsetFetch without a member) and every partition's successive
readings must not decrease.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ASSIGNED = "assigned"
REVOKED = "revoked"
LOST = "lost"


def ownership_overlaps(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Replay assignment events (``seq``, ``member``, ``kind``, ``partitions``) in ``seq`` order;
    describe every assignment of a partition another member held at that point."""
    owner: dict[str, str] = {}
    problems: list[str] = []
    for e in sorted(events, key=lambda e: int(e["seq"])):
        member, kind = str(e["member"]), str(e["kind"])
        for tp in e["partitions"]:
            holder = owner.get(tp)
            if kind == ASSIGNED:
                if holder is not None and holder != member:
                    problems.append(f"event {e['seq']}: {tp} assigned to {member} while {holder} owned it")
                owner[tp] = member
            elif kind in (REVOKED, LOST) and holder == member:
                del owner[tp]
    return problems


def final_owners(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Who owns each partition after the events (partition -> member)."""
    owner: dict[str, str] = {}
    for e in sorted(events, key=lambda e: int(e["seq"])):
        for tp in e["partitions"]:
            if e["kind"] == ASSIGNED:
                owner[tp] = str(e["member"])
            elif owner.get(tp) == e["member"]:
                del owner[tp]
    return owner


@dataclass
class EventLog:
    """Rebalance events of consumers called from one thread (confluent-kafka's callbacks run in
    the ``poll`` of the consumer they belong to), numbered in the order they happen."""

    events: list[dict[str, Any]] = field(default_factory=list)

    def add(self, member: str, kind: str, partitions: Iterable[tuple[str, int]]) -> None:
        self.events.append({"seq": len(self.events), "member": member, "kind": kind,
                            "partitions": sorted(f"{t}:{p}" for t, p in partitions)})


class CommittedOffsetsWatch:
    """Reads a group's committed offsets again and again on a thread until stopped, and keeps
    every partition's readings where they changed; :meth:`regressions` lists any that went back."""

    def __init__(self, bootstrap: str, group: str, pause_s: float = 0.1) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.pause_s = pause_s
        self.history: dict[str, list[int]] = {}
        self.readings = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"offsets-{group}", daemon=True)

    def __enter__(self) -> CommittedOffsetsWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="offsets-watch",
                                 request_timeout_ms=10_000)
        try:
            while not self._stop.is_set():
                try:
                    result = admin.list_group_offsets({self.group: None}).get(self.group, {})
                except Exception as exc:  # noqa: BLE001 - a coordinator moving or loading: read again
                    if len(self.errors) < 20:
                        self.errors.append(repr(exc))
                else:
                    self.readings += 1
                    for tp, meta in result.items():
                        if meta.offset < 0:
                            continue
                        seen = self.history.setdefault(f"{tp.topic}:{tp.partition}", [])
                        if not seen or seen[-1] != meta.offset:
                            seen.append(meta.offset)
                self._stop.wait(self.pause_s)
        finally:
            admin.close()

    def regressions(self) -> dict[str, list[int]]:
        return {tp: offsets for tp, offsets in self.history.items() if offsets != sorted(offsets)}

    def latest(self) -> dict[str, int]:
        return {tp: offsets[-1] for tp, offsets in self.history.items() if offsets}


def partitions_of(topic: str, count: int) -> set[str]:
    return {f"{topic}:{p}" for p in range(count)}


def log_ends(acked: Iterable[Sequence[Any]]) -> dict[str, int]:
    """Each partition's end offset after the acknowledged records ``[topic, partition, offset]``."""
    ends: dict[str, int] = {}
    for topic, partition, offset in acked:
        key = f"{topic}:{partition}"
        ends[key] = max(ends.get(key, 0), offset + 1)
    return ends


def wait_committed(watch: CommittedOffsetsWatch, ends: Mapping[str, int], timeout: float = 60.0) -> None:
    """Until the watch has seen every partition committed up to its end."""
    deadline = time.monotonic() + timeout
    while any(watch.latest().get(tp, -1) < end for tp, end in ends.items()):
        assert time.monotonic() < deadline, f"committed {watch.latest()}, log ends {dict(ends)}"
        time.sleep(0.2)
