"""A real Kubernetes control plane on loopback for the ``k8s`` test tier.

:class:`KubeCluster` runs Debian's etcd, a kube-apiserver and a kube-controller-manager built by
``support/kube_build.py`` (``make k8s-deps``), with throwaway certificates made by the openssl
CLI. There is no kubelet and no scheduler: controllers create Pods and PVCs, which stay Pending.

Used through the session fixture ``kube`` (``tests/k8s/conftest.py``)::

    kube.kubeconfig          # Path: cluster-admin (client certificate in group system:masters)
    kube.server              # "https://127.0.0.1:<port>"
    kube.kubectl("get", "ns", "-o", "json")              # CompletedProcess[str]; raises on failure
    kube.kubectl("apply", "-f", "-", input=manifest)
    kube.helm("template", "charts/riverlog")
    ns = kube.namespace("topics")                        # a fresh namespace, default SA ready
    api = kube.api_client()                              # kubernetes.client.ApiClient
    subprocess.Popen([...operator...], env=kube.env())   # KUBECONFIG set, tools first on PATH

Only loopback addresses are used: etcd, the API server and the controller-manager listen on
127.0.0.1 at free ports; the Service IP range is address space the API server hands out in
objects, with nothing ever sent to it.
"""

from __future__ import annotations

import atexit
import base64
import http.client
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from support import kube_build
from support.brokers import free_ports

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
START_TIMEOUT = 120.0
COMMAND_TIMEOUT = 120.0


class KubeStartError(RuntimeError):
    """The control plane did not come up; the message carries the components' log tails."""


class KubeCommandError(subprocess.CalledProcessError):
    """kubectl or helm failed; unlike CalledProcessError, str() shows what the tool said."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def k8s_bin_dir() -> Path:
    """The directory holding kube-apiserver, kube-controller-manager, kubectl, helm, kind and a
    link to Debian's etcd; builds what is missing first (minutes when cold, see kube_build)."""
    return kube_build.ensure()


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll ``check`` until it returns something truthy (returned); TimeoutError naming ``what``
    and the last value otherwise. Controllers act asynchronously, so k8s tests wait like this."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached in {timeout} s (last: {value!r})")
        time.sleep(interval)


# --- certificates ----------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise KubeStartError(f"openssl {' '.join(args)} failed:\n{proc.stderr}")


def _signed_cert(pki: Path, name: str, subject: str, extensions: str) -> None:
    """A key and a certificate for ``name`` signed by the cluster CA in ``pki``."""
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=pki)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=pki)
    (pki / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "30", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=pki,
    )


def make_pki(pki: Path) -> None:
    """CA, API server serving certificate, admin client certificate, service-account key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("genrsa", "-out", "ca.key", "2048", cwd=pki)
    _openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=riverlog-test-ca", "-days", "30",
        "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", "ca.crt", cwd=pki,
    )
    # 10.96.0.1 is the `kubernetes` Service's ClusterIP (first address of the range): in-cluster
    # clients would verify against it; tests only ever connect to 127.0.0.1.
    _signed_cert(
        pki, "apiserver", "/CN=kube-apiserver",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,"
        "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,"
        "DNS:kubernetes.default.svc.cluster.local\n",
    )
    # Group system:masters is bound to cluster-admin by the API server's bootstrap RBAC policy.
    _signed_cert(
        pki, "admin", "/O=system:masters/CN=riverlog-test-admin",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n",
    )
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig_text(server: str, pki: Path) -> str:
    """A self-contained kubeconfig (certificates embedded) for the admin user."""
    return f"""apiVersion: v1
kind: Config
clusters:
- name: riverlog-test
  cluster:
    server: {server}
    certificate-authority-data: {_b64(pki / "ca.crt")}
users:
- name: riverlog-test-admin
  user:
    client-certificate-data: {_b64(pki / "admin.crt")}
    client-key-data: {_b64(pki / "admin.key")}
