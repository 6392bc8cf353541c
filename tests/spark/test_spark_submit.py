"""The documented spark-submit line (docs/spark.md) runs as written: Spark started by
spark-submit, the package's __main__.py as the application, the connector from `riverlog-spark
jars`. Only the broker address, topic and output folder are replaced by the test's own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.brokers import BrokerProcess
from support.spark_run import REPO_ROOT, create_topic, produce, read_topic, spark_env, tail

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

DAY_START = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the doc's --from-time
DAY_END = DAY_START + 86_400_000


def documented_batch_command() -> str:
    text = (REPO_ROOT / "docs" / "spark.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    commands = [c for b in blocks for c in b.replace("\\\n", " ").splitlines()
                if c.startswith("spark-submit") and " run batch " in c and "--jars" in c]
    assert len(commands) == 1, commands
    return commands[0]


def test_documented_spark_submit_line_runs(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "submit-events"
    create_topic(spark_broker.bootstrap, topic, 2)
    # Records the day before, during and after the documented time range.
    stamps = [DAY_START - 3_600_000 + i * 1_800_000 for i in range(52)]
    produce(spark_broker.bootstrap, topic, [(f"k{i}".encode(), f"v{i}".encode(), i % 2, ts)
                                            for i, ts in enumerate(stamps)])
    wanted = {(r.partition, r.offset) for r in read_topic(spark_broker.bootstrap, topic)
              if DAY_START <= r.timestamp < DAY_END}
    assert 0 < len(wanted) < len(stamps)

    command = (documented_batch_command()
               .replace("localhost:9092", spark_broker.bootstrap)
               .replace("--topic events", f"--topic {topic}")
               .replace("--output export/", f"--output {tmp_path / 'export'}"))
    env = spark_env()
    import pyspark

    env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # spark-submit's driver stays on loopback, like `riverlog-spark run` in local mode.
    command = command.replace("spark-submit ", "spark-submit --conf spark.driver.host=127.0.0.1 "
                              "--conf spark.driver.bindAddress=127.0.0.1 ", 1)
    log = tmp_path / "spark-submit.log"
    with open(log, "wb") as out:
        code = subprocess.run(["bash", "-c", command], cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                              timeout=420, check=False).returncode
    assert code == 0, tail(log)
    rows = pq.read_table(tmp_path / "export").to_pylist()
    assert {(r["partition"], r["offset"]) for r in rows} == wanted
    assert {str(r["date"]) for r in rows} == {"2026-01-01"}
