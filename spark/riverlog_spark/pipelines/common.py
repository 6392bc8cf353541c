"""What the pipelines share: the Kafka source, triggers, running a query to its end."""

from __future__ import annotations

import argparse
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..session import reader_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

log = logging.getLogger(__name__)

# Timestamps in keys and JSON values: ISO-8601 in UTC (the session's zone is UTC).
ISO_FORMAT = "yyyy-MM-dd'T'HH:mm:ss'Z'"


@dataclass(frozen=True)
class Trigger:
    """``available-now`` (process what is there, in batches, then stop), ``once`` (one batch,
    then stop) or a processing-time interval such as ``5 seconds`` (run until stopped)."""

    kind: str
    interval: str = ""

    @property
    def finite(self) -> bool:
        return self.kind != "processing-time"


def parse_trigger(text: str) -> Trigger:
    value = text.strip().lower()
    if value in ("available-now", "availablenow"):
        return Trigger("available-now")
    if value == "once":
        return Trigger("once")
    parts = value.split()
    if len(parts) == 2 and parts[0].replace(".", "", 1).isdigit():
        return Trigger("processing-time", value)
    if len(parts) == 1 and parts[0].isdigit():
        return Trigger("processing-time", f"{parts[0]} seconds")
    raise argparse.ArgumentTypeError(
        f"trigger {text!r}: use available-now, once or an interval such as '5 seconds'"
    )


def apply_trigger(writer: DataStreamWriter, trigger: Trigger) -> DataStreamWriter:
    if trigger.kind == "available-now":
        return writer.trigger(availableNow=True)
    if trigger.kind == "once":
        return writer.trigger(once=True)
    return writer.trigger(processingTime=trigger.interval)


def add_streaming_arguments(parser: argparse.ArgumentParser, *, default_checkpoint: str) -> None:
    parser.add_argument("--checkpoint", default=default_checkpoint,
                        help="checkpoint directory (offsets, state): a restart continues from it "
                             "(default: %(default)s)")
    parser.add_argument("--trigger", type=parse_trigger, default=parse_trigger("10 seconds"),
                        help="available-now, once, or a micro-batch interval such as '10 seconds' "
                             "(default: 10 seconds)")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="where a query without a checkpoint starts: earliest or latest")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None,
                        help="at most this many records per micro-batch (default: no limit)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop the query gracefully after this many seconds (default: run until "
                             "it ends by itself or is interrupted)")


def read_stream(spark: SparkSession, bootstrap: str, topic: str, args: argparse.Namespace,
                extra: dict[str, str]) -> DataFrame:
    reader = spark.readStream.format("kafka").options(**reader_options(bootstrap, extra))
    reader = reader.option("subscribe", topic).option("startingOffsets", args.starting_offsets)
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    return reader.load()


def await_query(query: StreamingQuery, timeout: float | None) -> int:
    """Wait for the query: until it ends (finite triggers), ``timeout`` passes or Ctrl-C.
    A failed query is logged as one error line (its cause) and gives exit status 1."""
    from pyspark.errors import StreamingQueryException

    try:
        if timeout is None:
            query.awaitTermination()
        elif not query.awaitTermination(math.ceil(timeout)):
            log.info("stopping %s after %.0f s", query.name, timeout)
            query.stop()
    except KeyboardInterrupt:
        query.stop()
    except StreamingQueryException:
        pass  # awaitTermination raises the query's failure; query.exception() below reports it
    error = query.exception()
    if error is not None:
        log.error("query %s failed: %s", query.name, error)
        return 1
    return 0
