"""bench/run.py's output paths: the plot goes beside the JSON unless named, so a partial run (one
workload, one system) never draws over the documented plot, which ``make bench`` names."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support.brokers import REPO_ROOT

pytestmark = pytest.mark.unit

if str(REPO_ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "bench"))


def bench_run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run_script", REPO_ROOT / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plot_goes_beside_the_json_unless_named() -> None:
    parse = bench_run()._parse
    assert parse(["--workloads", "S1"]).plot == Path("bench/results/latest.png")
    assert parse(["--out", "/tmp/s1.json"]).plot == Path("/tmp/s1.png")
    assert parse(["--from-json", "/tmp/old.json"]).plot == Path("/tmp/old.png")
    assert parse(["--out", "/tmp/s1.json", "--plot", "docs/benchmarks/bench.png"]).plot == \
        Path("docs/benchmarks/bench.png")
