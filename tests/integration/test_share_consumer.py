"""Share groups (KIP-932) with Java's KafkaShareConsumer (issue #21, acceptance 3 in part): four
consumers on a 2-partition topic all receive records, each exactly once when accepted; RELEASE
redelivers with a higher delivery count and REJECT archives; a record released at the delivery
count limit (5) is archived; a consumer killed with -9 while it holds records has them delivered
to another member once their lock (5 s here) expires.

The share groups start at the log end (``share.auto.offset.reset`` latest), so each scenario
first produces warm-up records until the consumers see one from every partition: from then on
the share-partitions exist and every record produced is delivered.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from riverlog.client.connection import BrokerConnection
from riverlog.protocol.api_keys import ApiKey
from support.brokers import BrokerProcess
from support.java_programs import JavaPrograms, JavaSession
from support.share_client import WAIT_S, poll, warm_up

pytestmark = pytest.mark.integration

LOCK_MS = 5000
SETTINGS = {
    "group.share.record.lock.duration.ms": LOCK_MS,
    "group.share.min.record.lock.duration.ms": 1000,
}


@pytest.fixture(scope="module")
def java_programs(kafka_libs: Path) -> JavaPrograms:
    programs = JavaPrograms(kafka_libs)
    programs.classes()
    return programs


@pytest.fixture
def share_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(overrides=SETTINGS)


@pytest.fixture
def session(java_programs: JavaPrograms, share_broker: BrokerProcess, tmp_path: Path) -> Iterator[JavaSession]:
    with java_programs.session("ShareClient", [share_broker.bootstrap], log_path=tmp_path / "share-client.log") as s:
        yield s


def create_topic(broker: BrokerProcess, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(15)


def test_four_consumers_on_two_partitions_all_receive_records(session: JavaSession,
                                                              share_broker: BrokerProcess) -> None:
    create_topic(share_broker, "jobs", 2)
    names = ["c0", "c1", "c2", "c3"]
    for name in names:
        session.call("consumer", name, "workers", "jobs")
    warm_up(session, names, "jobs", 2)
    received: dict[str, list[str]] = {name: [] for name in names}
    expected: set[str] = set()
    for round_ in range(8):
        for p in range(2):
            values = [f"job-{round_}-{p}-{i}" for i in range(10)]
            session.call("produce", "jobs", p, *values)
            expected.update(values)
        # Each round another consumer polls first, so each gets to acquire records.
        for name in names[round_ % 4:] + names[:round_ % 4]:
            received[name] += [r["value"] for r in poll(session, name) if r["value"].startswith("job-")]
    deadline = time.monotonic() + WAIT_S
    while {v for vs in received.values() for v in vs} != expected:
        assert time.monotonic() < deadline, "not every record was delivered"
        for name in names:
            received[name] += [r["value"] for r in poll(session, name) if r["value"].startswith("job-")]
    every = [v for vs in received.values() for v in vs]
    assert sorted(every) == sorted(expected), "an accepted record was delivered twice"
    assert all(received[name] for name in names), {n: len(v) for n, v in received.items()}


def test_release_redelivers_reject_archives_and_the_delivery_limit_archives(session: JavaSession,
                                                                            share_broker: BrokerProcess) -> None:
    create_topic(share_broker, "tasks", 1)
    session.call("consumer", "solo", "ackers", "tasks")
    warm_up(session, ["solo"], "tasks", 1)
    session.call("produce", "tasks", 0, "keep", "drop", "again")
    deliveries: dict[str, list[int]] = {"keep": [], "drop": [], "again": []}
    deadline = time.monotonic() + WAIT_S
    # "again" is released every time: delivered 5 times (the limit), then archived.
    while len(deliveries["again"]) < 5:
        assert time.monotonic() < deadline, deliveries
        for r in poll(session, "solo", drop="reject", again="release"):
            deliveries[r["value"]].append(r["delivery_count"])
    assert deliveries == {"keep": [1], "drop": [1], "again": [1, 2, 3, 4, 5]}
    # A record produced after it comes next; the archived ones are never delivered again (they
    # would come first: records are acquired in offset order).
    session.call("produce", "tasks", 0, "later")
    later: list[dict[str, Any]] = []
    while not any(r["value"] == "later" for r in later):
        assert time.monotonic() < deadline, later
        later += poll(session, "solo")
    assert [(r["value"], r["delivery_count"]) for r in later] == [("later", 1)]
    # Every record before "later" is done, so the share-partition start offset an admin sees
    # (DescribeShareGroupOffsets) is past them. Kafka's durable start offset may still name
    # "later" itself, acknowledged in the same write that will move it on next time.
    host, port = share_broker.bootstrap.rsplit(":", 1)
    described = asyncio.run(describe_offsets(host, int(port), "ackers", "tasks"))
    [group] = described["groups"]
    assert group["error_code"] == 0, group
    [topic] = group["topics"]
    [partition] = topic["partitions"]
    assert partition["error_code"] == 0
    assert later[0]["offset"] <= partition["start_offset"] <= later[0]["offset"] + 1, partition


async def describe_offsets(host: str, port: int, group_id: str, topic: str) -> dict[str, Any]:
    conn = await BrokerConnection.connect(host, port)
    try:
        return await conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, {"groups": [
            {"group_id": group_id, "topics": [{"topic_name": topic, "partitions": [0]}]}]})
    finally:
        await conn.close()


def test_records_of_a_consumer_killed_mid_batch_are_redelivered_after_the_lock(
        java_programs: JavaPrograms, session: JavaSession, share_broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(share_broker, "orders", 1)
    session.call("consumer", "survivor", "processors", "orders")
    with java_programs.session("ShareClient", [share_broker.bootstrap],
                               log_path=tmp_path / "victim.log") as victim:
        victim.call("consumer", "victim", "processors", "orders")
        # Warm up with the victim alone: it then holds nothing and the partition exists.
        warm_up(victim, ["victim"], "orders", 1)
        values = [f"order-{i}" for i in range(5)]
        session.call("produce", "orders", 0, *values)
        held: list[dict[str, Any]] = []
        deadline = time.monotonic() + WAIT_S
        while not held:
            assert time.monotonic() < deadline, "the victim received nothing"
            held = victim.call("hold", "victim", 500)["records"]
        assert [(r["value"], r["delivery_count"]) for r in held] == [(v, 1) for v in values]
        victim.kill()  # SIGKILL: no acknowledgement, no leave, no session close
    redelivered: dict[str, int] = {}
    while set(redelivered) != set(values):
        assert time.monotonic() < deadline, redelivered
        for r in poll(session, "survivor"):
            redelivered[r["value"]] = r["delivery_count"]
    assert redelivered == {v: 2 for v in values}


def test_acknowledgements_survive_a_broker_killed_with_minus_9(
        java_programs: JavaPrograms, share_broker: BrokerProcess, tmp_path: Path) -> None:
    """The share-partition's state is durable: after kill -9 and a restart, accepted records are
    not delivered again and released ones are (their delivery count kept)."""
    create_topic(share_broker, "ledger", 1)
    values = [f"entry-{i}" for i in range(10)]
    accepted, released = values[:5], values[5:]
    with java_programs.session("ShareClient", [share_broker.bootstrap], log_path=tmp_path / "before.log") as before:
        before.call("consumer", "first", "bookkeepers", "ledger")
        warm_up(before, ["first"], "ledger", 1)
        before.call("produce", "ledger", 0, *values)
        seen: set[str] = set()
        deadline = time.monotonic() + WAIT_S
        while seen != set(values):
            assert time.monotonic() < deadline, seen
            # Accept the first five; release the others (they stay available, delivered once).
            seen.update(r["value"] for r in poll(before, "first", "release", **dict.fromkeys(accepted, "accept"))
                        if r["value"] in values)
        before.call("close", "first")
    share_broker.restart(hard=True)
    with java_programs.session("ShareClient", [share_broker.bootstrap], log_path=tmp_path / "after.log") as after:
        after.call("consumer", "second", "bookkeepers", "ledger")
        delivered: list[dict[str, Any]] = []
        deadline = time.monotonic() + WAIT_S
        while not {r["value"] for r in delivered} >= set(released):
            assert time.monotonic() < deadline, delivered
            delivered += poll(after, "second")
        after.call("produce", "ledger", 0, "closing-entry")
        while not any(r["value"] == "closing-entry" for r in delivered):
            assert time.monotonic() < deadline, delivered
            delivered += poll(after, "second")
    assert not [r for r in delivered if r["value"] in accepted], "an accepted record was delivered again"
    assert sorted(r["value"] for r in delivered if r["value"] in values) == released
    assert all(r["delivery_count"] >= 2 for r in delivered if r["value"] in released), delivered


def test_share_partition_metrics(session: JavaSession, share_broker: BrokerProcess, broker_target: str) -> None:
    if broker_target != "riverlog":
        pytest.skip("the share-partition metrics are Riverlog's own (Kafka exposes JMX)")
    create_topic(share_broker, "metered", 1)
    session.call("consumer", "meter", "metered-group", "metered")
    warm_up(session, ["meter"], "metered", 1)
    session.call("produce", "metered", 0, "m-0", "m-1", "m-2")
    held: list[dict[str, Any]] = []
    deadline = time.monotonic() + WAIT_S
    while not held:
        assert time.monotonic() < deadline
        held = session.call("hold", "meter", 500)["records"]
    assert share_broker.metrics_url is not None
    text = urllib.request.urlopen(share_broker.metrics_url, timeout=10).read().decode()
    samples = {line.split("{", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("riverlog_share_partition_") and 'group="metered-group"' in line}
    assert samples["riverlog_share_partition_acquired_records"] == len(held)
    assert samples["riverlog_share_partition_in_flight_records"] == len(held)
    assert samples["riverlog_share_partition_start_offset"] == held[0]["offset"]
    assert samples["riverlog_share_partition_lag"] == len(held)


async def alter_offsets(host: str, port: int, group_id: str, topic: str, offset: int) -> dict[str, Any]:
    conn = await BrokerConnection.connect(host, port)
    try:
        return await conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, {"group_id": group_id, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": offset}]}]})
    finally:
        await conn.close()


def test_altered_offsets_of_an_empty_group_deliver_the_records_again(
        session: JavaSession, share_broker: BrokerProcess) -> None:
    create_topic(share_broker, "replay", 1)
    host, port = share_broker.bootstrap.rsplit(":", 1)
    session.call("consumer", "once", "replayers", "replay")
    warm_up(session, ["once"], "replay", 1)
    values = [f"r-{i}" for i in range(5)]
    session.call("produce", "replay", 0, *values)
    first: dict[str, int] = {}
    deadline = time.monotonic() + WAIT_S
    while set(first) != set(values):
        assert time.monotonic() < deadline, first
        first.update((r["value"], r["offset"]) for r in poll(session, "once") if r["value"] in values)
    session.call("close", "once")  # the member leaves: the group is empty
    altered = asyncio.run(alter_offsets(host, int(port), "replayers", "replay", first["r-0"]))
    assert altered["error_code"] == 0, altered
    assert altered["responses"][0]["partitions"][0]["error_code"] == 0, altered
    session.call("consumer", "again", "replayers", "replay")
    again: set[str] = set()
    while again != set(values):
        assert time.monotonic() < deadline, again
        again.update(r["value"] for r in poll(session, "again") if r["value"] in values)
    # A group with members cannot be altered.
    refused = asyncio.run(alter_offsets(host, int(port), "replayers", "replay", 0))
    assert refused["error_code"] == 68, refused  # NON_EMPTY_GROUP


async def delete_offsets(host: str, port: int, group_id: str, topic: str) -> dict[str, Any]:
    conn = await BrokerConnection.connect(host, port)
    try:
        return await conn.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS,
                                  {"group_id": group_id, "topics": [{"topic_name": topic}]})
    finally:
        await conn.close()


def test_deleted_offsets_of_an_empty_group_start_it_afresh(session: JavaSession, share_broker: BrokerProcess) -> None:
    create_topic(share_broker, "forgotten", 1)
    host, port = share_broker.bootstrap.rsplit(":", 1)
    session.call("consumer", "f1", "forgetters", "forgotten")
    warm_up(session, ["f1"], "forgotten", 1)
    values = [f"d-{i}" for i in range(5)]
    session.call("produce", "forgotten", 0, *values)
    seen: set[str] = set()
    deadline = time.monotonic() + WAIT_S
    while seen != set(values):
        assert time.monotonic() < deadline, seen
        # Released: they stay available in the group's state...
        seen.update(r["value"] for r in poll(session, "f1", "release") if r["value"] in values)
    session.call("close", "f1")
    deleted = asyncio.run(delete_offsets(host, int(port), "forgetters", "forgotten"))
    assert deleted["error_code"] == 0, deleted
    assert deleted["responses"][0]["error_code"] == 0, deleted
    # ...until the state is deleted: the group starts at the log end again, past them.
    session.call("consumer", "f2", "forgetters", "forgotten")
    delivered: list[dict[str, Any]] = []
    warm_round = 0
    while not any(r["value"] == "fresh" for r in delivered):
        assert time.monotonic() < deadline, delivered
        session.call("produce", "forgotten", 0, f"again-{warm_round}", "fresh")
        delivered += poll(session, "f2")
        warm_round += 1
    assert not [r for r in delivered if r["value"] in values], delivered


async def delete_group(host: str, port: int, group_id: str) -> dict[str, Any]:
    conn = await BrokerConnection.connect(host, port)
    try:
        return await conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [group_id]})
    finally:
        await conn.close()


def test_a_deleted_share_group_comes_back_without_its_state(session: JavaSession, share_broker: BrokerProcess) -> None:
    create_topic(share_broker, "recycled", 1)
    host, port = share_broker.bootstrap.rsplit(":", 1)
    session.call("consumer", "g1", "recyclers", "recycled")
    warm_up(session, ["g1"], "recycled", 1)
    values = [f"old-{i}" for i in range(5)]
    session.call("produce", "recycled", 0, *values)
    seen: set[str] = set()
    deadline = time.monotonic() + WAIT_S
    while seen != set(values):
        assert time.monotonic() < deadline, seen
        seen.update(r["value"] for r in poll(session, "g1", "release") if r["value"] in values)
    session.call("close", "g1")
    result = asyncio.run(delete_group(host, int(port), "recyclers"))
    assert [(r["group_id"], r["error_code"]) for r in result["results"]] == [("recyclers", 0)], result
    # A group of the same name is a new group: it starts at the log end, the released records
    # of the deleted one are not delivered.
    session.call("consumer", "g2", "recyclers", "recycled")
    delivered: list[dict[str, Any]] = []
    round_ = 0
    while not any(r["value"] == "new" for r in delivered):
        assert time.monotonic() < deadline, delivered
        session.call("produce", "recycled", 0, f"filler-{round_}", "new")
        delivered += poll(session, "g2")
        round_ += 1
    assert not [r for r in delivered if r["value"] in values], delivered
