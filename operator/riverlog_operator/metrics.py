"""Operator metrics for Prometheus: reconcile counts, durations and errors per kind."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

REGISTRY = CollectorRegistry()

RECONCILES = Counter("riverlog_operator_reconciles", "Reconciliations by resource kind and result",
                     ["kind", "result"], registry=REGISTRY)
RECONCILE_SECONDS = Histogram("riverlog_operator_reconcile_duration_seconds", "Time one reconciliation took",
                              ["kind"], registry=REGISTRY,
                              buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
ERRORS = Counter("riverlog_operator_reconcile_errors", "Reconciliations that failed, by kind and reason",
                 ["kind", "reason"], registry=REGISTRY)
CA_EXPIRY = Gauge("riverlog_operator_ca_expiry_timestamp_seconds",
                  "When a secured Cluster's certificate authority expires (Unix time)",
                  # not "namespace": Prometheus sets that label to the operator pod's own
                  ["cluster_namespace", "cluster", "ca"], registry=REGISTRY)


def forget_ca_expiry(namespace: str, cluster: str) -> None:
    """Drop a Cluster's CA series once it is deleted or no longer secured, so neither the
    dashboard nor the expiry alert keeps reporting CAs that are gone."""
    for ca in ("cluster", "clients"):
        with suppress(KeyError):  # never set for this Cluster
            CA_EXPIRY.remove(namespace, cluster, ca)


MANAGED = Gauge("riverlog_operator_managed_resources", "Resources the operator reconciled at least once",
                ["kind"], registry=REGISTRY)


@contextmanager
def timed(kind: str) -> Iterator[None]:
    """Count and time one reconciliation; an exception counts as an error and goes on."""
    started = time.monotonic()
    try:
        yield
    except BaseException as exc:
        RECONCILES.labels(kind, "error").inc()
        ERRORS.labels(kind, type(exc).__name__).inc()
        raise
    else:
        RECONCILES.labels(kind, "ok").inc()
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.monotonic() - started)


def serve(port: int, host: str = "0.0.0.0") -> None:
    start_http_server(port, addr=host, registry=REGISTRY)
