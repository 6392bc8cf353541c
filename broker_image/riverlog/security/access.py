"""A broker's access control: the configured authorizer over its latest metadata image.

Handlers ask ``allowed(connection, operation, resource type, name)``; the answer comes from
``authorizer.Authorizer`` built from the image's ACL bindings (rebuilt only when they change)
with ``super.users`` and ``allow.everyone.if.no.acl.found``. Without ``authorizer.class.name``
every request is allowed, as in Kafka. Denials go to ``denials.DenialLog`` unless the caller
only filters what it lists (Kafka's ``logIfDenied=false``: Metadata of all topics, ListGroups).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

from ..config import BrokerConfig
from .acl import CLUSTER_NAME, AclEntry, Operation, ResourceType, binding_of
from .authorizer import Authorizer, parse_super_users
from .denials import DenialLog


class Caller(Protocol):
    """Who asks: a connection's authenticated principal and the client's address."""

    principal: str
    ip: str


class AccessControl:
    def __init__(self, enabled: bool, super_users: str, allow_if_no_acl: bool,
                 acls: Callable[[], Mapping[uuid.UUID, AclEntry]], count_denial: Callable[[str, str], None]) -> None:
        self.enabled = enabled
        self._acls = acls  # the metadata image's bindings by id (a new mapping when they change)
        self._base = Authorizer(parse_super_users(super_users), allow_if_no_acl)
        self._built_from: Mapping[uuid.UUID, AclEntry] | None = None
        self._authorizer = self._base
        self.denials = DenialLog(count_denial, time.monotonic)

    @classmethod
    def configured(cls, config: BrokerConfig, acls: Callable[[], Mapping[uuid.UUID, AclEntry]],
                   count_denial: Callable[[str, str], None]) -> AccessControl:
        """As a node's ``authorizer.class.name``, ``super.users`` and ``allow.everyone.if.no.acl.found`` say."""
        return cls(bool(config.get("authorizer.class.name").strip()), config.get("super.users"),
                   config.get_bool("allow.everyone.if.no.acl.found"), acls, count_denial)

    def _current(self) -> Authorizer:
        acls = self._acls()
        if acls is not self._built_from:
            self._authorizer = self._base.with_acls(binding_of(record) for record in acls.values())
            self._built_from = acls
        return self._authorizer

    def allowed(self, caller: Caller, operation: Operation, resource_type: ResourceType, name: str,
                *, log_denial: bool = True) -> bool:
        if not self.enabled:
            return True
        ok = self._current().authorize(caller.principal, caller.ip, operation, resource_type, name)
        if not ok and log_denial:
            self.denials.denied(caller.principal, caller.ip, operation.name, resource_type.name, name)
        return ok

    def cluster(self, caller: Caller, operation: Operation) -> bool:
        return self.allowed(caller, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def allowed_any(self, caller: Caller, operation: Operation, resource_type: ResourceType) -> bool:
        """Some resource of the type allows the operation (Kafka's authorizeByResourceType)."""
        if not self.enabled:
            return True
        ok = self._current().authorize_any(caller.principal, caller.ip, operation, resource_type)
        if not ok:
            self.denials.denied(caller.principal, caller.ip, operation.name, resource_type.name, "*")
        return ok


def allow_all() -> AccessControl:
    """Access control without an authorizer (every request allowed), for hosts built in tests."""
    return AccessControl(False, "", False, dict, lambda _rtype, _op: None)


__all__ = ["AccessControl", "Caller", "allow_all"]
