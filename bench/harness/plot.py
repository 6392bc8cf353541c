"""A PNG of a run. On top, one small panel per workload metric: Riverlog's and Kafka's medians
side by side, every run as a dot, the ratio in the title; metrics that share a panel (latency
percentiles) are grouped bars in one. One panel per metric keeps each on its own scale
(records/s, ms, s and MB differ by orders of magnitude). Axes start at zero, so bar heights
compare honestly; only where the two systems differ more than tenfold does a panel switch to a log
axis, so the smaller bar stays visible.

Below, one wide panel of the brokers' resources of every workload (CPU per GB or CPU-seconds,
RSS peak and median) as ratios Riverlog/Kafka on a log axis around 1: dozens of absolute values
in units that differ per workload would not compare at a glance; the table has them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLORS = {"riverlog": "#1f77b4", "kafka": "#7f7f7f"}
SYSTEMS = ("riverlog", "kafka")
LOG_ABOVE = 10.0  # the ratio of the larger to the smaller median beyond which a panel goes log
COLUMNS = 5
PANEL_HEIGHT = 3.1
RESOURCE_HEIGHT = 4.8
# The resource panel's bars: metric key -> (position in a workload's group, legend, colour).
RESOURCE_KINDS: dict[str, tuple[int, str, str]] = {
    "cpu_s_per_gb": (0, "CPU per GB (CPU-s where no bytes move)", "#d62728"),
    "cpu_s": (0, "CPU per GB (CPU-s where no bytes move)", "#d62728"),
    "perf_cpu_s_per_gb": (1, "CPU per GB, Kafka perf tool's phase", "#ff9896"),
    "rss_peak_mib": (2, "RSS peak", "#2ca02c"),
    "rss_median_mib": (3, "RSS median", "#98df8a"),
}

Row = dict[str, Any]


def _pyplot() -> Any:
    """matplotlib, imported when drawing only: the client processes that multiprocessing spawns
    (W4, the OMB-style workloads) re-import bench/run.py, and matplotlib would cost each of them
    most of a second of CPU on a machine the brokers share."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on a build machine
    import matplotlib.pyplot as plt

    return plt


