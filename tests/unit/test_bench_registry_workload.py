"""The pure parts of the benchmark's schema registry workloads SR1, SR1I and SR2
(bench/harness/registry.py, issue #20 acceptance 7): the seeded request plan, the percentiles,
the absolute minimum-rate goal, and that a workload for one system only is skipped on the other.
The workloads themselves run against real brokers and registries in
`bench/run.py --workloads SR1,SR1I,SR2` (and briefly in tests/cluster/test_bench_smoke.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support.brokers import REPO_ROOT

if str(REPO_ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "bench"))

from harness import registry, runner  # noqa: E402  (bench/ is a folder of scripts, reached by path)
from harness.metrics import Goal  # noqa: E402
from harness.scale import SCALES  # noqa: E402
from harness.workloads import WORKLOADS, Workload  # noqa: E402

pytestmark = pytest.mark.unit


def test_the_plan_is_the_same_for_the_same_seed_and_asks_only_for_registered_subjects() -> None:
    first, again = registry.plan(10, 50, seed=7), registry.plan(10, 50, seed=7)
    assert [c.path for c in first["lookup"]] == [c.path for c in again["lookup"]]
    assert [c.path for c in first["lookup"]] != [c.path for c in registry.plan(10, 50, seed=8)["lookup"]]
    registered = {c.path.removesuffix("/versions") for c in first["register_new"]}
    assert len(registered) == 10
    assert [c.body for c in first["register_existing"]] == [c.body for c in first["register_new"]]
    for phase in ("get_latest", "lookup"):
        assert len(first[phase]) == 50
        assert {c.path.removesuffix("/versions/latest") for c in first[phase]} <= registered
    ids = registry.id_calls([3, 4, 5], 20, seed=7)
    assert {c.path for c in ids} <= {"/schemas/ids/3", "/schemas/ids/4", "/schemas/ids/5"}


def test_each_subject_has_its_own_schema_and_the_evolved_one_adds_a_defaulted_field() -> None:
    assert registry.avro_schema(1) != registry.avro_schema(2)
    old, new = json.loads(registry.avro_schema(1)), json.loads(registry.avro_schema(1, evolved=True))
    assert new["fields"][:-1] == old["fields"]
    assert "default" in new["fields"][-1]


def test_nearest_rank_percentiles() -> None:
    ordered = [float(v) for v in range(1, 101)]
    assert registry.percentile(ordered, 0.5) == 51.0
    assert registry.percentile(ordered, 0.99) == 100.0
    assert registry.percentile([], 0.99) == 0.0
    result = registry.PhaseResult(4, 2.0, [4.0, 1.0, 3.0, 2.0])
    assert result.values("get_by_id") == {"get_by_id_s": 2.0, "get_by_id_p50_ms": 3.0, "get_by_id_p99_ms": 4.0}


def test_a_minimum_rate_goal_is_riverlogs_own_median() -> None:
    goal = Goal("riverlog_min", 500.0)
    assert goal.describe("requests/s") == ">= 500 requests/s"
    assert goal.met(600.0, None) is True and goal.met(400.0, 9.0) is False and goal.met(None, None) is None


def test_registry_workloads_have_goals_sizes_and_the_in_broker_one_runs_on_riverlog_only() -> None:
    for key in ("SR1", "SR1I", "SR2"):
        assert any(m.goal is not None and m.goal.kind == "riverlog_min" for m in WORKLOADS[key].metrics), key
    assert WORKLOADS["SR1"].runs_on("kafka") and WORKLOADS["SR2"].runs_on("kafka")
    assert WORKLOADS["SR1I"].runs_on("riverlog") and not WORKLOADS["SR1I"].runs_on("kafka")
    for scale in SCALES.values():
        assert scale.sr_subjects > 0 and scale.sr_lookups > 0 and scale.sr_clients > 0


class _OnlyRiverlog(Workload):
    def run(self, system: str, workdir: Path, scale: Any, state: Any) -> dict[str, float]:
        return {"x": 1.0}


def test_the_runner_skips_a_system_the_workload_does_not_run_on(tmp_path: Path) -> None:
    workload = _OnlyRiverlog("T", "test", only_systems=("riverlog",))
    runs, errors = runner.run_suite([workload], ["riverlog", "kafka"], 2, SCALES["smoke"], tmp_path)
    assert errors == []
    assert [(r["system"], r["round"]) for r in runs] == [("riverlog", 1), ("riverlog", 2)]
