"""SASL on one connection of a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's
SaslServerAuthenticator runs it.

Until authenticated, a connection may send ApiVersions, SaslHandshake and SaslAuthenticate only;
any other request closes it before a handler sees it. SaslHandshake names a mechanism the
listener enables (``sasl.enabled.mechanisms``, per listener as
``listener.name.<name>.sasl.enabled.mechanisms``), then SaslAuthenticate carries the mechanism's
tokens until it is done: the connection's principal becomes ``User:<name>``. A failed exchange
answers SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection is closed.

Re-authentication (KIP-368): the last SaslAuthenticate answer carries the session lifetime,
Kafka's rule: ``connections.max.reauth.ms`` when > 0, the credential's remaining life when it
expires (an OAUTHBEARER token's ``exp``), the smaller when both; none otherwise. Before it runs
out the client authenticates again on the same connection (a new SaslHandshake, then
SaslAuthenticate), as the same principal. A request other than SaslHandshake after the session
expired closes the connection.

Pure state machine: the caller gives the time; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from .jwks import JwksCache
from .jwt_validator import ValidationSettings
from .principal import user
from .sasl.errors import SaslAuthenticationError
from .sasl.oauthbearer import MECHANISM as OAUTHBEARER
from .sasl.oauthbearer import OAuthBearerServer
from .sasl.plain import PlainServer
from .sasl.scram import HASHES, ScramCredential, ScramServer

PRE_AUTHENTICATION_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
SERVED_MECHANISMS = ("PLAIN", *HASHES, OAUTHBEARER)


class Mechanism(Protocol):
    mechanism: str
    username: str
    done: bool
    credential_expires_at_ms: int | None  # when what authenticated stops being valid, if ever

    def step(self, token: bytes, now_ms: int) -> bytes: ...


@dataclass(frozen=True)
class OAuthBearerSettings:
    """An OAUTHBEARER listener's token checks and where its keys come from."""

    jwks_url: str
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    validation: ValidationSettings = field(default_factory=ValidationSettings)


@dataclass(frozen=True)
class SaslSettings:
    """What one SASL listener enables."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_passwords: dict[str, str] = field(default_factory=dict)  # PLAIN's user_<name> options
    reauth_ms: int = 0  # connections.max.reauth.ms; 0: sessions last as long as the credential
    oauthbearer: OAuthBearerSettings | None = None  # when OAUTHBEARER is enabled
    reauth_ms_by_mechanism: dict[str, int] = field(default_factory=dict)  # listener.name.<l>.<mechanism>. form


@dataclass(frozen=True)
class AuthenticateAnswer:
    error: ErrorCode
    message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int
    close: bool  # after sending: a failed authentication ends the connection


class SaslSession:
    def __init__(self, settings: SaslSettings,
                 scram_credential: Callable[[str, str], ScramCredential | None],
                 jwks: JwksCache | None = None) -> None:
        self.settings = settings
        self._scram_credential = scram_credential
        self._jwks = jwks  # the listener's OAUTHBEARER keys, kept current by the server
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
        if mechanism == OAUTHBEARER:
            oauth = self.settings.oauthbearer
            assert oauth is not None and self._jwks is not None, "OAUTHBEARER enabled without its settings"
            return OAuthBearerServer(oauth.validation, self._jwks)
        return ScramServer(mechanism, self._scram_credential)

    def authenticate(self, token: bytes, now_ms: int) -> AuthenticateAnswer:
        mechanism = self._mechanism
        if self.state != "authenticate" or mechanism is None:
            return AuthenticateAnswer(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received "
                                      "outside a SASL exchange", b"", 0, close=self.state != "authenticated")
        try:
            reply = mechanism.step(token, now_ms)
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
        reauth_ms = self.settings.reauth_ms_by_mechanism.get(mechanism.mechanism, self.settings.reauth_ms)
        lifetime = session_lifetime_ms(reauth_ms, mechanism.credential_expires_at_ms, now_ms)
        self.expires_at_ms = now_ms + lifetime if lifetime is not None else None
        return AuthenticateAnswer(ErrorCode.NONE, None, reply, lifetime or 0, close=False)


def session_lifetime_ms(reauth_ms: int, credential_expires_at_ms: int | None, now_ms: int) -> int | None:
    """Kafka's SaslServerAuthenticator rule: None when the session never expires."""
    limits = [reauth_ms] if reauth_ms > 0 else []
    if credential_expires_at_ms is not None:
        limits.append(credential_expires_at_ms - now_ms)
    return max(0, min(limits)) if limits else None
