"""The ownership check of the group acceptance tests (support/rebalance_checks.py) finds a
partition handed to a member before its previous owner gave it up, and only then."""

from __future__ import annotations

import pytest
from support.rebalance_checks import ownership_overlaps

pytestmark = pytest.mark.unit


def ev(seq: int, member: str, kind: str, *partitions: str) -> dict[str, object]:
    return {"seq": seq, "member": member, "kind": kind, "partitions": list(partitions)}


def test_a_partition_moving_through_its_revocation_is_no_overlap() -> None:
    events = [ev(0, "a", "assigned", "t:0", "t:1"), ev(1, "a", "revoked", "t:1"), ev(2, "b", "assigned", "t:1"),
              ev(3, "b", "lost", "t:1"), ev(4, "a", "assigned", "t:1")]
    assert ownership_overlaps(events) == []


def test_an_assignment_numbered_before_the_revocation_is_an_overlap() -> None:
    # Given out of order: the check sorts by number, not by list position.
    events = [ev(2, "a", "revoked", "t:1"), ev(0, "a", "assigned", "t:0", "t:1"), ev(1, "b", "assigned", "t:1")]
    assert ownership_overlaps(events) == ["event 1: t:1 assigned to b while a owned it"]


def test_another_members_revocation_frees_nothing() -> None:
    events = [ev(0, "a", "assigned", "t:0"), ev(1, "b", "revoked", "t:0"), ev(2, "b", "assigned", "t:0")]
    assert ownership_overlaps(events) == ["event 2: t:0 assigned to b while a owned it"]
