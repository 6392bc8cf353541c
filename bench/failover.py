"""Failover time of an in-process three-broker cluster: kill the partition leader (no controlled
shutdown, no help from the harness) under an idempotent acks=all confluent-kafka producer, and
measure the longest pause between acknowledgements. Several rounds; prints each and the median.

    .venv/bin/python bench/failover.py --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for extra in ("broker_image", "tests", "tests/cluster"):
    sys.path.insert(0, str(REPO / extra))

from test_failover_auto import crash_leader_and_measure  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    windows = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="failover-") as tmp:
            window = asyncio.run(crash_leader_and_measure(Path(tmp)))
        windows.append(window)
        print(f"round {i + 1}: {window:.2f}s", file=sys.stderr)
    print(f"unavailability after a leader crash: median {statistics.median(windows):.2f}s, "
          f"min {min(windows):.2f}s, max {max(windows):.2f}s over {len(windows)} rounds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
