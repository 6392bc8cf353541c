"""``riverlog groups list|describe|reset-offsets|delete``: consumer groups and their lag.

``describe`` shows what ``kafka-consumer-groups.sh --describe`` shows: the members (member id,
client id, host, assigned partitions) and, per partition, the committed offset, the log end
offset and the lag between them. For a KIP-848 consumer group (``group.protocol=consumer``) it
also shows the group and assignment epochs, the assignor, and each member's epoch, subscription
and target assignment beside the partitions it owns now; for a KIP-932 share group, its members
(who share partitions) and each share-partition's start offset and lag, as
``kafka-share-groups.sh --describe`` shows them. ``reset-offsets`` moves a group's committed offsets, which
Kafka allows only while the group has no members, so it refuses (before changing anything) when
consumers are still running.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..client.admin import AdminClient, CommittedOffset, GroupDescription, GroupMember
from ..client.errors import BrokerError, ClientError
from ..client.offsets import EARLIEST, LATEST
from ..protocol.errors import ErrorCode
from .client_common import EXIT_FAILURE, UsageError, client_options, client_security, error, print_json, run_command
from .table import format_table


class GroupCommandError(ClientError):
    """An expected failure about a group, already worded for people (one stderr line)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = client_options()
    groups = sub.add_parser("groups", help="list, describe, reset offsets of and delete consumer groups",
                            description="Manage consumer groups on a Riverlog (or any Kafka) cluster.")
    actions = groups.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    p = actions.add_parser("list", parents=[common], help="list consumer groups")
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only groups in this state: Stable, Empty, PreparingRebalance, CompletingRebalance "
                        "(repeatable)")
    p.set_defaults(func=lambda a: run_command(lambda: _list(a)))

    p = actions.add_parser("describe", parents=[common],
                           help="members, assignments, committed offsets and lag of groups")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", metavar="GROUP", help="the group to describe (repeatable)")
    which.add_argument("--all-groups", action="store_true", help="describe every group")
    p.set_defaults(func=lambda a: run_command(lambda: _describe(a)))

    p = actions.add_parser("reset-offsets", parents=[common],
                           help="move the committed offsets of a group that has no active members")
    p.add_argument("--group", required=True, metavar="GROUP")
    p.add_argument("--topic", required=True, action="append", metavar="TOPIC[:P,P...]",
                   help="a topic, or some of its partitions (repeatable)")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="to the first offset still in the log")
    to.add_argument("--to-latest", action="store_true", help="to the log end offset (skip everything)")
    to.add_argument("--to-offset", type=int, metavar="N", help="to offset N (kept within the log's range)")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="by N from the committed offset (negative: back; kept within the log's range)")
    p.add_argument("--dry-run", action="store_true", help="show the new offsets without committing them")
    p.set_defaults(func=lambda a: run_command(lambda: _reset(a), topic=_first_topic(a.topic)))

    p = actions.add_parser("delete", parents=[common], help="delete empty groups and their committed offsets")
    p.add_argument("--group", required=True, action="append", metavar="GROUP", help="the group (repeatable)")
    p.set_defaults(func=lambda a: run_command(lambda: _delete(a)))


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(args.bootstrap_server, security=client_security(args))


def _first_topic(specs: Sequence[str] | None) -> str | None:
    return specs[0].partition(":")[0] if specs else None


def _group_error(exc: BrokerError, group: str) -> GroupCommandError:
    """Kafka's group error codes, in words, with what to do next."""
    code = exc.code
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return GroupCommandError(f"group '{group}' does not exist: see `riverlog groups list`")
    if code in (ErrorCode.NON_EMPTY_GROUP, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS):
        return GroupCommandError(
            f"group '{group}' has active members: stop its consumers first "
            f"(see `riverlog groups describe --group {group}`)"
        )
    if code == ErrorCode.INVALID_GROUP_ID:
        return GroupCommandError(f"'{group}' is not a valid group id")
    return GroupCommandError(str(exc))


def _members_text(member: GroupMember) -> str:
    """``orders:0,1;audit:2`` - a member's partitions, grouped by topic."""
    return _partitions_text(member.assignment)


def _partitions_text(partitions: Sequence[tuple[str, int]] | None) -> str:
    if partitions is None:
        return "?"
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items())) or "-"


# --- list -----------------------------------------------------------------------------------------


