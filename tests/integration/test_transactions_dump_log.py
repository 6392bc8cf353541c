"""Acceptance 8 of issue #16: Kafka's ``kafka-dump-log`` decodes a partition's segment with
control batches and its ``.txnindex``.

``kafka-dump-log.sh`` is ``org.apache.kafka.tools.DumpLogSegments`` in Kafka 4.x's jars; it reads
the files themselves, so what it prints is what the broker wrote in Kafka's on-disk formats. One
partition gets transactions that commit and abort, one abort while an earlier transaction is still
open (its index entry then carries that transaction's first offset as the last stable offset), and
a restart of the broker in between, after which its coordinator writes markers with a higher
coordinator epoch. The broker is stopped before the dump so every file is complete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Message, Producer
from support.brokers import BrokerProcess
from support.clients import create_topic
from support.java_tools import JavaTools, ToolResult
from support.txn_checks import wait_end_offsets, wait_stable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"  # kafka-dump-log.sh
TOPIC = "dump-log-txn"
TXN_BROKER_SETTINGS: dict[str, object] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
}
CALL_TIMEOUT = 60.0
FIELD = re.compile(r"(\w+): (\S+)")
TXN_LOG_RECORD = re.compile(r"^\| offset: .* key: (?P<key>\{.*\}) payload: (?P<payload>\{.*\})$")


class Txn:
    """A confluent-kafka transactional producer writing to partition 0 of TOPIC."""

    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                  "log_level": 3})
        self.producer.init_transactions(CALL_TIMEOUT)
        self.producer.begin_transaction()

    def send(self, value: str) -> int:
        delivered: list[Message] = []
        self.producer.produce(TOPIC, value=value.encode(), key=b"k", partition=0,
                              on_delivery=lambda err, msg: delivered.append(msg))
        assert self.producer.flush(CALL_TIMEOUT) == 0
        (msg,) = delivered
        if msg.error() is not None:
            raise KafkaException(msg.error())
        offset = msg.offset()
        assert offset is not None
        return offset


@dataclass(frozen=True)
class Batch:
    header: dict[str, str]
    records: list[dict[str, str]]


@dataclass(frozen=True)
class Dumped:
    log: ToolResult
    txnindex: ToolResult
    batches: list[Batch]
    aborted: list[dict[str, str]]  # the .txnindex entries
    txn_state: ToolResult  # __transaction_state's segments, with the transaction log decoder


def fields(line: str) -> dict[str, str]:
    return dict(FIELD.findall(line))


def parse_log_dump(stdout: str) -> list[Batch]:
    """DumpLogSegments --print-data-log: a ``baseOffset: ...`` line per batch, then a
    ``| offset: ...`` line per record."""
    batches: list[Batch] = []
    for line in stdout.splitlines():
        if line.startswith("baseOffset:"):
            batches.append(Batch(fields(line), []))
        elif line.startswith("| offset:"):
            assert batches, f"a record line before any batch: {line}"
            batches[-1].records.append(fields(line))
    return batches


def dump(java_tools: JavaTools, files: list[Path], *extra: str) -> ToolResult:
    assert files, "no files to dump"
    return java_tools.run(DUMP_LOG_SEGMENTS, ["--files", ",".join(str(f) for f in files), *extra])


@pytest.fixture(scope="module")
def dumped(module_broker_factory: Callable[..., BrokerProcess], java_tools: JavaTools) -> Dumped:
    broker = module_broker_factory(TXN_BROKER_SETTINGS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, 1)

    # Offsets: 0 held (open while the next one aborts), 1 dropped, 2 ABORT(dropped), 3 COMMIT(held).
    held = Txn(bootstrap, "dump-held")
    assert held.send("held-0") == 0
    dropped = Txn(bootstrap, "dump-dropped")
    assert dropped.send("dropped-0") == 1
    dropped.producer.abort_transaction(CALL_TIMEOUT)
    wait_end_offsets(bootstrap, {TOPIC: 1}, {(TOPIC, 0): 3})
    held.producer.commit_transaction(CALL_TIMEOUT)
    assert wait_stable(bootstrap, {TOPIC: 1}) == {(TOPIC, 0): 4}
    del held, dropped

    # A restart makes the broker a new coordinator incarnation: a higher coordinator epoch.
    broker.restart()
    # 4-5 later-dropped, 6 ABORT, 7 later, 8 COMMIT.
    later_dropped = Txn(bootstrap, "dump-later-dropped")
    assert [later_dropped.send("later-dropped-0"), later_dropped.send("later-dropped-1")] == [4, 5]
    later_dropped.producer.abort_transaction(CALL_TIMEOUT)
    wait_end_offsets(bootstrap, {TOPIC: 1}, {(TOPIC, 0): 7})
    later = Txn(bootstrap, "dump-later")
    assert later.send("later-0") == 7
    later.producer.commit_transaction(CALL_TIMEOUT)
    assert wait_stable(bootstrap, {TOPIC: 1}) == {(TOPIC, 0): 9}
    del later_dropped, later

    broker.stop()
    partition_dir = broker.data_dir / f"{TOPIC}-0"
    logs = sorted(partition_dir.glob("*.log"))
    indexes = sorted(p for p in partition_dir.glob("*.txnindex") if p.stat().st_size > 0)
    log = dump(java_tools, logs, "--print-data-log")
    txnindex = dump(java_tools, indexes)
    aborted = [fields(line) for line in txnindex.stdout.splitlines() if line.startswith("version:")]
    state_logs = sorted(broker.data_dir.glob("__transaction_state-*/*.log"))
    txn_state = dump(java_tools, state_logs, "--transaction-log-decoder")
    return Dumped(log, txnindex, parse_log_dump(log.stdout), aborted, txn_state)


def test_data_and_control_batches_are_decoded(dumped: Dumped) -> None:
    batches = dumped.batches
    described = dumped.log.describe()
    assert [int(r["offset"]) for b in batches for r in b.records] == list(range(9)), described
    assert all(b.header["isTransactional"] == "true" for b in batches), described
    assert all(b.header["isvalid"] == "true" for b in batches), described
    control = {int(b.header["baseOffset"]): b for b in batches if b.header["isControl"] == "true"}
    assert sorted(control) == [2, 3, 6, 8], described

    data = {int(r["offset"]): r["payload"] for b in batches if b.header["isControl"] == "false"
            for r in b.records}
    assert data == {0: "held-0", 1: "dropped-0", 4: "later-dropped-0", 5: "later-dropped-1", 7: "later-0"}, described

    markers = {offset: b.records for offset, b in control.items()}
    assert all(len(records) == 1 for records in markers.values()), described
    kinds = {offset: records[0]["endTxnMarker"] for offset, records in markers.items()}
    assert kinds == {2: "ABORT", 3: "COMMIT", 6: "ABORT", 8: "COMMIT"}, described

    # Each marker belongs to the producer whose transaction it ends.
    producer_at = {int(r["offset"]): b.header["producerId"] for b in batches for r in b.records}
    ended = {2: 1, 3: 0, 6: 4, 8: 7}  # marker offset -> first offset of its transaction
    for marker, first in ended.items():
        assert producer_at[marker] == producer_at[first], described
    assert len({producer_at[first] for first in ended.values()}) == 4, described

    # Markers carry the coordinator epoch of the coordinator that wrote them; the restart
    # between the two pairs made a newer coordinator.
    epochs = {offset: int(records[0]["coordinatorEpoch"]) for offset, records in markers.items()}
    assert epochs[2] == epochs[3] >= 0, described
    assert epochs[6] == epochs[8] > epochs[3], described


def test_txnindex_lists_the_aborted_transactions(dumped: Dumped) -> None:
    described = dumped.txnindex.describe() + "\n" + dumped.log.describe()
    producer_at = {int(r["offset"]): b.header["producerId"] for b in dumped.batches for r in b.records}
    entries = [(e["producerId"], int(e["firstOffset"]), int(e["lastOffset"]), int(e["lastStableOffset"]))
               for e in dumped.aborted]
    # The first abort happened while "held" (offset 0) was open: the last stable offset after
    # its marker was 0. Nothing was open after the second: one past its marker.
    assert entries == [(producer_at[1], 1, 2, 0), (producer_at[4], 4, 6, 7)], described
    assert all(e["version"] == "0" for e in dumped.aborted), described


def test_transaction_log_decoder_reads_the_coordinator_records(dumped: Dumped) -> None:
    """``--transaction-log-decoder`` decodes ``__transaction_state``: each transactional id's
    records, in log order, are Kafka's transitions (status 0 Empty, 1 Ongoing, 2 PrepareCommit,
    3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort) for the producer id its data carries."""
    described = dumped.txn_state.describe()
    history: dict[str, list[tuple[int, int]]] = {}  # id -> (producer id, status) per record
    for line in dumped.txn_state.stdout.splitlines():
        match = TXN_LOG_RECORD.match(line)
        if match is None:
            continue
        key, value = json.loads(match["key"]), json.loads(match["payload"])
        assert key["type"] == "0", line
        data = value["data"]
        history.setdefault(key["data"]["transactionalId"], []).append(
            (int(data["producerId"]), int(data["transactionStatus"])))
    producer_at = {int(r["offset"]): int(b.header["producerId"]) for b in dumped.batches for r in b.records}
    first_offset = {"dump-held": 0, "dump-dropped": 1, "dump-later-dropped": 4, "dump-later": 7}
    commit, abort = [0, 1, 2, 4], [0, 1, 3, 5]
    expected = {"dump-held": commit, "dump-dropped": abort, "dump-later-dropped": abort, "dump-later": commit}
    assert sorted(history) == sorted(expected), described
    for tid, records in history.items():
        assert [status for _, status in records] == expected[tid], (tid, records, described)
        assert {pid for pid, _ in records} == {producer_at[first_offset[tid]]}, (tid, records, described)
