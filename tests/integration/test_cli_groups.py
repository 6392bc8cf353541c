"""``riverlog groups list|describe|reset-offsets|delete`` against a real broker.

Commands run as subprocesses, as a person would run them. Groups are made by real consumers
(confluent-kafka member processes) and checked with kafka-python's admin client as an
independent reader of committed offsets; a consumer started after a reset shows that the reset
offsets are where real clients resume. Expected failures print one ``riverlog: error:`` line and
exit non-zero, never a traceback.

Runs against Riverlog by default, or Apache Kafka with RIVERLOG_TEST_TARGET=kafka.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.groups import GROUP_BROKER_SETTINGS, MemberProcess, committed_offsets, produce_known, wait_for_split
from support.java_tools import JavaTools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT = 60.0
PARTITIONS = 3
SETTLE = 60.0
KIP848_PARTITIONS = 4


def cli(*args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT / "broker_image")
    env.pop("RIVERLOG_BOOTSTRAP", None)
    return subprocess.run([sys.executable, "-m", "riverlog", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def ok(*args: str) -> str:
    result = cli(*args)
    assert result.returncode == 0, f"riverlog {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def fails(*args: str, code: int = 1) -> str:
    """Run expecting an expected failure; return its one error line."""
    result = cli(*args)
    assert result.returncode == code, (
        f"riverlog {' '.join(args)} exited {result.returncode}, expected {code}:\n{result.stdout}\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("riverlog: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def table_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def group_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    # Consumer-protocol members (KIP-848) heartbeat every 0.5 s rather than 5 s, so they settle fast.
    return module_broker_factory({**GROUP_BROKER_SETTINGS, "group.consumer.heartbeat.interval.ms": 500,
                                  "group.consumer.min.heartbeat.interval.ms": 500})


def boot(broker: BrokerProcess) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]


def describe_json(broker: BrokerProcess, group: str) -> dict[str, Any]:
    (doc,) = json_lines(ok("groups", "describe", "--group", group, *boot(broker), "--output", "json"))
    return doc


def lags(doc: dict[str, Any]) -> dict[tuple[str, int], tuple[int | None, int | None, int | None]]:
    return {(o["topic"], o["partition"]): (o["committed_offset"], o["log_end_offset"], o["lag"])
            for o in doc["offsets"]}


def test_groups_lifecycle_with_real_consumers(group_broker: BrokerProcess, tmp_path: Path) -> None:
    broker = group_broker
    topic, group = "cli-orders", "cli-orders-readers"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce_known(broker.bootstrap, topic, PARTITIONS, 10, "first")
    members = [MemberProcess(f"cli-reader-{i}", bootstrap=broker.bootstrap, group=group, topic=topic,
                             log_dir=tmp_path) for i in range(2)]
    try:
        split = wait_for_split(members, range(PARTITIONS), timeout=SETTLE)
        wait_until(lambda: sum(len(m.records()) for m in members) >= PARTITIONS * 10, timeout=SETTLE,
                   message="the first records consumed")
        wait_until(lambda: committed_offsets(broker.bootstrap, group, topic, range(PARTITIONS))
                   == dict.fromkeys(range(PARTITIONS), 10), timeout=SETTLE, message="offsets committed")
        member_ids = {m.status()["member_id"]: m for m in members}

        # list: table and JSON, and the state filter.
        listed = {row[0]: row for row in table_rows(ok("groups", "list", *boot(broker)))[1:]}
        assert listed[group][1:3] == ["Stable", "consumer"], listed
        (entry,) = [d for d in json_lines(ok("groups", "list", *boot(broker), "--output", "json"))
                    if d["group"] == group]
        assert entry["state"] == "Stable" and entry["protocol_type"] == "consumer", entry
        assert group not in ok("groups", "list", *boot(broker), "--state", "Empty", "--output", "json")

        # describe: every member with client id, host and partitions; per partition committed
        # offset, log end offset, lag 0 and the owner.
        doc = describe_json(broker, group)
        assert doc["state"] == "Stable" and doc["protocol_type"] == "consumer", doc
        assert doc["protocol"] == "range", doc
        assert {m["member_id"] for m in doc["members"]} == set(member_ids)
        for m in doc["members"]:
            process = member_ids[m["member_id"]]
            assert m["client_id"] == process.name
            assert m["host"], m
            assert {(a["topic"], a["partition"]) for a in m["assignment"]} == {(topic, p) for p in split[process.name]}
        assert lags(doc) == {(topic, p): (10, 10, 0) for p in range(PARTITIONS)}
        owners = {(o["topic"], o["partition"]): o["member_id"] for o in doc["offsets"]}
        for member_id, process in member_ids.items():
            assert {p for (_, p), owner in owners.items() if owner == member_id} == split[process.name]
        assert doc["total_lag"] == 0
        text = ok("groups", "describe", "--group", group, *boot(broker))
        assert f"Group: {group}" in text and "State: Stable" in text, text
        header = next(r for r in table_rows(text) if r and r[0] == "TOPIC")
        assert header == ["TOPIC", "PARTITION", "CURRENT_OFFSET", "LOG_END_OFFSET", "LAG", "MEMBER_ID", "HOST",
                          "CLIENT_ID"]
        assert all(member_id in text for member_id in member_ids)

        # Active group: no reset, no delete, and nothing changed.
        line = fails("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", *boot(broker))
        assert "active member" in line and "stop its consumers" in line, line
        line = fails("groups", "delete", "--group", group, *boot(broker))
        assert "active member" in line, line
        assert committed_offsets(broker.bootstrap, group, topic, range(PARTITIONS)) == dict.fromkeys(
            range(PARTITIONS), 10)
    finally:
        for m in members:
            if m.alive:
                m.close()
            m.terminate()

    # Empty group with lag: produced minus committed.
    produce_known(broker.bootstrap, topic, PARTITIONS, 5, "second")
    doc = wait_until(lambda: (d := describe_json(broker, group))["state"] == "Empty" and d, timeout=SETTLE,
                     message="group empty once its consumers closed")
    assert doc["members"] == []
    assert lags(doc) == {(topic, p): (10, 15, 5) for p in range(PARTITIONS)}
    assert doc["total_lag"] == 3 * 5

    def reset(*how: str) -> dict[str, Any]:
        (result,) = json_lines(ok("groups", "reset-offsets", "--group", group, *how, *boot(broker),
                                  "--output", "json"))
        return result

    def committed() -> dict[int, int]:
        return committed_offsets(broker.bootstrap, group, topic, range(PARTITIONS))

    dry = reset("--topic", topic, "--to-earliest", "--dry-run")
    assert dry["dry_run"] is True
    assert [(o["partition"], o["previous_offset"], o["new_offset"]) for o in dry["offsets"]] == [
        (p, 10, 0) for p in range(PARTITIONS)]
    assert committed() == dict.fromkeys(range(PARTITIONS), 10), "a dry run must not commit"

    reset("--topic", topic, "--to-earliest")
    assert committed() == dict.fromkeys(range(PARTITIONS), 0)
    assert describe_json(broker, group)["total_lag"] == 3 * 15

    reset("--topic", f"{topic}:0", "--to-latest")
    assert committed() == {0: 15, 1: 0, 2: 0}

    reset("--topic", f"{topic}:1,2", "--to-offset", "7")
    assert committed() == {0: 15, 1: 7, 2: 7}

    result = cli("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "1000",
                 *boot(broker))
    assert result.returncode == 0 and "outside the log" in result.stderr, result.stderr
    assert committed() == {0: 15, 1: 15, 2: 7}

    shifted = reset("--topic", topic, "--shift-by", "-3")
    assert [(o["previous_offset"], o["new_offset"]) for o in shifted["offsets"]] == [(15, 12), (15, 12), (7, 4)]
    reset("--topic", f"{topic}:2", "--shift-by", "-100")
    assert committed() == {0: 12, 1: 12, 2: 0}

    text = ok("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:2", "--to-offset", "4",
              *boot(broker))
    assert table_rows(text)[1:] == [["TOPIC", "PARTITION", "PREVIOUS_OFFSET", "NEW_OFFSET"], [topic, "2", "0", "4"]]
    assert describe_json(broker, group)["total_lag"] == 3 + 3 + 11

    # A real consumer resumes exactly where the reset put the group.
    reader = MemberProcess("cli-after-reset", bootstrap=broker.bootstrap, group=group, topic=topic, log_dir=tmp_path)
    try:
        wait_until(lambda: len(reader.records()) >= 3 + 3 + 11, timeout=SETTLE,
                   message="consumer read from the reset offsets")
        firsts = {p: min(e["offset"] for e in reader.records() if e["partition"] == p) for p in range(PARTITIONS)}
        assert firsts == {0: 12, 1: 12, 2: 4}, firsts
        assert len(reader.records()) == 3 + 3 + 11
        reader.close()
    finally:
        reader.terminate()

    # Bad requests.
    line = fails("groups", "reset-offsets", "--group", group, "--topic", "cli-no-such-topic", "--to-earliest",
                 *boot(broker))
    assert "does not exist" in line, line
    line = fails("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:9", "--to-earliest",
                 *boot(broker), code=2)
    assert "no partition 9" in line, line

    # Delete the now empty group; it is gone from list and describe.
    assert f"Deleted group {group}." in ok("groups", "delete", "--group", group, *boot(broker))
    assert group not in ok("groups", "list", *boot(broker))
    assert "does not exist" in fails("groups", "describe", "--group", group, *boot(broker))
    assert "does not exist" in fails("groups", "delete", "--group", group, *boot(broker))
    assert committed() == dict.fromkeys(range(PARTITIONS), -1), "offsets deleted with the group"
    broker.assert_alive()


def test_reset_offsets_creates_a_group_and_describe_all(group_broker: BrokerProcess) -> None:
    broker = group_broker
    topic = "cli-fresh"
    create_topic(broker.bootstrap, topic, 2)
    produce_known(broker.bootstrap, topic, 2, 6, "x")
    # Resetting a group that does not exist yet is allowed (Kafka's tool does the same): it
    # creates the group with just these offsets.
    for group, offset in (("cli-fresh-a", "2"), ("cli-fresh-b", "5")):
        ok("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-offset", offset, *boot(broker))
    docs = {d["group"]: d for d in json_lines(ok("groups", "describe", "--all-groups", *boot(broker),
                                                 "--output", "json"))}
    assert lags(docs["cli-fresh-a"]) == {(topic, 0): (2, 6, 4), (topic, 1): (2, 6, 4)}
    assert lags(docs["cli-fresh-b"]) == {(topic, 0): (5, 6, 1), (topic, 1): (5, 6, 1)}
    assert docs["cli-fresh-a"]["state"] == "Empty" and docs["cli-fresh-a"]["members"] == []
    two = json_lines(ok("groups", "describe", "--group", "cli-fresh-a", "--group", "cli-fresh-b", *boot(broker),
                        "--output", "json"))
    assert [d["group"] for d in two] == ["cli-fresh-a", "cli-fresh-b"]
    text = ok("groups", "describe", "--group", "cli-fresh-b", *boot(broker))
    rows = [r for r in table_rows(text) if r and r[0] == topic]
    assert rows == [[topic, "0", "5", "6", "1", "-", "-", "-"], [topic, "1", "5", "6", "1", "-", "-", "-"]], text
    assert "Deleted group cli-fresh-a." in ok("groups", "delete", "--group", "cli-fresh-a", *boot(broker))
    out = json_lines(cli("groups", "delete", "--group", "cli-fresh-b", "--group", "cli-never", *boot(broker),
                         "--output", "json").stdout)
    assert [(d["group"], d["deleted"]) for d in out] == [("cli-fresh-b", True), ("cli-never", False)], out
    assert out[1]["error"] == "GROUP_ID_NOT_FOUND"


def test_groups_errors(group_broker: BrokerProcess) -> None:
    line = fails("groups", "describe", "--group", "cli-nobody", *boot(group_broker))
    assert "group 'cli-nobody' does not exist" in line, line
    line = fails("groups", "list", "--bootstrap-server", "127.0.0.1:1")
    assert "cannot reach" in line, line
    line = fails("groups", "reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest",
                 *boot(group_broker), code=2)
    assert "partitions must be numbers" in line, line
    # The mode is required, and only one.
    assert cli("groups", "reset-offsets", "--group", "g", "--topic", "t", *boot(group_broker)).returncode == 2
    assert cli("groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest",
               *boot(group_broker)).returncode == 2


@contextlib.contextmanager
def kip848_members(broker: BrokerProcess, topic: str, group: str) -> Iterator[list[Consumer]]:
    """Two ``group.protocol=consumer`` members of ``group`` sharing a 4-partition ``topic``,
    settled (each owning two partitions at the group's epoch); the first has committed offset 1
    on its partitions. Closed on exit."""
    create_topic(broker.bootstrap, topic, KIP848_PARTITIONS)
    produce_known(broker.bootstrap, topic, KIP848_PARTITIONS, 4, "k")
    members = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "client.id": f"{group}-m{i}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "log_level": 3}) for i in range(2)]
    try:
        for m in members:
            m.subscribe([topic])

        def settled() -> bool:
            for m in members:
                m.poll(0.1)
            result = cli("groups", "describe", "--group", group, *boot(broker), "--output", "json")
            if result.returncode != 0:
                return False  # not created yet
            (doc,) = json_lines(result.stdout)
            owned = [tp["partition"] for member in doc["members"] for tp in member["assignment"]]
            return (len(doc["members"]) == 2 and sorted(owned) == list(range(KIP848_PARTITIONS))
                    and all(len(m.assignment()) == KIP848_PARTITIONS // 2 for m in members)
                    and all(member["member_epoch"] == doc["group_epoch"] for member in doc["members"]))

        wait_until(settled, timeout=SETTLE, message="two consumer-protocol members owning every partition")
        members[0].commit(offsets=[TopicPartition(topic, tp.partition, 1) for tp in members[0].assignment()],
                          asynchronous=False)
        yield members
    finally:
        for m in members:
            m.close()


def test_a_kip848_consumer_group_is_listed_and_described_with_its_epochs(group_broker: BrokerProcess) -> None:
    """A ``group.protocol=consumer`` group (issue #21): type, epochs, assignor, and each member's
    epoch, subscription, owned and target partitions; once its members are gone, its offsets
    reset and the group deleted like a classic one."""
    broker = group_broker
    topic = group = "cli-kip848"
    with kip848_members(broker, topic, group):
        listed = {d["group"]: d for d in json_lines(ok("groups", "list", *boot(broker), "--output", "json"))}
        assert listed[group]["type"] == "consumer", listed[group]
        assert listed[group]["state"] == "Stable", listed[group]

        doc = describe_json(broker, group)
        assert doc["type"] == "consumer" and doc["state"] == "Stable", doc
        assert doc["assignor"] == "uniform", doc  # the first of group.consumer.assignors by default
        assert doc["assignment_epoch"] == doc["group_epoch"] >= 2, doc  # two joins
        assert sorted(m["client_id"] for m in doc["members"]) == [f"{group}-m0", f"{group}-m1"]
        for m in doc["members"]:
            assert m["subscribed_topics"] == [topic] and m["subscribed_regex"] is None, m
            assert m["target_assignment"] == m["assignment"] and len(m["assignment"]) == KIP848_PARTITIONS // 2, m
        committed = {(o["topic"], o["partition"]): o["committed_offset"] for o in doc["offsets"]}
        assert sorted(v for v in committed.values() if v is not None) == [1] * (KIP848_PARTITIONS // 2), doc["offsets"]

        text = ok("groups", "describe", "--group", group, *boot(broker))
        assert "Type: consumer" in text and f"Group epoch: {doc['group_epoch']}" in text, text
        header = next(r for r in table_rows(text) if r and r[0] == "MEMBER_ID")
        assert header[-4:] == ["EPOCH", "SUBSCRIPTION", "PARTITIONS", "TARGET"], text

        line = fails("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", *boot(broker))
        assert "has 2 active member(s)" in line, line

    wait_until(lambda: describe_json(broker, group)["state"] == "Empty", timeout=SETTLE,
               message="the group to be empty")
    ok("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-latest", *boot(broker))
    assert {lag for _, _, lag in lags(describe_json(broker, group)).values()} == {0}
    assert f"Deleted group {group}." in ok("groups", "delete", "--group", group, *boot(broker))
    assert "does not exist" in fails("groups", "describe", "--group", group, *boot(broker))


CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def test_kafka_consumer_groups_tool_lists_describes_and_deletes_a_kip848_group(
    group_broker: BrokerProcess, java_tools: JavaTools
) -> None:
    """Kafka's own ``kafka-consumer-groups.sh`` on a ``group.protocol=consumer`` group (issue #21):
    it describes such groups through ConsumerGroupDescribe, so its state, members and offsets
    views and the deletion must work on Riverlog as they do on Kafka."""
    broker = group_broker
    topic = group = "tool-kip848"

    def tool(*args: str) -> str:
        result = java_tools.run(CONSUMER_GROUP_COMMAND, ["--bootstrap-server", broker.bootstrap, *args])
        return result.stdout

    with kip848_members(broker, topic, group):
        listed = [r for r in table_rows(tool("--list", "--type")) if r and r[0] == group]
        assert len(listed) == 1 and "consumer" in [c.lower() for c in listed[0]], listed

        state = table_rows(tool("--describe", "--group", group, "--state", "--verbose"))
        header = state.index(next(r for r in state if "STATE" in r))
        row = dict(zip(state[header], state[header + 1], strict=False))
        assert row["STATE"] == "Stable" and row["ASSIGNMENT-STRATEGY"] == "uniform" and row["#MEMBERS"] == "2", state

        members = table_rows(tool("--describe", "--group", group, "--members"))
        member_rows = [r for r in members if r and r[0] == group]
        assert len(member_rows) == 2, members
        columns = next(r for r in members if "#PARTITIONS" in r)
        assert sorted(r[columns.index("#PARTITIONS")] for r in member_rows) == ["2", "2"], members

        offsets = table_rows(tool("--describe", "--group", group, "--offsets"))
        columns = next(r for r in offsets if "CURRENT-OFFSET" in r)
        by_partition = {int(r[columns.index("PARTITION")]): r for r in offsets if r and r[0] == group}
        assert sorted(by_partition) == list(range(KIP848_PARTITIONS)), offsets
        assert sorted(r[columns.index("CURRENT-OFFSET")] for r in by_partition.values()) == ["-", "-", "1", "1"]
        assert {r[columns.index("LOG-END-OFFSET")] for r in by_partition.values()} == {"4"}

    wait_until(lambda: describe_json(broker, group)["state"] == "Empty", timeout=SETTLE,
               message="the group to be empty")
    assert "was successful" in tool("--delete", "--group", group)
    assert group not in {d["group"] for d in json_lines(ok("groups", "list", *boot(broker), "--output", "json"))}
