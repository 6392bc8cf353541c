"""Side-by-side benchmark of Riverlog and Apache Kafka: workloads W1–W8 of issue #8, W9–W11 and
the OMB-style O16x1, O16x4, O100x1, O100x4 of issue #15, W12 (transactional producer) of
issue #16, M1, M1E (MirrorMaker 2 between two clusters of each system) of issue #19, G1 (consumer group
rebalance, classic vs KIP-848) of issue #21, and SR1, SR1I,
SR2 (the schema registry: REST API rates, the serializer round trip) of issue #20.

Each workload runs against both systems with the same settings, alternating (R, K, R, K, ...)
for several rounds; the table shows each system's median, the ratio Riverlog/Kafka and the goal.
The JSON keeps every run's values, the command line, the machine and the date.

    .venv/bin/python bench/run.py                              # everything, full sizes, 3 rounds
    .venv/bin/python bench/run.py --workloads W1,W3 --rounds 2
    .venv/bin/python bench/run.py --workloads W9,W10,W11,O16x1,O16x4,O100x1,O100x4
    .venv/bin/python bench/run.py --workloads W12              # transactions, issue #16
    .venv/bin/python bench/run.py --workloads M1,M1E           # MirrorMaker 2, issue #19
    .venv/bin/python bench/run.py --workloads SR1,SR1I,SR2     # schema registry, issue #20
    .venv/bin/python bench/run.py --workloads G1               # group rebalance time, issue #21
    .venv/bin/python bench/run.py --scale smoke --out /tmp/smoke.json --plot /tmp/smoke.png
    .venv/bin/python bench/run.py --set w3_bytes=500000000     # one size changed
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import harness  # noqa: F401  (puts tests/, broker_image/ and bench/ on sys.path)
from harness import machine, plot, report, runner
from harness.scale import SCALES, scale_with
from harness.systems import SYSTEMS
from harness.workloads import WORKLOADS


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, any case, e.g. W1,W3,o16x4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="riverlog,kafka (order = order in a round)")
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="override one size of the scale (see bench/harness/scale.py)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/latest.json"))
    # Beside the JSON unless named: a partial run must not draw over the documented plot
    # (``make bench`` names docs/benchmarks/bench.png).
    parser.add_argument("--plot", type=Path, default=None,
                        help="the plot's file; default the JSON's path (--out, or --from-json) with .png")
    parser.add_argument("--from-json", type=Path, default=None, metavar="JSON",
                        help="run nothing: print the table and draw the plot of an earlier run's JSON")
    parser.add_argument("--base-dir", type=Path, default=None,
                        help="where both systems keep their data (one disk for both); default a temp dir")
    args = parser.parse_args(argv)
    if args.plot is None:
        args.plot = (args.from_json or args.out).with_suffix(".png")
    by_upper = {key.upper(): key for key in WORKLOADS}  # "o16x4" and "W1" alike
    args.workload_list = [by_upper.get(w.strip().upper(), w.strip()) for w in args.workloads.split(",") if w.strip()]
    args.system_list = [s.strip().lower() for s in args.systems.split(",") if s.strip()]
    for w in args.workload_list:
        if w not in WORKLOADS:
            parser.error(f"unknown workload {w}; choose from {', '.join(WORKLOADS)}")
    for s in args.system_list:
        if s not in SYSTEMS:
            parser.error(f"unknown system {s}; choose from {', '.join(SYSTEMS)}")
    return args


def _replot(args: argparse.Namespace) -> int:
    document = json.loads(args.from_json.read_text())
    print(report.table(document["summary"]))
    plot.plot(args.plot, document["summary"], document["runs"], _title(document))
    print(f"\nplot {args.plot}")
    return 0


def _title(document: dict[str, Any]) -> str:
    return (f"Riverlog vs Apache Kafka {document['machine']['kafka']} ({document['scale']['name']} scale, "
            f"{document['rounds']} rounds, {document['date'][:10]})")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.from_json is not None:
        return _replot(args)
    scale = scale_with(SCALES[args.scale], dict(item.split("=", 1) for item in args.set))
    workloads = [WORKLOADS[w] for w in args.workload_list]
    started = datetime.datetime.now(datetime.UTC)
    runner.log(f"{len(workloads)} workloads x {len(args.system_list)} systems x {args.rounds} rounds, "
               f"scale {scale.name}")
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-", dir=args.base_dir) as tmp:
        runs, errors = runner.run_suite(workloads, args.system_list, args.rounds, scale, Path(tmp))
    finished = datetime.datetime.now(datetime.UTC)
    rows = report.summarize(runs, workloads)
    document = {
        "command": [Path(sys.executable).name, *sys.argv],
        "date": started.isoformat(timespec="seconds"),
        "finished": finished.isoformat(timespec="seconds"),
        "machine": machine.describe(),
        "scale": scale.as_dict(),
        "rounds": args.rounds,
        "systems": args.system_list,
        "workloads": {w.key: w.title for w in workloads},
        "runs": runs,
        "errors": errors,
        "summary": rows,
        "median_ratios": {f"{r['workload']}.{r['metric']}": r["ratio"] for r in rows},
    }
    report.write_json(args.out, document)
    plot.plot(args.plot, rows, runs, _title(document))
    print(report.table(rows))
    print(f"\n{len(runs)} runs, {len(errors)} failed; JSON {args.out}; plot {args.plot}")
    for error in errors:
        print(f"FAILED {error['workload']} {error['system']} round {error['round']}: {error['error']}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
