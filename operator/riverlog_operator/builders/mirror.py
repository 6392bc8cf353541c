"""MirrorMaker 2 for a Mirror (issue #19), as Strimzi runs KafkaMirrorMaker2: Kafka's three mirror
connectors on a Connect cluster of the Mirror's own, whose workers belong to the target cluster.

Pure: ``mirror_worker_inputs`` gives the workers' ``ConnectInputs`` (built by
``builders/connect.py``, with the source cluster's key material mounted too), and
``mirror_connector_configs`` the three connectors' configs, which the reconcile handler PUTs to
the workers' REST API (``/connectors/<name>/config``). Property names are MirrorMaker 2's
(``MirrorSourceConfig``, ``MirrorCheckpointConfig``, ``MirrorHeartbeatConfig``,
``DefaultTopicFilter``, ``DefaultGroupFilter`` in Kafka 4.3).
"""

from __future__ import annotations

from ..connect_model import POLICY_DEFAULT, POLICY_IDENTITY, ConnectSpec, MirrorSpec
from .connect import ConnectInputs, Endpoint, WorkerRef, client_properties

SOURCE_CONNECTOR_CLASS = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
CHECKPOINT_CONNECTOR_CLASS = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
HEARTBEAT_CONNECTOR_CLASS = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"
# The Connect cluster is the Mirror's alone, so the connectors' names need not say which flow.
SOURCE_CONNECTOR = "mirror-source"
CHECKPOINT_CONNECTOR = "mirror-checkpoint"
HEARTBEAT_CONNECTOR = "mirror-heartbeat"
CONNECTORS = (SOURCE_CONNECTOR, CHECKPOINT_CONNECTOR, HEARTBEAT_CONNECTOR)

REPLICATION_POLICIES = {
    POLICY_DEFAULT: "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",  # <source alias>.<topic>
    POLICY_IDENTITY: "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",  # the same names
}
# Records are copied as they are: bytes in, bytes out, headers too (as MirrorMakerConfig sets
# for its dedicated workers).
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
# MirrorMaker 2's own exclusions (topics.exclude and groups.exclude defaults in Kafka 4.3): a
# Mirror's topicsExclude and groupsExclude are added to these, never replace them.
MM2_TOPICS_EXCLUDE = r"mm2.*\.internal, .*\.replica, __.*"
MM2_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"
# Mount names of the two clusters' key material in the workers' pods.
SOURCE_ENDPOINT = "source"
TARGET_ENDPOINT = "target"


def mirror_connect_spec(spec: MirrorSpec) -> ConnectSpec:
    """The Connect spec of a Mirror's workers: the target cluster's endpoint, the Mirror's
    replicas, image, resources, metrics and ``workerConfig``, and exactly-once source support when
    the Mirror is exactly once (``exactly.once.support=required`` needs it on every worker)."""
    return ConnectSpec(endpoint=spec.target.endpoint, replicas=spec.replicas, image=spec.image,
                       image_pull_policy=spec.image_pull_policy, resources=spec.resources,
                       exactly_once_source=spec.exactly_once, metrics_enabled=spec.metrics_enabled,
                       config=dict(spec.worker_config))


def mirror_worker_inputs(ref: WorkerRef, spec: MirrorSpec, source: Endpoint, target: Endpoint, default_image: str,
                         credentials_version: str | None = None) -> ConnectInputs:
    """The Connect builder's inputs for a Mirror's workers (``ref.kind == "Mirror"``): they run
    against ``target`` and mount ``source``'s key material too, which the connectors name."""
    return ConnectInputs(ref, mirror_connect_spec(spec), default_image, target, endpoint_name=TARGET_ENDPOINT,
                         extra_endpoints=((SOURCE_ENDPOINT, source),), credentials_version=credentials_version)


def _exclude(builtin: str, extra: str | None) -> str:
    return f"{builtin}, {extra}" if extra else builtin


def _prefixed(prefix: str, props: dict[str, str]) -> dict[str, str]:
    return {prefix + key: value for key, value in props.items()}


def mirror_connector_configs(spec: MirrorSpec, source: Endpoint, target: Endpoint) -> dict[str, dict[str, str]]:
    """Connector name -> the config to PUT to ``/connectors/<name>/config``.

    Each config is: defaults (replication factors of the topics MirrorMaker 2 creates, from the
    cluster each lives on), then ``spec.config``, then what the Mirror's fields and the
    endpoints decide. The clusters' security settings go in with the ``source.cluster.`` and
    ``target.cluster.`` prefixes, naming the files the workers mount (``builders/connect.py``).
    """
    common = {
        "source.cluster.alias": spec.source.alias,
        "target.cluster.alias": spec.target.alias,
        "source.cluster.bootstrap.servers": source.bootstrap_servers,
        "target.cluster.bootstrap.servers": target.bootstrap_servers,
        **_prefixed("source.cluster.", client_properties(source, SOURCE_ENDPOINT)),
        **_prefixed("target.cluster.", client_properties(target, TARGET_ENDPOINT)),
        "replication.policy.class": REPLICATION_POLICIES[spec.replication_policy],
        "key.converter": BYTE_ARRAY_CONVERTER,
        "value.converter": BYTE_ARRAY_CONVERTER,
        "header.converter": BYTE_ARRAY_CONVERTER,
    }
    topic_filter = {"topics": spec.topics, "topics.exclude": _exclude(MM2_TOPICS_EXCLUDE, spec.topics_exclude)}
    # The offset-syncs topic lives on the source unless the config moves it to the target.
    syncs_on = target if spec.config.get("offset-syncs.topic.location") == "target" else source

    source_owned = {
        **common, **topic_filter,
        "refresh.topics.interval.seconds": str(spec.refresh_topics_interval_seconds),
    }
    if spec.exactly_once:
        # MirrorSourceConnector refuses exactly.once.support=required unless its source consumer
        # reads committed records only.
        source_owned.update({"exactly.once.support": "required", "source.consumer.isolation.level": "read_committed"})
    checkpoint_owned = {
        **common, **topic_filter,
        "groups": spec.groups,
        "groups.exclude": _exclude(MM2_GROUPS_EXCLUDE, spec.groups_exclude),
        "emit.checkpoints.interval.seconds": str(spec.emit_checkpoints_interval_seconds),
        "sync.group.offsets.enabled": "true" if spec.sync_group_offsets else "false",
        "sync.group.offsets.interval.seconds": str(spec.sync_group_offsets_interval_seconds),
        "refresh.groups.interval.seconds": str(spec.refresh_groups_interval_seconds),
    }
    plans = {
        SOURCE_CONNECTOR: (SOURCE_CONNECTOR_CLASS, spec.tasks_max,
                           {"replication.factor": str(target.replication_factor),
                            "offset-syncs.topic.replication.factor": str(syncs_on.replication_factor)},
                           source_owned),
        CHECKPOINT_CONNECTOR: (CHECKPOINT_CONNECTOR_CLASS, spec.tasks_max,
                               {"checkpoints.topic.replication.factor": str(target.replication_factor)},
                               checkpoint_owned),
        # One heartbeat task whatever tasks.max says; it writes to the target's heartbeats topic.
        HEARTBEAT_CONNECTOR: (HEARTBEAT_CONNECTOR_CLASS, 1,
                              {"heartbeats.topic.replication.factor": str(target.replication_factor)}, common),
    }
    return {name: {**defaults, **spec.config, **owned, "connector.class": cls, "tasks.max": str(tasks), "name": name}
            for name, (cls, tasks, defaults, owned) in plans.items()}
