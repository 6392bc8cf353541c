"""Acceptance 4: static membership (``group.instance.id``, KIP-345).

Three static members (confluent-kafka processes, each with its own ``group.instance.id``) share
a 6-partition topic.

- Restart inside the session timeout: one member is killed with SIGKILL and started again with
  the same instance id. The coordinator hands the new process the old member's place (a new
  member id, the same generation) without a rebalance: the restarted member gets exactly its
  old partitions, the others see no revoke or assign callback, and everybody's generation stays
  the same, also after the old session would have expired.
- Fencing: a second process started with an instance id that is in use takes the place over;
  the stale one is fenced (FENCED_INSTANCE_ID, fatal for librdkafka), again with no rebalance.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.brokers import BrokerProcess
from support.clients import create_topic, wait_until
from support.groups import GROUP_BROKER_SETTINGS, MemberProcess, produce_known, wait_for_split

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 6
PER_PARTITION = 10
# Long enough for a killed member's replacement to start and join well inside it, even on a
# loaded machine; the test waits past it once to show that nothing happens when it runs out.
SESSION_MS = 10_000
SETTLE = 60.0


@pytest.fixture(scope="module")
def group_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return module_broker_factory(GROUP_BROKER_SETTINGS)


def static_member(broker: BrokerProcess, tmp_path: Path, group: str, instance: str, name: str) -> MemberProcess:
    return MemberProcess(name, bootstrap=broker.bootstrap, group=group, topic=group, log_dir=tmp_path,
                         instance_id=instance, session_timeout_ms=SESSION_MS)


def settle(members: list[MemberProcess]) -> tuple[dict[str, set[int]], int]:
    split = wait_for_split(members, range(PARTITIONS), timeout=SETTLE)
    statuses = {m.name: m.status() for m in members}
    generations = {s["generation"] for s in statuses.values()}
    assert len(generations) == 1, f"members disagree on the generation: {statuses}"
    return split, generations.pop()


def processed_by(member: MemberProcess) -> set[tuple[int, int]]:
    return {(e["partition"], e["offset"]) for e in member.records()}


def test_static_member_restarting_within_session_gets_its_partitions_back_without_rebalance(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    broker = group_broker
    group = "static-restart"
    create_topic(broker.bootstrap, group, PARTITIONS)
    produce_known(broker.bootstrap, group, PARTITIONS, PER_PARTITION, "before")
    members = [static_member(broker, tmp_path, group, f"inst-{i}", f"static-{i}") for i in range(3)]
    restarted: MemberProcess | None = None
    try:
        split, generation = settle(members)
        old = members[1]
        others = [members[0], members[2]]
        marks = {m.name: len(m.snapshot()) for m in others}
        old_member_id = old.status()["member_id"]

        old.kill()
        killed_at = time.monotonic()
        restarted = static_member(broker, tmp_path, group, "inst-1", "static-1-again")
        assigned = restarted.wait_event("assign", timeout=SETTLE, message="restarted member got no assignment")
        assert set(assigned["partitions"]) == split[old.name], (
            f"restarted member got {assigned['partitions']}, held {sorted(split[old.name])} before"
        )
        assert assigned["generation"] == generation, (
            f"generation moved from {generation} to {assigned['generation']}: the group rebalanced"
        )
        assert assigned["member_id"] != old_member_id, "a static member's replacement gets a new member id"

        # Records for every partition: each goes to its owner, the restarted member included,
        # which resumes from the committed offsets of its previous incarnation.
        after = produce_known(broker.bootstrap, group, PARTITIONS, PER_PARTITION, "after")
        current = [*others, restarted]
        owners = {p: m for m in others for p in split[m.name]} | dict.fromkeys(split[old.name], restarted)
        wait_until(
            lambda: all((p, o) in processed_by(owners[p]) for p, o in after),
            timeout=SETTLE, message="records produced after the restart processed by their owners",
        )

        # Past the old incarnation's session timeout (with a margin of a few heartbeats): had
        # the coordinator kept the killed member id around, its expiry would rebalance now.
        remaining = killed_at + SESSION_MS / 1000 + 3.0 - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        for m in others:
            events = m.rebalance_events(after=marks[m.name])
            assert not events, f"{m.name} saw a rebalance: {events}"
            assert m.status()["generation"] == generation
        status = restarted.status()
        assert status["generation"] == generation and set(status["assignment"]) == split[old.name], status
        assert [e["event"] for e in restarted.rebalance_events()] == ["assign"], restarted.rebalance_events()
        for m in current:
            assert not m.errors(), f"{m.name} reported errors: {m.errors()}"
    finally:
        for m in [*members, *([restarted] if restarted else [])]:
            m.terminate()
    broker.assert_alive()


def test_second_process_with_same_instance_id_fences_the_first(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    broker = group_broker
    group = "static-fence"
    create_topic(broker.bootstrap, group, PARTITIONS)
    members = [static_member(broker, tmp_path, group, f"inst-{i}", f"fence-{i}") for i in range(3)]
    intruder: MemberProcess | None = None
    try:
        split, generation = settle(members)
        stale = members[2]
        others = members[:2]
        marks = {m.name: len(m.snapshot()) for m in others}
        stale_mark = len(stale.snapshot())

        intruder = static_member(broker, tmp_path, group, "inst-2", "fence-2-again")
        assigned = intruder.wait_event("assign", timeout=SETTLE, message="the new instance got no assignment")
        assert set(assigned["partitions"]) == split[stale.name] and assigned["generation"] == generation, assigned

        # The stale instance learns it was replaced on its next heartbeat; librdkafka raises
        # FENCED_INSTANCE_ID as its fatal error ("_FATAL", naming the cause in the text).
        stale.wait_for(
            lambda events: next((e for e in events[stale_mark:] if e["event"] == "error"
                                 and ("FENCED" in e["code"] or e["code"] == "_FATAL")
                                 and "fenced" in e["text"].lower()), None),
            timeout=SETTLE, message="the stale instance was not fenced",
        )
        for m in others:
            assert not m.rebalance_events(after=marks[m.name]), f"{m.name} saw a rebalance"
            assert m.status()["generation"] == generation
    finally:
        for m in [*members, *([intruder] if intruder else [])]:
            m.terminate()
    broker.assert_alive()
