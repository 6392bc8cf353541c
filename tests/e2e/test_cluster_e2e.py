"""Issue #7's acceptance scenarios on the e2e test node, in order on one installation: the chart
installed with helm and a 3-broker Cluster with an RF=3 Topic (1), the leader's pod deleted under
load (2), a config change rolled one broker at a time (3), scaling 3 -> 5 -> 3 (4), and deleting
Topics and the Cluster (5). Kafka clients run in Pods, where the Service names resolve
(``pod_clients``); the test reads what they print and watches the API."""


from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from chart_install import install_chart
from node_agent.agent import NodeAgent
from pod_clients import LAYOUT, LOAD, ClientPod, clean_result, replicas_on
from support.kube import KubeCluster, wait_until

pytestmark = pytest.mark.e2e

WAIT = 300.0
CLUSTER = "demo"
TOPIC = "orders"
BOOTSTRAP = "{cluster}-bootstrap.{ns}.svc:9092"

CLIENT = r"""
import sys, uuid
from confluent_kafka import Consumer, Producer
bootstrap, topic = sys.argv[1], sys.argv[2]
acked = []
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
for i in range(300):
    producer.produce(topic, key=str(i % 7).encode(), value=f"v{i}".encode(),
                     on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
assert producer.flush(60) == 0, "unflushed"
assert len(acked) == 300, len(acked)
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-" + uuid.uuid4().hex[:6],
                     "auto.offset.reset": "earliest"})
consumer.subscribe([topic])
seen = set()
import time
deadline = time.monotonic() + 120
while len(seen) < 300 and time.monotonic() < deadline:
    msg = consumer.poll(1.0)
    if msg is not None and msg.error() is None:
        seen.add(msg.value())
consumer.commit(asynchronous=False)
consumer.close()
assert seen == set(acked), (len(seen), len(acked))
print("E2E-OK", len(seen), flush=True)
"""


def get(kube: KubeCluster, kind: str, name: str, ns: str) -> dict[str, Any] | None:
    proc = kube.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def condition(obj: dict[str, Any] | None, type_: str) -> str:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return str(c["status"])
    return ""


def apply(kube: KubeCluster, ns: str, *objects: dict[str, Any]) -> None:
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                 "items": list(objects)}))


@dataclass
class Installation:
    kube: KubeCluster
    node: NodeAgent | None
    ns: str

    @property
    def bootstrap(self) -> str:
        return BOOTSTRAP.format(cluster=CLUSTER, ns=self.ns)

    def cluster(self) -> dict[str, Any] | None:
        return get(self.kube, "cluster", CLUSTER, self.ns)

    def healthy(self) -> bool:
        c = self.cluster()
        status = (c or {}).get("status") or {}
        return (condition(c, "Ready") == "True" and status.get("underReplicatedPartitions") == 0
                and status.get("observedGeneration") == (c or {})["metadata"].get("generation"))

    def wait_healthy(self, what: str) -> None:
        wait_until(self.healthy, WAIT, what, interval=1.0)

    def broker_pods(self) -> list[dict[str, Any]]:
        out = self.kube.kubectl("get", "pods", "-n", self.ns, "-l", f"riverlog.dev/cluster={CLUSTER}", "-o", "json")
        return list(json.loads(out.stdout)["items"])

    def client(self, name: str, script: str, *args: str) -> ClientPod:
        return ClientPod(self.kube, self.node, self.ns, name, script, [self.bootstrap, *args])

    def settled_layout(self, name: str, topic: str = TOPIC) -> dict[str, Any]:
        """The topic's layout once every partition has its full ISR and preferred leader."""
        final = self.client(name, LAYOUT, topic, "180").finish()
        layout: dict[str, Any] = final.last("FINAL")
        layout["topics"] = final.last("TOPICS")
        return layout


