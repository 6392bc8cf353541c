"""Broker configuration with Kafka's property names.

Sources, later ones winning: built-in defaults, a ``server.properties`` file, environment
variables (``RIVERLOG_LOG_DIRS=/data`` sets ``log.dirs``; ``__`` stands for ``_`` and ``___``
for ``-``, the convention of Kafka's container images), then ``--set key=value`` flags.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .config_refusals import (
    CALLBACK_HANDLER_KEY,
    OAUTHBEARER_SERVER_DEFAULTS,
    SECURITY_PROTOCOLS,
    WHAT_TO_DO,
    parse_protocol_map,
    refusals,
)

ENV_PREFIX = "RIVERLOG_"
SECRET_WORDS = ("password", "secret", "jaas", "token", "keystore.key", "credentials")

# Property -> default. Only properties Riverlog reads are listed; unknown keys are kept (so a
# Kafka server.properties loads) and reported once at start-up.
# The one authorizer.class.name served (security/authorizer.py decides as it does).
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": "",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    # Kafka's older way to name the inter-broker listener (by its protocol); exclusive with the above.
    "security.inter.broker.protocol": "PLAINTEXT",
    "controller.quorum.voters": "",
    # Metadata quorum timings (Kafka's names; shorter than Kafka's 1000/2000/2000 defaults where
    # noted in RaftConfig, so a local cluster elects a new controller in about two seconds).
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "100",
    "metadata.log.dir": "",
    # Metadata log snapshots (Kafka's names and defaults): after this many bytes of records, or
    # this long after the previous snapshot if anything was applied since (0: no time trigger).
    "metadata.log.max.record.bytes.between.snapshots": str(20 * 1024 * 1024),
    "metadata.log.max.snapshot.interval.ms": "3600000",
    "cluster.id": "",
    "broker.rack": "",
    "log.dirs": "./data",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "log.retention.ms": "",
    "log.retention.minutes": "",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.segment.bytes": str(1 << 30),
    "log.roll.ms": "",
    "log.roll.hours": "168",
    "log.index.size.max.bytes": str(10 * 1024 * 1024),
    "log.index.interval.bytes": "4096",
    "log.retention.check.interval.ms": "300000",
    "log.segment.delete.delay.ms": "60000",
    "log.flush.interval.messages": "9223372036854775807",
    "log.flush.interval.ms": "",
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.message.timestamp.type": "CreateTime",
    "log.cleanup.policy": "delete",
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.dedupe.buffer.size": str(128 * 1024 * 1024),
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": "9223372036854775807",
    "compression.type": "producer",
    "message.max.bytes": "1048588",
    "socket.request.max.bytes": "104857600",
    "queued.max.requests": "500",
    "max.in.flight.requests.per.connection": "100",
    # Connection limits (Kafka's names and defaults; server/socket_server.py). Integer.MAX_VALUE
    # means no limit; queued.max.request.bytes -1 means no request memory pool.
    "connections.max.idle.ms": "600000",
    "max.connections": "2147483647",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",
    "max.connection.creation.rate": "2147483647",
    "queued.max.request.bytes": "-1",
    # Riverlog's own (Kafka has none): how long a request frame may take to arrive completely
    # once its first byte has arrived, before the connection is closed.
    "socket.request.frame.timeout.ms": "30000",
    "metrics.port": "9404",
    "metrics.host": "",
    # Riverlog's own: a schema registry instance in this process (issue #20), e.g.
    # http://127.0.0.1:8081; empty for none. host.name is the name other instances reach it by.
    "schema.registry.listeners": "",
    "schema.registry.host.name": "",
    "offsets.topic.num.partitions": "50",
    # Kafka's default; capped at the brokers registered when the topic is created, so a
    # single broker still works (Kafka would refuse until three brokers are up).
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    # KIP-848 consumer groups (group.protocol=consumer): Kafka's names and defaults.
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.consumer.max.size": "2147483647",
    "group.consumer.assignors": "uniform,range",
    # Online migration between classic and consumer groups: disabled, upgrade, downgrade,
    # bidirectional (Kafka 4's default).
    "group.consumer.migration.policy": "bidirectional",
    # KIP-932 share groups: Kafka's names and defaults.
    "group.share.session.timeout.ms": "45000",
    "group.share.min.session.timeout.ms": "45000",
    "group.share.max.session.timeout.ms": "60000",
    "group.share.heartbeat.interval.ms": "5000",
    "group.share.min.heartbeat.interval.ms": "5000",
    "group.share.max.heartbeat.interval.ms": "15000",
    "group.share.max.size": "200",
    "group.share.record.lock.duration.ms": "30000",
    "group.share.min.record.lock.duration.ms": "15000",
    "group.share.max.record.lock.duration.ms": "60000",
    "group.share.delivery.count.limit": "5",
    "group.share.min.delivery.count.limit": "2",
    "group.share.max.delivery.count.limit": "10",
    "group.share.partition.max.record.locks": "2000",
    "group.share.min.partition.max.record.locks": "100",
    "group.share.max.partition.max.record.locks": "4000",
    # The share coordinator's __share_group_state topic (Kafka's names and defaults).
    "share.coordinator.state.topic.num.partitions": "50",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.state.topic.segment.bytes": "104857600",
    "share.coordinator.write.timeout.ms": "5000",
    "offset.metadata.max.bytes": "4096",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.commit.timeout.ms": "5000",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.load.buffer.size": "5242880",
    # The transaction coordinator (transactions/), Kafka's names and defaults; replication factor
    # and min ISR of __transaction_state are capped at the brokers registered when it is created.
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.segment.bytes": "104857600",
    "transaction.state.log.load.buffer.size": "5242880",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    # KIP-890 part 1: a leader has the coordinator verify a classic producer's transaction
    # before the transaction's first batch on a partition (version 2 producers always are).
    "transaction.partition.verification.enable": "true",
    "unclean.leader.election.enable": "false",
    # Automatic preferred-leader rebalance (controller/leader_balance.py), Kafka's defaults.
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "leader.imbalance.per.broker.percentage": "10",
    # Replication (Kafka's names and defaults).
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.response.max.bytes": "10485760",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.backoff.ms": "1000",
    # Incremental fetch sessions (KIP-227) the broker keeps, for consumers and followers together.
    "max.incremental.fetch.session.cache.slots": "1000",
    # How long a session is safe from eviction (Kafka's fixed MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    # a setting here under the name KIP-227 proposed, so tests need not wait two minutes).
    "min.incremental.fetch.session.eviction.ms": "120000",
    "replica.socket.timeout.ms": "30000",
    # Faster than Kafka's 2000/9000 on purpose: a local cluster should fail over in about two
    # seconds (a broker is fenced once it misses heartbeats for the session timeout).
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "1500",
    "log.message.timestamp.before.max.ms": "9223372036854775807",
    "log.message.timestamp.after.max.ms": "3600000",
    # TLS on SSL listeners (security/tls.py), Kafka's names; each may also be set for one listener
    # as listener.name.<name>.<key>. Stores are PEM only, hence that default (Kafka's is JKS).
    "ssl.keystore.type": "PEM",
    "ssl.keystore.location": "",
    "ssl.keystore.key": "",
    "ssl.keystore.certificate.chain": "",
    "ssl.keystore.password": "",
    "ssl.key.password": "",
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "",
    "ssl.truststore.certificates": "",
    "ssl.truststore.password": "",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.cipher.suites": "",
    "ssl.principal.mapping.rules": "DEFAULT",
    # Read by the broker's client side (inter-broker and controller connections): whether the
    # peer's certificate must name the address dialled.
    "ssl.endpoint.identification.algorithm": "https",
    # Riverlog's own: how often TLS key and certificate files are checked for a rotation.
    "ssl.file.reload.interval.ms": "30000",
    # SASL on SASL_PLAINTEXT and SASL_SSL listeners (security/sasl_config.py), Kafka's names and
    # defaults (GSSAPI is not served: a SASL listener names its mechanisms).
    "sasl.enabled.mechanisms": "GSSAPI",
    "connections.max.reauth.ms": "0",
    # OAUTHBEARER token validation (security/oauthbearer_config.py); each also per listener as
    # listener.name.<l>.oauthbearer.<key>. The callback handler may only name Kafka's validator.
    **OAUTHBEARER_SERVER_DEFAULTS,
    CALLBACK_HANDLER_KEY: "",
    # The mechanism a node authenticates with on a SASL inter-broker or controller listener
    # (security/client_config.py); Kafka's default GSSAPI is not spoken, so SASL there needs one.
    "sasl.mechanism.inter.broker.protocol": "GSSAPI",
    "sasl.mechanism.controller.protocol": "GSSAPI",
    # Riverlog's own, Kafka's `kafka-storage format --add-scram` at start: SCRAM users made by the
    # first active controller if missing (SCRAM-SHA-512=[name=admin,password=...];...).
    "bootstrap.scram.credentials": "",
    # Authorization (security/authorizer.py): Kafka's KRaft StandardAuthorizer is the one class
    # served; empty means no authorizer, every request allowed (Kafka's default).
    "authorizer.class.name": "",
    "super.users": "",  # principals separated by ';' (User:admin;User:ops)
    "allow.everyone.if.no.acl.found": "false",
    # Client quotas (quotas/): the sampled windows rates are measured over, Kafka's names and
    # defaults; the quotas themselves are set with AlterClientQuotas (kafka-configs).
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
}

# Keys also read per listener, as listener.name.<name>.<key>.
_LISTENER_KEYS = ("sasl.enabled.mechanisms", "connections.max.reauth.ms")

LISTENER_SCOPED_PREFIX = "listener.name."
# The SASL mechanisms served, as they prefix per-listener-and-mechanism keys.
_SERVED_MECHANISM_PREFIXES = ("plain", "scram-sha-256", "scram-sha-512", "oauthbearer")


def _known(key: str) -> bool:
    """A key Riverlog reads: one of DEFAULTS, or one of them scoped to a listener."""
    if key in DEFAULTS:
        return True
    if key.startswith(LISTENER_SCOPED_PREFIX):
        _name, _, rest = key[len(LISTENER_SCOPED_PREFIX):].partition(".")
        if (rest.startswith("ssl.") and rest in DEFAULTS) or rest in _LISTENER_KEYS:
            return True
        mechanism, _, jaas = rest.partition(".")
        if mechanism == "oauthbearer" and (jaas in OAUTHBEARER_SERVER_DEFAULTS or jaas == CALLBACK_HANDLER_KEY):
            return True
        if jaas == "connections.max.reauth.ms" and mechanism in _SERVED_MECHANISM_PREFIXES:
            return True
        if rest in OAUTHBEARER_SERVER_DEFAULTS:
            return True
        return jaas == "sasl.jaas.config" and mechanism in _SERVED_MECHANISM_PREFIXES
    return False


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message says which and how to fix it."""


