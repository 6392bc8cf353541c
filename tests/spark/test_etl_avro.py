"""Issue #20 acceptance 5: Avro events through the schema registry into the streaming ETL.

``riverlog-spark generate --format avro`` registers its schema and writes Confluent's wire
format; the ETL decodes it with Spark's from_avro and its output is exactly the aggregates
computed here from the input topic, read back with confluent-kafka's own AvroDeserializer (an
independent decoder). The evolution case mixes two versions whose binary layouts differ (v2
inserts a field in the middle), so decoding either with the other's schema would give wrong
values: only per-id decoding gives the exact output.
"""

from __future__ import annotations

import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from support.brokers import free_port
from support.spark_run import produce, read_topic, riverlog_spark, run, spark_env
from support.spark_windows import (
    JITTER_MS,
    START_MS,
    STEP_MS,
    etl_command,
    expected_aggregates,
    output_by_key,
    setup_topics,
)
from support.sr_registry import RegistryProcess, http

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

# The generator's schema with a field inserted after "user": a BACKWARD-compatible change (it
# has a default) that moves every later field in the binary encoding.
V2_FIELD = {"name": "channel", "type": "string", "default": "web"}


def generate_avro(registry: RegistryProcess, topic: str, count: int, start_ms: int, seed: int, prefix: str,
                  log: Path) -> str:
    return run(riverlog_spark(
        "generate", "--bootstrap", registry.bootstrap, "--topic", topic, "--count", str(count),
        "--start-ms", str(start_ms), "--step-ms", str(STEP_MS), "--jitter-ms", str(JITTER_MS),
        "--seed", str(seed), "--id-prefix", prefix, "--users", "15", "--format", "avro",
        "--schema-registry", registry.url,
    ), log, cwd=log.parent)


def decoded_input(registry: RegistryProcess, topic: str) -> list[tuple[int, dict[str, Any]]]:
    """(writer schema id, record) of every input value, by confluent-kafka's deserializer."""
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    out = []
    for record in read_topic(registry.bootstrap, topic):
        assert record.value is not None and record.value[0] == 0
        value = deserializer(record.value, SerializationContext(topic, MessageField.VALUE))
        out.append((int.from_bytes(record.value[1:5], "big"), value))
    return out


