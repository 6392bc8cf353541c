"""A small async Kubernetes API client on aiohttp, enough for the operator's own writes.

Kopf watches and dispatches; the handlers still need to read and write other objects
(StatefulSets, Pods, status subresources). The official client is synchronous, so this talks
REST directly: server-side apply for the manifests the builders make (a field manager that
owns only what it sets, so users' unrelated fields survive), merge patches, gets, lists and
deletes. Credentials come from the pod's service account, else from the kubeconfig.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import yaml

from . import FIELD_MANAGER

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

# kind -> (API path prefix, plural, namespaced) for every kind the operator touches.
KINDS: dict[str, tuple[str, str, bool]] = {
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "Service": ("/api/v1", "services", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Pod": ("/api/v1", "pods", True),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims", True),
    "Node": ("/api/v1", "nodes", False),
    "Event": ("/api/v1", "events", True),
    "StatefulSet": ("/apis/apps/v1", "statefulsets", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "Cluster": ("/apis/riverlog.dev/v1alpha1", "clusters", True),
    "Topic": ("/apis/riverlog.dev/v1alpha1", "topics", True),
    "User": ("/apis/riverlog.dev/v1alpha1", "users", True),
    "Connect": ("/apis/riverlog.dev/v1alpha1", "connects", True),
    "Connector": ("/apis/riverlog.dev/v1alpha1", "connectors", True),
    "Mirror": ("/apis/riverlog.dev/v1alpha1", "mirrors", True),
    "ClusterKopfPeering": ("/apis/kopf.dev/v1", "clusterkopfpeerings", False),
}


class ApiError(Exception):
    """The API server refused a request; ``status`` is the HTTP status, ``reason`` its reason."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{status} {reason}: {message}")


@dataclass(frozen=True)
class Credentials:
    server: str
    ssl: ssl.SSLContext | bool
    headers: dict[str, str]


def _materialize(data: str | None, path: str | None, tmp: Path, name: str) -> str | None:
    """A kubeconfig gives certificates as base64 data or as a file; ssl wants a file."""
    if path:
        return os.path.expanduser(path)
    if not data:
        return None
    target = tmp / name
    target.write_bytes(base64.b64decode(data))
    return str(target)


def load_credentials(kubeconfig: str | None = None) -> Credentials:
    """The in-cluster service account when present, else the current kubeconfig context."""
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG")
    if not kubeconfig and (SA_DIR / "token").exists():
        ctx = ssl.create_default_context(cafile=str(SA_DIR / "ca.crt"))
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        token = (SA_DIR / "token").read_text().strip()
        # The token file is rotated by the kubelet; a long-lived operator reloads per session.
        return Credentials(f"https://{host}:{port}", ctx, {"Authorization": f"Bearer {token}"})
    path = os.path.expanduser(kubeconfig or "~/.kube/config")
    config = yaml.safe_load(Path(path.split(os.pathsep)[0]).read_text()) or {}
    contexts = {c["name"]: c.get("context") or {} for c in config.get("contexts") or []}
    clusters = {c["name"]: c.get("cluster") or {} for c in config.get("clusters") or []}
    users = {u["name"]: u.get("user") or {} for u in config.get("users") or []}
    context = contexts[config["current-context"]]
    cluster = clusters[context["cluster"]]
    user = users.get(context.get("user", ""), {})
    tmp = Path(tempfile.mkdtemp(prefix="riverlog-operator-"))
    headers: dict[str, str] = {}
    if user.get("token"):
        headers["Authorization"] = f"Bearer {user['token']}"
    server: str = cluster["server"]
    ssl_ctx: ssl.SSLContext | bool = False
    if server.startswith("https"):
        if cluster.get("insecure-skip-tls-verify"):
            ssl_ctx = False
        else:
            ca = _materialize(cluster.get("certificate-authority-data"), cluster.get("certificate-authority"), tmp,
                              "ca.crt")
            ssl_ctx = ssl.create_default_context(cafile=ca)
        cert = _materialize(user.get("client-certificate-data"), user.get("client-certificate"), tmp, "client.crt")
        key = _materialize(user.get("client-key-data"), user.get("client-key"), tmp, "client.key")
        if cert and key:
            if ssl_ctx is False:
                ssl_ctx = ssl.create_default_context()
                ssl_ctx.check_hostname = False
                ssl_ctx.verify_mode = ssl.CERT_NONE
            assert isinstance(ssl_ctx, ssl.SSLContext)
            ssl_ctx.load_cert_chain(cert, key)
    return Credentials(server.rstrip("/"), ssl_ctx, headers)


