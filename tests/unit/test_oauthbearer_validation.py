"""SASL OAUTHBEARER (issue #17): tokens checked case by case as Kafka's OAuthBearerValidatorCallbackHandler
checks them, the RFC 7628 exchange on one connection, KIP-368 session lifetimes bounded by the
token, the JWKS key set and its hurried refresh, and the settings a broker accepts or refuses."""

from __future__ import annotations

import json
from pathlib import Path

import jwt
import pytest
from riverlog.config import BrokerConfig, ConfigError
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.security.authenticator import OAuthBearerSettings, SaslSession, SaslSettings
from riverlog.security.client_config import inter_broker_security
from riverlog.security.jwks import MISSING_KID_WAIT_MS, JwksCache, parse_jwks
from riverlog.security.jwks_refresher import retry_wait_ms
from riverlog.security.jwt_validator import TokenRejected, ValidationSettings, validate_token
from riverlog.security.sasl.errors import SaslAuthenticationError
from riverlog.security.sasl.oauthbearer import INVALID_TOKEN, OAuthBearerServer, parse_client_message
from riverlog.security.sasl_config import sasl_settings
from support.oauth_idp import AUDIENCE, ISSUER, SigningKey, claims, jwks_document, sign, unsigned

pytestmark = pytest.mark.unit

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000
KEY = SigningKey.rsa("key-1")
OTHER = SigningKey.rsa("key-2")
SETTINGS = ValidationSettings(expected_audiences=frozenset({AUDIENCE, "other"}), expected_issuer=ISSUER)


def keys(*signing: SigningKey) -> JwksCache:
    cache = JwksCache("file:/jwks.json")
    cache.replace(parse_jwks(jwks_document(list(signing))), NOW_MS)
    return cache


def good(**changes: object) -> dict[str, object]:
    """Alice's claims at NOW_S, with ``changes`` (None removes a claim)."""
    base = claims("alice", now=NOW_S)
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def check(token: str, cache: JwksCache | None = None, settings: ValidationSettings = SETTINGS,
          now_ms: int = NOW_MS) -> str:
    return validate_token(token, (cache or keys(KEY)).keys, settings, now_ms).principal_name


