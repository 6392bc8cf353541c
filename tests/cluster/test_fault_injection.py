"""A seeded schedule of faults against a 3-node cluster under load, then a strict check.

For at least a minute, one node at a time is killed (-9) and restarted, frozen (SIGSTOP, then
SIGCONT) or cut off from the network (its namespace's link down), for a few seconds each, with a
wait for the cluster to be healthy again (all brokers live, every ISR complete) before the next
fault. Meanwhile two idempotent acks=all producers write numbered records to every partition
(RF=3, min.insync.replicas=2), two consumer groups of two members each read and commit, one
with the classic protocol and one with KIP-848's consumer protocol (``group.protocol=consumer``,
issue #21), and a monitor per group polls its committed offsets.

Checker: every acknowledged record is in every replica's log exactly once, in its stream's
order, at its acknowledged offset; the replicas are identical; each group read every record,
with the contents of the log, and its committed offsets reach the end and never moved
backwards (the same rules for both protocols: a group coordinator killed or cut off mid-
rebalance must lose neither a commit nor a member's progress). Two Java share consumers of a share
group (KIP-932) accept every record they get too: every record from the group's start is delivered,
the group's durable lag ends at 0 on every partition, no record is delivered again once its
acceptance was confirmed, and every delivery has the log's value (``support/share_workload.py``;
RIVERLOG_FAULT_SHARE=0 leaves them out). The seed (set
RIVERLOG_FAULT_SEED to replay one), the executed schedule and the details of any problem are in
the failure message, and printed with -s.

It runs twice: with plaintext everywhere, and with the nodes' own traffic (replication,
transaction markers, the Raft quorum, forwarded controller calls) over SASL_SSL listeners
(``support/secure_cluster.py``, issue #17), the clients staying on the PLAINTEXT listener.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from riverlog.protocol.record_batch import Record
from support import fault_schedule
from support.brokers import kafka_dist
from support.certs import TestPki
from support.cluster_workload import (
    CommittedOffsetMonitor,
    GroupMember,
    SequencedProducer,
    check_partition_copy,
    compare_copies,
    create_topic,
    end_offsets,
    format_problems,
    merge_acked,
)
from support.fault_schedule import Fault, schedule, seeded_timeline
from support.process_cluster import ProcessCluster
from support.secure_cluster import secured_options
from support.share_workload import ShareReader

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

TOPIC = "chaos"
PARTITIONS = 4
# The classic group, and the KIP-848 one; each with its own monitor and the same checks.
GROUPS = {"classic": "chaos-readers", "consumer": "chaos-readers-kip848"}
# KIP-848 members heartbeat to the broker every second and are fenced after 10 s without one
# (Kafka's defaults, 5 s and 45 s, would make the group's recovery after a fault slower than
# the classic group's, whose members use 1 s and 6 s). Kafka checks them against the min/max.
# Share consumers (KIP-932, issue #21): Java KafkaShareConsumers accepting every record, judged by
# the group's durable lag (support/share_workload.py). RIVERLOG_FAULT_SHARE=0 leaves them out.
SHARE_GROUP = "chaos-share"
WITH_SHARE_GROUP = os.environ.get("RIVERLOG_FAULT_SHARE", "1") == "1"
CONSUMER_GROUP_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": 1000, "group.consumer.min.heartbeat.interval.ms": 1000,
    "group.consumer.session.timeout.ms": 10000, "group.consumer.min.session.timeout.ms": 10000,
}
# At least a minute of faults; RIVERLOG_FAULT_SECONDS can make the run longer, never shorter.
FAULT_SECONDS = max(60.0, float(os.environ.get("RIVERLOG_FAULT_SECONDS", "60")))


def wait_healthy(cluster: ProcessCluster) -> None:
    fault_schedule.wait_healthy(cluster, [TOPIC, "__consumer_offsets"])


@pytest.mark.parametrize("node_traffic", ["plaintext", "sasl_ssl"])
def test_seeded_faults_lose_no_acknowledged_record_and_no_commit(
    process_cluster_factory: Callable[..., ProcessCluster], record_property: Callable[[str, object], None],
    node_traffic: str, tmp_path: Path,
) -> None:
    seed, timeline = seeded_timeline(record_property)
    options = secured_options(TestPki.create(tmp_path / "pki")) if node_traffic == "sasl_ssl" else {}
    cluster = process_cluster_factory(3, overrides=CONSUMER_GROUP_SETTINGS, **options)
    create_topic(cluster, TOPIC, partitions=PARTITIONS, replication=3, config={"min.insync.replicas": "2"})
    groups = {protocol: [GroupMember(cluster.bootstrap, group, TOPIC, f"{protocol}{i}", protocol=protocol).start()
                         for i in (1, 2)] for protocol, group in GROUPS.items()}
    monitors = {protocol: CommittedOffsetMonitor(cluster.bootstrap, group, TOPIC, range(PARTITIONS)).start()
                for protocol, group in GROUPS.items()}
    share: ShareReader | None = None
    if WITH_SHARE_GROUP:
        share = ShareReader(Path(kafka_dist.install()), cluster.bootstrap, SHARE_GROUP, TOPIC, tmp_path / "share.log")
        share.warm_up(PARTITIONS)  # a share group starts at the log end: from here on, every record is its
        share.start()
    producers = [SequencedProducer(cluster.bootstrap, TOPIC, range(PARTITIONS), name=f"p{i}", rate=300).start()
                 for i in (1, 2)]
    problems: list[str] = []
    executed: list[Fault] = []
    try:
        cluster.wait_until(lambda: all(p.acked_count() >= 200 for p in producers), timeout=60,
                           what="both producers under way")
        timeline.log("load running; faults start")
        faults_started = time.monotonic()
        for fault in schedule(seed):
            if time.monotonic() - faults_started >= FAULT_SECONDS:
                break
            executed.append(fault)
            fault_schedule.inject(cluster, fault, timeline, healthy_topics=[TOPIC, "__consumer_offsets"])
            time.sleep(fault.gap)
        timeline.log(f"faults over: {len(executed)} in {time.monotonic() - faults_started:.0f}s")
    except Exception as exc:
        raise AssertionError(f"the fault phase failed (seed {seed}); timeline:\n{timeline}") from exc
    finally:
        fault_schedule.restore(cluster)
        for producer in producers:
            remaining = producer.stop(flush_timeout=120)
            if remaining:
                problems.append(f"producer {producer.name}: {remaining} records neither acknowledged nor failed")
            problems += [f"delivery failed: {e}" for e in producer.errors[:20]]
    wait_healthy(cluster)
    timeline.log("producers stopped; checking replicas")

    acked = {p: merge_acked(*(pr.acked(p) for pr in producers)) for p in range(PARTITIONS)}
    stats: list[str] = []
    logs: dict[int, list[Record]] = {}
    for p in range(PARTITIONS):
        wanted = sum(len(seqs) for seqs in acked[p].values())
        deadline = time.monotonic() + 60
        while True:  # followers may still be fetching the tail
            copies = {f"node {n.node_id}": n.read_partition(TOPIC, p) for n in cluster.nodes}
            if (not compare_copies(copies) and min(len(c) for c in copies.values()) >= wanted) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        problems += [f"partition {p}: {d}" for d in compare_copies(copies)]
        for name, records in copies.items():
            problems += check_partition_copy(records, acked[p], where=f"partition {p} replica on {name}")
        stats.append(f"partition {p}: {wanted} acknowledged; replica lengths "
                     + ", ".join(f"{name} {len(records)}" for name, records in copies.items()))
        logs[p] = copies["node 1"]

    ends = end_offsets(cluster.bootstrap, TOPIC, range(PARTITIONS))
    timeline.log(f"end offsets {ends}; waiting for the groups to read and commit everything")
    redelivered: dict[str, int] = {}
    for protocol, members in groups.items():
        problems += check_group(cluster, GROUPS[protocol], members, monitors[protocol], logs, ends, redelivered)

    if share is not None:
        problems += check_share_group(cluster, share, logs)

    summary = "\n".join([
        f"seed {seed}; faults executed:", *(f"  {f}" for f in executed),
        "timeline:", str(timeline),
        *stats,
        "producers: " + ", ".join(f"{pr.name} sent {pr.sent()} acked {pr.acked_count()} failed {len(pr.errors)}"
                                   for pr in producers),
        *(f"{GROUPS[protocol]} ({protocol} protocol): "
          + ", ".join(f"{m.name} read {len(m.consumed)} ({m.commits} commits, {len(m.commit_errors)} failed)"
                      for m in members)
          + f"; {redelivered[GROUPS[protocol]]} redeliveries; committed-offset observations: "
          f"{sum(len(v) for v in monitors[protocol].observations.values())}, {monitors[protocol].errors} failed polls"
          for protocol, members in groups.items()),
        f"{SHARE_GROUP} (share group): " + ("not run (RIVERLOG_FAULT_SHARE=0)" if share is None else
                                             f"{len(share.deliveries)} deliveries, {len(share.accepted())} records "
                                             f"accepted, {share.unconfirmed_done(logs)} finished without a confirmed "
                                             f"acceptance, {len(share.errors)} failed polls"),
    ])
    print("\n" + summary)
    assert not problems, f"{len(problems)} problems:\n{format_problems(problems)}\n\n{summary}"


def check_group(cluster: ProcessCluster, group: str, members: list[GroupMember], monitor: CommittedOffsetMonitor,
                logs: dict[int, list[Record]], ends: dict[int, int], redelivered: dict[str, int]) -> list[str]:
    """The group's rules, whatever its protocol: it reads every record of the log with the log's
    contents (a record read twice, after a rebalance, must read the same), and its committed
    offsets reach the end offsets and never moved backwards. Stops the members and the monitor."""
    problems: list[str] = []

    def group_done() -> bool:
        consumed = {(c.partition, c.offset) for m in members for c in m.snapshot()}
        read_all = all((p, o) in consumed for p in range(PARTITIONS) for o in range(ends[p]))
        return read_all and monitor.committed() == ends

    try:
        cluster.wait_until(group_done, timeout=90, what=f"group {group} to consume and commit up to the end offsets")
    except Exception as exc:
        problems.append(f"group {group} did not finish: {str(exc).splitlines()[0]}")
    for member in members:
        member.stop()
    monitor.stop()

    consumed: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
    redelivered[group] = 0
    for member in members:
        for c in member.snapshot():
            if (c.partition, c.offset) in consumed:
                redelivered[group] += 1
                if consumed[(c.partition, c.offset)] != (c.key, c.value):
                    problems.append(f"group {group}: partition {c.partition} offset {c.offset} read with two contents")
            consumed[(c.partition, c.offset)] = (c.key, c.value)
    for p, log in logs.items():
        missing = [r.offset for r in log if (p, r.offset) not in consumed]
        if missing:
            problems.append(f"group {group}: partition {p}: never read {len(missing)} records, offsets {missing[:10]}")
        wrong = [r.offset for r in log if (p, r.offset) in consumed and consumed[(p, r.offset)] != (r.key, r.value)]
        if wrong:
            problems.append(f"group {group}: partition {p}: read other contents than the log at offsets {wrong[:10]}")
    problems += monitor.backward_moves()
    final = monitor.committed()
    monitor.close()
    if final != ends:
        problems.append(f"group {group}: final committed offsets {final} != end offsets {ends}")
    return problems


def check_share_group(cluster: ProcessCluster, share: ShareReader, logs: dict[int, list[Record]]) -> list[str]:
    """Wait until the share group drained (every record delivered, the durable start offsets at
    the log end), stop it, and apply its rules (``support/share_workload.py``)."""
    problems: list[str] = []
    try:
        cluster.wait_until(lambda: share.drained(SHARE_GROUP, logs), timeout=120,
                           what="the share group to finish every record")
    except Exception as exc:
        problems.append(f"share group did not finish: {str(exc).splitlines()[0]}")
    share.stop_polling()
    problems += share.problems(SHARE_GROUP, logs)
    share.stop()
    return problems