def object_path(kind: str, name: str | None = None, namespace: str | None = None, subresource: str = "") -> str:
    prefix, plural, namespaced = KINDS[kind]
    path = prefix
    if namespaced and namespace:
        path += f"/namespaces/{quote(namespace)}"
    path += f"/{plural}"
    if name:
        path += f"/{quote(name)}"
    if subresource:
        path += f"/{subresource}"
    return path


class KubeApi:
    """One aiohttp session to the API server; create it inside the running loop."""

    def __init__(self, credentials: Credentials | None = None, *, timeout: float = 30.0) -> None:
        self.credentials = credentials or load_credentials()
        self._session = aiohttp.ClientSession(
            headers=self.credentials.headers, timeout=aiohttp.ClientTimeout(total=timeout))

    async def close(self) -> None:
        await self._session.close()

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      body: Any = None, content_type: str = "application/json") -> Any:
        url = self.credentials.server + path
        if params:
            url += "?" + urlencode(params)
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        async with self._session.request(method, url, data=data, headers=headers,
                                         ssl=self.credentials.ssl) as resp:
            text = await resp.text()
            payload = json.loads(text) if text else None
            if resp.status >= 400:
                reason = payload.get("reason", "") if isinstance(payload, dict) else ""
                message = payload.get("message", text) if isinstance(payload, dict) else text
                raise ApiError(resp.status, reason, message)
            return payload

    # --- typed helpers ---------------------------------------------------------------------

    async def apply(self, manifest: Mapping[str, Any], *, subresource: str = "") -> dict[str, Any]:
        """Server-side apply (force: the operator owns what it sets, and only that)."""
        meta = manifest["metadata"]
        path = object_path(manifest["kind"], meta["name"], meta.get("namespace"), subresource)
        # JSON is YAML, so the apply content type takes the manifest as JSON.
        result: dict[str, Any] = await self.request(
            "PATCH", path, params={"fieldManager": FIELD_MANAGER, "force": "true"}, body=manifest,
            content_type="application/apply-patch+yaml")
        return result

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self.request("GET", object_path(kind, name, namespace))
            return result
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def list(self, kind: str, namespace: str | None = None, *, label_selector: str = "") -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else None
        result = await self.request("GET", object_path(kind, None, namespace), params=params)
        items: list[dict[str, Any]] = result.get("items") or []
        return items

    async def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        meta = manifest["metadata"]
        result: dict[str, Any] = await self.request(
            "POST", object_path(manifest["kind"], None, meta.get("namespace")), body=manifest)
        return result

    async def merge_patch(self, kind: str, name: str, namespace: str | None, patch: Mapping[str, Any], *,
                          subresource: str = "") -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "PATCH", object_path(kind, name, namespace, subresource), body=patch,
            content_type="application/merge-patch+json")
        return result

    async def delete(self, kind: str, name: str, namespace: str | None = None, *,
                     preconditions: Mapping[str, str] | None = None) -> bool:
        """Delete; False when it was already gone. ``preconditions`` (uid, resourceVersion)
        make the delete refuse if the object changed meanwhile."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": dict(preconditions)} \
            if preconditions else None
        try:
            await self.request("DELETE", object_path(kind, name, namespace), body=body)
            return True
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
