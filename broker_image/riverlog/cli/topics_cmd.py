"""``riverlog topics create|list|describe|alter|delete``: topic administration."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..client.admin import AdminClient
from ..client.cluster import TopicInfo
from ..client.errors import ClientError
from ..client.offsets import EARLIEST, LATEST, list_offsets
from ..protocol.errors import KafkaError
from .client_common import UsageError, client_options, client_security, parse_key_values, print_json, run_command
from .table import format_table

# ListOffsets in `describe` is a nicety: do not let a leaderless partition stall it for long.
_OFFSETS_TIMEOUT = 5.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = client_options()
    topics = sub.add_parser("topics", help="create, list, describe, alter and delete topics",
                            description="Manage topics on a Riverlog (or any Kafka) cluster.")
    actions = topics.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    p = actions.add_parser("create", parents=[common], help="create a topic")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partitions", type=int, default=-1, metavar="N",
                   help="number of partitions (default: the broker's num.partitions)")
    p.add_argument("--replication-factor", type=int, default=-1, metavar="R",
                   help="replicas per partition (default: the broker's default.replication.factor)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="a topic config such as retention.ms=86400000 (repeatable)")
    p.set_defaults(func=lambda a: run_command(lambda: _create(a), topic=a.name))

    p = actions.add_parser("list", parents=[common], help="list topics")
    p.add_argument("--include-internal", action="store_true", help="also list internal topics")
    p.set_defaults(func=lambda a: run_command(lambda: _list(a)))

    p = actions.add_parser("describe", parents=[common],
                           help="partitions, leaders, replicas, offsets and configs of a topic")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=lambda a: run_command(lambda: _describe(a), topic=a.name))

    p = actions.add_parser("alter", parents=[common], help="add partitions or change configs")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partitions", type=int, metavar="N", help="new (higher) partition count")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="set a topic config (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="KEY",
                   help="remove a topic config override, back to the default (repeatable)")
    p.set_defaults(func=lambda a: run_command(lambda: _alter(a), topic=a.name))

    p = actions.add_parser("delete", parents=[common], help="delete a topic and its data")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=lambda a: run_command(lambda: _delete(a), topic=a.name))


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(args.bootstrap_server, security=client_security(args))


# --- create ---------------------------------------------------------------------------------------


async def _create(args: argparse.Namespace) -> int:
    configs = parse_key_values(args.config, "--config")
    if args.partitions == 0 or args.partitions < -1:
        raise UsageError("--partitions must be at least 1")
    if args.replication_factor == 0 or args.replication_factor < -1:
        raise UsageError("--replication-factor must be at least 1")
    async with _admin(args) as admin:
        created = await admin.create_topic(args.name, args.partitions, args.replication_factor, configs)
    partitions = created.num_partitions if created.num_partitions >= 0 else args.partitions
    replication = created.replication_factor if created.replication_factor >= 0 else args.replication_factor
    if args.output == "json":
        print_json({
            "name": created.name,
            "topic_id": str(created.topic_id),
            "partitions": partitions,
            "replication_factor": replication,
            "configs": configs,
        })
    else:
        print(format_table(["topic", "partitions", "replication_factor", "topic_id"],
                           [[created.name, partitions, replication, created.topic_id]]))
    return 0


# --- list -----------------------------------------------------------------------------------------


async def _list(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        topics = await admin.list_topics(include_internal=args.include_internal)
    if args.output == "json":
        for t in topics:
            print_json(_topic_summary(t))
    elif topics:
        print(format_table(
            ["topic", "partitions", "replication_factor", "topic_id"],
            [[t.name, len(t.partitions), t.replication_factor, t.topic_id] for t in topics],
        ))
    else:
        print("no topics: create one with `riverlog topics create NAME`", file=sys.stderr)
    return 0


def _topic_summary(t: TopicInfo) -> dict[str, Any]:
    return {
        "name": t.name,
        "topic_id": str(t.topic_id),
        "partitions": len(t.partitions),
        "replication_factor": t.replication_factor,
        "internal": t.is_internal,
    }


# --- describe -------------------------------------------------------------------------------------


async def _describe(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        (topic,) = await admin.describe_topics([args.name])
        configs = await admin.describe_configs(args.name)
        starts, ends = await _offsets(admin, topic)
    overrides = {c.name: c.value for c in configs if c.is_topic_override}
    if args.output == "json":
        document = _topic_summary(topic)
        document["partitions"] = [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
                "start_offset": starts.get(p.partition),
                "end_offset": ends.get(p.partition),
            }
            for p in topic.partitions
        ]
        document["configs"] = {c.name: c.value for c in configs}
        document["config_overrides"] = overrides
        print_json(document)
        return 0
    print(f"Topic: {topic.name}  TopicId: {topic.topic_id}  Partitions: {len(topic.partitions)}  "
          f"ReplicationFactor: {topic.replication_factor}")
    print("Configs: " + (", ".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "(all defaults)"))
    print()
    print(format_table(
        ["partition", "leader", "replicas", "isr", "offline", "start_offset", "end_offset"],
        [
            [p.partition, p.leader if p.leader >= 0 else None, list(p.replicas), list(p.isr),
             list(p.offline_replicas), starts.get(p.partition), ends.get(p.partition)]
            for p in topic.partitions
        ],
    ))
    return 0


async def _offsets(admin: AdminClient, topic: TopicInfo) -> tuple[dict[int, int], dict[int, int]]:
    """Start and end offsets per partition; partitions whose leader cannot answer are left out."""
    led = [p.partition for p in topic.partitions if p.leader >= 0]
    if not led:
        return {}, {}
    try:
        starts = await list_offsets(admin.cluster, topic.name, dict.fromkeys(led, EARLIEST), timeout=_OFFSETS_TIMEOUT)
        ends = await list_offsets(admin.cluster, topic.name, dict.fromkeys(led, LATEST), timeout=_OFFSETS_TIMEOUT)
    except (KafkaError, ClientError):
        return {}, {}
    return {p: o.offset for p, o in starts.items()}, {p: o.offset for p, o in ends.items()}


# --- alter ----------------------------------------------------------------------------------------


async def _alter(args: argparse.Namespace) -> int:
    to_set = parse_key_values(args.config, "--config")
    to_delete = list(args.delete_config or [])
    if args.partitions is None and not to_set and not to_delete:
        raise UsageError("nothing to change: give --partitions N, --config KEY=VALUE or --delete-config KEY")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise UsageError(f"cannot both set and delete {', '.join(both)}")
    async with _admin(args) as admin:
        # Fail on an unknown topic before changing anything.
        (topic,) = await admin.describe_topics([args.name])
        before: dict[str, str | None] = {}
        if to_set or to_delete:
            before = {c.name: c.value for c in await admin.describe_configs(args.name, [*to_set, *to_delete])}
        if args.partitions is not None and args.partitions != len(topic.partitions):
            await admin.create_partitions(args.name, args.partitions)
        if to_set or to_delete:
            await admin.alter_configs(args.name, set=to_set, delete=to_delete)
    partitions = args.partitions if args.partitions is not None else len(topic.partitions)
    if args.output == "json":
        print_json({"name": args.name, "partitions": partitions, "set_configs": to_set,
                    "deleted_configs": to_delete})
    else:
        changes: list[list[object]] = []
        if args.partitions is not None:
            changes.append(["partitions", len(topic.partitions), partitions])
        changes += [[k, before.get(k), v] for k, v in to_set.items()]
        changes += [[k, before.get(k), "(default)"] for k in to_delete]
        print(f"Altered topic {args.name}:")
        print(format_table(["change", "before", "after"], changes))
    return 0


# --- delete ---------------------------------------------------------------------------------------


async def _delete(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        await admin.delete_topic(args.name)
    if args.output == "json":
        print_json({"name": args.name, "deleted": True})
    else:
        print(f"Deleted topic {args.name}.")
    return 0