def parse_properties(text: str) -> dict[str, str]:
    """Java-style properties: ``key=value`` or ``key: value``, ``#``/``!`` comments."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for sep_index, ch in enumerate(line):
            if ch in "=:":
                key, value = line[:sep_index].strip(), line[sep_index + 1 :].strip()
                break
        else:
            key, value = line, ""
        out[key] = value
    return out


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Broker properties from ``RIVERLOG_*`` variables. Only names that map to a property the
    broker reads are taken, so tool settings that share the prefix (RIVERLOG_BOOTSTRAP ...)
    never leak into the broker's configuration."""
    out: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        key = key.replace("___", "\0").replace("__", "\1").replace("_", ".")
        key = key.replace("\0", "-").replace("\1", "_")
        if key in DEFAULTS:
            out[key] = value
    return out


def parse_set_flags(flags: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for flag in flags:
        if "=" not in flag:
            raise ConfigError(f"--set expects key=value, got {flag!r} (example: --set node.id=1)")
        key, value = flag.split("=", 1)
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class Voter:
    """One entry of ``controller.quorum.voters`` (``id@host:port``)."""

    node_id: int
    host: str
    port: int


def parse_voters(spec: str) -> list[Voter]:
    voters: list[Voter] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        node, sep, address = part.partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not node.strip().isdigit() or not port.isdigit() or not host:
            raise ConfigError(
                f"controller.quorum.voters entry {part!r} must look like id@host:port "
                "(example: controller.quorum.voters=1@node1:9093,2@node2:9093,3@node3:9093)")
        voters.append(Voter(int(node), host.strip("[]"), int(port)))
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"controller.quorum.voters names a node id twice: {spec}")
    return voters


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(spec: str) -> list[Listener]:
    """``PLAINTEXT://host:9092,CONTROLLER://:9093`` into listeners; empty host means all."""
    listeners: list[Listener] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if "://" not in part:
            raise ConfigError(f"listener {part!r} must look like NAME://host:port")
        name, rest = part.split("://", 1)
        host, sep, port = rest.rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(f"listener {part!r} has no numeric port (example: PLAINTEXT://:9092)")
        listeners.append(Listener(name.upper(), host.strip("[]"), int(port)))
    return listeners


