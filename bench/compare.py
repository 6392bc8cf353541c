"""Did a workload get slower? Compares the Riverlog/Kafka ratios of two benchmark runs.

Each run's ratios are Riverlog's median over Kafka's, measured side by side in that run, so they
carry little of the machine's mood of the day; comparing ratios across runs is how
``docs/benchmarks.md`` answers "no earlier workload gets slower beyond noise". For every metric
both runs measured: the ratio before and after, and the change expressed so that above 1 is
better (after/before for higher-is-better metrics, before/after for lower-is-better ones).
A change below ``1 / (1 + noise)`` is marked ``worse``, above ``1 + noise`` ``better``.

    .venv/bin/python bench/compare.py docs/benchmarks/results-2026-11-22.json bench/results/latest.json
    .venv/bin/python bench/compare.py OLD.json NEW.json --noise 0.3 --workloads W1,W3
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_NOISE = 0.25  # single rounds on this shared machine vary by ±20-30 % (docs/benchmarks.md)


@dataclass(frozen=True)
class Change:
    workload: str
    metric: str
    label: str
    before: float
    after: float
    change: float  # above 1: better
    verdict: str  # "better", "worse" or "same"


def compare(before: dict[str, Any], after: dict[str, Any], noise: float = DEFAULT_NOISE,
            workloads: Sequence[str] = ()) -> list[Change]:
    """The changes of every metric with a ratio in both result documents."""
    old = {(r["workload"], r["metric"]): r for r in before["summary"] if r.get("ratio")}
    out = []
    for row in after["summary"]:
        key = (row["workload"], row["metric"])
        if key not in old or not row.get("ratio") or (workloads and row["workload"] not in workloads):
            continue
        was, now = old[key]["ratio"], row["ratio"]
        change = now / was if row["higher_is_better"] else was / now
        verdict = "worse" if change < 1 / (1 + noise) else "better" if change > 1 + noise else "same"
        out.append(Change(row["workload"], row["metric"], row["label"], was, now, change, verdict))
    return out


def table(changes: Sequence[Change]) -> str:
    lines = ["| workload | metric | ratio before | ratio after | change (>1 better) | verdict |",
             "|---|---|---:|---:|---:|---|"]
    lines += [f"| {c.workload} | {c.label} | {c.before:.2f}x | {c.after:.2f}x | {c.change:.2f} | {c.verdict} |"
              for c in changes]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="the earlier run's JSON (bench/run.py --out)")
    parser.add_argument("after", type=Path, help="the later run's JSON")
    parser.add_argument("--noise", type=float, default=DEFAULT_NOISE,
                        help=f"relative change still counted as the same (default {DEFAULT_NOISE})")
    parser.add_argument("--workloads", default="", help="comma-separated workload keys (default: all shared)")
    args = parser.parse_args(argv)
    try:
        before, after = (json.loads(p.read_text()) for p in (args.before, args.after))
    except (OSError, ValueError) as exc:
        parser.exit(2, f"compare: cannot read the results: {exc}\n")
    wanted = [w.strip() for w in args.workloads.split(",") if w.strip()]
    changes = compare(before, after, args.noise, wanted)
    if not changes:
        parser.exit(2, "compare: the two runs share no metric with a ratio; check the files and --workloads\n")
    print(table(changes))
    worse = [c for c in changes if c.verdict == "worse"]
    print(f"\n{len(changes)} metrics, {len(worse)} worse beyond noise ({args.noise:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