async def _list(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        groups = await admin.list_groups(args.state)
    if args.output == "json":
        for g in groups:
            print_json({"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type,
                        "type": g.group_type, "coordinator": g.coordinator})
    elif groups:
        print(format_table(["group", "state", "protocol_type", "type"],
                           [[g.group_id, g.state, g.protocol_type or None, g.group_type] for g in groups]))
    else:
        print("no consumer groups" + (f" in state {', '.join(args.state)}" if args.state else ""), file=sys.stderr)
    return 0


# --- describe -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: CommittedOffset | None
    log_end_offset: int | None
    member: GroupMember | None
    # A share group's share-partition: its start offset stands in ``committed``, and its lag is
    # the broker's (records up to the high watermark not yet acknowledged or archived, which
    # need not be contiguous), None where the broker did not compute it.
    share_lag: int | None = None
    shared: bool = False

    @property
    def lag(self) -> int | None:
        if self.shared:
            return self.share_lag
        if self.committed is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.committed.offset


async def _log_end_offsets(admin: AdminClient, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Log end offsets (high watermarks) by partition; a topic that is gone is left out."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out: dict[tuple[str, int], int] = {}
    for topic, parts in sorted(by_topic.items()):
        try:
            ends = await admin.list_partition_offsets(topic, dict.fromkeys(parts, LATEST))
        except BrokerError as exc:
            if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                continue  # offsets committed for a topic deleted since: no end to compare with
            raise
        out.update({(topic, p): o.offset for p, o in ends.items()})
    return out


async def _describe_one(admin: AdminClient, group_id: str) -> tuple[GroupDescription, list[PartitionLag]]:
    try:
        group = await admin.describe_group(group_id)
        if group.group_type == "share":
            return group, await _share_rows(admin, group_id)
        committed = await admin.list_group_offsets(group_id)
    except BrokerError as exc:
        raise _group_error(exc, group_id) from None
    owner: dict[tuple[str, int], GroupMember] = {}
    for m in group.members:
        for tp in m.assignment or ():
            owner[tp] = m
    keys = sorted(set(committed) | set(owner))
    ends = await _log_end_offsets(admin, keys)
    rows = [PartitionLag(t, p, committed.get((t, p)), ends.get((t, p)), owner.get((t, p))) for t, p in keys]
    return group, rows


async def _share_rows(admin: AdminClient, group_id: str) -> list[PartitionLag]:
    """A share group's share-partitions: start offset, log end offset and lag (members share
    partitions, so no single member is named)."""
    offsets = await admin.share_group_offsets(group_id)
    ends = await _log_end_offsets(admin, offsets)
    return [PartitionLag(t, p, CommittedOffset(t, p, start), ends.get((t, p)), None,
                         share_lag=lag if lag >= 0 else None, shared=True)
            for (t, p), (start, lag) in sorted(offsets.items())]


def _group_document(group: GroupDescription, rows: Sequence[PartitionLag]) -> dict[str, Any]:
    lags = [r.lag for r in rows if r.lag is not None]
    document: dict[str, Any] = {
        "group": group.group_id,
        "type": group.group_type,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol,
        "coordinator": {"id": group.coordinator.node_id, "host": group.coordinator.host,
                        "port": group.coordinator.port},
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": None if m.assignment is None else [
                    {"topic": t, "partition": p} for t, p in m.assignment
                ],
            }
            for m in group.members
        ],
        "offsets": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "committed_offset": None if r.committed is None else r.committed.offset,
                "log_end_offset": r.log_end_offset,
                "lag": r.lag,
                "metadata": None if r.committed is None else r.committed.metadata,
                "member_id": None if r.member is None else r.member.member_id,
            }
            for r in rows
        ],
        "total_lag": sum(lags) if lags else None,
    }
    if group.group_type == "share":
        document.update(group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                        assignor=group.assignor)
        for entry, m in zip(document["members"], group.members, strict=True):
            entry.update(member_epoch=m.member_epoch, subscribed_topics=list(m.subscribed_topics))
        for entry in document["offsets"]:
            entry.update(start_offset=entry.pop("committed_offset"), member_id=None)
    if group.group_type == "consumer":
        # KIP-848's epochs: the group's, its target assignment's and each member's (a member
        # whose epoch is behind the group's is still moving to its target).
        document.update(group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                        assignor=group.assignor)
        for entry, m in zip(document["members"], group.members, strict=True):
            entry.update(
                member_epoch=m.member_epoch, rack_id=m.rack_id,
                subscribed_topics=list(m.subscribed_topics), subscribed_regex=m.subscribed_regex,
                target_assignment=[{"topic": t, "partition": p} for t, p in m.target_assignment or ()],
            )
    return document


