"""``python -m riverlog_operator`` / ``riverlog-operator``: run the operator with kopf."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

import kopf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the Riverlog Kubernetes operator.")
    parser.add_argument("--namespace", "-n", action="append", default=[],
                        help="watch only these namespaces (repeatable); all namespaces by default")
    parser.add_argument("--standalone", action="store_true",
                        default=os.environ.get("RIVERLOG_OPERATOR_STANDALONE", "") == "true",
                        help="no peering: only for a single replica (tests, development)")
    parser.add_argument("--liveness", default=os.environ.get("RIVERLOG_OPERATOR_LIVENESS", ""),
                        help="kopf's liveness endpoint, e.g. http://0.0.0.0:8081/healthz")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from . import app  # registers the handlers

    # Watching only some namespaces uses kopf's namespaced KopfPeering named riverlog-operator,
    # which must exist in each of them (the chart creates it); clusterwide, the operator makes
    # its ClusterKopfPeering itself.

    asyncio.run(kopf.operator(
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        standalone=args.standalone,
        peering_name=None if args.standalone else app.PEERING_NAME,
        priority=app.peering_priority(),
        liveness_endpoint=args.liveness or None,
    ))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
