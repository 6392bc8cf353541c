"""The Helm chart (charts/riverlog): helm lint, rendering with default values and with every
optional part, the values schema, the alerts (promtool unit tests), and against the real API
server: a server-side dry run of the rendered manifests, a real `helm install`, and the operator
running with nothing but the chart's RBAC.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import promtool
from support.image_stage import build_stage
from support.kube import KubeCluster, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "riverlog"
NAMESPACE = "riverlog-system"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]

# Every optional part on (ServiceMonitor and PrometheusRule need prometheus-operator's CRDs on a
# real cluster, so the server-side dry run below leaves those two out).
ALL_ON = [
    "--set", "cluster.enabled=true", "--set", "cluster.name=demo", "--set", "cluster.spec.replicas=3",
    "--set-json", 'topics=[{"name":"orders","spec":{"partitions":6,"replicationFactor":3,'
                  '"config":{"retention.ms":"604800000"}}},{"name":"audit"}]',
    "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true",
    "--set", "metrics.grafanaDashboard.enabled=true",
]
NO_MONITORING_CRDS = ["--set", "metrics.serviceMonitor.enabled=false", "--set", "metrics.prometheusRule.enabled=false"]


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory, k8s_bin: Path) -> dict[str, str]:
    home = tmp_path_factory.mktemp("helm")
    env = dict(os.environ)
    env.update(HELM_CONFIG_HOME=str(home / "config"), HELM_CACHE_HOME=str(home / "cache"),
               HELM_DATA_HOME=str(home / "data"), PATH=os.pathsep.join([str(k8s_bin), env.get("PATH", "")]))
    env.pop("KUBECONFIG", None)
    return env


def helm(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["helm", *args], capture_output=True, text=True, env=env, timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def render(env: dict[str, str], *args: str, namespace: str = NAMESPACE,
           release: str = "riverlog") -> list[dict[str, Any]]:
    out = helm(env, "template", release, str(CHART), "--namespace", namespace, *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def kinds(docs: list[dict[str, Any]]) -> Counter[str]:
    return Counter(doc["kind"] for doc in docs)


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


# --- helm lint and rendering ----------------------------------------------------------------------


def test_helm_lint_is_clean(helm_env: dict[str, str], tmp_path: Path) -> None:
    for extra in ([], ALL_ON, ["--set-json", 'operator.watchNamespaces=["team-a","team-b"]']):
        proc = helm(helm_env, "lint", "--strict", str(CHART), *extra)
        assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout, proc.stdout
        assert "[WARNING]" not in proc.stdout and "[ERROR]" not in proc.stdout, proc.stdout


def test_default_render_is_the_operator_and_its_rbac(helm_env: dict[str, str]) -> None:
    docs = render(helm_env)
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "args" not in container  # cluster-wide, peering on
    assert kinds(docs) == Counter({"ServiceAccount": 1, "ClusterRole": 3, "ClusterRoleBinding": 1, "Deployment": 1,
                                   "Service": 1, "ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1})
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "riverlog", doc["metadata"]["name"]
        assert labels["helm.sh/chart"] == f"riverlog-{yaml.safe_load((CHART / 'Chart.yaml').read_text())['version']}"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        if doc["kind"] in ("ServiceAccount", "Deployment", "Service"):
            assert doc["metadata"]["namespace"] == NAMESPACE


def test_operator_deployment(helm_env: dict[str, str]) -> None:
    docs = render(helm_env, "--set", "operator.verbose=true")
    deployment = one(docs, "Deployment", "riverlog-operator")
    pod = deployment["spec"]["template"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    # Never the broker pods' labels (component=broker): the operator's pods are not brokers.
    assert selector["app.kubernetes.io/component"] == "operator"
    spec = pod["spec"]
    assert spec["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"] == "riverlog-operator"
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10001
    (container,) = spec["containers"]
    assert container["image"] == f"riverlog:{APP_VERSION}"
    assert container["command"] == ["python", "-m", "riverlog_operator"]
    assert container["args"] == ["--verbose"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RIVERLOG_OPERATOR_IMAGE"] == f"riverlog:{APP_VERSION}"
    # Connects and Mirrors without spec.image run the Connect image (issue #19).
    assert env["RIVERLOG_OPERATOR_CONNECT_IMAGE"] == f"riverlog-connect:{APP_VERSION}"
    (custom,) = one(render(helm_env, "--set", "connect.image.repository=registry.example/connect", "--set",
                           "connect.image.tag=7.0.1"), "Deployment", "riverlog-operator")["spec"]["template"]["spec"][
        "containers"]
    assert {e["name"]: e.get("value") for e in custom["env"]}["RIVERLOG_OPERATOR_CONNECT_IMAGE"] == \
        "registry.example/connect:7.0.1"
    # The NetworkPolicy guarding each Connect's REST API lets in the operator's pods: the chart
    # tells it their namespace (downward API) and labels (its own selector, which the pods carry),
    # in a form the operator accepts.
    from riverlog_operator.handlers.common import network_policy_setting

    sources_of = {e["name"]: e.get("valueFrom") for e in container["env"]}
    assert sources_of["RIVERLOG_OPERATOR_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["RIVERLOG_OPERATOR_CONNECT_NETWORK_POLICY"] == "true"
    peer = network_policy_setting({**{k: v for k, v in env.items() if v is not None},
                                   "RIVERLOG_OPERATOR_NAMESPACE": NAMESPACE}).peer
    assert peer is not None and peer.namespace == NAMESPACE and peer.labels == selector
    (off,) = one(render(helm_env, "--set", "connect.networkPolicy.enabled=false"), "Deployment")["spec"][
        "template"]["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in off["env"]}["RIVERLOG_OPERATOR_CONNECT_NETWORK_POLICY"] == "false"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert env["RIVERLOG_OPERATOR_LIVENESS"] == f"http://0.0.0.0:{ports['health']}/healthz"
    assert env["RIVERLOG_OPERATOR_METRICS_PORT"] == str(ports["metrics"])
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    # The environment variables the chart sets are the ones the operator reads.
    sources = "\n".join(p.read_text() for p in (ROOT / "operator" / "riverlog_operator").rglob("*.py"))
    for name in env:
        assert f'"{name}"' in sources, f"the operator never reads {name}"
    service = one(docs, "Service", "riverlog-operator")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def rules_of(docs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = one(docs, "ClusterRole", name)["rules"]
    return rules


def allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str, name: str | None = None) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               and (not r.get("resourceNames") or name in r["resourceNames"]) for r in rules)


def test_rbac_is_least_privilege(helm_env: dict[str, str]) -> None:
    docs = render(helm_env)
    for role in (d for d in docs if d["kind"] == "ClusterRole"):
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], (role["metadata"]["name"], rule)
            if "secrets" in rule["resources"]:  # by name, never enumerated (issue #18)
                assert rule["resources"] == ["secrets"] and sorted(rule["verbs"]) == ["create", "get", "patch"]
    rules = rules_of(docs, "riverlog-operator")
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "riverlog-operator"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "riverlog-operator", "namespace": NAMESPACE}]
    # What the operator does...
    for group, resource, verbs in [
        ("riverlog.dev", "clusters", ("get", "list", "watch", "patch")),
        ("riverlog.dev", "topics", ("get", "list", "watch", "patch")),
        ("riverlog.dev", "clusters/status", ("patch",)),
        ("riverlog.dev", "topics/status", ("patch",)),
        ("apps", "statefulsets", ("get", "create", "patch")),
        ("", "configmaps", ("create", "patch")), ("", "services", ("create", "patch")),
        ("", "serviceaccounts", ("create", "patch")), ("policy", "poddisruptionbudgets", ("create", "patch")),
        ("", "pods", ("list", "patch", "delete")), ("", "persistentvolumeclaims", ("list", "delete")),
        ("", "nodes", ("get",)), ("", "events", ("create",)), ("", "secrets", ("get", "create", "patch")),
        ("apiextensions.k8s.io", "customresourcedefinitions", ("list", "watch")),
        # Issue #19: Connect, Connector and Mirror resources and their workers' Deployments.
        ("riverlog.dev", "connects", ("get", "list", "watch", "patch")),
        ("riverlog.dev", "connectors", ("get", "list", "watch", "patch")),
        ("riverlog.dev", "mirrors", ("get", "list", "watch", "patch")),
        ("riverlog.dev", "connects/status", ("patch",)), ("riverlog.dev", "connectors/status", ("patch",)),
        ("riverlog.dev", "mirrors/status", ("patch",)),
        ("riverlog.dev", "connects/finalizers", ("update",)), ("riverlog.dev", "mirrors/finalizers", ("update",)),
        ("apps", "deployments", ("get", "list", "watch", "create", "patch")),
        # The REST API's NetworkPolicy: server-side apply creates or patches it; turned off, the
        # operator reads the one a Connect owns and deletes it.
        ("networking.k8s.io", "networkpolicies", ("get", "create", "patch", "delete")),
        # Issue #20: a Cluster's schema registry removed from its spec: its Deployment, Service and
        # ConfigMap deleted by name (only those the Cluster owns, with a uid precondition).
        ("apps", "deployments", ("delete",)), ("", "services", ("delete",)), ("", "configmaps", ("delete",)),
    ]:
        for verb in verbs:
            assert allowed(rules, group, resource, verb), (group, resource, verb)
    assert allowed(rules, "kopf.dev", "clusterkopfpeerings", "patch", "riverlog-operator")
    # ... and nothing more than that.
    assert not allowed(rules, "kopf.dev", "clusterkopfpeerings", "patch", "someone-elses")
    for group, resource in [("apps", "statefulsets"), ("", "serviceaccounts"), ("policy", "poddisruptionbudgets"),
                            ("riverlog.dev", "clusters"), ("riverlog.dev", "connectors")]:
        assert not allowed(rules, group, resource, "delete"), resource
    assert not allowed(rules, "", "nodes", "list") and not allowed(rules, "", "namespaces", "list")
    for verb in ("list", "watch", "update"):
        assert not allowed(rules, "networking.k8s.io", "networkpolicies", verb), verb
    for verb in ("list", "watch", "delete", "update"):
        assert not allowed(rules, "", "secrets", verb), verb
    # Writes only to its own Secrets: the admission policy checks the operator's label.
    policy = one(docs, "ValidatingAdmissionPolicy")
    assert policy["spec"]["matchConditions"][0]["expression"] == \
        f"request.userInfo.username == \"system:serviceaccount:{NAMESPACE}:riverlog-operator\""
    assert one(docs, "ValidatingAdmissionPolicyBinding")["spec"]["policyName"] == policy["metadata"]["name"]
    # Namespace users get Clusters and Topics through the default roles.
    edit = one(docs, "ClusterRole", "riverlog-edit")
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert allowed(edit["rules"], "riverlog.dev", "clusters/scale", "update")
    for resource in ("connects", "connectors", "mirrors"):
        assert allowed(edit["rules"], "riverlog.dev", resource, "create")
        assert allowed(rules_of(docs, "riverlog-view"), "riverlog.dev", f"{resource}/status", "get")
    assert allowed(edit["rules"], "riverlog.dev", "connects/scale", "update")
    assert allowed(edit["rules"], "riverlog.dev", "mirrors/scale", "update")


def test_peering_name_is_the_operators(helm_env: dict[str, str]) -> None:
    from riverlog_operator.app import PEERING_NAME

    docs = render(helm_env, "--set-json", 'operator.watchNamespaces=["team-a"]')
    assert one(docs, "KopfPeering")["metadata"]["name"] == PEERING_NAME


def test_watching_namespaces_grants_writes_only_there(helm_env: dict[str, str]) -> None:
    docs = render(helm_env, "--set-json", 'operator.watchNamespaces=["team-a","team-b"]')
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["--namespace=team-a", "--namespace=team-b"]
    peerings = [d for d in docs if d["kind"] == "KopfPeering"]
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["team-a", "team-b"]
    # Cluster-wide, only reads kopf needs and node labels for racks.
    clusterwide = rules_of(docs, "riverlog-operator")
    assert not allowed(clusterwide, "apps", "statefulsets", "create")
    assert not allowed(clusterwide, "kopf.dev", "clusterkopfpeerings", "list")
    assert allowed(clusterwide, "", "namespaces", "watch") and allowed(clusterwide, "", "nodes", "get")
    # The writes are bound in the watched namespaces only.
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for binding in bindings:
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": "riverlog-operator-namespaced"}
    namespaced = rules_of(docs, "riverlog-operator-namespaced")
    assert allowed(namespaced, "apps", "statefulsets", "create")
    assert allowed(namespaced, "kopf.dev", "kopfpeerings", "patch", "riverlog-operator")


def test_every_optional_part_renders(helm_env: dict[str, str]) -> None:
    docs = render(helm_env, *ALL_ON)
    counts = kinds(docs)
    assert counts["Cluster"] == 1 and counts["Topic"] == 2
    assert counts["ServiceMonitor"] == 4 and counts["PrometheusRule"] == 1 and counts["ConfigMap"] == 1
    cluster = one(docs, "Cluster", "demo")
    assert cluster["apiVersion"] == "riverlog.dev/v1alpha1"
    assert cluster["spec"] == {"replicas": 3, "storage": {"size": "10Gi"}, "config": {}}
    orders = one(docs, "Topic", "orders")
    assert orders["spec"] == {"clusterRef": {"name": "demo"}, "partitions": 6, "replicationFactor": 3,
                              "config": {"retention.ms": "604800000"}}
    assert one(docs, "Topic", "audit")["spec"] == {"clusterRef": {"name": "demo"}}
    dashboard = one(docs, "ConfigMap", "riverlog-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads((CHART / "dashboards" / "riverlog.json").read_text())
    assert json.loads(dashboard["data"]["riverlog.json"]) == shipped
    brokers = one(docs, "ServiceMonitor", "riverlog-brokers")
    # It selects the headless Services the operator makes (port "metrics", Cluster name label).
    from riverlog_operator.builders.common import BuildInputs, labels
    from riverlog_operator.builders.services import build_headless_service
    from riverlog_operator.model import ClusterRef, ClusterSpec

    headless = build_headless_service(BuildInputs(ClusterRef("demo", "prod", "uid-1"), ClusterSpec(), "riverlog:x", 3))
    assert brokers["spec"]["selector"]["matchLabels"].items() <= headless["metadata"]["labels"].items()
    assert "metrics" in [p["name"] for p in headless["spec"]["ports"]]
    endpoint = brokers["spec"]["endpoints"][0]
    assert endpoint["port"] == "metrics"
    assert {"sourceLabels": ["__meta_kubernetes_service_label_riverlog_dev_cluster"],
            "targetLabel": "riverlog_cluster"} in endpoint["relabelings"]
    assert labels("demo")["riverlog.dev/cluster"] == "demo"
    assert brokers["spec"]["namespaceSelector"] == {"any": True}
    # Connect and Mirror workers: their API Services' port "metrics" (spec.metrics.enabled).
    from riverlog_operator.builders.connect import ConnectInputs, Endpoint, WorkerRef, build_api_service
    from riverlog_operator.connect_model import ConnectSpec

    connect_sm = one(docs, "ServiceMonitor", "riverlog-connect")
    for kind in ("Connect", "Mirror"):
        api = build_api_service(ConnectInputs(WorkerRef(kind, "etl", "prod", "uid-2"), ConnectSpec(), "c:x",
                                              Endpoint("k:9092")))
        assert connect_sm["spec"]["selector"]["matchLabels"].items() <= api["metadata"]["labels"].items()
        assert "metrics" in [p["name"] for p in api["spec"]["ports"]]
        assert api["metadata"]["labels"]["app.kubernetes.io/instance"] == "etl"
        assert api["metadata"]["labels"]["app.kubernetes.io/component"] == kind.lower()
    (endpoint,) = connect_sm["spec"]["endpoints"]
    label = "__meta_kubernetes_service_label_app_kubernetes_io_"
    assert endpoint["port"] == "metrics" and endpoint["relabelings"] == [
        {"sourceLabels": [f"{label}instance"], "targetLabel": "riverlog_connect"},
        {"sourceLabels": [f"{label}component"], "targetLabel": "riverlog_kind"}]
    # A Cluster's schema registry (spec.schemaRegistry, metrics on): its Service's port "metrics".
    from riverlog_operator.builders.schema_registry import build_service, inputs_for

    registry_sm = one(docs, "ServiceMonitor", "riverlog-schema-registry")
    spec = ClusterSpec.from_dict({"schemaRegistry": {}})
    registry_inputs = inputs_for(ClusterRef("demo", "prod", "uid-3"), spec, "riverlog:x")
    assert registry_inputs is not None
    registry_service = build_service(registry_inputs)
    assert registry_sm["spec"]["selector"]["matchLabels"].items() <= registry_service["metadata"]["labels"].items()
    assert not brokers["spec"]["selector"]["matchLabels"].items() <= registry_service["metadata"]["labels"].items()
    assert "metrics" in [p["name"] for p in registry_service["spec"]["ports"]]
    # With spec.schemaRegistry.tls the port is "metrics-https", scraped over https.
    https_inputs = inputs_for(ClusterRef("demo", "prod", "uid-3"), ClusterSpec.from_dict(
        {"listeners": [{"name": "TLS", "port": 9093, "tls": True}], "schemaRegistry": {"tls": {}}}), "riverlog:x")
    assert https_inputs is not None
    assert "metrics-https" in [p["name"] for p in build_service(https_inputs)["spec"]["ports"]]
    plain, https = registry_sm["spec"]["endpoints"]
    assert (plain["port"], plain["path"], "scheme" in plain) == ("metrics", "/metrics", False)
    assert (https["port"], https["path"], https["scheme"]) == ("metrics-https", "/metrics", "https")
    assert https["tlsConfig"] == {"insecureSkipVerify": True}
    for endpoint in (plain, https):
        assert endpoint["relabelings"] == [
            {"sourceLabels": ["__meta_kubernetes_service_label_riverlog_dev_cluster"],
             "targetLabel": "riverlog_cluster"},
            {"targetLabel": "riverlog_component", "replacement": "schema-registry"}]
    operator_sm = one(docs, "ServiceMonitor", "riverlog-operator")
    assert operator_sm["spec"]["selector"]["matchLabels"].items() <= one(docs, "Service")["metadata"]["labels"].items()


@pytest.mark.parametrize("bad", [
    ["--set", "operator.replicas=-1"],
    ["--set", "image.pullPolicy=Sometimes"],
    ["--set", "operator.replica=2"],                      # a typo: unknown keys are refused
    ["--set", "metrics.prometheusRule.offlineFor=soon"],
    ["--set", "operator.healthPort=80"],
    ["--set-json", 'topics=[{"name":"t","spec":{"clusterRef":{"name":"x"}}}]'],
    ["--set-json", 'topics=[{"spec":{}}]'],
    ["--set-json", 'operator.watchNamespaces=["Not_A_Namespace"]'],
    ["--set", "connect.networkPolicy.enabled=maybe"],
    ["--set", "connect.networkPolicy.enable=false"],
])
def test_values_schema_refuses_bad_values(helm_env: dict[str, str], bad: list[str]) -> None:
    proc = helm(helm_env, "template", "riverlog", str(CHART), *bad, check=False)
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr, proc.stderr


# --- alerts -------------------------------------------------------------------------------------


def test_alert_rules_fire_when_they_should(helm_env: dict[str, str], tmp_path: Path) -> None:
    docs = render(helm_env, "--set", "metrics.prometheusRule.enabled=true",
                  "--set", "metrics.prometheusRule.consumerLag.threshold=1000",
                  "--set", "metrics.prometheusRule.mirrorLag.thresholdSeconds=120")
    spec = one(docs, "PrometheusRule")["spec"]
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump(spec))
    tool = str(promtool.ensure())
    check = subprocess.run([tool, "check", "rules", str(rules_file)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    # promtool compares annotations exactly: keep the summaries (checked below), drop the prose.
    for group in spec["groups"]:
        for rule in group["rules"]:
            rule["annotations"] = {"summary": rule["annotations"]["summary"]}
    rules_file.write_text(yaml.safe_dump(spec))

    def series(name: str, values: str, **labels: str) -> dict[str, str]:
        inner = ",".join(f'{k}="{v}"' for k, v in {"namespace": "prod", **labels}.items())
        return {"series": f"{name}{{{inner}}}", "values": values}

    demo = {"riverlog_cluster": "demo"}
    calm = {"riverlog_cluster": "calm"}
    etl = {"riverlog_connect": "etl", "riverlog_kind": "connect"}
    dr = {"riverlog_connect": "dr", "riverlog_kind": "mirror"}
    sr_demo = {**demo, "riverlog_component": "schema-registry"}
    sr_calm = {**calm, "riverlog_component": "schema-registry"}
    tests = {"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            # demo: the controller goes away at 2m, a partition goes offline at 2m, a broker stops
            # answering at 2m, one partition is under-replicated from 1m, a group lags.
            series("riverlog_active_controller_count", "1 1 0x20", pod="demo-0", **demo),
            series("riverlog_active_controller_count", "0x22", pod="demo-1", **demo),
            series("riverlog_offline_partitions_count", "0 0 2x20", pod="demo-0", **demo),
            series("riverlog_under_replicated_partitions", "0 1x21", pod="demo-1", **demo),
            series("up", "1 1 0x20", pod="demo-2", **demo),
            series("riverlog_offline_log_dirs_count", "0 0 0 1x19", pod="demo-1", **demo),
            series("riverlog_consumer_group_lag", "5000x22", group="billing", topic="orders", partition="0", **demo),
            # A KIP-848 group with a member behind its target from 2m (and one that catches up).
            series("riverlog_consumer_group_members_reconciling", "0 0 1x20", group="search", pod="demo-1", **demo),
            series("riverlog_consumer_group_members_reconciling", "1 0x21", group="billing", pod="demo-0", **demo),
            # A share group whose start offset stops at 3m with records waiting (and one that moves).
            series("riverlog_share_partition_lag", "5x22", group="jobs", topic="tasks", partition="0", pod="demo-0",
                   **demo),
            series("riverlog_share_partition_start_offset", "100 101 102 103x19", group="jobs", topic="tasks",
                   partition="0", pod="demo-0", **demo),
            series("riverlog_share_partition_lag", "5x22", group="mail", topic="tasks", partition="0", pod="demo-0",
                   **demo),
            series("riverlog_share_partition_start_offset", "0+10x22", group="mail", topic="tasks", partition="0",
                   pod="demo-0", **demo),
            # demo-0 holds a transaction open ever longer (5 minutes more each minute): hanging.
            series("riverlog_transaction_oldest_open_seconds", "0+300x22", pod="demo-0", **demo),
            # calm: healthy, and its small lag stays under the threshold.
            series("riverlog_active_controller_count", "1x22", pod="calm-0", **calm),
            series("riverlog_offline_partitions_count", "0x22", pod="calm-0", **calm),
            series("riverlog_under_replicated_partitions", "0x22", pod="calm-0", **calm),
            series("up", "1x22", pod="calm-0", **calm),
            series("riverlog_offline_log_dirs_count", "0x22", pod="calm-0", **calm),
            series("riverlog_consumer_group_lag", "10x22", group="fast", topic="orders", partition="0", **calm),
            series("riverlog_transaction_oldest_open_seconds", "30x22", pod="calm-0", **calm),
            # The operator's CA expiry gauge: demo's cluster CA ten days out, calm's a year.
            {"series": 'riverlog_operator_ca_expiry_timestamp_seconds{cluster_namespace="prod",cluster="demo",'
                       'ca="cluster"}', "values": "864000x22"},
            {"series": 'riverlog_operator_ca_expiry_timestamp_seconds{cluster_namespace="prod",cluster="calm",'
                       'ca="cluster"}', "values": "31536000x22"},
            # Connect "etl": connector sink-db fails at 2m (its task with it) and stays failed; a
            # second worker stops answering at 2m. Mirror "dr": orders lags ever more from 3m (60 s
            # more each minute), payments stays fresh; the status series of a state that is not
            # the current one are absent, as the exporter reports only the current state.
            series("riverlog_connect_connector_status", "1 1 _x20", connector="sink-db", status="running", **etl),
            series("riverlog_connect_connector_status", "_ _ 1x20", connector="sink-db", status="failed", **etl),
            series("riverlog_connect_task_status", "1 1 _x20", connector="sink-db", task="0", status="running",
                   **etl),
            series("riverlog_connect_task_status", "_ _ 1x20", connector="sink-db", task="0", status="failed", **etl),
            series("riverlog_connect_connector_status", "1x22", connector="source-db", status="running", **etl),
            series("up", "1 1 0x20", pod="etl-connect-7d9-b", **etl),
            series("up", "1x22", pod="etl-connect-7d9-a", **etl),
            series("riverlog_mirror_record_age_max_seconds", "1 1 1 180+60x19", source="old", target="new",
                   topic="old.orders", partition="0", **dr),
            series("riverlog_mirror_record_age_max_seconds", "1x22", source="old", target="new",
                   topic="old.payments", partition="0", **dr),
            # demo's schema registry: its writer steps down at 2m and none takes over; one instance
            # stops answering at 2m (not a broker: RiverlogBrokerDown leaves it out); a third of its
            # requests answer 500 from 2m. calm's registry: one writer, only 200s.
            series("riverlog_schema_registry_writer", "1 1 0x20", pod="demo-schema-registry-a", **sr_demo),
            series("riverlog_schema_registry_writer", "0x22", pod="demo-schema-registry-b", **sr_demo),
            series("up", "1 1 0x20", pod="demo-schema-registry-b", **sr_demo),
            series("riverlog_schema_registry_requests_total", "0+60x22", pod="demo-schema-registry-a", method="GET",
                   endpoint="/subjects", status="200", **sr_demo),
            series("riverlog_schema_registry_requests_total", "0 0 0+30x20", pod="demo-schema-registry-a",
                   method="POST", endpoint="/subjects/{subject}/versions", status="500", **sr_demo),
            series("riverlog_schema_registry_writer", "1x22", pod="calm-schema-registry-a", **sr_calm),
            series("riverlog_schema_registry_writer", "0x22", pod="calm-schema-registry-b", **sr_calm),
            series("up", "1x22", pod="calm-schema-registry-a", **sr_calm),
            series("riverlog_schema_registry_requests_total", "0+60x22", pod="calm-schema-registry-a", method="GET",
                   endpoint="/subjects", status="200", **sr_calm),
        ],
        "alert_rule_test": [
            {"eval_time": "2m", "alertname": "RiverlogActiveControllerAbsent", "exp_alerts": []},
            {"eval_time": "4m", "alertname": "RiverlogActiveControllerAbsent", "exp_alerts": [{
                "exp_labels": {"severity": "critical", "namespace": "prod", "riverlog_cluster": "demo"},
                "exp_annotations": {"summary": "Riverlog cluster prod/demo has 0 active controllers"}}]},
            {"eval_time": "4m", "alertname": "RiverlogOfflinePartitions", "exp_alerts": [{
                "exp_labels": {"severity": "critical", "namespace": "prod", "riverlog_cluster": "demo"},
                "exp_annotations": {"summary": "Offline partitions in Riverlog cluster prod/demo"}}]},
            {"eval_time": "2m", "alertname": "RiverlogLogDirectoryOffline", "exp_alerts": []},
            {"eval_time": "3m", "alertname": "RiverlogLogDirectoryOffline", "exp_alerts": [{
                "exp_labels": {"severity": "critical", "namespace": "prod", "riverlog_cluster": "demo",
                               "pod": "demo-1"},
                "exp_annotations": {"summary": "Riverlog broker prod/demo-1 has 1 offline log directories"}}]},
            {"eval_time": "5m", "alertname": "RiverlogUnderReplicatedPartitions", "exp_alerts": []},
            {"eval_time": "7m", "alertname": "RiverlogUnderReplicatedPartitions", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_cluster": "demo"},
                "exp_annotations": {"summary": "Under-replicated partitions in Riverlog cluster prod/demo"}}]},
            {"eval_time": "8m", "alertname": "RiverlogBrokerDown", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_cluster": "demo",
                               "pod": "demo-2"},
                "exp_annotations": {"summary": "Riverlog broker prod/demo-2 is not answering scrapes"}}]},
            {"eval_time": "9m", "alertname": "RiverlogConsumerLagHigh", "exp_alerts": []},
            {"eval_time": "12m", "alertname": "RiverlogConsumerLagHigh", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_cluster": "demo",
                               "group": "billing", "topic": "orders"},
                "exp_annotations": {"summary": "Consumer group billing lags on orders"}}]},
            # Behind from 2m, firing once that lasted 10 minutes (consumerGroupReconcilingFor).
            {"eval_time": "11m", "alertname": "RiverlogConsumerGroupRebalanceStuck", "exp_alerts": []},
            {"eval_time": "12m", "alertname": "RiverlogConsumerGroupRebalanceStuck", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_cluster": "demo",
                               "group": "search"},
                "exp_annotations": {"summary": "Consumer group search has not finished rebalancing for 10m"}}]},
            # Not moving from 3m: firing once 10 minutes (shareGroupStalledFor) passed without a change.
            {"eval_time": "10m", "alertname": "RiverlogShareGroupStalled", "exp_alerts": []},
            {"eval_time": "16m", "alertname": "RiverlogShareGroupStalled", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_cluster": "demo",
                               "group": "jobs", "topic": "tasks", "partition": "0"},
                "exp_annotations": {"summary": "Share group jobs has not moved on tasks-0 for 10m"}}]},
            {"eval_time": "5m", "alertname": "RiverlogCertificateAuthorityExpiring", "exp_alerts": []},
            {"eval_time": "12m", "alertname": "RiverlogCertificateAuthorityExpiring", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "cluster_namespace": "prod", "cluster": "demo", "ca": "cluster"},
                "exp_annotations": {"summary": "The cluster CA of Riverlog cluster prod/demo expires in less than "
                                               "14 days"}}]},
            # Above 1200 s from 5m on (1500 s), firing once that lasted 5 minutes.
            {"eval_time": "9m", "alertname": "RiverlogTransactionHanging", "exp_alerts": []},
            {"eval_time": "10m", "alertname": "RiverlogTransactionHanging", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_cluster": "demo",
                               "pod": "demo-0"},
                "exp_annotations": {"summary": "A transaction coordinated by Riverlog broker prod/demo-0 "
                                               "has been open for 50m 0s"}}]},
            # Failed from 2m, firing once that lasted 5 minutes (connect.failedFor).
            {"eval_time": "6m", "alertname": "RiverlogConnectorFailed", "exp_alerts": []},
            {"eval_time": "7m", "alertname": "RiverlogConnectorFailed", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_kind": "connect",
                               "riverlog_connect": "etl", "connector": "sink-db"},
                "exp_annotations": {"summary": "Connector sink-db of connect prod/etl has failed"}}]},
            {"eval_time": "7m", "alertname": "RiverlogConnectTaskFailed", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_kind": "connect",
                               "riverlog_connect": "etl", "connector": "sink-db", "task": "0"},
                "exp_annotations": {"summary": "Task 0 of connector sink-db (connect prod/etl) has failed"}}]},
            {"eval_time": "7m", "alertname": "RiverlogConnectWorkerDown", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_kind": "connect",
                               "riverlog_connect": "etl", "pod": "etl-connect-7d9-b"},
                "exp_annotations": {"summary": "Connect worker prod/etl-connect-7d9-b is not answering scrapes"}}]},
            # Above 120 s from 3m (180 s), firing once that lasted 10 minutes; payments never.
            {"eval_time": "12m", "alertname": "RiverlogMirrorLagHigh", "exp_alerts": []},
            {"eval_time": "13m", "alertname": "RiverlogMirrorLagHigh", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_connect": "dr",
                               "source": "old", "target": "new", "topic": "old.orders"},
                "exp_annotations": {"summary": "Mirror prod/dr lags 13m 0s on old.orders"}}]},
            # No writer from 2m, firing once that lasted 5 minutes (schemaRegistry.noWriterFor).
            {"eval_time": "6m", "alertname": "RiverlogSchemaRegistryNoWriter", "exp_alerts": []},
            {"eval_time": "7m", "alertname": "RiverlogSchemaRegistryNoWriter", "exp_alerts": [{
                "exp_labels": {"severity": "critical", "namespace": "prod", "riverlog_cluster": "demo"},
                "exp_annotations": {"summary": "The schema registry of Riverlog cluster prod/demo has 0 writers"}}]},
            {"eval_time": "6m", "alertname": "RiverlogSchemaRegistryInstanceDown", "exp_alerts": []},
            {"eval_time": "7m", "alertname": "RiverlogSchemaRegistryInstanceDown", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_cluster": "demo",
                               "riverlog_component": "schema-registry", "pod": "demo-schema-registry-b"},
                "exp_annotations": {"summary": "Schema registry instance prod/demo-schema-registry-b is not "
                                               "answering scrapes"}}]},
            # Above 5% from 3m (the first rate with a 500 in it), firing once that lasted 10 minutes.
            {"eval_time": "12m", "alertname": "RiverlogSchemaRegistryServerErrors", "exp_alerts": []},
            {"eval_time": "14m", "alertname": "RiverlogSchemaRegistryServerErrors", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "prod", "riverlog_cluster": "demo"},
                "exp_annotations": {"summary": "The schema registry of Riverlog cluster prod/demo answers 33.33% of "
                                               "requests with 5xx"}}]},
        ],
    }]}
    tests_file = tmp_path / "tests.yaml"
    tests_file.write_text(yaml.safe_dump(tests))
    proc = subprocess.run([tool, "test", "rules", tests_file.name], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


# --- against the API server ---------------------------------------------------------------------------


def apply_crds(kube: KubeCluster) -> None:
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    for doc in (d for p in sorted((CHART / "crds").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{doc['metadata']['name']}", "--timeout=60s")


def test_rendered_chart_passes_a_server_side_dry_run(kube: KubeCluster, helm_env: dict[str, str]) -> None:
    apply_crds(kube)
    namespace = kube.namespace("chart-dry-run")
    for extra in ([], [*ALL_ON, *NO_MONITORING_CRDS],
                  ["--set-json", f'operator.watchNamespaces=["{namespace}"]', *ALL_ON, *NO_MONITORING_CRDS]):
        manifest = helm(helm_env, "template", "dry", str(CHART), "--namespace", namespace, *extra).stdout
        proc = kube.kubectl("apply", "--dry-run=server", "-f", "-", input=manifest, check=False)
        assert proc.returncode == 0, proc.stderr
        applied = [line for line in proc.stdout.splitlines() if line.endswith("(server dry run)")]
        assert len(applied) == len([d for d in yaml.safe_load_all(manifest) if d]), proc.stdout
    # The CRDs' own validation runs in the dry run too: a Cluster the CRD refuses fails it.
    bad = helm(helm_env, "template", "dry", str(CHART), "--namespace", namespace, "--set", "cluster.enabled=true",
               "--set-json", 'cluster.spec={"replicas":0}').stdout
    proc = kube.kubectl("apply", "--dry-run=server", "-f", "-", input=bad, check=False)
    assert proc.returncode != 0 and "spec.replicas" in proc.stderr, proc.stderr


def test_helm_install_and_uninstall(kube: KubeCluster) -> None:
    apply_crds(kube)
    namespace = kube.namespace("chart-install")
    release = f"rl-{namespace.rsplit('-', 1)[-1]}"
    kube.helm("install", release, str(CHART), "--namespace", namespace, "--set", "cluster.enabled=true",
              "--set-json", 'topics=[{"name":"orders","spec":{"partitions":3}}]')
    try:
        status = json.loads(kube.helm("status", release, "--namespace", namespace, "-o", "json").stdout)
        assert status["info"]["status"] == "deployed"
        deployment = json.loads(kube.kubectl("get", "deployment", f"{release}-riverlog-operator", "-n", namespace,
                                             "-o", "json").stdout)
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == f"{release}-riverlog-operator"
        # The API server applied the CRDs' defaults to the chart's Cluster and Topic.
        cluster = json.loads(kube.kubectl("get", "clusters.riverlog.dev", release, "-n", namespace, "-o",
                                          "json").stdout)
        assert cluster["spec"]["listeners"] == [{"name": "PLAINTEXT", "port": 9092}]
        topic = json.loads(kube.kubectl("get", "topics.riverlog.dev", "orders", "-n", namespace, "-o", "json").stdout)
        assert topic["spec"]["clusterRef"] == {"name": release} and topic["spec"]["deletionPolicy"] == "Delete"
        # Cluster-wide, the ServiceAccount may do what the operator does anywhere, and no more.
        account = f"system:serviceaccount:{namespace}:{release}-riverlog-operator"
        for args, expected in [(("create", "statefulsets", "-n", "default"), "yes"),
                               (("patch", "clusters.riverlog.dev", "--subresource=status", "-n", "default"), "yes"),
                               (("update", "clusters.riverlog.dev", "--subresource=finalizers", "-n", "x"), "yes"),
                               (("update", "clusters.riverlog.dev", "-n", "default"), "no"),
                               (("create", "clusterkopfpeerings.kopf.dev"), "yes"),
                               (("patch", "clusterkopfpeerings.kopf.dev/riverlog-operator"), "yes"),
                               (("patch", "clusterkopfpeerings.kopf.dev/another"), "no"),
                               (("get", "secrets", "-n", namespace), "yes"),
                               (("list", "secrets", "-n", namespace), "no"),
                               (("watch", "secrets", "-n", namespace), "no"),
                               (("delete", "statefulsets", "-n", "default"), "no"),
                               (("list", "nodes"), "no")]:
            proc = kube.kubectl("auth", "can-i", *args, "--as", account, check=False)
            assert proc.stdout.strip() == expected, (args, proc.stdout, proc.stderr)
        # It writes only its own Secrets: the chart's admission policy refuses it any other.
        def secret(name: str, labels: dict[str, str]) -> str:
            return json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {
                "name": name, "namespace": namespace, "labels": labels}, "stringData": {"k": "v"}})

        wait_until(lambda: kube.kubectl("create", "--dry-run=server", "--as", account, "-f", "-", check=False,
                                        input=secret("someone-elses", {})).returncode != 0,
                   60, "the admission policy in force")
        refused = kube.kubectl("create", "--dry-run=server", "--as", account, "-f", "-", check=False,
                               input=secret("someone-elses", {"app": "x"}))
        assert "writes only its own Secrets" in refused.stderr, refused.stderr
        kube.kubectl("create", "--dry-run=server", "--as", account, "-f", "-",
                     input=secret("demo-cluster-ca", {"app.kubernetes.io/managed-by": "riverlog-operator"}))
        # The controller-manager turns the Deployment into a ReplicaSet and a (Pending) Pod.
        wait_until(lambda: kube.kubectl("get", "pods", "-n", namespace, "-l",
                                        "app.kubernetes.io/component=operator", "-o", "name").stdout.strip(),
                   60, "the operator's pod")
    finally:
        kube.helm("uninstall", release, "--namespace", namespace, "--wait", "--timeout", "60s")
    assert kube.kubectl("get", "clusterrole", f"{release}-riverlog-operator", check=False).returncode != 0


# --- the operator with the chart's permissions only ------------------------------------------------------


def service_account_kubeconfig(kube: KubeCluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount (a TokenRequest token)."""
    token = kube.kubectl("create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(kube.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": cluster["name"], "user": account,
                                                   "namespace": namespace}}],
        "current-context": account,
    }))
    return path