def _print_group(group: GroupDescription, rows: Sequence[PartitionLag]) -> None:
    coordinator = group.coordinator
    if group.group_type == "share":
        _print_share_group(group, rows)
        return
    if group.group_type == "consumer":
        print(f"Group: {group.group_id}  Type: consumer  State: {group.state}  Members: {len(group.members)}  "
              f"Group epoch: {group.group_epoch}  Assignment epoch: {group.assignment_epoch}  "
              f"Assignor: {group.assignor}  Coordinator: {coordinator.node_id} ({coordinator.address})")
    else:
        protocol = "/".join(x for x in (group.protocol_type, group.protocol) if x) or "-"
        print(f"Group: {group.group_id}  State: {group.state}  Protocol: {protocol}  Members: {len(group.members)}  "
              f"Coordinator: {coordinator.node_id} ({coordinator.address})")
    if group.members and group.group_type == "consumer":
        print()
        print(format_table(
            ["member_id", "instance_id", "client_id", "host", "epoch", "subscription", "partitions", "target"],
            [[m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_epoch,
              m.subscribed_regex or ",".join(m.subscribed_topics), _members_text(m),
              _partitions_text(m.target_assignment)] for m in group.members],
        ))
    elif group.members:
        print()
        print(format_table(
            ["member_id", "instance_id", "client_id", "host", "partitions"],
            [[m.member_id, m.group_instance_id, m.client_id, m.client_host, _members_text(m)] for m in group.members],
        ))
    print()
    if not rows:
        print("(no committed offsets and no assigned partitions)")
        return
    print(format_table(
        ["topic", "partition", "current_offset", "log_end_offset", "lag", "member_id", "host", "client_id"],
        [
            [r.topic, r.partition, None if r.committed is None else r.committed.offset, r.log_end_offset, r.lag,
             None if r.member is None else r.member.member_id, None if r.member is None else r.member.client_host,
             None if r.member is None else r.member.client_id]
            for r in rows
        ],
    ))


def _print_share_group(group: GroupDescription, rows: Sequence[PartitionLag]) -> None:
    coordinator = group.coordinator
    print(f"Group: {group.group_id}  Type: share  State: {group.state}  Members: {len(group.members)}  "
          f"Group epoch: {group.group_epoch}  Assignment epoch: {group.assignment_epoch}  "
          f"Assignor: {group.assignor}  Coordinator: {coordinator.node_id} ({coordinator.address})")
    if group.members:
        print()
        print(format_table(
            ["member_id", "client_id", "host", "epoch", "subscription", "partitions"],
            [[m.member_id, m.client_id, m.client_host, m.member_epoch, ",".join(m.subscribed_topics),
              _members_text(m)] for m in group.members],
        ))
    print()
    if not rows:
        print("(no share-partitions yet)")
        return
    print(format_table(
        ["topic", "partition", "start_offset", "log_end_offset", "lag"],
        [[r.topic, r.partition, None if r.committed is None else r.committed.offset, r.log_end_offset, r.lag]
         for r in rows],
    ))


