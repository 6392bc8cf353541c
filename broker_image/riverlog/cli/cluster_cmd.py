"""``riverlog cluster describe``: brokers, the active controller and partition health at a glance."""

from __future__ import annotations

import argparse
from typing import Any

from ..client.admin import AdminClient, ClusterDescription, QuorumDescription
from ..client.cluster import TopicInfo
from .client_common import client_options, client_security, print_json, run_command
from .table import format_table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = client_options()
    cluster = sub.add_parser("cluster", help="describe the cluster",
                             description="Inspect a Riverlog (or any Kafka) cluster.")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    p = actions.add_parser("describe", parents=[common],
                           help="brokers, controller, and partitions with leader/ISR and under-replicated counts")
    p.add_argument("--include-internal", action="store_true", help="also list internal topics' partitions")
    p.add_argument("--problems-only", action="store_true",
                   help="list only under-replicated or offline partitions")
    p.set_defaults(func=lambda a: run_command(lambda: _describe(a)))


def partition_rows(topics: list[TopicInfo], live: set[int], problems_only: bool) -> list[dict[str, Any]]:
    """One row per partition with its health: offline (no live leader), under-replicated (ISR
    smaller than the replica set), or ok."""
    rows = []
    for topic in sorted(topics, key=lambda t: t.name):
        for p in sorted(topic.partitions, key=lambda p: p.partition):
            if p.leader < 0 or p.leader not in live:
                state = "offline"
            elif len(p.isr) < len(p.replicas):
                state = "under-replicated"
            else:
                state = "ok"
            if problems_only and state == "ok":
                continue
            rows.append({"topic": topic.name, "partition": p.partition, "leader": p.leader,
                         "leader_epoch": p.leader_epoch, "replicas": list(p.replicas), "isr": list(p.isr),
                         "state": state})
    return rows


def summary(cluster: ClusterDescription, rows: list[dict[str, Any]], total: int) -> dict[str, Any]:
    return {
        "cluster_id": cluster.cluster_id,
        "controller": cluster.controller_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in cluster.brokers],
        "partitions": total,
        "under_replicated": sum(r["state"] == "under-replicated" for r in rows),
        "offline": sum(r["state"] == "offline" for r in rows),
    }


def quorum_summary(quorum: QuorumDescription) -> dict[str, Any]:
    """Leader, epoch and each replica's lag behind the leader's log end (voters first)."""
    leader_end = max((r.log_end_offset for r in quorum.voters), default=0)
    replicas = [
        {"id": r.node_id, "role": ("leader" if r.node_id == quorum.leader_id else kind),
         "log_end_offset": r.log_end_offset, "lag": max(0, leader_end - r.log_end_offset)}
        for kind, group in (("voter", quorum.voters), ("observer", quorum.observers)) for r in group
    ]
    return {"leader": quorum.leader_id, "epoch": quorum.leader_epoch, "high_watermark": quorum.high_watermark,
            "replicas": replicas}


async def _describe(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap_server, security=client_security(args)) as admin:
        cluster = await admin.describe_cluster()
        topics = await admin.list_topics(include_internal=args.include_internal)
        quorum = await admin.describe_quorum()
    live = {b.node_id for b in cluster.brokers}
    all_rows = partition_rows(topics, live, problems_only=False)
    rows = [r for r in all_rows if r["state"] != "ok"] if args.problems_only else all_rows
    overview = summary(cluster, all_rows, len(all_rows))
    if quorum is not None:
        overview["quorum"] = quorum_summary(quorum)
    if args.output == "json":
        print_json({**overview, "partition_details": rows})
        return 0
    print(f"cluster {overview['cluster_id']}: {len(cluster.brokers)} broker(s), controller {cluster.controller_id}, "
          f"{overview['partitions']} partition(s), {overview['under_replicated']} under-replicated, "
          f"{overview['offline']} offline")
    print()
    print(format_table(["broker", "host", "port", "rack", "role"], [
        [b.node_id, b.host, b.port, b.rack or "-", "controller" if b.node_id == cluster.controller_id else "broker"]
        for b in cluster.brokers]))
    if quorum is not None:
        print()
        print(f"metadata quorum: leader {quorum.leader_id}, epoch {quorum.leader_epoch}, "
              f"high watermark {quorum.high_watermark}")
        print(format_table(["node", "role", "log end", "lag"], [
            [r["id"], r["role"], r["log_end_offset"], r["lag"]] for r in overview["quorum"]["replicas"]]))
    if rows:
        print()
        print(format_table(["topic", "partition", "leader", "epoch", "replicas", "isr", "state"], [
            [r["topic"], r["partition"], r["leader"], r["leader_epoch"], ",".join(map(str, r["replicas"])),
             ",".join(map(str, r["isr"])), r["state"]] for r in rows]))
    return 0
