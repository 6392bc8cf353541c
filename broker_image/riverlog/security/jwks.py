"""The identity provider's public keys (a JWKS, RFC 7517) that OAUTHBEARER tokens are checked with.

:func:`parse_jwks` reads a JWKS document; :class:`JwksCache` holds the keys of one listener and
decides, as Kafka's RefreshingHttpsJwks does, when a token naming a key id it does not know may
hurry the next fetch: at most once a minute per key id, for at most 16 key ids remembered, and
never for an absurdly long one (a client must not be able to make the broker hammer the
identity provider). Fetching is I/O and lives in ``jwks_refresher.py``; this module is pure.

Only asymmetric keys are kept (RSA, EC, OKP): an ``oct`` (shared secret) key would let HMAC
tokens verify, and Riverlog, like Kafka's jose4j set-up, trusts signatures only.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import jwt
from jwt.exceptions import PyJWTError

ASYMMETRIC_KEY_TYPES = ("RSA", "EC", "OKP")
# Kafka's RefreshingHttpsJwks: how long a missing key id waits before it may hurry another
# fetch, how many such ids it remembers, and the longest id it considers.
MISSING_KID_WAIT_MS = 60_000
MISSING_KID_MEMORY = 16
MISSING_KID_MAX_LENGTH = 1000


@dataclass(frozen=True)
class VerificationKey:
    kid: str | None
    kty: str
    alg: str | None  # the algorithm the key is for, when the JWKS says
    use: str | None  # "sig" or absent; "enc" keys never verify tokens
    key: jwt.PyJWK


def parse_jwks(document: bytes | str) -> tuple[VerificationKey, ...]:
    """The usable verification keys of a JWKS document; ValueError if it is not one.

    Keys of a type or use that cannot verify signatures, or that do not parse, are skipped
    (a provider may publish encryption keys or a key type this broker has no use for)."""
    try:
        data = json.loads(document)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the JWKS is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError('the JWKS has no "keys" list')
    keys: list[VerificationKey] = []
    for entry in data["keys"]:
        if not isinstance(entry, dict) or entry.get("kty") not in ASYMMETRIC_KEY_TYPES:
            continue
        if entry.get("use") not in (None, "sig"):
            continue
        try:
            parsed = jwt.PyJWK(entry)
        except (PyJWTError, ValueError, TypeError, KeyError):
            continue
        kid = entry.get("kid")
        alg = entry.get("alg")
        keys.append(VerificationKey(kid if isinstance(kid, str) else None, entry["kty"],
                                    alg if isinstance(alg, str) else None, entry.get("use"), parsed))
    return tuple(keys)


class JwksCache:
    """One listener's current keys, replaced whole by each successful fetch."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.keys: tuple[VerificationKey, ...] = ()
        self.loaded = False
        self.refreshed_at_ms: int | None = None
        self._missing: OrderedDict[str, int] = OrderedDict()  # key id -> when it may hurry a fetch again
        self.refresh_wanted = False
        # Set by the refresher: wakes it when a fetch is wanted before the next scheduled one.
        self.on_refresh_wanted: Callable[[], None] | None = None

    def replace(self, keys: tuple[VerificationKey, ...], now_ms: int) -> None:
        self.keys = keys
        self.loaded = True
        self.refreshed_at_ms = now_ms
        self.refresh_wanted = False

    def note_unknown_kid(self, kid: str, now_ms: int) -> bool:
        """A token named a key id the set lacks: True if that hurries the next fetch."""
        if len(kid) > MISSING_KID_MAX_LENGTH:
            return False
        next_allowed = self._missing.get(kid)
        if next_allowed is not None and now_ms < next_allowed:
            return False
        self._missing[kid] = now_ms + MISSING_KID_WAIT_MS
        self._missing.move_to_end(kid)
        while len(self._missing) > MISSING_KID_MEMORY:
            self._missing.popitem(last=False)
        self.refresh_wanted = True
        if self.on_refresh_wanted is not None:
            self.on_refresh_wanted()
        return True