def _patch(color: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(color=color, label=label)


def plot(path: Path, rows: Sequence[Row], runs: Sequence[Row], title: str) -> None:
    shown = [r for r in rows if r["riverlog_median"] is not None or r["kafka_median"] is not None]
    panels = _group([r for r in shown if not r.get("resource")])
    resources = [r for r in shown if r.get("resource")]
    plt = _pyplot()
    lines = max(1, math.ceil(len(panels) / COLUMNS))
    heights = [PANEL_HEIGHT] * lines + ([RESOURCE_HEIGHT] if resources else [])
    fig = plt.figure(figsize=(4 * COLUMNS, sum(heights) + 0.6))
    grid = fig.add_gridspec(len(heights), COLUMNS, height_ratios=heights)
    for i, group in enumerate(panels):
        ax = fig.add_subplot(grid[i // COLUMNS, i % COLUMNS])
        if len(group) == 1:
            _panel(ax, group[0], runs)
        else:
            _grouped_panel(ax, group, runs)
    if resources:
        _resource_panel(fig.add_subplot(grid[lines, :]), resources)
    fig.legend(handles=[_patch(COLORS[s], s.capitalize()) for s in SYSTEMS], loc="upper right",
               fontsize=9, ncol=2)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (sum(heights) + 0.6)))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _group(rows: Sequence[Row]) -> list[list[Row]]:
    """Rows in panels, in order: one per metric, or one per (workload, panel) group."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row["workload"], row.get("panel") or row["metric"]), []).append(row)
    return list(groups.values())


def _points(row: Row, system: str, runs: Sequence[Row]) -> list[float]:
    return [r["values"][row["metric"]] for r in runs
            if r["workload"] == row["workload"] and r["system"] == system and row["metric"] in r["values"]]


def _scale(ax: Any, medians: Sequence[float]) -> None:
    if all(m > 0 for m in medians) and max(medians) / min(medians) > LOG_ABOVE:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)


def _panel(ax: Any, row: Row, runs: Sequence[Row]) -> None:
    medians = [row[f"{s}_median"] or 0.0 for s in SYSTEMS]
    ax.bar(list(SYSTEMS), medians, color=[COLORS[s] for s in SYSTEMS], width=0.6)
    for i, system in enumerate(SYSTEMS):
        points = _points(row, system, runs)
        ax.plot([i] * len(points), points, "k.", markersize=5)
    _scale(ax, medians)
    ratio = f"  R/K {_ratio(row)}" if row["ratio"] is not None else ""
    ax.set_title(f"{row['workload']} {row['label']}{ratio}", fontsize=8)
    ax.set_ylabel(row["unit"], fontsize=8)
    ax.tick_params(labelsize=7)


def _grouped_panel(ax: Any, group: Sequence[Row], runs: Sequence[Row]) -> None:
    """Several metrics of one workload (p50 ... p99.99): a pair of bars each, the ratio below."""
    panel = group[0].get("panel") or ""
    medians: list[float] = []
    for offset, system in ((-0.2, "riverlog"), (0.2, "kafka")):
        values = [row[f"{system}_median"] or 0.0 for row in group]
        medians += values
        ax.bar([i + offset for i in range(len(group))], values, width=0.4, color=COLORS[system])
        for i, row in enumerate(group):
            points = _points(row, system, runs)
            ax.plot([i + offset] * len(points), points, "k.", markersize=4)
    _scale(ax, medians)
    labels = [row["label"].removeprefix(panel).strip() for row in group]
    ratios = [_ratio(row) for row in group]
    ax.set_xticks(range(len(group)), [f"{label}\n{ratio}" for label, ratio in zip(labels, ratios, strict=True)])
    ax.set_title(f"{group[0]['workload']} {panel} (R/K below)", fontsize=8)
    ax.set_ylabel(group[0]["unit"], fontsize=8)
    ax.tick_params(labelsize=7)


def _resource_panel(ax: Any, rows: Sequence[Row]) -> None:
    workloads = list(dict.fromkeys(row["workload"] for row in rows))
    width = 0.8 / (1 + max(k[0] for k in RESOURCE_KINDS.values()))
    shown = [1.0]  # the y range: every bar, every goal, and the line at 1
    for row in rows:
        kind = RESOURCE_KINDS.get(row["metric"])
        ratio = row["ratio"]
        if kind is None or ratio is None or ratio <= 0:  # a log axis has no place for 0
            continue
        x = workloads.index(row["workload"]) - 0.4 + (kind[0] + 0.5) * width
        ax.bar(x, ratio, width=width, color=kind[2])
        shown.append(ratio)
        ax.annotate(f"{ratio:.2g}", (x, ratio), ha="center", va="bottom", fontsize=6, rotation=90)
        goal = _ratio_goal(row)
        if goal is not None:
            ax.plot([x - width / 2, x + width / 2], [goal, goal], color="black", linewidth=2)
            shown.append(goal)
    ax.set_yscale("log")
    # Room above the tallest bar for its label and the legend.
    ax.set_ylim(min(shown) / 1.5, max(shown) * 4)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(workloads)), workloads)
    ax.set_xlim(-0.6, len(workloads) - 0.4)
    ax.set_ylabel("Riverlog / Kafka (log)", fontsize=8)
    ax.set_title("Brokers' resources, Riverlog / Kafka per workload (below 1: Riverlog uses less; "
                 "black bar: goal)", fontsize=9)
    legend = {label: color for _, label, color in RESOURCE_KINDS.values()}
    ax.legend(handles=[_patch(c, label) for label, c in legend.items()], fontsize=7, ncol=4,
              loc="upper left")
    ax.tick_params(labelsize=8)


def _ratio(row: Row) -> str:
    """0.22x; two significant digits below 0.1, so 0.004x does not print as 0.00x."""
    ratio = row["ratio"]
    if ratio is None:
        return "-"
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def _ratio_goal(row: Row) -> float | None:
    """The goal of a ratio (``<= 0.5x``), as a number; None for other goals."""
    goal = row.get("goal") or ""
    if not goal.endswith("x"):
        return None
    return float(goal.split()[-1].removesuffix("x"))
