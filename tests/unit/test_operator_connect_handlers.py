"""The Connect, Connector and Mirror handlers' own decisions (issue #19), with stand-ins for the
Kubernetes API and the Connect REST API: endpoint resolution errors as spec problems, the
credentials version, the workers' Ready condition, and a connector brought to its spec (created
in its state, updated, drift reported only without a spec change, paused and resumed). The
k8s tier runs the same code against a real API server and a real Connect worker."""

from __future__ import annotations

import asyncio
import base64
import datetime
from collections.abc import Mapping
from typing import Any, cast

import pytest
from riverlog_operator.builders.connect import OperatorPeer
from riverlog_operator.builders.mirror import CONNECTORS, mirror_connector_configs
from riverlog_operator.connect_model import ConnectorSpec, KafkaEndpointSpec, MirrorSpec
from riverlog_operator.connect_rest import ConnectRest, ConnectRestError
from riverlog_operator.connectors import connector_config
from riverlog_operator.handlers.common import network_policy_setting
from riverlog_operator.handlers.connect import (
    REST_URL_ANNOTATION,
    SpecProblem,
    Workers,
    credentials_version,
    drop_network_policy,
    reconcile_workers,
    resolve,
    rest_url_of,
    worker_ref,
)
from riverlog_operator.handlers.connector import converge_connector, rest_problem, restart_if_failed
from riverlog_operator.handlers.mirror import connector_spec
from riverlog_operator.kubeapi import KubeApi

pytestmark = pytest.mark.unit

FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


class FakeKube:
    def __init__(self, objects: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = dict(objects)

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.objects.get((kind, name))


def kube(**objects: dict[str, Any]) -> KubeApi:
    return cast(KubeApi, FakeKube({tuple(k.split(":", 1)): v for k, v in objects.items()}))  # type: ignore[misc]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_missing_cluster_user_and_listener_are_spec_problems() -> None:
    spec = KafkaEndpointSpec.from_dict({"clusterRef": {"name": "demo"},
                                        "authentication": {"type": "scram-sha-512", "userRef": {"name": "alice"}}})
    with pytest.raises(SpecProblem) as missing:
        run(resolve(kube(), spec, "ns"))
    assert missing.value.reason == "ClusterNotFound"
    plain = {"spec": {"replicas": 3, "listeners": [{"name": "PLAIN", "port": 9092}]}}
    with pytest.raises(SpecProblem) as no_user:
        run(resolve(kube(**{"Cluster:demo": plain}), spec, "ns"))
    assert (no_user.value.reason, no_user.value.message) == ("UserNotFound", "no User 'alice' in namespace ns")
    user = {"spec": {"clusterRef": {"name": "demo"}}}
    with pytest.raises(SpecProblem) as no_listener:
        run(resolve(kube(**{"Cluster:demo": plain, "User:alice": user}), spec, "ns"))
    assert no_listener.value.reason == "InvalidEndpoint"
    assert "no listener with authentication scram-sha-512" in no_listener.value.message
    secured = {"spec": {"replicas": 1, "listeners": [{"name": "PLAIN", "port": 9092},
                                                     {"name": "SECURE", "port": 9094, "tls": True,
                                                      "authentication": {"type": "scram-sha-512"}}]}}
    endpoint = run(resolve(kube(**{"Cluster:demo": secured, "User:alice": user}), spec, "ns"))
    assert endpoint.bootstrap_servers == "demo-bootstrap.ns.svc:9094" and endpoint.security_protocol == "SASL_SSL"
    assert endpoint.replication_factor == 1


def test_credentials_version_hashes_the_mounted_keys_and_names_missing_ones() -> None:
    spec = KafkaEndpointSpec.from_dict({"bootstrapServers": "k:9093", "tls": {"trustedCASecret": {"name": "ca"}},
                                        "authentication": {"type": "scram-sha-512", "username": "svc",
                                                           "passwordSecret": {"name": "creds"}}})
    endpoint = run(resolve(kube(), spec, "ns"))

    def secret(**data: str) -> dict[str, Any]:
        return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}

    version, missing = run(credentials_version(kube(**{"Secret:ca": secret(**{"ca.crt": "A"})}), "ns", [endpoint]))
    assert missing == ["creds/password"] and version
    one, none_missing = run(credentials_version(
        kube(**{"Secret:ca": secret(**{"ca.crt": "A"}), "Secret:creds": secret(password="1", other="x")}), "ns",
        [endpoint]))
    assert none_missing == [] and one != version
    other_key, _ = run(credentials_version(
        kube(**{"Secret:ca": secret(**{"ca.crt": "A"}), "Secret:creds": secret(password="1", other="y")}), "ns",
        [endpoint]))
    assert other_key == one  # only the mounted keys count
    rotated, _ = run(credentials_version(
        kube(**{"Secret:ca": secret(**{"ca.crt": "A"}), "Secret:creds": secret(password="2")}), "ns", [endpoint]))
    assert rotated != one
    plain = run(resolve(kube(), KafkaEndpointSpec.from_dict({"bootstrapServers": "k:9092"}), "ns"))
    assert run(credentials_version(kube(), "ns", [plain])) == (None, [])


