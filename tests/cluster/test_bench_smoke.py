"""The benchmark harness (bench/run.py) end to end at smoke scale: every workload (W1–W12, W1S and W3S
over SASL_SSL, the OMB-style O16x1, O16x4, O100x1, O100x4, M1, MirrorMaker 2 between two clusters of
each system, G1, group rebalance with both group protocols, and S1, share-group throughput) against
Riverlog and Apache Kafka, one round of tiny sizes. M1E (M1 exactly-once) is left out: another 20 s
for what M1 and the cluster tier's MirrorMaker 2 test already cover. The schema registry's SR1 and
SR2 (issue #20) run in a second, Riverlog-only run. It checks that the harness works (JSON with
every run, ratios, table, plot, the brokers' CPU and memory reported by every workload), never how
fast anything was: speed lives in docs/benchmarks.md. It is in the cluster tier because W2, W6 and
W11 start three-broker clusters."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from support.brokers import REPO_ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

WORKLOADS = [f"W{n}" for n in range(1, 13)] + ["W1S", "W3S", "O16x1", "O16x4", "O100x1", "O100x4", "M1", "G1", "S1"]
SYSTEMS = ["riverlog", "kafka"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RSS = {"rss_peak_mib", "rss_median_mib"}
CPU = {"cpu_s_per_gb", "cpu_s"}  # per GB moved, or CPU-seconds where a workload moves no bytes


def test_smoke_run_of_every_workload_against_both_systems(tmp_path: Path) -> None:
    out, png = tmp_path / "smoke.json", tmp_path / "smoke.png"
    cmd = [sys.executable, str(REPO_ROOT / "bench" / "run.py"), "--scale", "smoke", "--rounds", "1",
           "--workloads", ",".join(WORKLOADS), "--systems", ",".join(SYSTEMS),
           "--out", str(out), "--plot", str(png), "--base-dir", str(tmp_path)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=840, cwd=REPO_ROOT)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-8000:]}"

    document = json.loads(out.read_text())
    assert document["errors"] == []
    assert "--scale" in document["command"]
    for key in ("cpu", "cores", "memory_gib", "kernel", "python", "java", "confluent_kafka", "librdkafka"):
        assert document["machine"].get(key), key
    assert document["date"]

    # Every workload ran once against each system, in the order R, K, and reported every metric
    # its summary row names.
    metrics: dict[str, set[str]] = {}
    for row in document["summary"]:
        metrics.setdefault(row["workload"], set()).add(row["metric"])
    assert sorted(metrics) == sorted(WORKLOADS)
    for workload in WORKLOADS:
        runs = [r for r in document["runs"] if r["workload"] == workload]
        assert [r["system"] for r in runs] == SYSTEMS, workload
        for run in runs:
            assert set(run["values"]) >= metrics[workload], (workload, run)
            assert all(isinstance(v, int | float) and v >= 0 for v in run["values"].values()), run

    # Every workload reports its brokers' CPU and resident memory, as metrics of the summary
    # (so the table, the ratios and the plot show them) and as values of every run: the brokers
    # were found and sampled, whatever the numbers were.
    for workload in WORKLOADS:
        assert metrics[workload] >= RSS and metrics[workload] & CPU, (workload, metrics[workload])
    for run in document["runs"]:
        values = run["values"]
        assert values["rss_peak_mib"] >= values["rss_median_mib"] > 0, run
        assert CPU & set(values), run
    resource_rows = [row for row in document["summary"] if row["metric"] in RSS | CPU]
    assert all(row["resource"] and not row["higher_is_better"] for row in resource_rows)
    # Issue #15's goals of the catch-up workloads: as fast as Kafka, at most half its CPU per GB.
    goals = {(row["workload"], row["metric"]): row["goal"] for row in document["summary"]}
    for workload in ("W9", "W10"):
        assert goals[(workload, "records_s")] == goals[(workload, "perf_records_s")] == ">= 1x"
        assert goals[(workload, "cpu_s_per_gb")] == goals[(workload, "perf_cpu_s_per_gb")] == "<= 0.5x"
    # Issue #16's transactional producer: records/s and commits/s, each at least Kafka's; every
    # timed transaction committed its records (a transaction's worth of records per commit).
    assert goals[("W12", "records_s")] == goals[("W12", "commits_s")] == ">= 1x"
    for run in (r for r in document["runs"] if r["workload"] == "W12"):
        values = run["values"]
        assert values["commits_s"] > 0 and values["commit_p99_ms"] >= values["commit_p50_ms"] > 0, run
        assert values["records_s"] == pytest.approx(100 * values["commits_s"]), run

    # Issue #19's MirrorMaker 2: the copy was timed after the Connect worker had started, and the
    # worker's own CPU and memory were found.
    for run in (r for r in document["runs"] if r["workload"] == "M1"):
        values = run["values"]
        assert values["records_s"] > 0 and values["worker_start_s"] > 0, run
        assert values["worker_cpu_s_per_gb"] > 0 and values["worker_rss_peak_mib"] > 0, run

    # Issue #21's rebalance times: every join of both protocols was timed (a group that never
    # settled fails the run), so the worst join is within the total and the mean is total/members.
    for run in (r for r in document["runs"] if r["workload"] == "G1"):
        values = run["values"]
        for protocol in ("classic", "consumer"):
            total, mean, worst = (values[f"{protocol}_{k}_s"] for k in ("total", "mean", "worst"))
            assert 0 < worst <= total and mean == pytest.approx(total / 2), run  # 2 members at smoke scale

    # Issue #21's share-group throughput: every measured record was acknowledged (a shortfall
    # fails the run), at some rate.
    for run in (r for r in document["runs"] if r["workload"] == "S1"):
        assert run["values"]["records_s"] > 0 and run["values"]["mb_s"] > 0, run

    # Ratios are Riverlog's median over Kafka's, for every metric Kafka measured above zero.
    for row in document["summary"]:
        assert row["riverlog_median"] is not None and row["kafka_median"] is not None, row
        if row["kafka_median"] > 0:
            assert row["ratio"] == pytest.approx(row["riverlog_median"] / row["kafka_median"]), row
            assert document["median_ratios"][f"{row['workload']}.{row['metric']}"] == row["ratio"]
        if row["goal"] is not None and row["ratio"] is not None:
            assert row["met"] in (True, False), row

    # The table: a header and one row per metric on stdout.
    lines = result.stdout.splitlines()
    assert any(line.startswith("| workload | metric | unit | Riverlog (median) | Kafka (median)") for line in lines)
    for workload in WORKLOADS:
        assert sum(line.startswith(f"| {workload} |") for line in lines) == len(metrics[workload])

    # The plot: a PNG whose header chunk gives a real width and height.
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100


# Issue #20's schema registry workloads, Riverlog only: against Kafka they run the same registry
# and clients (another two Kafka starts, ~20 s, for what the Riverlog run already covers), and
# SR1I (the registry inside the broker) is the schema registry tests' embedded case.
REGISTRY_WORKLOADS = ["SR1", "SR2"]


def test_smoke_run_of_the_schema_registry_workloads(tmp_path: Path) -> None:
    out, png = tmp_path / "sr.json", tmp_path / "sr.png"
    cmd = [sys.executable, str(REPO_ROOT / "bench" / "run.py"), "--scale", "smoke", "--rounds", "1",
           "--workloads", ",".join(REGISTRY_WORKLOADS), "--systems", "riverlog",
           "--out", str(out), "--plot", str(png), "--base-dir", str(tmp_path)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=REPO_ROOT)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-8000:]}"

    document = json.loads(out.read_text())
    assert document["errors"] == []
    runs = {r["workload"]: r["values"] for r in document["runs"]}
    assert sorted(runs) == REGISTRY_WORKLOADS
    for row in document["summary"]:
        assert row["metric"] in runs[row["workload"]], row
        assert row["kafka_median"] is None and row["ratio"] is None, row
    # Every phase answered (a wrong answer fails the run), with its latencies; the registry's own
    # process and the broker were sampled.
    for phase in ("register_new", "register_existing", "get_by_id", "get_latest", "lookup", "compatibility"):
        assert runs["SR1"][f"{phase}_s"] > 0, phase
        assert runs["SR1"][f"{phase}_p99_ms"] >= runs["SR1"][f"{phase}_p50_ms"] > 0, phase
    # Every format round-tripped its records; its first serializer call registered the schema.
    for fmt in ("avro", "protobuf", "json"):
        assert runs["SR2"][f"{fmt}_records_s"] > 0, fmt
        assert runs["SR2"][f"{fmt}_first_serialize_ms"] > 0, fmt
    for values in runs.values():
        assert values["registry_rss_peak_mib"] > 0 and values["rss_peak_mib"] > 0, values
    goals = {(row["workload"], row["metric"]): row["goal"] for row in document["summary"]}
    assert goals[("SR1", "register_new_s")] is not None and goals[("SR2", "avro_records_s")] is not None
