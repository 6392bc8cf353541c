"""Acceptance 5: committed offsets and group state survive a broker restart; groups on one topic
keep independent offsets; ``riverlog groups describe`` shows lag = produced - committed.

Three groups read one topic:

- ``consumed``: two consumers read everything, committing as they go, then close (Empty group);
- ``partial``: standalone commits of other offsets, with commit metadata (no members ever);
- ``live``: a consumer that stays up across the broker restart.

The broker is then restarted, cleanly (SIGTERM) or by SIGKILL, with the offsets topic at Kafka's
default of 50 partitions. Afterwards every group is still listed, each has exactly its own
offsets and metadata, the live member carries on in the same generation with the same member id
(its membership was persisted and reloaded, so no rebalance), new records are consumed from
where it left off, and the CLI's lag is produced minus committed for every partition (on
Riverlog, so is the ``riverlog_consumer_group_lag`` metric).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.group_protocol import commit_offsets, coordinator_connection, fetch_offsets
from support.groups import MemberProcess, committed_offsets, produce_known, wait_for_split

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3
FIRST = 20
SECOND = 10
PARTIAL = {0: 5, 1: 7, 2: 9}
# The live member must outlast the broker's downtime (a Kafka restart takes several seconds).
LIVE_SESSION_MS = 45_000
SETTLE = 60.0


def _metric_lags(url: str, groups: set[str], topic: str) -> dict[tuple[str, int], float] | None:
    """``riverlog_consumer_group_lag`` samples of ``groups`` on ``topic``; None until all are there."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found: dict[tuple[str, int], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "riverlog_consumer_group_lag" and labels.get("group") in groups \
                    and labels.get("topic") == topic:
                found[(labels["group"], int(labels["partition"]))] = sample.value
    return found if len(found) == len(groups) * PARTITIONS else None


