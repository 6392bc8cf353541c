"""The User resource's decisions (issue #18): ACL bindings from the spec as Strimzi's KafkaUser
spells them, the create/delete plan against what the cluster holds, quota alterations, and the
Secrets' contents."""

from __future__ import annotations

import pytest
from riverlog.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType, creation_problem
from riverlog_operator.users import (
    UserSpec,
    plan_acls,
    plan_quotas,
    principal_filter,
    scram_secret_data,
)

pytestmark = pytest.mark.unit

SPEC = {
    "clusterRef": {"name": "events"},
    "authentication": {"type": "scram-sha-512"},
    "authorization": {"type": "simple", "acls": [
        {"resource": {"type": "topic", "name": "orders-", "patternType": "prefix"}, "operations": ["Read", "Write"]},
        {"resource": {"type": "group", "name": "billing"}, "operations": ["Read"], "host": "10.0.0.7"},
        {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]},
        {"resource": {"type": "topic", "name": "orders-audit"}, "operations": ["Write"], "type": "deny"},
    ]},
    "quotas": {"producerByteRate": 5242880, "requestPercentage": 50},
}


def test_acls_follow_the_spec_with_kafkas_codes() -> None:
    user = UserSpec.from_resource("alice", SPEC)
    assert user.cluster == "events" and user.authentication == "scram-sha-512"
    assert user.acls == (
        AclBinding(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:alice", "*", Operation.READ,
                   Permission.ALLOW),
        AclBinding(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:alice", "*", Operation.WRITE,
                   Permission.ALLOW),
        AclBinding(ResourceType.GROUP, "billing", PatternType.LITERAL, "User:alice", "10.0.0.7", Operation.READ,
                   Permission.ALLOW),
        AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:alice", "*",
                   Operation.IDEMPOTENT_WRITE, Permission.ALLOW),
        AclBinding(ResourceType.TOPIC, "orders-audit", PatternType.LITERAL, "User:alice", "*", Operation.WRITE,
                   Permission.DENY),
    )
    assert all(creation_problem(b) is None for b in user.acls)  # the broker would accept every one
    assert user.quotas == {"producer_byte_rate": 5242880.0, "request_percentage": 50.0}
    assert principal_filter("User:alice").matches(user.acls[0])
    assert not principal_filter("User:bob").matches(user.acls[0])


def test_the_acl_plan_creates_what_is_missing_and_deletes_drift() -> None:
    user = UserSpec.from_resource("alice", SPEC)
    stray = AclBinding(ResourceType.TOPIC, "*", PatternType.LITERAL, "User:alice", "*", Operation.ALL,
                       Permission.ALLOW)
    plan = plan_acls(user.acls, [user.acls[0], stray])
    assert plan.create == user.acls[1:] and plan.delete == (stray,)
    assert plan_acls(user.acls, user.acls) == plan_acls([], [])  # nothing to do either way
    assert plan_acls([], user.acls).delete == tuple(sorted(user.acls, key=lambda b: b.describe()))


def test_quota_alterations_touch_only_what_differs() -> None:
    assert plan_quotas({"producer_byte_rate": 5.0, "request_percentage": 50.0},
                       {"producer_byte_rate": 5.0, "consumer_byte_rate": 9.0}) == \
        {"request_percentage": 50.0, "consumer_byte_rate": None}
    assert plan_quotas({}, {}) == {}


def test_scram_secrets_carry_the_password_and_a_jaas_line() -> None:
    data = scram_secret_data("alice", "pw")
    assert data == {"password": "pw", "sasl.jaas.config":
                    'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";'}
