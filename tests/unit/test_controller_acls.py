"""ACL bindings in the metadata image: KRaft's AclControlManager rules for CreateAcls and
DeleteAcls, Kafka's filter matching for DescribeAcls, the records' JSON and snapshots."""

from __future__ import annotations

import itertools
import uuid

import pytest
from riverlog.controller.acls import MAX_RECORDS_PER_USER_OP, create_acls, delete_acls, describe_acls
from riverlog.controller.image import MetadataImage
from riverlog.controller.quorum import codec
from riverlog.controller.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord, from_json, to_json
from riverlog.controller.snapshot import image_to_records
from riverlog.protocol.errors import ErrorCode
from riverlog.security.acl import ANY_FILTER, AclBinding, AclFilter

pytestmark = pytest.mark.unit


def ids() -> object:
    counter = itertools.count(1)
    return lambda: uuid.UUID(int=next(counter))


def binding(rtype: int = 2, name: str = "orders", pattern: int = 3, principal: str = "User:alice",
            host: str = "*", op: int = 3, perm: int = 3) -> AclBinding:
    return AclBinding.of(rtype, name, pattern, principal, host, op, perm)


def created(*bindings: AclBinding) -> MetadataImage:
    outcomes, records = create_acls(MetadataImage("c"), bindings, ids())  # type: ignore[arg-type]
    assert all(o.error == ErrorCode.NONE for o in outcomes)
    return MetadataImage("c").apply(records)


def test_created_bindings_are_recorded_with_ids_once() -> None:
    image = created(binding(), binding(), binding(op=4))
    assert len(image.acls) == 2 and all(isinstance(k, uuid.UUID) for k in image.acls)
    outcomes, records = create_acls(image, [binding()], ids())  # type: ignore[arg-type]
    assert outcomes[0].error == ErrorCode.NONE and records == []  # exists already: success, no record


@pytest.mark.parametrize("bad, message", [
    (binding(rtype=1), "Invalid resourceType ANY"),
    (binding(rtype=99), "Invalid resourceType UNKNOWN"),
    (binding(pattern=2), "Invalid patternType MATCH"),
    (binding(op=1), "Invalid operation ANY"),
    (binding(perm=1), "Invalid permissionType ANY"),
    (binding(rtype=4, name="other"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (binding(name=""), "Invalid empty resource name"),
    (binding(principal="alice"), "Could not parse principal"),
])
def test_invalid_bindings_are_refused_one_by_one(bad: AclBinding, message: str) -> None:
    outcomes, records = create_acls(MetadataImage("c"), [bad, binding()], ids())  # type: ignore[arg-type]
    assert outcomes[0].error == ErrorCode.INVALID_REQUEST and message in (outcomes[0].message or "")
    assert outcomes[1].error == ErrorCode.NONE and len(records) == 1


def test_filters_match_as_kafka_s() -> None:
    image = created(binding(name="orders"), binding(name="ord", pattern=4), binding(name="*"),
                    binding(rtype=3, name="orders", principal="User:bob", op=8))
    match = AclFilter.of(2, "orders", 2, None, None, 1, 1)  # what applies to topic "orders"
    assert {b.resource_name for b in describe_acls(image, match)} == {"orders", "ord", "*"}
    literal = AclFilter.of(2, "orders", 3, None, None, 1, 1)
    assert [b.resource_name for b in describe_acls(image, literal)] == ["orders"]
    by_principal = AclFilter.of(1, None, 1, "User:bob", None, 1, 1)
    assert [b.resource_type.name for b in describe_acls(image, by_principal)] == ["GROUP"]
    assert len(describe_acls(image, ANY_FILTER)) == 4


def test_delete_removes_by_id_and_reports_per_filter() -> None:
    image = created(binding(name="a"), binding(name="b"), binding(name="c", principal="User:bob"))
    alice = AclFilter.of(1, None, 1, "User:alice", None, 1, 1)
    just_a = AclFilter.of(2, "a", 3, None, None, 1, 1)
    unknown = AclFilter.of(0, None, 1, None, None, 1, 1)
    outcomes, records = delete_acls(image, [alice, just_a, unknown])
    assert [len(o.deleted) for o in outcomes] == [2, 1, 0]
    assert outcomes[2].error == ErrorCode.INVALID_REQUEST
    assert len(records) == 2 and all(isinstance(r, RemoveAccessControlEntryRecord) for r in records)
    after = image.apply(records)
    assert [b.principal for b in describe_acls(after, ANY_FILTER)] == ["User:bob"]


def test_too_many_records_in_one_request_are_refused() -> None:
    many = [binding(name=f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    outcomes, records = create_acls(MetadataImage("c"), many, ids())  # type: ignore[arg-type]
    assert records == [] and {o.error for o in outcomes} == {ErrorCode.INVALID_REQUEST}


def test_records_travel_as_json_snapshots_and_controller_calls() -> None:
    image = created(binding(), binding(rtype=5, name="tx-", pattern=4, op=4))
    for record in image.acls.values():
        assert from_json(to_json(record)) == record
    rebuilt = MetadataImage("c").apply(image_to_records(image))
    assert rebuilt.acls == image.acls
    record = next(iter(image.acls.values()))
    assert isinstance(record, AccessControlEntryRecord)
    sent = [binding(), AclFilter.of(1, None, 2, None, None, 1, 1)]
    assert codec.from_wire(codec.to_wire(sent)) == sent
