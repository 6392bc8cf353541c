"""Acceptance 5 (issue #6), against the real API server: spark/k8s's manifests pass a server-side
dry run, the drivers' RBAC (file and chart option) allows what a driver does and no more, and the
documented spark-submit (spark/k8s/submit.sh) creates a driver pod from the pod template, with
its ServiceAccount, security settings and checkpoint volume. No kubelet runs, so the pod stays
Pending; what Spark asked the API server for is what is checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.kube import KubeCluster, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "spark" / "k8s"
CHART = ROOT / "charts" / "riverlog"


def docs(name: str, namespace: str) -> list[dict[str, Any]]:
    """A manifest of spark/k8s with its namespace (riverlog) replaced, as `kubectl -n` users would."""
    out = []
    for doc in yaml.safe_load_all((K8S / name).read_text()):
        if not doc:
            continue
        if "namespace" in doc.get("metadata", {}):
            doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
        out.append(doc)
    return out


def as_input(items: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(items)


def service_account(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:riverlog-spark"


def can(kube: KubeCluster, namespace: str, verb: str, resource: str, *, where: str | None = None) -> bool:
    proc = kube.kubectl("auth", "can-i", verb, resource, "-n", where or namespace,
                        "--as", service_account(namespace), check=False)
    return proc.stdout.strip() == "yes"


def assert_driver_rights(kube: KubeCluster, namespace: str) -> None:
    for verb in ("create", "get", "list", "watch", "delete", "deletecollection"):
        for resource in ("pods", "services", "configmaps", "persistentvolumeclaims"):
            assert can(kube, namespace, verb, resource), (verb, resource)
    # Nothing beyond what a driver manages, and nothing outside its namespace.
    assert not can(kube, namespace, "create", "secrets")
    assert not can(kube, namespace, "create", "deployments")
    assert not can(kube, namespace, "create", "pods", where="default")


def test_manifests_pass_a_server_side_dry_run(kube: KubeCluster) -> None:
    ns = kube.namespace("spark-dry")
    everything = [*docs("rbac.yaml", ns), *docs("checkpoints-pvc.yaml", ns)]
    out = kube.kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", input=as_input(everything)).stdout
    assert out.count("(server dry run)") == 4, out
    # The pod templates are Pods to the API server: validated, defaulted, admitted (the driver's
    # ServiceAccount must exist for that, as it must before a spark-submit).
    kube.kubectl("apply", "-n", ns, "-f", "-", input=as_input(docs("rbac.yaml", ns)))
    for name in ("driver-pod-template.yaml", "executor-pod-template.yaml"):
        pod = docs(name, ns)[0]
        pod["metadata"]["name"] = name.removesuffix("-pod-template.yaml")
        out = kube.kubectl("create", "--dry-run=server", "-n", ns, "-o", "json", "-f", "-",
                           input=as_input([pod])).stdout
        assert json.loads(out)["spec"]["securityContext"]["runAsUser"] == 10001


def test_driver_rbac_allows_what_a_driver_does(kube: KubeCluster) -> None:
    ns = kube.namespace("spark-rbac")
    kube.kubectl("apply", "-n", ns, "-f", "-", input=as_input(docs("rbac.yaml", ns)))
    assert_driver_rights(kube, ns)
    # An executor pod as the driver would create it, with the driver's identity.
    executor = docs("executor-pod-template.yaml", ns)[0]
    executor["metadata"]["name"] = "riverlog-etl-exec-1"
    kube.kubectl("create", "--dry-run=server", "-n", ns, "--as", service_account(ns), "-f", "-",
                 input=as_input([executor]))


def test_chart_option_gives_the_same_rbac(kube: KubeCluster) -> None:
    ns = kube.namespace("spark-chart")
    rendered = kube.helm("template", "rl", str(CHART), "--namespace", ns, "--set", "spark.rbac.create=true",
                         "--set", "rbac.create=false", "--set", "serviceAccount.create=false").stdout
    spark = [d for d in yaml.safe_load_all(rendered)
             if d and d.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component") == "spark"]
    assert sorted(d["kind"] for d in spark) == ["Role", "RoleBinding", "ServiceAccount"]
    role = next(d for d in spark if d["kind"] == "Role")
    assert role["rules"] == next(d for d in docs("rbac.yaml", ns) if d["kind"] == "Role")["rules"]
    kube.kubectl("apply", "-n", ns, "-f", "-", input=as_input(spark))
    assert_driver_rights(kube, ns)
    off = kube.helm("template", "rl", str(CHART), "--namespace", ns).stdout
    assert "riverlog-spark" not in off


def test_documented_spark_submit_creates_the_driver_pod(kube: KubeCluster, tmp_path: Path) -> None:
    ns = kube.namespace("spark-submit")
    kube.kubectl("apply", "-n", ns, "-f", "-",
                 input=as_input([*docs("rbac.yaml", ns), *docs("checkpoints-pvc.yaml", ns)]))
    import pyspark

    env = kube.env()
    env.update(
        K8S_API=kube.server, NAMESPACE=ns, WAIT="false", EXECUTORS="1",
        SPARK_SUBMIT=str(Path(sys.executable).parent / "spark-submit"),
        SPARK_HOME=str(Path(pyspark.__file__).parent),
        # spark-submit's own JVM runs here; keep it on loopback.
        SPARK_LOCAL_IP="127.0.0.1",
    )
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    proc = subprocess.run(
        ["sh", str(K8S / "submit.sh"), "etl", "--bootstrap", f"demo-bootstrap.{ns}.svc:9092",
         "--checkpoint", "/var/lib/riverlog-spark/checkpoints/etl"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    def driver() -> dict[str, Any] | None:
        pods = json.loads(kube.kubectl("get", "pods", "-n", ns, "-l", "spark-role=driver", "-o", "json").stdout)
        return pods["items"][0] if pods["items"] else None

    pod = wait_until(driver, 60, "the driver pod")
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "riverlog-spark"
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10001
    container = spec["containers"][0]
    assert container["name"] == "spark-kubernetes-driver"
    assert container["image"] == "riverlog-spark:0.1.0"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # The image's entrypoint gets "driver" and spark-submit's arguments for the Python main file.
    args = container["args"]
    assert args[0] == "driver"
    assert args[args.index("--class") + 1] == "org.apache.spark.deploy.PythonRunner"
    main = args.index("local:///opt/riverlog/spark/riverlog_spark/__main__.py")
    assert args[main + 1:main + 3] == ["run", "etl"]
    assert f"demo-bootstrap.{ns}.svc:9092" in args
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["checkpoints"]["persistentVolumeClaim"]["claimName"] == "riverlog-spark-checkpoints"
    assert {"name": "checkpoints", "mountPath": "/var/lib/riverlog-spark/checkpoints"} in container["volumeMounts"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "driver"
    # And the driver's Service that executors will connect to.
    services = json.loads(kube.kubectl("get", "services", "-n", ns, "-o", "json").stdout)["items"]
    assert any(s["metadata"]["name"].endswith("-driver-svc") for s in services)
