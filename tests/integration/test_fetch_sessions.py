"""Fetch sessions (KIP-227) on the wire, against Riverlog and Apache Kafka alike (issue #15).

Each broker advertises a sniffing proxy (``support/fetch_sniffer.py``), so every Fetch a client
sends after bootstrap, and its answer, is seen as it crossed the wire: session id and epoch, how
many partitions the request named and the response carried, the top-level error.

- Kafka's Java consumer and kafka-python open a session with a full fetch and then send
  incremental fetches that name only changed partitions; answers carry only partitions with news.
- librdkafka 2.16 does not implement fetch sessions: it sends sessionless full fetches, which
  must be answered in full with session id 0.
- A partition answered with an error carries no offsets (-1), as Kafka's.
- A raw client sees the session rules: the next epoch only, an unknown id is
  FETCH_SESSION_ID_NOT_FOUND, a stale epoch INVALID_FETCH_SESSION_EPOCH, and a full fetch after
  that starts a new session (how every client recovers).
"""

from __future__ import annotations

import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from riverlog.protocol.header import RequestHeader, decode_response_header, encode_request_header
from riverlog.protocol.messages import fetch, metadata
from riverlog.protocol.primitives import Reader, Writer
from riverlog.protocol.schema import Message
from support.brokers import BrokerProcess
from support.fetch_sniffer import FetchSeen, FetchSniffer
from support.java_tools import CONSOLE_CONSUMER, JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 30
RECORDS = 600
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_LEADER_EPOCH = 75


@dataclass
class Sniffed:
    broker: BrokerProcess
    sniffer: FetchSniffer

    @property
    def bootstrap(self) -> str:
        return self.sniffer.address


@pytest.fixture(scope="module")
def sniffed(module_broker_factory) -> Iterator[Sniffed]:  # type: ignore[no-untyped-def]
    # No initial rebalance delay: a console consumer's idle timeout starts before its group join.
    broker: BrokerProcess = module_broker_factory(start=False, overrides={"group.initial.rebalance.delay.ms": 0})
    sniffer = FetchSniffer(broker.host, broker.port).start()
    # Clients learn the proxy's address from the metadata and fetch through it.
    broker.overrides["advertised.listeners"] = f"PLAINTEXT://{sniffer.address}"
    broker.start()
    yield Sniffed(broker, sniffer)
    sniffer.close()


