"""The e2e tier's test node against a real API server: Pods run as local processes, get their
own loopback IP, report readiness, restart, die on deletion, see their mounted Secrets and
ConfigMaps change while they run; PVCs get local-directory PVs."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
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


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_mounted_secret_and_configmap_are_updated_in_place(kube: KubeCluster, node: NodeAgent) -> None:
    """A running container sees a changed Secret and ConfigMap through its mount paths, as on a
    kubelet: same process, no restart, removed keys gone, untouched volumes not rewritten."""
    ns = kube.namespace("e2e-live")
    mounts = {"secret": "/mnt/riverlog-e2e-live-secret", "config": "/mnt/riverlog-e2e-live-config"}
    # Prints what it reads through the mounts (keys, not the kubelet's ..data entries) whenever that
    # changes; a key removed between listdir and open is read again on the next round.
    script = (
        "import json, os, time\n"
        f"mounts = {mounts!r}\n"
        "last = None\n"
        "while True:\n"
        "    try:\n"
        "        seen = {v: {k: open(os.path.join(d, k)).read() for k in sorted(os.listdir(d))\n"
        "                    if not k.startswith('.')} for v, d in mounts.items()}\n"
        "    except OSError:\n"
        "        seen = None\n"
        "    if seen is not None:\n"
        "        line = json.dumps({'pid': os.getpid(), **seen}, sort_keys=True)\n"
        "        if line != last:\n"
        "            print('SEEN ' + line, flush=True)\n"
        "            last = line\n"
        "    time.sleep(0.5)\n"
    )

    def secret(data: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                "data": {k: b64(v) for k, v in data.items()}}

    def configmap(data: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": data}

    def replace(obj: dict[str, Any]) -> None:
        kube.kubectl("replace", "-n", ns, "-f", "-", input=json.dumps(obj))

    apply(kube, ns, secret({"user": "alice", "password": "one", "extra": "gone soon"}),
          configmap({"color": "blue"}),
          {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "reader"},
           "spec": {"terminationGracePeriodSeconds": 1,
                    "volumes": [{"name": "secret", "secret": {"secretName": "creds"}},
                                {"name": "config", "configMap": {"name": "settings"}}],
                    "containers": [{
                        "name": "main", "image": "none",
                        "command": [sys.executable.rsplit("/", 1)[-1], "-c", script],
                        "volumeMounts": [{"name": "secret", "mountPath": mounts["secret"], "readOnly": True},
                                         {"name": "config", "mountPath": mounts["config"]}]}]}})
    pod = wait_until(lambda: (p := pod_obj(kube, ns, "reader")) and is_ready(p) and p, WAIT, "pod reader Ready")
    pid = pid_of(pod)

    def seen(expected: dict[str, Any]) -> dict[str, Any] | None:
        lines = [ln for ln in container_log(node, ns, "reader", "main").splitlines() if ln.startswith("SEEN ")]
        last = json.loads(lines[-1].removeprefix("SEEN ")) if lines else None
        return last if last == {"pid": pid, **expected} else None

    wait_until(lambda: seen({"secret": {"user": "alice", "password": "one", "extra": "gone soon"},
                             "config": {"color": "blue"}}), WAIT, "initial content read through the mounts")

    # The agent's side: the kubelet's layout, in directories that stay the same inode.
    run = next(r for r in node.pods.values() if r.key == f"{ns}/reader")
    secret_dir, config_dir = run.volumes["secret"], run.volumes["config"]
    inodes = (secret_dir.stat().st_ino, config_dir.stat().st_ino)
    config_version = os.readlink(config_dir / "..data")
    assert config_version.startswith("..") and (config_dir / config_version).is_dir()
    assert os.readlink(config_dir / "color") == "..data/color"
    secret_version = os.readlink(secret_dir / "..data")

    replace(secret({"user": "alice", "password": "two", "added": "new key"}))
    wait_until(lambda: seen({"secret": {"user": "alice", "password": "two", "added": "new key"},
                             "config": {"color": "blue"}}), WAIT, "updated Secret read through the mount")
    assert not (secret_dir / "extra").exists() and not (secret_dir / "extra").is_symlink()
    new_secret_version = os.readlink(secret_dir / "..data")
    assert new_secret_version != secret_version and not (secret_dir / secret_version).exists()
    assert os.readlink(config_dir / "..data") == config_version  # unchanged: not rewritten

    replace(configmap({"color": "green"}))
    wait_until(lambda: seen({"secret": {"user": "alice", "password": "two", "added": "new key"},
                             "config": {"color": "green"}}), WAIT, "updated ConfigMap read through the mount")
    assert os.readlink(secret_dir / "..data") == new_secret_version
    assert (secret_dir.stat().st_ino, config_dir.stat().st_ino) == inodes

    # A required Secret deleted while the pod runs: the volume keeps its last content.
    errors_before = len(node.errors)
    kube.kubectl("delete", "secret", "creds", "-n", ns)
    time.sleep(3 * node.volume_refresh + 1)
    assert (secret_dir / "password").read_text() == "two"
    assert node.errors[errors_before:] == []

    pod = pod_obj(kube, ns, "reader")
    assert pod is not None and is_ready(pod)
    assert pid_of(pod) == pid and alive(pid)
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    assert seen({"secret": {"user": "alice", "password": "two", "added": "new key"}, "config": {"color": "green"}})
    kube.kubectl("delete", "pod", "reader", "-n", ns, "--wait=false")
    wait_until(lambda: pod_obj(kube, ns, "reader") is None, WAIT, "pod reader removed")
    wait_until(lambda: not alive(pid), WAIT, "process of pod reader gone")
