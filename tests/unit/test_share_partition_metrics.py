"""The share-partition metrics (``riverlog_share_partition_*``) as Prometheus renders them."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from riverlog.metrics import Metrics
from riverlog.share.partition import AcknowledgementBatch, SharePartition

pytestmark = pytest.mark.unit


def test_share_partition_gauges() -> None:
    part = SharePartition(10)
    part.acquire("m", 0, 20, 6)  # offsets 10-15 acquired
    part.acknowledge("m", [AcknowledgementBatch(10, 11, (1,))], 1)  # 10-11 done: start 12
    metrics = Metrics()
    # What the broker reports for it: 4 in flight (12-15), 4 acquired, 8 pending up to hw 20.
    metrics.track_share_partitions(lambda: [("g", "jobs", 0, part.start_offset, part.end_offset - part.start_offset,
                                             part.acquired_count(), 20 - part.start_offset
                                             - part.delivery_complete_count())])
    samples = {s.name: s for family in text_string_to_metric_families(metrics.render().decode())
               for s in family.samples if s.name.startswith("riverlog_share_partition_")}
    assert {name: s.value for name, s in samples.items()} == {
        "riverlog_share_partition_start_offset": 12, "riverlog_share_partition_in_flight_records": 4,
        "riverlog_share_partition_acquired_records": 4, "riverlog_share_partition_lag": 8}
    assert samples["riverlog_share_partition_lag"].labels == {"group": "g", "topic": "jobs", "partition": "0"}
