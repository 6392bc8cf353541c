"""``riverlog schema-registry``: a schema registry instance speaking Confluent's REST API, its
schemas in the cluster's ``_schemas`` topic."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from ..config import ConfigError, parse_properties, parse_set_flags


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "schema-registry", help="run a schema registry instance (Confluent Schema Registry's REST API)",
        description="Run a schema registry instance. Its schemas live in the cluster's compacted _schemas topic; "
                    "start several against the same cluster and they elect one writer, the others forwarding "
                    "writes to it. Properties use Confluent's names (listeners, kafkastore.bootstrap.servers, "
                    "kafkastore.topic, schema.compatibility.level, host.name, schema.registry.group.id; "
                    "https with ssl.keystore.*, basic auth with authentication.*, a secured cluster with "
                    "kafkastore.security.protocol and kafkastore.sasl.*/ssl.*: docs/schema-registry.md).")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the cluster (kafkastore.bootstrap.servers)")
    p.add_argument("--listeners", metavar="http(s)://HOST:PORT", help="where to serve the REST API (default "
                   "http://0.0.0.0:8081)")
    p.add_argument("--config", metavar="FILE", help="a schema-registry.properties file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a property, e.g. --set kafkastore.topic=_schemas (repeatable)")
    p.set_defaults(func=run)


def properties(args: argparse.Namespace) -> dict[str, str]:
    """File, then --set, then the two dedicated flags (latest wins)."""
    props: dict[str, str] = {}
    if args.config:
        props.update(parse_properties(Path(args.config).read_text()))
    props.update(parse_set_flags(args.set))
    if args.bootstrap_server:
        props["kafkastore.bootstrap.servers"] = args.bootstrap_server
    if args.listeners:
        props["listeners"] = args.listeners
    return props


def run(args: argparse.Namespace, parser: object = None) -> int:
    from ..schema_registry.server import RegistryServer
    from ..schema_registry.settings import settings_from

    try:
        settings = settings_from(properties(args))
    except (ConfigError, OSError) as exc:
        print(f"riverlog schema-registry: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        pass
    server = RegistryServer(settings) if parser is None else RegistryServer(settings, parser=parser)  # type: ignore[arg-type]
    try:
        asyncio.run(server.run_until_signalled())
    except OSError as exc:
        print(f"riverlog schema-registry: {exc} (is something else using port {settings.port}?)", file=sys.stderr)
        return 1
    return 0
