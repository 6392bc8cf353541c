"""Runs the chosen workloads: per workload, rounds of every system in turn (R, K, R, K, ...), so
slow drifts of a shared machine hit both systems alike. A failed run is recorded, not fatal."""

from __future__ import annotations

import shutil
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.scale import Scale
from harness.workloads import Workload


def log(message: str) -> None:
    # Progress goes to stderr so that stdout holds only the result table.
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _short(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:,.3g}" if abs(v) < 1000 else f"{k}={v:,.0f}" for k, v in values.items())


def run_suite(workloads: Sequence[Workload], systems: Sequence[str], rounds: int, scale: Scale,
              base: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Returns (runs, errors): every measured value with its workload, system and round."""
    runs: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for workload in workloads:
        states: dict[str, Any] = {}
        try:
            for system in systems:
                if not workload.runs_on(system):
                    log(f"{workload.key} {system}: skipped ({workload.key} runs on {', '.join(workload.only_systems)})")
                    continue
                if type(workload).prepare is not Workload.prepare:
                    log(f"{workload.key} {system}: preparing")
                try:
                    states[system] = workload.prepare(system, base / f"{workload.key}-{system}-data", scale)
                except Exception as exc:
                    errors.append(_error(workload.key, system, 0, exc))
                    log(f"{workload.key} {system}: prepare FAILED: {exc!r}")
            for round_no in range(1, rounds + 1):
                for system in systems:
                    if system not in states:
                        continue
                    runs_or_error = _one_run(workload, system, round_no, rounds, scale, base, states[system])
                    (runs if "values" in runs_or_error else errors).append(runs_or_error)
        finally:
            for state in states.values():
                if state is not None:
                    workload.cleanup(state)
    return runs, errors


def _one_run(workload: Workload, system: str, round_no: int, rounds: int, scale: Scale, base: Path,
             state: Any) -> dict[str, Any]:
    workdir = base / f"{workload.key}-{system}-r{round_no}"
    log(f"{workload.key} round {round_no}/{rounds} {system}: {workload.title}")
    started = time.monotonic()
    try:
        values = workload.run(system, workdir, scale, state)
    except Exception as exc:
        log(f"{workload.key} round {round_no}/{rounds} {system}: FAILED: {exc!r}")
        return _error(workload.key, system, round_no, exc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    wall = time.monotonic() - started
    log(f"{workload.key} round {round_no}/{rounds} {system}: {_short(values)} ({wall:.0f}s)")
    return {"workload": workload.key, "system": system, "round": round_no, "values": values,
            "wall_s": round(wall, 2)}


def _error(workload: str, system: str, round_no: int, exc: BaseException) -> dict[str, Any]:
    return {"workload": workload, "system": system, "round": round_no, "error": repr(exc),
            "traceback": traceback.format_exception(exc)[-6:]}
