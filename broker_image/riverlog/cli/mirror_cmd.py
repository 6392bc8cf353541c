"""``riverlog mirror start|status|verify|stop``: move a live Kafka cluster's topics and consumer
groups to Riverlog with Apache Kafka's own MirrorMaker 2 (issue #19, docs/migration.md).

MirrorMaker 2 runs as three connectors on a Kafka Connect worker whose own cluster is the
target. ``start`` PUTs their configs through the Connect REST API and waits until they run;
``status`` shows, per mirrored partition, how far the copy is behind (the source connector's
committed source offsets, ``GET /connectors/<n>/offsets``, against the source's end offsets)
and, per group, whether its committed offsets have been translated onto the target (MM2's
checkpoints, read from ``<alias>.checkpoints.internal``); ``verify`` reads both clusters and
checks that every source record is on the target in order; ``stop`` deletes the connectors.
Everything but the connectors is read with Riverlog's own client, from both clusters.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..client.admin import AdminClient
from ..client.connect_rest import ConnectRest, ConnectRestError, ConnectUnreachable
from ..client.consumer import Consumer, ConsumerRecord
from ..client.errors import BrokerError, BrokerUnreachableError, ClientError
from ..client.offsets import EARLIEST, LATEST, list_offsets
from ..protocol.errors import ErrorCode
from ..security.client_config import ClientSecurity
from .client_common import EXIT_FAILURE, EXIT_OK, UsageError, client_security, parse_key_values, run_command
from .mirror_plan import (
    Checkpoint,
    Comparison,
    GroupStatus,
    MirrorOptions,
    PartitionStatus,
    RunningMirror,
    compare,
    connector_configs,
    connector_names,
    decode_checkpoint,
    mirrored_positions,
)
from .table import format_table

CONNECT_URL_ENV = "RIVERLOG_CONNECT_URL"
DEFAULT_CONNECT_URL = "http://localhost:8083"
T = TypeVar("T")


class MirrorError(ClientError):
    """An expected failure, already worded for people (one stderr line)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mirror = sub.add_parser(
        "mirror", help="move topics and consumer groups from a Kafka cluster with MirrorMaker 2",
        description="Run Apache Kafka's MirrorMaker 2 on a Kafka Connect worker of the target cluster, "
                    "follow it, verify the copy and stop it (docs/migration.md).")
    actions = mirror.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--connect-url", default=os.environ.get(CONNECT_URL_ENV) or DEFAULT_CONNECT_URL,
                        metavar="URL",
                        help=f"the Connect worker's REST API (default: ${CONNECT_URL_ENV} or {DEFAULT_CONNECT_URL})")
    common.add_argument("--name", default="mirror",
                        help="the mirror's name: its connectors are NAME-source, NAME-checkpoint, NAME-heartbeat")
    clusters = argparse.ArgumentParser(add_help=False)
    for side, what in (("source", "the Kafka cluster mirrored from"), ("target", "the cluster mirrored to")):
        clusters.add_argument(f"--{side}-command-config", metavar="FILE",
                              help=f"client properties (TLS, SASL) for this command's connections to {what}")

    p = actions.add_parser("start", parents=[common, clusters], help="create or update the mirror's connectors")
    p.add_argument("--source-bootstrap", required=True, metavar="HOST:PORT", help="the Kafka cluster to move from")
    p.add_argument("--target-bootstrap", required=True, metavar="HOST:PORT", help="the Riverlog cluster to move to")
    p.add_argument("--topics", required=True, metavar="REGEX",
                   help="topics to mirror: regexes, comma-separated, each matching whole names")
    p.add_argument("--groups", default=".*", metavar="REGEX",
                   help="consumer groups whose offsets to translate (default: every group)")
    p.add_argument("--source-alias", default="kafka",
                   help="the source's name; mirrored topics are ALIAS.TOPIC (default kafka)")
    p.add_argument("--target-alias", default="riverlog", help="the target's name (default riverlog)")
    p.add_argument("--identity-names", action="store_true",
                   help="keep topic names (IdentityReplicationPolicy) instead of ALIAS.TOPIC")
    p.add_argument("--exactly-once", action="store_true",
                   help="copy each record exactly once (the worker needs exactly.once.source.support=enabled)")
    p.add_argument("--sync-interval-seconds", type=int, default=60, metavar="N",
                   help="how often group offsets are checkpointed and translated (default 60)")
    p.add_argument("--refresh-interval-seconds", type=int, default=60, metavar="N",
                   help="how often new topics, groups and topic configs are picked up (default 60)")
    p.add_argument("--offset-lag-max", type=int, default=100, metavar="N",
                   help="records between offset syncs, the most a caught-up group re-reads (default 100)")
    p.add_argument("--replication-factor", type=int, default=-1, metavar="N",
                   help="of the topics MirrorMaker 2 creates (default -1: each cluster's default)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="more MirrorMaker 2 properties for all three connectors, such as "
                        "source.cluster.security.protocol=SASL_SSL (repeatable)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="how long to wait for Connect to answer and the connectors to run (default 120)")
    p.set_defaults(func=lambda a: run_command(lambda: _worded(a, _start(a))))

    p = actions.add_parser("status", parents=[common, clusters],
                           help="per partition, how far the copy is behind; per group, its translated offsets")
    _overrides(p)
    p.add_argument("--max-lag", type=int, default=0, metavar="N",
                   help="caught up: at most N records per partition not copied yet (default 0)")
    p.add_argument("--wait-caught-up", action="store_true", help="wait until caught up (or --timeout)")
    p.add_argument("--wait-translated", action="store_true",
                   help="wait until every group's committed offsets are translated onto the target")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="how long to wait (default 300)")
    p.set_defaults(func=lambda a: run_command(lambda: _worded(a, _status(a))))

    p = actions.add_parser("verify", parents=[common, clusters],
                           help="check that every source record is on the target, in order")
    _overrides(p)
    p.add_argument("--topics", metavar="REGEX", help="instead of the running mirror's topics (no Connect needed)")
    p.add_argument("--source-alias", help="with --topics: the source's alias (default kafka)")
    p.add_argument("--identity-names", action="store_true", help="with --topics: topic names were kept")
    p.set_defaults(func=lambda a: run_command(lambda: _worded(a, _verify(a))))

    p = actions.add_parser("stop", parents=[common], help="delete the mirror's connectors")
    p.set_defaults(func=lambda a: run_command(lambda: _worded(a, _stop(a))))