async def _describe(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        if args.all_groups:
            group_ids = [g.group_id for g in await admin.list_groups()]
            if not group_ids:
                print("no consumer groups", file=sys.stderr)
                return 0
        else:
            group_ids = list(dict.fromkeys(args.group))
        described = [await _describe_one(admin, g) for g in group_ids]
    for i, (group, rows) in enumerate(described):
        if args.output == "json":
            print_json(_group_document(group, rows))
        else:
            if i:
                print()
            _print_group(group, rows)
    return 0


# --- reset-offsets --------------------------------------------------------------------------------


def _parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``orders`` (every partition) or ``orders:0,2``."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise UsageError(f"--topic expects TOPIC or TOPIC:P[,P...], got {spec!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise UsageError(f"--topic {spec!r}: partitions must be numbers, as in {topic}:0,2") from None
    if not partitions or partitions[0] < 0:
        raise UsageError(f"--topic {spec!r}: give partition numbers, as in {topic}:0,2")
    return topic, partitions


async def _reset(args: argparse.Namespace) -> int:
    specs = [_parse_topic_spec(s) for s in args.topic]
    async with _admin(args) as admin:
        try:
            group = await admin.describe_group(args.group)
        except BrokerError as exc:
            if exc.code != ErrorCode.GROUP_ID_NOT_FOUND:
                raise _group_error(exc, args.group) from None
            group = None  # committing creates the group, as Kafka's tool allows
        if group is not None and not group.is_empty:
            raise GroupCommandError(
                f"group '{args.group}' has {len(group.members)} active member(s) (state {group.state}): "
                f"offsets can only be reset while the group is empty; stop its consumers first "
                f"(see `riverlog groups describe --group {args.group}`)"
            )
        targets: list[tuple[str, int]] = []
        for topic, partitions in specs:
            (info,) = await admin.describe_topics([topic])
            existing = [p.partition for p in info.partitions]
            missing = sorted(set(partitions or ()) - set(existing))
            if missing:
                raise UsageError(f"topic '{topic}' has no partition {', '.join(map(str, missing))} "
                                 f"(it has {len(existing)})")
            targets += [(topic, p) for p in (partitions if partitions is not None else existing)]
        targets = sorted(set(targets))
        try:
            committed = await admin.list_group_offsets(args.group, sorted({t for t, _ in targets}))
        except BrokerError as exc:
            raise _group_error(exc, args.group) from None
        earliest: dict[tuple[str, int], int] = {}
        latest: dict[tuple[str, int], int] = {}
        for topic in sorted({t for t, _ in targets}):
            parts = [p for t, p in targets if t == topic]
            firsts = await admin.list_partition_offsets(topic, dict.fromkeys(parts, EARLIEST))
            lasts = await admin.list_partition_offsets(topic, dict.fromkeys(parts, LATEST))
            earliest.update({(topic, p): o.offset for p, o in firsts.items()})
            latest.update({(topic, p): o.offset for p, o in lasts.items()})

        new: dict[tuple[str, int], int] = {}
        for tp in targets:
            new[tp] = _new_offset(args, tp, committed.get(tp), earliest[tp], latest[tp])
        if not args.dry_run:
            try:
                await admin.alter_group_offsets(args.group, new)
            except BrokerError as exc:
                raise _group_error(exc, args.group) from None

    rows = [(t, p, None if committed.get((t, p)) is None else committed[(t, p)].offset, new[(t, p)])
            for t, p in targets]
    if args.output == "json":
        print_json({
            "group": args.group,
            "dry_run": bool(args.dry_run),
            "offsets": [{"topic": t, "partition": p, "previous_offset": old, "new_offset": n} for t, p, old, n in rows],
        })
    else:
        verb = "would be reset (dry run, nothing committed)" if args.dry_run else "reset"
        print(f"Offsets of group {args.group} {verb}:")
        print(format_table(["topic", "partition", "previous_offset", "new_offset"], [list(r) for r in rows]))
    return 0


def _new_offset(
    args: argparse.Namespace, tp: tuple[str, int], current: CommittedOffset | None, earliest: int, latest: int
) -> int:
    topic, partition = tp
    if args.to_earliest:
        return earliest
    if args.to_latest:
        return latest
    if args.to_offset is not None:
        wanted = args.to_offset
    else:
        if current is None:
            raise UsageError(
                f"group '{args.group}' has no committed offset for {topic} partition {partition} to shift from: "
                f"use --to-earliest, --to-latest or --to-offset"
            )
        wanted = current.offset + args.shift_by
    # Like Kafka's tool: an offset outside the log would only make consumers reset on their own,
    # so keep it within [log start, log end] and say so.
    clamped = min(max(wanted, earliest), latest)
    if clamped != wanted:
        bound = "log end offset" if wanted > latest else "log start offset"
        print(f"riverlog: note: {topic} partition {partition}: offset {wanted} is outside the log, "
              f"using the {bound} {clamped}", file=sys.stderr)
    return clamped


# --- delete ---------------------------------------------------------------------------------------


async def _delete(args: argparse.Namespace) -> int:
    group_ids = list(dict.fromkeys(args.group))
    async with _admin(args) as admin:
        results = await admin.delete_groups(group_ids)
    failed = 0
    for group_id in group_ids:
        code = results[group_id]
        if code == ErrorCode.NONE:
            if args.output == "json":
                print_json({"group": group_id, "deleted": True})
            else:
                print(f"Deleted group {group_id}.")
            continue
        failed += 1
        message = str(_group_error(BrokerError(code, f"delete group '{group_id}'"), group_id))
        if args.output == "json":
            print_json({"group": group_id, "deleted": False, "error": _code_name(code), "message": message})
        error(message)
    return EXIT_FAILURE if failed else 0


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
