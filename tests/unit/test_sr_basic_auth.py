"""Basic auth of the registry: Jetty's users file and password forms, Confluent's JAAS route, the
decision for an ``Authorization`` header, and the REST API answering 401/403 in Confluent's shape."""

from __future__ import annotations

import asyncio
import base64
import hashlib

import pytest
from aiohttp.test_utils import TestClient, TestServer
from riverlog.schema_registry.basic_auth import (
    BasicAuthenticator,
    UsersFileError,
    deobfuscate,
    parse_users,
    users_file_from_jaas,
)
from riverlog.schema_registry.metrics import RegistryMetrics
from riverlog.schema_registry.rest import AlwaysWriter, RestApi
from riverlog.schema_registry.security_settings import AuthSettings
from riverlog.schema_registry.service import InMemoryLog, Registry
from riverlog.schema_registry.store import Store

pytestmark = pytest.mark.unit

# Jetty's own documentation example (Password "you"): OBF and MD5 forms; CRYPT made by crypt(3).
USERS = """
# Jetty property file
alice: alice-secret,admin
bob= MD5:639bae9ac6b3e1a84cebb7b403297b79, developer ,
carol: OBF:1v2j1uum1xtv1zej1zer1xtn1uvk1v1v,reader
dave: CRYPT:daImzLL/Xi2tY,admin,developer
! another comment
erin: erin-secret
"""


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_the_users_file_reads_every_password_form_and_the_roles() -> None:
    users = parse_users(USERS)
    assert sorted(users) == ["alice", "bob", "carol", "dave", "erin"]
    assert users["alice"].roles == {"admin"} and users["bob"].roles == {"developer"}
    assert users["erin"].roles == frozenset()
    assert users["alice"].credential.matches("alice-secret") and not users["alice"].credential.matches("alice")
    assert users["bob"].credential.matches("you") and not users["bob"].credential.matches("You")
    assert users["carol"].credential.matches("password")
    assert users["dave"].credential.matches("dave-secret") and not users["dave"].credential.matches("dave")


def test_jettys_obfuscation_reverses() -> None:
    assert deobfuscate("1v2j1uum1xtv1zej1zer1xtn1uvk1v1v") == "password"
    assert deobfuscate("20771x1b206z") == "you"


@pytest.mark.parametrize("text,words", [
    ("alice", "expected 'user: password"),
    ("alice:", "expected 'user: password"),
    ("alice: ,admin", "empty password"),
    ("alice: MD5:abc", "32 hex digits"),
])
def test_a_bad_users_line_is_named(text: str, words: str) -> None:
    with pytest.raises(UsersFileError, match=f"line 1: .*{words}"):
        parse_users(text, "users")


JAAS = """
// Confluent's example, with a second section beside it
KafkaClient { org.apache.kafka.common.security.plain.PlainLoginModule required username="x" password="y;z"; };
SchemaRegistry-Props {
  org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required
  file="/etc/schema-registry/password-file"
  debug="false";
};
"""


def test_the_jaas_route_finds_the_realms_property_file() -> None:
    assert users_file_from_jaas(JAAS, "SchemaRegistry-Props") == "/etc/schema-registry/password-file"
    with pytest.raises(UsersFileError, match="no section named after authentication.realm=Other"):
        users_file_from_jaas(JAAS, "Other")
    with pytest.raises(UsersFileError, match="PropertyFileLoginModule only"):
        users_file_from_jaas(JAAS, "KafkaClient")


def test_decisions_401_403_and_200() -> None:
    auth = BasicAuthenticator(parse_users(USERS), ["admin", "developer"], "Realm")
    assert auth.decide(None).status == 401
    assert auth.decide("Bearer abc").status == 401
    assert auth.decide("Basic !!!").status == 401
    assert auth.decide(basic("alice", "wrong")).status == 401
    assert auth.decide(basic("nobody", "alice-secret")).status == 401
    assert auth.decide(basic("carol", "password")).status == 403
    assert auth.decide(basic("erin", "erin-secret")).status == 403
    assert auth.decide(basic("bob", "you")).user == "bob" and auth.decide(basic("bob", "you")).status == 200
    assert auth.decide(basic("alice", "alice-secret")).status == 200
    # "*": any user the file knows, whatever their roles.
    assert BasicAuthenticator(parse_users(USERS), ["*"], "Realm").decide(basic("erin", "erin-secret")).status == 200
    assert auth.challenge() == 'Basic realm="Realm"'


def test_the_rest_api_challenges_forbids_and_skips_paths() -> None:
    store = Store()
    auth = AuthSettings(BasicAuthenticator(parse_users(USERS), ["admin"], "SR"), ("/metrics", "/open/*"))
    api = RestApi(Registry(store, InMemoryLog(store)), AlwaysWriter(), RegistryMetrics(), auth=auth)

    async def scenario() -> None:
        async with TestClient(TestServer(api.app())) as client:
            async with client.get("/subjects") as response:
                assert response.status == 401
                assert response.headers["WWW-Authenticate"] == 'Basic realm="SR"'
                assert await response.json(content_type=None) == {"error_code": 401, "message": "Unauthorized"}
            async with client.get("/no/such/path") as response:
                assert response.status == 401  # routing tells an unauthenticated caller nothing
            async with client.get("/subjects", headers={"Authorization": basic("bob", "you")}) as response:
                assert response.status == 403
                assert await response.json(content_type=None) == {"error_code": 403, "message": "Forbidden"}
            async with client.get("/subjects", headers={"Authorization": basic("alice", "alice-secret")}) as response:
                assert (response.status, await response.json(content_type=None)) == (200, [])
            async with client.get("/metrics") as response:
                assert response.status == 200

    asyncio.run(scenario())


def test_md5_entries_compare_the_hex_digest_in_any_case() -> None:
    digest = hashlib.md5(b"s3cret").hexdigest().upper()
    assert parse_users(f"u: MD5:{digest}")["u"].credential.matches("s3cret")
