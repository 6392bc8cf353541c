"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side, as Kafka runs them.

Credentials are what Kafka keeps in its metadata log (``UserScramCredentialRecord``): salt,
iterations, stored key and server key; never the password. The exchange:

1. client-first ``n,,n=<user>,r=<client nonce>`` (gs2 header ``n,,`` or ``n,a=<authzid>,``,
   where the authorization id must equal the user);
2. server-first ``r=<client nonce><server nonce>,s=<salt>,i=<iterations>``;
3. client-final ``c=biws,r=<nonce>,p=<proof>``; the proof is checked against the stored key;
4. server-final ``v=<server signature>``.

An unknown user runs the same exchange with made-up credentials and fails at step 3, so a client
cannot tell unknown users from wrong passwords. Pure: the nonce source and the credential
lookup are given; no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from .errors import SaslAuthenticationError

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's minimum (and RFC 7677's recommendation)
MAX_ITERATIONS = 16384  # Kafka's maximum


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(algorithm: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, algorithm).digest()


def make_credential(mechanism: str, password: str, *, salt: bytes | None = None,
                    iterations: int = MIN_ITERATIONS) -> ScramCredential:
    """What a password becomes when stored (as AlterUserScramCredentials and
    ``kafka-storage format --add-scram`` store it)."""
    algorithm = HASHES[mechanism]
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, iterations)
    client_key = _hmac(algorithm, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(algorithm, client_key).digest(),
                           _hmac(algorithm, salted, b"Server Key"), iterations)


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"malformed SCRAM attribute {part!r}")
        out[key] = value
    return out


def _unescape_username(name: str) -> str:
    # RFC 5802: "," is sent as "=2C" and "=" as "=3D"; any other "=" is malformed.
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ValueError("malformed username")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange. ``step`` takes the client's token and returns the server's; after the
    last step ``done`` is true and ``username`` is authenticated."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None],
                 nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24)) -> None:
        self.mechanism = mechanism
        self.algorithm = HASHES[mechanism]
        self._lookup = lookup
        self._nonce = nonce
        self._state = "first"
        self._client_first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self.username = ""
        self.done = False
        self.credential_expires_at_ms: int | None = None  # credentials do not expire

    def _fail(self, detail: str = "invalid credentials") -> SaslAuthenticationError:
        self._state = "failed"
        return SaslAuthenticationError(self.mechanism, detail)

    def step(self, token: bytes, now_ms: int = 0) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("a malformed message") from None
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise self._fail("an unexpected message")

    def _first(self, message: str) -> bytes:
        try:
            gs2, authzid, bare = message.split(",", 2)
            if gs2 not in ("n", "y"):  # channel binding ("p=...") is not offered
                raise ValueError("channel binding is not supported")
            attrs = _attributes(bare)
            self.username = _unescape_username(attrs["n"])
            client_nonce = attrs["r"]
            if not client_nonce or set(attrs) - {"n", "r", "tokenauth"}:
                raise ValueError("unexpected attributes")
        except (ValueError, KeyError):
            raise self._fail("a malformed message") from None
        if authzid and authzid != f"a={attrs['n']}":
            raise self._fail("an authorization id other than the user")
        credential = self._lookup(self.username, self.mechanism)
        self._known = credential is not None
        # An unknown user gets a deterministic fake salt: the exchange looks the same.
        self._credential = credential or make_credential(
            self.mechanism, secrets.token_hex(16),
            salt=hashlib.sha256(b"riverlog-unknown-user:" + self.username.encode()).digest(),
            iterations=MIN_ITERATIONS)
        self._client_first_bare = bare
        nonce = client_nonce + self._nonce()
        self._server_first = (f"r={nonce},s={base64.b64encode(self._credential.salt).decode()},"
                              f"i={self._credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        try:
            without_proof, sep, proof_part = message.rpartition(",p=")
            if not sep:
                raise ValueError("no proof")
            attrs = _attributes(without_proof)
            proof = base64.b64decode(proof_part, validate=True)
            expected_nonce = _attributes(self._server_first)["r"]
            if attrs.get("r") != expected_nonce:
                raise ValueError("nonce mismatch")
            channel = base64.b64decode(attrs["c"], validate=True)
            if channel not in (b"n,,", b"y,,") and not channel.startswith(b"n,a=") and not channel.startswith(b"y,a="):
                raise ValueError("bad channel binding")
        except (ValueError, KeyError):
            raise self._fail() from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self.algorithm, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail()
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not self._known or not hmac.compare_digest(hashlib.new(self.algorithm, client_key).digest(),
                                                      credential.stored_key):
            raise self._fail()
        server_signature = _hmac(self.algorithm, credential.server_key, auth_message)
        self._state = "done"
        self.done = True
        return b"v=" + base64.b64encode(server_signature)


def _escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """The client's side of one SCRAM exchange: ``first()``, then ``final(server_first)``, then
    ``verify(server_final)``, which proves the server knew the credential too. Raises
    SaslAuthenticationError on a malformed or dishonest server answer."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24)) -> None:
        self.mechanism = mechanism
        self.algorithm = HASHES[mechanism]
        self._username, self._password = username, password
        self._client_nonce = nonce()
        self._client_first_bare = f"n={_escape_username(username)},r={self._client_nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            text = server_first.decode("utf-8")
            attrs = _attributes(text)
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"], validate=True), int(attrs["i"])
        except (UnicodeDecodeError, ValueError, KeyError):
            raise SaslAuthenticationError(self.mechanism, "the server's first message is malformed") from None
        if not nonce.startswith(self._client_nonce) or len(nonce) == len(self._client_nonce):
            raise SaslAuthenticationError(self.mechanism, "the server did not extend the client nonce")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise SaslAuthenticationError(self.mechanism, f"the server asks for {iterations} iterations")
        salted = hashlib.pbkdf2_hmac(self.algorithm, self._password.encode(), salt, iterations)
        client_key = _hmac(self.algorithm, salted, b"Client Key")
        stored_key = hashlib.new(self.algorithm, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = _hmac(self.algorithm, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self.algorithm, _hmac(self.algorithm, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        try:
            attrs = _attributes(server_final.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise SaslAuthenticationError(self.mechanism, "the server's final message is malformed") from None
        if "e" in attrs:
            raise SaslAuthenticationError(self.mechanism, f"the server refused: {attrs['e']}")
        try:
            signature = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            signature = b""
        if not signature or not hmac.compare_digest(signature, self._server_signature):
            raise SaslAuthenticationError(self.mechanism, "the server's signature does not match: it does not "
                                                          "hold this user's credential")