@pytest.fixture(scope="module")
def image_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the image holds in /opt/riverlog (the Dockerfile's build stage, run without Docker):
    the operator runs from there, as in production, not from the test virtualenv."""
    return build_stage(tmp_path_factory.mktemp("image") / "opt-riverlog")


@dataclass(frozen=True)
class OperatorRun:
    namespace: str
    account: str
    clusterwide: bool
    log_path: Path


@pytest.fixture(params=["namespaced", "clusterwide"])
def operator_under_chart_rbac(request: pytest.FixtureRequest, kube: KubeCluster, image_tree: Path,
                              tmp_path: Path) -> Iterator[OperatorRun]:
    """The chart installed in a fresh namespace with no operator replicas; the operator runs
    here instead, from the image's tree with the chart's command, authenticated as the chart's
    ServiceAccount: watching only that namespace, or cluster-wide (the chart's default)."""
    clusterwide = request.param == "clusterwide"
    apply_crds(kube)
    namespace = kube.namespace("chart-rbac")
    release = f"rbac-{namespace.rsplit('-', 1)[-1]}"
    account = f"{release}-riverlog-operator"
    scope = [] if clusterwide else ["--set-json", f'operator.watchNamespaces=["{namespace}"]']
    kube.helm("install", release, str(CHART), "--namespace", namespace, "--set", "operator.replicas=0", *scope)
    kubeconfig = service_account_kubeconfig(kube, namespace, account, tmp_path / "sa.kubeconfig")
    env = {k: v for k, v in kube.env().items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(KUBECONFIG=str(kubeconfig), RIVERLOG_OPERATOR_METRICS_PORT="0", RIVERLOG_OPERATOR_IMAGE="riverlog:test",
               # Above kopf's random default: a peer left by an earlier test never pauses this one.
               RIVERLOG_OPERATOR_PRIORITY=str(1 << 31))
    deployment = one(render(kube.env(), *scope, namespace=namespace, release=release), "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command = [str(image_tree / "venv" / "bin" / container["command"][0]), *container["command"][1:]]
    log_path = tmp_path / "operator.log"
    args = container.get("args", [])  # the chart's: --namespace=<each watched one> or nothing
    with log_path.open("w") as log:
        proc = subprocess.Popen([*command, *args, "--verbose"], cwd=image_tree, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield OperatorRun(namespace, f"system:serviceaccount:{namespace}:{account}", clusterwide, log_path)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        kube.kubectl("delete", "clusters.riverlog.dev,topics.riverlog.dev", "--all", "-n", namespace, "--wait=false",
                     check=False)
        kube.helm("uninstall", release, "--namespace", namespace, "--timeout", "60s", check=False)


def test_operator_reconciles_with_only_the_charts_permissions(
        kube: KubeCluster, operator_under_chart_rbac: OperatorRun) -> None:
    run = operator_under_chart_rbac
    namespace = run.namespace
    kube.kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples" / "cluster.yaml"))
    kube.kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples" / "topic.yaml"))

    def conditions(resource: str) -> list[dict[str, Any]]:
        obj = json.loads(kube.kubectl("get", resource, "-n", namespace, "-o", "json").stdout)
        found: list[dict[str, Any]] = obj.get("status", {}).get("conditions") or []
        return found

    def children() -> bool:
        names = {"statefulset/demo", "service/demo-brokers", "service/demo-bootstrap", "configmap/demo-config",
                 "poddisruptionbudget/demo", "serviceaccount/demo-broker"}
        return all(kube.kubectl("get", name, "-n", namespace, check=False).returncode == 0 for name in names)

    try:
        wait_until(children, 120, "the Cluster's StatefulSet, Services, ConfigMap, PDB and ServiceAccount")
        wait_until(lambda: conditions("clusters.riverlog.dev/demo"), 60, "status conditions on the Cluster")
        # No broker runs here (no kubelet): the Topic says so in its status, which the operator
        # may write, and holds the finalizer it may patch on.
        wait_until(lambda: conditions("topics.riverlog.dev/orders"), 60, "status conditions on the Topic")
        if run.clusterwide:
            # Peering: the operator found or made the ClusterKopfPeering and announced itself in it.
            wait_until(lambda: json.loads(kube.kubectl("get", "clusterkopfpeerings.kopf.dev", "riverlog-operator",
                                                       "-o", "json").stdout).get("status"),
                       60, "the operator in the ClusterKopfPeering")
    finally:
        log = run.log_path.read_text()
    assert "Forbidden" not in log and "forbidden" not in log, log[-4000:]
    # The permissions stop where the chart says.
    for verb, resource, ns, expected in [("create", "statefulsets", namespace, "yes"),
                                         ("create", "statefulsets", "default", "yes" if run.clusterwide else "no"),
                                         # Secrets by name only (issue #18), never enumerated.
                                         ("get", "secrets", namespace, "yes"),
                                         ("list", "secrets", namespace, "no"),
                                         ("delete", "statefulsets", namespace, "no"),
                                         # A Connect's REST API NetworkPolicy: applied, or deleted
                                         # when turned off.
                                         ("create", "networkpolicies.networking.k8s.io", namespace, "yes"),
                                         ("patch", "networkpolicies.networking.k8s.io", namespace, "yes"),
                                         ("delete", "networkpolicies.networking.k8s.io", namespace, "yes"),
                                         ("list", "networkpolicies.networking.k8s.io", namespace, "no")]:
        proc = kube.kubectl("auth", "can-i", verb, resource, "-n", ns, "--as", run.account, check=False)
        assert proc.stdout.strip() == expected, (verb, resource, ns, proc.stdout, proc.stderr)