@dataclass
class Watcher:
    """Samples the Cluster's conditions and the broker pods about every ``interval`` seconds, in a thread.

    One more sample is taken on exit, after the thread stops: a pod that starts and finishes
    going between two samples (a drained broker shuts down in well under a second) is then still
    seen absent, instead of the scenario ending before the next sample.
    """

    inst: Installation
    interval: float = 0.5
    samples: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        for _ in range(5):  # the closing sample; retried because a slow API call is skipped
            if self._sample():
                break
            time.sleep(1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def _sample(self) -> bool:
        try:
            c = self.inst.cluster() or {}
            pods = self.inst.broker_pods()
        except Exception:  # a slow API call now and then: skip the sample
            return False
        conditions = {k["type"]: (k["status"], k.get("reason"))
                      for k in (c.get("status") or {}).get("conditions") or []}
        self.samples.append({
            "t": time.time(), "conditions": conditions,
            "pods": {p["metadata"]["name"]: {
                "uid": p["metadata"]["uid"], "terminating": bool(p["metadata"].get("deletionTimestamp")),
                "ready": any(x["type"] == "Ready" and x["status"] == "True"
                             for x in (p.get("status") or {}).get("conditions") or [])} for p in pods}})
        return True

    def saw(self, type_: str, status: str) -> bool:
        return any(s["conditions"].get(type_, ("", ""))[0] == status for s in self.samples)


@pytest.fixture(scope="module")
def inst(kube: KubeCluster, node: NodeAgent | None) -> Iterator[Installation]:
    ns = kube.namespace("e2e-cluster")
    install_chart(kube, "riverlog", ns)
    yield Installation(kube, node, ns)


def test_chart_cluster_and_topic_become_ready_and_clients_work(inst: Installation) -> None:
    kube, ns = inst.kube, inst.ns
    cluster = {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": CLUSTER},
               "spec": {"replicas": 3, "storage": {"size": "1Gi", "deleteClaim": True},
                        # Preferred leaders come back within seconds here, not Kafka's 5 minutes.
                        "config": {"default.replication.factor": 3, "min.insync.replicas": 2,
                                   "leader.imbalance.check.interval.seconds": 3}}}
    topic = {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Topic", "metadata": {"name": TOPIC},
             "spec": {"clusterRef": {"name": CLUSTER}, "partitions": 3, "replicationFactor": 3,
                      "config": {"min.insync.replicas": 2}}}
    apply(kube, ns, cluster, topic)
    wait_until(lambda: condition(inst.cluster(), "Ready") == "True", WAIT, "Cluster Ready")
    wait_until(lambda: condition(get(kube, "topic", TOPIC, ns), "Ready") == "True", WAIT, "Topic Ready")
    pvcs = json.loads(kube.kubectl("get", "pvc", "-n", ns, "-o", "json").stdout)["items"]
    assert len(pvcs) == 3 and all(p["status"]["phase"] == "Bound" for p in pvcs)
    client = inst.client("client", CLIENT, TOPIC)
    wait_until(lambda: client.phase() in ("Succeeded", "Failed"), WAIT, "client pod finished")
    log = client.log().text
    assert client.phase() == "Succeeded", log
    assert "E2E-OK 300" in log


def test_deleting_the_leader_pod_under_load_loses_nothing(inst: Installation) -> None:
    inst.wait_healthy("a healthy cluster before the scenario")
    load = inst.client("load-failover", LOAD, TOPIC, "600", "200")
    first = load.wait_for("LAYOUT")
    leader = first["partitions"][f"{TOPIC}/0"]["leader"]
    wait_until(lambda: (load.log().last("PROGRESS") or {}).get("acked", 0) > 200, WAIT, "records acknowledged")
    victim = f"{CLUSTER}-{leader}"
    claim = get(inst.kube, "pvc", f"data-{victim}", inst.ns)
    assert claim is not None
    volume = claim["spec"]["volumeName"]
    old_uid = get(inst.kube, "pod", victim, inst.ns)["metadata"]["uid"]  # type: ignore[index]
    with Watcher(inst) as watch:
        deleted_at = time.time()
        inst.kube.kubectl("delete", "pod", victim, "-n", inst.ns, "--wait=false")
        # Leadership moves away from the deleted broker while it is gone.
        wait_until(lambda: any(seen["t"] > deleted_at and seen["partitions"][f"{TOPIC}/0"]["leader"] not in (-1, leader)
                               for seen in load.log().all("LAYOUT")), WAIT, "a new leader for partition 0")
        # The pod comes back (a new one, the same name and claim) and the cluster heals.
        wait_until(lambda: (p := get(inst.kube, "pod", victim, inst.ns)) and p["metadata"]["uid"] != old_uid and p,
                   WAIT, f"{victim} recreated")
        wait_until(lambda: watch.saw("Degraded", "True"), WAIT, "status Degraded while a broker is away")
        inst.wait_healthy("status Ready again with no under-replicated partition")
    again = get(inst.kube, "pvc", f"data-{victim}", inst.ns)
    assert again is not None and again["spec"]["volumeName"] == volume
    assert again["metadata"]["uid"] == claim["metadata"]["uid"]
    # Rejoined the ISR of every partition, and the preferred leaders are back.
    layout = inst.settled_layout("layout-after-failover")
    assert layout["settled"], layout
    load.stop()
    result = load.finish().last("RESULT")
    print(f"failover: deleted {victim} (leader of {TOPIC}/0); {len(watch.samples)} status samples, "
          f"Degraded seen {watch.saw('Degraded', 'True')}; load result {result}")
    assert clean_result(result) == [], result


def pods_away(sample: dict[str, Any], names: list[str]) -> list[str]:
    """Broker pods of ``names`` missing, shutting down or not ready in a Watcher sample."""
    pods = sample["pods"]
    return [n for n in names if n not in pods or pods[n]["terminating"] or not pods[n]["ready"]]


def topic_isr_sizes(layout: dict[str, Any], topic: str = TOPIC) -> dict[str, int]:
    return {name: len(p["isr"]) for name, p in layout["partitions"].items() if name.rsplit("/", 1)[0] == topic}


def test_a_config_change_rolls_one_broker_at_a_time_never_below_min_isr(inst: Installation) -> None:
    inst.wait_healthy("a healthy cluster before the scenario")
    names = [f"{CLUSTER}-{i}" for i in range(3)]
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in inst.broker_pods()}
    load = inst.client("load-roll", LOAD, TOPIC, "900", "200")
    wait_until(lambda: (load.log().last("PROGRESS") or {}).get("acked", 0) > 200, WAIT, "records acknowledged")

    def all_restarted() -> bool:
        now = {p["metadata"]["name"]: p for p in inst.broker_pods()}
        return all(n in now and now[n]["metadata"]["uid"] != before[n] for n in names)

    with Watcher(inst) as watch:
        inst.kube.kubectl("patch", "cluster", CLUSTER, "-n", inst.ns, "--type=merge",
                          "-p", json.dumps({"spec": {"config": {"log.retention.hours": 100}}}))
        wait_until(all_restarted, 2 * WAIT, "every broker pod restarted")
        inst.wait_healthy("the cluster healthy after the rolling restart")
    load.stop()
    log = load.finish()
    assert clean_result(log.last("RESULT")) == [], log.last("RESULT")
    # One broker at a time: never two broker pods away at once.
    crowded = [(s["t"], pods_away(s, names)) for s in watch.samples if len(pods_away(s, names)) > 1]
    assert crowded == [], crowded
    away = [(round(s["t"]), pods_away(s, names)) for s in watch.samples if pods_away(s, names)]
    print(f"rolling restart: pods away per sample {away}; load result {log.last('RESULT')}")
    assert away, "no restart was observed"
    # Never below min.insync.replicas=2 for any partition of the topic, as the producer saw it.
    layouts = log.all("LAYOUT")
    assert layouts
    low = [(seen["t"], topic_isr_sizes(seen)) for seen in layouts if min(topic_isr_sizes(seen).values()) < 2]
    assert low == [], low
    # The new setting is what the brokers were restarted with.
    config = get(inst.kube, "configmap", f"{CLUSTER}-config", inst.ns) or {}
    assert any("log.retention.hours=100" in text for text in (config.get("data") or {}).values()), config


