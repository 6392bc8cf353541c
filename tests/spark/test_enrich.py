"""Acceptance 4: the enrichment join's output matches an independent computation.

The users reference topic is compacted and holds what a real one does: first versions, later
updates of some users, deletions (tombstones) of others; some events name users it never had.
Expected: each event once, keyed by its id, with the latest surviving version of its user, or
null fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.brokers import BrokerProcess
from support.spark_run import as_json, create_topic, produce, read_topic, riverlog_spark, run

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

USERS = 12  # events name u-0000..u-0011; the reference topic only ever knew u-0000..u-0009
EVENTS = 400


def _user(name: str, tier: str, country: str) -> bytes:
    return json.dumps({"name": name, "tier": tier, "country": country}).encode()


def test_enriched_events_match_an_independent_join(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, "enrich-users", 2, {"cleanup.policy": "compact"})
    create_topic(bootstrap, "enrich-events", 2)
    create_topic(bootstrap, "enrich-output", 2)
    first = [(f"u-{i:04d}".encode(), _user(f"user{i}", "bronze", "NO"), None, None) for i in range(10)]
    updates = [(f"u-{i:04d}".encode(), _user(f"user{i}", "gold", "SE"), None, None) for i in (1, 4, 7)]
    deletions = [(f"u-{i:04d}".encode(), None, None, None) for i in (3, 8)]
    again = [(b"u-0008", _user("back", "silver", "DK"), None, None)]  # deleted, then back
    produce(bootstrap, "enrich-users", [*first, *updates, *deletions, *again])
    run(riverlog_spark("generate", "--bootstrap", bootstrap, "--topic", "enrich-events", "--count", str(EVENTS),
                       "--users", str(USERS), "--seed", "5", "--no-progress"),
        tmp_path / "generate.log", cwd=tmp_path)

    # The reference table by plain Python: the last record per key, deleted keys gone.
    table: dict[str, dict[str, Any] | None] = {}
    for r in sorted(read_topic(bootstrap, "enrich-users"), key=lambda r: (r.partition, r.offset)):
        assert r.key is not None
        table[r.key.decode()] = None if r.value is None else json.loads(r.value)
    assert sorted(k for k, v in table.items() if v is not None) == [f"u-{i:04d}" for i in range(10) if i != 3]
    events = [as_json(r.value) for r in read_topic(bootstrap, "enrich-events")]
    assert len(events) == EVENTS
    assert {e["user"] for e in events} >= {"u-0003", "u-0010", "u-0011"}  # joins that find nothing
    blank = {"name": None, "tier": None, "country": None}
    expected = {e["event_id"]: {**e, **(table.get(e["user"]) or blank)} for e in events}

    run(riverlog_spark("run", "enrich", "--bootstrap", bootstrap, "--input-topic", "enrich-events",
                       "--reference-topic", "enrich-users", "--output-topic", "enrich-output",
                       "--checkpoint", str(tmp_path / "checkpoint"), "--trigger", "available-now"),
        tmp_path / "enrich.log", cwd=tmp_path)

    output = read_topic(bootstrap, "enrich-output")
    keys = [(r.key or b"").decode() for r in output]
    assert len(keys) == len(set(keys)) == EVENTS
    assert {(r.key or b"").decode(): as_json(r.value) for r in output} == expected
