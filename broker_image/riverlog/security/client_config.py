"""The client's side of TLS and SASL, from Kafka's client property names.

Riverlog's own client (the CLI's ``--command-config FILE``) and a broker talking to other brokers
and controllers use the same settings a Java client reads:

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
- ``ssl.truststore.location`` / ``ssl.truststore.certificates`` (PEM; without them the system's
  CAs), ``ssl.keystore.location`` / ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``
  and ``ssl.key.password`` for a client certificate (mTLS), and
  ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks the broker's name
  against its certificate; empty turns that off);
- ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and ``sasl.jaas.config`` with the
  login module's ``username`` and ``password`` options.

A broker builds its client settings for the inter-broker listener (``inter.broker.listener.name``,
``sasl.mechanism.inter.broker.protocol``) and the controller listener
(``sasl.mechanism.controller.protocol``) from the listener's own ``listener.name.<l>.`` settings,
as Kafka does: the listener's keystore is the broker's client certificate, its truststore
checks the peer, and the mechanism's JAAS entry (``listener.name.<l>.<mechanism>.sasl.jaas.config``)
holds the broker's ``username`` and ``password``.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from ..config import BrokerConfig, ConfigError
from .jaas import parse_jaas
from .sasl.scram import HASHES
from .sasl_config import SASL_PROTOCOLS, jaas_key
from .tls import TLS_PROTOCOLS, listener_setting, load_inline_chain

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
CLIENT_MECHANISMS = ("PLAIN", *HASHES)


@dataclass(frozen=True)
class ClientSecurity:
    """How a client secures its connections; ``PLAINTEXT`` (the default) is neither TLS nor SASL."""

    protocol: str = "PLAINTEXT"
    truststore_location: str = ""
    truststore_certificates: str = ""
    keystore_location: str = ""
    keystore_key: str = ""
    keystore_chain: str = ""
    key_password: str = ""
    check_hostname: bool = True
    mechanism: str = ""
    username: str = ""
    password: str = ""

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, where: str = "the client config") -> ClientSecurity:
        """Settings from Kafka client properties; ConfigError names what is wrong and the fix."""
        def get(key: str) -> str:
            return str(props.get(key, "")).strip()

        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security.protocol={protocol} in {where}: use one of {', '.join(SECURITY_PROTOCOLS)}")
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            if get(key) and get(key).upper() != "PEM":
                raise ConfigError(f"{key}={get(key)} in {where}: Riverlog's client reads PEM only; convert the "
                                  f"store (openssl pkcs12 -in store.p12 -nodes) and set {key}=PEM")
        mechanism, username, password = "", "", ""
        if protocol in SASL_PROTOCOLS:
            mechanism = (get("sasl.mechanism") or "GSSAPI").upper()
            if mechanism not in CLIENT_MECHANISMS:
                raise ConfigError(f"sasl.mechanism={mechanism} in {where}: Riverlog's client speaks "
                                  f"{', '.join(CLIENT_MECHANISMS)}; set sasl.mechanism to one of them")
            username, password = _login(get("sasl.jaas.config"), where)
        settings = cls(
            protocol=protocol,
            truststore_location=get("ssl.truststore.location"),
            truststore_certificates=get("ssl.truststore.certificates"),
            keystore_location=get("ssl.keystore.location"),
            keystore_key=get("ssl.keystore.key"),
            keystore_chain=get("ssl.keystore.certificate.chain"),
            key_password=get("ssl.key.password"),
            check_hostname=(props.get("ssl.endpoint.identification.algorithm", "https") or "").strip().lower()
            == "https",
            mechanism=mechanism, username=username, password=password,
        )
        if settings.tls:
            settings.ssl_context(where)  # refuse files that do not load now, not at the first connection
        return settings

    def ssl_context(self, where: str = "the client config") -> ssl.SSLContext:
        """A client context: the truststore's CAs (or the system's), the client certificate if any."""
        try:
            if self.truststore_location or self.truststore_certificates:
                context = ssl.create_default_context(cafile=self.truststore_location or None,
                                                     cadata=self.truststore_certificates or None)
            else:
                context = ssl.create_default_context()
            context.check_hostname = self.check_hostname
            password = self.key_password or None
            if self.keystore_location:
                context.load_cert_chain(self.keystore_location, password=password)
            elif self.keystore_key or self.keystore_chain:
                load_inline_chain(context, self.keystore_chain, self.keystore_key, password)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise ConfigError(f"{where}: cannot load the TLS truststore or keystore: {exc}") from None
        return context


_CONTEXTS: dict[ClientSecurity, tuple[tuple[float, ...], ssl.SSLContext]] = {}
_CONTEXTS_LOCK = threading.Lock()


def client_ssl_context(security: ClientSecurity) -> ssl.SSLContext:
    """The context for a new connection, built once per settings and again when the truststore or
    keystore file changes (certificates rotated on disk reach new connections without a restart)."""
    stamps = tuple(_mtime(p) for p in (security.truststore_location, security.keystore_location))
    with _CONTEXTS_LOCK:
        cached = _CONTEXTS.get(security)
        if cached is not None and cached[0] == stamps:
            return cached[1]
    context = security.ssl_context()
    with _CONTEXTS_LOCK:
        _CONTEXTS[security] = (stamps, context)
    return context


def _mtime(path: str) -> float:
    if not path:
        return 0.0
    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


def _login(jaas: str, where: str) -> tuple[str, str]:
    if not jaas:
        raise ConfigError(f"{where} uses SASL but sets no sasl.jaas.config (example: sasl.jaas.config="
                          "org.apache.kafka.common.security.scram.ScramLoginModule required "
                          'username="alice" password="alice-secret";)')
    try:
        entry = parse_jaas(jaas)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    username, password = entry.options.get("username", ""), entry.options.get("password", "")
    if not username or not password:
        raise ConfigError(f"{where}: sasl.jaas.config needs username=\"...\" and password=\"...\" options")
    return username, password


def broker_client_security(config: BrokerConfig, listener: str, mechanism_key: str) -> ClientSecurity:
    """A broker's (or controller's) settings as a client of ``listener`` on other nodes.

    ``mechanism_key`` is ``sasl.mechanism.inter.broker.protocol`` or
    ``sasl.mechanism.controller.protocol``; Kafka's default for both is GSSAPI, which Riverlog
    does not speak, so a SASL listener needs it set."""
    protocol = config.security_protocol(listener)
    props: dict[str, str] = {"security.protocol": protocol}
    for key in ("ssl.truststore.location", "ssl.truststore.certificates", "ssl.keystore.location",
                "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password",
                "ssl.endpoint.identification.algorithm", "ssl.keystore.type", "ssl.truststore.type"):
        props[key] = listener_setting(config, listener, key)
    where = f"listener {listener} (this node's client side)"
    if protocol in SASL_PROTOCOLS:
        mechanism = config.get(mechanism_key).strip().upper()
        if mechanism == "OAUTHBEARER":
            raise ConfigError(f"{mechanism_key}=OAUTHBEARER (listener {listener}): Riverlog serves OAUTHBEARER to "
                              "clients but a Riverlog node does not fetch tokens for itself (Kafka's "
                              "OAuthBearerLoginCallbackHandler and sasl.login.*); authenticate node-to-node traffic "
                              f"with SCRAM-SHA-512 or PLAIN: set {mechanism_key}=SCRAM-SHA-512 (or PLAIN) and enable "
                              f"it on listener {listener} beside OAUTHBEARER")
        if mechanism not in CLIENT_MECHANISMS:
            raise ConfigError(f"listener {listener} speaks {protocol}, and this node authenticates to it with "
                              f"{mechanism_key}={mechanism or '(empty)'}, which Riverlog does not speak: set it "
                              f"to one of {', '.join(CLIENT_MECHANISMS)}, with the node's own username and "
                              f"password in {jaas_key(listener, 'PLAIN')} (or that mechanism's key;"
                              " for example ...PlainLoginModule required username=\"broker\" "
                              "password=\"...\" user_broker=\"...\";)")
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = config.get(jaas_key(listener, mechanism))
        where = f"{mechanism_key}={mechanism} on listener {listener} ({jaas_key(listener, mechanism)})"
    return ClientSecurity.from_properties(props, where=where)


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker dials other brokers (replication, transaction markers, partition adds)."""
    return broker_client_security(config, config.inter_broker_listener(), "sasl.mechanism.inter.broker.protocol")


def controller_security(config: BrokerConfig) -> ClientSecurity:
    """How this node dials the controllers (Raft between voters, registration, forwarded calls).

    Not SCRAM: the controllers keep SCRAM credentials in the metadata log they have yet to agree
    on, so (as in Kafka) the controller listener authenticates with PLAIN."""
    if config.security_protocol(config.controller_listener()) in SASL_PROTOCOLS \
            and config.get("sasl.mechanism.controller.protocol").strip().upper() in HASHES:
        raise ConfigError(f"sasl.mechanism.controller.protocol={config.get('sasl.mechanism.controller.protocol')}: "
                          "SCRAM credentials live in the metadata log the controllers must first agree on, so "
                          "the controller listener cannot use them (Kafka refuses it too); use PLAIN there")
    return broker_client_security(config, config.controller_listener(), "sasl.mechanism.controller.protocol")
