"""ACLs (issue #17, acceptance 2): every API family checked as Kafka's StandardAuthorizer checks
it, with the same error codes on both targets.

One broker for the module, with the StandardAuthorizer, a SASL_PLAINTEXT listener (``SASL``)
whose PLAIN users are admin (a super user), alice, bob, carol and dave, and the harness's PLAINTEXT
listener (``User:ANONYMOUS``, a super user too: Kafka's own broker-to-controller traffic runs on
PLAINTEXT and needs CLUSTER_ACTION). ACLs are granted with confluent-kafka's AdminClient and with
Kafka's ``kafka-acls.sh``; each test uses its own topics, groups and transactional ids, so the
bindings of one test never decide another's. Grants are waited for until DescribeAcls on the
broker shows them (Kafka's brokers learn them from the metadata log a moment after the answer).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from riverlog.client.connection import BrokerConnection
from riverlog.controller.quorum import codec
from riverlog.protocol.api_keys import ApiKey
from riverlog.protocol.errors import ErrorCode
from riverlog.security.acl import AclBinding as RiverlogAclBinding
from support.brokers import BrokerProcess
from support.client_security import ClientSecurity
from support.java_tools import JavaTools, ToolResult

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")]

REPO_ROOT = Path(__file__).resolve().parents[2]
USERS = ("admin", "alice", "bob", "carol", "dave")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" ' + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TIMEOUT = 30


class Secured:
    def __init__(self, broker: BrokerProcess, port: int) -> None:
        self.broker, self.port = broker, port
        self.bootstrap = f"localhost:{port}"

    def security(self, user: str) -> ClientSecurity:
        return ClientSecurity("SASL_PLAINTEXT", mechanism="PLAIN", username=user, password=f"{user}-secret")

    def conf(self, user: str, **extra: object) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap, **self.security(user).librdkafka(), **extra}

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.conf(user))

    def grant(self, *bindings: AclBinding) -> None:
        """Create ``bindings`` as the super user and wait until the broker describes them all."""
        admin = self.admin()
        for future in admin.create_acls(list(bindings)).values():
            future.result(TIMEOUT)
        wanted = set(bindings)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            described = set(admin.describe_acls(ANY_ACL).result(TIMEOUT))
            if wanted <= described:
                return
            time.sleep(0.2)
        raise AssertionError(f"the broker never described {wanted - described}")

    def create_topic(self, name: str, partitions: int = 1) -> None:
        admin = self.admin()  # kept alive until the answer: a collected client abandons its requests
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)


ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)


def acl(rtype: ResourceType, name: str, user: str, operation: AclOperation, permission: AclPermissionType = ALLOW,
        *, pattern: ResourcePatternType = LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{user}", host, operation, permission)


@pytest.fixture(scope="module")
def secured(module_broker_factory) -> Iterator[Secured]:
    broker: BrokerProcess = module_broker_factory(start=False, overrides={
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin;User:ANONYMOUS",
        "listener.name.sasl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
    })
    port = broker.add_listener("SASL", "SASL_PLAINTEXT", advertised_host="localhost")
    broker.start()
    yield Secured(broker, port)


def code_of(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), repr(exc)
    return exc.args[0].code()


def produce_errors(secured: Secured, user: str, topic: str, **extra: object) -> list[int]:
    """The delivery error of one record per attempt (0 when delivered)."""
    producer = Producer(secured.conf(user, **{"message.timeout.ms": 10000, **extra}))
    errors: list[int] = []
    producer.produce(topic, b"x", on_delivery=lambda err, _msg: errors.append(err.code() if err else 0))
    producer.flush(TIMEOUT)
    return errors


def first_consumer_error(secured: Secured, user: str, topic: str, group: str, **extra: object) -> int:
    """The first error a new consumer of ``topic`` in ``group`` reports (0: read a record)."""
    consumer = Consumer(secured.conf(user, **{"group.id": group, "auto.offset.reset": "earliest", **extra}))
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            error = msg.error()
            if error is None:
                return 0
            if error.code() != KafkaError._PARTITION_EOF:
                return int(error.code())
        raise AssertionError(f"{user} neither read {topic} nor got an error")
    finally:
        consumer.close()


# --- the ACL APIs and tools ---------------------------------------------------------------


def test_acls_are_created_described_and_deleted_with_the_admin_client(secured: Secured) -> None:
    bindings = [acl(ResourceType.TOPIC, "api-orders", "alice", AclOperation.READ),
                acl(ResourceType.GROUP, "api-", "alice", AclOperation.READ, pattern=PREFIXED),
                acl(ResourceType.TRANSACTIONAL_ID, "api-tx", "alice", AclOperation.WRITE, DENY)]
    secured.grant(*bindings)
    admin = secured.admin()
    by_alice = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert set(bindings) <= set(admin.describe_acls(by_alice).result(TIMEOUT))
    matching = AclBindingFilter(ResourceType.GROUP, "api-consumers", ResourcePatternType.MATCH, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(matching).result(TIMEOUT) == [bindings[1]]
    only_tx = AclBindingFilter(ResourceType.TRANSACTIONAL_ID, "api-tx", LITERAL, None, None, AclOperation.ANY,
                               AclPermissionType.ANY)
    deleted = admin.delete_acls([only_tx])[only_tx].result(TIMEOUT)
    assert deleted == [bindings[2]]
    assert bindings[2] not in admin.describe_acls(by_alice).result(TIMEOUT)


def test_acl_apis_need_cluster_permissions(secured: Secured) -> None:
    admin = secured.admin("alice")
    binding = acl(ResourceType.TOPIC, "never", "alice", AclOperation.ALL)
    with pytest.raises(KafkaException) as created:
        admin.create_acls([binding])[binding].result(TIMEOUT)
    assert code_of(created.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # DescribeAcls answers CLUSTER_AUTHORIZATION_FAILED, which librdkafka turns into no bindings.
    assert admin.describe_acls(ANY_ACL).result(TIMEOUT) == []
    with pytest.raises(KafkaException) as deleted:
        admin.delete_acls([ANY_ACL])[ANY_ACL].result(TIMEOUT)
    assert code_of(deleted.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_kafka_acls_tool_adds_lists_and_removes(secured: Secured, java_tools: JavaTools, tmp_path: Path) -> None:
    config = secured.security("admin").write_java_properties(tmp_path / "admin.properties")
    common = ("--command-config", str(config))
    java_tools.acls(secured.bootstrap, *common, "--add", "--allow-principal", "User:dave", "--operation", "Write",
                    "--topic", "tool-events", "--resource-pattern-type", "prefixed")
    listed = java_tools.acls(secured.bootstrap, *common, "--list", "--topic", "tool-events",
                             "--resource-pattern-type", "prefixed").stdout
    assert "User:dave" in listed and "WRITE" in listed and "PREFIXED" in listed
    secured.create_topic("tool-events-a")
    deadline = time.monotonic() + TIMEOUT  # the broker applies the binding a moment after the answer
    while produce_errors(secured, "dave", "tool-events-a") != [0]:
        assert time.monotonic() < deadline, "dave never got to write"
        time.sleep(0.2)
    java_tools.acls(secured.bootstrap, *common, "--remove", "--force", "--allow-principal", "User:dave",
                    "--operation", "Write", "--topic", "tool-events", "--resource-pattern-type", "prefixed")
    listed = java_tools.acls(secured.bootstrap, *common, "--list", "--topic", "tool-events",
                             "--resource-pattern-type", "prefixed").stdout
    assert "User:dave" not in listed


# --- produce, fetch, metadata ------------------------------------------------------------------


def test_produce_needs_write_on_the_topic(secured: Secured) -> None:
    secured.create_topic("p-orders")
    secured.grant(acl(ResourceType.TOPIC, "p-orders", "alice", AclOperation.WRITE))
    assert produce_errors(secured, "alice", "p-orders") == [0]
    assert produce_errors(secured, "bob", "p-orders") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_deny_wins_over_allow(secured: Secured) -> None:
    secured.create_topic("deny-orders")
    secured.grant(acl(ResourceType.TOPIC, "deny-orders", "carol", AclOperation.ALL),
                  acl(ResourceType.TOPIC, "deny-", "carol", AclOperation.WRITE, DENY, pattern=PREFIXED))
    # Carol may describe the topic (a DENY of WRITE implies nothing) but not write to it.
    assert produce_errors(secured, "carol", "deny-orders") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    secured.grant(acl(ResourceType.GROUP, "deny-readers", "carol", AclOperation.READ))
    produce_errors(secured, "admin", "deny-orders")
    assert first_consumer_error(secured, "carol", "deny-orders", "deny-readers") == 0


def test_host_must_match(secured: Secured) -> None:
    secured.create_topic("host-orders")
    secured.grant(acl(ResourceType.TOPIC, "host-orders", "bob", AclOperation.WRITE, host="10.9.9.9"))
    assert produce_errors(secured, "bob", "host-orders") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    secured.grant(acl(ResourceType.TOPIC, "host-orders", "bob", AclOperation.WRITE, host="127.0.0.1"))
    assert produce_errors(secured, "bob", "host-orders") == [0]


def test_fetch_needs_read_on_the_topic_and_the_group(secured: Secured) -> None:
    secured.create_topic("f-orders")
    produce_errors(secured, "admin", "f-orders")
    secured.grant(acl(ResourceType.TOPIC, "f-orders", "alice", AclOperation.READ),
                  acl(ResourceType.GROUP, "f-", "alice", AclOperation.READ, pattern=PREFIXED),
                  acl(ResourceType.GROUP, "f-bob", "bob", AclOperation.READ),
                  acl(ResourceType.TOPIC, "f-orders", "carol", AclOperation.READ))
    assert first_consumer_error(secured, "alice", "f-orders", "f-alice") == 0
    assert first_consumer_error(secured, "bob", "f-orders", "f-bob") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert first_consumer_error(secured, "carol", "f-orders", "f-carol") == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_kip848_consumers_need_read_on_the_group_and_describe_on_their_topics(secured: Secured) -> None:
    """``group.protocol=consumer`` (issue #21): ConsumerGroupHeartbeat needs READ on the group and
    DESCRIBE on every subscribed topic; fetching needs READ on the topic, as for classic groups."""
    secured.create_topic("k-orders")
    produce_errors(secured, "admin", "k-orders")
    secured.grant(acl(ResourceType.TOPIC, "k-orders", "alice", AclOperation.READ),
                  acl(ResourceType.GROUP, "k-", "alice", AclOperation.READ, pattern=PREFIXED),
                  acl(ResourceType.GROUP, "k-bob", "bob", AclOperation.READ),
                  acl(ResourceType.TOPIC, "k-orders", "carol", AclOperation.READ))
    new_protocol = {"group.protocol": "consumer"}
    assert first_consumer_error(secured, "alice", "k-orders", "k-alice", **new_protocol) == 0
    assert first_consumer_error(secured, "bob", "k-orders", "k-bob", **new_protocol) \
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert first_consumer_error(secured, "carol", "k-orders", "k-carol", **new_protocol) \
        == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_kip848_regex_subscription_takes_only_describable_topics(secured: Secured) -> None:
    """A regex subscription (``group.protocol=consumer``) is resolved by the broker: only the
    matching topics the member may DESCRIBE are assigned to it (Kafka: KAFKA-18813), so it never
    learns of the others through its assignment."""
    for name in ("rx-visible", "rx-hidden"):
        secured.create_topic(name)
        produce_errors(secured, "admin", name)
    secured.grant(acl(ResourceType.TOPIC, "rx-visible", "dave", AclOperation.READ),
                  acl(ResourceType.GROUP, "rx-dave", "dave", AclOperation.READ))
    consumer = Consumer(secured.conf("dave", **{"group.id": "rx-dave", "auto.offset.reset": "earliest",
                                                "group.protocol": "consumer"}))
    consumer.subscribe(["^rx-.*"])
    try:
        read: set[str] = set()
        deadline = time.monotonic() + TIMEOUT
        while "rx-visible" not in read:
            assert time.monotonic() < deadline, f"dave read nothing of rx-visible (read {read})"
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                read.add(msg.topic())
        for _ in range(3):  # a few more polls: nothing of the hidden topic comes
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                read.add(msg.topic())
        assert read == {"rx-visible"}
        # What the coordinator assigned (the client alone could not tell: it drops a topic id its
        # Metadata does not name), as the super user sees it.
        admin = secured.admin("admin")
        group = admin.describe_consumer_groups(["rx-dave"])["rx-dave"].result(TIMEOUT)
        assigned = {tp.topic for m in group.members for tp in m.assignment.topic_partitions}
        assert assigned == {"rx-visible"}, assigned
    finally:
        consumer.close()


def test_metadata_lists_only_describable_topics_and_hides_existence(secured: Secured) -> None:
    for name in ("m-visible", "m-hidden"):
        secured.create_topic(name)
    secured.grant(acl(ResourceType.TOPIC, "m-visible", "dave", AclOperation.DESCRIBE))
    listed = secured.admin("dave").list_topics(timeout=TIMEOUT).topics
    assert "m-visible" in listed and "m-hidden" not in listed
    for name in ("m-hidden", "m-does-not-exist"):
        named = secured.admin("dave").list_topics(name, timeout=TIMEOUT).topics[name]
        assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_super_users_need_no_acls(secured: Secured) -> None:
    secured.create_topic("su-orders")
    assert produce_errors(secured, "admin", "su-orders") == [0]
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    admin = secured.admin("admin")
    assert admin.describe_configs([resource])[resource].result(TIMEOUT)


# --- topics and configs ------------------------------------------------------------------------


def test_topic_admin_needs_create_delete_and_alter(secured: Secured) -> None:
    admin = secured.admin("bob")
    secured.grant(acl(ResourceType.TOPIC, "bob-", "bob", AclOperation.CREATE, pattern=PREFIXED))
    admin.create_topics([NewTopic("bob-made", 1, 1)])["bob-made"].result(TIMEOUT)
    with pytest.raises(KafkaException) as created:
        admin.create_topics([NewTopic("t-not-bobs", 1, 1)])["t-not-bobs"].result(TIMEOUT)
    assert code_of(created.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as grown:
        admin.create_partitions([NewPartitions("bob-made", 2)])["bob-made"].result(TIMEOUT)
    assert code_of(grown.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as deleted:
        admin.delete_topics(["bob-made"])["bob-made"].result(TIMEOUT)
    assert code_of(deleted.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    secured.grant(acl(ResourceType.TOPIC, "bob-made", "bob", AclOperation.DELETE),
                  acl(ResourceType.TOPIC, "bob-made", "bob", AclOperation.ALTER))
    admin.create_partitions([NewPartitions("bob-made", 2)])["bob-made"].result(TIMEOUT)
    admin.delete_topics(["bob-made"])["bob-made"].result(TIMEOUT)


def test_configs_need_describe_configs_and_alter_configs(secured: Secured) -> None:
    secured.create_topic("c-orders")
    secured.grant(acl(ResourceType.TOPIC, "c-orders", "carol", AclOperation.DESCRIBE_CONFIGS))
    admin = secured.admin("carol")
    topic = ConfigResource(ConfigResource.Type.TOPIC, "c-orders")
    assert "retention.ms" in admin.describe_configs([topic])[topic].result(TIMEOUT)
    change = ConfigResource(ConfigResource.Type.TOPIC, "c-orders", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    futures = admin.incremental_alter_configs([change])
    with pytest.raises(KafkaException) as altered:
        futures[change].result(TIMEOUT)
    assert code_of(altered.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    other = ConfigResource(ConfigResource.Type.TOPIC, "c-other")
    with pytest.raises(KafkaException) as hidden:
        admin.describe_configs([other])[other].result(TIMEOUT)
    assert code_of(hidden.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    with pytest.raises(KafkaException) as cluster:
        admin.describe_configs([broker])[broker].result(TIMEOUT)
    assert code_of(cluster.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_group_configs_need_describe_configs_and_alter_configs_on_the_group(
        secured: Secured, java_tools: JavaTools, tmp_path: Path) -> None:
    # kafka-configs.sh --entity-type groups (config resource GROUP): carol may describe the
    # configs of gc-carol but not alter them, and may do neither on gc-other.
    secured.grant(acl(ResourceType.GROUP, "gc-carol", "carol", AclOperation.DESCRIBE_CONFIGS))
    common = ("--command-config", str(secured.security("carol").write_java_properties(tmp_path / "carol.properties")))

    def configs(group: str, *args: str) -> ToolResult:
        return java_tools.configs(secured.bootstrap, *common, "--entity-type", "groups", "--entity-name", group,
                                  *args, check=False)

    described = configs("gc-carol", "--describe")
    assert described.returncode == 0, described.describe()
    altered = configs("gc-carol", "--alter", "--add-config", "consumer.session.timeout.ms=50000")
    assert altered.returncode != 0 and "GroupAuthorizationException" in altered.stdout + altered.stderr, \
        altered.describe()
    hidden = configs("gc-other", "--describe")
    assert hidden.returncode != 0 and "GroupAuthorizationException" in hidden.stdout + hidden.stderr, \
        hidden.describe()
    # Nothing was stored by the refused change: the super user sees no override.
    admin_config = secured.security("admin").write_java_properties(tmp_path / "admin.properties")
    as_admin = java_tools.configs(secured.bootstrap, "--command-config", str(admin_config), "--entity-type",
                                  "groups", "--entity-name", "gc-carol", "--describe")
    assert "consumer.session.timeout.ms=50000" not in as_admin.stdout, as_admin.describe()


# --- groups and offsets ------------------------------------------------------------------------


def test_group_admin_and_offsets(secured: Secured) -> None:
    secured.create_topic("g-orders")
    produce_errors(secured, "admin", "g-orders")
    secured.grant(acl(ResourceType.TOPIC, "g-orders", "dave", AclOperation.READ),
                  acl(ResourceType.GROUP, "g-dave", "dave", AclOperation.READ))
    consumer = Consumer(secured.conf("dave", **{"group.id": "g-dave", "enable.auto.commit": False}))
    try:
        consumer.commit(offsets=[TopicPartition("g-orders", 0, 1)], asynchronous=False)
        assert consumer.committed([TopicPartition("g-orders", 0)], timeout=TIMEOUT)[0].offset == 1
    finally:
        consumer.close()
    admin = secured.admin("dave")
    described = admin.describe_consumer_groups(["g-other"])["g-other"]
    with pytest.raises(KafkaException) as hidden:
        described.result(TIMEOUT)
    assert code_of(hidden.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as deleted:
        admin.delete_consumer_groups(["g-dave"])["g-dave"].result(TIMEOUT)
    assert code_of(deleted.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    listed = admin.list_consumer_groups().result(TIMEOUT).valid
    assert "g-dave" in {g.group_id for g in listed}  # READ implies DESCRIBE
    super_admin = secured.admin("admin")
    assert super_admin.list_consumer_groups().result(TIMEOUT).valid


# --- transactional ids and cluster operations -------------------------------------------------


def test_transactional_ids_need_write(secured: Secured) -> None:
    secured.create_topic("tx-orders")
    secured.grant(acl(ResourceType.TOPIC, "tx-orders", "alice", AclOperation.WRITE),
                  acl(ResourceType.TRANSACTIONAL_ID, "tx-alice", "alice", AclOperation.WRITE))
    producer = Producer(secured.conf("alice", **{"transactional.id": "tx-alice"}))
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce("tx-orders", b"in a transaction")
    producer.commit_transaction(TIMEOUT)
    denied = Producer(secured.conf("alice", **{"transactional.id": "tx-someone-else"}))
    with pytest.raises(KafkaException) as refused:
        denied.init_transactions(TIMEOUT)
    assert code_of(refused.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_cluster_operations_need_cluster_permissions(secured: Secured) -> None:
    admin = secured.admin("bob")
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    with pytest.raises(KafkaException) as denied:
        admin.describe_configs([broker])[broker].result(TIMEOUT)
    assert code_of(denied.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    secured.grant(acl(ResourceType.BROKER, "kafka-cluster", "bob", AclOperation.DESCRIBE_CONFIGS))
    assert admin.describe_configs([broker])[broker].result(TIMEOUT)


# --- riverlog acls ----------------------------------------------------------------------------


def riverlog(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "broker_image")}
    env.pop("RIVERLOG_BOOTSTRAP", None)
    return subprocess.run([sys.executable, "-m", "riverlog", *args], capture_output=True, text=True, timeout=60,
                          env=env, stdin=subprocess.DEVNULL)


def test_riverlog_acls_create_list_delete(secured: Secured) -> None:
    # Over the PLAINTEXT listener, whose User:ANONYMOUS is a super user here.
    server = ("--bootstrap-server", secured.broker.bootstrap)
    secured.create_topic("cli-orders")
    made = riverlog("acls", "create", *server, "--topic", "cli-", "--pattern-type", "prefixed",
                    "--principal", "User:carol", "--operation", "write", "--operation", "describe")
    assert made.returncode == 0, made.stderr
    listed = riverlog("acls", "list", *server, "--principal", "User:carol", "--topic", "cli-orders",
                      "--pattern-type", "match", "--output", "json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {(r["operation"], r["pattern"], r["name"]) for r in rows} == {
        ("WRITE", "PREFIXED", "cli-"), ("DESCRIBE", "PREFIXED", "cli-")}
    deadline = time.monotonic() + TIMEOUT  # the broker applies the bindings a moment after the answer
    while produce_errors(secured, "carol", "cli-orders") != [0]:
        assert time.monotonic() < deadline, "carol never got to write"
        time.sleep(0.2)
    removed = riverlog("acls", "delete", *server, "--principal", "User:carol", "--topic", "cli-",
                       "--pattern-type", "prefixed", "--operation", "write")
    assert removed.returncode == 0 and "WRITE" in removed.stdout, removed.stderr
    assert riverlog("acls", "delete", *server).returncode == 2  # nothing narrows it: refused
    denied = riverlog("acls", "list", "--bootstrap-server", secured.bootstrap)  # SASL needed there
    assert denied.returncode != 0 and "Traceback" not in denied.stderr


def test_riverlog_internal_calls_need_cluster_action_and_denials_are_counted(secured: Secured,
                                                                            broker_target: str) -> None:
    if broker_target != "riverlog":
        pytest.fail("Riverlog's controller call and metrics are its own; run this test against Riverlog")

    async def controller_call_as_alice() -> dict[str, object]:
        conn = await BrokerConnection.connect("127.0.0.1", secured.port)
        try:
            await conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"}, 1)
            login = await conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0alice-secret"}, 2)
            assert login["error_code"] == ErrorCode.NONE
            grant = acl(ResourceType.TOPIC, "*", "alice", AclOperation.ALL)
            arguments = codec.to_wire({"args": ([as_riverlog_binding(grant)],), "kwargs": {}})
            return await conn.request(ApiKey.RIVERLOG_CONTROLLER_CALL, {
                "cluster_id": "", "caller_id": 1, "method": "create_acls", "arguments": arguments}, 0)
        finally:
            await conn.close()

    answer = asyncio.run(controller_call_as_alice())
    assert answer["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    url = secured.broker.metrics_url
    assert url is not None
    scraped = urllib.request.urlopen(url, timeout=10).read().decode()
    denied = [line for line in scraped.splitlines()
              if line.startswith("riverlog_authorization_denials_total{") and 'resource_type="CLUSTER"' in line]
    assert denied and float(denied[0].rsplit(" ", 1)[1]) >= 1


def as_riverlog_binding(binding: AclBinding) -> RiverlogAclBinding:
    """confluent-kafka's binding as Riverlog's own (what a controller call carries)."""
    return RiverlogAclBinding.of(binding.restype.value, binding.name, binding.resource_pattern_type.value,
                                 binding.principal, binding.host, binding.operation.value,
                                 binding.permission_type.value)


def test_acls_survive_a_restart(secured: Secured) -> None:
    """Last in the module: the bindings are in the metadata log, so a restarted broker has them."""
    kept = acl(ResourceType.TOPIC, "restart-orders", "bob", AclOperation.READ)
    secured.grant(kept)
    secured.broker.restart()
    admin = secured.admin()
    assert kept in admin.describe_acls(ANY_ACL).result(TIMEOUT)
