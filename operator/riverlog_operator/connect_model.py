"""Typed views of the Connect, Connector and Mirror resources (issue #19), with the CRDs' defaults.

As in ``model.py``: the API server defaults new objects from the schemas (``crds/connect.yaml``,
``crds/connector.yaml``, ``crds/mirror.yaml``); the operator applies the same defaults again, so
builders get a complete spec whatever path an object took. ``tests/unit/test_operator_connect_crds.py``
checks that the defaults here and the CRDs' agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .model import AUTH_SCRAM, AUTH_TLS, _property_value

__all__ = ["AUTH_SCRAM", "AUTH_TLS", "AuthenticationSpec", "ConnectSpec", "ConnectorSpec", "KafkaEndpointSpec",
           "MirrorClusterSpec", "MirrorSpec", "PluginSpec", "SecretKeyRef"]

DEFAULT_CONNECT_REPLICAS = 1
DEFAULT_PASSWORD_KEY = "password"
# A Riverlog User's Secret (users.py) keeps the key and certificate chain together in user.pem,
# the file Kafka's PEM keystore reads.
DEFAULT_CERTIFICATE_KEY = "user.pem"
DEFAULT_CA_KEY = "ca.crt"

# Connector states, the CRD's words (Connect's REST API says RUNNING, PAUSED, STOPPED).
STATE_RUNNING = "running"
STATE_PAUSED = "paused"
STATE_STOPPED = "stopped"
CONNECTOR_STATES = (STATE_RUNNING, STATE_PAUSED, STATE_STOPPED)

# Mirror replication policies: "default" names remote topics <source alias>.<topic>, "identity"
# keeps the names (one-way migration).
POLICY_DEFAULT = "default"
POLICY_IDENTITY = "identity"
# MirrorMaker 2's own intervals in Kafka 4.3 (MirrorCheckpointConfig, MirrorSourceConfig).
DEFAULT_CHECKPOINT_INTERVAL_SECONDS = 60
DEFAULT_SYNC_GROUP_OFFSETS_INTERVAL_SECONDS = 60
DEFAULT_REFRESH_INTERVAL_SECONDS = 600

# Volume sources a plugin may come from (an image volume needs Kubernetes 1.33+).
PLUGIN_VOLUME_SOURCES = ("configMap", "persistentVolumeClaim", "emptyDir", "image")


def _properties(raw: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): _property_value(v) for k, v in (raw or {}).items()}


def _metrics_enabled(spec: Mapping[str, Any]) -> bool:
    return bool((spec.get("metrics") or {}).get("enabled", True))


@dataclass(frozen=True)
class SecretKeyRef:
    """One key of a Secret in the resource's namespace."""

    name: str
    key: str

    @classmethod
    def from_dict(cls, item: Mapping[str, Any] | None, default_key: str) -> SecretKeyRef | None:
        if not item:
            return None
        return cls(str(item["name"]), str(item.get("key") or default_key))


@dataclass(frozen=True)
class AuthenticationSpec:
    """``authentication``: how the Connect worker (or one side of a Mirror) proves who it is.

    Either ``user`` (a Riverlog ``User`` of the namespace, whose Secret of the same name holds
    ``password`` or ``user.pem``), or the credentials' own Secret for a Kafka the operator does
    not run: ``username`` and ``password_secret`` (scram-sha-512) or ``certificate_secret`` (tls:
    a PEM file with the private key, PKCS#8 and unencrypted, then the certificate chain).
    """

    type: str  # AUTH_SCRAM or AUTH_TLS
    user: str | None = None
    username: str | None = None
    password_secret: SecretKeyRef | None = None
    certificate_secret: SecretKeyRef | None = None

    @classmethod
    def from_dict(cls, item: Mapping[str, Any] | None) -> AuthenticationSpec | None:
        if not item:
            return None
        return cls(type=str(item["type"]), user=(item.get("userRef") or {}).get("name") or None,
                   username=item.get("username") or None,
                   password_secret=SecretKeyRef.from_dict(item.get("passwordSecret"), DEFAULT_PASSWORD_KEY),
                   certificate_secret=SecretKeyRef.from_dict(item.get("certificateSecret"), DEFAULT_CERTIFICATE_KEY))


