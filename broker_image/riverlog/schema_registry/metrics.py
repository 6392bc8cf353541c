"""The registry's Prometheus metrics, served at ``/metrics`` on its own REST listener."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (schemas by id, subjects, whether this instance is the writer, last _schemas offset applied)
RegistryStats = tuple[int, int, bool, int]


class _StateCollector(Collector):
    """Gauges read at scrape time from the store."""

    def __init__(self, source: Callable[[], RegistryStats]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        schemas, subjects, writer, offset = self._source()
        yield GaugeMetricFamily("riverlog_schema_registry_schemas", "Distinct schemas (ids) registered",
                                value=schemas)
        yield GaugeMetricFamily("riverlog_schema_registry_subjects", "Subjects with a live version", value=subjects)
        yield GaugeMetricFamily("riverlog_schema_registry_writer", "1 on the instance elected to write",
                                value=1 if writer else 0)
        yield GaugeMetricFamily("riverlog_schema_registry_store_offset", "Last _schemas offset applied",
                                value=offset)


class RegistryMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("riverlog_schema_registry_requests_total", "REST requests by endpoint and status",
                                ["method", "endpoint", "status"], registry=self.registry)
        self.latency = Histogram("riverlog_schema_registry_request_seconds", "REST request latency by endpoint",
                                 ["method", "endpoint"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.errors = Counter("riverlog_schema_registry_errors_total", "REST answers with an error, by error_code",
                              ["error_code"], registry=self.registry)
        self.forwarded = Counter("riverlog_schema_registry_forwarded_total", "Writes forwarded to the writer",
                                 registry=self.registry)
        self.elections = Counter("riverlog_schema_registry_writer_elections_total",
                                 "Times this instance became the writer", registry=self.registry)

    def track_state(self, source: Callable[[], RegistryStats]) -> None:
        self.registry.register(_StateCollector(source))

    def render(self) -> bytes:
        return generate_latest(self.registry)
