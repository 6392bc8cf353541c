"""What a workload reports: metrics with units, which direction is better, and the goals of
issues #8 and #15."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Goal:
    """``ratio_min``: Riverlog/Kafka must be at least this; ``ratio_max``: at most this (latency,
    CPU per GB); ``riverlog_max``: Riverlog's own median at most this (an absolute goal, e.g.
    failover ≤ 2 s); ``riverlog_min``: Riverlog's own median at least this (a rate below which
    something has regressed: the schema registry's, which has no Kafka to compare with)."""

    kind: str
    value: float

    def describe(self, unit: str) -> str:
        if self.kind == "ratio_min":
            return f">= {self.value:g}x"
        if self.kind == "ratio_max":
            return f"<= {self.value:g}x"
        if self.kind == "riverlog_min":
            return f">= {self.value:g} {unit}"
        return f"<= {self.value:g} {unit}"

    def met(self, riverlog: float | None, ratio: float | None) -> bool | None:
        if self.kind == "riverlog_max":
            return None if riverlog is None else riverlog <= self.value
        if self.kind == "riverlog_min":
            return None if riverlog is None else riverlog >= self.value
        if ratio is None:
            return None
        return ratio >= self.value if self.kind == "ratio_min" else ratio <= self.value


@dataclass(frozen=True)
class Metric:
    key: str  # the key in a run's values
    label: str  # what the table and plot call it
    unit: str
    higher_is_better: bool
    goal: Goal | None = None
    # Metrics of one workload with the same panel share one plot panel (latency percentiles).
    panel: str | None = None
    # The brokers' CPU and memory: the plot shows these as ratios in a panel of their own.
    resource: bool = False


AT_LEAST_KAFKA = Goal("ratio_min", 1.0)
# Issue #15: consumer catch-up at no more than half of Kafka's broker CPU per GB.
HALF_KAFKA_CPU = Goal("ratio_max", 0.5)



CPU_PER_GB = "cpu_s_per_gb"
CPU_S = "cpu_s"
RSS_PEAK = "rss_peak_mib"
RSS_MEDIAN = "rss_median_mib"


def resource_metrics(*, per_gb: bool = True, cpu_goal: Goal | None = None) -> list[Metric]:
    """The brokers' resources, reported by every workload: CPU-seconds per GB moved (or
    CPU-seconds over the phase where it moves no bytes) and resident memory (peak, median)."""
    cpu = (Metric(CPU_PER_GB, "broker CPU per GB", "s/GB", False, cpu_goal, resource=True) if per_gb
           else Metric(CPU_S, "broker CPU over the phase", "s", False, cpu_goal, resource=True))
    return [
        cpu,
        Metric(RSS_PEAK, "broker RSS, peak", "MiB", False, resource=True),
        Metric(RSS_MEDIAN, "broker RSS, median", "MiB", False, resource=True),
    ]


def perf_cpu_metric(tool: str, goal: Goal | None = None) -> Metric:
    """CPU per GB of the phase that Kafka's own perf tool drives (W1, W3, W9, W10)."""
    return Metric("perf_cpu_s_per_gb", f"broker CPU per GB ({tool})", "s/GB", False, goal, resource=True)