def test_scaling_out_spreads_partitions_and_scaling_in_drains_first(inst: Installation) -> None:
    inst.wait_healthy("a healthy cluster before the scenario")
    load = inst.client("load-scale", LOAD, TOPIC, "1200", "200")
    wait_until(lambda: (load.log().last("PROGRESS") or {}).get("acked", 0) > 200, WAIT, "records acknowledged")

    inst.kube.kubectl("scale", "cluster", CLUSTER, "-n", inst.ns, "--replicas=5")
    wait_until(lambda: ((inst.cluster() or {}).get("status") or {}).get("rebalancedReplicas") == 5 and inst.healthy(),
               2 * WAIT, "five brokers with partitions spread over them")
    spread = inst.settled_layout("layout-five")
    assert spread["settled"], spread
    assert set(spread["brokers"]) == {0, 1, 2, 3, 4}
    assert replicas_on(spread, {3, 4}), spread  # the new brokers hold replicas

    removed = [f"{CLUSTER}-3", f"{CLUSTER}-4"]
    with Watcher(inst) as watch:
        inst.kube.kubectl("scale", "cluster", CLUSTER, "-n", inst.ns, "--replicas=3")
        wait_until(lambda: not any(p["metadata"]["name"] in removed for p in inst.broker_pods()) and inst.healthy(),
                   2 * WAIT, "brokers 3 and 4 gone and the cluster healthy")
    going = [s["t"] for s in watch.samples if pods_away(s, removed)]
    assert going, "the removed pods were never seen going"
    # A few more layouts from the producer's side before it stops.
    wait_until(lambda: len([seen for seen in load.log().all("LAYOUT") if seen["t"] >= going[0]]) >= 5, WAIT,
               "layouts sampled after the removed pods started going")
    load.stop()
    log = load.finish()
    assert clean_result(log.last("RESULT")) == [], log.last("RESULT")
    # Replicas left brokers 3 and 4 before their pods went: nothing the producer saw after that
    # moment still placed a replica there.
    after = [seen for seen in log.all("LAYOUT") if seen["t"] >= going[0]]
    assert after, "no layout was sampled after the pods started going"
    stranded = [(seen["t"], replicas_on(seen, {3, 4})) for seen in after if replicas_on(seen, {3, 4})]
    print(f"scaling: at five brokers {len(replicas_on(spread, {3, 4}))} partitions had replicas on 3 or 4; "
          f"{len(after)} layouts sampled after the pods started going; load result {log.last('RESULT')}")
    assert stranded == [], stranded[:3]
    # deleteClaim: true also applies to scaling in.
    wait_until(lambda: all(get(inst.kube, "pvc", f"data-{name}", inst.ns) is None for name in removed), WAIT,
               "the removed brokers' claims deleted")


