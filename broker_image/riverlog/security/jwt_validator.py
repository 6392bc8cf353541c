"""An OAUTHBEARER access token (a JWS-signed JWT) checked as Kafka's OAuthBearerValidatorCallbackHandler
(its BrokerJwtValidator, built on jose4j) checks it.

1. The signature, with a key of the listener's JWKS: the one the token's ``kid`` names (if that
   id is unknown the caller may hurry a fetch of the JWKS: ``TokenRejected.unknown_kid``), or
   without a ``kid`` any key of the algorithm's type. Only asymmetric algorithms are accepted
   (RSA, RSA-PSS, ECDSA, EdDSA): ``none`` and the HMAC family are refused whatever the keys.
2. The claims: ``exp`` required and not passed, ``iat`` required (jose4j's
   ``setRequireIssuedAt``), ``nbf`` not in the future when present, all with
   ``sasl.oauthbearer.clock.skew.seconds`` of slack; ``aud`` sharing a value with
   ``sasl.oauthbearer.expected.audience`` when that is set; ``iss`` equal to
   ``sasl.oauthbearer.expected.issuer`` when that is set; the subject (``sub`` or
   ``sasl.oauthbearer.sub.claim.name``) a non-blank string; the scope claim, when present, a
   string or a list of distinct non-blank strings.

Pure: the keys and the time are given. PyJWT checks the signature; the claims are checked here
so that their rules are Kafka's exactly (PyJWT, for one, refuses an ``iat`` in the future,
which jose4j does not).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.exceptions import PyJWTError

from .jwks import VerificationKey

# The signature algorithms accepted, by the key type that verifies them.
ALGORITHM_KEY_TYPES = {
    **dict.fromkeys(("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"), "RSA"),
    **dict.fromkeys(("ES256", "ES384", "ES512"), "EC"),
    "EdDSA": "OKP",
}


@dataclass(frozen=True)
class ValidationSettings:
    expected_audiences: frozenset[str] = frozenset()
    expected_issuer: str | None = None
    clock_skew_s: int = 30
    sub_claim: str = "sub"
    scope_claim: str = "scope"


@dataclass(frozen=True)
class ValidatedToken:
    principal_name: str
    expires_at_ms: int
    scopes: frozenset[str]


class TokenRejected(Exception):
    """The token is not valid; the message says why (for the broker's log, never the client)."""

    def __init__(self, reason: str, unknown_kid: str | None = None) -> None:
        super().__init__(reason)
        self.unknown_kid = unknown_kid


def _header(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3 or not all(parts[:2]):
        raise TokenRejected("the token is not a signed JWT (three base64url parts)")
    try:
        header = jwt.get_unverified_header(token)
    except PyJWTError as exc:
        raise TokenRejected(f"the token's header does not decode: {exc}") from None
    return header


def _candidates(header: dict[str, Any], keys: Sequence[VerificationKey]) -> list[VerificationKey]:
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHM_KEY_TYPES:
        raise TokenRejected(f"algorithm {alg!r} is not accepted: tokens must be signed with an asymmetric key "
                            f"({', '.join(ALGORITHM_KEY_TYPES)}); 'none' and HMAC are refused")
    kty = ALGORITHM_KEY_TYPES[alg]
    kid = header.get("kid")
    usable = [k for k in keys if k.kty == kty and k.alg in (None, alg)]
    if kid is None:
        if not usable:
            raise TokenRejected(f"no {kty} key in the JWKS verifies {alg} tokens")
        return usable
    named = [k for k in usable if k.kid == kid]
    if not named:
        raise TokenRejected(f"no key with kid {str(kid)[:100]!r} for {alg} in the JWKS", unknown_kid=str(kid))
    return named


def _verified_claims(token: str, alg: str, candidates: Sequence[VerificationKey]) -> dict[str, Any]:
    for candidate in candidates:
        try:
            payload = jwt.api_jws.decode(token, candidate.key.key, algorithms=[alg])
        except PyJWTError:
            continue
        try:
            claims = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            raise TokenRejected("the token's claims are not JSON") from None
        if not isinstance(claims, dict):
            raise TokenRejected("the token's claims are not a JSON object")
        return claims
    raise TokenRejected("the token's signature does not verify with the JWKS keys")


def _numeric(claims: dict[str, Any], name: str, *, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenRejected(f"the token has no {name!r} claim")
        return None
    # (Python's JSON reader takes NaN and Infinity, which no date is.)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TokenRejected(f"the token's {name!r} claim is not a number")
    if value < 0:
        raise TokenRejected(f"the token's {name!r} claim is negative")
    return float(value)


def _scopes(claims: dict[str, Any], name: str) -> frozenset[str]:
    raw = claims.get(name)
    if raw is None:
        return frozenset()
    values = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    seen: set[str] = set()
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise TokenRejected(f"the token's {name!r} claim holds an empty or non-string scope")
        if value.strip() in seen:
            raise TokenRejected(f"the token's {name!r} claim repeats {value.strip()!r}")
        seen.add(value.strip())
    return frozenset(seen)


def _check_claims(claims: dict[str, Any], settings: ValidationSettings, now_ms: int) -> ValidatedToken:
    now_s = now_ms / 1000
    skew = settings.clock_skew_s
    expires = _numeric(claims, "exp", required=True)
    assert expires is not None
    if now_s - skew >= expires:
        raise TokenRejected(f"the token expired at {int(expires)} (now {int(now_s)}, clock skew {skew} s)")
    _numeric(claims, "iat", required=True)
    not_before = _numeric(claims, "nbf", required=False)
    if not_before is not None and now_s + skew < not_before:
        raise TokenRejected(f"the token is not valid before {int(not_before)} (now {int(now_s)}, clock skew {skew} s)")
    if settings.expected_audiences:
        aud = claims.get("aud")
        audiences = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
        if not audiences & settings.expected_audiences:
            raise TokenRejected(f"the token's audience {aud!r} is none of the expected "
                                f"{sorted(settings.expected_audiences)}")
    if settings.expected_issuer is not None and claims.get("iss") != settings.expected_issuer:
        raise TokenRejected(f"the token's issuer {claims.get('iss')!r} is not the expected "
                            f"{settings.expected_issuer!r}")
    subject = claims.get(settings.sub_claim)
    if not isinstance(subject, str) or not subject.strip():
        raise TokenRejected(f"the token has no non-blank {settings.sub_claim!r} claim to name its principal")
    return ValidatedToken(subject.strip(), int(expires * 1000), _scopes(claims, settings.scope_claim))


def validate_token(token: str, keys: Sequence[VerificationKey], settings: ValidationSettings,
                   now_ms: int) -> ValidatedToken:
    """The token's principal and expiry; TokenRejected says why it is not valid."""
    header = _header(token)
    candidates = _candidates(header, keys)
    claims = _verified_claims(token, header["alg"], candidates)
    return _check_claims(claims, settings, now_ms)
