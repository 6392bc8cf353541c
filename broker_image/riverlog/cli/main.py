"""The ``riverlog`` command: ``riverlog broker``, ``riverlog topics ...``, produce, consume and
``riverlog groups ...``, ``riverlog transactions ...``, ``riverlog users ...``, ``riverlog acls ...``,
``riverlog mirror ...``, ``riverlog schema-registry`` and ``riverlog schemas ...``."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

# Subcommand modules; each has ``register(subparsers)`` that sets ``func`` on its parser.
COMMAND_MODULES = ("broker_cmd", "topics_cmd", "produce_cmd", "consume_cmd", "groups_cmd", "transactions_cmd",
                   "cluster_cmd", "users_cmd", "acls_cmd", "mirror_cmd", "dev_cmd", "local_secure_cmd",
                   "schema_registry_cmd", "schemas_cmd")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="riverlog", description="Riverlog: a Kafka-compatible event streaming platform."
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return code
