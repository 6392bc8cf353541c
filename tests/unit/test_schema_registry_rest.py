"""The REST API's handlers over an in-process store: Confluent's paths, bodies and error codes.

Expected answers are Confluent Schema Registry's documented ones (API reference: error codes
40401-40408, 42201-42206, 409 with the reasons, 415/422 for bodies; register answers ``{"id"}``;
soft deletes before hard deletes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from riverlog.schema_registry.metrics import RegistryMetrics
from riverlog.schema_registry.rest import FORWARDED_HEADER, V1_JSON, AlwaysWriter, RestApi
from riverlog.schema_registry.service import InMemoryLog, Registry
from riverlog.schema_registry.store import Store

pytestmark = pytest.mark.unit

CT = {"Content-Type": V1_JSON}


def record(*fields: tuple[str, str], name: str = "User") -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]})


USER_V1 = record(("id", "long"))
USER_V2_OPTIONAL = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "id", "type": "long"}, {"name": "email", "type": "string", "default": ""}]})
USER_V2_REQUIRED = record(("id", "long"), ("email", "string"))


def make_api(store: Store | None = None, max_body: int = 64 * 1024) -> RestApi:
    store = store or Store()
    registry = Registry(store, InMemoryLog(store))
    return RestApi(registry, AlwaysWriter(), RegistryMetrics(), cluster_id="c1", group_id="sr", max_body=max_body)


Scenario = Callable[[TestClient], Awaitable[None]]


def run(scenario: Scenario, api: RestApi | None = None) -> None:
    async def main() -> None:
        async with TestClient(TestServer((api or make_api()).app())) as client:
            await scenario(client)

    asyncio.run(main())


async def call(client: TestClient, method: str, path: str, body: object = None, *, raw: bytes | None = None,
               headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    async with client.request(method, path, data=data, headers=headers or CT) as response:
        text = await response.text()
        if response.status >= 400:
            assert response.content_type in (V1_JSON, "application/json"), response.content_type
            parsed = json.loads(text)
            assert set(parsed) == {"error_code", "message"}, parsed
            return response.status, parsed
        return response.status, json.loads(text) if text else None


async def register(client: TestClient, subject: str, schema: str, **extra: object) -> int:
    status, body = await call(client, "POST", f"/subjects/{subject}/versions", {"schema": schema, **extra})
    assert status == 200, body
    return int(body["id"])


def test_register_lookup_versions_and_ids() -> None:
    async def scenario(c: TestClient) -> None:
        first = await register(c, "users-value", USER_V1)
        assert first == 1
        assert await register(c, "users-value", USER_V1) == 1  # the same schema again: no new version
        assert await register(c, "other-value", USER_V1) == 1  # same schema, other subject: same id
        assert await register(c, "users-value", USER_V2_OPTIONAL) == 2
        assert await call(c, "GET", "/subjects") == (200, ["other-value", "users-value"])
        assert await call(c, "GET", "/subjects/users-value/versions") == (200, [1, 2])
        status, latest = await call(c, "GET", "/subjects/users-value/versions/latest")
        assert status == 200 and (latest["subject"], latest["version"], latest["id"]) == ("users-value", 2, 2)
        assert "schemaType" not in latest  # AVRO, Confluent's default, is left out
        assert json.loads(latest["schema"]) == json.loads(USER_V2_OPTIONAL)
        assert (await call(c, "GET", "/subjects/users-value/versions/-1"))[1]["version"] == 2
        status, by_id = await call(c, "GET", "/schemas/ids/1")
        assert status == 200 and json.loads(by_id["schema"]) == json.loads(USER_V1)
        assert (await call(c, "GET", "/schemas/ids/1/schema"))[1] == json.loads(USER_V1)
        assert (await call(c, "GET", "/subjects/users-value/versions/1/schema"))[1] == json.loads(USER_V1)
        assert await call(c, "GET", "/schemas/ids/1/subjects") == (200, ["other-value", "users-value"])
        assert await call(c, "GET", "/schemas/ids/1/versions") == (
            200, [{"subject": "other-value", "version": 1}, {"subject": "users-value", "version": 1}])
        status, found = await call(c, "POST", "/subjects/users-value", {"schema": USER_V1})
        assert status == 200 and (found["version"], found["id"]) == (1, 1)
        assert len((await call(c, "GET", "/schemas"))[1]) == 3
        assert len((await call(c, "GET", "/schemas?latestOnly=true&subjectPrefix=users"))[1]) == 1

    run(scenario)


def test_not_found_codes() -> None:
    async def scenario(c: TestClient) -> None:
        await register(c, "s", USER_V1)
        assert (await call(c, "GET", "/subjects/nope/versions"))[1]["error_code"] == 40401
        assert (await call(c, "GET", "/subjects/nope/versions/1"))[1]["error_code"] == 40401
        status, body = await call(c, "GET", "/subjects/s/versions/7")
        assert (status, body["error_code"]) == (404, 40402)
        assert (await call(c, "GET", "/schemas/ids/99"))[1]["error_code"] == 40403
        assert (await call(c, "GET", "/schemas/ids/xyz"))[1]["error_code"] == 40403
        assert (await call(c, "POST", "/subjects/s", {"schema": USER_V2_OPTIONAL}))[1]["error_code"] == 40403
        assert (await call(c, "POST", "/subjects/nope", {"schema": USER_V1}))[1]["error_code"] == 40401
        status, body = await call(c, "GET", "/subjects/s/versions/zero")
        assert (status, body["error_code"]) == (422, 42202)
        assert (await call(c, "GET", "/subjects/s/versions/0"))[1]["error_code"] == 42202
        assert (await call(c, "GET", "/no/such/path"))[0] == 404
        assert (await call(c, "PATCH", "/subjects"))[0] == 405

    run(scenario)


def test_bad_bodies_never_a_500() -> None:
    async def scenario(c: TestClient) -> None:
        cases: list[tuple[bytes, int, int]] = [
            (b"{not json", 422, 422),
            (b"[1, 2]", 422, 422),
            (b"", 422, 422),
            (b'{"schema": 5}', 422, 42201),
            (b'{"schema": ""}', 422, 42201),
            (b'{"schema": "{\\"type\\": "}', 422, 42201),
            (b'{"schema": "\\"string\\"", "schemaType": "XML"}', 422, 42201),
            (b'{"schema": "\\"string\\"", "references": [{"name": "x"}]}', 422, 42201),
            (b'{"schema": "\\"string\\"", "references": [{"name": "x", "subject": "none", "version": 1}]}',
             422, 42201),
            (b'{"schema": "\\"string\\"", "references": "nope"}', 422, 422),
            (b'{"schema": "\\"string\\"", "id": "seven"}', 422, 422),
            (b"{\"schema\": \"\\udcff\"}", 422, 42201),
            (b"\xff\xfe", 422, 422),
        ]
        for raw, status, code in cases:
            got = await call(c, "POST", "/subjects/s/versions", raw=raw)
            assert (got[0], got[1]["error_code"]) == (status, code), (raw, got)
        status, body = await call(c, "POST", "/subjects/s/versions", raw=b'{"schema": "\\"string\\""}',
                                  headers={"Content-Type": "text/xml"})
        assert (status, body["error_code"]) == (415, 415)
        status, body = await call(c, "POST", "/subjects/s/versions", raw=b"x" * (64 * 1024 + 1))
        assert (status, body["error_code"]) == (413, 413)
        # Every JSON content type Confluent accepts, and curl's default.
        for content_type in ("application/json", "application/vnd.schemaregistry+json", "application/octet-stream"):
            got = await call(c, "POST", "/subjects/s/versions", {"schema": USER_V1},
                             headers={"Content-Type": content_type})
            assert got == (200, {"id": 1})

    run(scenario)


def test_response_content_type_follows_accept() -> None:
    async def scenario(c: TestClient) -> None:
        async with c.get("/subjects", headers={"Accept": "application/json"}) as r:
            assert r.content_type == "application/json"
        async with c.get("/subjects") as r:
            assert r.content_type == V1_JSON

    run(scenario)


def test_incompatible_is_409_with_reasons_and_compatibility_endpoint_verbose() -> None:
    async def scenario(c: TestClient) -> None:
        await register(c, "s", USER_V1)
        status, body = await call(c, "POST", "/subjects/s/versions", {"schema": USER_V2_REQUIRED})
        assert (status, body["error_code"]) == (409, 409)
        assert "email" in body["message"] and "incompatible" in body["message"]
        status, body = await call(c, "POST", "/compatibility/subjects/s/versions/latest?verbose=true",
                                  {"schema": USER_V2_REQUIRED})
        assert status == 200 and body["is_compatible"] is False and body["messages"]
        assert any("oldSchemaVersion: 1" in m for m in body["messages"])
        status, body = await call(c, "POST", "/compatibility/subjects/s/versions/1", {"schema": USER_V2_OPTIONAL})
        assert (status, body) == (200, {"is_compatible": True})
        assert (await call(c, "POST", "/compatibility/subjects/s/versions?verbose=True",
                           {"schema": USER_V2_OPTIONAL}))[1] == {"is_compatible": True, "messages": []}
        assert (await call(c, "POST", "/compatibility/subjects/s/versions/9", {"schema": USER_V1}))[1][
            "error_code"] == 40402
        assert (await call(c, "POST", "/compatibility/subjects/new/versions/latest", {"schema": USER_V1}))[1][
            "error_code"] == 40401
        assert (await call(c, "POST", "/compatibility/subjects/new/versions", {"schema": USER_V1}))[1] == {
            "is_compatible": True}
        # NONE lets anything in.
        assert await call(c, "PUT", "/config/s", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
        assert await register(c, "s", USER_V2_REQUIRED) == 2

    run(scenario)


def test_transitive_modes_check_every_earlier_version() -> None:
    v1 = record(("a", "string"))
    v2 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "a", "type": "string", "default": ""}]})
    v3 = record(("a", "string"))

    async def scenario(c: TestClient) -> None:
        await call(c, "PUT", "/config/t", {"compatibility": "BACKWARD_TRANSITIVE"})
        await register(c, "t", record(("b", "int")))
        # v2's field has a default: readable from v1's data; then v3 drops the default, which
        # BACKWARD against v2 alone allows but not against v1 (no "a" there).
        await register(c, "t", v2)
        status, body = await call(c, "POST", "/subjects/t/versions", {"schema": v3})
        assert (status, body["error_code"]) == (409, 409), body
        await call(c, "PUT", "/config/t", {"compatibility": "BACKWARD"})
        assert await register(c, "t", v3) == 3
        assert v1 == v3

    run(scenario)


def test_soft_then_hard_delete_of_versions_and_subjects() -> None:
    async def scenario(c: TestClient) -> None:
        await register(c, "s", USER_V1)
        await register(c, "s", USER_V2_OPTIONAL)
        # Hard before soft: 40407; soft twice: 40406.
        assert (await call(c, "DELETE", "/subjects/s/versions/1?permanent=true"))[1]["error_code"] == 40407
        assert await call(c, "DELETE", "/subjects/s/versions/1") == (200, 1)
        assert (await call(c, "DELETE", "/subjects/s/versions/1"))[1]["error_code"] == 40406
        assert await call(c, "GET", "/subjects/s/versions") == (200, [2])
        assert await call(c, "GET", "/subjects/s/versions?deleted=true") == (200, [1, 2])
        assert (await call(c, "GET", "/subjects/s/versions/1"))[1]["error_code"] == 40402
        assert (await call(c, "GET", "/subjects/s/versions/1?deleted=true"))[1]["version"] == 1
        assert (await call(c, "GET", "/schemas/ids/1"))[0] == 200  # ids outlive soft deletes
        assert (await call(c, "POST", "/subjects/s", {"schema": USER_V1}))[1]["error_code"] == 40403
        assert (await call(c, "POST", "/subjects/s?deleted=true", {"schema": USER_V1}))[1]["version"] == 1
        assert await call(c, "DELETE", "/subjects/s/versions/1?permanent=true") == (200, 1)
        assert (await call(c, "GET", "/schemas/ids/1"))[1]["error_code"] == 40403
        # The whole subject: hard before soft is 40405, soft twice 40404.
        assert (await call(c, "DELETE", "/subjects/s?permanent=true"))[1]["error_code"] == 40405
        assert await call(c, "DELETE", "/subjects/s") == (200, [2])
        assert (await call(c, "DELETE", "/subjects/s"))[1]["error_code"] == 40404
        assert await call(c, "GET", "/subjects") == (200, [])
        assert await call(c, "GET", "/subjects?deleted=true") == (200, ["s"])
        # Re-registering after a soft delete: a new version, the same id as before.
        assert await register(c, "s", USER_V2_OPTIONAL) == 2
        assert await call(c, "GET", "/subjects/s/versions") == (200, [3])
        await call(c, "DELETE", "/subjects/s")
        assert await call(c, "DELETE", "/subjects/s?permanent=true") == (200, [2, 3])
        assert (await call(c, "GET", "/subjects/s/versions?deleted=true"))[1]["error_code"] == 40401
        assert (await call(c, "DELETE", "/subjects/s"))[1]["error_code"] == 40401
        # Ids are never reused, even after hard deletes.
        assert await register(c, "fresh", record(("z", "int"))) == 3

    run(scenario)


def test_references_resolve_and_block_deletes() -> None:
    async def scenario(c: TestClient) -> None:
        await register(c, "money", record(("cents", "long"), name="Money"))
        ref = [{"name": "Money", "subject": "money", "version": 1}]
        order = await register(c, "order", record(("total", "Money")), references=ref)
        assert await call(c, "GET", "/subjects/money/versions/1/referencedby") == (200, [order])
        status, body = await call(c, "GET", f"/schemas/ids/{order}")
        assert body["references"] == ref
        status, body = await call(c, "DELETE", "/subjects/money/versions/1")
        assert (status, body["error_code"]) == (422, 42206)
        assert (await call(c, "DELETE", "/subjects/money"))[1]["error_code"] == 42206

    run(scenario)


def test_config_endpoints() -> None:
    async def scenario(c: TestClient) -> None:
        assert await call(c, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
        assert await call(c, "PUT", "/config", {"compatibility": "full"}) == (200, {"compatibility": "FULL"})
        assert await call(c, "GET", "/config") == (200, {"compatibilityLevel": "FULL"})
        assert (await call(c, "GET", "/config/s"))[1]["error_code"] == 40408
        assert await call(c, "GET", "/config/s?defaultToGlobal=true") == (200, {"compatibilityLevel": "FULL"})
        await call(c, "PUT", "/config/s", {"compatibility": "FORWARD_TRANSITIVE"})
        assert await call(c, "GET", "/config/s") == (200, {"compatibilityLevel": "FORWARD_TRANSITIVE"})
        assert await call(c, "DELETE", "/config/s") == (200, {"compatibilityLevel": "FORWARD_TRANSITIVE"})
        assert (await call(c, "DELETE", "/config/s"))[1]["error_code"] == 40401
        assert await call(c, "DELETE", "/config") == (200, {"compatibilityLevel": "FULL"})
        assert await call(c, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
        for bad in ({"compatibility": "SIDEWAYS"}, {"compatibility": 3}, {}):
            status, body = await call(c, "PUT", "/config", bad)
            assert (status, body["error_code"]) == (422, 42203)

    run(scenario)


def test_modes_readonly_and_import() -> None:
    async def scenario(c: TestClient) -> None:
        assert await call(c, "GET", "/mode") == (200, {"mode": "READWRITE"})
        assert (await call(c, "PUT", "/mode", {"mode": "SOMETIMES"}))[1]["error_code"] == 42204
        # IMPORT: a client registers with the id and version it brings.
        assert await call(c, "PUT", "/mode", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
        assert await register(c, "imported", USER_V1, id=42, version=5) == 42
        assert await call(c, "GET", "/subjects/imported/versions") == (200, [5])
        status, body = await call(c, "POST", "/subjects/other/versions", {"schema": USER_V2_OPTIONAL, "id": 42})
        assert (status, body["error_code"]) == (422, 42205)  # id 42 is another schema
        assert await call(c, "PUT", "/mode", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})
        # With schemas present, IMPORT needs force=true.
        assert (await call(c, "PUT", "/mode", {"mode": "IMPORT"}))[1]["error_code"] == 42205
        assert (await call(c, "PUT", "/mode?force=true", {"mode": "IMPORT"}))[0] == 200
        await call(c, "PUT", "/mode", {"mode": "READWRITE"})
        # Ids continue after the highest imported one.
        assert await register(c, "next", USER_V2_OPTIONAL) == 43
        # An id outside IMPORT mode is refused.
        assert (await call(c, "POST", "/subjects/x/versions", {"schema": record(("q", "int")), "id": 77}))[1][
            "error_code"] == 42205
        # READONLY per subject.
        assert await call(c, "PUT", "/mode/next", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
        assert (await call(c, "POST", "/subjects/next/versions", {"schema": record(("q", "int"))}))[1][
            "error_code"] == 42205
        assert (await call(c, "DELETE", "/subjects/next"))[1]["error_code"] == 42205
        assert await call(c, "GET", "/mode/next") == (200, {"mode": "READONLY"})
        assert (await call(c, "GET", "/mode/imported"))[1]["error_code"] == 40409
        assert await call(c, "GET", "/mode/imported?defaultToGlobal=true") == (200, {"mode": "READWRITE"})
        assert await call(c, "DELETE", "/mode/next") == (200, {"mode": "READONLY"})
        # Writable again once the subject's own mode is gone (the global READWRITE applies).
        assert (await call(c, "DELETE", "/subjects/next/versions/1"))[0] == 200

    run(scenario)


def test_general_endpoints_and_metrics() -> None:
    async def scenario(c: TestClient) -> None:
        assert await call(c, "GET", "/") == (200, {})
        assert await call(c, "GET", "/schemas/types") == (200, ["AVRO", "PROTOBUF", "JSON"])
        assert await call(c, "GET", "/v1/metadata/id") == (200, {"scope": {"path": [], "clusters": {
            "kafka-cluster": "c1", "schema-registry-cluster": "sr"}}})
        await call(c, "GET", "/subjects/x/versions")
        async with c.get("/metrics") as r:
            text = await r.text()
        assert 'riverlog_schema_registry_requests_total{endpoint="/subjects/{subject}/versions",method="GET",' \
               'status="404"} 1.0' in text
        assert 'riverlog_schema_registry_errors_total{error_code="40401"} 1.0' in text
        assert "riverlog_schema_registry_request_seconds_bucket" in text

    run(scenario)


class _Follower:
    """A role that never writes and names the writer's URL."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.waited_for: list[int] = []

    def is_writer(self) -> bool:
        return False

    def writer_url(self) -> str | None:
        return self.url

    async def wait_for_offset(self, offset: int, timeout: float) -> bool:
        self.waited_for.append(offset)
        return True


