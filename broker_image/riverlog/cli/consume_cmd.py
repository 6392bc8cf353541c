"""``riverlog consume TOPIC``: print records (partition, offset, timestamp, key, headers, value)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from ..client.consumer import Consumer, ConsumerRecord
from ..client.offsets import EARLIEST, LATEST
from .client_common import UsageError, client_options, client_security, print_json, run_command
from .table import StreamingTable

# Minimum widths of the streaming table's columns (all but the last, the value).
_WIDTHS = (9, 8, 24, 12, 12)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "consume", parents=[client_options()], help="print records of a topic",
        description="Print the records of TOPIC as they arrive (all partitions unless --partition). "
                    "Starts at the end of each partition unless --from-beginning or --offset.",
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    p.add_argument("--partition", type=int, metavar="P", help="read only partition P")
    p.add_argument("--offset", metavar="O",
                   help="start at offset O (a number, earliest or latest); needs --partition")
    p.add_argument("--max-messages", type=int, metavar="N", help="exit after N records")
    p.add_argument("--timeout-ms", type=int, metavar="T",
                   help="exit when no record has arrived for T milliseconds")
    p.add_argument("--quiet", action="store_true", help="no summary on stderr")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    state = _State()
    try:
        return run_command(lambda: _consume(args, state), topic=args.topic)
    except KeyboardInterrupt:
        # Ctrl-C is how an unbounded consume ends: report what was read, no traceback.
        sys.stdout.flush()
        if not args.quiet:
            print(f"consumed {state.count} records", file=sys.stderr)
        return 130


class _State:
    def __init__(self) -> None:
        self.count = 0


def _start_position(args: argparse.Namespace) -> int:
    if args.offset is not None:
        if args.partition is None:
            raise UsageError("--offset needs --partition: offsets are per partition")
        if args.from_beginning:
            raise UsageError("use either --from-beginning or --offset, not both")
        text = str(args.offset).strip().lower()
        if text == "earliest":
            return EARLIEST
        if text == "latest":
            return LATEST
        try:
            offset = int(text)
        except ValueError:
            raise UsageError(f"--offset must be a number, earliest or latest, not {args.offset!r}") from None
        if offset < 0:
            raise UsageError("--offset must not be negative")
        return offset
    return EARLIEST if args.from_beginning else LATEST


def _text(data: bytes | None) -> str | None:
    # Kafka records are bytes; show them as UTF-8, escaping what is not (never failing).
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def _timestamp(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _json(record: ConsumerRecord) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": record.timestamp_type,
        "key": _text(record.key),
        "value": _text(record.value),
        "headers": [{"key": k, "value": _text(v)} for k, v in record.headers],
    }


def _row(record: ConsumerRecord) -> list[object]:
    headers = ",".join(f"{k}={_text(v) if v is not None else ''}" for k, v in record.headers)
    return [record.partition, record.offset, _timestamp(record.timestamp),
            _text(record.key), headers or None, _text(record.value)]


async def _consume(args: argparse.Namespace, state: _State) -> int:
    start = _start_position(args)
    if args.max_messages is not None and args.max_messages < 1:
        raise UsageError("--max-messages must be at least 1")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise UsageError("--timeout-ms must not be negative")
    idle = None if args.timeout_ms is None else args.timeout_ms / 1000
    table = StreamingTable(sys.stdout, ["partition", "offset", "timestamp", "key", "headers", "value"], _WIDTHS)
    async with Consumer(args.bootstrap_server, security=client_security(args)) as consumer:
        partitions = None if args.partition is None else [args.partition]
        await consumer.assign(args.topic, partitions, start=start)
        async for record in consumer.records(max_records=args.max_messages, idle_timeout=idle):
            if args.output == "json":
                print_json(_json(record))
            else:
                table.write(_row(record))
            sys.stdout.flush()  # consumers are watched live or piped: no block buffering
            state.count += 1
    sys.stdout.flush()
    if not args.quiet:
        print(f"consumed {state.count} records", file=sys.stderr)
    if args.max_messages is not None and state.count < args.max_messages:
        print(f"riverlog: error: no record for {args.timeout_ms} ms after {state.count} of "
              f"{args.max_messages} records: produce more, or raise --timeout-ms", file=sys.stderr)
        return 1
    return 0
