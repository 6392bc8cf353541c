"""ACL bindings in the metadata log, decided as KRaft's AclControlManager decides them.

CreateAcls: each binding is checked (``security.acl.creation_problem``: INVALID_REQUEST with
Kafka's message); a valid one that exists already, or is repeated in the request, succeeds
without a new record; a new one gets an ``AccessControlEntryRecord`` with a fresh id.

DeleteAcls: per filter (INVALID_REQUEST for one with an UNKNOWN field), every binding it matches
is removed by id (``RemoveAccessControlEntryRecord``) and reported; a binding matched by two
filters is reported by both and removed once. All accepted changes of a request commit together.
More than ``MAX_RECORDS_PER_USER_OP`` records in one request are refused as Kafka refuses them.

Pure functions of the image; no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from ..security.acl import AclBinding, AclFilter, binding_of, creation_problem
from .image import MetadataImage
from .records import AccessControlEntryRecord, RemoveAccessControlEntryRecord

MAX_RECORDS_PER_USER_OP = 10000  # Kafka's QuorumController bound on one request's records
TOO_MANY = f"Cannot create or remove more than {MAX_RECORDS_PER_USER_OP} acls in a single operation."


@dataclass(frozen=True)
class AclCreation:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True)
class AclDeletion:
    """One filter's outcome: the bindings it removed (each removed without error, as in Kafka)."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    deleted: tuple[AclBinding, ...] = ()


def record_of(acl_id: uuid.UUID, binding: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(acl_id, int(binding.resource_type), binding.resource_name,
                                    int(binding.pattern_type), binding.principal, binding.host,
                                    int(binding.operation), int(binding.permission))


def bindings(image: MetadataImage) -> list[AclBinding]:
    return [binding_of(record) for record in image.acls.values()]


def describe_acls(image: MetadataImage, acl_filter: AclFilter) -> list[AclBinding]:
    return [binding for binding in bindings(image) if acl_filter.matches(binding)]


def create_acls(image: MetadataImage, wanted: Sequence[AclBinding], new_id: Callable[[], uuid.UUID]
                ) -> tuple[list[AclCreation], list[AccessControlEntryRecord]]:
    existing = set(bindings(image))
    outcomes: list[AclCreation] = []
    records: list[AccessControlEntryRecord] = []
    for binding in wanted:
        problem = creation_problem(binding)
        if problem is not None:
            outcomes.append(AclCreation(ErrorCode.INVALID_REQUEST, problem))
            continue
        if binding not in existing:
            existing.add(binding)
            acl_id = new_id()
            while acl_id in image.acls:
                acl_id = new_id()
            records.append(record_of(acl_id, binding))
        outcomes.append(AclCreation())
    if len(records) > MAX_RECORDS_PER_USER_OP:
        return [AclCreation(ErrorCode.INVALID_REQUEST, TOO_MANY) for _ in wanted], []
    return outcomes, records


def delete_acls(image: MetadataImage, filters: Sequence[AclFilter]
                ) -> tuple[list[AclDeletion], list[RemoveAccessControlEntryRecord]]:
    outcomes: list[AclDeletion] = []
    removed: dict[uuid.UUID, RemoveAccessControlEntryRecord] = {}
    for acl_filter in filters:
        problem = acl_filter.problem()
        if problem is not None:
            outcomes.append(AclDeletion(ErrorCode.INVALID_REQUEST, problem))
            continue
        deleted: list[AclBinding] = []
        for acl_id, record in image.acls.items():
            binding = binding_of(record)
            if acl_filter.matches(binding):
                deleted.append(binding)
                removed.setdefault(acl_id, RemoveAccessControlEntryRecord(acl_id))
        outcomes.append(AclDeletion(deleted=tuple(deleted)))
    if len(removed) > MAX_RECORDS_PER_USER_OP:
        return [AclDeletion(ErrorCode.INVALID_REQUEST, TOO_MANY) for _ in filters], []
    return outcomes, list(removed.values())


__all__ = ["AclCreation", "AclDeletion", "bindings", "create_acls", "delete_acls", "describe_acls",
           "record_of"]
