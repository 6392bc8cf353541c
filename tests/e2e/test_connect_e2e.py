"""Issue #19's e2e scenarios: Kafka Connect and MirrorMaker 2 run by the chart's operator and
actually running on the test node (Apache Kafka's Connect runtime, from the Connect image's
launcher; ``podshim/bin/riverlog-connect`` stands in for the image there).

On one installation with two one-broker Clusters, ``east`` and ``west``:

1. A ``Connect`` on west and a ``Connector`` on it (MirrorMaker 2's heartbeat connector: a
   connector of the Connect image whose effect is visible in a topic every second) created,
   paused, resumed, reconfigured and deleted from its resource. Each step is checked three ways:
   the resource's status, the workers' own REST API (through the Connect Service, from a Pod), and
   the heartbeats topic (records stop while paused, carry the new alias once reconfigured, stop
   once the resource is deleted).
2. A ``Mirror`` from east to west: a topic and a consumer group on east; west gets every record
   (``east.orders``, partition by partition in order) and the group's offsets translated, within
   the window MirrorMaker 2 documents (docs/migration.md).

Clients run in Pods, where the Services resolve (``pod_clients``); the test reads what they print.
The operator guards each Connect's REST API with a NetworkPolicy (only its own pods and the
workers get in); the REST client pods carry a label a NetworkPolicy of the test's own lets in, as
the docs tell users (enforced on kind where its network plugin does so; not on the e2e node).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from chart_install import install_chart
from node_agent.agent import NodeAgent
from pod_clients import _COMMON, ClientPod
from support.kube import KubeCluster, wait_until

pytestmark = pytest.mark.e2e

WAIT = 300.0
API = "riverlog.dev/v1alpha1"
MM2 = "org.apache.kafka.connect.mirror"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
BOOTSTRAP = "{cluster}-bootstrap.{ns}.svc:9092"
TOPIC, GROUP, PARTITIONS, RECORDS = "orders", "billing", 2, 600
LAG_MAX = 10  # the Mirror's offset.lag.max: how far apart MirrorMaker 2 records offset syncs
# What the REST client pods carry, and the test's own NetworkPolicy lets in (rest_clients_policy).
REST_CLIENT_LABELS = {"riverlog-e2e/connect-rest-client": "true"}

# Reads a topic (created later is fine) until SIGTERM or its time is up; every second prints how
# many records it has seen, by which of the given source aliases is in the record key (a
# MirrorMaker 2 heartbeat's key holds its source and target cluster aliases).
WATCH = _COMMON + r"""
bootstrap, topic, aliases, seconds = sys.argv[1], sys.argv[2], sys.argv[3].split(","), float(sys.argv[4])
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
consumer = Consumer({**CONF, "bootstrap.servers": bootstrap, "group.id": "watch-" + uuid.uuid4().hex[:6],
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "topic.metadata.refresh.interval.ms": 1000})
consumer.subscribe([topic])
counts = {}
deadline, shown = time.monotonic() + seconds, 0.0
while not stop and time.monotonic() < deadline:
    msg = consumer.poll(0.3)
    if msg is not None and msg.error() is None:
        key = msg.key() or b""
        alias = next((a for a in aliases if a.encode() in key), "other")
        counts[alias] = counts.get(alias, 0) + 1
    if time.monotonic() - shown >= 1.0:
        shown = time.monotonic()
        say("SEEN", {"t": time.time(), "counts": counts})
consumer.close()
say("FINAL", {"counts": counts})
"""

# GETs paths of an HTTP API and prints each answer (JSON decoded, anything else as text).
REST = r"""
import json, sys, urllib.error, urllib.request
base = sys.argv[1]
for path in sys.argv[2:]:
    try:
        with urllib.request.urlopen(base + path, timeout=20) as answer:
            raw = answer.read()
            kind = answer.headers.get("Content-Type", "")
            body = json.loads(raw or b"null") if "json" in kind else raw.decode(errors="replace")
            out = {"path": path, "code": answer.status, "body": body}
    except urllib.error.HTTPError as exc:
        out = {"path": path, "code": exc.code, "body": exc.read().decode(errors="replace")}
    print("REST", json.dumps(out, sort_keys=True), flush=True)
