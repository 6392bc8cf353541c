"""SCRAM credentials in the metadata image: KRaft's rules for AlterUserScramCredentials and
DescribeUserScramCredentials, and the stored credential a SCRAM login checks against."""

from __future__ import annotations

import hashlib

import pytest
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import from_json, to_json
from riverlog.controller.scram import (
    ScramDeletion,
    ScramUpsertion,
    alter_credentials,
    as_credential,
    describe_credentials,
    password_record,
)
from riverlog.controller.snapshot import image_to_records
from riverlog.protocol.errors import ErrorCode
from riverlog.security.sasl.scram import ScramServer, make_credential

pytestmark = pytest.mark.unit

SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"


def upsert(name: str, mechanism: int = SHA512, password: str = "pw", iterations: int = 4096) -> ScramUpsertion:
    algorithm = {SHA256: "sha256"}.get(mechanism, "sha512")
    return ScramUpsertion(name, mechanism, iterations, SALT,
                          hashlib.pbkdf2_hmac(algorithm, password.encode(), SALT, iterations))


def test_an_upsertion_stores_what_a_login_checks_never_the_password() -> None:
    outcomes, records = alter_credentials(MetadataImage(), [], [upsert("alice", password="alice-secret")])
    assert [(o.user, o.error) for o in outcomes] == [("alice", ErrorCode.NONE)]
    image = MetadataImage().apply(records)
    stored = as_credential(image.scram[("alice", "SCRAM-SHA-512")])
    assert stored == make_credential("SCRAM-SHA-512", "alice-secret", salt=SALT, iterations=4096)
    assert "alice-secret" not in str(to_json(records[0]))
    assert from_json(to_json(records[0])) == records[0]
    server = ScramServer("SCRAM-SHA-512", lambda u, m: as_credential(image.scram[(u, m)]))
    assert server.step(b"n,,n=alice,r=abc").startswith(b"r=abc")


def test_refusals_follow_kraft() -> None:
    image = MetadataImage().apply([password_record("bob", "SCRAM-SHA-256", "x", SALT)])
    outcomes, records = alter_credentials(image, [ScramDeletion("carol", SHA256), ScramDeletion("bob", SHA256)], [
        upsert("dave", iterations=1000),
        upsert("erin", iterations=20000),
        upsert(""),
        upsert("frank", mechanism=3),
        upsert("bob"),  # also deleted above: twice in one request
        upsert("grace"),
    ])
    by_user = {o.user: (o.error, o.message) for o in outcomes}
    assert by_user["carol"] == (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    assert by_user["dave"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    assert by_user["erin"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    assert by_user[""] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    assert by_user["frank"] == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    assert by_user["bob"][0] == ErrorCode.DUPLICATE_RESOURCE
    assert by_user["grace"] == (ErrorCode.NONE, None)
    assert [r.name for r in records] == ["grace"]  # only what was accepted


def test_deletion_and_description() -> None:
    image = MetadataImage().apply([password_record("bob", "SCRAM-SHA-256", "x", SALT),
                                   password_record("bob", "SCRAM-SHA-512", "x", SALT, iterations=8192)])
    described = describe_credentials(image, None)
    assert [(d.user, d.credentials) for d in described] == [("bob", ((SHA256, 4096), (SHA512, 8192)))]
    named = {d.user: d for d in describe_credentials(image, ["bob", "nobody", "nobody"])}
    assert named["nobody"].error == ErrorCode.DUPLICATE_RESOURCE
    assert describe_credentials(image, ["ghost"])[0].error == ErrorCode.RESOURCE_NOT_FOUND
    _outcomes, records = alter_credentials(image, [ScramDeletion("bob", SHA256)], [])
    after = image.apply(records)
    assert list(after.scram) == [("bob", "SCRAM-SHA-512")]
    # A snapshot carries the credentials.
    assert MetadataImage().apply(image_to_records(after)).scram == after.scram


def test_credentials_travel_to_the_active_controller_intact() -> None:
    # A broker forwards AlterUserScramCredentials in a controller call: bytes included.
    from riverlog.controller.quorum.codec import from_wire, to_wire

    call = ([ScramDeletion("bob", SHA256)], [upsert("alice", password="alice-secret")])
    assert from_wire(to_wire(call)) == (call[0], call[1])


def test_bootstrap_credentials_kafka_s_add_scram_syntax() -> None:
    from riverlog.controller.scram import BootstrapCredential, missing_bootstrap_records, parse_bootstrap_credentials

    wanted = parse_bootstrap_credentials(
        "SCRAM-SHA-512=[name=admin,password=admin-secret]; SCRAM-SHA-256=[name=ops,password=p,iterations=8192]")
    assert wanted == [BootstrapCredential("SCRAM-SHA-512", "admin", "admin-secret"),
                      BootstrapCredential("SCRAM-SHA-256", "ops", "p", 8192)]
    assert parse_bootstrap_credentials("") == []
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-512=[password=b]", "SCRAM-SHA-512=name=a",
                "SCRAM-SHA-512=[name=a,password=b,iterations=10]"):
        with pytest.raises(ValueError):
            parse_bootstrap_credentials(bad)
    # Only what is missing, and never over a credential that exists (changed since, perhaps).
    image = MetadataImage().apply([password_record("ops", "SCRAM-SHA-256", "changed-since", SALT)])
    records = missing_bootstrap_records(image, wanted, lambda: SALT)
    assert [(r.name, r.mechanism) for r in records] == [("admin", "SCRAM-SHA-512")]
    assert as_credential(records[0]) == make_credential("SCRAM-SHA-512", "admin-secret", salt=SALT)
