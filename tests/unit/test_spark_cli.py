"""The pure parts of riverlog_spark: argument parsing, connector options, jar selection, the
generator and the progress bar. The pipelines themselves run in the spark tier (tests/spark)."""

from __future__ import annotations

import argparse
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from riverlog_spark import cli, deps, generate, progress, session
from riverlog_spark.pipelines import batch
from riverlog_spark.pipelines.common import Trigger, parse_trigger

pytestmark = pytest.mark.unit


def test_triggers() -> None:
    assert parse_trigger("available-now") == Trigger("available-now")
    assert parse_trigger("once").finite
    assert parse_trigger("5 seconds") == Trigger("processing-time", "5 seconds")
    assert parse_trigger("3") == Trigger("processing-time", "3 seconds")
    assert not parse_trigger("1 minute").finite
    with pytest.raises(argparse.ArgumentTypeError):
        parse_trigger("soon")


def test_run_arguments_reach_the_pipeline() -> None:
    args = cli.build_parser().parse_args([
        "run", "etl", "--bootstrap", "127.0.0.1:9092", "--window", "10 seconds", "--trigger", "available-now",
        "--conf", "spark.driver.memory=1g", "--kafka-option", "kafka.client.id=etl", "--checkpoint", "/tmp/cp",
    ])
    assert args.pipeline == "etl"
    assert args.window == "10 seconds"
    assert args.trigger.kind == "available-now"
    assert dict(args.conf) == {"spark.driver.memory": "1g"}
    assert dict(args.kafka_option) == {"kafka.client.id": "etl"}
    assert args.output_mode == "append"
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", "nosuch", "--bootstrap", "x:1"])
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", "etl", "--bootstrap", "x:1", "--conf", "novalue"])


def _batch_args(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["run", "batch", "--bootstrap", "h:1", "--topic", "t", "--output", "o", *argv])


def test_batch_offset_ranges_assign_exactly_the_listed_partitions() -> None:
    options = batch.source_options(_batch_args("--range", "0:10:60", "--range", "2:0:5"))
    assert json.loads(options["assign"]) == {"t": [0, 2]}
    assert json.loads(options["startingOffsets"]) == {"t": {"0": 10, "2": 0}}
    assert json.loads(options["endingOffsets"]) == {"t": {"0": 60, "2": 5}}
    assert "subscribe" not in options


def test_batch_time_range_and_defaults() -> None:
    options = batch.source_options(_batch_args("--from-time", "2026-01-01T00:00:00Z", "--to-time", "1767225660000"))
    assert options["subscribe"] == "t"
    assert options["startingTimestamp"] == "1767225600000"
    assert options["endingTimestamp"] == "1767225660000"
    assert "startingOffsets" not in options and "endingOffsets" not in options
    everything = batch.source_options(_batch_args())
    assert (everything["startingOffsets"], everything["endingOffsets"]) == ("earliest", "latest")


def test_batch_refuses_bad_ranges() -> None:
    for bad in ("0:5", "0:9:3", "-1:0:1", "a:b:c"):
        with pytest.raises(argparse.ArgumentTypeError):
            batch.parse_range(bad)
    with pytest.raises(ValueError, match="twice"):
        batch.source_options(_batch_args("--range", "0:0:1", "--range", "0:2:3"))
    with pytest.raises(ValueError, match="exclude"):
        batch.source_options(_batch_args("--range", "0:0:1", "--from-time", "0"))
    assert batch.parse_time("2026-01-01T01:00:00+01:00") == batch.parse_time("2026-01-01T00:00:00")


