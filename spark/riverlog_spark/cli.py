"""``riverlog-spark``: run a pipeline, generate events, or resolve the connector jars.

    riverlog-spark run etl --bootstrap localhost:9092 --trigger '10 seconds'
    riverlog-spark run batch --bootstrap localhost:9092 --topic events --range 0:0:1000 --output out/
    riverlog-spark run enrich --bootstrap localhost:9092 --checkpoint checkpoints/enrich
    riverlog-spark generate --bootstrap localhost:9092 --topic events --count 10000 --users-topic users
    riverlog-spark generate --bootstrap localhost:9092 --format avro --schema-registry http://localhost:8081
    riverlog-spark jars            # resolve (once) and list the connector jars

``python -m riverlog_spark`` is the same, and so is ``spark-submit riverlog_spark/__main__.py``
(then spark-submit's master and jars/packages apply; see docs/spark.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from . import deps, registry_client
from .generate import DEFAULT_CATEGORIES
from .pipelines import batch, enrich, etl

if TYPE_CHECKING:
    from .avro_events import AvroEncoder

PIPELINES: dict[str, ModuleType] = {m.NAME: m for m in (etl, batch, enrich)}


def parse_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key.strip(), value


def _add_run_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT[,...]",
                        help="Riverlog (or Kafka) bootstrap servers")
    parser.add_argument("--master", default=None,
                        help="Spark master (default: local[2], or spark-submit's own)")
    parser.add_argument("--conf", type=parse_pair, action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (repeatable), e.g. spark.driver.memory=1g")
    parser.add_argument("--kafka-option", type=parse_pair, action="append", default=[], metavar="KEY=VALUE",
                        help="a connector option (repeatable): kafka.<client setting> or e.g. failOnDataLoss=false; "
                             "readers use kafka.isolation.level=read_committed unless it is set")
    parser.add_argument("--log-level", default="WARN", help="Spark's log level (default: %(default)s)")
    _add_command_config(parser)


def _add_command_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--command-config", metavar="FILE", default=None,
                        help="Kafka client properties for a secured listener (security.protocol, ssl.*, "
                             "sasl.mechanism, sasl.jaas.config), as Kafka's tools take them; the pipelines pass "
                             "them to the connector as kafka.<key>")


def add_schema_registry_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema-registry", metavar="URL", default=registry_client.default_url(),
                        help="the schema registry's URL for Avro values (default: "
                             f"${registry_client.URL_ENV})")


def _client_properties(args: argparse.Namespace) -> dict[str, str]:
    from riverlog.config import parse_properties

    if not args.command_config:
        return {}
    path = Path(args.command_config)
    if not path.is_file():
        raise SystemExit(f"riverlog-spark: --command-config {path}: no such file")
    return parse_properties(path.read_text())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="riverlog-spark", description="Spark pipelines on Riverlog.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run a pipeline")
    pipelines = run.add_subparsers(dest="pipeline", required=True, metavar="PIPELINE")
    for name, module in PIPELINES.items():
        sub = pipelines.add_parser(name, help=module.HELP, description=module.__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_run_common(sub)
        module.add_arguments(sub)

    gen = commands.add_parser("generate", help="write generated events (and users) to topics")
    gen.add_argument("--bootstrap", required=True, metavar="HOST:PORT[,...]")
    gen.add_argument("--topic", default="events", help="events topic (default: %(default)s)")
    gen.add_argument("--count", type=int, default=1000, help="number of events (default: %(default)s)")
    gen.add_argument("--seed", type=int, default=1, help="random seed: same seed, same events")
    gen.add_argument("--start-ms", type=int, default=None,
                     help="event time of the first event, epoch ms (default: now minus the span)")
    gen.add_argument("--step-ms", type=int, default=100, help="event time between events (default: %(default)s)")
    gen.add_argument("--jitter-ms", type=int, default=0,
                     help="add a random 0..N ms to each event time: out-of-order events (default: 0)")
    gen.add_argument("--users", type=int, default=20, help="distinct users (default: %(default)s)")
    gen.add_argument("--categories", default=",".join(DEFAULT_CATEGORIES),
                     help="comma-separated categories (default: %(default)s)")
    gen.add_argument("--id-prefix", default="e-", help="event id prefix (default: %(default)s)")
    gen.add_argument("--partitions", type=int, default=-1,
                     help="partitions of topics this command creates (default: the broker's)")
    gen.add_argument("--users-topic", default=None,
                     help="also write the users reference table to this (compacted) topic first")
    gen.add_argument("--format", choices=("json", "avro"), default="json",
                     help="events' values: JSON, or Avro in the schema registry's wire format, the schema "
                          "registered under <topic>-value (default: %(default)s; users stay JSON)")
    add_schema_registry_argument(gen)
    gen.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_command_config(gen)

    jars = commands.add_parser("jars", help="resolve Spark's Kafka connector (once) and list its jars")
    jars.add_argument("--coordinate", action="store_true",
                      help="print the Maven coordinates for spark-submit --packages instead")
    jars.add_argument("--separator", default="\n", help="between jar paths, e.g. ',' for --jars")
    return parser


def _run(args: argparse.Namespace) -> int:
    from .session import SparkOptions, build_session, security_options

    # --kafka-option wins over the file, so one setting can be changed for one run.
    args.kafka_extra = {**security_options(_client_properties(args)), **dict(args.kafka_option)}
    module = PIPELINES[args.pipeline]
    prepare = getattr(module, "prepare", None)
    if prepare is not None:
        prepare(args)
    spark = build_session(SparkOptions(app_name=f"riverlog-{args.pipeline}", master=args.master,
                                       conf=dict(args.conf), log_level=args.log_level))
    try:
        return int(module.run(spark, args))
    finally:
        spark.stop()


def _generate(args: argparse.Namespace) -> int:
    from . import generate

    spec = generate.EventSpec(
        count=args.count,
        start_ms=args.start_ms if args.start_ms is not None else generate.now_ms() - args.count * args.step_ms,
        step_ms=args.step_ms, jitter_ms=args.jitter_ms, users=args.users,
        categories=[c for c in args.categories.split(",") if c], seed=args.seed, id_prefix=args.id_prefix,
    )
    progress = None if args.no_progress else sys.stderr
    security = None
    if args.command_config:
        from riverlog.config import ConfigError
        from riverlog.security.client_config import ClientSecurity

        try:
            security = ClientSecurity.from_properties(_client_properties(args),
                                                      where=f"--command-config {args.command_config}")
        except ConfigError as exc:
            raise SystemExit(f"riverlog-spark: {exc}") from None

    avro = _avro_encoder(args) if args.format == "avro" else None

    async def main() -> None:
        if args.users_topic:
            await generate.ensure_topic(args.bootstrap, args.users_topic, partitions=args.partitions,
                                        configs={"cleanup.policy": "compact"}, security=security)
            records = generate.user_records(generate.users(args.users, args.seed))
            await generate.produce(args.bootstrap, args.users_topic, records, progress=progress, label="users ",
                                   security=security)
        await generate.ensure_topic(args.bootstrap, args.topic, partitions=args.partitions, security=security)
        records = generate.event_records(generate.events(spec), avro)
        await generate.produce(args.bootstrap, args.topic, records, progress=progress, label="events",
                               security=security)

    asyncio.run(main())
    return 0


def _avro_encoder(args: argparse.Namespace) -> AvroEncoder:
    """Register the event schema under ``<topic>-value`` (TopicNameStrategy) and encode with it."""
    from .avro_events import EVENT_SCHEMA, AvroEncoder, event_schema_text

    if not args.schema_registry:
        raise SystemExit(f"riverlog-spark: --format avro needs --schema-registry URL (or ${registry_client.URL_ENV})")
    subject = registry_client.topic_subject(args.topic)
    try:
        schema_id = registry_client.register(args.schema_registry, subject, event_schema_text())
    except registry_client.RegistryClientError as exc:
        raise SystemExit(f"riverlog-spark: registering the event schema under {subject!r}: {exc}") from None
    logging.getLogger(__name__).info("event schema registered under %s: id %d", subject, schema_id)
    return AvroEncoder(EVENT_SCHEMA, schema_id)


def _jars(args: argparse.Namespace) -> int:
    if args.coordinate:
        print(deps.package_coordinates())
        return 0
    separator = args.separator.encode().decode("unicode_escape")
    print(separator.join(str(p) for p in deps.ensure()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "run":
        return _run(args)
    if args.command == "generate":
        return _generate(args)
    return _jars(args)
