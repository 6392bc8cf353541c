"""``riverlog transactions list|describe|describe-producers|abort`` against a real broker.

Transactions are made by confluent-kafka's transactional producer (one committed, one aborted,
one left open) and by raw requests (a *hanging* transaction no coordinator knows of, see
``support/hanging_txn.py``). Commands run as subprocesses, as a person would run them; what an
abort did is checked with librdkafka read_committed consumers (``support/txn_checks.py``).
Expected failures print one ``riverlog: error:`` line and exit non-zero, never a traceback.

The CLI speaks only the Kafka protocol, so this runs against Riverlog by default and Apache Kafka
with RIVERLOG_TEST_TARGET=kafka.
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
from confluent_kafka import KafkaException, Producer
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.hanging_txn import HANGING_SETTINGS, make_hanging_transaction
from support.txn_checks import READ_COMMITTED, TXN_BROKER_SETTINGS, read_all, wait_stable

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT = 60.0
CALL_TIMEOUT = 60.0
TOPIC = "cli-txn"
HANGING_TOPIC = "cli-txn-hanging"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT / "broker_image")
    env.pop("RIVERLOG_BOOTSTRAP", None)
    return subprocess.run([sys.executable, "-m", "riverlog", *args], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT, env=env, stdin=subprocess.DEVNULL)


def ok(*args: str) -> str:
    result = cli(*args)
    assert result.returncode == 0, f"riverlog {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def fails(*args: str, code: int = 1) -> str:
    result = cli(*args)
    assert result.returncode == code, (
        f"riverlog {' '.join(args)} exited {result.returncode}, expected {code}:\n{result.stdout}\n{result.stderr}")
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("riverlog: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def table(text: str) -> list[dict[str, str]]:
    """A table's rows by upper-case header (no cell of these tables has a space)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    return [dict(zip(lines[0], row, strict=True)) for row in lines[1:]]


def producer(bootstrap: str, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                  "transaction.timeout.ms": 300_000, "log_level": 3})
    p.init_transactions(CALL_TIMEOUT)
    return p


def send(p: Producer, partition: int, *values: str) -> None:
    for v in values:
        p.produce(TOPIC, value=v.encode(), key=b"k", partition=partition)
    assert p.flush(CALL_TIMEOUT) == 0


class Scenario:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.boot = ["--bootstrap-server", broker.bootstrap]
        self.open_producer: Producer | None = None


@pytest.fixture(scope="module")
def scenario(module_broker_factory: Callable[..., BrokerProcess]) -> Iterator[Scenario]:
    settings = {**TXN_BROKER_SETTINGS, **HANGING_SETTINGS}  # so a hanging transaction can be made
    broker = module_broker_factory(settings)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, 2)
    create_topic(bootstrap, HANGING_TOPIC, 1)
    committed = producer(bootstrap, "cli-committed")
    committed.begin_transaction()
    send(committed, 0, "c1", "c2")
    committed.commit_transaction(CALL_TIMEOUT)
    aborted = producer(bootstrap, "cli-aborted")
    aborted.begin_transaction()
    send(aborted, 0, "a1")
    aborted.abort_transaction(CALL_TIMEOUT)
    del committed, aborted  # destroyed while the broker still runs (no reconnect noise at teardown)
    wait_stable(bootstrap, {TOPIC: 2})
    opened = producer(bootstrap, "cli-open")
    opened.begin_transaction()
    send(opened, 1, "o1", "o2", "o3")
    s = Scenario(broker)
    s.open_producer = opened
    yield s
    # The test may have aborted its partition behind its back; the broker goes anyway.
    with contextlib.suppress(KafkaException):
        opened.abort_transaction(10)


