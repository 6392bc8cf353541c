"""SASL PLAIN and the JAAS values that configure it."""

from __future__ import annotations

import pytest
from riverlog.security.jaas import parse_jaas
from riverlog.security.sasl.errors import SaslAuthenticationError
from riverlog.security.sasl.plain import PlainServer

pytestmark = pytest.mark.unit

BROKER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
               'password="admin-secret" user_admin="admin-secret" user_alice="alice \\"quoted\\" secret";')


def test_kafka_s_plain_jaas_value() -> None:
    entry = parse_jaas(BROKER_JAAS)
    assert entry.module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.flag == "required"
    assert entry.options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                             "user_alice": 'alice "quoted" secret'}


@pytest.mark.parametrize("bad", [
    "",
    "org.example.Module required username=\"a\"",  # no ';'
    "org.example.Module mandatory username=\"a\";",  # not a flag
    "org.example.Module required username;",
    "org.example.Module required a=\"1\"; org.example.Other required b=\"2\";",
])
def test_malformed_jaas_values_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_jaas(bad)


def passwords(user: str) -> str | None:
    return {"alice": "alice-secret"}.get(user)


@pytest.mark.parametrize("token", [b"\0alice\0alice-secret", b"alice\0alice\0alice-secret"])
def test_plain_authenticates_the_right_password(token: bytes) -> None:
    server = PlainServer(passwords)
    assert server.step(token) == b""
    assert server.done and server.username == "alice"


@pytest.mark.parametrize("token", [b"\0alice\0wrong", b"\0bob\0alice-secret", b"bob\0alice\0alice-secret",
                                   b"\0\0", b"alice-secret", b"\xff\0alice\0x"])
def test_plain_refuses_everything_else(token: bytes) -> None:
    server = PlainServer(passwords)
    with pytest.raises(SaslAuthenticationError):
        server.step(token)
    assert not server.done
