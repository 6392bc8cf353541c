"""Medians, ratios Riverlog/Kafka, the text table and the JSON document."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.workloads import Workload


def _median(runs: Sequence[dict[str, Any]], workload: str, system: str, key: str) -> float | None:
    values = [r["values"][key] for r in runs
              if r["workload"] == workload and r["system"] == system and key in r["values"]]
    return statistics.median(values) if values else None


def summarize(runs: Sequence[dict[str, Any]], workloads: Sequence[Workload]) -> list[dict[str, Any]]:
    """One row per workload metric: each system's median, the ratio of medians and the goal."""
    rows = []
    for workload in workloads:
        for metric in workload.metrics:
            riverlog = _median(runs, workload.key, "riverlog", metric.key)
            kafka = _median(runs, workload.key, "kafka", metric.key)
            ratio = riverlog / kafka if riverlog is not None and kafka else None
            goal = metric.goal
            rows.append({
                "workload": workload.key, "metric": metric.key, "label": metric.label, "unit": metric.unit,
                "higher_is_better": metric.higher_is_better, "panel": metric.panel, "resource": metric.resource,
                "riverlog_median": riverlog, "kafka_median": kafka, "ratio": ratio,
                "goal": goal.describe(metric.unit) if goal else None,
                "met": goal.met(riverlog, ratio) if goal else None,
            })
    return rows


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    # Three decimals below 10: a failover of 2.004 s must not print as "2" next to "goal <= 2 s".
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table (readable in a terminal and pasteable into docs/benchmarks.md)."""
    header = ["workload", "metric", "unit", "Riverlog (median)", "Kafka (median)", "Riverlog/Kafka", "goal", "met?"]
    lines = ["| " + " | ".join(header) + " |", "|---|---|---|---:|---:|---:|---|---|"]
    for row in rows:
        met = {True: "yes", False: "no", None: "-"}[row["met"]]
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-"
        lines.append(
            f"| {row['workload']} | {row['label']} | {row['unit']} | {_num(row['riverlog_median'])} | "
            f"{_num(row['kafka_median'])} | {ratio} | {row['goal'] or '-'} | {met} |"
        )
    return "\n".join(lines)


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
