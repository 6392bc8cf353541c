"""Acceptance 3: a member killed with SIGKILL, and a member that leaves cleanly.

Members are separate processes (:mod:`support.group_member`, confluent-kafka), so one can be
killed with SIGKILL: no LeaveGroup, no last commit, its TCP connections just vanish.

- Killed: the coordinator notices only when the member's session times out; the survivors then
  rebalance exactly once (generation + 1) and take over its partitions, resuming from its
  committed offsets, so every record is processed (at least once; only the record the victim
  may have been committing when it died can be processed twice).
- Clean close: the member sends LeaveGroup, and the coordinator rebalances at once. The leaver's
  session timeout is made far longer than the test is willing to wait, so a takeover within the
  wait can only come from the LeaveGroup, not from an expired session; again exactly one
  rebalance (generation + 1) with no other rebalance event before it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.groups import (
    GROUP_BROKER_SETTINGS,
    MemberProcess,
    produce_known,
    wait_for_split,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 6
PER_PARTITION = 10
# The smallest session timeout Kafka accepts by default (group.min.session.timeout.ms).
SHORT_SESSION_MS = 6_000
# Longer than anything this module waits for: a session of this length never expires here.
LONG_SESSION_MS = 300_000
SETTLE = 60.0


@pytest.fixture(scope="module")
def group_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    # Kafka's defaults, spelled out: sessions from 6 s (group.min.session.timeout.ms) to 30 min.
    return module_broker_factory({**GROUP_BROKER_SETTINGS, "group.min.session.timeout.ms": SHORT_SESSION_MS})


def start_members(
    broker: BrokerProcess, tmp_path: Path, group: str, topic: str, session_ms: list[int]
) -> list[MemberProcess]:
    members = []
    for i, session in enumerate(session_ms):
        members.append(MemberProcess(
            f"{group}-m{i}", bootstrap=broker.bootstrap, group=group, topic=topic, log_dir=tmp_path,
            session_timeout_ms=session,
        ))
    return members


def all_processed(members: list[MemberProcess], keys: set[tuple[int, int]]) -> bool:
    seen = {(e["partition"], e["offset"]) for m in members for e in m.records()}
    return seen >= keys


def rebalance_summary(events: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return [(e["event"], e["generation"], e["partitions"]) for e in events]


def settle(members: list[Any], first: Any, before: str) -> tuple[dict[str, list[int]], int]:
    """Wait for a gapless split and for every record produced so far to be processed; return
    the split and the one generation all members agree on."""
    split = wait_for_split(members, range(PARTITIONS), timeout=SETTLE)
    wait_until(lambda: all_processed(members, set(first)), timeout=SETTLE,
               message=f"records produced before {before} processed")
    statuses = {m.name: m.status() for m in members}
    generations = {s["generation"] for s in statuses.values()}
    assert len(generations) == 1, f"members disagree on the generation: {statuses}"
    (generation,) = generations
    return split, generation


def test_killed_member_partitions_go_to_the_others_after_its_session_times_out(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    broker = group_broker
    topic = group = "failures-kill"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = produce_known(broker.bootstrap, topic, PARTITIONS, PER_PARTITION, "before")
    members = start_members(broker, tmp_path, group, topic, [SHORT_SESSION_MS] * 3)
    try:
        split, generation = settle(members, first, "the kill")

        victim, survivors = members[0], members[1:]
        marks = {m.name: len(m.snapshot()) for m in survivors}
        victim.kill()
        # Records for every partition, the victim's included: only a new owner can process them.
        second = produce_known(broker.bootstrap, topic, PARTITIONS, PER_PARTITION, "after")

        # The session timeout plus one rebalance, with a wide margin for a loaded machine.
        new_split = wait_for_split(survivors, range(PARTITIONS), timeout=SHORT_SESSION_MS / 1000 + SETTLE,
                                   message="survivors did not take over the killed member's partitions")
        assert set(split[victim.name]) <= set().union(*new_split.values())
        for m in survivors:
            events = m.rebalance_events(after=marks[m.name])
            # Exactly one eager rebalance: revoke what it held in the old generation, then its
            # new share in the next one.
            assert rebalance_summary(events) == [
                ("revoke", generation, sorted(split[m.name])),
                ("assign", generation + 1, sorted(new_split[m.name])),
            ], f"{m.name}: unexpected rebalance events {rebalance_summary(events)}"

        wait_until(lambda: all_processed(survivors, set(second)), timeout=SETTLE,
                   message="records produced after the kill processed by the survivors")
        for m in survivors:
            assert m.status()["generation"] == generation + 1
            assert not m.errors(), f"{m.name} reported errors: {m.errors()}"
    finally:
        for m in members:
            m.terminate()

    records = [(e["partition"], e["offset"], e["value"]) for m in members for e in m.records()]
    expected = {**first, **second}
    assert {(p, o) for p, o, _ in records} == set(expected)
    assert all(v == expected[(p, o)] for p, o, v in records), "a record's value differs from what was produced"
    # The victim committed after each record it processed, synchronously, so at most the one
    # it was committing when killed is processed again by its successor.
    twice = [k for k, n in Counter((p, o) for p, o, _ in records).items() if n > 1]
    victim_records = {(e["partition"], e["offset"]) for e in members[0].records()}
    assert len(twice) <= 1 and set(twice) <= victim_records, f"records processed twice: {twice}"
    broker.assert_alive()


def test_member_leaving_cleanly_triggers_an_immediate_rebalance(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    broker = group_broker
    topic = group = "failures-leave"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = produce_known(broker.bootstrap, topic, PARTITIONS, PER_PARTITION, "before")
    # Member 0 leaves; were its LeaveGroup ignored, its partitions would stay put for
    # LONG_SESSION_MS, far beyond every wait below.
    members = start_members(broker, tmp_path, group, topic, [LONG_SESSION_MS, SHORT_SESSION_MS, SHORT_SESSION_MS])
    try:
        split, generation = settle(members, first, "the leave")

        leaver, survivors = members[0], members[1:]
        marks = {m.name: len(m.snapshot()) for m in survivors}
        leaver.close()
        second = produce_known(broker.bootstrap, topic, PARTITIONS, PER_PARTITION, "after")

        new_split = wait_for_split(survivors, range(PARTITIONS), timeout=SETTLE,
                                   message="survivors did not take over the leaver's partitions")
        assert set(split[leaver.name]) <= set().union(*new_split.values())
        for m in survivors:
            events = m.rebalance_events(after=marks[m.name])
            assert rebalance_summary(events) == [
                ("revoke", generation, sorted(split[m.name])),
                ("assign", generation + 1, sorted(new_split[m.name])),
            ], f"{m.name}: unexpected rebalance events {rebalance_summary(events)}"
        # The leaver's own view: it gave up its partitions as it closed (eager revoke on leave).
        leaver_events = leaver.rebalance_events()
        assert leaver_events and leaver_events[-1]["event"] == "revoke", rebalance_summary(leaver_events)

        wait_until(lambda: all_processed(survivors, set(second)), timeout=SETTLE,
                   message="records produced after the leave processed by the survivors")
        for m in survivors:
            assert m.status()["generation"] == generation + 1
            assert not m.errors(), f"{m.name} reported errors: {m.errors()}"
    finally:
        for m in members:
            m.terminate()

    # A clean leave commits everything first: every record exactly once.
    counts = Counter((e["partition"], e["offset"]) for m in members for e in m.records())
    assert set(counts) == set({**first, **second}) and set(counts.values()) == {1}, counts
    broker.assert_alive()
