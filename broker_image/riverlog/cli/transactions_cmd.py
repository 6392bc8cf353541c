"""``riverlog transactions list|describe|describe-producers|abort``: transactions and the
producers that write them, as Kafka's ``kafka-transactions.sh`` shows them.

``list`` asks every broker for the transactional ids it coordinates (ListTransactions);
``describe`` finds an id's coordinator (FindCoordinator, key type 1) and shows its state
(DescribeTransactions). ``describe-producers`` lists a partition's active producers with the start
offset of their open transaction (DescribeProducers), and ``abort`` ends a *hanging* transaction
on one partition - one its coordinator will never finish, which holds back read_committed
consumers - by having the partition's leader write an abort marker (WriteTxnMarkers), as Kafka's
``kafka-transactions.sh abort`` does. Only the Kafka protocol is used, so these commands work
against Apache Kafka too.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..client.admin import AdminClient, ProducerState, TransactionDescription
from ..client.errors import BrokerError, ClientError
from ..protocol.errors import ErrorCode
from .client_common import UsageError, client_options, client_security, print_json, run_command
from .table import format_table

# Kafka's transaction states, for --state's help and a friendlier check than the broker's.
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
          "PrepareEpochFence", "Dead")


class TransactionCommandError(ClientError):
    """An expected failure about a transaction, already worded for people (one stderr line)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = client_options()
    txns = sub.add_parser(
        "transactions", help="list and describe transactions, abort a hanging one",
        description="Inspect the transactions of a Riverlog (or any Kafka) cluster and abort hanging ones.")
    actions = txns.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    p = actions.add_parser("list", parents=[common], help="list transactional ids and their state")
    p.add_argument("--state", action="append", metavar="STATE",
                   help=f"only transactions in this state: {', '.join(STATES[:6])} (repeatable)")
    p.add_argument("--producer-id", action="append", type=int, metavar="ID",
                   help="only the transactional id with this producer id (repeatable)")
    p.add_argument("--duration-ms", type=int, metavar="MS",
                   help="only transactions open for longer than MS milliseconds")
    p.add_argument("--transactional-id-pattern", metavar="REGEX",
                   help="only transactional ids that this regular expression matches entirely (Java syntax)")
    p.set_defaults(func=lambda a: run_command(lambda: _list(a)))

    p = actions.add_parser("describe", parents=[common],
                           help="state, producer, timeout and partitions of a transactional id")
    p.add_argument("--transactional-id", required=True, action="append", metavar="ID",
                   help="the transactional id (repeatable)")
    p.set_defaults(func=lambda a: run_command(lambda: _describe(a)))

    p = actions.add_parser("describe-producers", parents=[common],
                           help="the active producers of a partition and where their open transactions start")
    p.add_argument("--topic", required=True, metavar="TOPIC")
    p.add_argument("--partition", required=True, type=int, metavar="N")
    p.set_defaults(func=lambda a: run_command(lambda: _describe_producers(a), topic=a.topic))

    p = actions.add_parser(
        "abort", parents=[common], help="abort a hanging transaction on one partition",
        description="Write an abort marker for a producer's open transaction on one partition, for a "
                    "hanging transaction its coordinator will never end. Name the transaction by its start "
                    "offset (see `riverlog transactions describe-producers`), or by producer id, producer "
                    "epoch and coordinator epoch.")
    p.add_argument("--topic", required=True, metavar="TOPIC")
    p.add_argument("--partition", required=True, type=int, metavar="N")
    p.add_argument("--start-offset", type=int, metavar="OFFSET",
                   help="the offset where the transaction's first record is on this partition")
    p.add_argument("--producer-id", type=int, metavar="ID", help="the transaction's producer id")
    p.add_argument("--producer-epoch", type=int, metavar="EPOCH", help="with --producer-id: its epoch")
    p.add_argument("--coordinator-epoch", type=int, metavar="EPOCH",
                   help="with --producer-id: the coordinator epoch of the producer's last marker "
                        "(-1, none yet, is sent as 0)")
    p.set_defaults(func=lambda a: run_command(lambda: _abort(a), topic=a.topic))


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(args.bootstrap_server, security=client_security(args))