def run_etl(registry: RegistryProcess, tag: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    run(etl_command(registry, tag, tmp_path / "checkpoint", "--trigger", "available-now",
                    "--value-format", "avro", "--schema-registry", registry.url),
        tmp_path / "etl.log", cwd=tmp_path)
    by_key = output_by_key(read_topic(registry.bootstrap, f"{tag}-aggregates"))
    # One run without failures: every closed window written exactly once.
    assert {k: len(v) for k, v in by_key.items() if len(v) != 1} == {}
    return {k: v[0] for k, v in by_key.items()}


def test_avro_events_through_the_registry_give_exact_aggregates(spark_registry: RegistryProcess,
                                                                 tmp_path: Path) -> None:
    setup_topics(spark_registry, "avro1")
    shown = generate_avro(spark_registry, "avro1-events", 600, START_MS, 7, "a-", tmp_path / "generate.log")
    assert "600/600  100%" in shown

    status, latest = http(spark_registry.url, "GET", "/subjects/avro1-events-value/versions/latest")
    assert status == 200 and latest["version"] == 1
    assert [f["name"] for f in json.loads(latest["schema"])["fields"]] == ["event_id", "user", "category",
                                                                              "amount", "ts"]
    decoded = decoded_input(spark_registry, "avro1-events")
    assert {schema_id for schema_id, _ in decoded} == {latest["id"]}
    events = [value for _, value in decoded]
    assert len(events) == 600 and len({e["event_id"] for e in events}) == 600
    assert all(isinstance(e["amount"], Decimal) for e in events)
    expected = expected_aggregates(events)
    assert len(expected) >= 40

    assert run_etl(spark_registry, "avro1", tmp_path) == expected


def test_records_of_two_schema_versions_decode_each_with_its_own(spark_registry: RegistryProcess,
                                                                 tmp_path: Path) -> None:
    setup_topics(spark_registry, "avro2")
    generate_avro(spark_registry, "avro2-events", 400, START_MS, 21, "v1-", tmp_path / "generate.log")

    # A second producer, confluent-kafka's serializer, evolves the schema and writes v2 records
    # that continue the event time (a "channel" the v1 records get as the default, "web").
    client = SchemaRegistryClient({"url": spark_registry.url})
    v1 = json.loads(client.get_latest_version("avro2-events-value").schema.schema_str)
    fields = list(v1["fields"])
    fields.insert(2, V2_FIELD)
    serializer = AvroSerializer(client, json.dumps({**v1, "fields": fields}))
    context = SerializationContext("avro2-events", MessageField.VALUE)
    v2_events = [
        {"event_id": f"v2-{i:06d}", "user": f"u-{i % 15:04d}", "channel": ("app", "web", "shop")[i % 3],
         "category": ("books", "games", "music")[i // 2 % 3], "amount": Decimal(1234 + 17 * i).scaleb(-2),
         "ts": START_MS + (400 + i) * STEP_MS + (i * 389) % JITTER_MS}
        for i in range(400)
    ]
    produce(spark_registry.bootstrap, "avro2-events",
            [(e["event_id"].encode(), serializer(e, context), i % 2, None) for i, e in enumerate(v2_events)])

    decoded = decoded_input(spark_registry, "avro2-events")
    ids = sorted({schema_id for schema_id, _ in decoded})
    assert len(ids) == 2, "the topic holds records of two schema ids"
    assert sum(1 for _, e in decoded if e["event_id"].startswith("v2-")) == 400
    events = [value for _, value in decoded]
    assert len(events) == 800
    expected = expected_aggregates(events)

    assert run_etl(spark_registry, "avro2", tmp_path) == expected


def failed_cli(*args: str, cwd: Path) -> str:
    """Run riverlog-spark expecting a refusal: its output, which must be a message, not a Python
    traceback."""
    result = subprocess.run(riverlog_spark(*args), capture_output=True, text=True, cwd=cwd, env=spark_env(),
                            timeout=300, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    return output


def test_unknown_subject_and_unreachable_registry_are_clear_errors(spark_registry: RegistryProcess,
                                                                   tmp_path: Path) -> None:
    etl = ["run", "etl", "--bootstrap", spark_registry.bootstrap, "--input-topic", "never-written",
           "--checkpoint", str(tmp_path / "checkpoint"), "--trigger", "available-now", "--value-format", "avro"]
    output = failed_cli(*etl, "--schema-registry", spark_registry.url, cwd=tmp_path)
    assert "no subject 'never-written-value'" in output

    nobody = f"http://127.0.0.1:{free_port()}"
    output = failed_cli(*etl, "--schema-registry", nobody, cwd=tmp_path)
    assert f"schema registry {nobody} unreachable" in output
    output = failed_cli("generate", "--bootstrap", spark_registry.bootstrap, "--topic", "never-written",
                        "--format", "avro", "--schema-registry", nobody, cwd=tmp_path)
    assert f"schema registry {nobody} unreachable" in output
    output = failed_cli(*etl, cwd=tmp_path)
    assert "--value-format avro needs --schema-registry" in output


def test_a_record_of_a_schema_id_not_in_the_subject_stops_the_query(spark_registry: RegistryProcess,
                                                                      tmp_path: Path) -> None:
    # Records framed with the id of another subject's schema: decoding them with any of this
    # subject's schemas would be a guess, so the query stops and names the record and the id.
    setup_topics(spark_registry, "avro3")
    generate_avro(spark_registry, "avro3-events", 50, START_MS, 5, "a-", tmp_path / "generate.log")
    client = SchemaRegistryClient({"url": spark_registry.url})
    other = {"type": "record", "name": "Other", "fields": [{"name": "n", "type": "long"}]}
    serializer = AvroSerializer(client, json.dumps(other))
    value = serializer({"n": 7}, SerializationContext("avro3-other", MessageField.VALUE))
    assert value is not None
    other_id = int.from_bytes(value[1:5], "big")
    produce(spark_registry.bootstrap, "avro3-events", [(b"stray", value, 0, None)])

    output = failed_cli(*etl_command(spark_registry, "avro3", tmp_path / "checkpoint", "--trigger", "available-now",
                                     "--value-format", "avro", "--schema-registry", spark_registry.url)[3:],
                        cwd=tmp_path)
    assert f"schema id {other_id} is not a version of subject 'avro3-events-value'" in output
    assert "record avro3-events-0@" in output
