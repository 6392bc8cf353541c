"""Kafka's ACL model: who (principal, host) may or may not do what (operation) to which resources.

An ACL binding is a resource pattern (resource type, name, LITERAL or PREFIXED) and an access
control entry (principal ``User:name`` or ``User:*``, host ``*`` or an exact IP, operation,
ALLOW or DENY). The numbers are the protocol's (Kafka's ResourceType, PatternType, AclOperation,
AclPermissionType codes), so bindings travel in CreateAcls/DescribeAcls/DeleteAcls and in the
metadata log's AccessControlEntryRecord unchanged.

Filters (DescribeAcls, DeleteAcls) match bindings as Kafka's AclBindingFilter does: ANY matches
every value of a field, null name/principal/host match any, and pattern type MATCH finds the
bindings that would apply to a resource of that name (the literal name, the ``*`` wildcard and
every prefix).

Pure data and functions; no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

WILDCARD = "*"  # a literal resource name matching every resource of its type; also "any host"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW of one of these grants DESCRIBE (resp. DESCRIBE_CONFIGS) too; a DENY implies nothing.
IMPLIES_DESCRIBE = frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                              Operation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})


def _member(cls: type[enum.IntEnum], value: int) -> enum.IntEnum:
    """A code the protocol carried, as its enum; codes this broker does not know are UNKNOWN."""
    try:
        return cls(value)
    except ValueError:
        return cls(0)


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @staticmethod
    def of(resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
           operation: int, permission: int) -> AclBinding:
        """A binding from protocol codes (unknown codes become UNKNOWN, refused by validation)."""
        return AclBinding(ResourceType(_member(ResourceType, resource_type)), resource_name,
                          PatternType(_member(PatternType, pattern_type)), principal, host,
                          Operation(_member(Operation, operation)), Permission(_member(Permission, permission)))

    def describe(self) -> str:
        return (f"{self.permission.name} {self.principal} from {self.host} {self.operation.name} on "
                f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}")


class AclEntry(Protocol):
    """The fields of a stored ACL (the metadata log's AccessControlEntryRecord)."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def pattern_type(self) -> int: ...
    @property
    def principal(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


def binding_of(entry: AclEntry) -> AclBinding:
    return AclBinding.of(entry.resource_type, entry.resource_name, entry.pattern_type, entry.principal,
                         entry.host, entry.operation, entry.permission_type)


def creation_problem(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create ``binding`` (INVALID_REQUEST), or None: the broker's checks
    (the CLUSTER resource's one name, no empty names) and the controller's (concrete types,
    operation and permission, a ``Type:name`` principal)."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (Operation.UNKNOWN, Operation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permissionType {binding.permission.name}"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.resource_name:
        return "Invalid empty resource name"
    if ":" not in binding.principal:
        return (f"Could not parse principal from `{binding.principal}` (no colon is present separating the "
                "principal type from the principal name)")
    return None


@dataclass(frozen=True)
class AclFilter:
    """Kafka's AclBindingFilter: None for name, principal or host matches anything."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    @staticmethod
    def of(resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
           host: str | None, operation: int, permission: int) -> AclFilter:
        return AclFilter(ResourceType(_member(ResourceType, resource_type)), resource_name,
                         PatternType(_member(PatternType, pattern_type)), principal, host,
                         Operation(_member(Operation, operation)), Permission(_member(Permission, permission)))

    def problem(self) -> str | None:
        """Why Kafka refuses this filter (INVALID_REQUEST): an UNKNOWN field matches nothing."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, binding.pattern_type):
            return self.resource_name == binding.resource_name
        # MATCH: the bindings that apply to a resource named resource_name.
        if binding.pattern_type == PatternType.LITERAL:
            return binding.resource_name in (self.resource_name, WILDCARD)
        return binding.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(binding.resource_name)

    def _matches_entry(self, binding: AclBinding) -> bool:
        return ((self.principal is None or self.principal == binding.principal)
                and (self.host is None or self.host == binding.host)
                and self.operation in (Operation.ANY, binding.operation)
                and self.permission in (Permission.ANY, binding.permission))


ANY_FILTER = AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)


__all__ = [
    "ANY_FILTER",
    "CLUSTER_NAME",
    "IMPLIES_DESCRIBE",
    "IMPLIES_DESCRIBE_CONFIGS",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclBinding",
    "AclEntry",
    "AclFilter",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
    "binding_of",
    "creation_problem",
]