def _time_text(ms: int) -> str | None:
    if ms < 0:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _partitions_text(partitions: Sequence[tuple[str, int]]) -> str:
    """``orders:0,1;audit:2``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items())) or "-"


# --- list -----------------------------------------------------------------------------------------


async def _list(args: argparse.Namespace) -> int:
    if args.duration_ms is not None and args.duration_ms < 0:
        raise UsageError("--duration-ms must be 0 or more")
    states = _known_states(args.state)
    async with _admin(args) as admin:
        try:
            listed = await admin.list_transactions(states, args.producer_id, args.duration_ms,
                                                   args.transactional_id_pattern)
        except BrokerError as exc:
            if exc.code == ErrorCode.UNSUPPORTED_VERSION:
                option = "--duration-ms" if "duration" in (exc.broker_message or "") else "--transactional-id-pattern"
                raise TransactionCommandError(
                    f"{exc.broker_message or exc}: leave out {option} with this broker") from None
            if exc.code == ErrorCode.INVALID_REQUEST and args.transactional_id_pattern is not None:
                raise TransactionCommandError(
                    f"the broker refused --transactional-id-pattern {args.transactional_id_pattern!r}: "
                    f"is it a valid regular expression?") from None
            raise
    if args.output == "json":
        for t in listed:
            print_json({"transactional_id": t.transactional_id, "state": t.state, "producer_id": t.producer_id,
                        "coordinator": t.coordinator})
    elif listed:
        print(format_table(["transactional_id", "state", "producer_id", "coordinator"],
                           [[t.transactional_id, t.state, t.producer_id, t.coordinator] for t in listed]))
    else:
        print("no transactions" + _filters_text(args), file=sys.stderr)
    return 0


def _known_states(states: Sequence[str] | None) -> list[str] | None:
    """The states as Kafka spells them (the broker matches names exactly); unknown ones refused."""
    if not states:
        return None
    by_lower = {s.lower(): s for s in STATES}
    out = []
    for state in states:
        known = by_lower.get(state.lower())
        if known is None:
            raise UsageError(f"--state {state!r} is not a transaction state: use one of {', '.join(STATES)}")
        out.append(known)
    return out


def _filters_text(args: argparse.Namespace) -> str:
    parts = []
    if args.state:
        parts.append(f"in state {', '.join(args.state)}")
    if args.producer_id:
        parts.append(f"with producer id {', '.join(map(str, args.producer_id))}")
    if args.duration_ms is not None:
        parts.append(f"open for more than {args.duration_ms} ms")
    if args.transactional_id_pattern is not None:
        parts.append(f"matching {args.transactional_id_pattern!r}")
    return (" " + " and ".join(parts)) if parts else ""


# --- describe -------------------------------------------------------------------------------------


def _transaction_document(t: TransactionDescription, now_ms: int) -> dict[str, Any]:
    return {
        "transactional_id": t.transactional_id,
        "state": t.state,
        "producer_id": t.producer_id,
        "producer_epoch": t.producer_epoch,
        "timeout_ms": t.timeout_ms,
        "start_time_ms": None if t.start_time_ms < 0 else t.start_time_ms,
        "duration_ms": _duration(t, now_ms),
        "partitions": [{"topic": topic, "partition": p} for topic, p in t.partitions],
        "coordinator": {"id": t.coordinator.node_id, "host": t.coordinator.host, "port": t.coordinator.port},
    }


# States in which a transaction is open (its markers not all written yet).
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


def _duration(t: TransactionDescription, now_ms: int) -> int | None:
    """How long the open transaction has run; None once it ended (the start time the coordinator
    keeps is then that of the last transaction)."""
    if t.start_time_ms < 0 or t.state not in OPEN_STATES:
        return None
    return max(0, now_ms - t.start_time_ms)


async def _describe(args: argparse.Namespace) -> int:
    ids = list(dict.fromkeys(args.transactional_id))
    described: list[TransactionDescription] = []
    async with _admin(args) as admin:
        for transactional_id in ids:
            try:
                described.append(await admin.describe_transaction(transactional_id))
            except BrokerError as exc:
                if exc.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise TransactionCommandError(
                        f"transactional id '{transactional_id}' does not exist (or has expired): "
                        f"see `riverlog transactions list`") from None
                raise
    now_ms = int(time.time() * 1000)
    if args.output == "json":
        for t in described:
            print_json(_transaction_document(t, now_ms))
        return 0
    print(format_table(
        ["transactional_id", "state", "producer_id", "producer_epoch", "timeout_ms", "start_time", "duration_ms",
         "coordinator", "partitions"],
        [[t.transactional_id, t.state, t.producer_id, t.producer_epoch, t.timeout_ms, _time_text(t.start_time_ms),
          _duration(t, now_ms), t.coordinator.node_id, _partitions_text(t.partitions)] for t in described],
    ))
    return 0


# --- describe-producers ---------------------------------------------------------------------------


def _producer_document(s: ProducerState) -> dict[str, Any]:
    return {
        "producer_id": s.producer_id,
        "producer_epoch": s.producer_epoch,
        "last_sequence": s.last_sequence,
        "last_timestamp_ms": None if s.last_timestamp < 0 else s.last_timestamp,
        "coordinator_epoch": s.coordinator_epoch,
        "transaction_start_offset": None if s.current_txn_start_offset < 0 else s.current_txn_start_offset,
    }


async def _describe_producers(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        producers = await admin.describe_producers(args.topic, args.partition)
    if args.output == "json":
        print_json({"topic": args.topic, "partition": args.partition,
                    "producers": [_producer_document(s) for s in producers]})
    elif producers:
        print(format_table(
            ["producer_id", "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch",
             "transaction_start_offset"],
            [[s.producer_id, s.producer_epoch, s.last_sequence, _time_text(s.last_timestamp), s.coordinator_epoch,
              None if s.current_txn_start_offset < 0 else s.current_txn_start_offset] for s in producers],
        ))
    else:
        print(f"no active producers on {args.topic} partition {args.partition}", file=sys.stderr)
    return 0


# --- abort ----------------------------------------------------------------------------------------


def _check_abort_options(args: argparse.Namespace) -> None:
    if args.partition < 0:
        raise UsageError("--partition must be 0 or more")
    named = [o for o, v in (("--producer-id", args.producer_id), ("--producer-epoch", args.producer_epoch),
                            ("--coordinator-epoch", args.coordinator_epoch)) if v is not None]
    if args.start_offset is not None:
        if named:
            raise UsageError(f"--start-offset identifies the transaction by itself: leave out {', '.join(named)}")
        if args.start_offset < 0:
            raise UsageError("--start-offset must be 0 or more")
        return
    if not named:
        raise UsageError("name the transaction to abort with --start-offset (see `riverlog transactions "
                         "describe-producers`), or with --producer-id, --producer-epoch and --coordinator-epoch")
    if len(named) < 3:
        missing = [o for o in ("--producer-id", "--producer-epoch", "--coordinator-epoch") if o not in named]
        raise UsageError(f"--producer-id, --producer-epoch and --coordinator-epoch go together: add "
                         f"{', '.join(missing)} (or use --start-offset)")


async def _abort(args: argparse.Namespace) -> int:
    _check_abort_options(args)
    topic, partition = args.topic, args.partition
    where = f"{topic} partition {partition}"
    see = f"`riverlog transactions describe-producers --topic {topic} --partition {partition}`"
    async with _admin(args) as admin:
        if args.start_offset is not None:
            producers = await admin.describe_producers(topic, partition)
            found = [s for s in producers if s.current_txn_start_offset == args.start_offset]
            if not found:
                starts = sorted(s.current_txn_start_offset for s in producers if s.current_txn_start_offset >= 0)
                open_text = (f"open transactions there start at {', '.join(map(str, starts))}" if starts
                             else "no transaction is open there")
                raise TransactionCommandError(
                    f"no open transaction starts at offset {args.start_offset} on {where} ({open_text}): see {see}")
            state = found[0]
            producer_id, producer_epoch = state.producer_id, state.producer_epoch
            coordinator_epoch = max(state.coordinator_epoch, 0)
        else:
            producer_id, producer_epoch = args.producer_id, args.producer_epoch
            coordinator_epoch = max(args.coordinator_epoch, 0)
        try:
            await admin.abort_transaction(topic, partition, producer_id, producer_epoch, coordinator_epoch)
        except BrokerError as exc:
            raise _abort_error(exc, where, see, producer_id, producer_epoch, coordinator_epoch) from None
    if args.output == "json":
        print_json({"topic": topic, "partition": partition, "producer_id": producer_id,
                    "producer_epoch": producer_epoch, "coordinator_epoch": coordinator_epoch, "aborted": True})
    else:
        print(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on {where}: "
              f"an abort marker was written (coordinator epoch {coordinator_epoch}).")
    return 0


def _abort_error(exc: BrokerError, where: str, see: str, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int) -> Exception:
    code = exc.code
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        return TransactionCommandError(
            f"producer {producer_id} on {where} has an epoch newer than {producer_epoch}: its transaction "
            f"was ended or fenced since; see its current state with {see}")
    if code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
        return TransactionCommandError(
            f"coordinator epoch {coordinator_epoch} is older than that of the last marker on {where}: use the "
            f"coordinator epoch {see} shows, or --start-offset")
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return TransactionCommandError(
            f"not allowed to write transaction markers on {where}: aborting needs the CLUSTER_ACTION "
            f"permission on the cluster")
    return exc
