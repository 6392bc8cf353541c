"""The e2e tier's test node against a real API server: Pods run as local processes, get their
own loopback IP, report readiness, restart, die on deletion; PVCs get local-directory PVs."""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from node_agent.agent import NodeAgent
from support.kube import KubeCluster, wait_until

pytestmark = pytest.mark.e2e

WAIT = 60.0


def apply(kube: KubeCluster, ns: str, *objects: dict[str, Any]) -> None:
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                 "items": list(objects)}))


def pod_obj(kube: KubeCluster, ns: str, name: str) -> dict[str, Any] | None:
    proc = kube.kubectl("get", "pod", name, "-n", ns, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def is_ready(pod: dict[str, Any] | None) -> bool:
    if not pod or pod["status"].get("phase") != "Running":
        return False
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def pid_of(pod: dict[str, Any]) -> int:
    return int(pod["status"]["containerStatuses"][0]["containerID"].removeprefix("local://"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie not yet reaped by the agent counts as dead.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def container_log(agent: NodeAgent, ns: str, name: str, container: str) -> str:
    runs = [r for r in agent.pods.values() if r.key == f"{ns}/{name}"]
    if not runs:
        return ""
    path = runs[0].directory / f"{container}.log"
    return path.read_text() if path.exists() else ""


def http_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "web", "image": "python:3.11",
                "command": ["python", "-m", "http.server", "--bind", "$(POD_IP)", "8080"],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "ports": [{"name": "http", "containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
            }],
        },
    }


def test_http_pod_becomes_ready_is_reachable_and_dies_on_deletion(kube: KubeCluster, node: NodeAgent) -> None:
    ns = kube.namespace("e2e-http")
    apply(kube, ns, http_pod("web"))
    pod = wait_until(lambda: (p := pod_obj(kube, ns, "web")) and is_ready(p) and p, WAIT, "pod web Ready")
    assert pod["spec"]["nodeName"] == node.node_name
    ip = pod["status"]["podIP"]
    assert ip.startswith("127.") and ip != "127.0.0.1"
    with urllib.request.urlopen(f"http://{ip}:8080/", timeout=10) as resp:
        assert resp.status == 200
    pid = pid_of(pod)
    assert alive(pid)
    kube.kubectl("delete", "pod", "web", "-n", ns, "--wait=false")
    wait_until(lambda: pod_obj(kube, ns, "web") is None, WAIT, "pod web removed")
    wait_until(lambda: not alive(pid), WAIT, "process of pod web gone")


def test_restart_policy_always_restarts_a_crashed_container(kube: KubeCluster, node: NodeAgent) -> None:
    ns = kube.namespace("e2e-restart")
    apply(kube, ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher"},
        "spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "main", "image": "none", "command": ["python", "-c", "import sys; sys.exit(3)"]}]},
    })

    def restarted() -> dict[str, Any] | None:
        pod = pod_obj(kube, ns, "crasher")
        statuses = (pod or {}).get("status", {}).get("containerStatuses", [])
        return statuses[0] if statuses and statuses[0]["restartCount"] >= 2 else None

    status = wait_until(restarted, WAIT, "crasher restarted twice")
    assert status["lastState"]["terminated"]["exitCode"] == 3
    assert pod_obj(kube, ns, "crasher")["status"]["phase"] == "Running"  # type: ignore[index]
    kube.kubectl("delete", "pod", "crasher", "-n", ns, "--wait=false")
    wait_until(lambda: pod_obj(kube, ns, "crasher") is None, WAIT, "pod crasher removed")


def test_restart_policy_never_reports_failed(kube: KubeCluster, node: NodeAgent) -> None:
    ns = kube.namespace("e2e-never")
    apply(kube, ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "once"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "none", "command": ["python", "-c", "raise SystemExit(7)"]}]},
    })
    pod = wait_until(lambda: (p := pod_obj(kube, ns, "once")) and p["status"].get("phase") == "Failed" and p,
                     WAIT, "pod once Failed")
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 7
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def test_pvc_is_bound_and_its_data_survives_pod_recreation(kube: KubeCluster, node: NodeAgent) -> None:
    ns = kube.namespace("e2e-pvc")
    mount = "/mnt/riverlog-e2e-data"
    apply(kube, ns, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"storageClassName": "e2e-local", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}},
    })

    def writer(word: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "writer"},
            "spec": {"terminationGracePeriodSeconds": 2, "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [{
                    "name": "main", "image": "none", "volumeMounts": [{"name": "data", "mountPath": mount}],
                    "command": ["sh", "-c", f"echo {word} >> {mount}/words && exec sleep 3600"],
                    "readinessProbe": {"exec": {"command": ["grep", "-q", word, f"{mount}/words"]},
                                       "periodSeconds": 1},
                }]},
        }

    apply(kube, ns, writer("first"))
    wait_until(lambda: is_ready(pod_obj(kube, ns, "writer")), WAIT, "first writer Ready")
    pvc = json.loads(kube.kubectl("get", "pvc", "data", "-n", ns, "-o", "json").stdout)
    assert pvc["status"]["phase"] == "Bound"
    pv = json.loads(kube.kubectl("get", "pv", pvc["spec"]["volumeName"], "-o", "json").stdout)
    directory = Path(pv["spec"]["hostPath"]["path"])
    kube.kubectl("delete", "pod", "writer", "-n", ns, "--wait=false")
    wait_until(lambda: pod_obj(kube, ns, "writer") is None, WAIT, "first writer removed")
    apply(kube, ns, writer("second"))
    wait_until(lambda: is_ready(pod_obj(kube, ns, "writer")), WAIT, "second writer Ready")
    assert (directory / "words").read_text().split() == ["first", "second"]
    # The mount was private to the pod: the host's directory of that name stays empty.
    assert not Path(mount, "words").exists()
    kube.kubectl("delete", "pod", "writer", "-n", ns, "--wait=false")
    wait_until(lambda: pod_obj(kube, ns, "writer") is None, WAIT, "second writer removed")


def test_env_from_field_refs_configmaps_and_secrets(kube: KubeCluster, node: NodeAgent) -> None:
    ns = kube.namespace("e2e-env")
    names = ["MY_NAME", "MY_NS", "MY_IP", "MY_NODE", "FROM_CM", "FROM_SECRET", "COMPOSED"]
    script = f"import os; print('ENV ' + ' '.join(os.environ[n] for n in {names!r}), flush=True); " \
             "import time; time.sleep(3600)"
    apply(kube, ns,
          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"color": "blue"}},
          {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}},
          {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "envy"},
           "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
               "name": "main", "image": "none", "command": [sys.executable.rsplit("/", 1)[-1], "-c", script],
               "env": [
                   {"name": "MY_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                   {"name": "MY_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                   {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                   {"name": "MY_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                   {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
                   {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                   {"name": "COMPOSED", "value": "$(MY_NAME)-$(FROM_CM)"},
               ]}]}})
    pod = wait_until(lambda: (p := pod_obj(kube, ns, "envy")) and is_ready(p) and p, WAIT, "pod envy Ready")
    line = wait_until(
        lambda: next((ln for ln in container_log(node, ns, "envy", "main").splitlines() if ln.startswith("ENV ")),
                     None), WAIT, "env line printed")
    assert line.split()[1:] == ["envy", ns, pod["status"]["podIP"], node.node_name, "blue", "s3cret",
                                "envy-blue"]
    kube.kubectl("delete", "pod", "envy", "-n", ns, "--wait=false")
    wait_until(lambda: pod_obj(kube, ns, "envy") is None, WAIT, "pod envy removed")