def _overrides(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source-bootstrap", metavar="HOST:PORT",
                   help="how this command reaches the source (default: the mirror's own setting)")
    p.add_argument("--target-bootstrap", metavar="HOST:PORT",
                   help="how this command reaches the target (default: the mirror's own setting)")


async def _worded(args: argparse.Namespace, command: Awaitable[int]) -> int:
    """Connect and broker failures as one sentence with the fix."""
    try:
        return await command
    except ConnectUnreachable as exc:
        raise MirrorError(
            f"cannot reach Kafka Connect at {args.connect_url} ({exc}): is the worker running? start one "
            f"with `riverlog-connect worker.properties` (docs/migration.md), or fix --connect-url") from None
    except ConnectRestError as exc:
        hint = ""
        if "Failed to find any class that implements Connector" in exc.message:
            hint = (": the worker has no MirrorMaker 2 plugin; run it from Riverlog's Connect image or with "
                    "connect-mirror on its class path")
        raise MirrorError(f"Kafka Connect at {args.connect_url} refused {exc}{hint}") from None
    except BrokerUnreachableError as exc:
        raise MirrorError(
            f"cannot reach {', '.join(exc.addresses)} ({exc.reason}): check --source-bootstrap and "
            f"--target-bootstrap (the address must be reachable from here as well as from the worker)") from None


def _security(path: str | None) -> ClientSecurity | None:
    return client_security(argparse.Namespace(command_config=path))


# --- start ------------------------------------------------------------------------------------


