"""A PNG with one small panel per workload metric: Riverlog's and Kafka's medians side by side,
every run as a dot, the ratio in the title. One panel per metric keeps each on its own scale
(records/s, ms, s and MB differ by orders of magnitude). Axes start at zero, so bar heights
compare honestly; only where the two systems differ more than tenfold does a panel switch to a log
axis, so the smaller bar stays visible."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a build machine

import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"riverlog": "#1f77b4", "kafka": "#7f7f7f"}
LOG_ABOVE = 10.0  # the ratio of the larger to the smaller median beyond which a panel goes log


def plot(path: Path, rows: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]], title: str) -> None:
    shown = [r for r in rows if r["riverlog_median"] is not None or r["kafka_median"] is not None]
    columns = 4
    lines = max(1, math.ceil(len(shown) / columns))
    fig, axes = plt.subplots(lines, columns, figsize=(4 * columns, 3.1 * lines), squeeze=False)
    for ax, row in zip(axes.flat, shown, strict=False):
        _panel(ax, row, runs)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _panel(ax: Any, row: dict[str, Any], runs: Sequence[dict[str, Any]]) -> None:
    systems = ["riverlog", "kafka"]
    medians = [row[f"{s}_median"] or 0.0 for s in systems]
    ax.bar(systems, medians, color=[COLORS[s] for s in systems], width=0.6)
    for i, system in enumerate(systems):
        points = [r["values"][row["metric"]] for r in runs
                  if r["workload"] == row["workload"] and r["system"] == system and row["metric"] in r["values"]]
        ax.plot([i] * len(points), points, "k.", markersize=5)
    if all(m > 0 for m in medians) and max(medians) / min(medians) > LOG_ABOVE:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ratio = f"  R/K {row['ratio']:.2f}x" if row["ratio"] is not None else ""
    ax.set_title(f"{row['workload']} {row['label']}{ratio}", fontsize=8)
    ax.set_ylabel(row["unit"], fontsize=8)
    ax.tick_params(labelsize=7)