@dataclass(frozen=True)
class KafkaEndpointSpec:
    """Which Kafka a worker talks to: a Riverlog ``Cluster`` of the namespace (``clusterRef``,
    optionally through a named listener) or any Kafka (``bootstrapServers``); exactly one, the
    CRD's rule. ``tls`` is whether ``spec.tls`` is present: for ``bootstrapServers`` it turns TLS
    on; for a Cluster the listener decides and ``tls`` may only name another trusted CA."""

    cluster: str | None = None
    listener: str | None = None
    bootstrap_servers: str | None = None
    authentication: AuthenticationSpec | None = None
    tls: bool = False
    trusted_ca: SecretKeyRef | None = None

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> KafkaEndpointSpec:
        ref = spec.get("clusterRef") or {}
        tls = spec.get("tls")
        return cls(cluster=ref.get("name") or None, listener=ref.get("listener") or None,
                   bootstrap_servers=spec.get("bootstrapServers") or None,
                   authentication=AuthenticationSpec.from_dict(spec.get("authentication")),
                   tls=tls is not None,
                   trusted_ca=SecretKeyRef.from_dict((tls or {}).get("trustedCASecret"), DEFAULT_CA_KEY))


@dataclass(frozen=True)
class PluginSpec:
    """A connector plugin: the volume (one of ``PLUGIN_VOLUME_SOURCES``, as in a Pod) whose root
    holds the plugin's jars, mounted at ``/opt/riverlog-connect/plugins/<name>``."""

    name: str
    volume: dict[str, Any]

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> PluginSpec:
        volume = item.get("volume") or {}
        return cls(str(item["name"]), {k: v for k, v in volume.items() if k in PLUGIN_VOLUME_SOURCES})


@dataclass(frozen=True)
class ConnectSpec:
    """A Kafka Connect cluster in distributed mode: ``replicas`` workers of one group."""

    endpoint: KafkaEndpointSpec = field(default_factory=KafkaEndpointSpec)
    replicas: int = DEFAULT_CONNECT_REPLICAS
    image: str | None = None
    image_pull_policy: str | None = None
    config: dict[str, str] = field(default_factory=dict)
    plugins: tuple[PluginSpec, ...] = ()
    resources: dict[str, Any] = field(default_factory=dict)
    exactly_once_source: bool = False
    # The JMX exporter's agent, /metrics on the metrics port and scrape annotations
    # (builders/connect_metrics.py); off, none of them (not even the agent in the JVM).
    metrics_enabled: bool = True

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> ConnectSpec:
        return cls(
            endpoint=KafkaEndpointSpec.from_dict(spec),
            replicas=int(spec.get("replicas", DEFAULT_CONNECT_REPLICAS)),
            image=spec.get("image") or None,
            image_pull_policy=spec.get("imagePullPolicy") or None,
            config=_properties(spec.get("config")),
            plugins=tuple(PluginSpec.from_dict(p) for p in spec.get("plugins") or []),
            resources=dict(spec.get("resources") or {}),
            exactly_once_source=bool(spec.get("exactlyOnceSource", False)),
            metrics_enabled=_metrics_enabled(spec),
        )


@dataclass(frozen=True)
class ConnectorSpec:
    """A connector on a Connect cluster, reconciled through the Connect REST API."""

    connect: str
    class_name: str
    tasks_max: int = 1
    config: dict[str, str] = field(default_factory=dict)
    state: str = STATE_RUNNING
    # spec.autoRestart: the operator restarts a FAILED connector and its FAILED tasks, with
    # Strimzi's backoff (connectors.auto_restart), at most max_restarts times in a row.
    auto_restart: bool = False
    max_restarts: int | None = None

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> ConnectorSpec:
        restart = spec.get("autoRestart") or {}
        limit = restart.get("maxRestarts")
        return cls(connect=str((spec.get("connectRef") or {}).get("name", "")), class_name=str(spec.get("class", "")),
                   tasks_max=int(spec.get("tasksMax", 1)), config=_properties(spec.get("config")),
                   state=str(spec.get("state") or STATE_RUNNING), auto_restart=bool(restart.get("enabled", False)),
                   max_restarts=None if limit is None else int(limit))


