"""The SCRAM server: RFC 7677's worked example, a client written here from RFC 5802, and every
way an exchange must fail (wrong password, unknown user, tampered nonce, malformed messages)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from riverlog.security.sasl.errors import SaslAuthenticationError
from riverlog.security.sasl.scram import ScramCredential, ScramServer, make_credential

pytestmark = pytest.mark.unit

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def test_rfc_7677_example() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", salt=RFC7677_SALT, iterations=4096)
    server = ScramServer("SCRAM-SHA-256", lambda user, _m: credential if user == "user" else None,
                         nonce=lambda: RFC7677_SERVER_NONCE)
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.done and server.username == "user"


def client_exchange(server: ScramServer, user: str, password: str, algorithm: str,
                    tamper_nonce: bool = False) -> bytes:
    """RFC 5802's client side against ``server``; returns the server-final message."""
    client_nonce = "fyko+d2lbbFgONRv9qkxdawL"
    bare = f"n={user},r={client_nonce}"
    server_first = server.step(f"n,,{bare}".encode()).decode()
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored_key = hashlib.new(algorithm, client_key).digest()
    nonce = attrs["r"] + ("x" if tamper_nonce else "")
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, algorithm).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    return server.step(f"{without_proof},p={proof}".encode())


@pytest.mark.parametrize(("mechanism", "algorithm"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")])
def test_the_right_password_authenticates(mechanism: str, algorithm: str) -> None:
    credentials = {"alice": make_credential(mechanism, "alice-secret")}
    server = ScramServer(mechanism, lambda user, _m: credentials.get(user))
    assert client_exchange(server, "alice", "alice-secret", algorithm).startswith(b"v=")
    assert server.done and server.username == "alice"


@pytest.mark.parametrize(("user", "password", "tamper"), [
    ("alice", "wrong", False),
    ("nobody", "alice-secret", False),
    ("alice", "alice-secret", True),
])
def test_failures_look_alike(user: str, password: str, tamper: bool) -> None:
    credentials = {"alice": make_credential("SCRAM-SHA-512", "alice-secret")}
    server = ScramServer("SCRAM-SHA-512", lambda u, _m: credentials.get(u))
    with pytest.raises(SaslAuthenticationError, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        client_exchange(server, user, password, "sha512", tamper_nonce=tamper)
    assert not server.done


@pytest.mark.parametrize("first", [b"", b"garbage", b"p=tls-unique,,n=alice,r=abc", b"n,,n=alice",
                                   b"n,a=bob,n=alice,r=abc", b"\xff\xfe", b"n,,n=al=ice,r=abc"])
def test_malformed_or_unsupported_first_messages_fail(first: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", lambda _u, _m: None)
    with pytest.raises(SaslAuthenticationError):
        server.step(first)


def test_no_step_after_a_failure() -> None:
    credential: ScramCredential = make_credential("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda _u, _m: credential)
    server.step(b"n,,n=u,r=abc")
    with pytest.raises(SaslAuthenticationError):
        server.step(b"c=biws,r=wrong,p=AAAA")
    with pytest.raises(SaslAuthenticationError):
        server.step(b"c=biws,r=wrong,p=AAAA")
