"""Streaming ETL: JSON (or Avro) events -> event-time windowed aggregates -> an output topic.

Events are parsed with the event schema (records that are not such JSON are dropped), grouped
by a tumbling event-time window and their category with a watermark, and written to the output
topic with key ``<window start>|<category>`` and a JSON value::

    key   2026-01-01T00:01:00Z|books
    value {"window_start":"2026-01-01T00:01:00Z","window_end":"2026-01-01T00:02:00Z",
           "category":"books","events":17,"amount":321.09}

Output mode ``append`` (the default) writes a window once the watermark (the largest event time
seen, minus ``--watermark``) has passed its end, with its final counts; events later than that
are dropped, as the watermark promises. ``update`` writes a window's current counts after every
micro-batch that changed it, so the topic is a changelog whose last record per key is the result.

The offsets read and the aggregation state are in ``--checkpoint``: a pipeline killed at any
point and restarted with the same checkpoint continues where its last completed micro-batch
ended. Kafka's sink is at-least-once, so a micro-batch cut short may be written again on
restart; it writes the same records, because keys and values are functions of the window and
the events in it. Reading the output as a table keyed by record key (what a compacted output
topic keeps) therefore gives each window exactly once.

``--value-format avro --schema-registry URL`` reads values in the schema registry's wire format
instead (``riverlog-spark generate --format avro`` writes them): the subject's (default
``<input topic>-value``) versions are fetched when the pipeline starts, each record is decoded
with its own writer schema and the latest version as the reader; ``avro_values.py`` has the rules.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .. import registry_client
from ..schemas import AMOUNT_PRECISION, AMOUNT_SCALE, EVENT_FIELDS, event_schema
from ..session import kafka_options
from . import avro_values
from .common import ISO_FORMAT, add_streaming_arguments, apply_trigger, await_query, read_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NAME = "etl"
HELP = "streaming ETL: events -> windowed aggregates per category -> output topic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-topic", default="events", help="events topic (default: %(default)s)")
    parser.add_argument("--output-topic", default="event-aggregates",
                        help="aggregates topic, best compacted (default: %(default)s)")
    parser.add_argument("--window", default="1 minute", help="tumbling window length (default: %(default)s)")
    parser.add_argument("--watermark", default="30 seconds",
                        help="how late an event may be and still count (default: %(default)s)")
    parser.add_argument("--output-mode", choices=("append", "update"), default="append",
                        help="append: final windows once; update: a changelog (default: %(default)s)")
    parser.add_argument("--value-format", choices=("json", "avro"), default="json",
                        help="events' values: JSON, or Avro in the schema registry's wire format "
                             "(default: %(default)s)")
    parser.add_argument("--schema-registry", metavar="URL", default=registry_client.default_url(),
                        help="the schema registry, for --value-format avro (default: "
                             f"${registry_client.URL_ENV})")
    parser.add_argument("--value-subject", default=None,
                        help="the subject of the events' schemas (default: <input topic>-value)")
    add_streaming_arguments(parser, default_checkpoint="checkpoints/etl")


def prepare(args: argparse.Namespace) -> None:
    """Before Spark starts: fetch the Avro values' schemas, so a wrong registry or subject is a
    one-line error rather than a failed query."""
    args.value_schemas = None
    if args.value_format != "avro":
        return
    if not args.schema_registry:
        raise SystemExit(f"riverlog-spark: --value-format avro needs --schema-registry URL "
                         f"(or ${registry_client.URL_ENV})")
    subject = args.value_subject or registry_client.topic_subject(args.input_topic)
    try:
        args.value_schemas = avro_values.fetch(args.schema_registry, subject, EVENT_FIELDS)
    except (registry_client.RegistryClientError, avro_values.ValueSchemaError) as exc:
        raise SystemExit(f"riverlog-spark: {exc}") from None


def parse_events(raw: DataFrame, value_schemas: avro_values.ValueSchemas | None = None) -> DataFrame:
    """Kafka records -> event columns plus ``event_time``; records that do not parse are dropped.
    With ``value_schemas`` values are Avro in the registry's wire format, else JSON."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType

    if value_schemas is None:
        parsed = raw.select(F.from_json(F.col("value").cast("string"), event_schema()).alias("e")).select("e.*")
    else:
        # The reader schema's own types, made the JSON path's (its amount is a decimal already
        # when the schema is the generator's).
        decoded = avro_values.decode(raw, value_schemas)
        parsed = decoded.select(
            *(F.col(name).cast("string").alias(name) for name in ("event_id", "user", "category")),
            F.col("amount").cast(DecimalType(AMOUNT_PRECISION, AMOUNT_SCALE)).alias("amount"),
            F.col("ts").cast("long").alias("ts"))
    return (parsed
            .where(F.col("ts").isNotNull() & F.col("category").isNotNull())
            .withColumn("event_time", F.timestamp_millis(F.col("ts"))))


def windowed_aggregates(events: DataFrame, window: str, watermark: str) -> DataFrame:
    from pyspark.sql import functions as F

    return (events
            .withWatermark("event_time", watermark)
            .groupBy(F.window(F.col("event_time"), window), F.col("category"))
            .agg(F.count(F.lit(1)).alias("events"), F.sum("amount").alias("amount")))


def to_records(aggregates: DataFrame) -> DataFrame:
    """Aggregates -> the sink's ``key`` and ``value`` columns (both strings)."""
    from pyspark.sql import functions as F

    start = F.date_format(F.col("window.start"), ISO_FORMAT)
    end = F.date_format(F.col("window.end"), ISO_FORMAT)
    value = F.to_json(F.struct(
        start.alias("window_start"), end.alias("window_end"), F.col("category"),
        F.col("events"), F.col("amount"),
    ))
    return aggregates.select(F.concat_ws("|", start, F.col("category")).alias("key"), value.alias("value"))


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    raw = read_stream(spark, args.bootstrap, args.input_topic, args, args.kafka_extra)
    records = to_records(windowed_aggregates(parse_events(raw, args.value_schemas), args.window, args.watermark))
    writer = (records.writeStream
              .queryName("riverlog-etl")
              .format("kafka")
              .options(**kafka_options(args.bootstrap, args.kafka_extra))
              .option("topic", args.output_topic)
              .option("checkpointLocation", args.checkpoint)
              .outputMode(args.output_mode))
    query = apply_trigger(writer, args.trigger).start()
    return await_query(query, args.timeout)
