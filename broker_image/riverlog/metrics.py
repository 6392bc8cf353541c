"""Prometheus metrics and the health endpoints, served by aiohttp on their own port.

``/metrics`` for Prometheus, ``/healthz`` (the process is alive and its loop responsive) and
``/readyz`` (logs recovered and listeners accepting: the Kubernetes readiness probe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from aiohttp import web
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# (topic, partition, size in bytes, log start offset, log end offset, high watermark)
# ... then whether this broker leads it, its ISR size and its replica count.
PartitionStats = tuple[str, int, int, int, int, int, bool, int, int]
# (group, topic, partition, committed offset, high watermark or None when not hosted here)
GroupOffsetStats = tuple[str, str, int, int, int | None]
# (group, type "classic" or "consumer", state, member count, and for a KIP-848 consumer group
# its group epoch and how many members have not reached the target assignment's epoch;
# None and 0 for a classic group)
GroupStats = tuple[str, str, str, int, int | None, int]
# (whether this node is the active controller, partitions without a leader as it sees them)
ControllerStats = tuple[bool, int]
# (__transaction_state partition coordinated here, open transactions, age in seconds of the oldest
# open one or None when there is none)
TxnCoordinatorStats = tuple[int, int, float | None]
# (topic, partition, high watermark minus last stable offset) for partitions led here
LsoLagStats = tuple[str, int, int]
# (share group, topic, partition, share-partition start offset, in-flight records, acquired
# records, records not yet done up to the high watermark) for share-partitions led here
SharePartitionStats = tuple[str, str, int, int, int, int, int]
# A client quota sensor (quotas/manager.py): (kind: produce/fetch/request, user or "", client id or
# "", rate per second, quota bound or NaN, throttle milliseconds total, throttled responses, value
# total: bytes, or percent-seconds of request time)
QuotaStats = tuple[str, str, str, float, float, int, int, float]
# Coordinator partition loads and transaction marker rounds: milliseconds to minutes.
COORDINATOR_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class _PartitionCollector(Collector):
    """Per-partition gauges read at scrape time, so nothing is updated on the hot path."""

    def __init__(self, source: Callable[[], Iterable[PartitionStats]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        size = GaugeMetricFamily("riverlog_log_size_bytes", "Bytes on disk per partition",
                                 labels=["topic", "partition"])
        start = GaugeMetricFamily("riverlog_log_start_offset", "First offset kept per partition",
                                  labels=["topic", "partition"])
        end = GaugeMetricFamily("riverlog_log_end_offset", "Next offset to be written per partition",
                                labels=["topic", "partition"])
        hw = GaugeMetricFamily("riverlog_high_watermark", "High watermark per partition",
                               labels=["topic", "partition"])
        count = GaugeMetricFamily("riverlog_partitions", "Partitions hosted by this broker")
        leaders = GaugeMetricFamily("riverlog_leader_partitions", "Partitions this broker leads")
        under = GaugeMetricFamily(
            "riverlog_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set (Kafka's UnderReplicatedPartitions)")
        isr_sizes = GaugeMetricFamily("riverlog_partition_isr_size", "In-sync replicas per partition led here",
                                   labels=["topic", "partition"])
        n = led = under_replicated = 0
        for (topic, partition, size_bytes, log_start, log_end, high_watermark,
             is_leader, isr_size, replica_count) in self._source():
            if is_leader:
                led += 1
                under_replicated += isr_size < replica_count
                isr_sizes.add_metric([topic, str(partition)], isr_size)
            labels = [topic, str(partition)]
            size.add_metric(labels, size_bytes)
            start.add_metric(labels, log_start)
            end.add_metric(labels, log_end)
            hw.add_metric(labels, high_watermark)
            n += 1
        count.add_metric([], n)
        leaders.add_metric([], led)
        under.add_metric([], under_replicated)
        yield from (size, start, end, hw, count, leaders, under, isr_sizes)


class _ConsumerGroupCollector(Collector):
    """Committed offsets and lag of the groups this broker coordinates, read at scrape time.

    Lag is the partition's high watermark minus the committed offset (never below 0); it is
    exported only for partitions this broker leads, whose high watermark it knows.
    """

    def __init__(self, offsets: Callable[[], Iterable[GroupOffsetStats]],
                 groups: Callable[[], Iterable[GroupStats]]) -> None:
        self._offsets = offsets
        self._groups = groups

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["group", "topic", "partition"]
        committed = GaugeMetricFamily("riverlog_consumer_group_committed_offset",
                                      "Committed offset per consumer group and partition", labels=labels)
        lag = GaugeMetricFamily("riverlog_consumer_group_lag",
                                "High watermark minus committed offset per consumer group and partition",
                                labels=labels)
        members = GaugeMetricFamily("riverlog_consumer_group_members",
                                    "Members of each consumer group (type: classic, or consumer for KIP-848)",
                                    labels=["group", "type"])
        states = GaugeMetricFamily("riverlog_consumer_group_state",
                                   "1 for the state each consumer group is in (Empty, Stable, PreparingRebalance, "
                                   "CompletingRebalance; KIP-848: Assigning, Reconciling)",
                                   labels=["group", "type", "state"])
        epochs = GaugeMetricFamily("riverlog_consumer_group_epoch",
                                   "Group epoch of each KIP-848 consumer group (moves at every membership, "
                                   "subscription or metadata change)", labels=["group"])
        reconciling = GaugeMetricFamily("riverlog_consumer_group_members_reconciling",
                                        "Members of each KIP-848 consumer group not yet at its target assignment's "
                                        "epoch (still revoking or waiting for partitions)", labels=["group"])
        for group, topic, partition, offset, high_watermark in self._offsets():
            key = [group, topic, str(partition)]
            committed.add_metric(key, offset)
            if high_watermark is not None:
                lag.add_metric(key, max(0, high_watermark - offset))
        for group, group_type, state, count, epoch, behind in self._groups():
            members.add_metric([group, group_type], count)
            states.add_metric([group, group_type, state], 1)
            if epoch is not None:
                epochs.add_metric([group], epoch)
                reconciling.add_metric([group], behind)
        yield from (committed, lag, members, states, epochs, reconciling)


class _SharePartitionCollector(Collector):
    """The share-partitions (KIP-932) of the partitions this broker leads, read at scrape time."""

    def __init__(self, source: Callable[[], Iterable[SharePartitionStats]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["group", "topic", "partition"]
        start = GaugeMetricFamily("riverlog_share_partition_start_offset",
                                  "Share-partition start offset: every record below it is done", labels=labels)
        in_flight = GaugeMetricFamily("riverlog_share_partition_in_flight_records",
                                      "Records between the share-partition start and end offsets", labels=labels)
        acquired = GaugeMetricFamily("riverlog_share_partition_acquired_records",
                                     "Records acquired by share group members and locked", labels=labels)
        lag = GaugeMetricFamily("riverlog_share_partition_lag",
                                "Records up to the high watermark not yet acknowledged or archived", labels=labels)
        for group, topic, partition, spso, flight, held, pending in self._source():
            key = [group, topic, str(partition)]
            start.add_metric(key, spso)
            in_flight.add_metric(key, flight)
            acquired.add_metric(key, held)
            lag.add_metric(key, pending)
        yield from (start, in_flight, acquired, lag)


class _ControllerCollector(Collector):
    """Kafka's ActiveControllerCount and OfflinePartitionsCount, read at scrape time.

    Only the active controller reports 1 and the offline count (every other node 0 and 0), as in
    Kafka, so summing over a cluster's nodes gives exact numbers: an alert on the sum of the first
    being other than 1 catches a cluster without a controller (or a split one).
    """

    def __init__(self, source: Callable[[], ControllerStats]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active, offline = self._source()
        yield GaugeMetricFamily("riverlog_active_controller_count",
                                "1 on the active controller, 0 on every other node", value=int(active))
        yield GaugeMetricFamily("riverlog_offline_partitions_count",
                                "Partitions without a leader (reported by the active controller only)",
                                value=offline if active else 0)


class _LogDirCollector(Collector):
    """Kafka's LogDirectoryOffline and OfflineLogDirectoryCount: alert on the count above 0."""

    def __init__(self, source: Callable[[], Iterable[tuple[str, bool]]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        dirs = list(self._source())
        offline = GaugeMetricFamily("riverlog_log_dir_offline",
                                    "1 if the log directory went offline after a disk error (until restart)",
                                    labels=["log_dir"])
        for path, online in dirs:
            offline.add_metric([path], 0 if online else 1)
        yield offline
        yield GaugeMetricFamily("riverlog_offline_log_dirs_count", "Log directories offline on this broker",
                                value=sum(1 for _, online in dirs if not online))


class _TransactionCollector(Collector):
    """Transactions as the coordinator and the partition leaders see them, read at scrape time.

    The last-stable-offset lag is the high watermark minus the LSO of a partition led here: the
    records read_uncommitted consumers may read and read_committed ones may not yet (0 without
    an open transaction). It leaves out replication (the log end offset minus the high watermark),
    which ``riverlog_log_end_offset - riverlog_high_watermark`` shows, so a value that stays above
    0 points at a transaction left open (kafka-transactions find-hanging reasons the same way).
    """

    def __init__(self, coordinator: Callable[[], Iterable[TxnCoordinatorStats]],
                 lso_lag: Callable[[], Iterable[LsoLagStats]]) -> None:
        self._coordinator = coordinator
        self._lso_lag = lso_lag

    def collect(self) -> Iterator[GaugeMetricFamily]:
        open_txns = GaugeMetricFamily(
            "riverlog_transactions_open",
            "Open transactions (Ongoing, PrepareCommit, PrepareAbort) per __transaction_state partition "
            "coordinated here", labels=["partition"])
        oldest = GaugeMetricFamily(
            "riverlog_transaction_oldest_open_seconds",
            "Age of the oldest open transaction this broker coordinates (0 when none is open)")
        lag = GaugeMetricFamily(
            "riverlog_last_stable_offset_lag",
            "High watermark minus last stable offset per partition led here (records read_committed "
            "consumers cannot read yet)", labels=["topic", "partition"])
        oldest_age = 0.0
        for partition, count, age in self._coordinator():
            open_txns.add_metric([str(partition)], count)
            if age is not None:
                oldest_age = max(oldest_age, age)
        oldest.add_metric([], oldest_age)
        for topic, partition, value in self._lso_lag():
            lag.add_metric([topic, str(partition)], max(0, value))
        yield from (open_txns, oldest, lag)


class _ClientQuotaCollector(Collector):
    """Kafka's per-entity quota metrics (byte-rate, request-time, throttle-time), labelled by the
    sensor's user and client id as Kafka tags them; read from the live sensors at scrape time, so
    a client gone for an hour leaves no series behind."""

    def __init__(self, source: Callable[[], Iterable[QuotaStats]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        labels = ["quota_type", "user", "client_id"]
        rate = GaugeMetricFamily(
            "riverlog_client_quota_rate",
            "Rate over the quota window per quota entity: bytes/s (produce, fetch) or percent of a request "
            "thread (request)", labels=labels)
        bound = GaugeMetricFamily("riverlog_client_quota_bound", "The quota that applies (absent: none)",
                                  labels=labels)
        total = CounterMetricFamily(
            "riverlog_client_quota_value", "Bytes (produce, fetch) or request percent-seconds counted",
            labels=labels)
        throttle = CounterMetricFamily("riverlog_client_quota_throttle_seconds",
                                       "Time clients were throttled for, per quota entity", labels=labels)
        throttled = CounterMetricFamily("riverlog_client_quota_throttled_responses",
                                        "Responses that carried a throttle time, per quota entity", labels=labels)
        for kind, user, client_id, value, limit, throttle_ms, count, counted in self._source():
            key = [kind, user, client_id]
            rate.add_metric(key, value)
            if limit == limit:  # not NaN
                bound.add_metric(key, limit)
            total.add_metric(key, counted)
            throttle.add_metric(key, throttle_ms / 1000.0)
            throttled.add_metric(key, count)
        yield from (rate, bound, total, throttle, throttled)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        r = self.registry
        self.requests = Counter("riverlog_requests", "Requests handled", ["api"], registry=r)
        self.request_errors = Counter("riverlog_request_errors", "Requests that failed to decode or handle",
                                      ["api"], registry=r)
        self.request_latency = Histogram("riverlog_request_latency_seconds", "Request handling time",
                                         ["api"], buckets=LATENCY_BUCKETS, registry=r)
        self.bytes_in = Counter("riverlog_bytes_in", "Record bytes appended", ["topic"], registry=r)
        self.records_in = Counter("riverlog_records_in", "Records appended", ["topic"], registry=r)
        self.bytes_out = Counter("riverlog_bytes_out", "Record bytes sent to consumers", ["topic"], registry=r)
        self.records_out = Counter("riverlog_records_out", "Records sent to consumers", ["topic"], registry=r)
        self.connections = Gauge("riverlog_connections", "Open client connections", registry=r)
        # Connection limits (server/socket_server.py); the reasons name the property that acted.
        self.connections_refused = Counter(
            "riverlog_connections_refused",
            "Connections accepted and closed at once (reason max_connections_per_ip: "
            "max.connections.per.ip or its override reached)", ["reason"], registry=r)
        self.connections_delayed = Counter(
            "riverlog_connections_delayed",
            "Connections whose accept waited, as Kafka's acceptor does (reason max_connections or "
            "max_connection_creation_rate)", ["reason"], registry=r)
        self.connections_closed = Counter(
            "riverlog_connections_closed",
            "Connections the broker closed (reason idle: connections.max.idle.ms; request_frame_timeout: "
            "socket.request.frame.timeout.ms; max_connections: made room for the inter-broker listener)",
            ["reason"], registry=r)
        # Authorization (security/access.py): requests or parts of requests an ACL denied.
        self.authorization_denials = Counter(
            "riverlog_authorization_denials",
            "Operations the authorizer denied (a request may count several: one per denied resource)",
            ["resource_type", "operation"], registry=r)
        self.queued_request_bytes = Gauge(
            "riverlog_queued_request_bytes",
            "Request bytes reserved from the queued.max.request.bytes pools (0 when unbounded)", registry=r)

        # The coordinators (coordinator_runtime.py, transactions/runtime.py).
        self.coordinator_load_seconds = Histogram(
            "riverlog_coordinator_load_seconds",
            "Time to load a coordinator partition after becoming its leader (coordinator: group for "
            "__consumer_offsets, transaction for __transaction_state)", ["coordinator"],
            buckets=COORDINATOR_BUCKETS, registry=r)
        self.transaction_marker_latency = Histogram(
            "riverlog_transaction_marker_latency_seconds",
            "Time from a transaction's PrepareCommit/PrepareAbort written to its CompleteCommit/CompleteAbort "
            "written (every partition's marker in between), by result (commit, abort)", ["result"],
            buckets=COORDINATOR_BUCKETS, registry=r)

    def track_partitions(self, source: Callable[[], Iterable[PartitionStats]]) -> None:
        self.registry.register(_PartitionCollector(source))

    def track_consumer_groups(self, offsets: Callable[[], Iterable[GroupOffsetStats]],
                              groups: Callable[[], Iterable[GroupStats]]) -> None:
        self.registry.register(_ConsumerGroupCollector(offsets, groups))

    def track_transactions(self, coordinator: Callable[[], Iterable[TxnCoordinatorStats]],
                           lso_lag: Callable[[], Iterable[LsoLagStats]]) -> None:
        self.registry.register(_TransactionCollector(coordinator, lso_lag))

    def track_share_partitions(self, source: Callable[[], Iterable[SharePartitionStats]]) -> None:
        self.registry.register(_SharePartitionCollector(source))

    def track_controller(self, source: Callable[[], ControllerStats]) -> None:
        self.registry.register(_ControllerCollector(source))

    def track_log_dirs(self, source: Callable[[], Iterable[tuple[str, bool]]]) -> None:
        self.registry.register(_LogDirCollector(source))

    def track_client_quotas(self, source: Callable[[], Iterable[QuotaStats]]) -> None:
        self.registry.register(_ClientQuotaCollector(source))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class HealthServer:
    """The side HTTP server. ``ready`` is flipped by the broker once it serves clients."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self.ready = False
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host or None, self.port)
        await site.start()

    async def stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.ready:
            return web.Response(text="ready\n")
        return web.Response(status=503, text="starting\n")
