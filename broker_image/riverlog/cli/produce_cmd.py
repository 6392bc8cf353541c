"""``riverlog produce TOPIC``: one record per line of standard input."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import BinaryIO

from ..client.producer import COMPRESSION_NAMES, Producer, RecordMetadata, parse_acks
from .client_common import (
    Progress,
    Rate,
    UsageError,
    client_options,
    client_security,
    parse_key_values,
    print_json,
    run_command,
)
from .table import format_table

_READ_CHUNK = 256 * 1024
# How long an unknown topic may take to appear (a topic just created elsewhere in the cluster):
# short, so that a typo fails fast.
_TOPIC_WAIT = 2.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "produce", parents=[client_options()], help="send lines of standard input as records",
        description="Send each line of standard input to TOPIC as one record. With --key-separator, "
                    "each line is KEY<separator>VALUE.",
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--key-separator", metavar="SEP",
                   help="split each line at the first SEP into key and value (e.g. ':')")
    p.add_argument("--header", action="append", metavar="KEY=VALUE",
                   help="a header added to every record (repeatable)")
    p.add_argument("--acks", default="all", metavar="all|1|0",
                   help="all (default): every in-sync replica; 1: the leader only; 0: no acknowledgement")
    p.add_argument("--compression", default="none", choices=sorted(COMPRESSION_NAMES),
                   help="compress record batches (default none)")
    p.add_argument("--partition", type=int, metavar="P",
                   help="send every record to partition P (default: by key hash, or round-robin)")
    p.add_argument("--linger-ms", type=float, default=5.0, metavar="MS",
                   help="wait up to MS for more records to batch (default 5)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=lambda a: run_command(lambda: _produce(a), topic=a.topic))


@dataclass
class _PartitionSummary:
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None


@dataclass
class _Stats:
    """Acknowledgements tallied from the records' futures (so no list of futures is kept)."""

    sent: Rate = field(default_factory=Rate)
    acked: int = 0
    partitions: dict[int, _PartitionSummary] = field(default_factory=dict)
    error: BaseException | None = None

    def on_done(self, future: asyncio.Future[RecordMetadata]) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            self.error = self.error or exc
            return
        meta = future.result()
        self.acked += 1
        summary = self.partitions.setdefault(meta.partition, _PartitionSummary())
        summary.records += 1
        if meta.offset >= 0:
            if summary.first_offset is None or meta.offset < summary.first_offset:
                summary.first_offset = meta.offset
            if summary.last_offset is None or meta.offset > summary.last_offset:
                summary.last_offset = meta.offset

    def status(self) -> str:
        return f"produced {self.acked} records ({self.sent.per_second():.0f}/s)"


async def _lines(stream: BinaryIO) -> AsyncIterator[bytes]:
    """Lines of ``stream`` without their line ending; reads happen in a thread so that a slow
    or interactive stdin never blocks the event loop (and works for files, pipes and ttys)."""
    read = getattr(stream, "read1", stream.read)
    pending = b""
    while True:
        chunk = await asyncio.to_thread(read, _READ_CHUNK)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.removesuffix(b"\r")
    if pending:
        yield pending.removesuffix(b"\r")


async def _produce(args: argparse.Namespace) -> int:
    headers = [(k, v.encode()) for k, v in parse_key_values(args.header, "--header").items()]
    try:
        acks = parse_acks(args.acks)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    separator = args.key_separator.encode() if args.key_separator else None
    if args.key_separator == "":
        raise UsageError("--key-separator cannot be empty")
    stats = _Stats()
    producer = Producer(args.bootstrap_server, security=client_security(args), acks=acks,
                        compression=args.compression, linger_ms=args.linger_ms,
                        max_block=_TOPIC_WAIT)
    async with producer:
        # Resolve the topic before reading input, so a typo fails at once, not after the first line.
        info = await producer.topic_info(args.topic)
        if args.partition is not None and info.partition(args.partition) is None:
            raise UsageError(f"topic '{args.topic}' has no partition {args.partition} "
                             f"(it has {len(info.partitions)})")
        async with Progress(stats.status, enabled=not args.quiet):
            line_number = 0
            async for line in _lines(sys.stdin.buffer):
                line_number += 1
                key: bytes | None = None
                value = line
                if separator is not None:
                    key, found, value = line.partition(separator)
                    if not found:
                        await producer.flush()  # the lines before this one still go out
                        raise UsageError(
                            f"line {line_number} has no key separator {args.key_separator!r}: with "
                            f"--key-separator every line must be KEY{args.key_separator}VALUE"
                        )
                future = await producer.send(args.topic, value, key, headers, partition=args.partition)
                future.add_done_callback(stats.on_done)
                stats.sent.count += 1
                if stats.error is not None:
                    break
            await producer.flush()
    if stats.error is not None:
        raise stats.error
    _report(args, stats)
    return 0


def _report(args: argparse.Namespace, stats: _Stats) -> None:
    rows = sorted(stats.partitions.items())
    if args.output == "json":
        for partition, s in rows:
            print_json({"topic": args.topic, "partition": partition, "records": s.records,
                        "first_offset": s.first_offset, "last_offset": s.last_offset})
        return
    if rows:
        print(format_table(
            ["partition", "records", "first_offset", "last_offset"],
            [[p, s.records, s.first_offset, s.last_offset] for p, s in rows],
        ))
    if not args.quiet:
        print(f"produced {stats.acked} records to {args.topic}", file=sys.stderr)