contexts:
- name: riverlog-test
  context:
    cluster: riverlog-test
    user: riverlog-test-admin
current-context: riverlog-test
"""


# --- processes -------------------------------------------------------------------------------

# Control planes still running when the interpreter exits (an interrupted session) are stopped.
_LIVE: weakref.WeakSet[KubeCluster] = weakref.WeakSet()


@atexit.register
def _stop_leftovers() -> None:
    for cluster in list(_LIVE):
        cluster.stop()


def _die_with_parent() -> list[str]:
    # SIGKILL when the starting thread dies, so a crashed session leaves no component running.
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


class _Component:
    def __init__(self, name: str, args: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [*_die_with_parent(), *args], stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class KubeCluster:
    """etcd + kube-apiserver + kube-controller-manager under ``workdir``; see the module doc."""

    def __init__(self, workdir: Path, bin_dir: Path | None = None) -> None:
        self.workdir = Path(workdir)
        self.bin_dir = bin_dir or k8s_bin_dir()
        self.pki = self.workdir / "pki"
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        (self.etcd_port, self.etcd_peer_port, self.apiserver_port,
         self.controller_manager_port) = free_ports(4)
        self.server = f"https://127.0.0.1:{self.apiserver_port}"
        self.components: list[_Component] = []
        self._namespaces = 0
        _LIVE.add(self)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT) -> None:
        try:
            self._start(timeout)
        except BaseException as exc:
            message = f"{exc}\n\n{self.log_tails()}"
            self.stop()
            raise KubeStartError(message) from exc

    def _start(self, timeout: float) -> None:
        make_pki(self.pki)
        self.kubeconfig.write_text(kubeconfig_text(self.server, self.pki))
        deadline = time.monotonic() + timeout
        self._spawn("etcd", self._etcd_args())
        self._wait("etcd", deadline, lambda: self._http_ok("127.0.0.1", self.etcd_port, "/health", tls=False))
        self._spawn("kube-apiserver", self._apiserver_args())
        self._wait("kube-apiserver", deadline, lambda: self._http_ok("127.0.0.1", self.apiserver_port, "/readyz"))
        self._spawn("kube-controller-manager", self._controller_manager_args())
        self._wait(
            "kube-controller-manager", deadline,
            lambda: self._http_ok("127.0.0.1", self.controller_manager_port, "/healthz"),
        )

    def stop(self) -> None:
        # Reverse order: the API server and controllers go before the store they depend on.
        for component in reversed(self.components):
            component.stop()
        self.components.clear()
        _LIVE.discard(self)

    def __enter__(self) -> KubeCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tails(self, lines: int = 40) -> str:
        return "\n\n".join(f"--- {c.name} ({c.log_path}) ---\n{c.log_tail(lines)}" for c in self.components)

    def _spawn(self, name: str, args: list[str]) -> None:
        self.components.append(_Component(name, args, self.workdir / f"{name}.log"))

    def _wait(self, name: str, deadline: float, ready: Callable[[], bool]) -> None:
        component = next(c for c in self.components if c.name == name)
        while True:
            if not component.alive():
                raise KubeStartError(f"{name} exited with {component.proc.returncode} while starting")
            if ready():
                return
            if time.monotonic() > deadline:
                raise KubeStartError(f"{name} was not ready in time")
            time.sleep(0.2)

    def _http_ok(self, host: str, port: int, path: str, tls: bool = True) -> bool:
        conn: http.client.HTTPConnection
        if tls:
            context = self._ssl_context(verify=port == self.apiserver_port)
            conn = http.client.HTTPSConnection(host, port, timeout=5, context=context)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=5)
        try:
            conn.request("GET", path)
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def _ssl_context(self, verify: bool) -> ssl.SSLContext:
        if not verify:
            # The controller-manager serves a self-signed certificate of its own; only its
            # health is read from it, never credentials.
            return ssl._create_unverified_context()
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return context

    # --- command lines -------------------------------------------------------------------------

    def _etcd_args(self) -> list[str]:
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        return [
            str(self.bin_dir / "etcd"), "--name", "riverlog-test", "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"riverlog-test={peer}", "--initial-cluster-state", "new",
            "--logger", "zap", "--log-outputs", "stderr",
        ]

    def _apiserver_args(self) -> list[str]:
        pki = self.pki
        return [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.apiserver_port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # RBAC so the chart's roles are validated for real; the admin is system:masters.
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            # The `kubernetes` Service's endpoints would name 127.0.0.1, which Endpoints refuse;
            # nothing in the tests reaches the API server through that Service.
            "--endpoint-reconciler-type=none",
            # Published in kube-system/extension-apiserver-authentication, where the
            # controller-manager's delegated authentication looks (and logs errors without it).
            # No front-proxy certificate is ever issued, so nothing can authenticate this way.
            f"--requestheader-client-ca-file={pki / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--cert-dir={pki}",
            "--profiling=false",
        ]

    def _controller_manager_args(self) -> list[str]:
        pki = self.pki
        kubeconfig = str(self.kubeconfig)
        return [
            str(self.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={self.controller_manager_port}",
            f"--cert-dir={self.workdir / 'controller-manager-certs'}",
            # Every in-tree controller (the cloud ones live in cloud-controller-manager now).
            "--controllers=*",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--leader-elect=false",
            "--profiling=false",
        ]

    # --- the fixture's interface ---------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """os.environ with KUBECONFIG set and the k8s tools first on PATH: for subprocesses such
        as the operator. Helm keeps its config and cache under the cluster's directory."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = os.pathsep.join([str(self.bin_dir), env.get("PATH", "")])
        helm_home = self.workdir / "helm"
        env["HELM_CONFIG_HOME"] = str(helm_home / "config")
        env["HELM_CACHE_HOME"] = str(helm_home / "cache")
        env["HELM_DATA_HOME"] = str(helm_home / "data")
        return env

    def _tool(
        self, tool: str, args: Sequence[str], input: str | None, check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.bin_dir / tool), *args], input=input, capture_output=True, text=True,
            env=self.env(), timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise KubeCommandError(proc.returncode, proc.args, proc.stdout, proc.stderr)
        return proc

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = COMMAND_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        return self._tool("kubectl", args, input, check, timeout)

    def helm(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = COMMAND_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        return self._tool("helm", args, input, check, timeout)

    def namespace(self, name_prefix: str = "test", timeout: float = 60.0) -> str:
        """Create a fresh namespace and wait for its ``default`` ServiceAccount (Pods are refused
        by admission until the controller-manager has made it)."""
        self._namespaces += 1
        prefix = "".join(ch if ch.isalnum() else "-" for ch in name_prefix.lower()).strip("-")[:40] or "test"
        name = f"{prefix}-{self._namespaces}-{secrets.token_hex(3)}"
        self.kubectl("create", "namespace", name)
        deadline = time.monotonic() + timeout
        while self.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no default ServiceAccount in namespace {name} after {timeout} s")
            time.sleep(0.2)
        return name

    def mark_pod_ready(self, namespace: str, name: str) -> None:
        """Play the missing kubelet for one Pod: status Running with condition Ready=True, so
        controllers that wait for readiness (a StatefulSet's OrderedReady rollout, a PDB's
        healthy count, an operator's rolling restart) move on. Nothing actually runs."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": now}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        status = {"status": {"phase": "Running", "conditions": conditions, "startTime": now}}
        self.kubectl("patch", "pod", name, "-n", namespace, "--subresource=status", "--type=merge",
                     "-p", json.dumps(status))

    def api_client(self) -> ApiClient:
        """A ``kubernetes.client.ApiClient`` for the admin user (imported lazily: only tests
        that use the Python client need the package)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

