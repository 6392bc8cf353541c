"""Enrichment: a stream of events joined with a compacted reference topic read as a table.

The reference topic (users by default; key = user id, JSON value, null value = deleted) is read
as a batch at every micro-batch, from its start to its end at that moment, and reduced to the
last record per key with deletions removed: what the topic says now, as log compaction would
leave it. Events are joined to it by ``user`` (a left join: events of unknown users keep null
reference fields) and written to the output topic keyed by event id::

    {"event_id":"e-000042","user":"u-007","category":"books","amount":12.34,"ts":1767225600123,
     "name":"Ada","tier":"gold","country":"NO"}

A reference change therefore applies from the next micro-batch on; earlier outputs stay as they
were. The checkpoint holds the events' offsets; the sink is at-least-once with deterministic
keys and values per event, as in the ETL pipeline.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..schemas import USER_FIELDS, user_schema
from ..session import kafka_options, reader_options
from .common import add_streaming_arguments, apply_trigger, await_query, read_stream
from .etl import parse_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NAME = "enrich"
HELP = "enrichment: events joined with a compacted reference topic -> output topic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-topic", default="events", help="events topic (default: %(default)s)")
    parser.add_argument("--reference-topic", default="users",
                        help="compacted reference topic keyed by user id (default: %(default)s)")
    parser.add_argument("--output-topic", default="events-enriched",
                        help="enriched events topic (default: %(default)s)")
    add_streaming_arguments(parser, default_checkpoint="checkpoints/enrich")


def latest_by_key(raw: DataFrame) -> DataFrame:
    """Kafka records -> one row per key with its last value, keys whose last value is null gone.

    A key's records are all in one partition (the producer partitions by key), so the greatest
    offset is the latest record.
    """
    from pyspark.sql import functions as F

    last = (raw
            .where(F.col("key").isNotNull())
            .groupBy(F.col("key").cast("string").alias("ref_key"))
            .agg(F.max(F.struct(F.col("offset"), F.col("value").cast("string").alias("value"))).alias("last")))
    return last.where(F.col("last.value").isNotNull()).select("ref_key", F.col("last.value").alias("value"))


def reference_table(latest: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    parsed = latest.select("ref_key", F.from_json(F.col("value"), user_schema()).alias("r"))
    return parsed.select("ref_key", *(F.col(f"r.{name}").alias(name) for name in USER_FIELDS))


def enrich(events: DataFrame, reference: DataFrame) -> DataFrame:
    """Events left-joined to the reference table -> the sink's ``key`` and ``value`` columns."""
    from pyspark.sql import functions as F

    joined = events.join(reference, events["user"] == reference["ref_key"], "left")
    value = F.to_json(F.struct(
        "event_id", "user", "category", "amount", "ts", *USER_FIELDS,
    ), {"ignoreNullFields": "false"})
    return joined.select(F.col("event_id").alias("key"), value.alias("value"))


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    options = reader_options(args.bootstrap, args.kafka_extra)
    reference_raw = (spark.read.format("kafka").options(**options)
                     .option("subscribe", args.reference_topic)
                     .option("startingOffsets", "earliest").option("endingOffsets", "latest")
                     .load())
    reference = reference_table(latest_by_key(reference_raw))
    events = parse_events(read_stream(spark, args.bootstrap, args.input_topic, args, args.kafka_extra))
    writer = (enrich(events.drop("event_time"), reference).writeStream
              .queryName("riverlog-enrich")
              .format("kafka")
              .options(**kafka_options(args.bootstrap, args.kafka_extra))
              .option("topic", args.output_topic)
              .option("checkpointLocation", args.checkpoint)
              .outputMode("append"))
    query = apply_trigger(writer, args.trigger).start()
    return await_query(query, args.timeout)