class BrokerConfig:
    """Merged properties with typed accessors for the ones the broker uses."""

    def __init__(self, props: Mapping[str, str], sources: Mapping[str, str] | None = None) -> None:
        self.props: dict[str, str] = {**DEFAULTS, **props}
        self.explicit = frozenset(props)  # keys the operator set, reported as STATIC_BROKER_CONFIG
        # Where each explicit key came from (a file, an environment variable, --set), when known.
        self.sources: dict[str, str] = dict(sources or {})
        self.unknown = sorted(k for k in props if not _known(k))
        self._validate()

    @classmethod
    def load(
        cls,
        config_file: str | Path | None = None,
        sets: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        layers: list[tuple[str, dict[str, str]]] = []
        if config_file:
            path = Path(config_file)
            if not path.is_file():
                raise ConfigError(f"config file {path} does not exist")
            layers.append((str(path), parse_properties(path.read_text())))
        layers.append(("environment", env_overrides(os.environ if environ is None else environ)))
        layers.append(("--set", parse_set_flags(sets)))
        props: dict[str, str] = {}
        sources: dict[str, str] = {}
        for source, values in layers:  # later sources win
            props.update(values)
            sources.update(dict.fromkeys(values, source))
        return cls(props, sources)

    def effective(self) -> list[tuple[str, str, str]]:
        """(property, value, source) for every property, sorted: what ``--check-config`` shows.
        Source is ``default``, where an explicit value came from, or ``ignored`` for a key
        Riverlog does not read."""
        rows = []
        for key in sorted(self.props):
            if key not in self.explicit:
                source = "default"
            else:
                source = self.sources.get(key, "set")
                if key in self.unknown:
                    source += " (ignored: not used by Riverlog)"
            value = self.props[key]
            if value and any(word in key for word in SECRET_WORDS):
                value = "(hidden)"  # a printed configuration must not leak a secret
            rows.append((key, value, source))
        return rows

    def get(self, key: str) -> str:
        return self.props.get(key, "")

    def get_int(self, key: str) -> int:
        value = self.get(key)
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{key} must be an integer, got {value!r}") from None

    def get_bool(self, key: str) -> bool:
        value = self.get(key).lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return value == "true"

    def _validate(self) -> None:
        for key in ("node.id", "num.partitions", "default.replication.factor", "message.max.bytes",
                    "socket.request.max.bytes", "log.segment.bytes", "metrics.port"):
            self.get_int(key)
        for key in ("offsets.topic.num.partitions", "offsets.topic.replication.factor"):
            if self.get_int(key) < 1:
                raise ConfigError(f"{key} must be at least 1, got {self.get(key)}")
        for key in ("group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
                    "group.max.session.timeout.ms", "group.max.size", "offset.metadata.max.bytes",
                    "offsets.retention.minutes", "offsets.retention.check.interval.ms",
                    "offsets.commit.timeout.ms", "offsets.topic.segment.bytes", "offsets.load.buffer.size",
                    "group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
                    "group.consumer.max.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
                    "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
                    "group.consumer.max.size"):
            self.get_int(key)
        for key in ("group.share.session.timeout.ms", "group.share.heartbeat.interval.ms", "group.share.max.size",
                    "group.share.record.lock.duration.ms", "group.share.delivery.count.limit",
                    "group.share.partition.max.record.locks", "group.share.min.record.lock.duration.ms",
                    "group.share.max.record.lock.duration.ms", "group.share.min.session.timeout.ms",
                    "group.share.max.session.timeout.ms", "group.share.min.heartbeat.interval.ms",
                    "group.share.max.heartbeat.interval.ms", "group.share.min.delivery.count.limit",
                    "group.share.max.delivery.count.limit", "group.share.min.partition.max.record.locks",
                    "group.share.max.partition.max.record.locks", "share.coordinator.state.topic.num.partitions",
                    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
                    "share.coordinator.state.topic.segment.bytes", "share.coordinator.write.timeout.ms"):
            if self.get_int(key) < 1:
                raise ConfigError(f"{key} must be at least 1, got {self.get(key)}")
        lock = self.get_int("group.share.record.lock.duration.ms")
        if not self.get_int("group.share.min.record.lock.duration.ms") <= lock <= \
                self.get_int("group.share.max.record.lock.duration.ms"):
            raise ConfigError("group.share.record.lock.duration.ms must be between "
                              "group.share.min.record.lock.duration.ms and group.share.max.record.lock.duration.ms")
        for key in ("transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
                    "transaction.state.log.min.isr", "transaction.state.log.segment.bytes",
                    "transaction.state.log.load.buffer.size", "transaction.max.timeout.ms",
                    "transactional.id.expiration.ms", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                    "transaction.remove.expired.transaction.cleanup.interval.ms"):
            if self.get_int(key) < 1:
                raise ConfigError(f"{key} must be at least 1, got {self.get(key)}")
        for key in ("log.cleaner.threads", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
                    "quota.window.num", "quota.window.size.seconds"):
            if self.get_int(key) < 1:
                raise ConfigError(f"{key} must be at least 1, got {self.get(key)}")
        for key in ("auto.create.topics.enable", "delete.topic.enable", "log.cleaner.enable",
                    "auto.leader.rebalance.enable", "transaction.partition.verification.enable"):
            self.get_bool(key)
        if self.get_int("leader.imbalance.check.interval.seconds") < 1:
            raise ConfigError("leader.imbalance.check.interval.seconds must be at least 1, "
                              f"got {self.get('leader.imbalance.check.interval.seconds')}")
        if not 0 <= self.get_int("leader.imbalance.per.broker.percentage") <= 100:
            raise ConfigError("leader.imbalance.per.broker.percentage must be between 0 and 100, "
                              f"got {self.get('leader.imbalance.per.broker.percentage')}")
        if not self.listeners():
            raise ConfigError("listeners is empty (example: listeners=PLAINTEXT://:9092)")
        self._validate_security()
        self._validate_connection_limits()
        self._validate_roles()
        self._validate_schema_registry()

    def _validate_schema_registry(self) -> None:
        # The in-broker registry (issue #20) is a plain-HTTP convenience for local starts, a Kafka
        # client of this broker's own PLAINTEXT listener: a configuration it cannot serve that way
        # is refused at start rather than leaving a broker up without the registry it was asked for.
        listeners = self.get("schema.registry.listeners").strip()
        if not listeners:
            return
        for part in listeners.split(","):
            scheme, sep, rest = part.strip().partition("://")
            port = rest.rpartition(":")[2]
            if not sep or scheme != "http" or not port.isdigit():
                raise ConfigError(f"schema.registry.listeners={listeners!r}: the in-broker registry serves "
                                  "http://HOST:PORT only; run `riverlog schema-registry` for https or "
                                  "authentication")
        if "broker" not in self.process_roles:
            raise ConfigError("schema.registry.listeners needs process.roles to include broker: the registry "
                              "keeps its schemas in this broker's _schemas topic")
        if not any(self.security_protocol(lst.name) == "PLAINTEXT" for lst in self.advertised_listeners()):
            raise ConfigError("schema.registry.listeners needs a PLAINTEXT listener for the in-broker registry "
                              "to use; run `riverlog schema-registry` with client credentials "
                              "(kafkastore.security.protocol, kafkastore.sasl.*) instead")

    def _validate_security(self) -> None:
        names = [lst.name for lst in self.listeners()]
        protocol_map = parse_protocol_map(self.get("listener.security.protocol.map"))
        for name in names:
            if name not in protocol_map and name not in SECURITY_PROTOCOLS:
                # Kafka refuses this too; guessing PLAINTEXT could serve plaintext by surprise.
                raise ConfigError(
                    f"listener {name} has no entry in listener.security.protocol.map "
                    f"({self.get('listener.security.protocol.map')}); add one, e.g. {name}:PLAINTEXT")
        authorizer = self.get("authorizer.class.name").strip()
        if authorizer and authorizer != STANDARD_AUTHORIZER:
            raise ConfigError(f"authorizer.class.name={authorizer} is not served: Riverlog authorizes as Kafka's "
                              f"KRaft {STANDARD_AUTHORIZER} does; name that class or leave the property empty")
        self.get_bool("allow.everyone.if.no.acl.found")
        refused = refusals(self.props, self.explicit, names)
        if refused:
            raise ConfigError(f"unsupported security configuration: {', '.join(refused)}. {WHAT_TO_DO}")
        if "security.inter.broker.protocol" in self.explicit and "inter.broker.listener.name" in self.explicit:
            raise ConfigError("security.inter.broker.protocol and inter.broker.listener.name are both set; "
                              "Kafka allows only one: keep inter.broker.listener.name")
        inter_broker = self.inter_broker_listener()
        if "broker" in self.process_roles and inter_broker not in names:
            raise ConfigError(f"the inter-broker listener {inter_broker} (inter.broker.listener.name or "
                              f"security.inter.broker.protocol) is not one of the listeners "
                              f"({self.get('listeners')}); add a {inter_broker} listener or name another")

    def _validate_connection_limits(self) -> None:
        # Kafka's rules: the limits are ints of at least 0 (2147483647 = none), a per-IP limit of
        # 0 only with overrides, a pool (when > 0) at least socket.request.max.bytes large.
        for key in ("max.connections", "max.connections.per.ip", "max.connection.creation.rate"):
            if not 0 <= self.get_int(key) <= 2147483647:
                raise ConfigError(f"{key} must be between 0 and 2147483647, got {self.get(key)}")
        overrides = self.max_connections_per_ip_overrides()
        if self.get_int("max.connections.per.ip") == 0 and not overrides:
            raise ConfigError("max.connections.per.ip can be 0 only with max.connections.per.ip.overrides "
                              "(example: max.connections.per.ip.overrides=127.0.0.1:100)")
        if self.get_int("connections.max.idle.ms") == 0:
            raise ConfigError("connections.max.idle.ms must be positive, or negative to never close idle connections")
        if self.get_int("socket.request.frame.timeout.ms") < 1:
            raise ConfigError("socket.request.frame.timeout.ms must be at least 1, "
                              f"got {self.get('socket.request.frame.timeout.ms')}")
        pool = self.get_int("queued.max.request.bytes")
        if pool > 0 and pool < self.get_int("socket.request.max.bytes"):
            raise ConfigError(f"queued.max.request.bytes ({pool}) must be -1 (no pool) or at least "
                              f"socket.request.max.bytes ({self.get('socket.request.max.bytes')})")

    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """``max.connections.per.ip.overrides``: ``host:count,...`` split at each entry's last colon
        (so IPv6 addresses work), as Kafka parses it."""
        out: dict[str, int] = {}
        for entry in filter(None, (e.strip() for e in self.get("max.connections.per.ip.overrides").split(","))):
            host, sep, count = entry.rpartition(":")
            if not sep or not host.strip() or not count.strip().isdigit():
                raise ConfigError(f"max.connections.per.ip.overrides entry {entry!r} must look like host:count "
                                  "(example: max.connections.per.ip.overrides=10.0.0.7:50,client-host:200)")
            out[host.strip().strip("[]")] = int(count)
        return out

    def _validate_roles(self) -> None:
        roles = self.process_roles
        if not roles or not roles <= {"broker", "controller"}:
            raise ConfigError(
                f"process.roles must be broker, controller or broker,controller; got {self.get('process.roles')!r}")
        voters = self.quorum_voters()
        if not voters:
            if "broker" not in roles:
                raise ConfigError("process.roles=controller needs controller.quorum.voters "
                                  "(example: controller.quorum.voters=1@node1:9093,2@node2:9093,3@node3:9093)")
            return  # single-node mode: this node is the whole cluster
        voter_ids = {v.node_id for v in voters}
        if "controller" in roles and self.node_id not in voter_ids:
            raise ConfigError(
                f"node.id {self.node_id} has the controller role but is not in controller.quorum.voters "
                f"({self.get('controller.quorum.voters')}); add it there or set process.roles=broker")
        if "controller" not in roles and self.node_id in voter_ids:
            raise ConfigError(f"node.id {self.node_id} is in controller.quorum.voters but process.roles "
                              "has no controller role; set process.roles=broker,controller")
        if "controller" in roles and not self.controller_listeners():
            raise ConfigError(
                f"process.roles has the controller role but listeners has no {self.get('controller.listener.names')} "
                "listener (example: listeners=PLAINTEXT://:9092,CONTROLLER://:9093)")
        if "broker" in roles and not self.client_listeners():
            raise ConfigError("process.roles has the broker role but every listener is a controller listener "
                              "(example: listeners=PLAINTEXT://:9092,CONTROLLER://:9093)")
        for key in ("controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
                    "controller.quorum.request.timeout.ms", "controller.quorum.election.backoff.max.ms"):
            if self.get_int(key) < 1:
                raise ConfigError(f"{key} must be at least 1, got {self.get(key)}")

    # Typed views -------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners"))

    def security_protocol(self, listener: str) -> str:
        """The listener's protocol, as Kafka resolves it: its listener.security.protocol.map
        entry, or its own name when that is a protocol (validated at load)."""
        protocol_map = parse_protocol_map(self.get("listener.security.protocol.map"))
        return protocol_map.get(listener.upper()) or listener.upper()

    def inter_broker_listener(self) -> str:
        """The listener brokers replicate and send markers over: ``inter.broker.listener.name``,
        or (Kafka's older way) the listener named by ``security.inter.broker.protocol``."""
        if "security.inter.broker.protocol" in self.explicit:
            return self.get("security.inter.broker.protocol").strip().upper()
        return self.get("inter.broker.listener.name").strip().upper()

    def controller_listener(self) -> str:
        """The listener a node dials the controllers on: the first of ``controller.listener.names``,
        as Kafka's brokers choose it."""
        names = [n.strip().upper() for n in self.get("controller.listener.names").split(",") if n.strip()]
        return names[0] if names else "CONTROLLER"

    def client_listeners(self) -> list[Listener]:
        controller_names = self._controller_listener_names()
        return [lst for lst in self.listeners() if lst.name not in controller_names]

    def controller_listeners(self) -> list[Listener]:
        """Listeners this node serves the metadata quorum on (voters only)."""
        controller_names = self._controller_listener_names()
        return [lst for lst in self.listeners() if lst.name in controller_names]

    def _controller_listener_names(self) -> set[str]:
        return {n.strip().upper() for n in self.get("controller.listener.names").split(",") if n.strip()}

    @property
    def process_roles(self) -> set[str]:
        return {r.strip().lower() for r in self.get("process.roles").split(",") if r.strip()}

    def quorum_voters(self) -> list[Voter]:
        """``controller.quorum.voters``; empty means single-node mode (a quorum of this node alone)."""
        return parse_voters(self.get("controller.quorum.voters"))

    @property
    def metadata_log_dir(self) -> Path:
        """Where ``__cluster_metadata-0`` lives: ``metadata.log.dir``, else the first log dir."""
        configured = self.get("metadata.log.dir")
        return Path(configured) if configured else self.log_dirs[0]

    def advertised_listeners(self) -> list[Listener]:
        advertised = parse_listeners(self.get("advertised.listeners"))
        if advertised:
            return advertised
        # Kafka advertises the listener's own host, or the machine's name when bound to all.
        return [
            Listener(lst.name, lst.host if lst.host not in ("", "0.0.0.0", "::") else "localhost", lst.port)
            for lst in self.client_listeners()
        ]

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p.strip()) for p in self.get("log.dirs").split(",") if p.strip()]

    def log_retention_ms(self) -> int:
        if self.get("log.retention.ms"):
            return self.get_int("log.retention.ms")
        if self.get("log.retention.minutes"):
            return self.get_int("log.retention.minutes") * 60_000
        return self.get_int("log.retention.hours") * 3_600_000

    def log_roll_ms(self) -> int:
        if self.get("log.roll.ms"):
            return self.get_int("log.roll.ms")
        return self.get_int("log.roll.hours") * 3_600_000
