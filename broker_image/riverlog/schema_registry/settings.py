"""The registry's settings, under Confluent Schema Registry's property names, so that an existing
``schema-registry.properties`` mostly works unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..config import ConfigError
from ..security.client_config import SECURITY_PROTOCOLS, ClientSecurity
from .compatibility import MODES
from .config_providers import resolve as resolve_references
from .rest import DEFAULT_MAX_BODY
from .security_settings import AuthSettings, HttpsSettings, auth_settings, https_settings, kafkastore_security

DEFAULTS: dict[str, str] = {
    "listeners": "http://0.0.0.0:8081",
    "kafkastore.bootstrap.servers": "",
    "kafkastore.topic": "_schemas",
    "schema.compatibility.level": "backward",
    "host.name": "",  # the name other instances forward writes to; default: the listener's host
    "schema.registry.group.id": "schema-registry",
    "leader.eligibility": "true",
    "riverlog.max.request.bytes": str(DEFAULT_MAX_BODY),
}
# Older Confluent names for the same settings.
ALIASES = {"avro.compatibility.level": "schema.compatibility.level", "master.eligibility": "leader.eligibility",
           "port": "listeners", "schema.registry.inter.instance.protocol": "inter.instance.protocol"}


@dataclass(frozen=True)
class Listener:
    scheme: str  # http or https
    host: str  # to listen on ("" for all interfaces)
    port: int


@dataclass(frozen=True)
class RegistrySettings:
    host: str  # the advertised listener's (the one other instances forward writes to)
    port: int
    advertised_host: str
    bootstrap: str
    topic: str
    compatibility: str
    group_id: str
    leader_eligible: bool
    max_body: int
    scheme: str = "http"  # of the advertised listener (inter.instance.protocol)
    listeners: tuple[Listener, ...] = ()
    https: HttpsSettings | None = None  # the https listeners' TLS, and the forwarding client's
    auth: AuthSettings | None = None  # None: authentication.method=NONE
    kafka_security: ClientSecurity | None = None  # None: PLAINTEXT

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.advertised_host}:{self.port}"


def _bootstrap(text: str, protocol: str) -> str:
    """Confluent allows listener-style entries (SASL_SSL://host:9092) and uses those whose protocol
    is kafkastore.security.protocol; the client wants host:port."""
    chosen = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        prefix, sep, address = part.rpartition("://")
        if sep and prefix.upper() in SECURITY_PROTOCOLS and prefix.upper() != protocol:
            continue
        chosen.append(address)
    if text.strip() and not chosen:
        raise ConfigError(f"kafkastore.bootstrap.servers={text}: no entry speaks kafkastore.security.protocol="
                          f"{protocol}; list the cluster's {protocol} listeners")
    return ",".join(chosen)


def _listeners(text: str) -> tuple[Listener, ...]:
    found = []
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        parts = urlsplit(entry)
        if parts.scheme not in ("http", "https") or parts.port is None:
            raise ConfigError(f"listeners={entry!r}: expected http://HOST:PORT or https://HOST:PORT")
        host = parts.hostname or ""
        found.append(Listener(parts.scheme, "" if host in ("0.0.0.0", "::") else host, parts.port))
    if not found:
        raise ConfigError("listeners is empty: give http://HOST:PORT or https://HOST:PORT")
    return tuple(found)


def _advertised(listeners: tuple[Listener, ...], protocol: str) -> Listener:
    """The listener other instances forward to: inter.instance.protocol's, else the first."""
    if not protocol:
        return listeners[0]
    for listener in listeners:
        if listener.scheme == protocol:
            return listener
    raise ConfigError(f"inter.instance.protocol={protocol} but no listener is {protocol}://")


def settings_from(properties: Mapping[str, str]) -> RegistrySettings:
    props = dict(DEFAULTS)
    # ${dir:...}, ${file:...}, ${env:...} references first: a password kept in a mounted file.
    for key, value in resolve_references(properties).items():
        if key == "port":  # Confluent's oldest form: just a port
            props["listeners"] = f"http://0.0.0.0:{value}"
        else:
            props[ALIASES.get(key, key)] = value
    listeners = _listeners(props["listeners"])
    advertised_listener = _advertised(listeners, props.get("inter.instance.protocol", "").strip().lower())
    kafka_security = kafkastore_security(props)
    bootstrap = _bootstrap(props["kafkastore.bootstrap.servers"],
                           kafka_security.protocol if kafka_security else "PLAINTEXT")
    if not bootstrap:
        raise ConfigError("kafkastore.bootstrap.servers (or --bootstrap-server) is required: the registry keeps its "
                          "schemas in the cluster's _schemas topic")
    level = props["schema.compatibility.level"].strip().upper()
    if level not in MODES:
        raise ConfigError(f"schema.compatibility.level={level!r}: one of {', '.join(MODES)}")
    host = advertised_listener.host
    advertised = props["host.name"].strip() or host or "localhost"
    try:
        max_body = int(props["riverlog.max.request.bytes"])
    except ValueError:
        raise ConfigError("riverlog.max.request.bytes must be a number of bytes") from None
    # TLS settings are read (and must load) whenever an https listener exists; never a plain fallback.
    https = https_settings(props) if any(lst.scheme == "https" for lst in listeners) else None
    return RegistrySettings(host, advertised_listener.port, advertised, bootstrap, props["kafkastore.topic"], level,
                            props["schema.registry.group.id"],
                            props["leader.eligibility"].strip().lower() == "true", max_body,
                            scheme=advertised_listener.scheme, listeners=listeners, https=https,
                            auth=auth_settings(props), kafka_security=kafka_security)
