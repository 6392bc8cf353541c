"""Acceptance 2: cooperative (incremental) rebalancing with confluent-kafka's cooperative-sticky.

Three members with ``partition.assignment.strategy=cooperative-sticky`` share a 6-partition
topic; a fourth joins. In the cooperative protocol the coordinator only runs the classic
JoinGroup/SyncGroup rounds; the members themselves revoke just the partitions that must move
(first rebalance) and the newcomer receives them in a follow-up rebalance. So, from the
callbacks each member process records:

- a member never revokes a partition it still holds afterwards (no eager "revoke everything");
- what the old members revoke is exactly what the newcomer ends up with;
- every member keeps at least one partition, and the final assignment is a split;
- records keep flowing: everything produced before and after the join is processed once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.groups import GROUP_BROKER_SETTINGS, MemberProcess, produce_known, wait_for_split

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 6
PER_PARTITION = 10
SETTLE = 60.0
STRATEGY = "cooperative-sticky"


@pytest.fixture
def group_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(GROUP_BROKER_SETTINGS)


def processed(members: list[MemberProcess]) -> set[tuple[int, int]]:
    return {(e["partition"], e["offset"]) for m in members for e in m.records()}


def test_fourth_member_joining_moves_only_the_partitions_it_takes(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    broker = group_broker
    topic = group = "cooperative"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = produce_known(broker.bootstrap, topic, PARTITIONS, PER_PARTITION, "before")

    def member(i: int) -> MemberProcess:
        return MemberProcess(f"coop-m{i}", bootstrap=broker.bootstrap, group=group, topic=topic,
                             log_dir=tmp_path, strategy=STRATEGY)

    members = [member(i) for i in range(3)]
    try:
        before = wait_for_split(members, range(PARTITIONS), timeout=SETTLE)
        wait_until(lambda: processed(members) >= set(first), timeout=SETTLE,
                   message="records produced before the fourth member processed")
        assert sorted(len(ps) for ps in before.values()) == [2, 2, 2], before
        marks = {m.name: len(m.snapshot()) for m in members}

        newcomer = member(3)
        members.append(newcomer)
        after = wait_for_split(members, range(PARTITIONS), timeout=SETTLE,
                               message="the fourth member did not get a share")
        second = produce_known(broker.bootstrap, topic, PARTITIONS, PER_PARTITION, "after")
        wait_until(lambda: processed(members) >= set(second), timeout=SETTLE,
                   message="records produced after the fourth member joined processed")
        # Nothing moved while the last records were processed.
        assert wait_for_split(members, range(PARTITIONS), timeout=SETTLE) == after

        revoked_total: set[int] = set()
        for m in members[:3]:
            events = m.rebalance_events(after=marks[m.name])
            revoked = {p for e in events if e["event"] in ("revoke", "lost") for p in e["partitions"]}
            assigned = {p for e in events if e["event"] == "assign" for p in e["partitions"]}
            assert all(e["event"] != "lost" for e in events), f"{m.name} lost partitions: {events}"
            # Only moved partitions are revoked: nothing it still holds afterwards, and never its
            # whole share (which is what an eager rebalance would do).
            assert not revoked & after[m.name], f"{m.name} revoked partitions it kept: {events}"
            assert revoked == before[m.name] - after[m.name], (
                f"{m.name}: held {before[m.name]}, holds {after[m.name]}, revoked {revoked}"
            )
            assert after[m.name], f"{m.name} was left with nothing: {events}"
            assert not assigned - before[m.name], f"{m.name} was given other members' partitions: {events}"
            revoked_total |= revoked
        assert revoked_total == after[newcomer.name], (
            f"revoked {revoked_total}, but the newcomer holds {after[newcomer.name]}"
        )
        for m in members:
            assert not m.errors(), f"{m.name} reported errors: {m.errors()}"
    finally:
        for m in members:
            m.terminate()

    counts = Counter((e["partition"], e["offset"]) for m in members for e in m.records())
    assert set(counts) == set({**first, **second}), "records missing or unexpected"
    assert set(counts.values()) == {1}, f"records processed twice: {[k for k, n in counts.items() if n > 1]}"
    broker.assert_alive()
