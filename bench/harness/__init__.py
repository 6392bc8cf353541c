"""Side-by-side benchmark harness: workloads W1–W8 against Riverlog and Apache Kafka (issue #8).

Modules: ``systems`` (start/stop either system with identical settings), ``clients`` (confluent-kafka
load generators), ``perftools`` (Kafka's ProducerPerformance/ConsumerPerformance), ``latency`` (W4),
``resources`` (/proc sampling for W8), ``workloads`` (W1–W8), ``scale`` (sizes), ``runner``
(alternating rounds), ``report`` (table, JSON, medians, ratios), ``machine`` and ``plot``.
Entry point: ``bench/run.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# bench/ is a folder of scripts, not an installed package: the broker test harness
# (tests/support), the broker package (broker_image) and bench/failover.py are reached by path,
# the way bench/failover.py and bench/produce_consume.py already do it.
for _extra in (REPO / "broker_image", REPO / "tests", BENCH):
    if str(_extra) not in sys.path:
        sys.path.insert(0, str(_extra))