async def _start(args: argparse.Namespace) -> int:
    for option in ("sync_interval_seconds", "refresh_interval_seconds", "offset_lag_max"):
        if getattr(args, option) < 1:
            raise UsageError(f"--{option.replace('_', '-')} must be at least 1")
    options = MirrorOptions(
        source_bootstrap=args.source_bootstrap, target_bootstrap=args.target_bootstrap, topics=args.topics,
        groups=args.groups, source_alias=args.source_alias, target_alias=args.target_alias,
        identity=args.identity_names, exactly_once=args.exactly_once,
        sync_interval_seconds=args.sync_interval_seconds, refresh_interval_seconds=args.refresh_interval_seconds,
        offset_lag_max=args.offset_lag_max, replication_factor=args.replication_factor,
        extra=parse_key_values(args.config, "--config"))
    configs = connector_configs(args.name, options)
    source_connector = configs[connector_names(args.name)["source"]]
    view = RunningMirror.from_configs(source_connector, None)
    async with AdminClient(args.source_bootstrap, security=_security(args.source_command_config)) as source:
        topics = view.mirrored_topics(t.name for t in await source.list_topics())
    if not topics:
        raise MirrorError(f"no topic on {args.source_bootstrap} matches --topics {args.topics!r}: see "
                          f"`riverlog topics list --bootstrap-server {args.source_bootstrap}`")
    async with AdminClient(args.target_bootstrap, security=_security(args.target_command_config)) as target:
        await target.describe_cluster()  # reachable before MM2 is pointed at it
    deadline = time.monotonic() + args.timeout
    async with ConnectRest(args.connect_url) as rest:
        await _until_answers(rest, args.connect_url, deadline)
        for name, config in configs.items():
            await rest.put_config(name, config)
        statuses = await _until_running(rest, list(configs), deadline)
    print(format_table(["connector", "state", "tasks", "worker"], _connector_rows(statuses)))
    print(f"\nMirroring {len(topics)} topic(s) from {args.source_bootstrap} to {args.target_bootstrap}: "
          + ", ".join(f"{t} -> {view.target_topic(t)}" for t in topics))
    return EXIT_OK


async def _until_answers(rest: ConnectRest, url: str, deadline: float) -> None:
    """A worker just started answers only once it has joined its group and read its topics."""
    told = False
    while True:
        try:
            await rest.connectors()
            return
        except (ConnectUnreachable, ConnectRestError):
            if time.monotonic() > deadline:
                raise
        if not told:
            print(f"waiting for Kafka Connect at {url} to answer...", file=sys.stderr)
            told = True
        await asyncio.sleep(1.0)


def _task_failure(status: Mapping[str, Any]) -> str | None:
    for task in [status.get("connector", {}), *status.get("tasks", [])]:
        if task.get("state") == "FAILED":
            trace = str(task.get("trace") or "no trace").strip().splitlines()
            return f"{status.get('name')} {task.get('id', 'connector')}: {trace[0] if trace else 'failed'}"
    return None


def _running(status: Mapping[str, Any]) -> bool:
    tasks = status.get("tasks", [])
    # A checkpoint connector has no task until a group to checkpoint exists.
    needs_task = not str(status.get("name", "")).endswith("-checkpoint")
    return (status.get("connector", {}).get("state") == "RUNNING" and (tasks or not needs_task)
            and all(t.get("state") == "RUNNING" for t in tasks))


async def _until_running(rest: ConnectRest, names: Sequence[str], deadline: float) -> list[dict[str, Any]]:
    while True:
        statuses = [await rest.status(n) or {"name": n} for n in names]
        for status in statuses:
            failure = _task_failure(status)
            if failure:
                raise MirrorError(f"{failure} (the worker's log has the whole trace)")
        if all(_running(s) for s in statuses):
            return statuses
        if time.monotonic() > deadline:
            waiting = ", ".join(str(s.get("name")) for s in statuses if not _running(s))
            raise MirrorError(f"{waiting} not running yet; see `riverlog mirror status` and the worker's log")
        await asyncio.sleep(1.0)


