"""Which listeners speak SASL and how, from Kafka's property names.

- ``sasl.enabled.mechanisms`` (or ``listener.name.<listener>.sasl.enabled.mechanisms``): PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512 (SCRAM credentials live in the metadata log: controller/scram.py),
  OAUTHBEARER (JWTs checked against a JWKS: oauthbearer_config.py).
  Kafka's default, GSSAPI (Kerberos), is not served: a SASL listener must name its mechanisms.
- PLAIN's users: ``listener.name.<listener>.plain.sasl.jaas.config`` with Kafka's PlainLoginModule
  options ``user_<name>="<password>"``.
- ``connections.max.reauth.ms`` (or per listener, or per listener and mechanism as
  ``listener.name.<listener>.<mechanism>.connections.max.reauth.ms``): the longest KIP-368
  session, 0 (default) no bound but the credential's own expiry.
"""

from __future__ import annotations

from ..config import BrokerConfig, ConfigError
from .authenticator import SERVED_MECHANISMS, SaslSettings
from .jaas import parse_jaas
from .oauthbearer_config import oauthbearer_settings
from .tls import listener_setting

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
ENABLED_MECHANISMS = SERVED_MECHANISMS


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def sasl_settings(config: BrokerConfig) -> dict[str, SaslSettings]:
    """The settings of every SASL listener (ConfigError names what is wrong and the fix)."""
    out: dict[str, SaslSettings] = {}
    for lst in config.listeners():
        if config.security_protocol(lst.name) not in SASL_PROTOCOLS:
            continue
        name = lst.name
        mechanisms = tuple(m.strip().upper() for m in
                           listener_setting(config, name, "sasl.enabled.mechanisms").split(",") if m.strip())
        unserved = [m for m in mechanisms if m not in ENABLED_MECHANISMS]
        if not mechanisms or unserved:
            raise ConfigError(f"listener {name}: sasl.enabled.mechanisms={','.join(mechanisms) or '(empty)'} "
                              f"names {', '.join(unserved) or 'nothing'} Riverlog does not serve; choose from "
                              f"{', '.join(ENABLED_MECHANISMS)} (example: listener.name.{name.lower()}."
                              "sasl.enabled.mechanisms=SCRAM-SHA-512)")
        passwords: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            raw = config.props.get(jaas_key(name, "PLAIN"), "")
            if not raw:
                raise ConfigError(f"listener {name} enables PLAIN but {jaas_key(name, 'PLAIN')} is not set "
                                  "(example: org.apache.kafka.common.security.plain.PlainLoginModule required "
                                  'user_alice="alice-secret";)')
            try:
                entry = parse_jaas(raw)
            except ValueError as exc:
                raise ConfigError(f"{jaas_key(name, 'PLAIN')}: {exc}") from None
            passwords = {k.removeprefix("user_"): v for k, v in entry.options.items() if k.startswith("user_")}
        reauth = _reauth_ms(listener_setting(config, name, "connections.max.reauth.ms"), name)
        # Kafka's per-mechanism form, listener.name.<l>.<mechanism>.connections.max.reauth.ms, wins.
        scoped = {m: f"listener.name.{name.lower()}.{m.lower()}.connections.max.reauth.ms" for m in mechanisms}
        by_mechanism = {m: _reauth_ms(config.props[key], name) for m, key in scoped.items() if key in config.props}
        oauth = oauthbearer_settings(config, name) if "OAUTHBEARER" in mechanisms else None
        out[name] = SaslSettings(name, mechanisms, passwords, reauth, oauth, by_mechanism)
    return out


def _reauth_ms(raw: str, listener: str) -> int:
    try:
        return max(0, int(raw or "0"))
    except ValueError:
        raise ConfigError(f"listener {listener}: connections.max.reauth.ms={raw!r} must be an integer") from None