def make_topic(bootstrap: str, name: str) -> None:
    """``name`` with PARTITIONS partitions and RECORDS records spread over all of them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in range(RECORDS):
        producer.produce(name, value=f"{name}-{n}".encode(), partition=n % PARTITIONS)
    assert producer.flush(30) == 0


def fetches_of(sniffer: FetchSniffer, since: int, client_id_part: str) -> list[FetchSeen]:
    return [f for f in sniffer.fetches()[since:] if client_id_part in (f.client_id or "")]


def assert_incremental_session(fetches: list[FetchSeen]) -> None:
    """A full fetch opened a session, then incremental fetches named only changed partitions
    and got only partitions with news."""
    assert fetches, "no fetch crossed the wire"
    assert all(f.error_code == 0 for f in fetches), [f for f in fetches if f.error_code]
    opened = [f for f in fetches if f.session_epoch == 0 and f.response_session_id != 0]
    assert opened, [(f.session_id, f.session_epoch, f.response_session_id) for f in fetches]
    assert opened[0].partitions == PARTITIONS  # the full fetch names every partition
    incremental = [f for f in fetches if f.session_id != 0 and f.session_epoch > 0]
    assert len(incremental) >= 2, [(f.session_id, f.session_epoch) for f in fetches]
    # Epochs advance by one within the session.
    epochs = [f.session_epoch for f in incremental if f.session_id == incremental[0].session_id]
    assert epochs == list(range(epochs[0], epochs[0] + len(epochs))), epochs
    assert all(f.response_session_id == f.session_id for f in incremental)
    # Once caught up nothing changes: requests name no partition, answers carry none.
    assert min(f.partitions for f in incremental) < PARTITIONS
    assert any(f.partitions == 0 and f.response_partitions == 0 for f in incremental), \
        [(f.partitions, f.response_partitions) for f in incremental]


def test_the_java_consumer_fetches_incrementally(sniffed: Sniffed, java_tools: JavaTools) -> None:
    make_topic(sniffed.bootstrap, "java-sessions")
    since = len(sniffed.sniffer.fetches())
    # One record more than there are: the consumer keeps fetching until 8 s pass without news.
    result = java_tools.run(CONSOLE_CONSUMER, [
        "--bootstrap-server", sniffed.bootstrap, "--topic", "java-sessions", "--from-beginning",
        "--max-messages", str(RECORDS + 1), "--timeout-ms", "8000", "--group", "java-sessions"], check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("java-sessions-")]
    assert sorted(lines) == sorted(f"java-sessions-{n}" for n in range(RECORDS)), result.describe()
    assert_incremental_session(fetches_of(sniffed.sniffer, since, "console-consumer"))


def test_kafka_python_fetches_incrementally(sniffed: Sniffed) -> None:
    make_topic(sniffed.bootstrap, "python-sessions")
    since = len(sniffed.sniffer.fetches())
    consumer = KafkaConsumer("python-sessions", bootstrap_servers=sniffed.bootstrap, group_id="python-sessions",
                             client_id="kafka-python-sessions", auto_offset_reset="earliest",
                             consumer_timeout_ms=4000, fetch_max_wait_ms=200)
    try:
        values = sorted(m.value.decode() for m in consumer)
    finally:
        consumer.close()
    assert values == sorted(f"python-sessions-{n}" for n in range(RECORDS))
    assert_incremental_session(fetches_of(sniffed.sniffer, since, "kafka-python-sessions"))


def test_librdkafka_fetches_without_a_session_and_is_answered_in_full(sniffed: Sniffed) -> None:
    make_topic(sniffed.bootstrap, "rdkafka-sessions")
    since = len(sniffed.sniffer.fetches())
    consumer = Consumer({"bootstrap.servers": sniffed.bootstrap, "group.id": "rdkafka-sessions",
                         "client.id": "rdkafka-sessions", "auto.offset.reset": "earliest"})
    values: list[str] = []
    try:
        consumer.subscribe(["rdkafka-sessions"])
        deadline = time.monotonic() + 30
        while len(values) < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
        consumer.poll(2.0)  # a few more (empty) fetches
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"rdkafka-sessions-{n}" for n in range(RECORDS))
    seen = fetches_of(sniffed.sniffer, since, "rdkafka-sessions")
    assert seen and all(f.error_code == 0 for f in seen)
    assert {(f.session_id, f.session_epoch) for f in seen} == {(0, -1)}  # sessionless, every time
    assert all(f.response_session_id == 0 for f in seen)
    assert all(f.response_partitions == f.partitions for f in seen)  # full answers


# --- the session rules, with a raw client ----------------------------------------------------

class RawClient:
    """Fetch v13 (topic ids) by hand on one connection, straight to the broker."""

    VERSION = 13

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.correlation = 0

    def call(self, request: Message, response: Message, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation += 1
        w = Writer()
        encode_request_header(w, RequestHeader(request.api_key, version, self.correlation, "raw-sessions"),
                              request.is_flexible(version))
        frame = bytes(w.buf) + request.encode(body, version)
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._recv(4))[0]
        reader = Reader(self._recv(size))
        assert decode_response_header(reader, response.is_flexible(version)) == self.correlation
        return response.decode(reader, version)

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def fetch(self, session_id: int, epoch: int, topic_id: uuid.UUID, partitions: list[int],
              offset: int = 0, max_bytes: int = 1 << 20, leader_epoch: int = -1) -> dict[str, Any]:
        return self.call(fetch.REQUEST, fetch.RESPONSE, self.VERSION, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": p, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                 "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 16} for p in partitions]}] if partitions else [],
            "forgotten_topics_data": [], "rack_id": ""})

    def topic_id(self, name: str) -> uuid.UUID:
        answer = self.call(metadata.REQUEST, metadata.RESPONSE, 12, {"topics": [{"topic_id": None, "name": name}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        found: uuid.UUID = answer["topics"][0]["topic_id"]
        return found

    def close(self) -> None:
        self.sock.close()


def test_session_ids_and_epochs_are_checked_and_a_full_fetch_starts_over(sniffed: Sniffed) -> None:
    make_topic(sniffed.bootstrap, "raw-sessions")
    client = RawClient(sniffed.broker.host, sniffed.broker.port)
    try:
        topic_id = client.topic_id("raw-sessions")
        # From the log end of every partition: nothing new will come unless something is produced.
        end = RECORDS // PARTITIONS
        full = client.fetch(0, 0, topic_id, list(range(PARTITIONS)), offset=end)
        assert full["error_code"] == 0 and full["session_id"] != 0
        assert sum(len(t["partitions"]) for t in full["responses"]) == PARTITIONS
        session = full["session_id"]
        # Nothing changed since: the incremental answer carries no partition.
        nothing = client.fetch(session, 1, topic_id, [])
        assert (nothing["error_code"], nothing["session_id"], nothing["responses"]) == (0, session, [])
        # A record in one partition: only that partition is news (its high watermark moved).
        producer = Producer({"bootstrap.servers": sniffed.bootstrap})
        producer.produce("raw-sessions", value=b"news", partition=3)
        assert producer.flush(15) == 0
        news = client.fetch(session, 2, topic_id, [])
        assert [(t["topic_id"], [p["partition_index"] for p in t["partitions"]]) for t in news["responses"]] == \
            [(topic_id, [3])]
        assert news["responses"][0]["partitions"][0]["high_watermark"] == end + 1
        # The epoch just used again, and a made-up session id: both refused, with session id 0.
        stale = client.fetch(session, 2, topic_id, [])
        assert (stale["error_code"], stale["session_id"]) == (INVALID_FETCH_SESSION_EPOCH, 0)
        unknown = client.fetch(session ^ 0x5A5A, 3, topic_id, [])
        assert (unknown["error_code"], unknown["session_id"]) == (FETCH_SESSION_ID_NOT_FOUND, 0)
        # A failed request does not spend the epoch: the next one still works.
        assert client.fetch(session, 3, topic_id, [])["error_code"] == 0
        # Recovery as clients do it: a full fetch (closing the old session) opens a new one.
        again = client.fetch(session, 0, topic_id, list(range(PARTITIONS)))
        assert again["error_code"] == 0 and again["session_id"] not in (0, session)
        assert client.fetch(session, 4, topic_id, [])["error_code"] == FETCH_SESSION_ID_NOT_FOUND
        # A sessionless fetch (0, -1) gets everything and no session.
        sessionless = client.fetch(0, -1, topic_id, list(range(PARTITIONS)))
        assert sessionless["session_id"] == 0
        assert sum(len(t["partitions"]) for t in sessionless["responses"]) == PARTITIONS
    finally:
        client.close()


def test_a_partition_answered_with_an_error_carries_no_offsets(sniffed: Sniffed) -> None:
    """Kafka answers a consumer's failed partition with high watermark, last stable offset and log
    start all -1. librdkafka takes a partition whose answered end equals its position for the end
    (PARTITION_EOF, raised in place of the error), so an error carrying real offsets could end a
    read early and hide the error."""
    make_topic(sniffed.bootstrap, "raw-errors")
    client = RawClient(sniffed.broker.host, sniffed.broker.port)
    try:
        topic_id = client.topic_id("raw-errors")
        end = RECORDS // PARTITIONS
        good = client.fetch(0, -1, topic_id, [0], offset=end)["responses"][0]["partitions"][0]
        assert (good["error_code"], good["high_watermark"], good["log_start_offset"]) == (0, end, 0)
        for why, answer in [
            ("past the log end", client.fetch(0, -1, topic_id, [0], offset=end + 5)),
            ("a leader epoch from the future", client.fetch(0, -1, topic_id, [0], offset=end, leader_epoch=99)),
        ]:
            [partition] = answer["responses"][0]["partitions"]
            assert partition["error_code"] in (OFFSET_OUT_OF_RANGE, UNKNOWN_LEADER_EPOCH), (why, partition)
            assert (partition["high_watermark"], partition["last_stable_offset"], partition["log_start_offset"]) == \
                (-1, -1, -1), (why, partition)
    finally:
        client.close()


def with_records(answer: dict[str, Any]) -> list[int]:
    return [p["partition_index"] for t in answer["responses"] for p in t["partitions"] if len(p["records"])]


def test_a_partition_that_returned_records_waits_behind_the_others(sniffed: Sniffed) -> None:
    """Under a byte limit that one batch exhausts, a session does not serve the same partition
    every time: one that returned records in an incremental answer goes to the back."""
    make_topic(sniffed.bootstrap, "fair-sessions")
    client = RawClient(sniffed.broker.host, sniffed.broker.port)
    try:
        topic_id = client.topic_id("fair-sessions")
        # Every partition has data from offset 0; a 1-byte limit still returns one batch (KIP-74).
        full = client.fetch(0, 0, topic_id, list(range(PARTITIONS)), max_bytes=1)
        assert full["session_id"] != 0 and with_records(full) == [0]
        session = full["session_id"]
        # The fetcher names no partition (it did not move its offsets): the session's order decides.
        assert with_records(client.fetch(session, 1, topic_id, [], max_bytes=1)) == [0]
        assert with_records(client.fetch(session, 2, topic_id, [], max_bytes=1)) == [1]
        assert with_records(client.fetch(session, 3, topic_id, [], max_bytes=1)) == [2]
    finally:
        client.close()


# --- eviction, and a real client's recovery from it --------------------------------------------

KAFKA_EVICTION_S = 120  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, fixed
RIVERLOG_EVICTION_MS = 3000


# Kafka shards its session cache in 8 and hands new sessions to the shards in turn: 8 slots (one
# a shard) and 8 newcomers make one newcomer meet the consumer's session in both brokers' caches.
SLOTS = 8


@pytest.mark.timeout(600)
def test_an_evicted_session_is_not_found_and_the_java_consumer_recovers(  # type: ignore[no-untyped-def]
    broker_factory, java_tools: JavaTools
) -> None:
    """The session cache is full. The Java consumer's session, once older than the eviction time,
    goes to a newcomer with more partitions; its next incremental fetch is
    FETCH_SESSION_ID_NOT_FOUND, and it starts over with a full fetch, missing nothing."""
    broker: BrokerProcess = broker_factory(start=False, overrides={
        "max.incremental.fetch.session.cache.slots": SLOTS,
        "min.incremental.fetch.session.eviction.ms": RIVERLOG_EVICTION_MS})
    sniffer = FetchSniffer(broker.host, broker.port).start()
    try:
        broker.overrides["advertised.listeners"] = f"PLAINTEXT://{sniffer.address}"
        broker.start()
        make_topic(sniffer.address, "evicted")
        java = subprocess.Popen(java_tools.command(CONSOLE_CONSUMER, [
            "--bootstrap-server", sniffer.address, "--topic", "evicted", "--from-beginning",
            "--max-messages", str(2 * RECORDS), "--timeout-ms", str(3 * KAFKA_EVICTION_S * 1000),
            "--group", "evicted"]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: any(f.response_session_id and f.session_epoch > 0
                                 for f in fetches_of(sniffer, 0, "console-consumer")),
                     60, "the Java consumer's session")
            time.sleep(KAFKA_EVICTION_S + 1 if broker.target == "kafka" else RIVERLOG_EVICTION_MS / 1000 + 1)
            # Newcomers with more partitions fill the cache; one takes the older session's slot.
            admin = AdminClient({"bootstrap.servers": sniffer.address})
            admin.create_topics([NewTopic("newcomer", PARTITIONS + 10, 1)])["newcomer"].result(30)
            client = RawClient(broker.host, broker.port)
            try:
                topic_id = client.topic_id("newcomer")
                made = [client.fetch(0, 0, topic_id, list(range(PARTITIONS + 10)))["session_id"]
                        for _ in range(SLOTS)]
            finally:
                client.close()
            assert all(made), made
            # The Java consumer finds its session gone, recovers, and reads what comes next.
            producer = Producer({"bootstrap.servers": sniffer.address})
            for n in range(RECORDS, 2 * RECORDS):
                producer.produce("evicted", value=f"evicted-{n}".encode(), partition=n % PARTITIONS)
            assert producer.flush(30) == 0
            out, err = java.communicate(timeout=120)
        finally:
            java.kill()
        lines = [line for line in out.splitlines() if line.startswith("evicted-")]
        assert sorted(lines) == sorted(f"evicted-{n}" for n in range(2 * RECORDS)), err[-3000:]
        seen = fetches_of(sniffer, 0, "console-consumer")
        lost = [i for i, f in enumerate(seen) if f.error_code == FETCH_SESSION_ID_NOT_FOUND]
        assert lost, [(f.session_id, f.session_epoch, f.error_code) for f in seen]
        # After it: no error, and the lost session is never named incrementally again (the client
        # starts over with a full fetch, or, done already, closes without one).
        gone = seen[lost[0]].session_id
        after = seen[lost[0] + 1:]
        assert all(f.error_code == 0 for f in after)
        assert not any(f.session_id == gone and f.session_epoch > 0 for f in after)
    finally:
        sniffer.close()


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.2)
