"""``riverlog broker``: run one broker in the foreground."""

from __future__ import annotations

import argparse
import logging
import sys

from ..config import BrokerConfig, ConfigError

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "broker",
        help="run a broker",
        description="Run a Riverlog broker. Properties use Kafka's names (node.id, listeners, log.dirs, ...).",
    )
    p.add_argument("--config", help="a Kafka-style server.properties file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a property, e.g. --set log.dirs=./data (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.config, args.set)
    except ConfigError as exc:
        print(f"riverlog broker: {exc}", file=sys.stderr)
        return 2
    if config.unknown:
        log.info("ignoring properties Riverlog does not use: %s", ", ".join(config.unknown))
    from ..broker import run_broker

    try:
        run_broker(config)
    except OSError as exc:
        print(f"riverlog broker: {exc} (is another broker using the same port or data directory?)",
              file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"riverlog broker: {exc}", file=sys.stderr)
        return 2
    return 0
