"""Confluent Schema Registry's REST API on aiohttp.

Paths, query parameters, content types and error bodies (``{"error_code", "message"}``) as
Confluent documents them. Writes on an instance that is not the writer are forwarded over HTTP
to the writer and answered as it answered; the forwarding instance then waits until it has read
the write from ``_schemas`` itself, so a client that registers through one instance can read the
result back from the same instance at once.

With ``authentication.method=BASIC`` every request but the skipped paths needs a user's
credentials (401 and a ``WWW-Authenticate`` challenge without them, 403 for a user without an
allowed role), and a forwarded write carries the caller's ``Authorization`` header, so the writer
decides on the same user.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from . import errors
from .formats import SCHEMA_TYPES
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from .metrics import RegistryMetrics
from .records import SchemaValue
from .security_settings import AuthSettings
from .service import Registry, SchemaRequest, parse_version
from .store import StoredSchema

log = logging.getLogger(__name__)

V1_JSON = "application/vnd.schemaregistry.v1+json"
RESPONSE_TYPES = (V1_JSON, "application/vnd.schemaregistry+json", "application/json")
# Request bodies: the three JSON types, and what curl sends without -H (Confluent accepts both).
REQUEST_TYPES = (*RESPONSE_TYPES, "application/octet-stream", "application/x-www-form-urlencoded")
DEFAULT_MAX_BODY = 16 * 1024 * 1024
FORWARDED_HEADER = "X-Riverlog-Forwarded"
OFFSET_HEADER = "X-Riverlog-Schemas-Offset"
FORWARD_TIMEOUT = 30.0
CATCH_UP_TIMEOUT = 10.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Role(Protocol):
    """Whether this instance writes, and where the writer is."""

    def is_writer(self) -> bool: ...

    def writer_url(self) -> str | None: ...

    async def wait_for_offset(self, offset: int, timeout: float) -> bool: ...


class AlwaysWriter:
    """A lone in-process registry (unit tests, or a store that is not shared)."""

    def is_writer(self) -> bool:
        return True

    def writer_url(self) -> str | None:
        return None

    async def wait_for_offset(self, offset: int, timeout: float) -> bool:
        return True


def _flag(request: web.Request, name: str) -> bool:
    # confluent-kafka's Python client sends Python's spelling: "True"/"False".
    return request.query.get(name, "false").strip().lower() == "true"


def _json_response(body: object, status: int = 200, content_type: str = V1_JSON) -> web.Response:
    return web.Response(status=status, body=json.dumps(body).encode(), content_type=content_type)


def _response_type(request: web.Request) -> str:
    accept = request.headers.get("Accept", "")
    for wanted in (part.split(";")[0].strip() for part in accept.split(",")):
        if wanted in RESPONSE_TYPES:
            return wanted
    return V1_JSON


def _schema_json(value: SchemaValue) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.id}
    _type_and_refs(out, value.schema_type, value.references)
    out["schema"] = value.schema
    return out


def _type_and_refs(out: dict[str, Any], schema_type: str, references: tuple[Any, ...]) -> None:
    if schema_type != "AVRO":  # Confluent leaves the default type out
        out["schemaType"] = schema_type
    if references:
        out["references"] = [r.to_json() for r in references]


def _stored_json(stored: StoredSchema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _type_and_refs(out, stored.schema_type, stored.references)
    out["schema"] = stored.schema
    return out


def _schema_id(request: web.Request) -> int:
    text = request.match_info["id"]
    try:
        return int(text)
    except ValueError:
        raise errors.RegistryError(404, 40403, f"Schema {text} not found") from None


class RestApi:
    def __init__(self, registry: Registry, role: Role, metrics: RegistryMetrics, *,
                 cluster_id: str = "", group_id: str = "", max_body: int = DEFAULT_MAX_BODY,
                 auth: AuthSettings | None = None, forward_ssl: ssl.SSLContext | None = None) -> None:
        self.registry = registry
        self.role = role
        self.metrics = metrics
        self.cluster_id = cluster_id
        self.group_id = group_id
        self.max_body = max_body
        self.auth = auth
        self.forward_ssl = forward_ssl  # checks the writer's certificate when forwarding over https
        self._session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        # client_max_size above our own limit: we answer 413 ourselves, in Confluent's body shape.
        app = web.Application(middlewares=[self._middleware], client_max_size=self.max_body + 1)
        r = app.router
        r.add_get("/", self.root)
        r.add_get("/metrics", self.prometheus)
        r.add_get("/v1/metadata/id", self.metadata_id)
        r.add_get("/contexts", self.contexts)
        r.add_get("/schemas", self.list_schemas)
        r.add_get("/schemas/types", self.schema_types)
        r.add_get("/schemas/ids/{id}", self.schema_by_id)
        r.add_get("/schemas/ids/{id}/schema", self.raw_schema_by_id)
        r.add_get("/schemas/ids/{id}/subjects", self.id_subjects)
        r.add_get("/schemas/ids/{id}/versions", self.id_versions)
        r.add_get("/subjects", self.list_subjects)
        r.add_post("/subjects/{subject}", self.lookup)
        r.add_delete("/subjects/{subject}", self.write(self.delete_subject))
        r.add_get("/subjects/{subject}/versions", self.list_versions)
        r.add_post("/subjects/{subject}/versions", self.write(self.register))
        r.add_get("/subjects/{subject}/versions/{version}", self.get_version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self.raw_version)
        r.add_get("/subjects/{subject}/versions/{version}/referencedby", self.referenced_by)
        r.add_delete("/subjects/{subject}/versions/{version}", self.write(self.delete_version))
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self.compatibility)
        r.add_post("/compatibility/subjects/{subject}/versions", self.compatibility)
        for path in ("/config", "/config/{subject}"):
            r.add_get(path, self.get_config)
            r.add_put(path, self.write(self.put_config))
            r.add_delete(path, self.write(self.delete_config))
        r.add_get("/mode", self.get_mode)
        r.add_put("/mode", self.write(self.put_mode))
        r.add_get("/mode/{subject}", self.get_mode)
        r.add_put("/mode/{subject}", self.write(self.put_mode))
        r.add_delete("/mode/{subject}", self.write(self.delete_mode))
        app.on_cleanup.append(self._close_session)
        return app

    async def _close_session(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    # --- cross-cutting: errors, content types, metrics -------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.monotonic()
        info = request.match_info.route.resource
        endpoint = info.canonical if info is not None else "unmatched"
        try:
            self._authenticate(request)
            response = await handler(request)
        except errors.RegistryError as exc:
            response = self._error(request, exc)
        except web.HTTPException as exc:
            # Routing answers (no such path, method not allowed), in the API's error shape.
            response = self._error(request, errors.RegistryError(exc.status, exc.status, exc.reason))
        except Exception:
            # A bug, not bad input: logged with its traceback here, never sent to the client.
            log.exception("%s %s failed", request.method, request.path)
            response = self._error(request, errors.RegistryError(500, 500, "Internal Server Error"))
        self.metrics.requests.labels(request.method, endpoint, str(response.status)).inc()
        self.metrics.latency.labels(request.method, endpoint).observe(time.monotonic() - started)
        return response

    def _authenticate(self, request: web.Request) -> None:
        """Before anything else, routing included: an unauthenticated caller learns nothing."""
        if self.auth is None or self.auth.skips(request.path):
            return
        decision = self.auth.authenticator.decide(request.headers.get("Authorization"))
        if decision.status == 401:
            raise errors.unauthorized(self.auth.authenticator.challenge())
        if decision.status == 403:
            raise errors.forbidden()

    def _error(self, request: web.Request, exc: errors.RegistryError) -> web.Response:
        self.metrics.errors.labels(str(exc.code)).inc()
        response = _json_response(exc.body(), exc.status, _response_type(request))
        response.headers.update(exc.headers)
        return response

    def ok(self, request: web.Request, body: object) -> web.Response:
        return _json_response(body, 200, _response_type(request))

    async def body(self, request: web.Request) -> object:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type and content_type not in REQUEST_TYPES:
            raise errors.RegistryError(415, 415, f"HTTP 415 Unsupported Media Type: {content_type}")
        if request.content_length is not None and request.content_length > self.max_body:
            raise errors.RegistryError(413, 413, f"Request body of {request.content_length} bytes is larger "
                                                 f"than the limit of {self.max_body} bytes")
        data = await request.content.read(self.max_body + 1)
        if len(data) > self.max_body:
            raise errors.RegistryError(413, 413, f"Request body is larger than the limit of {self.max_body} bytes")
        if not data.strip():
            raise errors.unprocessable("the request has no body; a JSON object is expected")
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.unprocessable(f"Unexpected character in the JSON body: {exc}") from None

    # --- forwarding of writes --------------------------------------------------------------------

    def write(self, handler: Handler) -> Handler:
        """Serve a write here when this instance is the writer; else forward it to the writer."""

        async def serve(request: web.Request) -> web.StreamResponse:
            if self.role.is_writer():
                response = await handler(request)
                response.headers[OFFSET_HEADER] = str(self.registry.store.offset)
                return response
            if request.headers.get(FORWARDED_HEADER):
                # Forwarded to us by an instance that thinks we write: not any more (or not yet).
                raise errors.forwarding_error("this instance is not the writer")
            return await self._forward(request)

        return serve

    async def _forward(self, request: web.Request) -> web.Response:
        url = self.role.writer_url()
        if url is None:
            raise errors.unknown_leader()
        body = await request.read() if request.can_read_body else None
        if body is not None and len(body) > self.max_body:
            raise errors.RegistryError(413, 413, f"Request body is larger than the limit of {self.max_body} bytes")
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self.forward_ssl) if self.forward_ssl is not None else None
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT),
                                                  connector=connector)
        # The caller's credentials go along (as Confluent's forwarding does): the writer decides on them too.
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept", "authorization")}
        headers[FORWARDED_HEADER] = "1"
        self.metrics.forwarded.inc()
        try:
            async with self._session.request(request.method, url.rstrip("/") + request.path_qs, data=body,
                                             headers=headers) as answer:
                payload = await answer.read()
                offset = answer.headers.get(OFFSET_HEADER)
                status = answer.status
                content_type = answer.headers.get("Content-Type", V1_JSON)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise errors.forwarding_error(f"{url}: {exc or type(exc).__name__}") from None
        if status < 300 and offset is not None and offset.lstrip("-").isdigit():
            # Read our own writes: answer once our copy of _schemas has the write.
            await self.role.wait_for_offset(int(offset), CATCH_UP_TIMEOUT)
        response = web.Response(status=status, body=payload)
        response.headers["Content-Type"] = content_type
        return response

    # --- endpoints: general ------------------------------------------------------------------------

    async def root(self, request: web.Request) -> web.Response:
        return self.ok(request, {})

    async def prometheus(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def metadata_id(self, request: web.Request) -> web.Response:
        return self.ok(request, {"scope": {"path": [], "clusters": {
            "kafka-cluster": self.cluster_id, "schema-registry-cluster": self.group_id}}})

    async def contexts(self, request: web.Request) -> web.Response:
        return self.ok(request, ["."])

    async def schema_types(self, request: web.Request) -> web.Response:
        return self.ok(request, list(SCHEMA_TYPES))

    # --- schemas by id -----------------------------------------------------------------------------

    async def list_schemas(self, request: web.Request) -> web.Response:
        found = self.registry.schemas(prefix=request.query.get("subjectPrefix", ""), deleted=_flag(request, "deleted"),
                                      latest_only=_flag(request, "latestOnly"))
        return self.ok(request, [_schema_json(v) for v in found])

    def _formatted(self, request: web.Request, out: dict[str, Any],
                   source: StoredSchema | SchemaValue) -> dict[str, Any]:
        """``?format=``: the schema text as the reader asked (PROTOBUF ``serialized``)."""
        fmt = request.query.get("format")
        if fmt:
            out["schema"] = self.registry.formatted(source.schema_type, source.schema, source.references, fmt)
        return out

    async def schema_by_id(self, request: web.Request) -> web.Response:
        stored = self.registry.schema_by_id(_schema_id(request), request.query.get("subject"))
        return self.ok(request, self._formatted(request, _stored_json(stored), stored))

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        stored = self.registry.schema_by_id(_schema_id(request), request.query.get("subject"))
        return self.ok(request, _raw(stored.schema))

    async def id_subjects(self, request: web.Request) -> web.Response:
        holders = self.registry.id_versions(_schema_id(request), deleted=_flag(request, "deleted"))
        return self.ok(request, sorted({h.subject for h in holders}))

    async def id_versions(self, request: web.Request) -> web.Response:
        holders = self.registry.id_versions(_schema_id(request), deleted=_flag(request, "deleted"))
        return self.ok(request, [{"subject": h.subject, "version": h.version} for h in holders])

    # --- subjects ----------------------------------------------------------------------------------

    async def list_subjects(self, request: web.Request) -> web.Response:
        return self.ok(request, self.registry.subjects(deleted=_flag(request, "deleted"),
                                                       prefix=request.query.get("subjectPrefix", "")))

    async def list_versions(self, request: web.Request) -> web.Response:
        return self.ok(request, self.registry.versions(request.match_info["subject"],
                                                       deleted=_flag(request, "deleted")))

    async def get_version(self, request: web.Request) -> web.Response:
        value = self.registry.version(request.match_info["subject"], request.match_info["version"],
                                      deleted=_flag(request, "deleted"))
        return self.ok(request, self._formatted(request, _schema_json(value), value))

    async def raw_version(self, request: web.Request) -> web.Response:
        value = self.registry.version(request.match_info["subject"], request.match_info["version"],
                                      deleted=_flag(request, "deleted"))
        return self.ok(request, _raw(value.schema))

    async def referenced_by(self, request: web.Request) -> web.Response:
        return self.ok(request, self.registry.referenced_by(request.match_info["subject"],
                                                            request.match_info["version"]))

    async def lookup(self, request: web.Request) -> web.Response:
        schema = SchemaRequest.from_json(await self.body(request))
        value = self.registry.lookup(request.match_info["subject"], schema, normalize=_flag(request, "normalize"),
                                     deleted=_flag(request, "deleted"))
        return self.ok(request, self._formatted(request, _schema_json(value), value))

    async def register(self, request: web.Request) -> web.Response:
        schema = SchemaRequest.from_json(await self.body(request))
        value = await self.registry.register(request.match_info["subject"], schema,
                                             normalize=_flag(request, "normalize"))
        return self.ok(request, {"id": value.id})

    async def delete_subject(self, request: web.Request) -> web.Response:
        return self.ok(request, await self.registry.delete_subject(request.match_info["subject"],
                                                                   permanent=_flag(request, "permanent")))

    async def delete_version(self, request: web.Request) -> web.Response:
        return self.ok(request, await self.registry.delete_version(
            request.match_info["subject"], request.match_info["version"], permanent=_flag(request, "permanent")))

    async def compatibility(self, request: web.Request) -> web.Response:
        version_text = request.match_info.get("version")
        if version_text is not None:
            parse_version(version_text)  # 42202 before anything else, as Confluent checks it first
        schema = SchemaRequest.from_json(await self.body(request))
        subject = request.match_info["subject"]
        if version_text is not None and not self.registry.store.has_subject(subject):
            raise errors.subject_not_found(subject)
        messages = self.registry.check_compatibility(subject, version_text, schema,
                                                     normalize=_flag(request, "normalize"))
        body: dict[str, Any] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            body["messages"] = messages
        return self.ok(request, body)

    # --- config and mode ---------------------------------------------------------------------------

    async def get_config(self, request: web.Request) -> web.Response:
        level = self.registry.config(request.match_info.get("subject"),
                                     default_to_global=_flag(request, "defaultToGlobal"))
        return self.ok(request, {"compatibilityLevel": level})

    async def put_config(self, request: web.Request) -> web.Response:
        level = await self.registry.set_config(request.match_info.get("subject"), await self.body(request))
        return self.ok(request, {"compatibility": level})

    async def delete_config(self, request: web.Request) -> web.Response:
        previous = await self.registry.delete_config(request.match_info.get("subject"))
        return self.ok(request, {"compatibilityLevel": previous})

    async def get_mode(self, request: web.Request) -> web.Response:
        mode = self.registry.mode(request.match_info.get("subject"),
                                  default_to_global=_flag(request, "defaultToGlobal"))
        return self.ok(request, {"mode": mode})

    async def put_mode(self, request: web.Request) -> web.Response:
        mode = await self.registry.set_mode(request.match_info.get("subject"), await self.body(request),
                                            force=_flag(request, "force"))
        return self.ok(request, {"mode": mode})

    async def delete_mode(self, request: web.Request) -> web.Response:
        return self.ok(request, {"mode": await self.registry.delete_mode(request.match_info["subject"])})


def _raw(schema: str) -> object:
    """The ``/schema`` endpoints answer the schema itself, unescaped: JSON schemas as JSON, other
    text (a .proto file) as a JSON string."""
    try:
        parsed: object = json.loads(schema)
        return parsed
    except ValueError:
        return schema
