"""The operator's Connect, Connector and Mirror handlers (issue #19) against a real API server.

As in ``test_operator.py``: the operator runs as a process (kopf, its own API client), and with no
kubelet no worker pod ever runs, so a Connect's status says no worker is ready. Connectors are
reconciled against a real Apache Kafka Connect worker on loopback (``support.connect``) on a
real Riverlog broker, which the Connect names with the ``riverlog.dev/connect-rest-url``
annotation. This module's operator watches only ``opc-*`` namespaces, apart from
``test_operator.py``'s ``op-*``. It is told where "its pods" are as the chart tells an operator
in the cluster, so Connects and Mirrors get their REST API's NetworkPolicy (stored, not enforced:
nothing here implements NetworkPolicies).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.brokers import BrokerProcess, free_port, kafka_dist
from support.connect import FILE_SINK, ConnectError, ConnectWorker
from support.kube import KubeCluster, wait_until
from test_operator import OperatorProcess, apply, cluster_doc, condition, crds, get, merge_patch

pytestmark = pytest.mark.k8s

__all__ = ["crds"]  # the fixture, shared with test_operator.py

WAIT = 90.0
PREFIX = "opc"
REST_URL_ANNOTATION = "riverlog.dev/connect-rest-url"
# What the chart would set (RIVERLOG_OPERATOR_NAMESPACE, RIVERLOG_OPERATOR_POD_SELECTOR).
OPERATOR_NAMESPACE = "riverlog-system"
OPERATOR_PODS = "app.kubernetes.io/component=operator,app.kubernetes.io/instance=riverlog"


@pytest.fixture(scope="module")
def operator(kube: KubeCluster, crds: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log_path = tmp_path_factory.mktemp("operator-connect") / "operator.log"
    proc = OperatorProcess(kube, log_path, "--standalone", "--namespace", f"{PREFIX}-*", "--verbose",
                           RIVERLOG_OPERATOR_CONNECT_IMAGE="riverlog-connect:test",
                           RIVERLOG_OPERATOR_CONNECTOR_RESYNC_SECONDS="2",
                           RIVERLOG_OPERATOR_NAMESPACE=OPERATOR_NAMESPACE, RIVERLOG_OPERATOR_POD_SELECTOR=OPERATOR_PODS)
    yield proc
    proc.stop()


@pytest.fixture
def operator_log(operator: OperatorProcess) -> Iterator[OperatorProcess]:
    start = len(operator.log())
    yield operator
    print(f"--- operator log ---\n{operator.log()[start:][-8000:]}")


def connect_doc(namespace: str, name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Connect", "metadata": meta, "spec": spec}


def connector_doc(namespace: str, name: str, connect: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Connector", "metadata": {"name": name,
                                                                                     "namespace": namespace},
            "spec": {"connectRef": {"name": connect}, **spec}}


def ready_reason(kube: KubeCluster, kind: str, name: str, namespace: str, reason: str,
                 needle: str = "") -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = get(kube, kind, name, namespace)
        ready = condition(obj, "Ready")
        return obj if ready.get("reason") == reason and needle in ready.get("message", "") else None

    found: dict[str, Any] = wait_until(check, WAIT, f"{kind} {name}: Ready reason {reason} {needle!r}")
    return found


def test_connect_gets_its_workers_and_reports_status_and_spec_errors(kube: KubeCluster,
                                                                     operator_log: OperatorProcess) -> None:
    namespace = kube.namespace(f"{PREFIX}-connect")
    # Before its Cluster exists: a spec problem in the status, nothing applied.
    apply(kube, connect_doc(namespace, "sink", clusterRef={"name": "demo"}))
    ready_reason(kube, "rlcn", "sink", namespace, "ClusterNotFound", "no Cluster 'demo'")
    assert get(kube, "deployment", "sink-connect", namespace) is None

    apply(kube, cluster_doc(namespace, replicas=1),
          connect_doc(namespace, "nolistener", clusterRef={"name": "demo", "listener": "NOPE"}))
    ready_reason(kube, "rlcn", "nolistener", namespace, "InvalidEndpoint", "has no listener 'NOPE'")

    connect = ready_reason(kube, "rlcn", "sink", namespace, "WorkersNotReady", "0/1 workers ready")
    uid = connect["metadata"]["uid"]
    status = connect["status"]
    assert status["restApi"] == f"http://sink-connect-api.{namespace}.svc:8083"
    assert status["readyReplicas"] == 0 and status["observedGeneration"] == 1
    assert condition(connect, "Ready")["status"] == "False"
    for kind, child in (("configmap", "sink-connect-config"), ("service", "sink-connect-api"),
                        ("networkpolicy", "sink-connect-api"), ("deployment", "sink-connect"),
                        ("poddisruptionbudget", "sink-connect")):
        obj = get(kube, kind, child, namespace)
        assert obj is not None, (kind, child)
        assert [(o["kind"], o["uid"], o.get("controller")) for o in obj["metadata"]["ownerReferences"]] == \
            [("Connect", uid, True)]
    properties = get(kube, "configmap", "sink-connect-config", namespace)["data"][  # type: ignore[index]
        "connect-distributed.properties"]
    assert f"bootstrap.servers=demo-bootstrap.{namespace}.svc:9092\n" in properties
    assert "group.id=sink-connect\n" in properties and "config.storage.replication.factor=1\n" in properties
    deployment = get(kube, "deployment", "sink-connect", namespace)
    assert deployment is not None and deployment["spec"]["replicas"] == 1
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "riverlog-connect:test"
    service = get(kube, "service", "sink-connect-api", namespace)
    # The REST API and the workers' metrics (spec.metrics.enabled, on by default): the JMX
    # exporter's rules beside the properties, the launcher told to start the agent.
    assert service is not None and [p["port"] for p in service["spec"]["ports"]] == [8083, 9404]
    assert "metrics.yaml" in get(kube, "configmap", "sink-connect-config", namespace)["data"]  # type: ignore[index]
    assert {"name": "RIVERLOG_CONNECT_METRICS_PORT", "value": "9404"} in container["env"]
    # The REST API's NetworkPolicy as the API server stores it: the workers' pods, REST from them
    # and from the operator's pods in the operator's namespace (one peer), metrics from anywhere.
    policy = get(kube, "networkpolicy", "sink-connect-api", namespace)
    assert policy is not None
    workers = deployment["spec"]["selector"]
    assert policy["spec"]["podSelector"] == workers and policy["spec"]["policyTypes"] == ["Ingress"]
    rest_rule, metrics_rule = policy["spec"]["ingress"]
    assert rest_rule == {"ports": [{"protocol": "TCP", "port": 8083}], "from": [
        {"podSelector": workers},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": OPERATOR_NAMESPACE}},
         "podSelector": {"matchLabels": dict(kv.split("=") for kv in OPERATOR_PODS.split(","))}}]}
    assert metrics_rule == {"ports": [{"protocol": "TCP", "port": 9404}]}
    # The controller-manager makes the pod (Pending without a kubelet); the status follows.
    wait_until(lambda: (get(kube, "rlcn", "sink", namespace) or {}).get("status", {}).get("replicas") == 1, WAIT,
               "status.replicas 1")
    row = kube.kubectl("get", "rlcn", "sink", "-n", namespace, "--no-headers").stdout.split()
    assert row[:3] == ["sink", "1", "0"] and "WorkersNotReady" in row

    # Credentials from a Secret: missing first, then hashed into the pod template; a rotated
    # password changes the hash (the Deployment rolls).
    apply(kube, connect_doc(namespace, "secure", bootstrapServers="kafka.example:9093",
                            authentication={"type": "scram-sha-512", "username": "svc",
                                            "passwordSecret": {"name": "svc-creds"}}))
    ready_reason(kube, "rlcn", "secure", namespace, "SecretsMissing", "svc-creds/password")

    def secret(password: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "svc-creds", "namespace": namespace},
                "data": {"password": base64.b64encode(password.encode()).decode()}}

    def version() -> str | None:
        dep = get(kube, "deployment", "secure-connect", namespace) or {}
        annotations = dep.get("spec", {}).get("template", {}).get("metadata", {}).get("annotations") or {}
        value: str | None = annotations.get("riverlog.dev/credentials-version")
        return value

    first = version()
    apply(kube, secret("pw-one"))
    ready_reason(kube, "rlcn", "secure", namespace, "WorkersNotReady")
    second = wait_until(lambda: version() != first and version(), WAIT, "a new credentials version")
    apply(kube, secret("pw-two"))
    wait_until(lambda: version() not in (first, second), WAIT, "the rotated password's credentials version")
    secure_props = get(kube, "configmap", "secure-connect-config", namespace)["data"][  # type: ignore[index]
        "connect-distributed.properties"]
    assert "pw-two" not in secure_props
    assert "${directory:/etc/riverlog-connect-credentials/kafka/user:password}" in secure_props

    # The garbage collector removes the workers' objects, their NetworkPolicy too, with the Connect.
    kube.kubectl("delete", "rlcn", "sink", "-n", namespace, "--wait=false")
    wait_until(lambda: get(kube, "networkpolicy", "sink-connect-api", namespace) is None, WAIT,
               "the NetworkPolicy gone with its Connect")


@pytest.fixture(scope="module")
def loopback_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("connect-broker"), target="riverlog")
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(scope="module")
def connect_worker(tmp_path_factory: pytest.TempPathFactory, loopback_broker: BrokerProcess
                   ) -> Iterator[ConnectWorker]:
    """One Connect worker on the loopback broker, shared by the module's tests (their connectors
    have distinct names)."""
    worker = ConnectWorker(Path(kafka_dist.install()), tmp_path_factory.mktemp("connect-worker"), "worker",
                           loopback_broker.bootstrap, free_port(), group_id="opc-connect", replication_factor=1)
    try:
        worker.start()
        yield worker
    finally:
        worker.stop()


def test_connector_lifecycle_through_a_real_connect_worker(kube: KubeCluster, operator_log: OperatorProcess,
                                                           connect_worker: ConnectWorker, tmp_path: Path) -> None:
    namespace = kube.namespace(f"{PREFIX}-connector")
    rest = connect_worker.rest
    apply(kube, connect_doc(namespace, "real", annotations={REST_URL_ANNOTATION: rest.url},
                            bootstrapServers="127.0.0.1:9"))
    connect = wait_until(lambda: (get(kube, "rlcn", "real", namespace) or {}).get("status", {}).get(
        "connectorPlugins") and get(kube, "rlcn", "real", namespace), WAIT, "the worker's plugins in the status")
    assert FILE_SINK in {p["class"] for p in connect["status"]["connectorPlugins"]}

    sink = tmp_path / "sink.txt"
    apply(kube, connector_doc(namespace, "lines", "real", **{"class": FILE_SINK, "tasksMax": 1,
                                                             "config": {"file": str(sink), "topics": "lines"}}))
    obj = ready_reason(kube, "rlcr", "lines", namespace, "ConnectorRunning")
    assert obj["status"]["connectorState"] == "RUNNING" and [t["state"] for t in obj["status"]["tasks"]] == [
        "RUNNING"]
    assert rest.call("GET", "/connectors/lines/config")["file"] == str(sink)

    merge_patch(kube, "rlcr", "lines", namespace, {"spec": {"state": "paused"}})
    ready_reason(kube, "rlcr", "lines", namespace, "ConnectorPaused")
    assert rest.status("lines")["connector"]["state"] == "PAUSED"
    merge_patch(kube, "rlcr", "lines", namespace, {"spec": {"state": "running"}})
    ready_reason(kube, "rlcr", "lines", namespace, "ConnectorRunning")
    assert rest.status("lines")["connector"]["state"] == "RUNNING"

    other = tmp_path / "other.txt"
    merge_patch(kube, "rlcr", "lines", namespace, {"spec": {"config": {"file": str(other)}}})
    wait_until(lambda: rest.call("GET", "/connectors/lines/config")["file"] == str(other), WAIT,
               "the new config on the worker")
    wait_until(lambda: (get(kube, "rlcr", "lines", namespace) or {}).get("status", {}).get("observedGeneration")
               == 4, WAIT, "observedGeneration 4")
    assert get(kube, "rlcr", "lines", namespace)["status"]["drift"] == []  # type: ignore[index]

    # Behind the operator's back: reported as drift at the next check and put back.
    live = rest.call("GET", "/connectors/lines/config")
    rest.put_connector("lines", {**live, "file": str(tmp_path / "sneaky.txt"), "batch.size": "7"})

    def drift_reported() -> list[str] | None:
        drift: list[str] | None = ((get(kube, "rlcr", "lines", namespace) or {}).get("status") or {}).get("drift")
        return drift if drift else None

    assert wait_until(drift_reported, WAIT, "drift in the status", interval=0.05) == ["batch.size", "file"]
    wait_until(lambda: rest.call("GET", "/connectors/lines/config") == live, WAIT, "the config put back")
    ready_reason(kube, "rlcr", "lines", namespace, "ConnectorRunning")

    kube.kubectl("delete", "rlcr", "lines", "-n", namespace)
    wait_until(lambda: get(kube, "rlcr", "lines", namespace) is None, WAIT, "the Connector gone")
    assert "lines" not in rest.call("GET", "/connectors")

    def status_gone() -> bool:
        # The worker drops the status once it reads the tombstone from its status topic.
        try:
            rest.status("lines")
            return False
        except ConnectError as exc:
            assert "404" in str(exc), exc
            return True

    wait_until(status_gone, WAIT, "the connector's status gone from the worker")
    # A Connector of a Connect that does not exist says so.
    apply(kube, connector_doc(namespace, "orphan", "nowhere", **{"class": FILE_SINK, "config": {"topics": "x"}}))
    ready_reason(kube, "rlcr", "orphan", namespace, "ConnectNotFound")


def test_mirror_runs_its_three_connectors_and_removes_them_when_deleted(
        kube: KubeCluster, operator_log: OperatorProcess, connect_worker: ConnectWorker,
        loopback_broker: BrokerProcess) -> None:
    """A Mirror's own workers (a Deployment owned by the Mirror) and MirrorMaker 2's connectors on
    the real worker, named by the REST URL annotation; both sides are the loopback broker."""
    namespace = kube.namespace(f"{PREFIX}-mirror")
    rest = connect_worker.rest
    bootstrap = loopback_broker.bootstrap
    apply(kube, {"apiVersion": "riverlog.dev/v1alpha1", "kind": "Mirror",
                 "metadata": {"name": "dr", "namespace": namespace, "annotations": {REST_URL_ANNOTATION: rest.url}},
                 "spec": {"source": {"alias": "east", "bootstrapServers": bootstrap},
                          "target": {"alias": "west", "bootstrapServers": bootstrap},
                          "topics": "mirrored-.*", "groups": "none-.*"}})
    names = ("mirror-checkpoint", "mirror-heartbeat", "mirror-source")

    def connectors_running() -> dict[str, Any] | None:
        obj = get(kube, "rlmm", "dr", namespace) or {}
        states = (obj.get("status") or {}).get("connectors") or {}
        return obj if sorted(states) == list(names) and set(states.values()) == {"RUNNING"} else None

    mirror = wait_until(connectors_running, WAIT, "the three mirror connectors RUNNING")
    assert sorted(rest.call("GET", "/connectors")) == sorted(names)
    config = rest.call("GET", "/connectors/mirror-source/config")
    assert (config["source.cluster.alias"], config["target.cluster.alias"], config["topics"]) == \
        ("east", "west", "mirrored-.*")
    assert mirror["status"]["restApi"] == f"http://dr-mirror-api.{namespace}.svc:8083"
    deployment = get(kube, "deployment", "dr-mirror", namespace)
    assert deployment is not None
    assert [(o["kind"], o["uid"]) for o in deployment["metadata"]["ownerReferences"]] == \
        [("Mirror", mirror["metadata"]["uid"])]
    policy = get(kube, "networkpolicy", "dr-mirror-api", namespace)
    assert policy is not None and policy["spec"]["podSelector"] == deployment["spec"]["selector"]
    assert condition(mirror, "Ready")["status"] == "False"  # no worker pod runs in this tier

    kube.kubectl("delete", "rlmm", "dr", "-n", namespace)
    wait_until(lambda: get(kube, "rlmm", "dr", namespace) is None, WAIT, "the Mirror gone")
    assert rest.call("GET", "/connectors") == []