def test_list_shows_each_transactional_id_with_its_state(scenario: Scenario) -> None:
    rows = {r["TRANSACTIONAL_ID"]: r for r in table(ok("transactions", "list", *scenario.boot))}
    assert {k: r["STATE"] for k, r in rows.items() if k.startswith("cli-")} == {
        "cli-committed": "CompleteCommit", "cli-aborted": "CompleteAbort", "cli-open": "Ongoing"}, rows
    listed = json_lines(ok("transactions", "list", *scenario.boot, "--output", "json"))
    docs = {d["transactional_id"]: d for d in listed}
    assert docs["cli-open"]["state"] == "Ongoing"
    assert docs["cli-open"]["producer_id"] == int(rows["cli-open"]["PRODUCER_ID"])
    assert isinstance(docs["cli-open"]["coordinator"], int)

    # Filters, as kafka-transactions list has them.
    ongoing = json_lines(ok("transactions", "list", *scenario.boot, "--state", "ongoing", "--output", "json"))
    assert [d["transactional_id"] for d in ongoing] == ["cli-open"]
    pid = str(docs["cli-committed"]["producer_id"])
    by_pid = json_lines(ok("transactions", "list", *scenario.boot, "--producer-id", pid, "--output", "json"))
    assert [d["transactional_id"] for d in by_pid] == ["cli-committed"]
    running = json_lines(ok("transactions", "list", *scenario.boot, "--state", "Ongoing", "--duration-ms", "1",
                            "--output", "json"))
    assert [d["transactional_id"] for d in running] == ["cli-open"]
    none = cli("transactions", "list", *scenario.boot, "--state", "Ongoing", "--duration-ms", "3600000")
    assert none.returncode == 0 and none.stdout == "", none
    assert "no transactions in state Ongoing and open for more than 3600000 ms" in none.stderr

    pattern = json_lines(ok("transactions", "list", *scenario.boot, "--transactional-id-pattern", "cli-(open|aborted)",
                            "--output", "json"))
    assert sorted(d["transactional_id"] for d in pattern) == ["cli-aborted", "cli-open"]

    assert "is not a transaction state" in fails("transactions", "list", *scenario.boot, "--state", "Running",
                                                code=2)


def test_describe_shows_the_coordinators_view(scenario: Scenario) -> None:
    (doc,) = json_lines(ok("transactions", "describe", "--transactional-id", "cli-open", *scenario.boot,
                           "--output", "json"))
    assert doc["state"] == "Ongoing"
    assert doc["partitions"] == [{"topic": TOPIC, "partition": 1}]
    assert doc["timeout_ms"] == 300_000
    assert doc["start_time_ms"] > 0 and doc["duration_ms"] >= 0
    assert doc["producer_epoch"] >= 0 and doc["producer_id"] >= 0

    rows = table(ok("transactions", "describe", "--transactional-id", "cli-open", "--transactional-id",
                    "cli-committed", *scenario.boot))
    assert [(r["TRANSACTIONAL_ID"], r["STATE"], r["PARTITIONS"]) for r in rows] == [
        ("cli-open", "Ongoing", f"{TOPIC}:1"), ("cli-committed", "CompleteCommit", "-")]
    assert rows[0]["COORDINATOR"] == str(doc["coordinator"]["id"])
    assert rows[1]["DURATION_MS"] == "-"  # only an open transaction has a running time

    line = fails("transactions", "describe", "--transactional-id", "no-such-txn", *scenario.boot)
    assert "transactional id 'no-such-txn' does not exist" in line and "riverlog transactions list" in line


