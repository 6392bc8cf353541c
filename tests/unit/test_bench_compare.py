"""bench/compare.py: the ratio changes between two benchmark runs, turned so that above 1 is
better, and the noise band that decides "worse"."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.brokers import REPO_ROOT

pytestmark = pytest.mark.unit


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_compare", REPO_ROOT / "bench" / "compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


compare = _load()


def doc(**ratios: tuple[float, bool]) -> dict[str, Any]:
    return {"summary": [{"workload": key.split("_", 1)[0], "metric": key.split("_", 1)[1], "label": key,
                         "ratio": ratio, "higher_is_better": higher} for key, (ratio, higher) in ratios.items()]}


def test_changes_are_turned_so_that_above_1_is_better() -> None:
    before = doc(W1_rate=(2.0, True), W4_p99=(0.2, False), W5_rate=(1.0, True), W9_rate=(1.0, True))
    after = doc(W1_rate=(1.0, True), W4_p99=(0.1, False), W5_rate=(1.1, True), W8_rss=(0.1, False))
    changes = {c.workload: c for c in compare.compare(before, after, noise=0.25)}
    assert set(changes) == {"W1", "W4", "W5"}  # only metrics both runs have
    assert (changes["W1"].change, changes["W1"].verdict) == (0.5, "worse")
    assert (changes["W4"].change, changes["W4"].verdict) == (2.0, "better")  # lower latency ratio: better
    assert changes["W5"].verdict == "same"  # +10 %: inside the noise
    assert [c.workload for c in compare.compare(before, after, workloads=["W5"])] == ["W5"]


def test_the_command_prints_a_table_and_refuses_what_it_cannot_compare(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(doc(W1_rate=(2.0, True))))
    new.write_text(json.dumps(doc(W1_rate=(1.0, True))))
    assert compare.main([str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "| W1 | W1_rate | 2.00x | 1.00x | 0.50 | worse |" in out and "1 worse beyond noise" in out
    with pytest.raises(SystemExit) as refused:
        compare.main([str(old), str(new), "--workloads", "W7"])
    assert refused.value.code == 2 and "share no metric" in capsys.readouterr().err