@dataclass(frozen=True)
class MirrorClusterSpec:
    """One side of a Mirror: its alias (MirrorMaker 2's cluster name) and how to reach it."""

    alias: str
    endpoint: KafkaEndpointSpec

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> MirrorClusterSpec:
        return cls(str(item.get("alias", "")), KafkaEndpointSpec.from_dict(item))


@dataclass(frozen=True)
class MirrorSpec:
    """MirrorMaker 2 from ``source`` to ``target``: its three connectors on a Connect cluster of
    its own, whose workers belong to the target (as Strimzi runs KafkaMirrorMaker2)."""

    source: MirrorClusterSpec
    target: MirrorClusterSpec
    replicas: int = DEFAULT_CONNECT_REPLICAS
    image: str | None = None
    image_pull_policy: str | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    tasks_max: int = 1
    topics: str = ".*"
    # Added to MirrorMaker 2's own exclusions (internal topics, replicas of replicas), never
    # replacing them.
    topics_exclude: str | None = None
    groups: str = ".*"
    groups_exclude: str | None = None
    sync_group_offsets: bool = True
    emit_checkpoints_interval_seconds: int = DEFAULT_CHECKPOINT_INTERVAL_SECONDS
    sync_group_offsets_interval_seconds: int = DEFAULT_SYNC_GROUP_OFFSETS_INTERVAL_SECONDS
    refresh_topics_interval_seconds: int = DEFAULT_REFRESH_INTERVAL_SECONDS
    refresh_groups_interval_seconds: int = DEFAULT_REFRESH_INTERVAL_SECONDS
    replication_policy: str = POLICY_DEFAULT
    exactly_once: bool = False
    config: dict[str, str] = field(default_factory=dict)  # the connectors'
    worker_config: dict[str, str] = field(default_factory=dict)  # the workers' (Connect's spec.config)
    metrics_enabled: bool = True  # the workers' metrics, as ConnectSpec's

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> MirrorSpec:
        return cls(
            source=MirrorClusterSpec.from_dict(spec.get("source") or {}),
            target=MirrorClusterSpec.from_dict(spec.get("target") or {}),
            replicas=int(spec.get("replicas", DEFAULT_CONNECT_REPLICAS)),
            image=spec.get("image") or None,
            image_pull_policy=spec.get("imagePullPolicy") or None,
            resources=dict(spec.get("resources") or {}),
            tasks_max=int(spec.get("tasksMax", 1)),
            topics=str(spec.get("topics") or ".*"),
            topics_exclude=spec.get("topicsExclude") or None,
            groups=str(spec.get("groups") or ".*"),
            groups_exclude=spec.get("groupsExclude") or None,
            sync_group_offsets=bool(spec.get("syncGroupOffsets", True)),
            emit_checkpoints_interval_seconds=int(spec.get("emitCheckpointsIntervalSeconds",
                                                           DEFAULT_CHECKPOINT_INTERVAL_SECONDS)),
            sync_group_offsets_interval_seconds=int(spec.get("syncGroupOffsetsIntervalSeconds",
                                                             DEFAULT_SYNC_GROUP_OFFSETS_INTERVAL_SECONDS)),
            refresh_topics_interval_seconds=int(spec.get("refreshTopicsIntervalSeconds",
                                                         DEFAULT_REFRESH_INTERVAL_SECONDS)),
            refresh_groups_interval_seconds=int(spec.get("refreshGroupsIntervalSeconds",
                                                         DEFAULT_REFRESH_INTERVAL_SECONDS)),
            replication_policy=str(spec.get("replicationPolicy") or POLICY_DEFAULT),
            exactly_once=bool(spec.get("exactlyOnce", False)),
            config=_properties(spec.get("config")),
            worker_config=_properties(spec.get("workerConfig")),
            metrics_enabled=_metrics_enabled(spec),
        )