def test_describe_producers_and_abort_by_producer_id(scenario: Scenario) -> None:
    """The open transaction on partition 1 is aborted by producer id, epoch and coordinator epoch
    (what describe-producers shows): read_committed consumers then move past it."""
    (doc,) = json_lines(ok("transactions", "describe-producers", "--topic", TOPIC, "--partition", "1",
                           *scenario.boot, "--output", "json"))
    (open_state,) = [p for p in doc["producers"] if p["transaction_start_offset"] is not None]
    assert open_state["transaction_start_offset"] == 0
    rows = table(ok("transactions", "describe-producers", "--topic", TOPIC, "--partition", "1", *scenario.boot))
    assert [r["TRANSACTION_START_OFFSET"] for r in rows] == ["0"]

    # Usage errors name what is missing.
    line = fails("transactions", "abort", "--topic", TOPIC, "--partition", "1", *scenario.boot,
                 "--producer-id", str(open_state["producer_id"]), code=2)
    assert "add --producer-epoch, --coordinator-epoch" in line
    assert "--start-offset" in fails("transactions", "abort", "--topic", TOPIC, "--partition", "1", *scenario.boot,
                                     code=2)

    out = ok("transactions", "abort", "--topic", TOPIC, "--partition", "1", *scenario.boot,
             "--producer-id", str(open_state["producer_id"]),
             "--producer-epoch", str(open_state["producer_epoch"]),
             "--coordinator-epoch", str(open_state["coordinator_epoch"]))
    assert out.startswith(f"Aborted the transaction of producer {open_state['producer_id']}"), out
    wait_stable(scenario.broker.bootstrap, {TOPIC: 2})
    read = read_all(scenario.broker.bootstrap, {TOPIC: 2}, READ_COMMITTED)
    assert read.values(TOPIC, 0) == ["c1", "c2"]
    assert read.values(TOPIC, 1) == []
    (after,) = json_lines(ok("transactions", "describe-producers", "--topic", TOPIC, "--partition", "1",
                             *scenario.boot, "--output", "json"))
    assert all(p["transaction_start_offset"] is None for p in after["producers"]), after


def test_abort_a_hanging_transaction_by_start_offset(scenario: Scenario) -> None:
    bootstrap = scenario.broker.bootstrap
    hanging = make_hanging_transaction(bootstrap, HANGING_TOPIC, 0, ["h1", "h2"])
    # Nothing will ever end it: read_committed stops at its first record.
    assert read_all(bootstrap, {HANGING_TOPIC: 1}, READ_COMMITTED).ends == {(HANGING_TOPIC, 0): hanging.start_offset}
    listed = json_lines(ok("transactions", "list", *scenario.boot, "--producer-id", str(hanging.producer_id),
                           "--output", "json"))
    assert listed == []  # no coordinator knows this producer

    line = fails("transactions", "abort", "--topic", HANGING_TOPIC, "--partition", "0", *scenario.boot,
                 "--start-offset", str(hanging.start_offset + 1))
    assert f"no open transaction starts at offset {hanging.start_offset + 1}" in line
    assert f"open transactions there start at {hanging.start_offset}" in line
    assert "riverlog transactions describe-producers" in line

    (done,) = json_lines(ok("transactions", "abort", "--topic", HANGING_TOPIC, "--partition", "0", *scenario.boot,
                            "--start-offset", str(hanging.start_offset), "--output", "json"))
    assert done == {"topic": HANGING_TOPIC, "partition": 0, "producer_id": hanging.producer_id,
                    "producer_epoch": hanging.producer_epoch, "coordinator_epoch": 0, "aborted": True}
    ends = wait_stable(bootstrap, {HANGING_TOPIC: 1})
    assert ends == {(HANGING_TOPIC, 0): hanging.start_offset + 3}  # two records and the marker
    read = wait_until(lambda: read_all(bootstrap, {HANGING_TOPIC: 1}, READ_COMMITTED), timeout=30)
    assert read.records == [] and read.ends == {(HANGING_TOPIC, 0): hanging.start_offset + 3}

    line = fails("transactions", "abort", "--topic", HANGING_TOPIC, "--partition", "0", *scenario.boot,
                 "--start-offset", str(hanging.start_offset))
    assert "no transaction is open there" in line


def test_abort_of_a_missing_topic_or_partition(scenario: Scenario) -> None:
    line = fails("transactions", "abort", "--topic", "no-such-topic", "--partition", "0", *scenario.boot,
                 "--start-offset", "0")
    assert "'no-such-topic' does not exist" in line, line
    line = fails("transactions", "describe-producers", "--topic", TOPIC, "--partition", "9", *scenario.boot)
    assert "has no partition 9" in line, line
