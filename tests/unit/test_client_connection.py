"""BrokerConnection against a scripted in-process broker: version negotiation, pipelining with
out-of-order answers, and the errors for hang-ups, silence and unsupported APIs."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from riverlog.client.connection import BrokerConnection
from riverlog.client.errors import (
    BrokerUnreachableError,
    ConnectionClosedError,
    RequestTimeoutError,
    UnsupportedApiError,
)
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.protocol.header import (
    decode_request_header,
    encode_response_header,
    response_header_flexible,
)
from riverlog.protocol.messages import MESSAGES
from riverlog.protocol.primitives import Reader, Writer

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]

Frame = tuple[int, int, int, dict[str, Any]]  # api key, version, correlation id, body
Script = Callable[["FakeBroker", asyncio.StreamWriter, Frame], Awaitable[None]]

# What the fake broker claims to support unless a test says otherwise.
DEFAULT_VERSIONS = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 9), ApiKey.LIST_OFFSETS: (1, 20)}


def encode_response(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    response = MESSAGES[api_key][1]
    w = Writer()
    encode_response_header(w, correlation_id, response_header_flexible(api_key, response.is_flexible(version)))
    response.encode_into(w, body, version)
    return struct.pack(">i", len(w.buf)) + bytes(w.buf)


def api_versions_body(versions: dict[int, tuple[int, int]]) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in versions.items()],
    }


class FakeBroker:
    """Decodes each request and hands it to ``script``; answers ApiVersions itself by default."""

    def __init__(self, script: Script | None = None, versions: dict[int, tuple[int, int]] | None = None) -> None:
        self.script = script
        self.versions = versions or DEFAULT_VERSIONS
        self.requests: list[Frame] = []
        self.held: list[Frame] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                data = await reader.readexactly(size)
                r = Reader(data)
                api_key, version = struct.unpack_from(">hh", data)
                request = MESSAGES[api_key][0]
                header = decode_request_header(r, request.is_flexible(version))
                frame = (api_key, version, header.correlation_id, request.decode(r, version))
                self.requests.append(frame)
                if api_key == ApiKey.API_VERSIONS and (self.script is None or not await self._script_wants(frame)):
                    writer.write(encode_response(api_key, version, header.correlation_id,
                                                 api_versions_body(self.versions)))
                    continue
                assert self.script is not None
                await self.script(self, writer, frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _script_wants(self, frame: Frame) -> bool:
        return getattr(self.script, "handles_api_versions", False)


def metadata_body(cluster_id: str) -> dict[str, Any]:
    return {"brokers": [], "cluster_id": cluster_id, "controller_id": 1, "topics": []}


def run(coro: Awaitable[None]) -> None:
    async def main() -> None:
        await coro

    asyncio.run(main())


def test_negotiates_the_highest_common_version_per_api() -> None:
    async def scenario() -> None:
        async with FakeBroker() as broker:
            conn = await BrokerConnection.connect("127.0.0.1", broker.port)
            try:
                ours_metadata_max = MESSAGES[ApiKey.METADATA][0].valid[1]
                assert conn.version_for(ApiKey.METADATA) == min(9, ours_metadata_max)
                # Broker's max above ours: ours wins.
                assert conn.version_for(ApiKey.LIST_OFFSETS) == MESSAGES[ApiKey.LIST_OFFSETS][0].valid[1]
                with pytest.raises(UnsupportedApiError, match="does not implement"):
                    conn.version_for(ApiKey.PRODUCE)
                with pytest.raises(UnsupportedApiError):
                    await conn.request(ApiKey.PRODUCE, {})
            finally:
                await conn.close()
            # The first request was ApiVersions at the client's highest version, flexible header.
            api_key, version, _, body = broker.requests[0]
            assert (api_key, version) == (ApiKey.API_VERSIONS, 4)
            assert body["client_software_name"] == "riverlog-client"

    run(scenario())


def test_api_versions_falls_back_when_the_broker_refuses_our_version() -> None:
    async def script(broker: FakeBroker, writer: asyncio.StreamWriter, frame: Frame) -> None:
        api_key, version, correlation_id, _ = frame
        if version > 2:
            # Kafka's answer to an unknown ApiVersions version: a v0 body with the error code
            # and its own ApiVersions range.
            body = {"error_code": ErrorCode.UNSUPPORTED_VERSION,
                    "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 2}]}
            writer.write(encode_response(api_key, 0, correlation_id, body))
        else:
            writer.write(encode_response(api_key, version, correlation_id, api_versions_body(DEFAULT_VERSIONS)))

    script.handles_api_versions = True  # type: ignore[attr-defined]

    async def scenario() -> None:
        async with FakeBroker(script) as broker:
            conn = await BrokerConnection.connect("127.0.0.1", broker.port)
            await conn.close()
            assert [v for k, v, _, _ in broker.requests] == [4, 2]
            assert conn.broker_versions[ApiKey.METADATA] == (0, 9)

    run(scenario())


def test_pipelined_requests_are_matched_by_correlation_id() -> None:
    async def script(broker: FakeBroker, writer: asyncio.StreamWriter, frame: Frame) -> None:
        broker.held.append(frame)
        if len(broker.held) == 3:
            for api_key, version, correlation_id, body in reversed(broker.held):
                name = body["topics"][0]["name"]
                writer.write(encode_response(api_key, version, correlation_id, metadata_body(name)))

    async def scenario() -> None:
        async with FakeBroker(script) as broker:
            conn = await BrokerConnection.connect("127.0.0.1", broker.port)
            try:
                answers = await asyncio.gather(*(
                    conn.request(ApiKey.METADATA, {"topics": [{"name": n}]}) for n in ("a", "b", "c")
                ))
            finally:
                await conn.close()
            assert [a["cluster_id"] for a in answers] == ["a", "b", "c"]

    run(scenario())


def test_broker_hanging_up_fails_outstanding_requests() -> None:
    async def script(broker: FakeBroker, writer: asyncio.StreamWriter, frame: Frame) -> None:
        writer.close()

    async def scenario() -> None:
        async with FakeBroker(script) as broker:
            conn = await BrokerConnection.connect("127.0.0.1", broker.port)
            with pytest.raises(ConnectionClosedError, match="closed by the broker"):
                await conn.request(ApiKey.METADATA, {"topics": None})
            assert conn.closed
            with pytest.raises(ConnectionClosedError):
                await conn.request(ApiKey.METADATA, {"topics": None})
            await conn.close()

    run(scenario())


def test_a_silent_broker_times_out_and_late_answers_are_dropped() -> None:
    async def script(broker: FakeBroker, writer: asyncio.StreamWriter, frame: Frame) -> None:
        broker.held.append(frame)
        if len(broker.held) == 2:
            # Answer both now: the first one's caller has given up already.
            for api_key, version, correlation_id, _ in broker.held:
                writer.write(encode_response(api_key, version, correlation_id, metadata_body(str(correlation_id))))

    async def scenario() -> None:
        async with FakeBroker(script) as broker:
            conn = await BrokerConnection.connect("127.0.0.1", broker.port, request_timeout=0.2)
            try:
                with pytest.raises(RequestTimeoutError, match="Metadata"):
                    await conn.request(ApiKey.METADATA, {"topics": None})
                answer = await conn.request(ApiKey.METADATA, {"topics": None}, timeout=5)
                assert answer["cluster_id"] == str(broker.held[1][2])
            finally:
                await conn.close()

    run(scenario())


def test_connection_refused_is_reported_as_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed

    async def scenario() -> None:
        with pytest.raises(BrokerUnreachableError, match="connection refused"):
            await BrokerConnection.connect("127.0.0.1", port, connect_timeout=5)

    run(scenario())


def test_a_non_kafka_peer_is_named_as_such() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(ConnectionClosedError, match="not a Kafka response"):
                await BrokerConnection.connect("127.0.0.1", port)
        finally:
            server.close()

    run(scenario())
