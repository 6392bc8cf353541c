"""Mirror resources (issue #19), the pure side: MirrorMaker 2's three connectors and the Connect
workers that run them. The property names are Kafka 4.3's; the same configs were checked with
MirrorMaker 2's own ``Connector.validate`` when this was written (no errors, exactly-once
SUPPORTED)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from riverlog_operator.builders.connect import (
    Endpoint,
    OperatorPeer,
    WorkerRef,
    build_connect,
    resolve_endpoint,
    worker_properties,
)
from riverlog_operator.builders.mirror import (
    CHECKPOINT_CONNECTOR,
    CONNECTORS,
    HEARTBEAT_CONNECTOR,
    SOURCE_CONNECTOR,
    mirror_connect_spec,
    mirror_connector_configs,
    mirror_worker_inputs,
)
from riverlog_operator.connect_model import MirrorSpec
from riverlog_operator.model import ClusterSpec

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SECURED = ClusterSpec.from_dict(yaml.safe_load((ROOT / "examples" / "secured-cluster.yaml").read_text())["spec"])
REF = WorkerRef("Mirror", "migrate", "kafka", "0c6b5e1a-0000-4000-8000-00000000mm02")
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
# An Apache Kafka cluster outside, SCRAM over TLS with public CAs; Riverlog's secured Cluster
# as the target, through a TLS User.
OLD = {"alias": "old", "bootstrapServers": "kafka-0.old.example:9096", "tls": {},
       "authentication": {"type": "scram-sha-512", "username": "mirror", "passwordSecret": {"name": "old-mirror"}}}
NEW = {"alias": "new", "clusterRef": {"name": "secured"}, "authentication": {"type": "tls", "userRef": {"name": "mm2"}}}


def mirror(**fields: Any) -> tuple[MirrorSpec, Endpoint, Endpoint]:
    spec = MirrorSpec.from_dict({"source": OLD, "target": NEW, **fields})
    return (spec, resolve_endpoint(spec.source.endpoint, "kafka", None),
            resolve_endpoint(spec.target.endpoint, "kafka", SECURED))


def test_spec_defaults_are_the_crds() -> None:
    spec, _, _ = mirror()
    assert (spec.replicas, spec.tasks_max, spec.topics, spec.topics_exclude, spec.groups, spec.groups_exclude) == \
        (1, 1, ".*", None, ".*", None)
    assert (spec.sync_group_offsets, spec.emit_checkpoints_interval_seconds, spec.sync_group_offsets_interval_seconds,
            spec.refresh_topics_interval_seconds, spec.refresh_groups_interval_seconds) == (True, 60, 60, 600, 600)
    assert (spec.replication_policy, spec.exactly_once, spec.config, spec.worker_config) == ("default", False, {}, {})
    assert (spec.source.alias, spec.target.alias, spec.target.endpoint.cluster) == ("old", "new", "secured")


def test_three_connectors_with_both_clusters_and_the_default_policy() -> None:
    spec, source, target = mirror()
    configs = mirror_connector_configs(spec, source, target)
    assert list(configs) == list(CONNECTORS) == ["mirror-source", "mirror-checkpoint", "mirror-heartbeat"]
    common = {
        "source.cluster.alias": "old", "target.cluster.alias": "new",
        "source.cluster.bootstrap.servers": "kafka-0.old.example:9096",
        "target.cluster.bootstrap.servers": "secured-bootstrap.kafka.svc:9095",
        # The source: SCRAM over TLS, the JVM's trust store, the password from the mounted Secret.
        "source.cluster.security.protocol": "SASL_SSL", "source.cluster.sasl.mechanism": "SCRAM-SHA-512",
        "source.cluster.sasl.jaas.config": (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" '
            'password="${directory:/etc/riverlog-connect-credentials/source/user:password}";'),
        # The target: mutual TLS with the User's certificate, trusting the Cluster's CA.
        "target.cluster.security.protocol": "SSL",
        "target.cluster.ssl.truststore.type": "PEM",
        "target.cluster.ssl.truststore.location": "/etc/riverlog-connect-credentials/target/ca/ca.crt",
        "target.cluster.ssl.keystore.type": "PEM",
        "target.cluster.ssl.keystore.location": "/etc/riverlog-connect-credentials/target/user/keystore.pem",
        "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "key.converter": BYTES, "value.converter": BYTES, "header.converter": BYTES,
    }
    topics = {"topics": ".*", "topics.exclude": r"mm2.*\.internal, .*\.replica, __.*"}
    assert configs[SOURCE_CONNECTOR] == {
        **common, **topics, "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "name": "mirror-source", "tasks.max": "1", "refresh.topics.interval.seconds": "600",
        # Remote topics on the target (3 brokers), offset syncs on the source (its broker default).
        "replication.factor": "3", "offset-syncs.topic.replication.factor": "-1"}
    assert configs[CHECKPOINT_CONNECTOR] == {
        **common, **topics, "connector.class": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
        "name": "mirror-checkpoint", "tasks.max": "1", "groups": ".*",
        "groups.exclude": "console-consumer-.*, connect-.*, __.*", "emit.checkpoints.interval.seconds": "60",
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "60",
        "refresh.groups.interval.seconds": "600", "checkpoints.topic.replication.factor": "3"}
    assert configs[HEARTBEAT_CONNECTOR] == {
        **common, "connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
        "name": "mirror-heartbeat", "tasks.max": "1", "heartbeats.topic.replication.factor": "3"}
    assert not any("exactly.once" in key or "isolation" in key for c in configs.values() for key in c)


def test_identity_policy_filters_and_intervals() -> None:
    spec, source, target = mirror(replicationPolicy="identity", topics="orders.*,payments", topicsExclude="orders-tmp",
                                  groups="billing-.*", groupsExclude="billing-test", syncGroupOffsets=False,
                                  emitCheckpointsIntervalSeconds=5, syncGroupOffsetsIntervalSeconds=10,
                                  refreshTopicsIntervalSeconds=30, refreshGroupsIntervalSeconds=45, tasksMax=4)
    configs = mirror_connector_configs(spec, source, target)
    for config in configs.values():
        assert config["replication.policy.class"] == "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    source_config, checkpoint = configs[SOURCE_CONNECTOR], configs[CHECKPOINT_CONNECTOR]
    # Exclusions are added to MirrorMaker 2's own, never replace them.
    assert source_config["topics.exclude"] == checkpoint["topics.exclude"] == \
        r"mm2.*\.internal, .*\.replica, __.*, orders-tmp"
    assert (source_config["topics"], source_config["tasks.max"], source_config["refresh.topics.interval.seconds"]) == \
        ("orders.*,payments", "4", "30")
    assert checkpoint["groups.exclude"] == "console-consumer-.*, connect-.*, __.*, billing-test"
    assert (checkpoint["groups"], checkpoint["sync.group.offsets.enabled"], checkpoint["tasks.max"]) == \
        ("billing-.*", "false", "4")
    assert (checkpoint["emit.checkpoints.interval.seconds"], checkpoint["sync.group.offsets.interval.seconds"],
            checkpoint["refresh.groups.interval.seconds"]) == ("5", "10", "45")
    assert configs[HEARTBEAT_CONNECTOR]["tasks.max"] == "1"


def test_exactly_once_needs_committed_reads_and_eos_workers() -> None:
    spec, source, target = mirror(exactlyOnce=True)
    configs = mirror_connector_configs(spec, source, target)
    assert configs[SOURCE_CONNECTOR]["exactly.once.support"] == "required"
    assert configs[SOURCE_CONNECTOR]["source.consumer.isolation.level"] == "read_committed"
    assert "exactly.once.support" not in configs[CHECKPOINT_CONNECTOR]
    workers = mirror_worker_inputs(REF, spec, source, target, "riverlog-connect:test")
    assert worker_properties(workers)["exactly.once.source.support"] == "enabled"


def test_extra_config_goes_to_every_connector_and_may_move_defaults_not_fields() -> None:
    spec, source, target = mirror(config={"sync.topic.acls.enabled": False, "replication.factor": 2,
                                          "offset-syncs.topic.location": "target", "topics": "ignored"})
    configs = mirror_connector_configs(spec, source, target)
    for config in configs.values():
        assert config["sync.topic.acls.enabled"] == "false"
    assert configs[SOURCE_CONNECTOR]["replication.factor"] == "2"
    # Offset syncs on the target: their replication factor follows the target.
    assert configs[SOURCE_CONNECTOR]["offset-syncs.topic.replication.factor"] == "3"
    assert configs[SOURCE_CONNECTOR]["topics"] == ".*"  # refused by the CRD; the field wins anyway


def test_worker_config_reaches_the_workers_not_the_connectors() -> None:
    # offset.flush.interval.ms also paces the offset syncs MirrorMaker 2 holds back (the last ones
    # of a burst), so a quick cut-over lowers it on the Mirror's workers.
    spec, source, target = mirror(workerConfig={"offset.flush.interval.ms": 5000, "listeners": "http://:1"})
    props = worker_properties(mirror_worker_inputs(REF, spec, source, target, "riverlog-connect:test"))
    assert props["offset.flush.interval.ms"] == "5000"
    assert props["listeners"] == "http://:8083"  # refused by the CRD; the operator's value wins anyway
    assert all("offset.flush.interval.ms" not in c for c in mirror_connector_configs(spec, source, target).values())


def test_the_workers_belong_to_the_target_and_mount_both_clusters_credentials() -> None:
    spec, source, target = mirror(replicas=2, image="my/connect:1", resources={"limits": {"memory": "2Gi"}})
    assert mirror_connect_spec(spec).endpoint == spec.target.endpoint
    # Metrics on unless the Mirror turns them off (its workers' metrics carry MirrorMaker 2's lag).
    assert mirror_connect_spec(spec).metrics_enabled
    assert not mirror_connect_spec(mirror(metrics={"enabled": False})[0]).metrics_enabled
    inputs = mirror_worker_inputs(REF, spec, source, target, "riverlog-connect:test", credentials_version="abc")
    props = worker_properties(inputs)
    assert props["bootstrap.servers"] == "secured-bootstrap.kafka.svc:9095"
    assert (props["group.id"], props["config.storage.topic"]) == ("migrate-mirror", "migrate-mirror-configs")
    assert props["ssl.keystore.location"] == "/etc/riverlog-connect-credentials/target/user/keystore.pem"
    kinds = {m["kind"]: m for m in build_connect(inputs, OperatorPeer("ops", (("app", "op"),)))}
    assert kinds["Deployment"]["metadata"]["name"] == "migrate-mirror"
    assert kinds["Service"]["metadata"]["name"] == "migrate-mirror-api"
    # The Mirror's REST API guarded as a Connect's: its own workers' pods and the operator's.
    policy = kinds["NetworkPolicy"]
    assert policy["metadata"]["name"] == "migrate-mirror-api"
    assert policy["spec"]["podSelector"] == kinds["Deployment"]["spec"]["selector"]
    assert policy["spec"]["ingress"][0]["from"][0] == {"podSelector": kinds["Deployment"]["spec"]["selector"]}
    assert kinds["Deployment"]["metadata"]["ownerReferences"][0]["kind"] == "Mirror"
    assert kinds["Deployment"]["metadata"]["labels"]["riverlog.dev/mirror"] == "migrate"
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    assert kinds["Deployment"]["spec"]["replicas"] == 2 and pod["containers"][0]["image"] == "my/connect:1"
    volumes = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    assert volumes == {
        "target-user": {"secretName": "mm2", "items": [{"key": "user.pem", "path": "keystore.pem"}],
                        "defaultMode": 0o440},
        "target-ca": {"secretName": "secured-cluster-ca-cert", "items": [{"key": "ca.crt", "path": "ca.crt"}],
                      "defaultMode": 0o440},
        "source-user": {"secretName": "old-mirror", "items": [{"key": "password", "path": "password"}],
                        "defaultMode": 0o440},
    }
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    # Where the connectors' configs say the source's password is.
    assert mounts["source-user"] == "/etc/riverlog-connect-credentials/source/user"
    assert "${directory:/etc/riverlog-connect-credentials/source/user:password}" in \
        mirror_connector_configs(spec, source, target)[SOURCE_CONNECTOR]["source.cluster.sasl.jaas.config"]


def test_riverlog_to_riverlog_in_the_namespace() -> None:
    spec = MirrorSpec.from_dict({"source": {"alias": "east", "clusterRef": {"name": "secured"}},
                                 "target": {"alias": "west", "clusterRef": {"name": "dr"}}})
    source = resolve_endpoint(spec.source.endpoint, "kafka", SECURED)
    target = resolve_endpoint(spec.target.endpoint, "kafka", ClusterSpec.from_dict({"replicas": 1}))
    config = mirror_connector_configs(spec, source, target)[SOURCE_CONNECTOR]
    assert config["source.cluster.bootstrap.servers"] == "secured-bootstrap.kafka.svc:9092"
    assert config["target.cluster.bootstrap.servers"] == "dr-bootstrap.kafka.svc:9092"
    assert config["source.cluster.security.protocol"] == config["target.cluster.security.protocol"] == "PLAINTEXT"
    # A one-broker target gets one replica of what MirrorMaker 2 creates there.
    assert (config["replication.factor"], config["offset-syncs.topic.replication.factor"]) == ("1", "3")


def test_the_example_mirror_between_the_example_clusters() -> None:
    docs = list(yaml.safe_load_all((ROOT / "examples" / "mirror.yaml").read_text()))
    (spec,) = [MirrorSpec.from_dict(d["spec"]) for d in docs if d["kind"] == "Mirror"]
    demo = ClusterSpec.from_dict(yaml.safe_load((ROOT / "examples" / "cluster.yaml").read_text())["spec"])
    source = resolve_endpoint(spec.source.endpoint, "kafka", demo)
    target = resolve_endpoint(spec.target.endpoint, "kafka", SECURED)
    assert (source.bootstrap_servers, source.security_protocol) == ("demo-bootstrap.kafka.svc:9092", "PLAINTEXT")
    assert (target.bootstrap_servers, target.security_protocol) == ("secured-bootstrap.kafka.svc:9095", "SSL")
    configs = mirror_connector_configs(spec, source, target)
    assert configs[SOURCE_CONNECTOR]["sync.topic.acls.enabled"] == "false"
    (user,) = [d for d in docs if d["kind"] == "User"]
    assert user["metadata"]["name"] == spec.target.endpoint.authentication.user
