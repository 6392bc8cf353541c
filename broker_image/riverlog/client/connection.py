"""One TCP connection to one broker: framing, correlation ids and version negotiation.

The protocol codec in :mod:`riverlog.protocol` does the encoding; this module is the thin I/O
shell around it. Requests may be pipelined: each gets a correlation id and a future, and a single
reader task resolves futures as responses arrive (Kafka brokers answer a connection's requests in
order, but matching by id keeps us correct even if one did not).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import ssl
import struct
import time
from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    response_header_flexible,
)
from ..protocol.messages import MESSAGES
from ..protocol.primitives import DecodeError, Reader, Writer
from ..protocol.schema import Message
from ..security.client_config import ClientSecurity, client_ssl_context
from ..security.sasl.errors import SaslAuthenticationError
from ..security.sasl.scram import ScramClient
from .bootstrap import format_address
from .errors import (
    AuthenticationError,
    BrokerUnreachableError,
    ClientError,
    ConnectionClosedError,
    RequestTimeoutError,
    UnsupportedApiError,
)

log = logging.getLogger(__name__)

CLIENT_SOFTWARE_NAME = "riverlog-client"
CLIENT_SOFTWARE_VERSION = "0.1.0"

_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
# Responses bigger than this are treated as a corrupt stream rather than buffered: a fetch is
# bounded by the client's own max_bytes, so anything near 2 GiB means we lost the framing.
MAX_RESPONSE_BYTES = 1 << 30


def api_name(api_key: int) -> str:
    """``"Metadata"`` for key 3: the schema's name without its Request suffix."""
    entry = MESSAGES.get(api_key)
    if entry is not None:
        return entry[0].name.removesuffix("Request")
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API {api_key}"


class _Pending:
    """A request awaiting its response: what to decode it with, and who is waiting."""

    __slots__ = ("future", "api_key", "version", "message")

    def __init__(self, future: asyncio.Future[dict[str, Any]], api_key: int, version: int, message: Message):
        self.future = future
        self.api_key = api_key
        self.version = version
        self.message = message


