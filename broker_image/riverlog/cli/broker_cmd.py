"""``riverlog broker``: run one broker in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import sys
from pathlib import Path

from ..config import BrokerConfig, ConfigError
from ..controller.scram import parse_bootstrap_credentials
from ..security.client_config import controller_security, inter_broker_security
from ..security.sasl_config import sasl_settings
from ..security.tls import tls_sources
from .table import format_table

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
    p.add_argument("--check-config", action="store_true",
                   help="check the configuration, print every property with its value and source, and exit")
    p.set_defaults(func=run)


def check_security(config: BrokerConfig) -> None:
    """TLS files load and SASL settings parse, or ConfigError says why, before the broker starts;
    so do the node's own client settings towards other brokers and the controllers."""
    tls_sources(config)
    sasl_settings(config)
    if "broker" in config.process_roles:
        inter_broker_security(config)
    controller_security(config)
    parse_bootstrap_credentials(config.get("bootstrap.scram.credentials"))


def run(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.config, args.set)
        check_security(config)
    except (ConfigError, ValueError) as exc:
        print(f"riverlog broker: {exc}", file=sys.stderr)
        return 2
    if args.check_config:
        print(format_table(["property", "value", "source"], config.effective()))
        return 0
    if config.unknown:
        log.info("ignoring properties Riverlog does not use: %s", ", ".join(config.unknown))
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


def raise_open_files_limit() -> None:
    """Take the hard open-files limit as the soft one, as the JVM does for Kafka (MaxFDLimit): a
    broker holds a descriptor per log segment, and the soft default (often 1,024) runs out at a
    few hundred partitions."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, exc)


def run_broker(config: BrokerConfig) -> None:
    """The process entry point: one node in the foreground until SIGTERM/SIGINT. A node with the
    broker role is a ``Broker``; ``process.roles=controller`` alone is a dedicated controller."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        pass
    Path(config.log_dirs[0]).mkdir(parents=True, exist_ok=True)
    raise_open_files_limit()
    # Imported here, not at the top: the other CLI commands (clients) never load the broker.
    if "broker" not in config.process_roles:
        from ..controller_node import ControllerNode

        asyncio.run(ControllerNode(config).run_until_signalled())
        return
    from ..broker import Broker

    asyncio.run(Broker(config).run_until_signalled())