def test_a_follower_forwards_writes_and_answers_as_the_writer_did() -> None:
    async def main() -> None:
        store = Store()  # both read "the same topic": here, the very same store
        writer = make_api(store)
        async with TestServer(writer.app()) as writer_server:
            role = _Follower(str(writer_server.make_url("/")))
            registry = Registry(store, InMemoryLog(store))
            follower = RestApi(registry, role, RegistryMetrics())
            async with TestClient(TestServer(follower.app())) as c:
                assert await register(c, "s", USER_V1) == 1
                assert role.waited_for == [0]
                status, body = await call(c, "POST", "/subjects/s/versions", {"schema": USER_V2_REQUIRED})
                assert (status, body["error_code"]) == (409, 409)  # the writer's answer, passed on
                assert await call(c, "PUT", "/config", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
                assert await call(c, "GET", "/subjects/s/versions") == (200, [1])  # reads stay local
                # A request already forwarded once is not forwarded again (no loops).
                status, body = await call(c, "DELETE", "/subjects/s", headers={**CT, FORWARDED_HEADER: "1"})
                assert (status, body["error_code"]) == (500, 50003)
                role.url = None
                assert (await call(c, "DELETE", "/subjects/s"))[1]["error_code"] == 50004
                role.url = "http://127.0.0.1:9"  # nothing listens
                assert (await call(c, "DELETE", "/subjects/s"))[1]["error_code"] == 50003

    asyncio.run(main())


def test_an_unexpected_failure_is_a_json_500_without_traceback() -> None:
    api = make_api()

    def broken(schema_type: str, text: str, refs: object) -> Any:
        raise RuntimeError("boom")

    api.registry.parser = broken  # type: ignore[assignment]

    async def scenario(c: TestClient) -> None:
        status, body = await call(c, "POST", "/subjects/s/versions", {"schema": USER_V1})
        assert (status, body) == (500, {"error_code": 500, "message": "Internal Server Error"})

    run(scenario, api)


def test_handler_table_has_every_endpoint() -> None:
    app = make_api().app()
    paths = {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None}
    for method, path in [("GET", "/subjects/{subject}/versions/{version}/referencedby"),
                         ("POST", "/compatibility/subjects/{subject}/versions"),
                         ("DELETE", "/config/{subject}"), ("PUT", "/mode/{subject}")]:
        assert (method, path) in paths
    assert isinstance(app, web.Application)


def test_a_format_module_missing_is_an_api_error() -> None:
    api = make_api()

    def missing(schema_type: str, text: str, refs: object) -> Any:
        raise ModuleNotFoundError("No module named 'riverlog.schema_registry.formats.avro'",
                                  name="riverlog.schema_registry.formats.avro")

    api.registry.parser = missing  # type: ignore[assignment]

    async def scenario(c: TestClient) -> None:
        status, body = await call(c, "POST", "/subjects/s/versions", {"schema": USER_V1})
        assert (status, body["error_code"]) == (422, 42201) and "not available" in body["message"]

    run(scenario, api)
