"""Kafka's own ``kafka-share-groups.sh`` (ShareGroupCommand) against a share group in use: it lists
the group and describes its offsets (start offset and lag per partition), members and state --
on Riverlog as on Kafka 4.3.1. ``riverlog groups list|describe`` show the same group the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from support.brokers import BrokerProcess
from support.java_programs import JavaPrograms
from support.java_tools import JavaTools
from support.share_client import WAIT_S, poll, warm_up

pytestmark = pytest.mark.integration

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


REPO_ROOT = Path(__file__).resolve().parents[2]


def riverlog(*args: str) -> str:
    """``riverlog ARGS`` as a person runs it; its stdout (a failure fails the test)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "broker_image")}
    result = subprocess.run([sys.executable, "-m", "riverlog", *args], capture_output=True, text=True, timeout=60,
                            env=env, stdin=subprocess.DEVNULL)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result.stdout


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def rows(stdout: str) -> list[list[str]]:
    """The table's rows after its header line, split on whitespace."""
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    return lines[1:]


def test_kafka_share_groups_tool_lists_and_describes(broker: BrokerProcess, kafka_libs: Path,
                                                     java_tools: JavaTools, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("toolq", 2, 1)])["toolq"].result(15)
    programs = JavaPrograms(kafka_libs)
    with programs.session("ShareClient", [broker.bootstrap], log_path=tmp_path / "client.log") as s:
        s.call("consumer", "c1", "toolgroup", "toolq")
        warm_up(s, ["c1"], "toolq", 2)
        values = {p: [f"t-{p}-{i}" for i in range(3)] for p in (0, 1)}
        for p, vs in values.items():
            s.call("produce", "toolq", p, *vs)
        seen: set[str] = set()
        deadline = time.monotonic() + WAIT_S
        wanted = {v for vs in values.values() for v in vs}
        while seen != wanted:
            assert time.monotonic() < deadline, seen
            seen.update(r["value"] for r in poll(s, "c1") if r["value"] in wanted)

        def tool(*args: str) -> str:
            result = java_tools.run(SHARE_GROUP_COMMAND, ["--bootstrap-server", broker.bootstrap, *args],
                                    timeout=90)
            return result.stdout

        assert "toolgroup" in tool("--list").split()
        offsets = rows(tool("--describe", "--group", "toolgroup"))
        assert [(r[0], r[1], r[2]) for r in offsets] == [("toolgroup", "toolq", "0"), ("toolgroup", "toolq", "1")]
        for r in offsets:
            assert int(r[3]) >= 0  # the share-partition start offset
            assert r[4] == "0", offsets  # everything produced is done
        [member] = rows(tool("--describe", "--group", "toolgroup", "--members"))
        assert (member[0], member[2], member[3], member[4], member[5]) == ("toolgroup", "/127.0.0.1", "c1", "2",
                                                                            "toolq:0,1")
        [state] = rows(tool("--describe", "--group", "toolgroup", "--state"))
        assert (state[0], state[-2], state[-1]) == ("toolgroup", "Stable", "1")

        # The same group through `riverlog groups`: its type, epochs, assignor, member and
        # share-partitions (start offset, and no lag: everything produced is done).
        boot = ["--bootstrap-server", broker.bootstrap]
        listed = {d["group"]: d for d in json_lines(riverlog("groups", "list", *boot, "--output", "json"))}
        assert listed["toolgroup"]["type"] == "share", listed
        (doc,) = json_lines(riverlog("groups", "describe", "--group", "toolgroup", *boot, "--output", "json"))
        assert (doc["type"], doc["state"], doc["assignor"]) == ("share", "Stable", "simple"), doc
        assert doc["group_epoch"] >= 1 and doc["assignment_epoch"] == doc["group_epoch"], doc
        [member] = doc["members"]
        assert member["client_id"] == "c1" and member["subscribed_topics"] == ["toolq"], member
        assert [(a["topic"], a["partition"]) for a in member["assignment"]] == [("toolq", 0), ("toolq", 1)]
        assert [(o["topic"], o["partition"], o["lag"]) for o in doc["offsets"]] == [("toolq", 0, 0), ("toolq", 1, 0)]
        assert all(o["start_offset"] >= 0 for o in doc["offsets"]), doc["offsets"]
        text = riverlog("groups", "describe", "--group", "toolgroup", *boot)
        assert "Type: share" in text and "START_OFFSET" in text, text