def test_only_jars_spark_lacks_are_kept() -> None:
    assert deps.artifact_name("kafka-clients-3.9.0.jar") == "kafka-clients"
    assert deps.artifact_name("spark-sql-kafka-0-10_2.13-4.0.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert deps.artifact_name("zstd-jni-1.5.7-7.jar") == "zstd-jni"
    resolved = ["kafka-clients-3.9.0.jar", "scala-library-2.13.15.jar", "lz4-java-1.8.0.jar",
                "commons-pool2-2.12.0.jar", "spark-sql-kafka-0-10_2.13-4.0.0.jar"]
    shipped = ["scala-library-2.13.16.jar", "lz4-java-1.11.0.jar", "commons-pool-1.5.4.jar"]
    assert deps.missing_from(resolved, shipped) == [
        "commons-pool2-2.12.0.jar", "kafka-clients-3.9.0.jar", "spark-sql-kafka-0-10_2.13-4.0.0.jar",
    ]
    assert deps.connector_coordinate("4.0.0") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"


def test_cache_location_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(deps.JARS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert deps.jars_dir("4.0.0") == tmp_path / "riverlog" / "spark" / "4.0.0" / "jars"
    assert not deps.is_installed("4.0.0")
    with pytest.raises(deps.SparkDepsError, match="make spark-deps"):
        deps.connector_jars("4.0.0")
    monkeypatch.setenv(deps.JARS_DIR_ENV, str(tmp_path / "image-jars"))
    assert deps.jars_dir("4.0.0") == tmp_path / "image-jars"


def test_session_conf_layers() -> None:
    options = session.SparkOptions("x", conf={"spark.sql.shuffle.partitions": "4"})
    conf = session.session_conf(options, ["/a.jar", "/b.jar"])
    assert conf["spark.jars"] == "/a.jar,/b.jar"
    assert conf["spark.sql.shuffle.partitions"] == "4"  # the user's setting wins
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert "spark.jars" not in session.session_conf(session.SparkOptions("x"), [])
    assert session.kafka_options("h:1", {"failOnDataLoss": "false"}) == {
        "kafka.bootstrap.servers": "h:1", "failOnDataLoss": "false",
    }
    # Readers see only committed transactions unless told otherwise.
    assert session.reader_options("h:1")["kafka.isolation.level"] == "read_committed"
    assert session.reader_options("h:1", {"kafka.isolation.level": "read_uncommitted"}) == {
        "kafka.bootstrap.servers": "h:1", "kafka.isolation.level": "read_uncommitted",
    }


def test_generated_events_are_reproducible_and_well_formed() -> None:
    spec = generate.EventSpec(count=200, start_ms=1_767_225_600_000, step_ms=50, jitter_ms=400, users=7, seed=3)
    first, again = generate.events(spec), generate.events(spec)
    assert first == again
    assert first != generate.events(generate.EventSpec(count=200, start_ms=spec.start_ms, seed=4))
    assert len({e["event_id"] for e in first}) == 200
    for i, event in enumerate(first):
        assert spec.start_ms + i * 50 <= event["ts"] <= spec.start_ms + i * 50 + 400
        assert event["category"] in generate.DEFAULT_CATEGORIES
        assert event["user"] in {generate.user_id(u) for u in range(7)}
        # Exactly two decimal places survive the JSON round trip (Spark reads DECIMAL(12,2)).
        text = json.loads(generate.encode(event), parse_float=Decimal)["amount"]
        assert text == Decimal(str(event["amount"])) and text.as_tuple().exponent >= -2
    key, value, timestamp = generate.event_records(first[:1])[0]
    assert key == b"e-000000" and timestamp == first[0]["ts"] and json.loads(value or b"") == first[0]
    assert [k for k, _ in generate.users(3)] == ["u-0000", "u-0001", "u-0002"]


def test_progress_bar() -> None:
    assert progress.render(0, 10, 0.0, width=10) == "[..........]  0/10    0%  0/s"
    assert progress.render(5, 10, 1.0, width=10) == "[#####.....]  5/10   50%  5/s"
    out = io.StringIO()  # not a terminal: one line per tenth, the last at 100%
    bar = progress.ProgressBar(100, stream=out, label="events")
    for _ in range(100):
        bar.update()
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 11
    assert lines[-1].startswith("events [" + "#" * 30 + "] 100/100  100%")


def test_progress_bar_on_a_terminal_redraws_one_line() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    bar = progress.ProgressBar(3, stream=out, min_interval=0.0)
    for _ in range(3):
        bar.update()
    bar.close()
    text = out.getvalue()
    assert text.count("\n") == 1 and text.count("\r") == 4
    assert text.rstrip("\n").rsplit("\r", 1)[-1].startswith("[" + "#" * 30 + "] 3/3")


def test_connector_bundled_with_spark_needs_no_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The riverlog-spark image copies the connector and spark-avro into Spark's jars: nothing to add then.
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core_2.13-4.0.0.jar").touch()
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert deps.spark_home_jars() == jars
    assert not deps.bundled_with_spark()
    (jars / "spark-sql-kafka-0-10_2.13-4.0.0.jar").touch()
    assert not deps.bundled_with_spark()
    (jars / "spark-avro_2.13-4.0.0.jar").touch()
    assert deps.bundled_with_spark()


def test_a_cache_resolved_before_spark_avro_is_resolved_again(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    monkeypatch.setenv(deps.JARS_DIR_ENV, str(tmp_path))
    (tmp_path / ".complete").write_text("4.0.0\n")
    (tmp_path / "spark-sql-kafka-0-10_2.13-4.0.0.jar").touch()
    assert not deps.is_installed("4.0.0")
    (tmp_path / "spark-avro_2.13-4.0.0.jar").touch()
    assert deps.is_installed("4.0.0")
    assert deps.package_coordinates("4.0.0") == (
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0,org.apache.spark:spark-avro_2.13:4.0.0")


def test_command_config_properties_become_connector_options() -> None:
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.truststore.type": "PEM"}
    assert session.security_options(props) == {"kafka.security.protocol": "SASL_SSL",
                                               "kafka.sasl.mechanism": "PLAIN", "kafka.ssl.truststore.type": "PEM"}
