"""One connection's SASL exchange: what may be sent when, failures, and KIP-368 re-authentication."""

from __future__ import annotations

import pytest
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.security.authenticator import SaslSession, SaslSettings

pytestmark = pytest.mark.unit

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def session(reauth_ms: int = 0) -> SaslSession:
    return SaslSession(SaslSettings("SASL", ("PLAIN",), USERS, reauth_ms), lambda _u, _m: None)


def login(s: SaslSession, user: str = "alice", now_ms: int = 0) -> ErrorCode:
    assert s.handshake("PLAIN", 1) == ErrorCode.NONE
    return s.authenticate(f"\0{user}\0{USERS[user]}".encode(), now_ms).error


def test_only_the_exchange_is_allowed_before_authentication() -> None:
    s = session()
    assert s.allows(ApiKey.API_VERSIONS, 0) and s.allows(ApiKey.SASL_HANDSHAKE, 0)
    assert not s.allows(ApiKey.METADATA, 0) and not s.allows(ApiKey.SASL_AUTHENTICATE, 0)
    assert s.handshake("PLAIN", 1) == ErrorCode.NONE
    assert s.allows(ApiKey.SASL_AUTHENTICATE, 0) and not s.allows(ApiKey.PRODUCE, 0)
    assert s.authenticate(b"\0alice\0alice-secret", 0).error == ErrorCode.NONE
    assert s.principal == "User:alice" and s.allows(ApiKey.PRODUCE, 0)


def test_handshake_refusals() -> None:
    assert session().handshake("SCRAM-SHA-512", 1) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert session().handshake("PLAIN", 0) == ErrorCode.UNSUPPORTED_VERSION  # bare v0 tokens: not served
    s = session()
    s.handshake("PLAIN", 1)
    assert s.handshake("PLAIN", 1) == ErrorCode.ILLEGAL_SASL_STATE


def test_a_failed_exchange_closes_the_connection() -> None:
    s = session()
    s.handshake("PLAIN", 1)
    answer = s.authenticate(b"\0alice\0wrong", 0)
    assert answer.error == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close
    assert answer.message == ("Authentication failed during authentication due to invalid credentials with "
                              "SASL mechanism PLAIN")
    assert not s.allows(ApiKey.METADATA, 0) and not s.allows(ApiKey.SASL_AUTHENTICATE, 0)


def test_sessions_expire_and_are_renewed_on_the_same_connection() -> None:
    s = session(reauth_ms=1000)
    assert s.handshake("PLAIN", 1) == ErrorCode.NONE
    answer = s.authenticate(b"\0alice\0alice-secret", 5000)
    assert answer.session_lifetime_ms == 1000
    assert s.allows(ApiKey.FETCH, 5999)
    assert not s.allows(ApiKey.FETCH, 6000)  # expired: only a new handshake is accepted
    assert s.allows(ApiKey.SASL_HANDSHAKE, 6000)
    assert login(s, now_ms=6000) == ErrorCode.NONE
    assert s.allows(ApiKey.FETCH, 6500) and s.expires_at_ms == 7000


def test_re_authentication_cannot_change_the_principal() -> None:
    s = session(reauth_ms=1000)
    assert login(s, "alice") == ErrorCode.NONE
    s.handshake("PLAIN", 1)
    answer = s.authenticate(b"\0bob\0bob-secret", 100)
    assert answer.error == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close
    assert s.principal == "User:alice"


def test_without_a_reauth_setting_sessions_do_not_expire() -> None:
    s = session()
    assert login(s) == ErrorCode.NONE
    assert s.expires_at_ms is None and s.allows(ApiKey.FETCH, 10**12)