def riverlog_json(broker: BrokerProcess, *args: str) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "broker_image")}
    env.pop("RIVERLOG_BOOTSTRAP", None)
    result = subprocess.run(
        [sys.executable, "-m", "riverlog", *args, "--bootstrap-server", broker.bootstrap, "--output", "json"],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, (
        f"riverlog {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
    )
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def commit_metadata(broker: BrokerProcess, group: str, topic: str) -> dict[int, tuple[int, str | None]]:
    async def fetch() -> dict[int, tuple[int, str | None]]:
        conn = await coordinator_connection(broker.host, broker.port, group)
        try:
            error, offsets = await fetch_offsets(conn, group, {topic: list(range(PARTITIONS))})
        finally:
            await conn.close()
        assert error == 0, error
        return {p: (o, m) for (_, p), (o, m, _) in offsets.items()}

    return asyncio.run(fetch())


def standalone_commit(broker: BrokerProcess, group: str, offsets: dict[tuple[str, int], int],
                      metadata: dict[tuple[str, int], str]) -> None:
    async def commit() -> None:
        conn = await coordinator_connection(broker.host, broker.port, group)
        try:
            codes = await commit_offsets(conn, group, offsets, metadata=metadata)
        finally:
            await conn.close()
        assert set(codes.values()) == {0}, codes

    asyncio.run(commit())


@pytest.mark.parametrize("how", ["clean", "kill"])
def test_offsets_and_groups_survive_restart_and_lag_is_produced_minus_committed(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path, how: str
) -> None:
    broker = broker_factory({"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 50})
    topic = "persisted"
    consumed, partial, live = "persist-consumed", "persist-partial", "persist-live"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce_known(broker.bootstrap, topic, PARTITIONS, FIRST, "first")
    every = range(PARTITIONS)

    readers = [MemberProcess(f"{consumed}-{i}", bootstrap=broker.bootstrap, group=consumed, topic=topic,
                             log_dir=tmp_path) for i in range(2)]
    live_member = MemberProcess(live, bootstrap=broker.bootstrap, group=live, topic=topic, log_dir=tmp_path,
                                session_timeout_ms=LIVE_SESSION_MS)
    try:
        wait_for_split(readers, every, timeout=SETTLE)
        wait_for_split([live_member], every, timeout=SETTLE)
        for group in (consumed, live):

            def committed_all(group: str = group) -> bool:
                return committed_offsets(broker.bootstrap, group, topic, every) == dict.fromkeys(every, FIRST)

            wait_until(committed_all, timeout=SETTLE, message=f"{group} committed everything")
        for r in readers:
            r.close()
        standalone_commit(broker, partial, {(topic, p): o for p, o in PARTIAL.items()},
                          {(topic, p): f"note-{p}" for p in every})
        before = live_member.status()
        mark = len(live_member.snapshot())
        described = {d["group"]: d for d in riverlog_json(broker, "groups", "describe", "--all-groups")}
        assert described[live]["state"] == "Stable"
        assert [m["member_id"] for m in described[live]["members"]] == [before["member_id"]]

        if how == "kill":
            broker.restart(hard=True)
        else:
            broker.restart()

        # Offsets: each group has exactly its own, metadata included.
        assert committed_offsets(broker.bootstrap, consumed, topic, every) == dict.fromkeys(every, FIRST)
        assert committed_offsets(broker.bootstrap, partial, topic, every) == PARTIAL
        assert commit_metadata(broker, partial, topic) == {p: (o, f"note-{p}") for p, o in PARTIAL.items()}
        assert committed_offsets(broker.bootstrap, live, topic, every) == dict.fromkeys(every, FIRST)

        # Groups: all still there, the live one with the same member in the same generation.
        listed = {g["group"]: g for g in riverlog_json(broker, "groups", "list")}
        assert {consumed, partial, live} <= set(listed), listed
        assert listed[consumed]["state"] == "Empty" and listed[partial]["state"] == "Empty", listed
        doc = wait_until(
            lambda: (d := riverlog_json(broker, "groups", "describe", "--group", live)[0])["state"] == "Stable" and d,
            timeout=SETTLE, message="live group Stable after the restart",
        )
        assert [m["member_id"] for m in doc["members"]] == [before["member_id"]], (
            f"the live member was replaced: {doc['members']} (had {before['member_id']})"
        )

        # New records: the live member reads them from its committed offsets, with no rebalance.
        produce_known(broker.bootstrap, topic, PARTITIONS, SECOND, "second")
        wait_until(lambda: committed_offsets(broker.bootstrap, live, topic, every)
                   == dict.fromkeys(every, FIRST + SECOND), timeout=SETTLE,
                   message="live member consumed and committed the records produced after the restart")
        after = live_member.status()
        assert (after["member_id"], after["generation"]) == (before["member_id"], before["generation"]), (
            f"membership changed across the restart: {before} -> {after}"
        )
        assert not live_member.rebalance_events(after=mark), live_member.rebalance_events(after=mark)
        offsets = [(e["partition"], e["offset"]) for e in live_member.records()]
        assert sorted(offsets) == sorted({(p, o) for p in every for o in range(FIRST + SECOND)}), (
            "the live member must read every record exactly once, across the restart"
        )

        # One group's progress leaves the other's offsets alone.
        standalone_commit(broker, partial, {(topic, 0): 6}, {(topic, 0): "moved"})
        assert committed_offsets(broker.bootstrap, consumed, topic, every) == dict.fromkeys(every, FIRST)
        assert committed_offsets(broker.bootstrap, partial, topic, every) == {**PARTIAL, 0: 6}

        # Lag = log end offset - committed offset, per partition, as the CLI reports it.
        end = FIRST + SECOND
        expected = {
            consumed: dict.fromkeys(every, FIRST),
            partial: {**PARTIAL, 0: 6},
            live: dict.fromkeys(every, end),
        }
        docs = {d["group"]: d for d in riverlog_json(broker, "groups", "describe", "--group", consumed,
                                                     "--group", partial, "--group", live)}
        for group, commits in expected.items():
            rows = {o["partition"]: (o["committed_offset"], o["log_end_offset"], o["lag"])
                    for o in docs[group]["offsets"] if o["topic"] == topic}
            assert rows == {p: (c, end, end - c) for p, c in commits.items()}, f"{group}: {rows}"
            assert docs[group]["total_lag"] == sum(end - c for c in commits.values())
        if broker.metrics_url is not None:
            # Riverlog also exports lag per group and partition (Kafka has JMX instead): the
            # scrape must agree with the CLI.
            lag_metric = wait_until(lambda: _metric_lags(broker.metrics_url or "", set(expected), topic),
                                    timeout=SETTLE, message="riverlog_consumer_group_lag for every group")
            assert lag_metric == {(g, p): end - c for g, commits in expected.items() for p, c in commits.items()}
        # Connection errors while the broker was down are expected; nothing worse is.
        worse = [e for e in live_member.errors() if e["event"] != "error" or e["fatal"]]
        assert not worse, worse
    finally:
        for m in [*readers, live_member]:
            m.terminate()
    broker.assert_alive()
