"""Workload sizes: ``full`` is the benchmark of issues #8, #15, #16 (W12), #19 (M1, M1E), #20
(SR1, SR1I, SR2) and #21 (G1, S1),
``smoke`` a tiny run that only proves the harness works end to end (its numbers mean nothing)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Scale:
    name: str
    record_bytes: int  # W1–W4, W7
    w1_records: int
    w2_records: int
    w3_bytes: int
    w4_rate_mb: float  # MB/s (10^6 bytes) offered by the paced producer
    w4_seconds: float
    w5_records: int
    w5_record_bytes: int
    w6_case: str  # bench/failover.py's case: "leader" (not the active controller)
    w7_bytes: int
    w8_partitions: int
    w8_settle_s: float  # after creation, before measuring
    w8_window_s: float  # idle CPU is averaged over this window
    w9_partitions: int  # consumer catch-up of a many-partition topic (issue #15)
    w9_bytes: int
    w10_partitions: int
    w10_bytes: int
    w11_partitions: int  # 3 brokers, RF=3: follower fetching of this many partitions
    w11_records: int
    w12_transactions: int  # timed transactions of one transactional producer (after a warm-up)
    w12_records_per_txn: int  # records of w12's record_bytes in each transaction
    # The OMB-style workloads (O16x1, O16x4, O100x1, O100x4): a fixed-rate phase, then a search
    # for the maximum sustained rate in steps of increasing offered rate.
    omb_rate_mb: float  # MB/s offered by all producers together in the fixed-rate phase
    omb_seconds: float  # the fixed-rate phase; its first quarter is warm-up
    omb_step_s: float  # one step of the maximum-rate search
    omb_search_start_mb: float  # the first step's offered MB/s
    omb_search_factor: float  # each step offers this much more until one falls short
    omb_search_steps: int  # at most this many steps (the ramp and the bisection after it)
    omb_latency_limit_ms: float  # a step whose end-to-end p99 exceeds this has not kept up
    # M1 and M1E (issue #19): MirrorMaker 2 copies a topic of this many records of record_bytes,
    # filled before the mirror starts, with this many tasks.
    m1_records: int
    m1_partitions: int
    m1_tasks: int
    # SR1, SR1I and SR2 (issue #20): the schema registry. sr_subjects new schemas registered (and
    # registered again), sr_lookups requests in each read phase, from sr_clients concurrent HTTP
    # clients; SR2 round-trips sr_serde_records records per format. sr_seed picks the lookups.
    sr_subjects: int
    sr_lookups: int
    sr_clients: int
    sr_serde_records: int
    sr_seed: int
    # G1 (issue #21): g1_members consumers join a group on a topic of g1_partitions, one by one,
    # with each group protocol.
    g1_members: int
    g1_partitions: int
    # S1 (issue #21): s1_consumers share consumers read s1_records records of record_bytes from a
    # topic of s1_partitions.
    s1_records: int
    s1_partitions: int
    s1_consumers: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


FULL = Scale(
    name="full", record_bytes=1024,
    w1_records=1_000_000, w2_records=300_000, w3_bytes=2 * 10**9,
    w4_rate_mb=50.0, w4_seconds=20.0,
    w5_records=2_000_000, w5_record_bytes=100,
    w6_case="leader",
    w7_bytes=10 * 10**9,
    w8_partitions=10_000, w8_settle_s=10.0, w8_window_s=30.0,
    w9_partitions=100, w9_bytes=10**9,
    w10_partitions=1000, w10_bytes=10**9,
    w11_partitions=1000, w11_records=200_000,
    w12_transactions=3_000, w12_records_per_txn=100,
    omb_rate_mb=10.0, omb_seconds=20.0, omb_step_s=5.0,
    omb_search_start_mb=20.0, omb_search_factor=1.5, omb_search_steps=8, omb_latency_limit_ms=1000.0,
    # 1 GB: about half a minute of copying at the rates MirrorMaker 2 reached on this machine,
    # long enough that the connector's own start (topic creation, task start) is a small part.
    m1_records=1_000_000, m1_partitions=8, m1_tasks=8,
    # Each phase a few seconds at the rates measured on this machine (2026-11-28: a few hundred
    # writes/s, a few thousand reads/s; about 5,000 records/s round trip with JSON Schema).
    sr_subjects=2_000, sr_lookups=10_000, sr_clients=8, sr_serde_records=50_000, sr_seed=20,
    g1_members=10, g1_partitions=30,
    s1_records=1_000_000, s1_partitions=4, s1_consumers=4,
)

SMOKE = Scale(
    name="smoke", record_bytes=1024,
    w1_records=3_000, w2_records=2_000, w3_bytes=4 * 10**6,
    w4_rate_mb=1.0, w4_seconds=2.0,
    w5_records=3_000, w5_record_bytes=100,
    w6_case="leader",
    w7_bytes=4 * 10**6,
    w8_partitions=200, w8_settle_s=1.0, w8_window_s=2.0,
    w9_partitions=100, w9_bytes=2 * 10**6,
    # 200, not 1,000: a smoke run only checks the harness, and Kafka takes most of a minute to
    # create, fill and read 1,000 partitions even with a few records each.
    w10_partitions=200, w10_bytes=2 * 10**6,
    w11_partitions=200, w11_records=2_000,
    w12_transactions=20, w12_records_per_txn=100,
    omb_rate_mb=1.0, omb_seconds=1.0, omb_step_s=0.5,
    omb_search_start_mb=1.0, omb_search_factor=2.0, omb_search_steps=2, omb_latency_limit_ms=1000.0,
    m1_records=2_000, m1_partitions=8, m1_tasks=2,
    sr_subjects=20, sr_lookups=50, sr_clients=4, sr_serde_records=200, sr_seed=20,
    g1_members=2, g1_partitions=4,
    s1_records=2_000, s1_partitions=2, s1_consumers=2,
)

SCALES = {"full": FULL, "smoke": SMOKE}


def scale_with(base: Scale, overrides: dict[str, str]) -> Scale:
    """``--set w3_bytes=500000000``: change single sizes without a new preset."""
    typed: dict[str, Any] = {}
    for key, text in overrides.items():
        if key not in base.as_dict() or key == "name":
            raise ValueError(f"unknown scale field {key!r}; one of {', '.join(base.as_dict())}")
        current = getattr(base, key)
        typed[key] = type(current)(float(text)) if isinstance(current, int) else type(current)(text)
    return replace(base, **typed)
