"""A real broker and a real ``riverlog schema-registry`` process, driven by confluent-kafka's
``SchemaRegistryClient`` and by raw HTTP. Expectations are Confluent Schema Registry's documented
answers (API reference and the schema deletion guide).

The schemas are Avro, parsed by the registry's Avro format.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from support.brokers import riverlog_env
from support.sr_registry import RegistryProcess, broker_with_registry, http

pytestmark = pytest.mark.integration


def record(name: str, *fields: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


V1 = record("Order", {"name": "id", "type": "long"})
V2 = record("Order", {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""})
V2_BREAKING = record("Order", {"name": "id", "type": "long"}, {"name": "note", "type": "string"})


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    with broker_with_registry(tmp_path_factory.mktemp("schema_registry_server")) as process:
        yield process


@pytest.fixture
def client(registry: RegistryProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def same(a: str, b: str) -> bool:
    return bool(json.loads(a) == json.loads(b))


def test_register_lookup_and_read_back(client: SchemaRegistryClient) -> None:
    schema_id = client.register_schema("orders-value", Schema(V1, "AVRO"))
    assert client.register_schema("orders-value", Schema(V1, "AVRO")) == schema_id
    assert client.register_schema("orders-copy-value", Schema(V1, "AVRO")) == schema_id  # shared id
    assert same(client.get_schema(schema_id).schema_str, V1)
    found = client.lookup_schema("orders-value", Schema(V1, "AVRO"))
    assert (found.schema_id, found.version, found.subject) == (schema_id, 1, "orders-value")
    v2 = client.register_schema("orders-value", Schema(V2, "AVRO"))
    assert v2 == schema_id + 1
    latest = client.get_latest_version("orders-value")
    assert (latest.version, latest.schema_id) == (2, v2) and same(latest.schema.schema_str, V2)
    assert client.get_versions("orders-value") == [1, 2]
    assert client.get_version("orders-value", 1).schema_id == schema_id
    assert {"orders-value", "orders-copy-value"} <= set(client.get_subjects())
    assert sorted(client.get_subjects_by_schema_id(schema_id)) == ["orders-copy-value", "orders-value"]
    assert {(v.subject, v.version) for v in client.get_schema_versions(schema_id)} == {
        ("orders-value", 1), ("orders-copy-value", 1)}
    assert set(client.get_schema_types()) == {"AVRO", "PROTOBUF", "JSON"}


def test_compatibility_config_and_409(client: SchemaRegistryClient) -> None:
    client.register_schema("compat-value", Schema(V1, "AVRO"))
    client.set_compatibility("compat-value", "BACKWARD_TRANSITIVE")
    assert client.get_compatibility("compat-value") == "BACKWARD_TRANSITIVE"
    assert client.test_compatibility("compat-value", Schema(V2, "AVRO")) is True
    assert client.test_compatibility("compat-value", Schema(V2_BREAKING, "AVRO")) is False
    assert client.test_compatibility_all_versions("compat-value", Schema(V2_BREAKING, "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema("compat-value", Schema(V2_BREAKING, "AVRO"))
    assert (caught.value.http_status_code, caught.value.error_code) == (409, 409)
    client.set_compatibility("compat-value", "NONE")
    client.register_schema("compat-value", Schema(V2_BREAKING, "AVRO"))
    with pytest.raises(SchemaRegistryError) as caught:
        client.set_compatibility("compat-value", "SIDEWAYS")
    assert caught.value.error_code == 42203


def test_verbose_compatibility_names_the_reason(registry: RegistryProcess, client: SchemaRegistryClient) -> None:
    client.register_schema("verbose-value", Schema(V1, "AVRO"))
    status, body = http(registry.url, "POST", "/compatibility/subjects/verbose-value/versions/latest?verbose=true",
                        {"schema": V2_BREAKING})
    assert status == 200 and body["is_compatible"] is False
    assert any("note" in m for m in body["messages"]), body


def test_soft_and_hard_deletes(client: SchemaRegistryClient) -> None:
    first = client.register_schema("deletes-value", Schema(V1, "AVRO"))
    client.register_schema("deletes-value", Schema(V2, "AVRO"))
    assert client.delete_version("deletes-value", 1) == 1
    assert client.get_versions("deletes-value") == [2]
    with pytest.raises(SchemaRegistryError) as caught:
        client.delete_version("deletes-value", 2, permanent=True)
    assert caught.value.error_code == 40407
    assert client.delete_version("deletes-value", 1, permanent=True) == 1
    with pytest.raises(SchemaRegistryError) as caught:
        client.get_version("deletes-value", 1)
    assert caught.value.error_code == 40402
    assert client.delete_subject("deletes-value") == [2]
    assert "deletes-value" not in client.get_subjects()
    assert client.delete_subject("deletes-value", permanent=True) == [2]
    with pytest.raises(SchemaRegistryError) as caught:
        client.get_versions("deletes-value")
    assert caught.value.error_code == 40401
    # Ids are never reused: a new schema gets an id above every earlier one.
    fresh = client.register_schema("deletes-value", Schema(record("Fresh", {"name": "x", "type": "int"}), "AVRO"))
    assert fresh > first + 1


def test_references(client: SchemaRegistryClient) -> None:
    money = record("Money", {"name": "cents", "type": "long"})
    client.register_schema("money-value", Schema(money, "AVRO"))
    ref = SchemaReference("Money", "money-value", 1)
    order = record("Invoice", {"name": "total", "type": "Money"})
    schema_id = client.register_schema("invoice-value", Schema(order, "AVRO", [ref]))
    fetched = client.get_schema(schema_id)
    assert [(r.name, r.subject, r.version) for r in fetched.references] == [("Money", "money-value", 1)]
    assert client.get_referenced_by("money-value", 1) == [schema_id]


def test_global_config_and_mode(client: SchemaRegistryClient) -> None:
    assert client.get_compatibility() in ("BACKWARD", "FULL")
    assert client.get_global_mode() == "READWRITE"
    assert client.update_mode("import-value", "IMPORT") == "IMPORT"
    assert client.get_mode("import-value") == "IMPORT"
    status, body = http(client._rest_client.base_urls[0], "POST", "/subjects/import-value/versions",
                        {"schema": V1, "id": 5000, "version": 3})
    assert (status, body) == (200, {"id": 5000})
    assert client.get_version("import-value", 3).schema_id == 5000
    assert client.delete_mode("import-value") == "IMPORT"


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
def test_bad_input_gets_the_documented_codes(registry: RegistryProcess, client: SchemaRegistryClient, method: str,
                                            path: str, raw: bytes | None, status: int, code: int) -> None:
    client.register_schema("orders-value", Schema(V1, "AVRO"))
    got_status, body = http(registry.url, method, path, raw=raw,
                            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    assert (got_status, body.get("error_code")) == (status, code), body
    assert set(body) == {"error_code", "message"}


def test_oversized_body_and_wrong_content_type(registry: RegistryProcess) -> None:
    status, body = http(registry.url, "POST", "/subjects/big/versions", raw=b"x" * (17 * 1024 * 1024))
    assert (status, body["error_code"]) == (413, 413)
    status, body = http(registry.url, "POST", "/subjects/big/versions", raw=b'{"schema": "\\"int\\""}',
                        headers={"Content-Type": "text/plain"})
    assert (status, body["error_code"]) == (415, 415)
    # The registry is still fine after all of it.
    assert http(registry.url, "GET", "/subjects")[0] == 200


def test_metadata_and_metrics(registry: RegistryProcess) -> None:
    status, body = http(registry.url, "GET", "/v1/metadata/id")
    assert status == 200 and body["scope"]["clusters"]["kafka-cluster"]
    status, text = http(registry.url, "GET", "/metrics")
    assert status == 200 and "riverlog_schema_registry_writer 1.0" in text
    assert "riverlog_schema_registry_requests_total" in text


def riverlog(registry: RegistryProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "riverlog", "schemas", "--url", registry.url, *args],
                          capture_output=True, text=True, env=riverlog_env(), timeout=60)


def test_cli_register_list_get_check_config(registry: RegistryProcess, tmp_path: Path) -> None:
    schema_file = tmp_path / "cli.avsc"
    schema_file.write_text(V1)
    done = riverlog(registry, "register", "cli-value", "--file", str(schema_file))
    assert done.returncode == 0 and "registered under cli-value: id " in done.stdout, done.stderr
    schema_id = int(done.stdout.rsplit("id ", 1)[1])
    listed = riverlog(registry, "list", "--prefix", "cli-")
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[0].split() == ["SUBJECT", "LATEST", "VERSION", "ID", "TYPE"]
    assert listed.stdout.splitlines()[1].split() == ["cli-value", "1", str(schema_id), "AVRO"]
    got = riverlog(registry, "get", "cli-value")
    assert got.returncode == 0 and f"id {schema_id}" in got.stdout
    assert json.loads(got.stdout.split("\n", 1)[1]) == json.loads(V1)
    assert riverlog(registry, "get", "--id", str(schema_id)).returncode == 0
    ok = riverlog(registry, "check", "cli-value", "--schema", V2)
    assert (ok.returncode, ok.stdout.strip()) == (0, "compatible with cli-value")
    bad = riverlog(registry, "check", "cli-value", "--schema", V2_BREAKING)
    assert bad.returncode == 1 and "NOT compatible" in bad.stdout and "note" in bad.stdout
    config = riverlog(registry, "config", "cli-value", "--set", "full")
    assert config.returncode == 0 and config.stdout.splitlines()[1].split() == ["cli-value", "FULL"]
    missing = riverlog(registry, "get", "no-such-subject")
    assert missing.returncode == 1 and "40401" in missing.stderr
