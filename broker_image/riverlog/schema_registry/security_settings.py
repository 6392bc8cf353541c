"""The registry's security settings under Confluent's property names: its https listeners, HTTP
basic authentication of its callers, and the registry as a client of a secured Kafka cluster.

Reading the files named (keystores, users files) happens here, at start, so a setting that
cannot be honoured stops the registry with the reason instead of serving less than was asked.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError
from ..security.client_config import ClientSecurity
from ..security.keystores import PemKeystore, pkcs12_keystore, store_type, truststore_pem
from ..security.tls import load_inline_chain
from .basic_auth import BasicAuthenticator, UsersFileError, parse_users, users_file_from_jaas

CLIENT_AUTHENTICATION = {"NONE": ssl.CERT_NONE, "REQUESTED": ssl.CERT_OPTIONAL, "REQUIRED": ssl.CERT_REQUIRED}
AUTH_METHODS = ("NONE", "BASIC")
DEFAULT_REALM = "SchemaRegistry-Props"
# Prometheus scrapes without credentials; Confluent has no /metrics resource to compare with.
METRICS_PATH = "/metrics"


@dataclass(frozen=True)
class HttpsSettings:
    """An https listener's key and certificate, the CAs it trusts, and client certificates."""

    keystore_location: str  # a PEM file (key and chain), or "" with ``inline`` set
    key_password: str
    inline: PemKeystore | None  # a PKCS12 keystore, opened
    truststore: str  # PEM text of the trusted CAs ("": the system's, for the forwarding client)
    client_authentication: str  # NONE, REQUESTED or REQUIRED
    check_hostname: bool  # when forwarding to another instance

    def _load_keystore(self, context: ssl.SSLContext) -> None:
        if self.inline is not None:
            load_inline_chain(context, self.inline.chain, self.inline.key, None)
        else:
            context.load_cert_chain(self.keystore_location, password=self.key_password or None)

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._load_keystore(context)
        if self.truststore:
            context.load_verify_locations(cadata=self.truststore)
        context.verify_mode = CLIENT_AUTHENTICATION[self.client_authentication]
        return context

    def client_context(self) -> ssl.SSLContext:
        """How this instance calls another one (forwarded writes): our truststore checks it, our
        keystore is the client certificate an instance requiring one asks for."""
        context = ssl.create_default_context(cadata=self.truststore or None)
        context.check_hostname = self.check_hostname
        self._load_keystore(context)
        return context


@dataclass(frozen=True)
class AuthSettings:
    authenticator: BasicAuthenticator
    skip_paths: tuple[str, ...]  # served without credentials: exact paths, or prefixes ending "/*"

    def skips(self, path: str) -> bool:
        return any(path == p or (p.endswith("/*") and (path + "/").startswith(p[:-1])) for p in self.skip_paths)


def _get(props: Mapping[str, str], key: str) -> str:
    return str(props.get(key, "")).strip()


def https_settings(props: Mapping[str, str]) -> HttpsSettings:
    """``ssl.keystore.*``, ``ssl.truststore.*``, ``ssl.client.authentication`` (or the older
    ``ssl.client.auth=true``) of the https listeners."""
    location = _get(props, "ssl.keystore.location")
    if not location:
        raise ConfigError("an https listener needs its key and certificate: set ssl.keystore.location (a PKCS12 "
                          "store with ssl.keystore.password, or a PEM file of key and chain) and ssl.keystore.type")
    store_password, key_password = _get(props, "ssl.keystore.password"), _get(props, "ssl.key.password")
    inline = None
    if store_type(location, _get(props, "ssl.keystore.type"), "ssl.keystore.location") == "PKCS12":
        inline = pkcs12_keystore(location, store_password, key_password, "ssl.keystore.location")
    trust_location = _get(props, "ssl.truststore.location")
    truststore = ""
    if trust_location:
        kind = store_type(trust_location, _get(props, "ssl.truststore.type"), "ssl.truststore.location")
        truststore = truststore_pem(trust_location, kind, _get(props, "ssl.truststore.password"),
                                    "ssl.truststore.location")
    client_auth = _get(props, "ssl.client.authentication").upper()
    if not client_auth:
        client_auth = "REQUIRED" if _get(props, "ssl.client.auth").lower() == "true" else "NONE"
    if client_auth not in CLIENT_AUTHENTICATION:
        raise ConfigError(f"ssl.client.authentication={client_auth}: one of {', '.join(CLIENT_AUTHENTICATION)}")
    if client_auth != "NONE" and not truststore:
        raise ConfigError(f"ssl.client.authentication={client_auth} needs the CAs that sign client certificates: "
                          "set ssl.truststore.location (and ssl.truststore.type)")
    # As Kafka's clients: host names are checked unless the property is set empty.
    check_hostname = str(props.get("ssl.endpoint.identification.algorithm", "https")).strip().lower() == "https"
    settings = HttpsSettings(location, key_password or (store_password if inline is None else ""), inline,
                             truststore, client_auth, check_hostname)
    try:
        settings.server_context()
        settings.client_context()
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"ssl.keystore.location={location}: cannot load the key, certificate or truststore: "
                          f"{exc}") from None
    return settings


