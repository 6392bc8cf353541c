"""A small async client of Kafka Connect's REST API (issue #19), on aiohttp.

Shared by the operator's Connect, Connector and Mirror handlers and by ``riverlog mirror``: a
connector's config, status and source offsets, create, config PUT, pause/resume/stop, delete,
the connectors and the worker's plugins. Errors: :class:`ConnectRestError` when the workers answered with an error
(``status`` the HTTP status, ``message`` Connect's own), :class:`ConnectUnreachable` when they
did not answer at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote

import aiohttp

# Connect answers 409 while its group rebalances or its config topic is being read: try later.
RETRY_STATUSES = frozenset({409, 500, 502, 503, 504})
ACTIONS = ("pause", "resume", "stop")


def connector_path(name: str, *parts: str) -> str:
    """A REST path of one connector, its name escaped (a Kubernetes name needs none, other
    connectors' may)."""
    return "/".join([f"/connectors/{quote(name, safe='')}", *parts])


def restart_path(name: str) -> str:
    """``POST`` this path to restart the connector and only its FAILED tasks."""
    return connector_path(name, "restart") + "?includeTasks=true&onlyFailed=true"


class ConnectRestError(Exception):
    """The REST API answered with an error."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"{method} {path}: HTTP {status}: {message}")

    @property
    def transient(self) -> bool:
        return self.status in RETRY_STATUSES


class ConnectUnreachable(Exception):
    """No answer from the REST API (connection refused, timeout, name not resolved)."""


class ConnectRest:
    """One aiohttp session to one Connect cluster's REST API; use ``async with``."""

    def __init__(self, url: str, *, timeout: float = 20.0) -> None:
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ConnectRest:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        assert self._session is not None, "use ConnectRest in an async with block"
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        try:
            async with self._session.request(method, self.url + path, data=data, headers=headers) as resp:
                text = await resp.text()
                status = resp.status
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ConnectUnreachable(f"{method} {self.url}{path}: {type(exc).__name__}: {exc}".rstrip(": ")) from exc
        payload: Any = None
        if text:
            try:
                payload = json.loads(text)
            except ValueError:
                payload = text
        if status >= 400:
            message = payload.get("message", text) if isinstance(payload, dict) else text
            raise ConnectRestError(method, path, status, str(message))
        return payload

    async def _get_or_none(self, path: str) -> Any:
        try:
            return await self.request("GET", path)
        except ConnectRestError as exc:
            if exc.status == 404:
                return None
            raise

    async def config(self, name: str) -> dict[str, Any] | None:
        """``GET /connectors/<name>/config``; None when the connector does not exist."""
        found: dict[str, Any] | None = await self._get_or_none(connector_path(name, "config"))
        return found

    async def status(self, name: str) -> dict[str, Any] | None:
        """``GET /connectors/<name>/status``; None when the connector does not exist (yet)."""
        found: dict[str, Any] | None = await self._get_or_none(connector_path(name, "status"))
        return found

    async def create(self, request: Mapping[str, Any]) -> None:
        await self.request("POST", "/connectors", dict(request))

    async def put_config(self, name: str, config: Mapping[str, str]) -> None:
        await self.request("PUT", connector_path(name, "config"), dict(config))

    async def act(self, name: str, action: str) -> None:
        """``PUT /connectors/<name>/pause|resume|stop``."""
        if action not in ACTIONS:
            raise ValueError(f"unknown connector action {action!r}")
        await self.request("PUT", connector_path(name, action))

    async def restart_failed(self, name: str) -> None:
        """``POST /connectors/<name>/restart?includeTasks=true&onlyFailed=true`` (KIP-745, Kafka
        3.0+): the connector and only its FAILED tasks restart; running tasks go on undisturbed."""
        await self.request("POST", restart_path(name))

    async def delete(self, name: str) -> bool:
        """False when the connector was not there."""
        try:
            await self.request("DELETE", connector_path(name))
            return True
        except ConnectRestError as exc:
            if exc.status == 404:
                return False
            raise

    async def connectors(self) -> list[str]:
        """``GET /connectors``: the names of every connector of the Connect cluster."""
        found: list[str] = await self.request("GET", "/connectors") or []
        return found

    async def offsets(self, name: str) -> list[dict[str, Any]]:
        """``GET /connectors/<name>/offsets`` (KIP-875): a source connector's committed source
        offsets, each ``{"partition": {...}, "offset": {...}}`` in the connector's own terms."""
        found: dict[str, Any] = await self.request("GET", connector_path(name, "offsets")) or {}
        offsets: list[dict[str, Any]] = found.get("offsets", [])
        return offsets

    async def plugins(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self.request("GET", "/connector-plugins") or []
        return found
