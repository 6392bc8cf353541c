"""Batch export: a topic's offset range (or time range) -> Parquet, partitioned by date.

Which records: ``--range PARTITION:FROM:TO`` (repeatable) reads exactly offsets FROM (inclusive)
to TO (exclusive) of the listed partitions and no others; ``--from-time``/``--to-time`` read
every partition from the first record with a timestamp at or after the start to the first at or
after the end; without either, everything from the log start to the end as of the query.

Each record becomes a row (topic, partition, offset, timestamp, key, value as UTF-8 strings)
under ``<output>/date=YYYY-MM-DD/``, the date being the record timestamp's UTC day.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..session import reader_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NAME = "batch"
HELP = "batch export: a topic's offset or time range -> Parquet partitioned by date"


@dataclass(frozen=True)
class OffsetRange:
    partition: int
    start: int  # inclusive
    end: int  # exclusive


def parse_range(text: str) -> OffsetRange:
    try:
        partition, start, end = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"range {text!r}: use PARTITION:FROM:TO, e.g. 0:100:200") from None
    if partition < 0 or start < 0 or end < start:
        raise argparse.ArgumentTypeError(f"range {text!r}: need partition >= 0 and 0 <= FROM <= TO")
    return OffsetRange(partition, start, end)


def parse_time(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (UTC unless it names a zone) -> epoch ms."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"time {text!r}: use epoch milliseconds or ISO-8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="topic to export")
    parser.add_argument("--output", required=True, help="Parquet directory (a path or a Hadoop URI)")
    parser.add_argument("--range", dest="ranges", type=parse_range, action="append", default=[],
                        metavar="PARTITION:FROM:TO",
                        help="offsets [FROM, TO) of one partition (repeatable); only listed partitions are read")
    parser.add_argument("--from-time", type=parse_time, default=None,
                        help="first record timestamp to include (epoch ms or ISO-8601, UTC by default)")
    parser.add_argument("--to-time", type=parse_time, default=None,
                        help="timestamp to stop before (epoch ms or ISO-8601)")
    parser.add_argument("--mode", choices=("error", "overwrite", "append"), default="error",
                        help="when the output exists: fail, replace it, or add files (default: %(default)s)")


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The connector options that select the records (pure, for tests)."""
    if args.ranges and (args.from_time is not None or args.to_time is not None):
        raise ValueError("--range and --from-time/--to-time exclude each other")
    if args.ranges:
        partitions = [r.partition for r in args.ranges]
        if len(set(partitions)) != len(partitions):
            raise ValueError("--range names a partition twice")
        topic = args.topic
        return {
            "assign": json.dumps({topic: partitions}),
            "startingOffsets": json.dumps({topic: {str(r.partition): r.start for r in args.ranges}}),
            "endingOffsets": json.dumps({topic: {str(r.partition): r.end for r in args.ranges}}),
        }
    options = {"subscribe": args.topic, "startingOffsets": "earliest", "endingOffsets": "latest"}
    if args.from_time is not None:
        del options["startingOffsets"]
        options["startingTimestamp"] = str(args.from_time)
        # A partition without a record at or after the start contributes nothing, not an error.
        options["startingOffsetsByTimestampStrategy"] = "latest"
    if args.to_time is not None:
        del options["endingOffsets"]
        options["endingTimestamp"] = str(args.to_time)
    return options


def to_rows(raw: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return raw.select(
        F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp"),
        F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value"),
        F.to_date(F.col("timestamp")).alias("date"),
    )


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    options = {**reader_options(args.bootstrap, args.kafka_extra), **source_options(args)}
    raw = spark.read.format("kafka").options(**options).load()
    mode = "errorifexists" if args.mode == "error" else args.mode
    to_rows(raw).write.mode(mode).partitionBy("date").parquet(args.output)
    return 0
