"""SASL OAUTHBEARER (RFC 7628) on the server side, as Kafka's OAuthBearerSaslServer runs it.

The client's one message is ``n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A...]^A``
(``^A`` is byte 0x01; the other key/value pairs are SASL extensions, accepted and not used, as
Kafka's validator callback handler accepts them). The token is checked by ``jwt_validator.py``
against the listener's JWKS. A valid token authenticates ``User:<sub>``, and its expiry bounds
the session (the authenticator reads ``credential_expires_at_ms``, KIP-368). An invalid one
gets RFC 7628's error answer ``{"status":"invalid_token"}``; the client acknowledges it with
``^A`` and the exchange then fails with that JSON as the message, as in Kafka. A malformed
message fails at once with Kafka's generic wording.

Pure: the time is given with each message and the keys are read from a ``JwksCache``.
"""

from __future__ import annotations

import logging
import re

from ..jwks import JwksCache
from ..jwt_validator import TokenRejected, ValidationSettings, validate_token
from .errors import SaslAuthenticationError

MECHANISM = "OAUTHBEARER"
SEPARATOR = "\x01"
INVALID_TOKEN = '{"status":"invalid_token"}'

# RFC 7628's grammar, as Kafka's OAuthBearerClientInitialResponse reads it: a saslname (no
# unescaped ',' or '='), keys of letters, values of printable ASCII, spaces and line breaks.
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_MESSAGE = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<pairs>(?:{_KEY}={_VALUE}\x01)*)\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)

log = logging.getLogger(__name__)


def parse_client_message(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(token, authorization id or "", extensions) of a client message; ValueError if malformed."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the message is not UTF-8") from None
    match = _MESSAGE.fullmatch(text)
    if match is None:
        raise ValueError("invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in match.group("pairs").split(SEPARATOR)[:-1]:
        key, _, value = pair.partition("=")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise ValueError("invalid OAUTHBEARER client first message: 'auth' not specified")
    scheme_and_token = _AUTH.fullmatch(auth)
    if scheme_and_token is None:
        raise ValueError("invalid OAUTHBEARER client first message: invalid 'auth' format")
    if scheme_and_token.group("scheme").lower() != "bearer":
        raise ValueError(f"invalid scheme in OAUTHBEARER client first message: {scheme_and_token.group('scheme')}")
    return scheme_and_token.group("token"), match.group("authzid") or "", pairs


class OAuthBearerServer:
    def __init__(self, settings: ValidationSettings, keys: JwksCache) -> None:
        self.mechanism = MECHANISM
        self._settings = settings
        self._keys = keys
        self.username = ""
        self.done = False
        self.credential_expires_at_ms: int | None = None
        self._error_sent = False

    def step(self, token: bytes, now_ms: int = 0) -> bytes:
        if self._error_sent and token == SEPARATOR.encode():
            # The client saw our error answer and gives up: the exchange fails with it.
            raise SaslAuthenticationError(MECHANISM, message=INVALID_TOKEN)
        self._error_sent = False
        try:
            access_token, authzid, _extensions = parse_client_message(token)
        except ValueError as exc:
            log.info("OAUTHBEARER: %s", exc)
            raise SaslAuthenticationError(MECHANISM) from None
        try:
            validated = validate_token(access_token, self._keys.keys, self._settings, now_ms)
        except TokenRejected as exc:
            if exc.unknown_kid is not None and self._keys.note_unknown_kid(exc.unknown_kid, now_ms):
                log.info("OAUTHBEARER: a token names an unknown key id; fetching %s again", self._keys.location)
            log.info("OAUTHBEARER: token refused: %s", exc)
            self._error_sent = True
            return INVALID_TOKEN.encode()
        if authzid and authzid != validated.principal_name:
            raise SaslAuthenticationError(
                MECHANISM, message=f"Authentication failed: Client requested an authorization id ({authzid}) "
                                   f"that is different from the token's principal name ({validated.principal_name})")
        self.username = validated.principal_name
        self.credential_expires_at_ms = validated.expires_at_ms
        self.done = True
        return b""