def auth_settings(props: Mapping[str, str]) -> AuthSettings | None:
    """``authentication.method=BASIC`` with ``authentication.realm``, ``authentication.roles`` and
    the users from ``authentication.users.file`` (Riverlog's) or the realm's section of the JAAS
    file ``authentication.jaas.config.file`` (what Confluent reads from
    ``-Djava.security.auth.login.config``); None for ``NONE``."""
    method = (_get(props, "authentication.method") or "NONE").upper()
    if method not in AUTH_METHODS:
        raise ConfigError(f"authentication.method={method}: Riverlog's registry serves {', '.join(AUTH_METHODS)}")
    if method == "NONE":
        return None
    realm = _get(props, "authentication.realm") or DEFAULT_REALM
    roles = [r.strip() for r in (_get(props, "authentication.roles") or "*").split(",") if r.strip()]
    users_file, jaas_file = _get(props, "authentication.users.file"), _get(props, "authentication.jaas.config.file")
    if users_file and jaas_file:
        raise ConfigError("set authentication.users.file or authentication.jaas.config.file, not both")
    try:
        if jaas_file:
            users_file = users_file_from_jaas(_read(jaas_file, "authentication.jaas.config.file"), realm, jaas_file)
        if not users_file:
            raise ConfigError("authentication.method=BASIC needs its users: set authentication.users.file to a Jetty "
                              "property file (user: password[,role,...]), or authentication.jaas.config.file to a "
                              f"JAAS file whose {realm} section names PropertyFileLoginModule with file=\"...\"")
        users = parse_users(_read(users_file, "authentication.users.file"), users_file)
    except UsersFileError as exc:
        raise ConfigError(str(exc)) from None
    if not users:
        raise ConfigError(f"authentication.users.file={users_file} holds no users: nobody could call the registry")
    skip = [p.strip() for p in _get(props, "authentication.skip.paths").split(",") if p.strip()]
    if _get(props, "riverlog.metrics.authentication").lower() != "true":
        skip.append(METRICS_PATH)
    return AuthSettings(BasicAuthenticator(users, roles, realm), tuple(skip))


def _read(path: str, setting: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{setting}={path}: cannot read it: {exc}") from None


# The registry's Kafka client: Kafka's client properties behind the ``kafkastore.`` prefix.
KAFKASTORE_KEYS = ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.location",
                   "ssl.truststore.type", "ssl.truststore.password", "ssl.truststore.certificates",
                   "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
                   "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.endpoint.identification.algorithm")


def kafkastore_security(props: Mapping[str, str]) -> ClientSecurity | None:
    """``kafkastore.security.protocol``, ``kafkastore.sasl.*`` and ``kafkastore.ssl.*`` as Riverlog's
    client settings; PKCS12 stores are opened here and passed on as PEM. None for PLAINTEXT."""
    client = {key: _get(props, f"kafkastore.{key}") for key in KAFKASTORE_KEYS if _get(props, f"kafkastore.{key}")}
    protocol = client.get("security.protocol", "PLAINTEXT").upper()
    client["security.protocol"] = protocol
    if protocol == "PLAINTEXT":
        return None
    trust = client.get("ssl.truststore.location", "")
    if trust and store_type(trust, client.get("ssl.truststore.type", ""), "kafkastore.ssl.truststore.location") \
            == "PKCS12":
        client["ssl.truststore.certificates"] = truststore_pem(
            trust, "PKCS12", client.get("ssl.truststore.password", ""), "kafkastore.ssl.truststore.location")
        del client["ssl.truststore.location"]
    keystore = client.get("ssl.keystore.location", "")
    if keystore and store_type(keystore, client.get("ssl.keystore.type", ""), "kafkastore.ssl.keystore.location") \
            == "PKCS12":
        opened = pkcs12_keystore(keystore, client.get("ssl.keystore.password", ""), client.get("ssl.key.password", ""),
                                 "kafkastore.ssl.keystore.location")
        client.update({"ssl.keystore.key": opened.key, "ssl.keystore.certificate.chain": opened.chain})
        for key in ("ssl.keystore.location", "ssl.key.password"):
            client.pop(key, None)
    elif keystore and "ssl.key.password" not in client and client.get("ssl.keystore.password"):
        client["ssl.key.password"] = client["ssl.keystore.password"]  # a PEM key protected by the store's password
    # The stores are PEM now (or inline PEM): the client's own type check has nothing left to refuse.
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        client.pop(key, None)
    return ClientSecurity.from_properties(client, where="the kafkastore.* settings (the registry's Kafka client)")
