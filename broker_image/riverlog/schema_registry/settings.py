"""The registry's settings, under Confluent Schema Registry's property names, so that an existing
``schema-registry.properties`` mostly works unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..config import ConfigError
from .compatibility import MODES
from .rest import DEFAULT_MAX_BODY

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
           "port": "listeners"}


@dataclass(frozen=True)
class RegistrySettings:
    host: str  # to listen on ("" for all interfaces)
    port: int
    advertised_host: str
    bootstrap: str
    topic: str
    compatibility: str
    group_id: str
    leader_eligible: bool
    max_body: int

    @property
    def url(self) -> str:
        return f"http://{self.advertised_host}:{self.port}"


def _bootstrap(text: str) -> str:
    # Confluent allows listener-style entries (PLAINTEXT://host:9092); the client wants host:port.
    return ",".join(part.strip().split("://")[-1] for part in text.split(",") if part.strip())


def settings_from(properties: Mapping[str, str]) -> RegistrySettings:
    props = dict(DEFAULTS)
    for key, value in properties.items():
        if key == "port":  # Confluent's oldest form: just a port
            props["listeners"] = f"http://0.0.0.0:{value}"
        else:
            props[ALIASES.get(key, key)] = value
    listener = props["listeners"].split(",")[0].strip()
    parts = urlsplit(listener)
    if parts.scheme != "http" or parts.port is None:
        raise ConfigError(f"listeners={listener!r}: expected http://HOST:PORT (https is not served yet)")
    bootstrap = _bootstrap(props["kafkastore.bootstrap.servers"])
    if not bootstrap:
        raise ConfigError("kafkastore.bootstrap.servers (or --bootstrap-server) is required: the registry keeps its "
                          "schemas in the cluster's _schemas topic")
    level = props["schema.compatibility.level"].strip().upper()
    if level not in MODES:
        raise ConfigError(f"schema.compatibility.level={level!r}: one of {', '.join(MODES)}")
    host = parts.hostname or ""
    if host in ("0.0.0.0", "::"):
        host = ""
    advertised = props["host.name"].strip() or host or "localhost"
    try:
        max_body = int(props["riverlog.max.request.bytes"])
    except ValueError:
        raise ConfigError("riverlog.max.request.bytes must be a number of bytes") from None
    return RegistrySettings(host, parts.port, advertised, bootstrap, props["kafkastore.topic"], level,
                            props["schema.registry.group.id"],
                            props["leader.eligibility"].strip().lower() == "true", max_body)
