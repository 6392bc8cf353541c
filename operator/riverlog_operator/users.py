"""What a ``User`` resource (issue #18) asks of its Cluster, as pure data: the principal, the ACL
bindings it should have (and, against what the cluster holds, which to create and which to
delete), the quota values, and the contents of its credentials Secret.

The reconciler (I/O: the Kubernetes API and the cluster's Admin API) applies these; keeping the
decisions here makes them testable without either.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from riverlog.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType

AUTH_SCRAM = "scram-sha-512"
AUTH_TLS = "tls"
CLUSTER_RESOURCE_NAME = "kafka-cluster"
PASSWORD_BYTES = 24  # 32 characters of URL-safe base64

RESOURCE_TYPES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP, "cluster": ResourceType.CLUSTER,
                  "transactionalId": ResourceType.TRANSACTIONAL_ID}
PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefix": PatternType.PREFIXED}
OPERATIONS = {"Read": Operation.READ, "Write": Operation.WRITE, "Create": Operation.CREATE,
              "Delete": Operation.DELETE, "Alter": Operation.ALTER, "Describe": Operation.DESCRIBE,
              "ClusterAction": Operation.CLUSTER_ACTION, "DescribeConfigs": Operation.DESCRIBE_CONFIGS,
              "AlterConfigs": Operation.ALTER_CONFIGS, "IdempotentWrite": Operation.IDEMPOTENT_WRITE,
              "All": Operation.ALL}
PERMISSIONS = {"allow": Permission.ALLOW, "deny": Permission.DENY}
# spec.quotas keys and Kafka's quota keys.
QUOTA_KEYS = {"producerByteRate": "producer_byte_rate", "consumerByteRate": "consumer_byte_rate",
              "requestPercentage": "request_percentage", "controllerMutationRate": "controller_mutation_rate"}


@dataclass(frozen=True)
class UserSpec:
    cluster: str
    authentication: str
    acls: tuple[AclBinding, ...] = ()
    quotas: Mapping[str, float] = field(default_factory=dict)  # Kafka's keys

    @classmethod
    def from_resource(cls, name: str, spec: Mapping[str, Any]) -> UserSpec:
        principal = principal_of(name)
        acls = tuple(binding for item in (spec.get("authorization") or {}).get("acls") or []
                     for binding in _bindings(principal, item))
        quotas = {QUOTA_KEYS[key]: float(value) for key, value in (spec.get("quotas") or {}).items()
                  if key in QUOTA_KEYS and value is not None}
        return cls(cluster=str((spec.get("clusterRef") or {}).get("name", "")),
                   authentication=str((spec.get("authentication") or {}).get("type", AUTH_SCRAM)),
                   acls=tuple(dict.fromkeys(acls)), quotas=quotas)


def principal_of(name: str) -> str:
    """A User named ``alice`` is ``User:alice`` whichever way it authenticates: its SCRAM user
    name, or the CN of its client certificate (the listener's mapping rule takes the CN)."""
    return f"User:{name}"


def _bindings(principal: str, item: Mapping[str, Any]) -> Iterable[AclBinding]:
    resource = item.get("resource") or {}
    kind = RESOURCE_TYPES[str(resource["type"])]
    name = CLUSTER_RESOURCE_NAME if kind == ResourceType.CLUSTER else str(resource["name"])
    pattern = PATTERN_TYPES[str(resource.get("patternType") or "literal")]
    if kind == ResourceType.CLUSTER:
        pattern = PatternType.LITERAL
    for operation in item.get("operations") or []:
        yield AclBinding(kind, name, pattern, principal, str(item.get("host") or "*"), OPERATIONS[str(operation)],
                         PERMISSIONS[str(item.get("type") or "allow")])


def principal_filter(principal: str) -> AclFilter:
    """Every binding of one principal, whatever resource (for DescribeAcls and DeleteAcls)."""
    return AclFilter(ResourceType.ANY, None, PatternType.ANY, principal, None, Operation.ANY, Permission.ANY)


def exact_filter(binding: AclBinding) -> AclFilter:
    """A filter matching ``binding`` and nothing else."""
    return AclFilter(binding.resource_type, binding.resource_name, binding.pattern_type, binding.principal,
                     binding.host, binding.operation, binding.permission)


@dataclass(frozen=True)
class AclPlan:
    create: tuple[AclBinding, ...]
    delete: tuple[AclBinding, ...]


def plan_acls(desired: Iterable[AclBinding], existing: Iterable[AclBinding]) -> AclPlan:
    """What to create and what to delete so the principal's bindings are exactly ``desired``
    (bindings added outside the operator for this principal are drift, and go)."""
    want, have = set(desired), set(existing)
    order = {b: i for i, b in enumerate(desired)}
    return AclPlan(tuple(sorted(want - have, key=lambda b: order.get(b, 0))),
                   tuple(sorted(have - want, key=lambda b: b.describe())))


def plan_quotas(desired: Mapping[str, float], existing: Mapping[str, float]) -> dict[str, float | None]:
    """Kafka quota key -> new value, or None to remove it; only what differs."""
    ops: dict[str, float | None] = {key: value for key, value in desired.items() if existing.get(key) != value}
    ops.update({key: None for key in existing if key not in desired})
    return ops


def new_password() -> str:
    return secrets.token_urlsafe(PASSWORD_BYTES)


def scram_secret_data(username: str, password: str) -> dict[str, str]:
    """A SCRAM user's Secret (Strimzi's keys): the password, and the JAAS line Java clients use."""
    return {"password": password,
            "sasl.jaas.config": ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                 f'username="{username}" password="{password}";')}


def tls_secret_data(key_pem: bytes, cert_pem: bytes, ca_pem: bytes) -> dict[str, str]:
    """A TLS user's Secret (Strimzi's keys, plus ``user.pem``: key and chain in one file, Kafka's
    PEM keystore for Java clients)."""
    return {"user.key": key_pem.decode(), "user.crt": cert_pem.decode(), "user.pem": (key_pem + cert_pem).decode(),
            "ca.crt": ca_pem.decode()}