def test_workers_ready_condition() -> None:
    assert Workers(1, 1, 0).ready_condition() == (False, "WorkersNotReady", "0/1 workers ready")
    assert Workers(2, 2, 2).ready_condition() == (True, "WorkersReady", "2/2 workers ready")
    assert Workers(2, 3, 2).ready_condition()[1] == "WorkersNotReady"  # a rolling update's surge
    assert Workers(0, 0, 0).ready_condition()[1] == "ScaledToZero"
    assert Workers(1, 0, 0, ("ClusterNotFound", "no Cluster")).ready_condition() == (False, "ClusterNotFound",
                                                                                     "no Cluster")


def test_rest_url_is_the_service_unless_annotated() -> None:
    body: dict[str, Any] = {"metadata": {"name": "etl", "namespace": "ns", "uid": "u"}}
    assert rest_url_of(body, worker_ref("Connect", body)) == "http://etl-connect-api.ns.svc:8083"
    body["metadata"]["annotations"] = {REST_URL_ANNOTATION: "http://127.0.0.1:1234/"}
    assert rest_url_of(body, worker_ref("Connect", body)) == "http://127.0.0.1:1234"


class FakeRest:
    """A Connect worker's connectors as the REST API shows them; state changes are immediate."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[str, str] = {}
        self.task_states: dict[str, str] = {}  # a task's own state where it differs from the connector's
        self.calls: list[str] = []

    async def config(self, name: str) -> dict[str, str] | None:
        return self.configs.get(name)

    async def status(self, name: str) -> dict[str, Any] | None:
        if name not in self.configs:
            return None
        state = self.states[name]
        return {"name": name, "connector": {"state": state, "worker_id": "w:8083"},
                "tasks": [{"id": 0, "state": self.task_states.get(name, state), "worker_id": "w:8083"}]}

    async def create(self, request: Mapping[str, Any]) -> None:
        self.calls.append(f"create {request['initial_state']}")
        self.configs[request["name"]] = dict(request["config"])
        self.states[request["name"]] = request["initial_state"]

    async def put_config(self, name: str, config: Mapping[str, str]) -> None:
        self.calls.append("put")
        self.configs[name] = dict(config)

    async def act(self, name: str, action: str) -> None:
        self.calls.append(action)
        self.states[name] = {"pause": "PAUSED", "resume": "RUNNING", "stop": "STOPPED"}[action]

    async def restart_failed(self, name: str) -> None:
        # Kafka restarts the failed tasks; they come back RUNNING here at once.
        self.calls.append("restart")
        self.states[name] = "RUNNING"
        self.task_states.pop(name, None)


def test_converge_creates_updates_corrects_drift_and_changes_state() -> None:
    fake = FakeRest()
    rest = cast(ConnectRest, fake)

    def spec(**fields: Any) -> ConnectorSpec:
        return ConnectorSpec.from_dict({"connectRef": {"name": "etl"}, "class": FILE_SINK,
                                        "config": {"topics": "t", "file": "/a"}, **fields})

    status, drift = run(converge_connector(rest, "lines", spec(state="paused"), True))
    assert fake.calls == ["create PAUSED"] and drift == [] and status["connector"]["state"] == "PAUSED"
    assert fake.configs["lines"] == connector_config("lines", spec())

    status, drift = run(converge_connector(rest, "lines", spec(), True))
    assert fake.calls[1:] == ["resume"] and status["connector"]["state"] == "RUNNING"

    # A config change with a spec change is an update; without one, drift (put back either way).
    run(converge_connector(rest, "lines", spec(config={"topics": "t", "file": "/b"}), True))
    assert fake.calls[2:] == ["put"] and fake.configs["lines"]["file"] == "/b"
    fake.configs["lines"] = {**fake.configs["lines"], "file": "/sneaky", "extra": "1"}
    _, drift = run(converge_connector(rest, "lines", spec(config={"topics": "t", "file": "/b"}), False))
    assert drift == ["extra", "file"] and fake.configs["lines"]["file"] == "/b" and "extra" not in fake.configs["lines"]
    _, drift = run(converge_connector(rest, "lines", spec(config={"topics": "t", "file": "/b"}), False))
    assert drift == [] and fake.calls[-1] == "put"  # nothing more to do
    assert len(fake.calls) == 4


def test_a_failed_task_is_restarted_with_backoff_and_counted() -> None:
    fake = FakeRest()
    rest = cast(ConnectRest, fake)
    spec = ConnectorSpec.from_dict({"connectRef": {"name": "etl"}, "class": FILE_SINK, "config": {"topics": "t"},
                                    "autoRestart": {"enabled": True}})
    run(converge_connector(rest, "lines", spec, True))
    fake.task_states["lines"] = "FAILED"
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    status, restarts = run(restart_if_failed(rest, "lines", spec, run(rest.status("lines")), None, t0))
    assert fake.calls[-1] == "restart" and restarts == {"count": 1, "lastRestartTime": "2026-01-01T00:00:00Z"}
    assert status["tasks"][0]["state"] == "RUNNING"  # the status read back after the restart
    # Failed again a minute later: the next restart waits (2 minutes after the first).
    fake.task_states["lines"] = "FAILED"
    later = t0 + datetime.timedelta(minutes=1)
    status, kept = run(restart_if_failed(rest, "lines", spec, run(rest.status("lines")), restarts, later))
    assert fake.calls.count("restart") == 1 and kept == restarts and status["tasks"][0]["state"] == "FAILED"


def test_rest_problems() -> None:
    assert rest_problem(ConnectRestError("PUT", "/x", 400, "bad config"), "u") == ("InvalidConfig", "bad config",
                                                                                   False)
    assert rest_problem(ConnectRestError("PUT", "/x", 409, "rebalancing"), "u")[2] is True
    assert rest_problem(ConnectRestError("PUT", "/x", 404, "nope"), "u")[:1] == ("RestError",)


def test_mirror_connector_specs_give_their_configs_back() -> None:
    from riverlog_operator.builders.connect import Endpoint

    spec = MirrorSpec.from_dict({"source": {"alias": "a", "bootstrapServers": "a:9092"},
                                 "target": {"alias": "b", "bootstrapServers": "b:9092"}})
    configs = mirror_connector_configs(spec, Endpoint("a:9092"), Endpoint("b:9092"))
    assert sorted(configs) == sorted(CONNECTORS)
    for name, config in configs.items():
        assert connector_config(name, connector_spec("m", config)) == config


# --- the REST API's NetworkPolicy ---------------------------------------------------------------

CHART_ENV = {"RIVERLOG_OPERATOR_NAMESPACE": "riverlog-system",
             "RIVERLOG_OPERATOR_POD_SELECTOR": "app.kubernetes.io/name=riverlog,app.kubernetes.io/instance=rl,"
                                               "app.kubernetes.io/component=operator",
             "RIVERLOG_OPERATOR_CONNECT_NETWORK_POLICY": "true"}


def test_the_network_policy_setting_from_the_charts_environment() -> None:
    setting = network_policy_setting(CHART_ENV)
    assert setting.peer == OperatorPeer("riverlog-system", (("app.kubernetes.io/component", "operator"),
                                                            ("app.kubernetes.io/instance", "rl"),
                                                            ("app.kubernetes.io/name", "riverlog")))
    assert "riverlog-system" in setting.note
    # On by default: the switch may be absent (an older chart, a hand-made Deployment).
    assert network_policy_setting({k: v for k, v in CHART_ENV.items() if "NETWORK" not in k}).peer == setting.peer
    assert network_policy_setting({**CHART_ENV, "RIVERLOG_OPERATOR_POD_SELECTOR": " a=b , example.com/c= "}).peer \
        == OperatorPeer("riverlog-system", (("a", "b"), ("example.com/c", "")))
    # Turned off (the chart's connect.networkPolicy.enabled=false).
    off = network_policy_setting({**CHART_ENV, "RIVERLOG_OPERATOR_CONNECT_NETWORK_POLICY": "false"})
    assert off.peer is None and "connect.networkPolicy.enabled" in off.note
    # Outside the cluster (the k8s tier's operator, a developer's): nothing says where the
    # operator's pods are, so no policy (one naming nobody would lock the operator out).
    outside = network_policy_setting({})
    assert outside.peer is None and "RIVERLOG_OPERATOR_NAMESPACE and RIVERLOG_OPERATOR_POD_SELECTOR not set" in \
        outside.note
    half = network_policy_setting({"RIVERLOG_OPERATOR_NAMESPACE": "ops", "RIVERLOG_OPERATOR_POD_SELECTOR": " "})
    assert half.peer is None and half.note.startswith("RIVERLOG_OPERATOR_POD_SELECTOR not set")


@pytest.mark.parametrize("env, needle", [
    ({"RIVERLOG_OPERATOR_CONNECT_NETWORK_POLICY": "maybe"}, "give true or false"),
    ({"RIVERLOG_OPERATOR_NAMESPACE": "Not_A_Namespace"}, "not a namespace name"),
    ({"RIVERLOG_OPERATOR_POD_SELECTOR": "app"}, "'app' is not a label key=value"),
    ({"RIVERLOG_OPERATOR_POD_SELECTOR": "a=b,,c=d"}, "'' is not a label key=value"),
    ({"RIVERLOG_OPERATOR_POD_SELECTOR": "a=b c"}, "is not a label key=value"),
    ({"RIVERLOG_OPERATOR_POD_SELECTOR": "Bad_Prefix/a=b"}, "is not a label key=value"),
    ({"RIVERLOG_OPERATOR_POD_SELECTOR": "a=b,a=c"}, "label a given twice"),
])
def test_a_malformed_setting_stops_the_operator(env: dict[str, str], needle: str) -> None:
    # Refused rather than guessed: the start-up handler turns it into kopf's PermanentError.
    with pytest.raises(ValueError, match=needle):
        network_policy_setting({**CHART_ENV, **env})


class RecordingKube(FakeKube):
    """Gets, applies and deletes, recorded."""

    def __init__(self, objects: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        super().__init__(objects)
        self.calls: list[tuple[str, str, str]] = []

    async def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(("apply", manifest["kind"], manifest["metadata"]["name"]))
        self.objects[(manifest["kind"], manifest["metadata"]["name"])] = dict(manifest)
        return dict(manifest)

    async def delete(self, kind: str, name: str, namespace: str | None = None, *,
                     preconditions: Mapping[str, str] | None = None) -> bool:
        self.calls.append(("delete", kind, f"{name} {dict(preconditions or {})}"))
        return self.objects.pop((kind, name), None) is not None


def test_the_workers_get_the_policy_or_lose_the_one_they_own() -> None:
    from riverlog_operator.builders.connect import ConnectInputs
    from riverlog_operator.connect_model import ConnectSpec

    ref = worker_ref("Connect", {"metadata": {"name": "etl", "namespace": "ns", "uid": "u-1"}})
    spec = ConnectSpec.from_dict({"bootstrapServers": "k:9092"})

    def reconcile(fake: RecordingKube, peer: OperatorPeer | None) -> None:
        run(reconcile_workers(cast(KubeApi, fake), ref, 1, [spec.endpoint],
                              lambda endpoints, version: ConnectInputs(ref, spec, "c:x", endpoints[0]), peer))

    peer = network_policy_setting(CHART_ENV).peer
    fake = RecordingKube({})
    reconcile(fake, peer)
    assert [c[1] for c in fake.calls] == ["ConfigMap", "Service", "NetworkPolicy", "Deployment",
                                          "PodDisruptionBudget"]
    made = fake.objects[("NetworkPolicy", "etl-connect-api")]
    made["metadata"]["uid"] = "np-1"  # as the API server stores it
    # Off (or outside the cluster): the policy this Connect owns is deleted, nothing else applied
    # in its place; uid precondition, so never a policy made meanwhile under that name.
    fake.calls.clear()
    reconcile(fake, None)
    assert fake.calls[0] == ("delete", "NetworkPolicy", "etl-connect-api {'uid': 'np-1'}")
    assert "NetworkPolicy" not in [c[1] for c in fake.calls[1:]]
    # Gone, or someone else's policy of that name: left alone.
    fake.calls.clear()
    reconcile(fake, None)
    fake.objects[("NetworkPolicy", "etl-connect-api")] = {"metadata": {"name": "etl-connect-api", "uid": "mine"}}
    reconcile(fake, None)
    assert not [c for c in fake.calls if c[0] == "delete"]
    assert run(drop_network_policy(cast(KubeApi, fake), ref)) is False
