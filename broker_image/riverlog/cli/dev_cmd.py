"""``riverlog dev --brokers N``: a local multi-broker cluster in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from ..config import ConfigError, parse_set_flags


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dev", help="run a local cluster of several brokers",
        description="Run N brokers in one process on consecutive ports (9092, 9093, ...), replicating "
                    "to each other over loopback, the first three forming the Raft metadata quorum "
                    "(CONTROLLER ports 19092, 19093, 19094), with data under --data. Ctrl-C stops them cleanly.")
    p.add_argument("--brokers", type=int, default=3, metavar="N", help="number of brokers (default 3)")
    p.add_argument("--data", default="./data", help="data directory (default ./data)")
    p.add_argument("--port", type=int, default=9092, help="first broker's port (default 9092)")
    p.add_argument("--controller-port", type=int, default=19092,
                   help="first voter's CONTROLLER port (default 19092; the first three brokers vote)")
    p.add_argument("--metrics-port", type=int, default=9404,
                   help="first broker's metrics port (default 9404); 0 picks free ports")
    p.add_argument("--schema-registry-port", type=int, default=8081, metavar="PORT",
                   help="port of the schema registry run inside the first broker (default 8081; 0 for none)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--advertised-host", default="localhost", help="host name clients are told (default localhost)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker property for every broker, e.g. --set num.partitions=3 (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        print("riverlog dev: --brokers must be at least 1", file=sys.stderr)
        return 2
    try:
        overrides = parse_set_flags(args.set)
    except ConfigError as exc:
        print(f"riverlog dev: {exc}", file=sys.stderr)
        return 2
    from ..devcluster import QuorumDevCluster

    nodes = range(1, args.brokers + 1)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        pass
    try:
        cluster = QuorumDevCluster(
            Path(args.data).resolve(), args.brokers, overrides,
            ports={n: args.port + n - 1 for n in nodes},
            controller_ports={n: args.controller_port + n - 1 for n in nodes if n <= QuorumDevCluster.VOTERS_MAX},
            metrics_ports={n: (args.metrics_port + n - 1) if args.metrics_port else 0 for n in nodes},
            host=args.host, advertised_host=args.advertised_host, registry_port=args.schema_registry_port,
        )
        asyncio.run(cluster.run_until_signalled())
    except OSError as exc:
        print(f"riverlog dev: {exc} (is something else using ports {args.port}-{args.port + args.brokers - 1} "
              f"or {args.controller_port}-{args.controller_port + min(args.brokers, 3) - 1}?)", file=sys.stderr)
        return 1
    except (ConfigError, ValueError) as exc:
        print(f"riverlog dev: {exc}", file=sys.stderr)
        return 2
    return 0
