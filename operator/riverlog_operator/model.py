"""Typed views of the Cluster and Topic resources, with the CRDs' defaults applied.

The API server defaults new objects from the schema; the operator applies the same defaults
again so that builders get a complete spec whatever path an object took (and so unit tests can
pass the short specs people write).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_REPLICAS = 3
DEFAULT_STORAGE_SIZE = "10Gi"
DEFAULT_GRACE_SECONDS = 60
CONTROLLER_PORT = 9093
METRICS_PORT = 9404
MAX_VOTERS = 3


# Listener authentication types, Strimzi's names.
AUTH_SCRAM = "scram-sha-512"
AUTH_TLS = "tls"
AUTH_OAUTH = "oauth"


@dataclass(frozen=True)
class ListenerAuthentication:
    type: str  # AUTH_SCRAM, AUTH_TLS or AUTH_OAUTH
    # OAUTHBEARER: where the identity provider publishes its keys, and what tokens must say.
    jwks_endpoint_uri: str | None = None
    valid_issuer_uri: str | None = None
    audience: str | None = None

    @classmethod
    def from_dict(cls, item: Mapping[str, Any] | None) -> ListenerAuthentication | None:
        if not item:
            return None
        return cls(type=str(item["type"]), jwks_endpoint_uri=item.get("jwksEndpointUri") or None,
                   valid_issuer_uri=item.get("validIssuerUri") or None, audience=item.get("audience") or None)


@dataclass(frozen=True)
class ListenerSpec:
    name: str
    port: int
    tls: bool = False
    authentication: ListenerAuthentication | None = None

    @property
    def security_protocol(self) -> str:
        """Kafka's protocol for the listener: TLS on or off, SASL for SCRAM and OAUTHBEARER
        (TLS client authentication is SSL with ``ssl.client.auth=required``)."""
        sasl = self.authentication is not None and self.authentication.type in (AUTH_SCRAM, AUTH_OAUTH)
        if sasl:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"


@dataclass(frozen=True)
class CaSettings:
    """``spec.certificateAuthority``: how long the CAs (and the certificates they sign) live and how
    long before expiry they are renewed (Strimzi's validityDays and renewalDays)."""

    validity_days: int = 365
    renewal_days: int = 30


@dataclass(frozen=True)
class AuthorizationSpec:
    """``spec.authorization``: Kafka's StandardAuthorizer with these super users (besides the
    brokers and the operator, always super users)."""

    super_users: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodTemplateSpec:
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    priority_class_name: str | None = None
    termination_grace_period_seconds: int = DEFAULT_GRACE_SECONDS


# The compatibility levels of the schema registry (riverlog.schema_registry.compatibility.MODES).
COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE")


@dataclass(frozen=True)
class RegistryKafkaAuth:
    """``spec.schemaRegistry.authentication``: the registry connects to the Cluster as this
    ``User`` (of the Cluster, in its namespace), over ``type`` (AUTH_SCRAM or AUTH_TLS)."""

    type: str
    user: str


@dataclass(frozen=True)
class RegistryBasicAuth:
    """``spec.schemaRegistry.basicAuth``: HTTP basic authentication of the REST API, its users
    from a Jetty users file in a Secret (``users_secret``/``users_key``)."""

    users_secret: str
    users_key: str = "users.properties"
    realm: str = "SchemaRegistry-Props"
    roles: tuple[str, ...] = ()  # empty: any authenticated user (the registry's "*")


@dataclass(frozen=True)
class SchemaRegistrySpec:
    """``spec.schemaRegistry``: Riverlog's schema registry (issue #20) run for the Cluster, its
    schemas in the Cluster's ``_schemas`` topic (``builders/schema_registry.py``)."""

    enabled: bool = True
    replicas: int = 1
    compatibility_level: str = "BACKWARD"
    resources: dict[str, Any] = field(default_factory=dict)
    # More registry properties under Confluent's names (kafkastore.topic, schema.registry.group.id,
    # ...); what the operator owns is refused by the CRD.
    config: dict[str, str] = field(default_factory=dict)
    metrics_enabled: bool = True
    authentication: RegistryKafkaAuth | None = None  # None: the Cluster's listener without authentication
    # https on the REST port: True with ``tls_secret`` None is a certificate the operator issues
    # from the Cluster CA; ``tls_secret`` a kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt).
    tls: bool = False
    tls_secret: str | None = None
    basic_auth: RegistryBasicAuth | None = None

    @classmethod
    def from_dict(cls, item: Mapping[str, Any] | None) -> SchemaRegistrySpec | None:
        """None when the block is absent or ``enabled`` is false: no registry."""
        if item is None or not bool(item.get("enabled", True)):
            return None
        return cls(replicas=int(item.get("replicas", 1)),
                   compatibility_level=str(item.get("compatibilityLevel") or "BACKWARD").upper(),
                   resources=dict(item.get("resources") or {}),
                   config={str(k): _property_value(v) for k, v in (item.get("config") or {}).items()},
                   metrics_enabled=bool((item.get("metrics") or {}).get("enabled", True)),
                   authentication=_registry_auth(item.get("authentication")),
                   tls=item.get("tls") is not None,
                   tls_secret=((item.get("tls") or {}).get("certificateSecret") or {}).get("name") or None,
                   basic_auth=_basic_auth(item.get("basicAuth")))


def _registry_auth(item: Mapping[str, Any] | None) -> RegistryKafkaAuth | None:
    if not item:
        return None
    return RegistryKafkaAuth(str(item.get("type") or AUTH_SCRAM), str((item.get("userRef") or {}).get("name", "")))


def _basic_auth(item: Mapping[str, Any] | None) -> RegistryBasicAuth | None:
    if not item:
        return None
    users = item.get("usersSecret") or {}
    return RegistryBasicAuth(str(users.get("name", "")), str(users.get("key") or "users.properties"),
                             str(item.get("realm") or "SchemaRegistry-Props"),
                             tuple(str(r) for r in item.get("roles") or ()))


@dataclass(frozen=True)
class ClusterSpec:
    replicas: int = DEFAULT_REPLICAS
    image: str | None = None
    image_pull_policy: str | None = None
    storage_size: str = DEFAULT_STORAGE_SIZE
    storage_class: str | None = None
    delete_claim: bool = False
    resources: dict[str, Any] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    listeners: tuple[ListenerSpec, ...] = (ListenerSpec("PLAINTEXT", 9092),)
    rack_topology_key: str | None = None
    metrics_enabled: bool = True
    pod: PodTemplateSpec = field(default_factory=PodTemplateSpec)
    authorization: AuthorizationSpec | None = None
    certificate_authority: CaSettings = field(default_factory=CaSettings)
    schema_registry: SchemaRegistrySpec | None = None

    @property
    def secured(self) -> bool:
        """Whether the cluster runs its certificate authorities: some listener speaks TLS or
        authenticates, or authorization is on. Then the brokers' own traffic (replication, the
        quorum) and the operator's calls go over mutual TLS too."""
        return self.authorization is not None or any(
            lst.tls or lst.authentication is not None for lst in self.listeners)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> ClusterSpec:
        storage = spec.get("storage") or {}
        pod = (spec.get("template") or {}).get("pod") or {}
        listeners = tuple(ListenerSpec(str(item["name"]), int(item["port"]), bool(item.get("tls", False)),
                                       ListenerAuthentication.from_dict(item.get("authentication")))
                          for item in spec.get("listeners") or [])
        authorization = spec.get("authorization")
        ca = spec.get("certificateAuthority") or {}
        return cls(
            replicas=int(spec.get("replicas", DEFAULT_REPLICAS)),
            image=spec.get("image") or None,
            image_pull_policy=spec.get("imagePullPolicy") or None,
            storage_size=str(storage.get("size") or DEFAULT_STORAGE_SIZE),
            storage_class=storage.get("storageClassName") or None,
            delete_claim=bool(storage.get("deleteClaim", False)),
            resources=dict(spec.get("resources") or {}),
            config={str(k): _property_value(v) for k, v in (spec.get("config") or {}).items()},
            listeners=listeners or (ListenerSpec("PLAINTEXT", 9092),),
            rack_topology_key=(spec.get("rack") or {}).get("topologyKey") or None,
            metrics_enabled=bool((spec.get("metrics") or {}).get("enabled", True)),
            pod=PodTemplateSpec(
                annotations=dict(pod.get("annotations") or {}),
                labels=dict(pod.get("labels") or {}),
                affinity=pod.get("affinity") or None,
                tolerations=list(pod.get("tolerations") or []),
                node_selector=dict(pod.get("nodeSelector") or {}),
                priority_class_name=pod.get("priorityClassName") or None,
                termination_grace_period_seconds=int(pod.get("terminationGracePeriodSeconds",
                                                             DEFAULT_GRACE_SECONDS)),
            ),
            authorization=None if authorization is None else AuthorizationSpec(
                tuple(str(u) for u in authorization.get("superUsers") or [])),
            certificate_authority=CaSettings(int(ca.get("validityDays", 365)), int(ca.get("renewalDays", 30))),
            schema_registry=SchemaRegistrySpec.from_dict(spec.get("schemaRegistry")),
        )


def _property_value(value: Any) -> str:
    # YAML turns `true` into a boolean; Kafka's properties spell it lower case.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class ClusterRef:
    """Identity of a Cluster resource: what owner references and names derive from."""

    name: str
    namespace: str
    uid: str


@dataclass(frozen=True)
class TopicSpec:
    cluster: str
    topic_name: str
    partitions: int = 1
    replication_factor: int = 3
    config: dict[str, str] = field(default_factory=dict)
    deletion_policy: str = "Delete"

    @classmethod
    def from_resource(cls, name: str, spec: Mapping[str, Any]) -> TopicSpec:
        return cls(
            cluster=str((spec.get("clusterRef") or {}).get("name", "")),
            topic_name=str(spec.get("topicName") or name),
            partitions=int(spec.get("partitions", 1)),
            replication_factor=int(spec.get("replicationFactor", 3)),
            config={str(k): _property_value(v) for k, v in (spec.get("config") or {}).items()},
            deletion_policy=str(spec.get("deletionPolicy") or "Delete"),
        )
