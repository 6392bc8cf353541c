"""SCRAM credentials in the metadata log, decided as KRaft's ScramControlManager decides them.

AlterUserScramCredentials carries, per user and mechanism, a deletion or an upsertion whose
password the client already salted (PBKDF2): the controller turns the salted password into the
stored key and server key and records those (``UserScramCredentialRecord``), never the password.
A user named twice in one request gets DUPLICATE_RESOURCE; an empty name or too few (< 4096) or
too many (> 16384) iterations UNACCEPTABLE_CREDENTIAL; an unknown mechanism
UNSUPPORTED_SASL_MECHANISM; deleting a credential that does not exist RESOURCE_NOT_FOUND. The
accepted ones are committed together (Kafka's ``atomicOf``).

DescribeUserScramCredentials answers from the image: every user's mechanisms and iterations,
RESOURCE_NOT_FOUND for a named user without credentials, DUPLICATE_RESOURCE for one named twice.

Pure functions of the image; no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from ..security.sasl.scram import HASHES, MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential
from .image import MetadataImage
from .records import RemoveUserScramCredentialRecord, UserScramCredentialRecord

# The protocol's mechanism numbers (ScramMechanism.type()).
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {name: number for number, name in MECHANISM_TYPES.items()}
DUPLICATE = "A user credential cannot be altered twice in the same request"
DESCRIBED_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "


@dataclass(frozen=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class UserOutcome:
    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def credential_record(name: str, mechanism: str, salt: bytes, salted_password: bytes,
                      iterations: int) -> UserScramCredentialRecord:
    algorithm = HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", algorithm).digest()
    return UserScramCredentialRecord(
        name, mechanism, _b64(salt), _b64(hashlib.new(algorithm, client_key).digest()),
        _b64(hmac.new(salted_password, b"Server Key", algorithm).digest()), iterations)


def password_record(name: str, mechanism: str, password: str, salt: bytes,
                    iterations: int = MIN_ITERATIONS) -> UserScramCredentialRecord:
    """What a plain password becomes (bootstrap credentials given at start)."""
    salted = hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)
    return credential_record(name, mechanism, salt, salted, iterations)


def as_credential(record: UserScramCredentialRecord) -> ScramCredential:
    return ScramCredential(base64.b64decode(record.salt), base64.b64decode(record.stored_key),
                           base64.b64decode(record.server_key), record.iterations)


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_TYPES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def alter_credentials(image: MetadataImage, deletions: Sequence[ScramDeletion],
                      upsertions: Sequence[ScramUpsertion]
                      ) -> tuple[list[UserOutcome], list[UserScramCredentialRecord | RemoveUserScramCredentialRecord]]:
    errors: dict[str, tuple[ErrorCode, str]] = {}
    to_delete: dict[str, ScramDeletion] = {}
    to_upsert: dict[str, ScramUpsertion] = {}
    for deletion in deletions:
        if deletion.name in errors:
            continue
        if to_delete.pop(deletion.name, None) is not None:
            errors[deletion.name] = (ErrorCode.DUPLICATE_RESOURCE, DUPLICATE)
            continue
        problem = _check_name_and_mechanism(deletion.name, deletion.mechanism)
        if problem is None and (deletion.name, MECHANISM_TYPES[deletion.mechanism]) not in image.scram:
            problem = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        if problem is not None:
            errors[deletion.name] = problem
        else:
            to_delete[deletion.name] = deletion
    for upsertion in upsertions:
        if upsertion.name in errors:
            continue
        if to_delete.pop(upsertion.name, None) is not None or to_upsert.pop(upsertion.name, None) is not None:
            errors[upsertion.name] = (ErrorCode.DUPLICATE_RESOURCE, DUPLICATE)
            continue
        problem = _check_name_and_mechanism(upsertion.name, upsertion.mechanism)
        if problem is None and upsertion.iterations < MIN_ITERATIONS:
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif problem is None and upsertion.iterations > MAX_ITERATIONS:
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if problem is not None:
            errors[upsertion.name] = problem
        else:
            to_upsert[upsertion.name] = upsertion
    outcomes: list[UserOutcome] = []
    records: list[UserScramCredentialRecord | RemoveUserScramCredentialRecord] = []
    for deletion in to_delete.values():
        outcomes.append(UserOutcome(deletion.name))
        records.append(RemoveUserScramCredentialRecord(deletion.name, MECHANISM_TYPES[deletion.mechanism]))
    for upsertion in to_upsert.values():
        outcomes.append(UserOutcome(upsertion.name))
        records.append(credential_record(upsertion.name, MECHANISM_TYPES[upsertion.mechanism], upsertion.salt,
                                         upsertion.salted_password, upsertion.iterations))
    outcomes.extend(UserOutcome(user, code, message) for user, (code, message) in errors.items())
    return outcomes, records


@dataclass(frozen=True)
class DescribedUser:
    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism type, iterations)


def describe_credentials(image: MetadataImage, users: Sequence[str] | None) -> list[DescribedUser]:
    if not users:
        names = sorted({name for name, _mechanism in image.scram})
        duplicates: set[str] = set()
    else:
        names = list(dict.fromkeys(users))
        duplicates = {u for u in names if users.count(u) > 1}
    out: list[DescribedUser] = []
    for name in names:
        if name in duplicates:
            out.append(DescribedUser(name, ErrorCode.DUPLICATE_RESOURCE, DESCRIBED_TWICE + name))
            continue
        found = tuple((TYPE_OF[mechanism], record.iterations)
                      for (user, mechanism), record in sorted(image.scram.items()) if user == name)
        if found:
            out.append(DescribedUser(name, credentials=found))
        else:
            out.append(DescribedUser(name, ErrorCode.RESOURCE_NOT_FOUND,
                                     f"Attempt to describe a user credential that does not exist: {name}"))
    return out


@dataclass(frozen=True)
class BootstrapCredential:
    mechanism: str
    name: str
    password: str
    iterations: int = MIN_ITERATIONS


_BOOTSTRAP_ENTRY = re.compile(r"\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*?)\]\s*(?:;|$)")


def parse_bootstrap_credentials(spec: str) -> list[BootstrapCredential]:
    """``bootstrap.scram.credentials``: ``SCRAM-SHA-512=[name=admin,password=admin-secret]``
    entries separated by ``;`` (Kafka's ``kafka-storage format --add-scram`` syntax, several at
    once), with ``iterations=`` optional. ValueError names what is wrong."""
    out: list[BootstrapCredential] = []
    pos = 0
    spec = spec.strip()
    while pos < len(spec):
        match = _BOOTSTRAP_ENTRY.match(spec, pos)
        if match is None:
            raise ValueError(f"bootstrap.scram.credentials: cannot read {spec[pos:pos + 30]!r} (expected "
                             "SCRAM-SHA-512=[name=admin,password=...]; entries separated by ';')")
        fields = dict(part.split("=", 1) for part in match.group(2).split(",") if "=" in part)
        if not fields.get("name") or "password" not in fields or set(fields) - {"name", "password", "iterations"}:
            raise ValueError("bootstrap.scram.credentials: each entry needs name= and password= (and at most "
                             "iterations=)")
        iterations = int(fields.get("iterations", MIN_ITERATIONS))
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"bootstrap.scram.credentials: iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}")
        out.append(BootstrapCredential(match.group(1), fields["name"], fields["password"], iterations))
        pos = match.end()
    return out


def missing_bootstrap_records(image: MetadataImage, wanted: Sequence[BootstrapCredential],
                              salt: Callable[[], bytes]) -> list[UserScramCredentialRecord]:
    """The bootstrap credentials the image does not have yet (never replacing one that exists:
    a password changed since with kafka-configs stays changed)."""
    return [password_record(c.name, c.mechanism, c.password, salt(), c.iterations)
            for c in wanted if (c.name, c.mechanism) not in image.scram]
