"""A small OAuth identity provider for tests: signing keys, a JWKS endpoint and an OAuth 2
client-credentials token endpoint on loopback.

Keys are made with ``cryptography`` and tokens signed (RS256 by default) with PyJWT. The HTTP
server runs in a thread: ``GET /jwks`` answers the public keys, ``POST /token`` (client id and
secret in HTTP Basic auth or the form, ``grant_type=client_credentials``) answers
``{"access_token": ..., "token_type": "Bearer", "expires_in": ...}`` with ``sub`` = the client id.
It counts the token requests per client, so a test can see a client come back for a new token
(re-authentication). Everything is also usable without the server (unit tests sign tokens).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://idp.riverlog.test"
AUDIENCE = "riverlog-kafka"


@dataclass
class SigningKey:
    kid: str
    private: Any  # an RSA or EC private key of ``cryptography``
    alg: str = "RS256"

    @classmethod
    def rsa(cls, kid: str) -> SigningKey:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def ec(cls, kid: str) -> SigningKey:
        return cls(kid, ec.generate_private_key(ec.SECP256R1()), "ES256")

    def jwk(self) -> dict[str, Any]:
        algorithm = RSAAlgorithm if self.alg.startswith(("RS", "PS")) else ECAlgorithm
        public = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "use": "sig", "alg": self.alg}


def jwks_document(keys: list[SigningKey]) -> str:
    return json.dumps({"keys": [k.jwk() for k in keys]})


def claims(sub: str = "alice", *, lifetime_s: int = 3600, now: float | None = None, **extra: Any) -> dict[str, Any]:
    now = time.time() if now is None else now
    base: dict[str, Any] = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now),
                            "exp": int(now) + lifetime_s, "scope": "kafka"}
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def sign(key: SigningKey, payload: dict[str, Any], *, kid: str | None = "", alg: str | None = None) -> str:
    """A compact JWS of ``payload``; ``kid`` "" means the key's own id, None none at all."""
    headers = {} if kid is None else {"kid": kid or key.kid}
    return jwt.encode(payload, key.private, algorithm=alg or key.alg, headers=headers)


def unsigned(payload: dict[str, Any]) -> str:
    """An ``alg: none`` token (what Kafka's "unsecured" login makes)."""
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(payload)}."


@dataclass
class IdentityProvider:
    """The HTTP endpoints; ``start()`` binds a free loopback port."""

    keys: list[SigningKey] = field(default_factory=lambda: [SigningKey.rsa("key-1")])
    clients: dict[str, str] = field(default_factory=lambda: {})  # client id -> secret
    token_lifetime_s: int = 3600
    client_lifetimes: dict[str, int] = field(default_factory=lambda: {})  # client id -> its tokens' life
    token_requests: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    @property
    def signing_key(self) -> SigningKey:
        return self.keys[0]

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the identity provider first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    def token(self, sub: str, lifetime_s: int | None = None) -> tuple[str, int]:
        """(a signed access token for ``sub``, its expiry in epoch seconds)."""
        payload = claims(sub, lifetime_s=self.token_lifetime_s if lifetime_s is None else lifetime_s)
        return sign(self.signing_key, payload), payload["exp"]

    def requests_of(self, client_id: str) -> int:
        with self._lock:
            return self.token_requests[client_id]

    def start(self) -> IdentityProvider:
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
                pass  # keep test output quiet

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                if self.path.split("?")[0] == "/jwks":
                    self._answer(200, json.loads(jwks_document(idp.keys)))
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
                auth = self.headers.get("Authorization", "")
                if auth.lower().startswith("basic "):
                    decoded = base64.b64decode(auth[6:]).decode()
                    client_id, _, secret = decoded.partition(":")
                    client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
                if self.path.split("?")[0] != "/token" or form.get("grant_type") != "client_credentials":
                    self._answer(400, {"error": "unsupported_grant_type"})
                    return
                if idp.clients.get(client_id) != secret or not client_id:
                    self._answer(401, {"error": "invalid_client"})
                    return
                with idp._lock:
                    idp.token_requests[client_id] += 1
                token, expires = idp.token(client_id, idp.client_lifetimes.get(client_id))
                self._answer(200, {"access_token": token, "token_type": "Bearer",
                                   "expires_in": max(1, expires - int(time.time())), "scope": "kafka"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="test-idp", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
