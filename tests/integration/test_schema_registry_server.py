"""A real broker and a real ``riverlog schema-registry`` process, driven by confluent-kafka's
``SchemaRegistryClient`` and by raw HTTP. Expectations are Confluent Schema Registry's documented
answers (API reference and the schema deletion guide).

The schemas are Avro, parsed by the registry's Avro format.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from support.brokers import riverlog_env
from support.sr_registry import RegistryProcess, http

pytestmark = pytest.mark.integration


def record(name: str, *fields: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


V1 = record("Order", {"name": "id", "type": "long"})
V2 = record("Order", {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""})
V2_BREAKING = record("Order", {"name": "id", "type": "long"}, {"name": "note", "type": "string"})


def same(a: str, b: str) -> bool:
    return bool(json.loads(a) == json.loads(b))


def test_register_lookup_and_read_back(registry_client: SchemaRegistryClient) -> None:
    schema_id = registry_client.register_schema("orders-value", Schema(V1, "AVRO"))
    assert registry_client.register_schema("orders-value", Schema(V1, "AVRO")) == schema_id
    assert registry_client.register_schema("orders-copy-value", Schema(V1, "AVRO")) == schema_id  # shared id
    assert same(registry_client.get_schema(schema_id).schema_str, V1)
    found = registry_client.lookup_schema("orders-value", Schema(V1, "AVRO"))
    assert (found.schema_id, found.version, found.subject) == (schema_id, 1, "orders-value")
    v2 = registry_client.register_schema("orders-value", Schema(V2, "AVRO"))
    assert v2 == schema_id + 1
    latest = registry_client.get_latest_version("orders-value")
    assert (latest.version, latest.schema_id) == (2, v2) and same(latest.schema.schema_str, V2)
    assert registry_client.get_versions("orders-value") == [1, 2]
    assert registry_client.get_version("orders-value", 1).schema_id == schema_id
    assert {"orders-value", "orders-copy-value"} <= set(registry_client.get_subjects())
    assert sorted(registry_client.get_subjects_by_schema_id(schema_id)) == ["orders-copy-value", "orders-value"]
    assert {(v.subject, v.version) for v in registry_client.get_schema_versions(schema_id)} == {
        ("orders-value", 1), ("orders-copy-value", 1)}
    assert set(registry_client.get_schema_types()) == {"AVRO", "PROTOBUF", "JSON"}


def test_compatibility_config_and_409(registry_client: SchemaRegistryClient) -> None:
    registry_client.register_schema("compat-value", Schema(V1, "AVRO"))
    registry_client.set_compatibility("compat-value", "BACKWARD_TRANSITIVE")
    assert registry_client.get_compatibility("compat-value") == "BACKWARD_TRANSITIVE"
    assert registry_client.test_compatibility("compat-value", Schema(V2, "AVRO")) is True
    assert registry_client.test_compatibility("compat-value", Schema(V2_BREAKING, "AVRO")) is False
    assert registry_client.test_compatibility_all_versions("compat-value", Schema(V2_BREAKING, "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as caught:
        registry_client.register_schema("compat-value", Schema(V2_BREAKING, "AVRO"))
    assert (caught.value.http_status_code, caught.value.error_code) == (409, 409)
    registry_client.set_compatibility("compat-value", "NONE")
    registry_client.register_schema("compat-value", Schema(V2_BREAKING, "AVRO"))
    with pytest.raises(SchemaRegistryError) as caught:
        registry_client.set_compatibility("compat-value", "SIDEWAYS")
    assert caught.value.error_code == 42203


def test_verbose_compatibility_names_the_reason(schema_registry: RegistryProcess,
                                                registry_client: SchemaRegistryClient) -> None:
    registry_client.register_schema("verbose-value", Schema(V1, "AVRO"))
    status, body = http(schema_registry.url, "POST",
                        "/compatibility/subjects/verbose-value/versions/latest?verbose=true", {"schema": V2_BREAKING})
    assert status == 200 and body["is_compatible"] is False
    assert any("note" in m for m in body["messages"]), body


def test_soft_and_hard_deletes(registry_client: SchemaRegistryClient) -> None:
    first = registry_client.register_schema("deletes-value", Schema(V1, "AVRO"))
    registry_client.register_schema("deletes-value", Schema(V2, "AVRO"))
    assert registry_client.delete_version("deletes-value", 1) == 1
    assert registry_client.get_versions("deletes-value") == [2]
    with pytest.raises(SchemaRegistryError) as caught:
        registry_client.delete_version("deletes-value", 2, permanent=True)
    assert caught.value.error_code == 40407
    assert registry_client.delete_version("deletes-value", 1, permanent=True) == 1
    with pytest.raises(SchemaRegistryError) as caught:
        registry_client.get_version("deletes-value", 1)
    assert caught.value.error_code == 40402
    assert registry_client.delete_subject("deletes-value") == [2]
    assert "deletes-value" not in registry_client.get_subjects()
    assert registry_client.delete_subject("deletes-value", permanent=True) == [2]
    with pytest.raises(SchemaRegistryError) as caught:
        registry_client.get_versions("deletes-value")
    assert caught.value.error_code == 40401
    # Ids are never reused: a new schema gets an id above every earlier one.
    fresh_schema = Schema(record("Fresh", {"name": "x", "type": "int"}), "AVRO")
    fresh = registry_client.register_schema("deletes-value", fresh_schema)
    assert fresh > first + 1


def test_references(registry_client: SchemaRegistryClient) -> None:
    money = record("Money", {"name": "cents", "type": "long"})
    registry_client.register_schema("money-value", Schema(money, "AVRO"))
    ref = SchemaReference("Money", "money-value", 1)
    order = record("Invoice", {"name": "total", "type": "Money"})
    schema_id = registry_client.register_schema("invoice-value", Schema(order, "AVRO", [ref]))
    fetched = registry_client.get_schema(schema_id)
    assert [(r.name, r.subject, r.version) for r in fetched.references] == [("Money", "money-value", 1)]
    assert registry_client.get_referenced_by("money-value", 1) == [schema_id]


def test_global_config_and_mode(registry_client: SchemaRegistryClient) -> None:
    assert registry_client.get_compatibility() in ("BACKWARD", "FULL")
    assert registry_client.get_global_mode() == "READWRITE"
    assert registry_client.update_mode("import-value", "IMPORT") == "IMPORT"
    assert registry_client.get_mode("import-value") == "IMPORT"
    status, body = http(registry_client._rest_client.base_urls[0], "POST", "/subjects/import-value/versions",
                        {"schema": V1, "id": 5000, "version": 3})
    assert (status, body) == (200, {"id": 5000})
    assert registry_client.get_version("import-value", 3).schema_id == 5000
    assert registry_client.delete_mode("import-value") == "IMPORT"


BAD_INPUT = [
    ("POST", "/subjects/bad/versions", b"{not json", 422, 422),
    ("POST", "/subjects/bad/versions", b'{"schema": "{\\"type\\": "}', 422, 42201),
    ("POST", "/subjects/bad/versions", b'{"schema": "\\"string\\"", "schemaType": "XSD"}', 422, 42201),
    ("POST", "/subjects/bad/versions", b'{"schema": 42}', 422, 42201),
    ("POST", "/subjects/bad/versions", b"[]", 422, 422),
    ("GET", "/subjects/never-registered/versions", None, 404, 40401),
    ("GET", "/subjects/orders-value/versions/99", None, 404, 40402),
    ("GET", "/subjects/orders-value/versions/one", None, 422, 42202),
    ("GET", "/schemas/ids/999999", None, 404, 40403),
    ("PUT", "/config", b'{"compatibility": "MAYBE"}', 422, 42203),
    ("PUT", "/mode", b'{"mode": "WHENEVER"}', 422, 42204),
]


@pytest.mark.parametrize("method,path,raw,status,code", BAD_INPUT)
def test_bad_input_gets_the_documented_codes(schema_registry: RegistryProcess, registry_client: SchemaRegistryClient,
                                             method: str, path: str, raw: bytes | None, status: int, code: int) -> None:
    registry_client.register_schema("orders-value", Schema(V1, "AVRO"))
    got_status, body = http(schema_registry.url, method, path, raw=raw,
                            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    assert (got_status, body.get("error_code")) == (status, code), body
    assert set(body) == {"error_code", "message"}


def test_oversized_body_and_wrong_content_type(schema_registry: RegistryProcess) -> None:
    status, body = http(schema_registry.url, "POST", "/subjects/big/versions", raw=b"x" * (17 * 1024 * 1024))
    assert (status, body["error_code"]) == (413, 413)
    status, body = http(schema_registry.url, "POST", "/subjects/big/versions", raw=b'{"schema": "\\"int\\""}',
                        headers={"Content-Type": "text/plain"})
    assert (status, body["error_code"]) == (415, 415)
    # The registry is still fine after all of it.
    assert http(schema_registry.url, "GET", "/subjects")[0] == 200


def test_metadata_and_metrics(schema_registry: RegistryProcess) -> None:
    status, body = http(schema_registry.url, "GET", "/v1/metadata/id")
    assert status == 200 and body["scope"]["clusters"]["kafka-cluster"]
    status, text = http(schema_registry.url, "GET", "/metrics")
    assert status == 200 and "riverlog_schema_registry_writer 1.0" in text
    assert "riverlog_schema_registry_requests_total" in text


def riverlog(schema_registry: RegistryProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "riverlog", "schemas", "--url", schema_registry.url, *args],
                          capture_output=True, text=True, env=riverlog_env(), timeout=60)


def test_cli_register_list_get_check_config(schema_registry: RegistryProcess, tmp_path: Path) -> None:
    schema_file = tmp_path / "cli.avsc"
    schema_file.write_text(V1)
    done = riverlog(schema_registry, "register", "cli-value", "--file", str(schema_file))
    assert done.returncode == 0 and "registered under cli-value: id " in done.stdout, done.stderr
    schema_id = int(done.stdout.rsplit("id ", 1)[1])
    listed = riverlog(schema_registry, "list", "--prefix", "cli-")
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[0].split() == ["SUBJECT", "LATEST", "VERSION", "ID", "TYPE"]
    assert listed.stdout.splitlines()[1].split() == ["cli-value", "1", str(schema_id), "AVRO"]
    got = riverlog(schema_registry, "get", "cli-value")
    assert got.returncode == 0 and f"id {schema_id}" in got.stdout
    assert json.loads(got.stdout.split("\n", 1)[1]) == json.loads(V1)
    assert riverlog(schema_registry, "get", "--id", str(schema_id)).returncode == 0
    ok = riverlog(schema_registry, "check", "cli-value", "--schema", V2)
    assert (ok.returncode, ok.stdout.strip()) == (0, "compatible with cli-value")
    bad = riverlog(schema_registry, "check", "cli-value", "--schema", V2_BREAKING)
    assert bad.returncode == 1 and "NOT compatible" in bad.stdout and "note" in bad.stdout
    config = riverlog(schema_registry, "config", "cli-value", "--set", "full")
    assert config.returncode == 0 and config.stdout.splitlines()[1].split() == ["cli-value", "FULL"]
    missing = riverlog(schema_registry, "get", "no-such-subject")
    assert missing.returncode == 1 and "40401" in missing.stderr
