"""Properties Riverlog refuses rather than ignores: they change security semantics in Kafka.

Most Kafka properties Riverlog does not read are harmless to ignore (a tuning knob of a part it
does differently), and the broker says so in one INFO line. Not these: someone who set
``ssl.keystore.location``, ``sasl.enabled.mechanisms``, ``sasl.oauthbearer.*`` or a
``SASL_SSL`` listener believes the broker encrypts, authenticates or authorizes. Serving
plaintext, unauthenticated, on that listener would mislead them, so the broker stops at start
and names every such property, until Riverlog implements them.

Pure functions over the merged properties; ``config.BrokerConfig`` calls :func:`refusals`.
"""

from __future__ import annotations

from collections.abc import Mapping

# Kafka's security protocols, all served: TLS (security/tls.py), SASL (security/sasl_config.py).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = SECURITY_PROTOCOLS

# OAUTHBEARER token validation (security/jwt_validator.py): the broker-side keys of Kafka's
# OAuthBearerValidatorCallbackHandler, with Kafka's defaults. The other sasl.oauthbearer.* keys
# configure a client's token retrieval (a broker's OAUTHBEARER towards other nodes), not served.
OAUTHBEARER_SERVER_DEFAULTS = {
    "sasl.oauthbearer.jwks.endpoint.url": "",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10000",
    "sasl.oauthbearer.clock.skew.seconds": "30",
    "sasl.oauthbearer.expected.audience": "",
    "sasl.oauthbearer.expected.issuer": "",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.scope.claim.name": "scope",
}
# The one server callback handler served (sasl.server.callback.handler.class, globally or as
# listener.name.<l>.oauthbearer.sasl.server.callback.handler.class): Kafka's JWT validator.
OAUTHBEARER_VALIDATOR_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
CALLBACK_HANDLER_KEY = "sasl.server.callback.handler.class"

# Families of Kafka broker properties that configure authentication or authorization Riverlog
# does not have yet.
REFUSED_PREFIXES = (
    "sasl.oauthbearer.",  # a client's token retrieval (the served keys above pass)
    "sasl.kerberos.",  # GSSAPI
    "sasl.server.callback.handler.",  # custom credential checks (Java classes; Kafka's validator passes)
    "sasl.login.",  # login callbacks and refresh (OAUTHBEARER, Kerberos)
    "delegation.token.",  # delegation tokens authenticate clients
    "principal.builder.",  # principal.builder.class: who a client is
)
# The same families set for one listener (and mechanism).
_SCOPED_REFUSED_PREFIXES = ("sasl.oauthbearer.", "sasl.server.callback.", "sasl.login.")
REFUSED_NAMES: frozenset[str] = frozenset()

WHAT_TO_DO = ("Riverlog serves TLS, SASL PLAIN/SCRAM/OAUTHBEARER (tokens checked against a JWKS) and ACLs "
              "but not yet GSSAPI, OAUTHBEARER between brokers or custom callback classes, and "
              "will not serve plaintext to a configuration that asks for more. Remove these properties "
              "and run the broker on a trusted network (or behind a TLS-terminating proxy) until "
              "Riverlog supports them.")


def _listener_protocol(name: str, protocol_map: Mapping[str, str]) -> str | None:
    """The security protocol a listener name stands for, as Kafka resolves it: its entry in
    ``listener.security.protocol.map``, or the name itself when it is a protocol's name."""
    if name in protocol_map:
        return protocol_map[name]
    return name if name in SECURITY_PROTOCOLS else None


def parse_protocol_map(spec: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, _, protocol = part.partition(":")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def _served_oauthbearer(key: str, props: Mapping[str, str]) -> bool:
    """An OAUTHBEARER key Riverlog serves: a validation setting, globally or for one listener
    (``listener.name.<l>.oauthbearer.<key>`` or ``listener.name.<l>.<key>``), or the callback
    handler naming Kafka's validator."""
    rest = key
    if key.startswith("listener.name."):
        rest = key[len("listener.name."):].partition(".")[2].removeprefix("oauthbearer.")
    if rest in OAUTHBEARER_SERVER_DEFAULTS:
        return True
    scoped_handler = key.startswith("listener.name.") and key.endswith(".oauthbearer." + CALLBACK_HANDLER_KEY)
    return (key == CALLBACK_HANDLER_KEY or scoped_handler) and props.get(key, "").strip() == \
        OAUTHBEARER_VALIDATOR_HANDLER


def _scoped_refused(key: str) -> bool:
    """``listener.name.<l>.<key>`` or ``listener.name.<l>.<mechanism>.<key>`` of what is not served."""
    rest = key[len("listener.name."):].partition(".")[2]
    tail = rest.partition(".")[2]
    return "gssapi" in key or any(part.startswith(_SCOPED_REFUSED_PREFIXES) for part in (rest, tail))


def refusals(props: Mapping[str, str], explicit: frozenset[str], listener_names: list[str]) -> list[str]:
    """Each property (with why) that asks for security Riverlog does not have; empty if none.

    ``props`` are the merged properties, ``explicit`` the keys the operator set (defaults never
    refuse), ``listener_names`` the names of the listeners in ``listeners``. Entries of
    ``listener.security.protocol.map`` for listeners not in use are harmless (Kafka's sample
    ``server.properties`` maps SSL:SSL and SASL_SSL:SASL_SSL without using them) and pass.
    """
    found: list[str] = []
    for key in sorted(explicit):
        if _served_oauthbearer(key, props):
            continue
        if key.endswith(CALLBACK_HANDLER_KEY):
            found.append(f"{key} (the one handler served is {OAUTHBEARER_VALIDATOR_HANDLER}, for OAUTHBEARER)")
        elif key.startswith(REFUSED_PREFIXES) or key in REFUSED_NAMES:
            found.append(key)
        elif key.startswith("listener.name.") and _scoped_refused(key):
            found.append(key)  # per-listener settings of what is not served
    protocol_map = parse_protocol_map(props.get("listener.security.protocol.map", ""))
    for name in listener_names:
        protocol = _listener_protocol(name, protocol_map)
        if protocol is not None and protocol not in SERVED_PROTOCOLS:
            found.append(f"listener {name}" if name == protocol else f"listener {name} ({protocol})")
    return found
