"""Acceptance 7 of issue #16: kill -9 of a broker holding open and finished transactions.

Before the kill, one topic holds per partition (offsets):

    p0: 0 committed, 1 COMMIT, 2 aborted, 3 ABORT, 4 timeout (open), 5 after, 6 COMMIT
    p1: 0 committed, 1 COMMIT, 2 aborted, 3 ABORT, 4 resume (open), 5 after, 6 COMMIT
    p2: 0 committed, 1 COMMIT, 2 aborted, 3 ABORT, 4 after, 5 COMMIT

"timeout" has a short ``transaction.timeout.ms`` and its producer goes silent; "resume" has a long
one and a new producer with its transactional id takes over after the restart. After SIGKILL and a
restart on the same data:

- ListOffsets: the high watermarks are where they were; read_committed (the last stable offset)
  stops at each open transaction's first record;
- read_committed consumers see exactly the committed records, so the aborted transactions are
  still known (the aborted index and the producer state survived);
- the coordinator (``kafka-transactions list/describe``) knows every transactional id with the
  producer id it had and its state: finished ones complete, open ones Ongoing;
- the partition leader (``describe-producers``) still knows the open transactions' first offsets;
- the coordinator aborts "timeout" once it is older than its timeout (checked every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and consumers move past it;
- a new producer with "resume"'s id initialises (which aborts the open transaction) and commits;
- offsets sent in "after"'s transaction are committed for its group; those of "resume"'s are
  dropped with it, its successor's are committed;
- finally, with the broker stopped, ``kafka-dump-log`` reads each partition's ``.txnindex``: the
  abort from before the crash and the aborts after it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.java_tools import JavaTools, ToolResult
from support.txn_checks import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    end_offsets,
    group_offsets,
    read_all,
    wait_end_offsets,
    wait_stable,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

TOPIC = "crash-txn"
TOPICS = {TOPIC: 3}
P0, P1, P2 = ((TOPIC, p) for p in range(3))
TXN_BROKER_SETTINGS: dict[str, object] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}
CALL_TIMEOUT = 60.0
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"  # kafka-dump-log.sh
FIELD = re.compile(r"(\w+): (\S+)")
# "timeout" is meant to be open when the broker is killed and to time out after the restart;
# the test accepts the abort on either side of the restart, only not its absence.
SHORT_TXN_TIMEOUT_MS = 20_000
# "resume" must outlive the test unless a new producer ends it.
LONG_TXN_TIMEOUT_MS = 600_000
IDS = {name: f"crash-{name}" for name in ("committed", "aborted", "timeout", "resume", "after")}
# Consumer groups whose offsets "after" (committed) and "resume" (open at the kill, then aborted
# by its successor, which commits offsets of its own) send in their transactions.
AFTER_GROUP = "crash-after-group"
RESUME_GROUP = "crash-resume-group"


class Txn:
    """A confluent-kafka transactional producer, initialised."""

    def __init__(self, bootstrap: str, name: str, **conf: object) -> None:
        self.bootstrap = bootstrap
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": IDS[name],
                                  "log_level": 3, **conf})
        self.producer.init_transactions(CALL_TIMEOUT)

    def send(self, partition: int, value: str) -> int:
        delivered: list[Message] = []
        self.producer.produce(TOPIC, value=value.encode(), key=b"k", partition=partition,
                              on_delivery=lambda err, msg: delivered.append(msg))
        assert self.producer.flush(CALL_TIMEOUT) == 0
        (msg,) = delivered
        if msg.error() is not None:
            raise KafkaException(msg.error())
        offset = msg.offset()
        assert offset is not None
        return offset

    def send_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """send_offsets_to_transaction for ``group``, as a consumer of it that never joined."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "log_level": 3})
        try:
            self.producer.send_offsets_to_transaction(
                [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                consumer.consumer_group_metadata(), CALL_TIMEOUT)
        finally:
            consumer.close()


def table(result: ToolResult, first_column: str) -> list[dict[str, str]]:
    """A kafka-transactions table: a header line of column names, then one line per row (a
    trailing empty column, such as no TopicPartitions, is missing from its line)."""
    lines = [line.split() for line in result.stdout.splitlines() if line.strip()]
    header = next(i for i, cols in enumerate(lines) if cols and cols[0] == first_column)
    return [dict(zip(lines[header], cols, strict=False)) for cols in lines[header + 1:]]


def list_transactions(java_tools: JavaTools, bootstrap: str) -> dict[str, dict[str, str]]:
    listed = java_tools.transactions(bootstrap, "list")
    return {row["TransactionalId"]: row for row in table(listed, "TransactionalId")
            if row["TransactionalId"] in IDS.values()}


def all_listed(java_tools: JavaTools, bootstrap: str) -> dict[str, dict[str, str]] | None:
    listed = list_transactions(java_tools, bootstrap)
    return listed if sorted(listed) == sorted(IDS.values()) else None


def describe_transaction(java_tools: JavaTools, bootstrap: str, name: str) -> dict[str, str]:
    described = java_tools.transactions(bootstrap, "describe", "--transactional-id", IDS[name])
    (row,) = table(described, "CoordinatorId")
    return row


def open_transactions(java_tools: JavaTools, bootstrap: str, partition: int) -> dict[str, str]:
    """describe-producers of one partition: producer id -> CurrentTransactionStartOffset."""
    described = java_tools.transactions(bootstrap, "describe-producers", "--topic", TOPIC,
                                        "--partition", str(partition))
    return {row["ProducerId"]: row["CurrentTransactionStartOffset"]
            for row in table(described, "ProducerId")}


def aborted_index(java_tools: JavaTools, broker: BrokerProcess, partition: int) -> list[tuple[str, int, int, int]]:
    """The entries of a partition's ``.txnindex`` files, as Kafka's DumpLogSegments decodes them."""
    files = sorted(p for p in (broker.data_dir / f"{TOPIC}-{partition}").glob("*.txnindex") if p.stat().st_size)
    assert files, f"no .txnindex for partition {partition}"
    dumped = java_tools.run(DUMP_LOG_SEGMENTS, ["--files", ",".join(str(f) for f in files)])
    entries = [dict(FIELD.findall(line)) for line in dumped.stdout.splitlines() if line.startswith("version:")]
    return [(e["producerId"], int(e["firstOffset"]), int(e["lastOffset"]), int(e["lastStableOffset"]))
            for e in entries]


def offsets_now(bootstrap: str) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(read_committed, read_uncommitted) ListOffsets(latest), the committed ones asked first, so
    a high watermark unchanged since bounds what the last stable offset could have been."""

    def ask() -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        return end_offsets(bootstrap, TOPICS, READ_COMMITTED), end_offsets(bootstrap, TOPICS, READ_UNCOMMITTED)

    # Right after a restart leadership may still be settling; errors are "not yet".
    return wait_until(ask, timeout=60, message="ListOffsets answered")


def test_kill_9_with_open_and_finished_transactions(
    broker_factory: Callable[..., BrokerProcess], java_tools: JavaTools
) -> None:
    broker = broker_factory(TXN_BROKER_SETTINGS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, 3)

    committed = Txn(bootstrap, "committed")
    committed.producer.begin_transaction()
    for p in range(3):
        assert committed.send(p, f"committed-{p}") == 0
    committed.producer.commit_transaction(CALL_TIMEOUT)
    assert wait_stable(bootstrap, TOPICS) == {P0: 2, P1: 2, P2: 2}

    aborted = Txn(bootstrap, "aborted")
    aborted.producer.begin_transaction()
    for p in range(3):
        assert aborted.send(p, f"aborted-{p}") == 2
    aborted.producer.abort_transaction(CALL_TIMEOUT)
    assert wait_stable(bootstrap, TOPICS) == {P0: 4, P1: 4, P2: 4}

    timeout = Txn(bootstrap, "timeout", **{"transaction.timeout.ms": SHORT_TXN_TIMEOUT_MS})
    timeout.producer.begin_transaction()
    assert timeout.send(0, "timeout-0") == 4
    resume = Txn(bootstrap, "resume", **{"transaction.timeout.ms": LONG_TXN_TIMEOUT_MS})
    resume.producer.begin_transaction()
    assert resume.send(1, "resume-1") == 4
    resume.send_offsets(RESUME_GROUP, {P1: 4})
    after = Txn(bootstrap, "after")
    after.producer.begin_transaction()
    assert [after.send(0, "after-0"), after.send(1, "after-1"), after.send(2, "after-2")] == [5, 5, 4]
    after.send_offsets(AFTER_GROUP, {P0: 5})
    after.producer.commit_transaction(CALL_TIMEOUT)
    wait_end_offsets(bootstrap, TOPICS, {P0: 7, P1: 7, P2: 6})
    lso, hw = offsets_now(bootstrap)
    assert (lso[P1], lso[P2]) == (4, 6), lso

    # The finished transactions completed before the kill: their markers all written (the
    # group's offsets too) and Complete* in the coordinator's log.
    assert wait_until(lambda: group_offsets(bootstrap, AFTER_GROUP), timeout=60,
                      message=f"{AFTER_GROUP}'s committed offsets") == {P0: 5}

    def settled() -> dict[str, dict[str, str]] | None:
        listed = all_listed(java_tools, bootstrap)
        finished = [IDS[name] for name in ("committed", "aborted", "after")]
        if listed is None or any(not listed[tid]["TransactionState"].startswith("Complete") for tid in finished):
            return None
        return listed

    before = wait_until(settled, timeout=60, message="the finished transactions complete")
    assert before[IDS["resume"]]["TransactionState"] == "Ongoing", before

    # --- kill -9 and restart on the same data ----------------------------------------------
    broker.restart(hard=True)

    # The log and the last stable offsets: "resume" still holds p1 at its first record;
    # "timeout" holds p0 unless the coordinator has aborted it already (its marker then at 7).
    lso, hw = offsets_now(bootstrap)
    assert (hw[P1], hw[P2]) == (7, 6), hw
    assert (lso[P1], lso[P2]) == (4, 6), lso
    assert (lso[P0], hw[P0]) in ((4, 7), (8, 8)), (lso, hw)

    # The coordinator's state: every id with the producer id it had (retried while the
    # coordinator loads), finished transactions complete, "resume" ongoing on p1.
    after_restart = wait_until(lambda: all_listed(java_tools, bootstrap), timeout=60,
                               message="every transactional id listed after the restart")
    producer_id = {name: before[tid]["ProducerId"] for name, tid in IDS.items()}
    assert {tid: row["ProducerId"] for tid, row in after_restart.items()} == {
        tid: producer_id[name] for name, tid in IDS.items()}, after_restart
    states = {tid: row["TransactionState"] for tid, row in after_restart.items()}
    assert states[IDS["committed"]] == "CompleteCommit", after_restart
    assert states[IDS["after"]] == "CompleteCommit", after_restart
    assert states[IDS["aborted"]] == "CompleteAbort", after_restart
    assert states[IDS["resume"]] == "Ongoing", after_restart
    assert states[IDS["timeout"]] in ("Ongoing", "PrepareAbort", "CompleteAbort"), after_restart
    ongoing = describe_transaction(java_tools, bootstrap, "resume")
    assert ongoing["TransactionState"] == "Ongoing", ongoing
    assert ongoing["ProducerId"] == producer_id["resume"], ongoing
    # Its partitions: p1 and the __consumer_offsets partition of RESUME_GROUP.
    parts = ongoing.get("TopicPartitions", "").split(",")
    assert sorted(tp.rsplit("-", 1)[0] for tp in parts) == ["__consumer_offsets", TOPIC], ongoing
    assert f"{TOPIC}-1" in parts, ongoing

    # The partition leaders' producer state: "resume"'s transaction still open at offset 4.
    assert open_transactions(java_tools, bootstrap, 1).get(producer_id["resume"]) == "4"
    assert set(open_transactions(java_tools, bootstrap, 2).values()) <= {"None"}

    # Read committed: p1 blocked at "resume", p2 complete; the aborted records stay invisible.
    blocked = read_all(bootstrap, {TOPIC: 3}, READ_COMMITTED)
    assert blocked.values(TOPIC, 1) == ["committed-1"], blocked
    assert blocked.values(TOPIC, 2) == ["committed-2", "after-2"], blocked
    assert blocked.offsets(TOPIC, 2) == [0, 4], blocked
    assert (blocked.ends[P1], blocked.ends[P2]) == (4, 6), blocked.ends

    # The group coordinator still has "after"'s offsets committed.
    assert wait_until(lambda: group_offsets(bootstrap, AFTER_GROUP), timeout=60,
                      message=f"{AFTER_GROUP}'s committed offsets") == {P0: 5}

    # --- "timeout" times out ---------------------------------------------------------------
    def p0_stable() -> bool:
        lso, hw = offsets_now(bootstrap)
        return lso[P0] == hw[P0] == 8

    wait_until(p0_stable, timeout=SHORT_TXN_TIMEOUT_MS / 1000 + 60, interval=0.5,
               message="the timed-out transaction aborted on p0 (LSO == high watermark == 8)")
    timed_out = describe_transaction(java_tools, bootstrap, "timeout")
    assert timed_out["TransactionState"] == "CompleteAbort", timed_out
    past = read_all(bootstrap, {TOPIC: 1}, READ_COMMITTED)
    assert past.values(TOPIC, 0) == ["committed-0", "after-0"], past
    assert past.offsets(TOPIC, 0) == [0, 5], past
    assert past.ends[P0] == 8, past.ends
    assert read_all(bootstrap, {TOPIC: 1}, READ_UNCOMMITTED).values(TOPIC, 0) == [
        "committed-0", "aborted-0", "timeout-0", "after-0"]

    # --- a new producer with "resume"'s id: its init aborts the open transaction -------------
    successor = Txn(bootstrap, "resume")
    successor.producer.begin_transaction()
    assert successor.send(1, "successor-1") == 8  # behind the abort marker at 7
    successor.send_offsets(RESUME_GROUP, {P2: 6})
    successor.producer.commit_transaction(CALL_TIMEOUT)
    assert wait_stable(bootstrap, TOPICS) == {P0: 8, P1: 10, P2: 6}

    final = read_all(bootstrap, TOPICS, READ_COMMITTED)
    assert final.values(TOPIC, 0) == ["committed-0", "after-0"], final
    assert final.values(TOPIC, 1) == ["committed-1", "after-1", "successor-1"], final
    assert final.offsets(TOPIC, 1) == [0, 5, 8], final
    assert final.values(TOPIC, 2) == ["committed-2", "after-2"], final
    assert final.ends == {P0: 8, P1: 10, P2: 6}, final.ends
    everything = read_all(bootstrap, TOPICS, READ_UNCOMMITTED)
    assert everything.values(TOPIC, 1) == ["committed-1", "aborted-1", "resume-1", "after-1", "successor-1"]

    # "resume"'s pending offset (p1) went with its transaction; the successor's (p2) counts.
    assert wait_until(lambda: group_offsets(bootstrap, RESUME_GROUP), timeout=60,
                      message=f"{RESUME_GROUP}'s committed offsets") == {P2: 6}

    finished = list_transactions(java_tools, bootstrap)
    assert finished[IDS["resume"]]["TransactionState"] == "CompleteCommit", finished
    assert finished[IDS["timeout"]]["TransactionState"] == "CompleteAbort", finished
    for p in range(3):
        assert set(open_transactions(java_tools, bootstrap, p).values()) <= {"None"}, p
    broker.assert_alive()

    # The aborted index on disk (kafka-dump-log on each partition's .txnindex, the broker
    # stopped so the files are complete): the abort from before the crash and the two after it.
    # An entry is (producer id, first offset, marker offset, last stable offset after the marker).
    broker.stop()
    aborted_pid, timeout_pid, resume_pid = (producer_id[name] for name in ("aborted", "timeout", "resume"))
    assert aborted_index(java_tools, broker, 0) == [(aborted_pid, 2, 3, 4), (timeout_pid, 4, 7, 8)]
    assert aborted_index(java_tools, broker, 1) == [(aborted_pid, 2, 3, 4), (resume_pid, 4, 7, 8)]
    assert aborted_index(java_tools, broker, 2) == [(aborted_pid, 2, 3, 4)]