print("FINAL", json.dumps({"paths": len(sys.argv) - 2}), flush=True)
"""

# On the source: produce ``count`` records (record i to partition i % partitions), then a consumer
# group reads them all and commits, as the applications being moved would have.
FEED = _COMMON + r"""
bootstrap, topic, group, count, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
producer = Producer({**CONF, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
for i in range(count):
    producer.produce(topic, key=str(i).encode(), value=f"order-{i:05d}".encode(), partition=i % partitions)
assert producer.flush(60) == 0, "unflushed"
consumer = Consumer({**CONF, "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
consumer.subscribe([topic])
seen, deadline = 0, time.monotonic() + 120
while seen < count and time.monotonic() < deadline:
    msg = consumer.poll(1.0)
    if msg is not None and msg.error() is None:
        seen += 1
consumer.commit(asynchronous=False)
committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
consumer.close()
say("FINAL", {"consumed": seen, "committed": {str(tp.partition): tp.offset for tp in committed}})
"""

# On the target: waits until the mirrored topic holds ``count`` records and the group has
# committed offsets on every partition (written there by MirrorMaker 2's checkpoint connector) no
# further than ``window`` records before the source's committed offsets (the first checkpoints
# translate from the offset syncs of a mirror still catching up; later ones come closer), then
# prints every record's value per partition and those offsets.
MIRRORED = _COMMON + r"""
bootstrap, topic, group, count, partitions, seconds = (sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
                                                       int(sys.argv[5]), float(sys.argv[6]))
source_committed, window = json.loads(sys.argv[7]), int(sys.argv[8])
deadline = time.monotonic() + seconds
def committed():
    # No subscribe: fetching a group's offsets does not join it (the checkpoint connector only
    # writes offsets of a group with no members on the target).
    c = Consumer({**CONF, "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {str(tp.partition): tp.offset for tp in found}
    except Exception as exc:
        return {"error": str(exc)}
    finally:
        c.close()
values, offsets = {}, {}
while time.monotonic() < deadline:
    reader = Consumer({**CONF, "bootstrap.servers": bootstrap, "group.id": "check-" + uuid.uuid4().hex[:6],
                       "enable.auto.commit": False})
    try:
        ends = {p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    except Exception as exc:
        ends = {}
    values = {}
    if ends and sum(ends.values()) >= count:
        reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        while sum(len(v) for v in values.values()) < sum(ends.values()) and time.monotonic() < deadline:
            msg = reader.poll(1.0)
            if msg is not None and msg.error() is None:
                values.setdefault(str(msg.partition()), []).append(msg.value().decode())
    reader.close()
    offsets = committed()
    say("PROGRESS", {"ends": ends, "committed": offsets})
    if sum(len(v) for v in values.values()) >= count and all(
            offsets.get(str(p), -1) >= source_committed[str(p)] - window for p in range(partitions)):
        break
    time.sleep(2)
say("FINAL", {"values": values, "committed": offsets})
"""


def get(kube: KubeCluster, kind: str, name: str, ns: str) -> dict[str, Any] | None:
    proc = kube.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def ready(obj: dict[str, Any] | None) -> tuple[str, str]:
    """The Ready condition's status and reason."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return str(c["status"]), str(c.get("reason", ""))
    return "", ""


@dataclass
class Installation:
    kube: KubeCluster
    node: NodeAgent | None
    ns: str
    pods: int = 0

    def apply(self, *objects: dict[str, Any]) -> None:
        self.kube.kubectl("apply", "-n", self.ns, "-f", "-",
                          input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))

    def patch(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        self.kube.kubectl("patch", kind, name, "-n", self.ns, "--type=merge", "-p", json.dumps(patch))

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return get(self.kube, kind, name, self.ns)

    def wait_ready(self, kind: str, name: str, reason: str | None = None) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            obj = self.get(kind, name)
            status, why = ready(obj)
            generation = (obj or {}).get("metadata", {}).get("generation")
            observed = ((obj or {}).get("status") or {}).get("observedGeneration")
            return obj if status == "True" and reason in (None, why) and observed == generation else None
        found: dict[str, Any] = wait_until(check, WAIT, f"{kind} {name} Ready{f' ({reason})' if reason else ''}",
                                           interval=1.0)
        return found

    def bootstrap(self, cluster: str) -> str:
        return BOOTSTRAP.format(cluster=cluster, ns=self.ns)

    def client(self, name: str, script: str, *args: str, labels: dict[str, str] | None = None) -> ClientPod:
        self.pods += 1  # pod names are never reused: a finished client stays for its log
        return ClientPod(self.kube, self.node, self.ns, f"{name}-{self.pods}", script, list(args), labels=labels)

    def rest(self, service: str, *paths: str, port: int = 8083) -> dict[str, Any]:
        """The answers of the HTTP API behind ``service`` (Connect's REST API by default), asked
        from a Pod labelled ``REST_CLIENT_LABELS``."""
        log = self.client("rest", REST, f"http://{service}.{self.ns}.svc:{port}", *paths,
                          labels=REST_CLIENT_LABELS).finish(120)
        return {answer["path"]: answer for answer in log.all("REST")}


def rest_clients_policy(connect: str) -> dict[str, Any]:
    """A NetworkPolicy of the test's own, as docs/design-notes.md tells users: NetworkPolicies add
    up, so this one lets the REST client pods reach the workers of ``connect`` besides the
    operator's policy, which admits only the operator and the workers."""
    workers = {"app.kubernetes.io/name": "riverlog-connect", "app.kubernetes.io/instance": connect,
               "app.kubernetes.io/component": "connect"}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"{connect}-connect-api-clients"},
            "spec": {"podSelector": {"matchLabels": workers}, "policyTypes": ["Ingress"],
                     "ingress": [{"ports": [{"protocol": "TCP", "port": 8083}],
                                  "from": [{"podSelector": {"matchLabels": REST_CLIENT_LABELS}}]}]}}


def cluster_doc(name: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Cluster", "metadata": {"name": name},
            "spec": {"replicas": 1, "storage": {"size": "1Gi", "deleteClaim": True},
                     "config": {"offsets.topic.replication.factor": 1, "default.replication.factor": 1,
                                "transaction.state.log.replication.factor": 1,
                                "transaction.state.log.min.isr": 1}}}


@pytest.fixture(scope="module")
def inst(kube: KubeCluster, node: NodeAgent | None) -> Iterator[Installation]:
    ns = kube.namespace("e2e-connect")
    # Connector state and tasks are polled from the workers every 3 s here (30 s by default).
    install_chart(kube, "riverlog-connect", ns,
                  "--set", "operator.env[0].name=RIVERLOG_OPERATOR_CONNECTOR_RESYNC_SECONDS",
                  "--set-string", "operator.env[0].value=3")
    found = Installation(kube, node, ns)
    found.apply(cluster_doc("east"), cluster_doc("west"))
    yield found
    # Stop the workers and brokers for the modules after this one.
    for kind in ("mirror", "connect", "cluster"):
        kube.kubectl("delete", kind, "--all", "-n", ns, "--timeout=180s", "--ignore-not-found", check=False)


def seen(watch: ClientPod) -> dict[str, int]:
    last: dict[str, Any] = watch.log().last("SEEN") or {}
    return dict(last.get("counts") or {})


def quiet_for(watch: ClientPod, alias: str, seconds: float) -> int:
    """The watcher's count for ``alias`` once it has stayed the same for ``seconds`` (heartbeats
    come every second while the connector runs). Checked as: two readings taken after the watcher
    printed again past the pause are equal."""
    def settled() -> int | None:
        first = seen(watch).get(alias, 0)
        start = (watch.log().last("SEEN") or {}).get("t", 0.0)
        wait_until(lambda: (watch.log().last("SEEN") or {}).get("t", 0.0) >= start + seconds, WAIT,
                   f"the watcher printing {seconds} s later", interval=0.5)
        return first if seen(watch).get(alias, 0) == first else None
    value: int = wait_until(settled, WAIT, f"no new heartbeats from {alias}", interval=0.1)
    return value


def test_a_connector_is_created_paused_resumed_reconfigured_and_deleted_from_its_resource(
        inst: Installation) -> None:
    connect = {"apiVersion": API, "kind": "Connect", "metadata": {"name": "pipes"},
               "spec": {"replicas": 1, "clusterRef": {"name": "west"}}}
    # Before any REST client pod runs: the policy letting them in (the operator's admits only its
    # own pods and the workers).
    inst.apply(connect, rest_clients_policy("pipes"))
    worker = inst.wait_ready("connect", "pipes")
    assert f"{MM2}.MirrorHeartbeatConnector" in {p["class"] for p in worker["status"]["connectorPlugins"]}
    # The operator's policy names the chart's operator pods (the chart's env, in-cluster).
    guard = inst.get("networkpolicy", "pipes-connect-api")
    assert guard is not None, "no NetworkPolicy guards the REST API"
    operator_peer = guard["spec"]["ingress"][0]["from"][1]
    assert operator_peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": inst.ns}}, guard
    assert operator_peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator", guard
    selector = json.loads(inst.kube.kubectl("get", "deployment", "-n", inst.ns, "-l",
                                            "app.kubernetes.io/component=operator", "-o", "json").stdout)
    (operator,) = selector["items"]
    assert operator["spec"]["selector"]["matchLabels"] == operator_peer["podSelector"]["matchLabels"], guard

    beat_config = {"source.cluster.alias": "alpha", "target.cluster.alias": "west",
                   "source.cluster.bootstrap.servers": inst.bootstrap("west"),
                   "target.cluster.bootstrap.servers": inst.bootstrap("west"),
                   "emit.heartbeats.interval.seconds": 1, "heartbeats.topic.replication.factor": 1,
                   "key.converter": BYTES, "value.converter": BYTES}
    connector = {"apiVersion": API, "kind": "Connector", "metadata": {"name": "beat"},
                 "spec": {"connectRef": {"name": "pipes"}, "class": f"{MM2}.MirrorHeartbeatConnector",
                          "tasksMax": 1, "config": beat_config}}
    watch = inst.client("watch", WATCH, inst.bootstrap("west"), "heartbeats", "alpha,beta", "600")

    # Created: running on the worker, heartbeats flowing.
    inst.apply(connector)
    status = inst.wait_ready("connector", "beat", "ConnectorRunning")["status"]
    assert status["connectorState"] == "RUNNING" and [t["state"] for t in status["tasks"]] == ["RUNNING"], status
    api = "pipes-connect-api"
    answers = inst.rest(api, "/connectors", "/connectors/beat/status", "/connectors/beat/config")
    assert answers["/connectors"]["body"] == ["beat"], answers
    assert answers["/connectors/beat/status"]["body"]["connector"]["state"] == "RUNNING", answers
    assert answers["/connectors/beat/config"]["body"]["source.cluster.alias"] == "alpha", answers
    wait_until(lambda: seen(watch).get("alpha", 0) >= 3, WAIT, "heartbeats from the running connector")
    # The workers' Prometheus metrics (the JMX exporter's agent, the operator's rules), through
    # the same Service.
    scrape = inst.rest(api, "/metrics", port=9404)["/metrics"]["body"]
    assert 'riverlog_connect_connector_status{connector="beat",status="running"} 1.0' in scrape, scrape[-2000:]

    # Paused: the workers pause it, heartbeats stop.
    inst.patch("connector", "beat", {"spec": {"state": "paused"}})
    inst.wait_ready("connector", "beat", "ConnectorPaused")
    paused_at = quiet_for(watch, "alpha", 4.0)
    assert inst.rest(api, "/connectors/beat/status")["/connectors/beat/status"]["body"]["connector"][
        "state"] == "PAUSED"

    # Resumed: heartbeats again.
    inst.patch("connector", "beat", {"spec": {"state": "running"}})
    inst.wait_ready("connector", "beat", "ConnectorRunning")
    wait_until(lambda: seen(watch).get("alpha", 0) >= paused_at + 3, WAIT, "heartbeats after resuming")

    # Reconfigured: the workers run the new config, heartbeats carry the new source alias.
    inst.patch("connector", "beat", {"spec": {"config": {"source.cluster.alias": "beta"}}})
    status = inst.wait_ready("connector", "beat", "ConnectorRunning")["status"]
    assert status.get("drift") == [], status
    config = inst.rest(api, "/connectors/beat/config")["/connectors/beat/config"]["body"]
    assert config["source.cluster.alias"] == "beta", config
    wait_until(lambda: seen(watch).get("beta", 0) >= 3, WAIT, "heartbeats from the reconfigured connector")

    # Deleted: gone from the workers, heartbeats stop.
    inst.kube.kubectl("delete", "connector", "beat", "-n", inst.ns, "--timeout=120s")
    assert inst.rest(api, "/connectors")["/connectors"]["body"] == []
    quiet_for(watch, "beta", 4.0)
    watch.stop()
    counts = watch.finish().last("FINAL")["counts"]
    print(f"connector lifecycle: heartbeats seen {counts}")
    assert set(counts) <= {"alpha", "beta"}, counts

    # The Connect itself deleted: its Deployment, Service and pods go with it (owner references).
    inst.kube.kubectl("delete", "connect", "pipes", "-n", inst.ns, "--timeout=120s")
    wait_until(lambda: inst.get("deployment", "pipes-connect") is None and inst.get("service", api) is None
               and inst.get("networkpolicy", "pipes-connect-api") is None,
               WAIT, "the Connect's Deployment, Service and NetworkPolicy deleted")


def test_a_mirror_between_two_clusters_mirrors_a_topic_and_a_group(inst: Installation) -> None:
    topic = {"apiVersion": API, "kind": "Topic", "metadata": {"name": TOPIC},
             "spec": {"clusterRef": {"name": "east"}, "partitions": PARTITIONS, "replicationFactor": 1}}
    inst.apply(topic)
    inst.wait_ready("topic", TOPIC)
    fed: dict[str, Any] = inst.client("feed", FEED, inst.bootstrap("east"), TOPIC, GROUP, str(RECORDS),
                                      str(PARTITIONS)).finish(300).last("FINAL")
    assert fed["consumed"] == RECORDS, fed
    source_committed = {int(p): offset for p, offset in fed["committed"].items()}
    assert source_committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}, fed

    mirror = {"apiVersion": API, "kind": "Mirror", "metadata": {"name": "east-to-west"},
              "spec": {"replicas": 1, "source": {"alias": "east", "clusterRef": {"name": "east"}},
                       "target": {"alias": "west", "clusterRef": {"name": "west"}},
                       "topics": TOPIC, "groups": GROUP, "syncGroupOffsets": True,
                       "emitCheckpointsIntervalSeconds": 2, "syncGroupOffsetsIntervalSeconds": 2,
                       "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5,
                       "config": {"offset.lag.max": LAG_MAX, "sync.topic.acls.enabled": "false"},
                       # The last offset syncs of a burst wait for the workers' next offset flush
                       # (60 s by default): a quick cut-over flushes more often.
                       "workerConfig": {"offset.flush.interval.ms": 3000}}}
    inst.apply(mirror)
    status = inst.wait_ready("mirror", "east-to-west", "MirrorRunning")["status"]
    print(f"mirror status: {json.dumps(status, sort_keys=True)}")

    mirrored = f"east.{TOPIC}"
    final: dict[str, Any] = inst.client("mirrored", MIRRORED, inst.bootstrap("west"), mirrored, GROUP,
                                        str(RECORDS), str(PARTITIONS), "240", json.dumps(fed["committed"]),
                                        str(LAG_MAX + 1)).finish(300).last("FINAL")
    # Every record, partition by partition in the source's order, once (nothing was produced
    # while the mirror's worker was away, so at least once means exactly once here).
    expected = {str(p): [f"order-{i:05d}" for i in range(p, RECORDS, PARTITIONS)] for p in range(PARTITIONS)}
    assert final["values"] == expected, {p: len(v) for p, v in final["values"].items()}
    # The group's offsets translated: never past the end, never behind the last offset sync
    # before the committed offset (offset.lag.max records apart at most), and never from the start.
    translated = {int(p): offset for p, offset in final["committed"].items()}
    print(f"mirror: source committed {source_committed}, translated on west {translated}")
    for p in range(PARTITIONS):
        assert source_committed[p] - LAG_MAX - 1 <= translated[p] <= source_committed[p], translated
        assert translated[p] > 0, translated
    assert ready(inst.get("mirror", "east-to-west"))[0] == "True"