def message(token: str, extensions: str = "", authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{extensions}\x01".encode()


# --- the token --------------------------------------------------------------------------------


def test_a_good_token_names_its_subject_and_expiry() -> None:
    validated = validate_token(sign(KEY, good()), keys(KEY).keys, SETTINGS, NOW_MS)
    assert (validated.principal_name, validated.expires_at_ms) == ("alice", (NOW_S + 3600) * 1000)
    assert validated.scopes == {"kafka"}
    # EC keys verify too, and a token without a kid is checked with the keys of its type.
    ec = SigningKey.ec("ec-1")
    assert check(sign(ec, good()), keys(KEY, ec)) == "alice"
    assert check(sign(KEY, good(), kid=None)) == "alice"


def test_a_wrong_signature_is_refused() -> None:
    forged = sign(SigningKey("key-1", OTHER.private), good())  # the right kid, another key
    with pytest.raises(TokenRejected, match="signature does not verify"):
        check(forged)
    header, payload, signature = sign(KEY, good()).split(".")
    tampered = jwt.utils.base64url_encode(json.dumps(good(sub="mallory")).encode()).decode()
    with pytest.raises(TokenRejected, match="signature does not verify"):
        check(f"{header}.{tampered}.{signature}")


def test_an_unknown_kid_hurries_one_refresh_then_verifies() -> None:
    cache = keys(KEY)
    wanted: list[bool] = []
    cache.on_refresh_wanted = lambda: wanted.append(True)
    token = sign(OTHER, good())
    with pytest.raises(TokenRejected) as refused:
        check(token, cache)
    assert refused.value.unknown_kid == "key-2"
    assert cache.note_unknown_kid("key-2", NOW_MS) and wanted == [True] and cache.refresh_wanted
    # The same id again within a minute does not hammer the identity provider.
    assert not cache.note_unknown_kid("key-2", NOW_MS + 1000)
    assert cache.note_unknown_kid("key-2", NOW_MS + MISSING_KID_WAIT_MS)
    assert not cache.note_unknown_kid("k" * 1001, NOW_MS)
    cache.replace(parse_jwks(jwks_document([KEY, OTHER])), NOW_MS + 2000)  # the provider rotated
    assert check(token, cache) == "alice" and not cache.refresh_wanted


def test_an_expired_token_is_refused_beyond_the_clock_skew() -> None:
    expired = sign(KEY, good(exp=NOW_S - 10))
    assert check(expired) == "alice"  # within the default 30 s of skew
    with pytest.raises(TokenRejected, match="expired"):
        check(expired, settings=ValidationSettings(clock_skew_s=0))
    with pytest.raises(TokenRejected, match="expired"):
        check(sign(KEY, good(exp=NOW_S - 31)))
    with pytest.raises(TokenRejected, match="no 'exp' claim"):
        check(sign(KEY, good(exp=None)))


def test_a_token_not_yet_valid_is_refused_and_iat_is_required() -> None:
    with pytest.raises(TokenRejected, match="not valid before"):
        check(sign(KEY, good(nbf=NOW_S + 60)))
    assert check(sign(KEY, good(nbf=NOW_S + 20))) == "alice"  # within the skew
    with pytest.raises(TokenRejected, match="no 'iat' claim"):
        check(sign(KEY, good(iat=None)))  # jose4j's setRequireIssuedAt, as Kafka configures it


def test_the_audience_must_intersect_the_expected_ones() -> None:
    with pytest.raises(TokenRejected, match="audience"):
        check(sign(KEY, good(aud="someone-else")))
    with pytest.raises(TokenRejected, match="audience"):
        check(sign(KEY, good(aud=None)))
    assert check(sign(KEY, good(aud=["someone-else", "other"]))) == "alice"
    # Without expected audiences, any (or no) audience passes, as in Kafka.
    assert check(sign(KEY, good(aud=None)), settings=ValidationSettings()) == "alice"


def test_the_issuer_must_be_the_expected_one() -> None:
    with pytest.raises(TokenRejected, match="issuer"):
        check(sign(KEY, good(iss="https://evil.example")))
    assert check(sign(KEY, good(iss="https://evil.example")), settings=ValidationSettings()) == "alice"


def test_alg_none_and_hmac_are_refused() -> None:
    with pytest.raises(TokenRejected, match="'none' and HMAC are refused"):
        check(unsigned(good()))
    hmac_token = jwt.encode(good(), "a-shared-secret-of-enough-length-32b", algorithm="HS256",
                            headers={"kid": "key-1"})
    with pytest.raises(TokenRejected, match="'none' and HMAC are refused"):
        check(hmac_token)
    # A shared-secret key in the JWKS is never used.
    with_oct = json.dumps({"keys": [{"kty": "oct", "kid": "s", "k": "c2VjcmV0"}, KEY.jwk()]})
    assert [k.kid for k in parse_jwks(with_oct)] == ["key-1"]


def test_the_subject_claim_is_required_and_may_be_renamed() -> None:
    with pytest.raises(TokenRejected, match="'sub'"):
        check(sign(KEY, good(sub=None)))
    with pytest.raises(TokenRejected, match="'sub'"):
        check(sign(KEY, good(sub="   ")))
    renamed = ValidationSettings(sub_claim="client_id")
    assert check(sign(KEY, good(client_id="svc-orders")), settings=renamed) == "svc-orders"


def test_scopes_must_be_distinct_non_blank_strings() -> None:
    with pytest.raises(TokenRejected, match="repeats"):
        check(sign(KEY, good(scope=["a", "a"])))
    with pytest.raises(TokenRejected, match="empty"):
        check(sign(KEY, good(scope="")))


@pytest.mark.parametrize("claim, value", [("exp", float("nan")), ("exp", float("inf")), ("exp", "soon"),
                                          ("iat", True), ("nbf", -5), ("iat", "yesterday")])
def test_dates_that_are_not_dates_are_refused(claim: str, value: object) -> None:
    with pytest.raises(TokenRejected):
        check(sign(KEY, good(**{claim: value})))


@pytest.mark.parametrize("token", ["", "abc", "a.b", "a..c", "not.a.jwt", "e30.e30.e30.e30"])
def test_garbage_is_refused_not_crashed_on(token: str) -> None:
    with pytest.raises(TokenRejected):
        check(token)


# --- the client message and the exchange ------------------------------------------------------


def test_the_client_message_and_its_extensions() -> None:
    assert parse_client_message(message("abc.def.ghi")) == ("abc.def.ghi", "", {})
    assert parse_client_message(message("t.o.k", "traceId=42\x01logicalCluster=lkc-1\x01", authzid="alice")) == (
        "t.o.k", "alice", {"traceId": "42", "logicalCluster": "lkc-1"})


@pytest.mark.parametrize("bad", [
    b"", b"n,,", b"n,,\x01\x01", b"n,,\x01auth=Bearer tok\x01",  # no auth; no closing ^A
    b"y,,\x01auth=Bearer tok\x01\x01", b"n,,\x01auth=Basic dXNlcjpwYXNz\x01\x01",
    b"n,,\x01auth=Bearer\x01\x01", b"n,,\x01auth=Bearer to ken\x01\x01", b"n,,\x01bad key=1\x01\x01",
    b"\xff\xfe", b"n,a=x=y,\x01auth=Bearer tok\x01\x01",
])
def test_malformed_client_messages_fail_with_kafkas_wording(bad: bytes) -> None:
    server = OAuthBearerServer(SETTINGS, keys(KEY))
    with pytest.raises(SaslAuthenticationError) as failed:
        server.step(bad, NOW_MS)
    assert str(failed.value) == ("Authentication failed during authentication due to invalid credentials with SASL "
                                 "mechanism OAUTHBEARER")


def test_extensions_are_accepted_and_ignored() -> None:
    server = OAuthBearerServer(SETTINGS, keys(KEY))
    assert server.step(message(sign(KEY, good()), "traceId=42\x01"), NOW_MS) == b""
    assert server.done and server.username == "alice"


def test_an_authorization_id_must_be_the_tokens_principal() -> None:
    server = OAuthBearerServer(SETTINGS, keys(KEY))
    with pytest.raises(SaslAuthenticationError, match=r"authorization id \(bob\).*principal name \(alice\)"):
        server.step(message(sign(KEY, good()), authzid="bob"), NOW_MS)


def oauth_session(reauth_ms: int = 0, cache: JwksCache | None = None) -> SaslSession:
    settings = SaslSettings("SASL", ("OAUTHBEARER",), reauth_ms=reauth_ms,
                            oauthbearer=OAuthBearerSettings("file:/jwks.json", validation=SETTINGS))
    return SaslSession(settings, lambda _u, _m: None, cache or keys(KEY))


def test_an_invalid_token_gets_rfc7628s_error_then_fails_and_closes() -> None:
    s = oauth_session()
    assert s.handshake("OAUTHBEARER", 1) == ErrorCode.NONE
    first = s.authenticate(message(sign(OTHER, good())), NOW_MS)
    assert (first.error, first.auth_bytes, first.close) == (ErrorCode.NONE, b'{"status":"invalid_token"}', False)
    final = s.authenticate(b"\x01", NOW_MS)
    assert (final.error, final.message, final.close) == (ErrorCode.SASL_AUTHENTICATION_FAILED, INVALID_TOKEN, True)
    assert not s.allows(ApiKey.METADATA, NOW_MS)


def test_a_good_token_authenticates_and_its_expiry_bounds_the_session() -> None:
    token = sign(KEY, good(exp=NOW_S + 30))
    s = oauth_session()
    s.handshake("OAUTHBEARER", 1)
    answer = s.authenticate(message(token), NOW_MS)
    # Kafka's rule: without connections.max.reauth.ms the token's remaining life is the session's.
    assert (answer.error, answer.session_lifetime_ms, s.principal) == (ErrorCode.NONE, 30_000, "User:alice")
    assert s.allows(ApiKey.PRODUCE, NOW_MS + 29_999) and not s.allows(ApiKey.PRODUCE, NOW_MS + 30_000)
    assert s.allows(ApiKey.SASL_HANDSHAKE, NOW_MS + 30_000)  # re-authentication stays possible
    # With connections.max.reauth.ms the smaller of the two.
    for reauth, lifetime in ((10_000, 10_000), (60_000, 30_000)):
        s = oauth_session(reauth)
        s.handshake("OAUTHBEARER", 1)
        assert s.authenticate(message(token), NOW_MS).session_lifetime_ms == lifetime


def test_connections_max_reauth_ms_may_be_set_per_listener_and_mechanism() -> None:
    config = BrokerConfig({**SASL_LISTENER, "sasl.oauthbearer.jwks.endpoint.url": "file:/j.json",
                           "listener.name.sasl.connections.max.reauth.ms": "60000",
                           "listener.name.sasl.oauthbearer.connections.max.reauth.ms": "5000"})
    assert config.unknown == []
    settings = sasl_settings(config)["SASL"]
    assert (settings.reauth_ms, settings.reauth_ms_by_mechanism) == (60_000, {"OAUTHBEARER": 5_000})
    s = SaslSession(settings, lambda _u, _m: None, keys(KEY))
    s.handshake("OAUTHBEARER", 1)
    assert s.authenticate(message(sign(KEY, good())), NOW_MS).session_lifetime_ms == 5_000


def test_re_authentication_with_a_fresh_token_and_an_expired_one() -> None:
    s = oauth_session(10_000)
    s.handshake("OAUTHBEARER", 1)
    s.authenticate(message(sign(KEY, good(exp=NOW_S + 60))), NOW_MS)
    later = NOW_MS + 9_000
    assert s.handshake("OAUTHBEARER", 1) == ErrorCode.NONE
    renewed = s.authenticate(message(sign(KEY, claims("alice", now=NOW_S + 9))), later)
    assert (renewed.error, renewed.session_lifetime_ms) == (ErrorCode.NONE, 10_000)
    # A token that has expired (beyond the skew) is refused.
    s.handshake("OAUTHBEARER", 1)
    stale = s.authenticate(message(sign(KEY, good(exp=NOW_S))), NOW_MS + 60_000)
    assert stale.auth_bytes == INVALID_TOKEN.encode()
    assert s.authenticate(b"\x01", NOW_MS + 60_000).close
    # Nor may a re-authentication change who the connection is.
    s = oauth_session()
    s.handshake("OAUTHBEARER", 1)
    s.authenticate(message(sign(KEY, good())), NOW_MS)
    s.handshake("OAUTHBEARER", 1)
    assert s.authenticate(message(sign(KEY, good(sub="bob"))), NOW_MS).close


def test_the_jwks_must_be_a_key_set_and_retries_back_off_as_kafkas() -> None:
    for bad in (b"not json", b"[]", b'{"keys": 1}'):
        with pytest.raises(ValueError):
            parse_jwks(bad)
    assert parse_jwks(json.dumps({"keys": [{**KEY.jwk(), "use": "enc"}, {"kty": "RSA", "n": "x"}]})) == ()
    assert [retry_wait_ms(a, 100, 10_000) for a in (1, 2, 3, 4)] == [100, 200, 400, 800]
    assert retry_wait_ms(8, 100, 5_000) == 5_000 and retry_wait_ms(2, 100, 0) <= 0


# --- the broker's settings ----------------------------------------------------------------------


SASL_LISTENER = {"listeners": "PLAINTEXT://:9092,SASL://:9093",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                 "listener.name.sasl.sasl.enabled.mechanisms": "OAUTHBEARER"}


def test_an_oauthbearer_listener_without_a_jwks_url_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="never accepts unsigned.*listener.name.sasl.oauthbearer."
                                          "sasl.oauthbearer.jwks.endpoint.url"):
        sasl_settings(BrokerConfig(SASL_LISTENER))
    with pytest.raises(ConfigError, match="must be a file:, http: or https: URL"):
        sasl_settings(BrokerConfig({**SASL_LISTENER, "sasl.oauthbearer.jwks.endpoint.url": "ldap://idp"}))
    with pytest.raises(ConfigError, match="OAUTHBEARER's login module is"):
        sasl_settings(BrokerConfig({**SASL_LISTENER, "sasl.oauthbearer.jwks.endpoint.url": "file:/j.json",
                                    "listener.name.sasl.oauthbearer.sasl.jaas.config":
                                        "org.apache.kafka.common.security.plain.PlainLoginModule required;"}))


