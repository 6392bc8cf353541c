"""Side-by-side benchmark harness: workloads W1–W8 (issue #8), W9–W11 and the OMB-style O16x1,
O16x4, O100x1, O100x4 (issue #15), W12, W1S, W3S, M1, M1E and the schema registry's SR1, SR1I,
SR2 (issue #20) against Riverlog and Apache Kafka.

Modules: ``systems`` (start/stop either system with identical settings), ``clients`` (confluent-kafka
load generators), ``perftools`` (Kafka's ProducerPerformance/ConsumerPerformance), ``latency`` (W4),
``omb`` (the OMB-style producer and consumer processes, fixed rate and maximum-rate search),
``mirror`` (M1's MirrorMaker 2: connector configs, when the copy is done), ``registry`` (SR1's
schema registry processes and concurrent REST clients), ``serde`` (SR2's serializer round trip),
``resources`` (/proc sampling of the brokers' CPU and memory around every workload),
``metrics`` (metrics and goals), ``workloads`` (all of them), ``scale`` (sizes), ``runner``
(alternating rounds), ``report`` (table, JSON, medians, ratios), ``machine`` and ``plot``.
Entry point: ``bench/run.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# bench/ is a folder of scripts, not an installed package: the broker test harness
# (tests/support), the broker package (broker_image), the operator's pure builders (M1's
# MirrorMaker 2 configs) and bench/failover.py are reached by path, the way bench/failover.py
# and bench/produce_consume.py already do it.
for _extra in (REPO / "broker_image", REPO / "operator", REPO / "tests", BENCH):
    if str(_extra) not in sys.path:
        sys.path.insert(0, str(_extra))
