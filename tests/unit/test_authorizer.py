"""The authorizer decides as Kafka's KRaft StandardAuthorizer: literal, wildcard and prefixed
patterns, principal and host matching, operation implications, deny over allow, super users,
allow.everyone.if.no.acl.found, and authorizeByResourceType (authorize_any)."""

from __future__ import annotations

import pytest
from riverlog.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from riverlog.security.authorizer import Authorizer, parse_super_users

pytestmark = pytest.mark.unit

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
ALICE = "User:alice"
HOST = "10.0.0.1"


def acl(rtype: ResourceType, name: str, op: Operation, perm: Permission = ALLOW, *, pattern: PatternType = LIT,
        principal: str = ALICE, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*bindings: AclBinding, super_users: str = "", allow_if_no_acl: bool = False) -> Authorizer:
    return Authorizer(parse_super_users(super_users), allow_if_no_acl).with_acls(bindings)


def may(auth: Authorizer, op: Operation, rtype: ResourceType, name: str, principal: str = ALICE,
        host: str = HOST) -> bool:
    return auth.authorize(principal, host, op, rtype, name)


def test_without_acls_nothing_is_allowed_unless_allow_everyone() -> None:
    assert not may(authorizer(), Operation.READ, T, "orders")
    assert may(authorizer(allow_if_no_acl=True), Operation.READ, T, "orders")


def test_allow_everyone_applies_only_to_resources_without_any_acl() -> None:
    auth = authorizer(acl(T, "orders", Operation.READ, principal="User:bob"), allow_if_no_acl=True)
    assert not may(auth, Operation.READ, T, "orders")  # an ACL exists for someone else
    assert may(auth, Operation.READ, T, "payments")


def test_literal_wildcard_and_prefixed_patterns() -> None:
    auth = authorizer(acl(T, "orders", Operation.WRITE), acl(T, "*", Operation.READ),
                      acl(T, "logs-", Operation.DELETE, pattern=PRE))
    assert may(auth, Operation.WRITE, T, "orders")
    assert not may(auth, Operation.WRITE, T, "orders2")  # a literal name is not a prefix
    assert may(auth, Operation.READ, T, "anything")
    assert may(auth, Operation.DELETE, T, "logs-app")
    assert not may(auth, Operation.DELETE, T, "log")
    assert not may(auth, Operation.READ, G, "orders")  # another resource type


def test_principal_wildcard_and_host_match() -> None:
    auth = authorizer(acl(T, "orders", Operation.READ, principal="User:*"),
                      acl(T, "pay", Operation.READ, host="10.0.0.2"))
    assert may(auth, Operation.READ, T, "orders", principal="User:anyone")
    assert not may(auth, Operation.READ, T, "pay")
    assert may(auth, Operation.READ, T, "pay", host="10.0.0.2")


@pytest.mark.parametrize("granted", [Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER,
                                     Operation.DESCRIBE])
def test_read_write_delete_alter_imply_describe(granted: Operation) -> None:
    assert may(authorizer(acl(T, "t", granted)), Operation.DESCRIBE, T, "t")


def test_alter_configs_implies_describe_configs_and_all_implies_everything() -> None:
    assert may(authorizer(acl(T, "t", Operation.ALTER_CONFIGS)), Operation.DESCRIBE_CONFIGS, T, "t")
    assert not may(authorizer(acl(T, "t", Operation.DESCRIBE_CONFIGS)), Operation.ALTER_CONFIGS, T, "t")
    assert not may(authorizer(acl(T, "t", Operation.CREATE)), Operation.DESCRIBE, T, "t")
    for op in (Operation.READ, Operation.WRITE, Operation.DESCRIBE_CONFIGS, Operation.DELETE):
        assert may(authorizer(acl(T, "t", Operation.ALL)), op, T, "t")


def test_deny_wins_over_allow_but_implies_nothing() -> None:
    auth = authorizer(acl(T, "orders", Operation.ALL), acl(T, "orders", Operation.WRITE, DENY))
    assert not may(auth, Operation.WRITE, T, "orders")
    assert may(auth, Operation.READ, T, "orders")
    assert may(auth, Operation.DESCRIBE, T, "orders")  # a DENY of WRITE does not deny DESCRIBE
    prefixed_deny = authorizer(acl(T, "orders", Operation.READ), acl(T, "ord", Operation.READ, DENY, pattern=PRE))
    assert not may(prefixed_deny, Operation.READ, T, "orders")
    wildcard_deny = authorizer(acl(T, "orders", Operation.READ), acl(T, "*", Operation.ALL, DENY, principal="User:*"))
    assert not may(wildcard_deny, Operation.READ, T, "orders")


def test_super_users_may_do_anything_whatever_the_denials() -> None:
    auth = authorizer(acl(C, "kafka-cluster", Operation.ALL, DENY, principal="User:*"),
                      super_users="User:admin; User:ops")
    assert may(auth, Operation.ALTER, C, "kafka-cluster", principal="User:admin")
    assert may(auth, Operation.CLUSTER_ACTION, C, "kafka-cluster", principal="User:ops")
    assert not may(auth, Operation.ALTER, C, "kafka-cluster")


def test_authorize_any_is_kafka_s_authorize_by_resource_type() -> None:
    def any_write(*bindings: AclBinding) -> bool:
        return authorizer(*bindings).authorize_any(ALICE, HOST, Operation.WRITE, T)

    assert not any_write()
    assert any_write(acl(T, "orders", Operation.WRITE))
    assert any_write(acl(T, "orders", Operation.ALL))
    assert not any_write(acl(T, "orders", Operation.READ))  # no implications here
    assert not any_write(acl(T, "orders", Operation.WRITE), acl(T, "orders", Operation.WRITE, DENY))
    assert not any_write(acl(T, "orders", Operation.WRITE), acl(T, "or", Operation.WRITE, DENY, pattern=PRE))
    assert any_write(acl(T, "orders", Operation.WRITE), acl(T, "x", Operation.WRITE, DENY, pattern=PRE))
    assert not any_write(acl(T, "*", Operation.WRITE), acl(T, "*", Operation.WRITE, DENY))
    assert any_write(acl(T, "logs-", Operation.WRITE, pattern=PRE))
    assert not any_write(acl(T, "orders", Operation.WRITE, host="10.9.9.9"))
    assert authorizer(super_users="User:alice").authorize_any(ALICE, HOST, Operation.WRITE, T)


def test_denials_are_logged_once_per_principal_and_resource_per_interval_and_always_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    from riverlog.security.denials import DenialLog

    counted: list[tuple[str, str]] = []
    now = [0.0]
    denials = DenialLog(lambda rtype, op: counted.append((rtype, op)), lambda: now[0], interval_s=60)
    with caplog.at_level("INFO", logger="riverlog.authorizer"):
        for _ in range(3):
            denials.denied("User:bob", HOST, "WRITE", "TOPIC", "orders")
        denials.denied("User:bob", HOST, "READ", "TOPIC", "payments")
        now[0] = 61.0
        denials.denied("User:bob", HOST, "WRITE", "TOPIC", "orders")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert "Principal = User:bob is Denied operation = WRITE" in lines[0] and "TOPIC:orders" in lines[0]
    assert counted == [("TOPIC", "WRITE")] * 3 + [("TOPIC", "READ"), ("TOPIC", "WRITE")]
