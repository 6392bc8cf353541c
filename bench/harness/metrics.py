"""What a workload reports: metrics with units, which direction is better, and issue #8's goals."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Goal:
    """``ratio_min``: Riverlog/Kafka must be at least this; ``ratio_max``: at most this (latency);
    ``riverlog_max``: Riverlog's own median at most this (an absolute goal, e.g. failover ≤ 2 s)."""

    kind: str
    value: float

    def describe(self, unit: str) -> str:
        if self.kind == "ratio_min":
            return f">= {self.value:g}x"
        if self.kind == "ratio_max":
            return f"<= {self.value:g}x"
        return f"<= {self.value:g} {unit}"

    def met(self, riverlog: float | None, ratio: float | None) -> bool | None:
        if self.kind == "riverlog_max":
            return None if riverlog is None else riverlog <= self.value
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


AT_LEAST_KAFKA = Goal("ratio_min", 1.0)
