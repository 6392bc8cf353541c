"""The authorizer: may this principal, from this host, do this operation to this resource?

Decided as Kafka's KRaft StandardAuthorizer decides, over the ACL bindings of the metadata image:

* a super user (``super.users``) may do anything;
* the bindings that apply to a resource are those of its type whose LITERAL name is the
  resource's name or ``*``, and whose PREFIXED name starts the resource's name;
* among those, a binding counts if its principal is the caller's or ``User:*``, its host ``*``
  or the caller's address, and its operation the asked one or ALL (an ALLOW of READ, WRITE,
  DELETE or ALTER also grants DESCRIBE, of ALTER_CONFIGS also DESCRIBE_CONFIGS);
* a counting DENY wins over any ALLOW; an ALLOW allows; otherwise denied, unless no binding at
  all applies to the resource (for anyone), when ``allow.everyone.if.no.acl.found`` decides.

``authorize_any`` is Kafka's authorizeByResourceType: may the caller do the operation to *some*
resource of a type (InitProducerId for an idempotent producer: WRITE on any topic).

Pure: the bindings come in with the image; no I/O (denials are logged by ``denials.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .acl import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)


def parse_super_users(spec: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:ops``)."""
    return frozenset(p.strip() for p in spec.split(";") if p.strip())


def _operation_counts(binding: AclBinding, operation: Operation) -> bool:
    if binding.operation == Operation.ALL or binding.operation == operation:
        return True
    if binding.permission != Permission.ALLOW:
        return False  # a DENY of READ does not deny DESCRIBE
    if operation == Operation.DESCRIBE:
        return binding.operation in IMPLIES_DESCRIBE
    if operation == Operation.DESCRIBE_CONFIGS:
        return binding.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


def _applies_to(binding: AclBinding, name: str) -> bool:
    if binding.pattern_type == PatternType.LITERAL:
        return binding.resource_name in (name, WILDCARD)
    return binding.pattern_type == PatternType.PREFIXED and name.startswith(binding.resource_name)


@dataclass(frozen=True)
class Authorizer:
    """Decisions over one set of bindings (rebuild with ``with_acls`` when the image changes)."""

    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False
    by_type: Mapping[ResourceType, tuple[AclBinding, ...]] = field(default_factory=dict)

    def with_acls(self, bindings: Iterable[AclBinding]) -> Authorizer:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in bindings:
            by_type.setdefault(binding.resource_type, []).append(binding)
        return Authorizer(self.super_users, self.allow_if_no_acl, {t: tuple(b) for t, b in by_type.items()})

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        any_applies = allowed = False
        for binding in self.by_type.get(resource_type, ()):
            if not _applies_to(binding, name):
                continue
            any_applies = True
            if binding.principal not in principals or binding.host not in (WILDCARD, host):
                continue
            if not _operation_counts(binding, operation):
                continue
            if binding.permission == Permission.DENY:
                return False
            allowed = True
        return allowed or (not any_applies and self.allow_if_no_acl)

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether some resource of ``resource_type`` allows ``operation`` (no implications, as
        Kafka's authorizeByResourceType): an ALLOW whose pattern no DENY covers."""
        # Kafka first asks about an arbitrary name, so super users and (with no ACLs)
        # allow.everyone.if.no.acl.found pass whatever DENY exists.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        denied_literal: set[str] = set()
        denied_prefixes: set[str] = set()
        allows: list[AclBinding] = []
        wildcard_allow = False
        for binding in self.by_type.get(resource_type, ()):
            if binding.host not in (WILDCARD, host) or binding.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if binding.operation not in (operation, Operation.ALL):
                continue
            if binding.permission == Permission.DENY:
                if binding.pattern_type == PatternType.LITERAL and binding.resource_name == WILDCARD:
                    return False
                (denied_literal if binding.pattern_type == PatternType.LITERAL else denied_prefixes).add(
                    binding.resource_name)
            elif binding.permission == Permission.ALLOW:
                if binding.pattern_type == PatternType.LITERAL and binding.resource_name == WILDCARD:
                    wildcard_allow = True  # unless a wildcard DENY comes later
                else:
                    allows.append(binding)
        if wildcard_allow:
            return True
        for allow in allows:
            if allow.pattern_type == PatternType.LITERAL and allow.resource_name in denied_literal:
                continue
            name = allow.resource_name
            if not any(name[:end] in denied_prefixes for end in range(1, len(name) + 1)):
                return True
        return False


__all__ = ["Authorizer", "parse_super_users"]
