"""SCRAM users: DescribeUserScramCredentials and AlterUserScramCredentials, as Kafka's Admin
``describeUserScramCredentials`` / ``alterUserScramCredentials`` and ``kafka-configs --entity-type
users`` use them. The password never leaves the client: it is salted and hashed here (PBKDF2 with
the mechanism's hash, a fresh random salt), and the broker keeps only what SCRAM needs."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..security.sasl.scram import HASHES, MAX_ITERATIONS, MIN_ITERATIONS
from .admin import AdminClient
from .errors import BrokerError, check_error

# The protocol's numbers for the mechanisms (ScramMechanism in Kafka's clients).
MECHANISM_NUMBERS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {number: name for name, number in MECHANISM_NUMBERS.items()}


@dataclass(frozen=True, slots=True)
class ScramUser:
    name: str
    credentials: tuple[tuple[str, int], ...]  # (mechanism, iterations), sorted by mechanism


def _mechanism_number(mechanism: str) -> int:
    number = MECHANISM_NUMBERS.get(mechanism.upper())
    if number is None:
        raise ValueError(f"mechanism {mechanism!r}: use {' or '.join(MECHANISM_NUMBERS)}")
    return number


async def describe_scram_users(admin: AdminClient, names: Sequence[str] | None = None) -> list[ScramUser]:
    """Every user with a SCRAM credential (or the named ones; an unknown name raises
    BrokerError RESOURCE_NOT_FOUND), sorted by name."""
    conn = await admin.cluster.any_connection()
    body = {"users": [{"name": n} for n in names] if names else None}
    response = await conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
    check_error(response["error_code"], "describe SCRAM users", response.get("error_message"))
    users = []
    for result in response["results"]:
        check_error(result["error_code"], f"describe SCRAM user '{result['user']}'", result.get("error_message"))
        credentials = tuple(sorted((MECHANISM_NAMES.get(c["mechanism"], str(c["mechanism"])), c["iterations"])
                                   for c in result["credential_infos"]))
        users.append(ScramUser(result["user"], credentials))
    return sorted(users, key=lambda u: u.name)


async def upsert_scram_user(admin: AdminClient, name: str, password: str, *, mechanism: str = "SCRAM-SHA-512",
                            iterations: int = MIN_ITERATIONS) -> None:
    """Create the user's credential for ``mechanism``, or replace it (a new password)."""
    number = _mechanism_number(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")
    if not password:
        raise ValueError("the password is empty")
    salt = secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(HASHES[mechanism.upper()], password.encode(), salt, iterations)
    await _alter(admin, name, {"deletions": [], "upsertions": [
        {"name": name, "mechanism": number, "iterations": iterations, "salt": salt, "salted_password": salted}]},
        f"set the {mechanism.upper()} credential of user '{name}'")


async def delete_scram_user(admin: AdminClient, name: str, *, mechanism: str = "SCRAM-SHA-512") -> None:
    """Remove the user's credential for ``mechanism`` (RESOURCE_NOT_FOUND if it has none)."""
    await _alter(admin, name, {"deletions": [{"name": name, "mechanism": _mechanism_number(mechanism)}],
                               "upsertions": []}, f"delete the {mechanism.upper()} credential of user '{name}'")


async def _alter(admin: AdminClient, name: str, body: dict[str, object], operation: str) -> None:
    conn = await admin.cluster.any_connection()
    response = await conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)
    results = [r for r in response["results"] if r["user"] == name]
    if not results:
        raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, operation, "the broker's answer names no such user")
    check_error(results[0]["error_code"], operation, results[0].get("error_message"))