def test_settings_follow_kafkas_precedence_mechanism_listener_broker() -> None:
    settings = sasl_settings(BrokerConfig({
        **SASL_LISTENER,
        "sasl.oauthbearer.jwks.endpoint.url": "https://broker-wide/jwks",
        "listener.name.sasl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "file:/listener/jwks.json",
        "listener.name.sasl.sasl.oauthbearer.expected.audience": "a, b",
        "sasl.oauthbearer.expected.issuer": "https://idp",
        "sasl.oauthbearer.clock.skew.seconds": "5",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": "60000"}))["SASL"].oauthbearer
    assert settings is not None
    assert (settings.jwks_url, settings.refresh_ms, settings.retry_backoff_ms) == ("file:/listener/jwks.json",
                                                                                   60_000, 100)
    assert settings.validation == ValidationSettings(frozenset({"a", "b"}), "https://idp", 5, "sub", "scope")


def test_oauthbearer_between_brokers_is_refused_with_what_to_use() -> None:
    config = BrokerConfig({**SASL_LISTENER, "inter.broker.listener.name": "SASL",
                           "sasl.oauthbearer.jwks.endpoint.url": "file:/j.json",
                           "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"})
    with pytest.raises(ConfigError, match="does not fetch tokens for itself.*SCRAM-SHA-512 or PLAIN"):
        inter_broker_security(config)


def test_the_refresher_loads_a_file_jwks_and_fetches_again_on_an_unknown_kid(tmp_path: Path) -> None:
    import asyncio

    from riverlog.security.jwks_refresher import JwksRefresher

    path = tmp_path / "jwks.json"
    path.write_text(jwks_document([KEY]))
    settings = OAuthBearerSettings(path.as_uri(), refresh_ms=3_600_000, retry_backoff_ms=10, retry_backoff_max_ms=50)

    async def scenario() -> None:
        cache = JwksCache(settings.jwks_url)
        refresher = JwksRefresher(cache, settings, "SASL")
        await refresher.start()
        try:
            assert cache.loaded and [k.kid for k in cache.keys] == ["key-1"]
            path.write_text(jwks_document([KEY, OTHER]))  # the provider rotates
            assert cache.note_unknown_kid("key-2", NOW_MS)
            for _ in range(100):
                if len(cache.keys) == 2:
                    break
                await asyncio.sleep(0.02)
            assert [k.kid for k in cache.keys] == ["key-1", "key-2"]
            path.write_text("not a jwks")  # a broken fetch keeps the keys in hand
            assert not await refresher.refresh() and len(cache.keys) == 2
        finally:
            refresher.stop()

    asyncio.run(scenario())
