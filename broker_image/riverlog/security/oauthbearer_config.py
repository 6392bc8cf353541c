"""An OAUTHBEARER listener's settings, from Kafka's property names for its
OAuthBearerValidatorCallbackHandler.

Each key is read as Kafka reads it for a listener and mechanism: first
``listener.name.<listener>.oauthbearer.<key>``, then ``listener.name.<listener>.<key>``, then the
broker-wide ``<key>``:

- ``sasl.oauthbearer.jwks.endpoint.url`` (required: a ``file:`` or ``http(s):`` URL of the
  identity provider's JWKS). Kafka without it falls back to its "unsecured" validator, which
  trusts unsigned tokens; Riverlog never does, so a listener without it is refused at start.
- ``...jwks.endpoint.refresh.ms``, ``...jwks.endpoint.retry.backoff.ms``,
  ``...jwks.endpoint.retry.backoff.max.ms``: how often the keys are fetched again, and the
  backoff of a failed fetch (``jwks_refresher.py``).
- ``...clock.skew.seconds``, ``...expected.audience`` (comma list), ``...expected.issuer``,
  ``...sub.claim.name``, ``...scope.claim.name``: the checks of ``jwt_validator.py``.
- ``listener.name.<l>.oauthbearer.sasl.jaas.config``: Kafka wants an OAuthBearerLoginModule entry
  there; Riverlog accepts it (its options configure nothing on the server side).

Pure: reads a BrokerConfig.
"""

from __future__ import annotations

from urllib.parse import urlparse

from ..config import BrokerConfig, ConfigError
from ..config_refusals import OAUTHBEARER_SERVER_DEFAULTS
from .authenticator import OAuthBearerSettings
from .jaas import parse_jaas
from .jwt_validator import ValidationSettings

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
URL_KEY = "sasl.oauthbearer.jwks.endpoint.url"


def oauthbearer_setting(config: BrokerConfig, listener: str, key: str) -> str:
    """A validation setting for one listener, by Kafka's precedence (mechanism, listener, broker)."""
    scope = f"listener.name.{listener.lower()}."
    for candidate in (f"{scope}oauthbearer.{key}", f"{scope}{key}"):
        if candidate in config.props:
            return config.props[candidate].strip()
    return config.props.get(key, OAUTHBEARER_SERVER_DEFAULTS[key]).strip()


def _integer(config: BrokerConfig, listener: str, key: str, minimum: int) -> int:
    raw = oauthbearer_setting(config, listener, key)
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"listener {listener}: {key}={raw!r} must be an integer") from None
    if value < minimum:
        raise ConfigError(f"listener {listener}: {key}={value} must be at least {minimum}")
    return value


def oauthbearer_settings(config: BrokerConfig, listener: str) -> OAuthBearerSettings:
    """ConfigError names what is wrong and the fix."""
    url = oauthbearer_setting(config, listener, URL_KEY)
    if not url:
        raise ConfigError(f"listener {listener} enables OAUTHBEARER but {URL_KEY} is not set: Riverlog checks every "
                          "token's signature with the identity provider's public keys and never accepts unsigned "
                          f"(Kafka's \"unsecured\") tokens. Set listener.name.{listener.lower()}.oauthbearer.{URL_KEY} "
                          "to the provider's JWKS URL (https://idp.example/.well-known/jwks.json) or a file: URL")
    if urlparse(url).scheme.lower() not in ("file", "http", "https"):
        raise ConfigError(f"listener {listener}: {URL_KEY}={url} must be a file:, http: or https: URL")
    jaas_key = f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config"
    if config.props.get(jaas_key, "").strip():
        try:
            module = parse_jaas(config.props[jaas_key]).module
        except ValueError as exc:
            raise ConfigError(f"{jaas_key}: {exc}") from None
        if module != LOGIN_MODULE:
            raise ConfigError(f"{jaas_key} names {module}; OAUTHBEARER's login module is {LOGIN_MODULE}")
    audiences = frozenset(a.strip() for a in oauthbearer_setting(config, listener, "sasl.oauthbearer.expected.audience")
                          .split(",") if a.strip())
    validation = ValidationSettings(
        expected_audiences=audiences,
        expected_issuer=oauthbearer_setting(config, listener, "sasl.oauthbearer.expected.issuer") or None,
        clock_skew_s=_integer(config, listener, "sasl.oauthbearer.clock.skew.seconds", 0),
        sub_claim=oauthbearer_setting(config, listener, "sasl.oauthbearer.sub.claim.name") or "sub",
        scope_claim=oauthbearer_setting(config, listener, "sasl.oauthbearer.scope.claim.name") or "scope",
    )
    return OAuthBearerSettings(
        jwks_url=url,
        refresh_ms=_integer(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 1),
        retry_backoff_ms=_integer(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 1),
        retry_backoff_max_ms=_integer(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 0),
        validation=validation,
    )