def _connector_rows(statuses: Sequence[Mapping[str, Any]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for s in statuses:
        tasks = s.get("tasks", [])
        running = sum(1 for t in tasks if t.get("state") == "RUNNING")
        rows.append([s.get("name"), s.get("connector", {}).get("state", "MISSING"), f"{running}/{len(tasks)} running",
                     s.get("connector", {}).get("worker_id")])
    return rows


# --- status -----------------------------------------------------------------------------------


async def _mirror_view(args: argparse.Namespace, rest: ConnectRest) -> RunningMirror:
    names = connector_names(args.name)
    source = await rest.config(names["source"])
    if source is None:
        raise MirrorError(f"no mirror named {args.name!r} on {args.connect_url} (no connector {names['source']}): "
                          f"start one with `riverlog mirror start`, or give its --name")
    view = RunningMirror.from_configs(source, await rest.config(names["checkpoint"]))
    return RunningMirror(**{**view.__dict__,
                            "source_bootstrap": args.source_bootstrap or view.source_bootstrap,
                            "target_bootstrap": args.target_bootstrap or view.target_bootstrap})


async def _end_offsets(admin: AdminClient, topic: str, which: int) -> dict[int, int] | None:
    """Offsets of every partition of ``topic``; None when the topic is not there."""
    try:
        (info,) = await admin.describe_topics([topic])
    except BrokerError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return None
        raise
    found = await admin.list_partition_offsets(topic, dict.fromkeys((p.partition for p in info.partitions), which))
    return {p: o.offset for p, o in found.items()}


async def _group_offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    try:
        return {tp: c.offset for tp, c in (await admin.list_group_offsets(group)).items()}
    except BrokerError as exc:
        if exc.code == ErrorCode.GROUP_ID_NOT_FOUND:
            return {}
        raise


async def read_to_end(bootstrap: str, security: ClientSecurity | None, topic: str,
                      keep: Callable[[ConsumerRecord], T], *, stall_timeout: float = 60.0) -> dict[int, list[T]]:
    """``keep(record)`` of every record of every partition of ``topic``, from its first offset up
    to its end offset when the read began, in offset order."""
    async with Consumer(bootstrap, security=security, client_id="riverlog-mirror") as consumer:
        partitions = await consumer.assign(topic, start=EARLIEST)
        ends = await _end_offsets_of(consumer, topic, partitions)
        out: dict[int, list[T]] = {p: [] for p in partitions}
        last_progress = time.monotonic()
        while any(consumer.position(topic, p) < ends[p] for p in partitions):
            batch = await consumer.poll(500)
            if batch:
                last_progress = time.monotonic()
            for record in batch:
                if record.offset < ends[record.partition]:
                    out[record.partition].append(keep(record))
            if time.monotonic() - last_progress > stall_timeout:
                behind = {p: ends[p] - consumer.position(topic, p) for p in partitions}
                raise MirrorError(f"reading {topic} on {bootstrap} stalled with {behind} records left per partition")
        return out


async def _end_offsets_of(consumer: Consumer, topic: str, partitions: Sequence[int]) -> dict[int, int]:
    found = await list_offsets(consumer.cluster, topic, dict.fromkeys(partitions, LATEST))
    return {p: o.offset for p, o in found.items()}


async def _checkpoints(view: RunningMirror, security: ClientSecurity | None) -> dict[tuple[str, str, int], Checkpoint]:
    """The newest checkpoint per (group, target topic, partition)."""
    async with AdminClient(view.target_bootstrap, security=security) as admin:
        if await _end_offsets(admin, view.checkpoints_topic, LATEST) is None:
            return {}
    newest: dict[tuple[str, str, int], Checkpoint] = {}

    def decode(record: ConsumerRecord) -> Checkpoint | None:
        try:
            return decode_checkpoint(record.key or b"", record.value or b"")
        except ValueError:
            return None

    by_partition = await read_to_end(view.target_bootstrap, security, view.checkpoints_topic, decode)
    for records in by_partition.values():
        for cp in records:
            if cp is not None:
                newest[(cp.group, cp.topic, cp.partition)] = cp
    return newest


async def _gather(args: argparse.Namespace, rest: ConnectRest,
                  view: RunningMirror) -> tuple[list[dict[str, Any]], list[PartitionStatus], list[GroupStatus]]:
    names = connector_names(args.name)
    statuses = [await rest.status(n) or {"name": n} for n in names.values()]
    positions = mirrored_positions(await rest.offsets(names["source"]), view.source_alias)
    source_security, target_security = _security(args.source_command_config), _security(args.target_command_config)
    partitions: list[PartitionStatus] = []
    groups: list[GroupStatus] = []
    async with AdminClient(view.source_bootstrap, security=source_security) as source, \
            AdminClient(view.target_bootstrap, security=target_security) as target:
        topics = view.mirrored_topics(t.name for t in await source.list_topics())
        for topic in topics:
            starts = await _end_offsets(source, topic, EARLIEST) or {}
            ends = await _end_offsets(source, topic, LATEST) or {}
            target_ends = await _end_offsets(target, view.target_topic(topic), LATEST) or {}
            partitions += [PartitionStatus(topic, p, starts[p], ends[p], positions.get((topic, p)),
                                           view.target_topic(topic), target_ends.get(p)) for p in sorted(ends)]
        group_ids = view.mirrored_groups(g.group_id for g in await source.list_groups())
        committed = {g: await _group_offsets(source, g) for g in group_ids}
        wanted = set(topics)
        committed = {g: {tp: o for tp, o in c.items() if tp[0] in wanted} for g, c in committed.items()}
        translated = {g: await _group_offsets(target, g) for g, c in committed.items() if c}
    checkpoints = await _checkpoints(view, target_security) if translated else {}
    for group, offsets in sorted(committed.items()):
        for (topic, p), offset in sorted(offsets.items()):
            remote = view.target_topic(topic)
            groups.append(GroupStatus(group, topic, p, offset, checkpoints.get((group, remote, p)),
                                      translated.get(group, {}).get((remote, p))))
    return statuses, partitions, groups


def render_status(statuses: Sequence[Mapping[str, Any]], partitions: Sequence[PartitionStatus],
                  groups: Sequence[GroupStatus]) -> str:
    """The three tables of ``riverlog mirror status``."""
    out = [format_table(["connector", "state", "tasks", "worker"], _connector_rows(statuses)), ""]
    if partitions:
        out.append(format_table(
            ["topic", "partition", "source_end", "mirrored_to", "lag", "target_topic", "target_end"],
            [[s.topic, s.partition, s.source_end, s.mirrored, s.lag, s.target_topic, s.target_end]
             for s in partitions]))
    else:
        out.append("(no source topic matches the mirror's topics)")
    out.append("")
    if groups:
        out.append(format_table(
            ["group", "topic", "partition", "source_offset", "checkpointed", "translated_to", "target_offset",
             "state"],
            [[g.group, g.topic, g.partition, g.source_committed, *_checkpoint_cells(g.checkpoint), g.target_committed,
              g.state] for g in groups]))
    else:
        out.append("(no group of the mirror's groups has offsets committed on the mirrored topics)")
    return "\n".join(out)


def _checkpoint_cells(cp: Checkpoint | None) -> list[int | None]:
    return [None, None] if cp is None else [cp.upstream, cp.downstream]


def status_summary(statuses: Sequence[Mapping[str, Any]], partitions: Sequence[PartitionStatus],
                   groups: Sequence[GroupStatus], max_lag: int) -> tuple[bool, bool, str]:
    """(caught up, translated, a one-line summary)."""
    running = all(_running(s) for s in statuses)
    behind = [s for s in partitions if s.lag > max_lag]
    pending = [g for g in groups if g.state != "translated"]
    line = (f"connectors {'running' if running else 'NOT all running'}; "
            f"{sum(s.lag for s in partitions)} record(s) not copied yet, {len(behind)} partition(s) over --max-lag "
            f"{max_lag}; {len(groups) - len(pending)}/{len(groups)} group partition(s) translated")
    return running and not behind and bool(partitions), not pending, line


async def _status(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.timeout
    waiting = args.wait_caught_up or args.wait_translated
    # Without --wait-*, the exit code says whether the mirror has caught up.
    need_caught_up, need_translated = args.wait_caught_up or not waiting, args.wait_translated
    async with ConnectRest(args.connect_url) as rest:
        view = await _mirror_view(args, rest)
        checkpoint_config = await rest.config(connector_names(args.name)["checkpoint"]) or {}
        hold = 2 * float(checkpoint_config.get("emit.checkpoints.interval.seconds", 60)) + 2
        since: dict[tuple[object, ...], float] = {}  # settling translations: when first seen so
        while True:
            statuses, partitions, groups = await _gather(args, rest, view)
            now = time.monotonic()
            since = {g.key: since.get(g.key, now) for g in groups if g.state == "settling"}
            groups = [replace(g, settled=now - since[g.key] >= hold) if g.key in since else g for g in groups]
            for status in statuses:
                failure = _task_failure(status)
                if failure:
                    print(render_status(statuses, partitions, groups))
                    raise MirrorError(f"{failure} (the worker's log has the whole trace)")
            caught_up, translated, line = status_summary(statuses, partitions, groups, args.max_lag)
            done = (caught_up or not need_caught_up) and (translated or not need_translated)
            if done or not waiting or time.monotonic() > deadline:
                break
            print(f"waiting: {line}", file=sys.stderr)
            await asyncio.sleep(2.0)
    print(render_status(statuses, partitions, groups))
    print(f"\n{line}")
    if not done:
        wanted = " and ".join(w for w, on in (("caught up", need_caught_up), ("translated", need_translated)) if on)
        after = f" after {args.timeout:.0f}s" if waiting else ""
        print(f"riverlog: the mirror is not {wanted}{after}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


# --- verify -----------------------------------------------------------------------------------


def record_digest(record: ConsumerRecord) -> bytes:
    """What must be equal between a source record and its copy: key, value and headers (not the
    timestamp, which a LogAppendTime topic sets anew)."""
    h = hashlib.blake2b(digest_size=16)
    for part in (record.key, record.value):
        h.update(b"\x00" if part is None else b"\x01" + len(part).to_bytes(4, "big") + part)
    for name, value in record.headers:
        h.update(name.encode() + b"\x00" + (b"" if value is None else value) + b"\x00")
    return h.digest()


async def _verify(args: argparse.Namespace) -> int:
    if args.topics:
        if not (args.source_bootstrap and args.target_bootstrap):
            raise UsageError("--topics needs --source-bootstrap and --target-bootstrap")
        view = RunningMirror(args.source_alias or "kafka", "", args.source_bootstrap, args.target_bootstrap,
                             args.topics, "", "", "", args.identity_names)
    else:
        async with ConnectRest(args.connect_url) as rest:
            view = await _mirror_view(args, rest)
    source_security, target_security = _security(args.source_command_config), _security(args.target_command_config)
    async with AdminClient(view.source_bootstrap, security=source_security) as source:
        topics = view.mirrored_topics(t.name for t in await source.list_topics())
    if not topics:
        raise MirrorError(f"no topic on {view.source_bootstrap} matches {view.topics!r}")
    rows: list[list[object]] = []
    failed = 0
    for topic in topics:
        remote = view.target_topic(topic)
        async with AdminClient(view.target_bootstrap, security=target_security) as target:
            if await _end_offsets(target, remote, LATEST) is None:
                raise MirrorError(f"{remote} is not on {view.target_bootstrap}: has the mirror run? "
                                  f"see `riverlog mirror status`")
        expected = await read_to_end(view.source_bootstrap, source_security, topic, record_digest)
        copied = await read_to_end(view.target_bootstrap, target_security, remote, record_digest)
        if sorted(expected) != sorted(copied):
            raise MirrorError(f"{topic} has {len(expected)} partitions on the source, {remote} {len(copied)} "
                              f"on the target")
        for p in sorted(expected):
            result: Comparison = compare(expected[p], copied[p])
            failed += 0 if result.ok else 1
            rows.append([topic, p, remote, result.source_records, result.in_order, result.absent,
                         result.duplicates, result.target_only, "ok" if result.ok else "MISSING"])
    print(format_table(["topic", "partition", "target_topic", "source_records", "in_order", "absent", "duplicates",
                        "target_only", "result"], rows))
    if failed:
        print(f"riverlog: {failed} partition(s) lack source records on the target (or hold them out of order)",
              file=sys.stderr)
        return EXIT_FAILURE
    print(f"\nevery source record of {len(topics)} topic(s) is on the target, in order")
    return EXIT_OK


# --- stop -------------------------------------------------------------------------------------


async def _stop(args: argparse.Namespace) -> int:
    rows = []
    async with ConnectRest(args.connect_url) as rest:
        for name in connector_names(args.name).values():
            rows.append([name, "deleted" if await rest.delete(name) else "not there"])
    print(format_table(["connector", "result"], rows))
    return EXIT_OK