def owned(inst: Installation, cluster: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for kind in ("statefulset", "service", "configmap", "poddisruptionbudget", "serviceaccount", "pod", "pvc"):
        items = json.loads(inst.kube.kubectl("get", kind, "-n", inst.ns, "-o", "json").stdout)["items"]
        names = [i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith(f"{cluster}-")
                 or i["metadata"]["name"] == cluster or i["metadata"]["name"].startswith(f"data-{cluster}-")]
        if names:
            out[kind] = sorted(names)
    return out


def test_topic_deletion_policies_and_cluster_deletion(inst: Installation) -> None:
    inst.wait_healthy("a healthy cluster before the scenario")
    kube, ns = inst.kube, inst.ns
    topics = [{"apiVersion": "riverlog.dev/v1alpha1", "kind": "Topic", "metadata": {"name": name},
               "spec": {"clusterRef": {"name": CLUSTER}, "partitions": 1, "replicationFactor": 3,
                        "deletionPolicy": policy}} for name, policy in (("kept", "Retain"), ("dropped", "Delete"))]
    apply(kube, ns, *topics)
    for name in ("kept", "dropped"):
        wait_until(lambda name=name: condition(get(kube, "topic", name, ns), "Ready") == "True", WAIT, f"{name} Ready")
    kube.kubectl("delete", "topic", "kept", "dropped", "-n", ns, "--timeout=120s")
    listing = inst.client("topics-after-delete", LAYOUT, TOPIC, "0").finish().last("TOPICS")
    assert "kept" in listing and "dropped" not in listing and TOPIC in listing, listing

    # A second, one-broker cluster that keeps its claims, to show both deleteClaim settings.
    keeper = {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": "keeper"},
              "spec": {"replicas": 1, "storage": {"size": "1Gi", "deleteClaim": False},
                       "config": {"offsets.topic.replication.factor": 1}}}
    apply(kube, ns, keeper)
    wait_until(lambda: condition(get(kube, "cluster", "keeper", ns), "Ready") == "True", WAIT, "keeper Ready")
    assert owned(inst, CLUSTER).keys() >= {"statefulset", "service", "configmap", "poddisruptionbudget", "pod", "pvc"}

    kube.kubectl("delete", "cluster", CLUSTER, "keeper", "-n", ns, "--timeout=180s")
    wait_until(lambda: not owned(inst, CLUSTER), WAIT, f"everything of {CLUSTER} deleted, claims included")
    wait_until(lambda: set(owned(inst, "keeper")) == {"pvc"}, WAIT, "keeper's objects deleted but its claim")
    assert owned(inst, "keeper")["pvc"] == ["data-keeper-0"]