class BrokerConnection:
    """An open connection; create with :meth:`connect`, which also negotiates API versions."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        *,
        client_id: str | None,
        request_timeout: float,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.address = format_address(host, port)
        self.client_id = client_id
        self.request_timeout = request_timeout
        # The broker's advertised (min, max) version per API key, filled by negotiation.
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._reader = reader
        self._writer = writer
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._closed_reason: str | None = None
        self.security = security
        # KIP-368: when the broker gives the SASL session a lifetime, the connection authenticates
        # again before it runs out (monotonic deadline), holding new requests meanwhile.
        self._reauth_at: float | None = None
        self._reauth_lock = asyncio.Lock()
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    # --- lifecycle ------------------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = "riverlog",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        negotiate: bool = True,
        security: ClientSecurity | None = None,
    ) -> BrokerConnection:
        """Open a connection, (by default) learn the broker's API versions, and authenticate as
        ``security`` says (TLS handshake, then SASL after ApiVersions, as Kafka's clients do).

        Raises :class:`BrokerUnreachableError` when the TCP connection cannot be made in time,
        :class:`AuthenticationError` when TLS or SASL refuses us.
        """
        address = format_address(host, port)
        context: ssl.SSLContext | None = None
        if security is not None and security.tls:
            context = client_ssl_context(security)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=context,
                                        server_hostname=host if context is not None else None),
                timeout=connect_timeout,
            )
        except TimeoutError:
            raise BrokerUnreachableError([address], f"no answer within {connect_timeout:g}s") from None
        except ssl.SSLError as exc:
            raise AuthenticationError(address, f"TLS handshake failed: {_tls_failure(exc)}") from None
        except OSError as exc:
            raise BrokerUnreachableError([address], _connect_failure(exc)) from None
        conn = cls(reader, writer, host, port, client_id=client_id, request_timeout=request_timeout,
                   security=security)
        try:
            if negotiate:
                # A peer that accepts but never answers is as unreachable as one that refuses.
                await conn.negotiate_versions(timeout=connect_timeout)
            if security is not None and security.sasl:
                await conn.authenticate(timeout=connect_timeout)
        except BaseException:
            await conn.close()
            raise
        return conn

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    async def close(self) -> None:
        self._shutdown("closed by the client")
        self._read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._read_task
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    def _shutdown(self, reason: str) -> None:
        """Mark the connection dead and fail every outstanding request with the reason."""
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        self._writer.close()
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(ConnectionClosedError(self.address, reason))

    # --- version negotiation --------------------------------------------------------------------

    async def negotiate_versions(self, timeout: float | None = None) -> None:
        """ApiVersions at our highest version; if the broker refuses it, retry at the highest
        version it says it supports (its refusal is always readable: a v0 body, see _decode)."""
        request, _ = MESSAGES[ApiKey.API_VERSIONS]
        version = request.valid[1]
        body = {"client_software_name": CLIENT_SOFTWARE_NAME, "client_software_version": CLIENT_SOFTWARE_VERSION}
        for _attempt in range(2):
            response = await self.request(ApiKey.API_VERSIONS, body, version, timeout=timeout)
            ranges = {e["api_key"]: (e["min_version"], e["max_version"]) for e in response["api_keys"]}
            if response["error_code"] == ErrorCode.UNSUPPORTED_VERSION and ApiKey.API_VERSIONS in ranges:
                broker_max = ranges[ApiKey.API_VERSIONS][1]
                if broker_max < version:
                    version = max(request.valid[0], broker_max)
                    continue
            if response["error_code"] != ErrorCode.NONE:
                raise UnsupportedApiError(
                    self.address, "ApiVersions", f"error {_code_name(response['error_code'])}"
                )
            self.broker_versions = ranges
            return
        raise UnsupportedApiError(self.address, "ApiVersions", "no common version")

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` that both this client's schema and the broker know."""
        entry = MESSAGES.get(api_key)
        name = api_name(api_key)
        if entry is None:
            raise UnsupportedApiError(self.address, name, "this client has no schema for it")
        ours = entry[0].valid
        theirs = self.broker_versions.get(api_key)
        if theirs is None:
            raise UnsupportedApiError(self.address, name, "the broker does not implement it")
        low, high = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if low > high:
            raise UnsupportedApiError(
                self.address, name,
                f"broker versions {theirs[0]}-{theirs[1]}, client versions {ours[0]}-{ours[1]}",
            )
        return high

    def supports(self, api_key: int) -> bool:
        try:
            self.version_for(api_key)
        except UnsupportedApiError:
            return False
        return True

    # --- SASL -----------------------------------------------------------------------------------

    async def authenticate(self, timeout: float | None = None) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism is done (also KIP-368's
        re-authentication on an open connection). AuthenticationError says why it failed."""
        security = self.security
        assert security is not None and security.sasl
        mechanism = security.mechanism
        handshake = await self.request(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism},
                                       self._sasl_version(ApiKey.SASL_HANDSHAKE, 1), timeout=timeout, _auth=True)
        if handshake["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise AuthenticationError(self.address, f"the listener does not enable SASL mechanism {mechanism}; it "
                                      f"enables {', '.join(handshake['mechanisms']) or 'none'}: set sasl.mechanism "
                                      "to one of them")
        if handshake["error_code"] != ErrorCode.NONE:
            raise AuthenticationError(self.address, f"SaslHandshake answered {_code_name(handshake['error_code'])}")
        version = self._sasl_version(ApiKey.SASL_AUTHENTICATE, 2)
        lifetime_ms = 0
        try:
            if mechanism == "PLAIN":
                token = f"\0{security.username}\0{security.password}".encode()
                lifetime_ms = (await self._sasl_step(token, version, timeout))[1]
            else:
                scram = ScramClient(mechanism, security.username, security.password)
                server_first, _ = await self._sasl_step(scram.first(), version, timeout)
                server_final, lifetime_ms = await self._sasl_step(scram.final(server_first), version, timeout)
                scram.verify(server_final)
        except SaslAuthenticationError as exc:
            raise AuthenticationError(self.address, str(exc)) from None
        # Like Kafka's clients: again at 85-95 % of the lifetime, so a fleet does not all renew at once.
        self._reauth_at = (time.monotonic() + lifetime_ms / 1000 * random.uniform(0.85, 0.95)
                           if lifetime_ms > 0 else None)

    async def _sasl_step(self, token: bytes, version: int, timeout: float | None) -> tuple[bytes, int]:
        answer = await self.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, version, timeout=timeout,
                                    _auth=True)
        if answer["error_code"] != ErrorCode.NONE:
            detail = answer.get("error_message") or _code_name(answer["error_code"])
            raise AuthenticationError(self.address, f"{_code_name(answer['error_code'])}: {detail}")
        return bytes(answer["auth_bytes"] or b""), int(answer.get("session_lifetime_ms") or 0)

    def _sasl_version(self, api_key: int, fallback: int) -> int:
        # Before ApiVersions (negotiate=False) every Kafka broker since 2.0 speaks these versions.
        return self.version_for(api_key) if self.broker_versions else fallback

    async def _reauthenticate_if_due(self) -> None:
        async with self._reauth_lock:
            if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
                log.debug("%s: re-authenticating (KIP-368)", self.address)
                await self.authenticate()

    # --- requests -------------------------------------------------------------------------------

    async def request(
        self,
        api_key: int,
        body: dict[str, Any],
        version: int | None = None,
        *,
        timeout: float | None = None,
        _auth: bool = False,
    ) -> dict[str, Any]:
        """Send one request and wait for its decoded response body."""
        if not _auth and self._reauth_at is not None and time.monotonic() >= self._reauth_at:
            await self._reauthenticate_if_due()
        correlation_id, future = self._send(api_key, body, version, expect_response=True)
        assert future is not None
        try:
            await self._drain()
        except ConnectionClosedError:
            if future.done() and not future.cancelled():
                future.exception()  # mark retrieved: the error is re-raised right here
            raise
        wait = self.request_timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(future, wait)
        except TimeoutError:
            # Forget the request: a late answer is dropped by the reader (unknown id).
            self._pending.pop(correlation_id, None)
            raise RequestTimeoutError(self.address, api_name(api_key), wait) from None

    async def send_only(self, api_key: int, body: dict[str, Any], version: int | None = None) -> None:
        """Send a request the broker will not answer (Produce with acks=0)."""
        if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
            await self._reauthenticate_if_due()
        self._send(api_key, body, version, expect_response=False)
        await self._drain()

    def _send(
        self, api_key: int, body: dict[str, Any], version: int | None, *, expect_response: bool
    ) -> tuple[int, asyncio.Future[dict[str, Any]] | None]:
        if self._closed_reason is not None:
            raise ConnectionClosedError(self.address, self._closed_reason)
        entry = MESSAGES.get(api_key)
        if entry is None:
            raise UnsupportedApiError(self.address, api_name(api_key), "this client has no schema for it")
        request_message, response_message = entry
        if version is None:
            version = self.version_for(api_key)
        elif not request_message.supports(version):
            raise UnsupportedApiError(self.address, api_name(api_key), f"client cannot encode version {version}")
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFF_FFFF
        w = Writer()
        w.int32(0)  # size, patched below once the frame is complete
        header = RequestHeader(api_key, version, correlation_id, self.client_id)
        encode_request_header(w, header, request_message.is_flexible(version))
        request_message.encode_into(w, body, version)
        _SIZE.pack_into(w.buf, 0, len(w.buf) - _SIZE.size)
        future: asyncio.Future[dict[str, Any]] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = _Pending(future, api_key, version, response_message)
        # One write call per frame: frames of concurrent requests never interleave.
        self._writer.write(w.buf)
        return correlation_id, future

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._shutdown(f"write failed: {exc}")
            raise ConnectionClosedError(self.address, f"write failed: {exc}") from None

    # --- responses ------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reason = "closed by the broker"
        try:
            while True:
                size_bytes = await self._reader.readexactly(_SIZE.size)
                (size,) = _SIZE.unpack(size_bytes)
                if size < 4 or size > MAX_RESPONSE_BYTES:
                    # Typically not a Kafka listener at all (an HTTP server answers "HTTP").
                    reason = (f"the answer is not a Kafka response (size field {size}{_printable(size_bytes)}): "
                              f"is {self.address} a Kafka listener?")
                    break
                frame = await self._reader.readexactly(size)
                self._dispatch(frame)
        except asyncio.IncompleteReadError:
            reason = "closed by the broker"
        except (ConnectionError, OSError) as exc:
            reason = f"connection error: {exc}"
        except asyncio.CancelledError:
            reason = "closed by the client"
            raise
        finally:
            self._shutdown(reason)

    def _dispatch(self, frame: bytes) -> None:
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            log.debug("%s: dropping response with unknown correlation id %d", self.address, correlation_id)
            return
        if pending.future.done():
            return
        try:
            body = self._decode(pending, frame)
        except (DecodeError, ValueError) as exc:
            pending.future.set_exception(ClientError(
                f"cannot decode {api_name(pending.api_key)} v{pending.version} response "
                f"from {self.address}: {exc}"
            ))
            return
        pending.future.set_result(body)

    @staticmethod
    def _decode(pending: _Pending, frame: bytes) -> dict[str, Any]:
        message = pending.message
        version = pending.version
        reader = Reader(frame)
        decode_response_header(reader, response_header_flexible(pending.api_key, message.is_flexible(version)))
        if (
            pending.api_key == ApiKey.API_VERSIONS
            and reader.remaining() >= 2
            and _INT16.unpack_from(frame, reader.pos)[0] == ErrorCode.UNSUPPORTED_VERSION
        ):
            # A broker that does not know our ApiVersions version answers in version 0 so that
            # we can read its supported range whatever version we sent.
            version = 0
        return message.decode(reader, version)


def _connect_failure(exc: OSError) -> str:
    """A short reason for a failed connect. asyncio words refusals as "Connect call failed" and
    folds several addresses' failures (IPv4 and IPv6 of localhost) into one message."""
    if isinstance(exc, ConnectionRefusedError) or "[Errno 111]" in str(exc):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name: {exc.strerror or exc}".lower()
    if exc.errno:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__


def _tls_failure(exc: ssl.SSLError) -> str:
    """What went wrong, with the fix for the usual cases."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"{exc.verify_message or exc.reason}: the broker's certificate is not trusted or does not name "
                "this address; check ssl.truststore.location (and ssl.endpoint.identification.algorithm)")
    return str(exc.reason or exc)


def _printable(data: bytes) -> str:
    text = data.decode("ascii", errors="replace")
    return f", text {text!r}" if text.isprintable() else ""


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
