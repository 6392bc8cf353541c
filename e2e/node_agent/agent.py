"""The node agent: Node registration and heartbeat, binding, and Pods run as local processes.

See the package docstring for what it emulates and what it does not. One asyncio loop polls the
API server (a list of all pods per tick: simple and robust for a test cluster of a few dozen
pods); blocking calls run in worker threads. A second task refreshes the ConfigMap, Secret,
downwardAPI and projected volumes of running pods every ``volume_refresh`` seconds, one pod at a
time in one worker thread, so the main tick is not held up by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from node_agent import podspec
from node_agent.kubeapi import Conflict, KubeApi, NotFound
from node_agent.probes import ProbeState, run_probe

Obj = dict[str, Any]
LAUNCHER = Path(__file__).with_name("launch.py")
SHIM_DIR = Path(__file__).with_name("podshim")
TICK = 0.3
HEARTBEAT = 10.0
BACKOFF_START, BACKOFF_MAX = 1.0, 10.0
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class ContainerRun:
    spec: Obj
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    restarts: int = 0
    started_at: str = ""
    probe: ProbeState | None = None
    last_state: Obj = field(default_factory=dict)
    terminated: Obj | None = None  # the state once it exited and will not be restarted (yet)
    next_start: float = 0.0
    backoff: float = BACKOFF_START
    waiting_reason: str = "ContainerCreating"

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class PodRun:
    pod: Obj
    ip: str
    directory: Path
    containers: list[ContainerRun]
    started: bool = False
    start_error: str = ""
    start_time: str = ""
    deleting: bool = False
    last_status: str = ""
    volumes: dict[str, Path] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.pod['metadata']['namespace']}/{self.pod['metadata']['name']}"


class NodeAgent:
    def __init__(self, kubeconfig: str | Path, workdir: Path, node_name: str = "e2e-node",
                 bin_dir: str | None = None, ip_prefix: str = "127.77", volume_refresh: float = 2.0,
                 image_env: Mapping[str, str] | None = None) -> None:
        self.api = KubeApi(str(kubeconfig))
        host_port = self.api.server.split("://", 1)[-1].rstrip("/")
        self.api_host, _, self.api_port = host_port.rpartition(":")
        self.workdir = Path(workdir)
        self.node_name = node_name
        self.bin_dir = bin_dir or str(Path(sys.executable).parent)
        self.ip_prefix = ip_prefix
        # Seconds between two refreshes of a running pod's ConfigMap/Secret/downwardAPI/projected
        # volumes (a kubelet syncs about every minute; tests want to see updates sooner).
        self.volume_refresh = volume_refresh
        # What the images would have set (e.g. where the Connect image keeps Kafka's jars): every
        # container starts with it; the Pod's own env overrides it, as over an image's ENV.
        self.image_env = dict(image_env or {})
        self.pods: dict[str, PodRun] = {}  # by uid
        self._next_ip = 2
        self._last_heartbeat = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._hosts_text = ""
        self.errors: list[str] = []  # unexpected exceptions of the loop, for test diagnostics

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.register_node()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._loop()), name="node-agent", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        for run in list(self.pods.values()):
            for c in run.containers:
                _kill_now(c)
        self.pods.clear()
        self.api.close()

    async def _loop(self) -> None:
        refresher = asyncio.create_task(self._refresh_volumes_loop())
        try:
            await self._main_loop()
        finally:
            refresher.cancel()

    async def _main_loop(self) -> None:
        while not self._stop.is_set():
            try:
                await asyncio.to_thread(self._heartbeat_if_due)
                await self._tick()
            except Exception as exc:  # noqa: BLE001 - a test node keeps going, like a kubelet
                self.errors.append(repr(exc))
            await asyncio.sleep(TICK)

    # --- node ------------------------------------------------------------------------------

    def _node_status(self) -> Obj:
        now = _now()
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e node agent",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
        return {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "250", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "250", "ephemeral-storage": "100Gi"},
            "conditions": [ready],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                          {"type": "Hostname", "address": self.node_name}],
            "nodeInfo": {"kubeletVersion": "v0.0.0-e2e", "operatingSystem": "linux", "architecture": "amd64",
                         "containerRuntimeVersion": "local-process://0", "kernelVersion": os.uname().release,
                         "osImage": "e2e node agent", "kubeProxyVersion": "", "machineID": "", "systemUUID": "",
                         "bootID": ""},
        }

    def register_node(self) -> None:
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.node_name,
                             "labels": {"kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux",
                                        "topology.kubernetes.io/zone": "zone-a"}}}
        with contextlib.suppress(Conflict):
            self.api.post("/api/v1/nodes", body)
        self._last_heartbeat = 0.0
        self._heartbeat_if_due()

    def _heartbeat_if_due(self) -> None:
        if time.monotonic() - self._last_heartbeat < HEARTBEAT:
            return
        self._last_heartbeat = time.monotonic()
        self.api.merge_patch(f"/api/v1/nodes/{self.node_name}/status", {"status": self._node_status()})
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.node_name}"
        renew = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        spec = {"holderIdentity": self.node_name, "leaseDurationSeconds": 40, "renewTime": renew}
        try:
            self.api.merge_patch(lease_path, {"spec": spec})
        except NotFound:
            self.api.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                          {"metadata": {"name": self.node_name}, "spec": spec})

    # --- pods ------------------------------------------------------------------------------

    async def _tick(self) -> None:
        listing = await asyncio.to_thread(self.api.get, "/api/v1/pods")
        seen: set[str] = set()
        for pod in listing.get("items", []):
            meta, spec = pod["metadata"], pod["spec"]
            if not spec.get("nodeName"):
                if not meta.get("deletionTimestamp"):
                    await asyncio.to_thread(self._bind, pod)
                continue
            if spec["nodeName"] != self.node_name:
                continue
            uid = meta["uid"]
            seen.add(uid)
            run = self.pods.get(uid)
            if run is None:
                if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                    continue  # finished before this agent (re)started
                run = self.pods[uid] = self._new_run(pod)
            else:
                run.pod = pod
            if meta.get("deletionTimestamp") and not run.deleting:
                run.deleting = True
                asyncio.create_task(self._terminate(run, delete=True))
        for uid in list(self.pods):
            if uid not in seen and not self.pods[uid].deleting:
                # Removed without a graceful deletion (force delete): stop it all the same.
                run = self.pods[uid]
                run.deleting = True
                asyncio.create_task(self._terminate(run, delete=False))
        await asyncio.to_thread(self._write_hosts, listing.get("items", []))
        for run in list(self.pods.values()):
            if run.deleting:
                continue
            await self._drive(run)

    async def _refresh_volumes_loop(self) -> None:
        """Live updates of mounted ConfigMaps, Secrets and downward API fields, as a kubelet makes
        them (subPath mounts excepted: those bind the file of the version current at start)."""
        while not self._stop.is_set():
            for run in list(self.pods.values()):
                # Not for finished pods: nothing reads their volumes any more (nor does a kubelet).
                if not run.started or run.deleting or self._stop.is_set() \
                        or not any(c.running() for c in run.containers):
                    continue
                try:
                    await asyncio.to_thread(podspec.refresh_volumes, self.api, self._pod_with_ip(run),
                                            run.directory)
                except Exception as exc:  # noqa: BLE001 - as in the main loop
                    self.errors.append(f"volume refresh of {run.key}: {exc!r}")
            await asyncio.sleep(self.volume_refresh)

    def _bind(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if pod["spec"].get("schedulerName", "default-scheduler") != "default-scheduler":
            return
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"], "uid": meta["uid"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name}}
        with contextlib.suppress(Conflict, NotFound):  # bound meanwhile or gone
            self.api.post(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding", body)

    def _new_run(self, pod: Obj) -> PodRun:
        ip = f"{self.ip_prefix}.{self._next_ip // 250}.{self._next_ip % 250 + 2}"
        self._next_ip += 1
        meta = pod["metadata"]
        directory = self.workdir / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"
        directory.mkdir(parents=True, exist_ok=True)
        return PodRun(pod=pod, ip=ip, directory=directory,
                      containers=[ContainerRun(spec=c) for c in pod["spec"].get("containers", [])])

    def _pod_with_ip(self, run: PodRun) -> Obj:
        pod = dict(run.pod)
        pod["status"] = {**pod.get("status", {}), "podIP": run.ip, "hostIP": "127.0.0.1"}
        return pod

    def _start_container(self, run: PodRun, c: ContainerRun, volumes: dict[str, Path]) -> None:
        pod = self._pod_with_ip(run)
        hostname = pod["spec"].get("hostname") or pod["metadata"]["name"]
        # PATH: the images' entrypoints this node stands in for (podshim/bin), then the agent's
        # Python environment.
        env = {**self.image_env,
               "PATH": f"{SHIM_DIR / 'bin'}:{self.bin_dir}:{SYSTEM_PATH}", "HOME": "/root", "HOSTNAME": hostname,
               # In-cluster clients find the API server here (a kubelet injects the `kubernetes`
               # Service's ClusterIP, which nothing routes on this node).
               "KUBERNETES_SERVICE_HOST": self.api_host, "KUBERNETES_SERVICE_PORT": self.api_port}
        env.update(podspec.container_env(self.api, pod, c.spec))
        # Wildcard binds narrowed to the pod IP (see podshim/sitecustomize.py).
        env["RIVERLOG_E2E_POD_IP"] = run.ip
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SHIM_DIR), env.get("PYTHONPATH", "")) if p)
        argv = podspec.container_argv(c.spec, env)
        mounts: list[list[Any]] = [[str(run.directory / "hosts"), "/etc/hosts", False]]
        for vm in c.spec.get("volumeMounts", []):
            source = volumes[vm["name"]]
            if vm.get("subPath"):
                source = source / vm["subPath"]
                if not source.exists():  # a key of a ConfigMap/Secret volume is a file (symlink)
                    source.mkdir(parents=True)
            mounts.append([str(source), vm["mountPath"], bool(vm.get("readOnly", False))])
        spec_file = run.directory / f"{c.name}.launch.json"
        spec_file.write_text(json.dumps({"mounts": mounts, "argv": argv, "env": env,
                                         "cwd": c.spec.get("workingDir") or "/", "hostname": hostname,
                                         "keep": [sys.prefix, str(Path(__file__).parent), str(run.directory)]}))
        if c.log is None:
            c.log = open(run.directory / f"{c.name}.log", "ab")  # noqa: SIM115 - closed on termination
        c.proc = subprocess.Popen(
            ["unshare", "--mount", "--uts", "--propagation", "private", "--", sys.executable, str(LAUNCHER),
             str(spec_file)],
            stdout=c.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        c.started_at = _now()
        c.terminated = None
        c.probe = ProbeState(c.spec.get("readinessProbe"), time.monotonic())

    async def _drive(self, run: PodRun) -> None:
        now = time.monotonic()
        if not run.started:
            try:
                (run.directory / "hosts").touch()
                volumes = await asyncio.to_thread(podspec.materialize_volumes, self.api, self._pod_with_ip(run),
                                                  run.directory)
                for c in run.containers:
                    await asyncio.to_thread(self._start_container, run, c, volumes)
                run.started, run.start_error, run.start_time = True, "", _now()
                run.volumes = volumes
            except podspec.PodSpecError as exc:
                run.start_error = str(exc)
        else:
            policy = run.pod["spec"].get("restartPolicy", "Always")
            for c in run.containers:
                if c.proc is not None and c.proc.poll() is not None and c.terminated is None:
                    code = c.proc.returncode
                    code = 128 - code if code < 0 else code  # killed by signal N: 128+N as on a node
                    c.terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                    "startedAt": c.started_at, "finishedAt": _now()}
                    c.last_state = {"terminated": c.terminated}
                    c.probe = None
                    restart = policy == "Always" or (policy == "OnFailure" and code != 0)
                    if restart:
                        c.next_start = now + c.backoff
                        c.backoff = min(c.backoff * 2, BACKOFF_MAX)
                        c.waiting_reason = "CrashLoopBackOff"
                    else:
                        c.next_start = float("inf")
                if c.terminated is not None and now >= c.next_start:
                    c.restarts += 1
                    try:
                        await asyncio.to_thread(self._start_container, run, c, run.volumes)
                    except podspec.PodSpecError as exc:
                        run.start_error = str(exc)
                        c.next_start = now + c.backoff
                if c.running() and c.probe is not None and c.probe.due(now):
                    assert c.proc is not None
                    ok = await asyncio.to_thread(run_probe, c.probe.probe or {}, c.spec, run.ip, c.proc.pid)
                    c.probe.record(ok, time.monotonic())
        await asyncio.to_thread(self._report, run)

    def _container_ready(self, c: ContainerRun) -> bool:
        if not c.running() or c.probe is None:
            return False
        return c.probe.ready if c.probe.probe is not None else True

    def _report(self, run: PodRun) -> None:
        statuses = []
        for c in run.containers:
            state: Obj
            if c.running():
                state = {"running": {"startedAt": c.started_at}}
            elif c.terminated is not None and c.next_start == float("inf"):
                state = {"terminated": c.terminated}
            else:
                state = {"waiting": {"reason": c.waiting_reason, **({"message": run.start_error}
                                                                    if run.start_error else {})}}
            statuses.append({
                "name": c.name, "image": c.spec.get("image", ""), "imageID": "", "ready": self._container_ready(c),
                "restartCount": c.restarts, "started": c.running(), "state": state, "lastState": c.last_state,
                "containerID": f"local://{c.proc.pid}" if c.proc else "",
            })
        if not run.started:
            phase = "Pending"
        elif all(c.terminated is not None and c.next_start == float("inf") for c in run.containers):
            phase = "Succeeded" if all(c.terminated and c.terminated["exitCode"] == 0 for c in run.containers) \
                else "Failed"
        else:
            phase = "Running"
        ready = phase == "Running" and all(s["ready"] for s in statuses)
        conds = [("PodScheduled", True), ("Initialized", True), ("ContainersReady", ready), ("Ready", ready)]
        status = {"phase": phase, "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
                  "podIP": run.ip, "podIPs": [{"ip": run.ip}], "startTime": run.start_time or _now(),
                  "containerStatuses": statuses,
                  "conditions": [{"type": t, "status": "True" if v else "False"} for t, v in conds]}
        text = json.dumps(status, sort_keys=True)
        if text == run.last_status:
            return
        now = _now()
        for cond in status["conditions"]:
            cond["lastTransitionTime"] = now  # type: ignore[index]
        meta = run.pod["metadata"]
        try:
            self.api.merge_patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                                 {"metadata": {"uid": meta["uid"]}, "status": status})
            run.last_status = text
        except NotFound:
            pass

    async def _terminate(self, run: PodRun, delete: bool) -> None:
        grace = run.pod["metadata"].get("deletionGracePeriodSeconds")
        if grace is None:
            grace = run.pod["spec"].get("terminationGracePeriodSeconds", 30)
        for c in run.containers:
            if c.running():
                assert c.proc is not None
                _signal_group(c.proc, signal.SIGTERM)
        deadline = time.monotonic() + float(grace)
        while any(c.running() for c in run.containers) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        for c in run.containers:
            _kill_now(c)
        meta = run.pod["metadata"]
        if delete:
            with contextlib.suppress(NotFound, Conflict):
                await asyncio.to_thread(
                    self.api.delete, f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                    {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
        self.pods.pop(meta["uid"], None)

    # --- names -----------------------------------------------------------------------------

    def _write_hosts(self, pods: list[Obj]) -> None:
        """One hosts file for all pods of this node, rewritten in place (it is bind-mounted, so a
        rename would not be seen): pods by name and by their headless-Service DNS names, Services by
        one ready endpoint."""
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        by_uid = {run.pod["metadata"]["uid"]: run for run in self.pods.values()}
        ready_by_ns: dict[str, list[tuple[Obj, str]]] = {}
        for pod in pods:
            run = by_uid.get(pod["metadata"]["uid"])
            if run is None:
                continue
            meta, spec = pod["metadata"], pod["spec"]
            host = spec.get("hostname") or meta["name"]
            names = [host]
            if spec.get("subdomain"):
                base = f"{host}.{spec['subdomain']}.{meta['namespace']}"
                names += [f"{base}.svc.cluster.local", f"{base}.svc", base]
            lines.append(f"{run.ip} {' '.join(names)}")
            conds = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}
            if conds.get("Ready") == "True" or spec.get("subdomain"):
                ready_by_ns.setdefault(meta["namespace"], []).append((pod, run.ip))
        try:
            services = self.api.get("/api/v1/services").get("items", [])
        except Exception:  # noqa: BLE001 - names of Services are best effort
            services = []
        for svc in services:
            selector = svc.get("spec", {}).get("selector") or {}
            if not selector:
                continue
            ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
            for pod, ip in sorted(ready_by_ns.get(ns, []), key=lambda p: p[0]["metadata"]["name"]):
                labels = pod["metadata"].get("labels", {})
                if all(labels.get(k) == v for k, v in selector.items()):
                    lines.append(f"{ip} {name}.{ns}.svc.cluster.local {name}.{ns}.svc {name}.{ns}")
                    break
        text = "\n".join(lines) + "\n"
        if text == self._hosts_text:
            return
        self._hosts_text = text
        for run in self.pods.values():
            path = run.directory / "hosts"
            with open(path, "r+" if path.exists() else "w") as f:
                f.seek(0)
                f.write(text)
                f.truncate()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _kill_now(c: ContainerRun) -> None:
    if c.proc is not None and c.proc.poll() is None:
        _signal_group(c.proc, signal.SIGKILL)
        c.proc.wait()
