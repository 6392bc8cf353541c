"""Request and response headers.

Request header v1 carries a client id that is always a classic (int16-length) nullable string,
even in flexible versions; v2 adds a tagged-field section. Responses use header v1 (tagged fields)
for flexible versions, except ApiVersions, which always answers with header v0 so a client that
does not yet know the broker's versions can read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .api_keys import ApiKey
from .primitives import DecodeError, Reader, Writer


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(r: Reader) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: enough to answer even an undecodable request."""
    return r.int16(), r.int16(), r.int32()


def decode_request_header(r: Reader, flexible: bool) -> RequestHeader:
    api_key, api_version, correlation_id = peek_header(r)
    n = r.int16()
    if n < -1:
        raise DecodeError("negative client id length")
    client_id = None if n == -1 else r.string(n)
    if flexible:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.raw(r.uvarint())
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def encode_request_header(w: Writer, header: RequestHeader, flexible: bool) -> None:
    w.int16(header.api_key)
    w.int16(header.api_version)
    w.int32(header.correlation_id)
    if header.client_id is None:
        w.int16(-1)
    else:
        data = header.client_id.encode()
        w.int16(len(data))
        w.raw(data)
    if flexible:
        w.uvarint(0)


def response_header_flexible(api_key: int, body_flexible: bool) -> bool:
    return body_flexible and api_key != ApiKey.API_VERSIONS


def encode_response_header(w: Writer, correlation_id: int, flexible: bool) -> None:
    w.int32(correlation_id)
    if flexible:
        w.uvarint(0)


def decode_response_header(r: Reader, flexible: bool) -> int:
    correlation_id = r.int32()
    if flexible:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.raw(r.uvarint())
    return correlation_id
