"""SASL on one connection of a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's
SaslServerAuthenticator runs it.

Until authenticated, a connection may send ApiVersions, SaslHandshake and SaslAuthenticate only;
any other request closes it before a handler sees it. SaslHandshake names a mechanism the
listener enables (``sasl.enabled.mechanisms``, per listener as
``listener.name.<name>.sasl.enabled.mechanisms``), then SaslAuthenticate carries the mechanism's
tokens until it is done: the connection's principal becomes ``User:<name>``. A failed exchange
answers SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection is closed.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 the last SaslAuthenticate
answer carries the session lifetime; before it runs out the client authenticates again on the
same connection (a new SaslHandshake, then SaslAuthenticate), as the same principal. A request
other than SaslHandshake after the session expired closes the connection.

Pure state machine: the caller gives the time; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from .principal import user
from .sasl.errors import SaslAuthenticationError
from .sasl.plain import PlainServer
from .sasl.scram import HASHES, ScramCredential, ScramServer

PRE_AUTHENTICATION_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
SERVED_MECHANISMS = ("PLAIN", *HASHES)


class Mechanism(Protocol):
    mechanism: str
    username: str
    done: bool

    def step(self, token: bytes) -> bytes: ...


@dataclass(frozen=True)
class SaslSettings:
    """What one SASL listener enables."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_passwords: dict[str, str] = field(default_factory=dict)  # PLAIN's user_<name> options
    reauth_ms: int = 0  # connections.max.reauth.ms; 0: sessions never expire


@dataclass(frozen=True)
class AuthenticateAnswer:
    error: ErrorCode
    message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int
    close: bool  # after sending: a failed authentication ends the connection


class SaslSession:
    def __init__(self, settings: SaslSettings,
                 scram_credential: Callable[[str, str], ScramCredential | None]) -> None:
        self.settings = settings
        self._scram_credential = scram_credential
        self._mechanism: Mechanism | None = None
        self.state = "handshake"  # then "authenticate", then "authenticated" (or "failed")
        self.principal: str | None = None
        self.expires_at_ms: int | None = None

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    def allows(self, api_key: int, now_ms: int) -> bool:
        """May a request of ``api_key`` be handled now? (False: close the connection.)"""
        if self.state == "authenticated":
            if self.expired(now_ms):
                return api_key == ApiKey.SASL_HANDSHAKE  # only re-authentication is left
            return True
        if self.state == "handshake":
            return api_key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)
        if self.state == "authenticate":
            return api_key == ApiKey.SASL_AUTHENTICATE
        return False  # failed: the connection is being closed

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """SaslHandshake: NONE and the mechanism chosen, or the error (the connection then closes)."""
        if self.state == "authenticate" or version < 1:
            # Version 0's bare tokens are not served; a second handshake mid-exchange is illegal.
            return ErrorCode.ILLEGAL_SASL_STATE if self.state == "authenticate" else ErrorCode.UNSUPPORTED_VERSION
        if mechanism not in self.settings.mechanisms:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        if self.state == "authenticated" and self._mechanism is not None \
                and mechanism != self._mechanism.mechanism:
            return ErrorCode.ILLEGAL_SASL_STATE  # KIP-368: re-authenticate with the same mechanism
        self._mechanism = self._start(mechanism)
        self.state = "authenticate"
        return ErrorCode.NONE

    def _start(self, mechanism: str) -> Mechanism:
        if mechanism == "PLAIN":
            return PlainServer(self.settings.plain_passwords.get)
        return ScramServer(mechanism, self._scram_credential)

    def authenticate(self, token: bytes, now_ms: int) -> AuthenticateAnswer:
        mechanism = self._mechanism
        if self.state != "authenticate" or mechanism is None:
            return AuthenticateAnswer(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received "
                                      "outside a SASL exchange", b"", 0, close=self.state != "authenticated")
        try:
            reply = mechanism.step(token)
        except SaslAuthenticationError as exc:
            self.state = "failed"
            return AuthenticateAnswer(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"", 0, close=True)
        if not mechanism.done:
            return AuthenticateAnswer(ErrorCode.NONE, None, reply, 0, close=False)
        principal = user(mechanism.username)
        if self.principal is not None and principal != self.principal:
            # KIP-368: a re-authentication may not change who the connection is.
            self.state = "failed"
            return AuthenticateAnswer(ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      "Cannot change principals during re-authentication", b"", 0, close=True)
        self.principal = principal
        self.state = "authenticated"
        lifetime = self.settings.reauth_ms
        self.expires_at_ms = now_ms + lifetime if lifetime > 0 else None
        return AuthenticateAnswer(ErrorCode.NONE, None, reply, lifetime, close=False)
