"""From a Pod object to what a local process needs: environment (downward API, ConfigMap and
Secret references, ``$(VAR)`` expansion) and volume directories."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path
from typing import Any

from node_agent.kubeapi import KubeApi, NotFound

Obj = dict[str, Any]


class PodSpecError(Exception):
    """The Pod cannot start yet (a referenced object is missing); retried like a kubelet does."""


def field_value(pod: Obj, path: str) -> str:
    """A downward API ``fieldRef.fieldPath`` of ``pod``."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
    simple = {
        "metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"), "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
    }
    if path in simple:
        return simple[path] or ""
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        return str(meta.get(match.group(1), {}).get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1], {})
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    raise PodSpecError(f"unsupported fieldPath {path}")


def _object_data(api: KubeApi, kind: str, namespace: str, name: str, optional: bool) -> dict[str, str] | None:
    path = f"/api/v1/namespaces/{namespace}/{kind}/{name}"
    try:
        obj = api.get(path)
    except NotFound:
        if optional:
            return None
        raise PodSpecError(f"{kind} {namespace}/{name} not found") from None
    if kind == "secrets":
        return {k: base64.b64decode(v).decode() for k, v in obj.get("data", {}).items()}
    return dict(obj.get("data", {}))


def _expand(text: str, env: dict[str, str]) -> str:
    # Kubernetes' $(VAR) syntax: $$ escapes, unknown references stay as written.
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, text)


def container_env(api: KubeApi, pod: Obj, container: Obj) -> dict[str, str]:
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef") or source.get("secretRef")
        kind = "configmaps" if "configMapRef" in source else "secrets"
        data = _object_data(api, kind, namespace, ref["name"], ref.get("optional", False)) or {}
        env.update({source.get("prefix", "") + k: v for k, v in data.items()})
    for var in container.get("env", []):
        if "valueFrom" not in var:
            env[var["name"]] = _expand(var.get("value", ""), env)
            continue
        source = var["valueFrom"]
        if "fieldRef" in source:
            env[var["name"]] = field_value(pod, source["fieldRef"]["fieldPath"])
        elif "configMapKeyRef" in source or "secretKeyRef" in source:
            ref = source.get("configMapKeyRef") or source["secretKeyRef"]
            kind = "configmaps" if "configMapKeyRef" in source else "secrets"
            values = _object_data(api, kind, namespace, ref["name"], ref.get("optional", False))
            if values is not None and ref["key"] in values:
                env[var["name"]] = values[ref["key"]]
            elif not ref.get("optional", False):
                raise PodSpecError(f"key {ref['key']} missing in {kind} {ref['name']}")
        else:
            raise PodSpecError(f"unsupported valueFrom {sorted(source)}")
    return env


def container_argv(container: Obj, env: dict[str, str]) -> list[str]:
    argv = [_expand(a, env) for a in [*container.get("command", []), *container.get("args", [])]]
    if not argv:
        raise PodSpecError(f"container {container['name']}: no command (images are not run)")
    return argv


def _write_items(target: Path, data: dict[str, str | bytes], items: list[Obj] | None) -> None:
    chosen = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
    for key, rel in chosen:
        if key not in data:
            continue
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        value = data[key]
        dest.write_bytes(value if isinstance(value, bytes) else value.encode())


def _raw_data(api: KubeApi, kind: str, namespace: str, name: str, optional: bool) -> dict[str, str | bytes]:
    path = f"/api/v1/namespaces/{namespace}/{kind}/{name}"
    try:
        obj = api.get(path)
    except NotFound:
        if optional:
            return {}
        raise PodSpecError(f"{kind} {namespace}/{name} not found") from None
    if kind == "secrets":
        return {k: base64.b64decode(v) for k, v in obj.get("data", {}).items()}
    out: dict[str, str | bytes] = dict(obj.get("data", {}))
    out.update({k: base64.b64decode(v) for k, v in obj.get("binaryData", {}).items()})
    return out


def _downward_items(pod: Obj, items: list[Obj]) -> dict[str, str | bytes]:
    return {i["path"]: field_value(pod, i["fieldRef"]["fieldPath"]) for i in items if "fieldRef" in i}


def _service_account_token(api: KubeApi, pod: Obj, source: Obj) -> str:
    meta = pod["metadata"]
    sa = pod["spec"].get("serviceAccountName", "default")
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": [source["audience"]] if source.get("audience") else [],
                     "expirationSeconds": max(int(source.get("expirationSeconds", 3600)), 3600),
                     "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"],
                                        "uid": meta["uid"]}}}
    resp = api.post(f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{sa}/token", body)
    return str(resp["status"]["token"])


def pvc_directory(api: KubeApi, namespace: str, claim: str) -> Path:
    try:
        pvc = api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
    except NotFound:
        raise PodSpecError(f"PVC {namespace}/{claim} not found") from None
    pv_name = pvc.get("spec", {}).get("volumeName")
    if not pv_name or pvc.get("status", {}).get("phase") != "Bound":
        raise PodSpecError(f"PVC {namespace}/{claim} not bound yet")
    pv = api.get(f"/api/v1/persistentvolumes/{pv_name}")
    source = pv["spec"].get("hostPath") or pv["spec"].get("local")
    if not source:
        raise PodSpecError(f"PV {pv_name} is neither hostPath nor local")
    path = Path(source["path"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def materialize_volumes(api: KubeApi, pod: Obj, pod_dir: Path) -> dict[str, Path]:
    """Each volume of ``pod`` as a directory (created under ``pod_dir`` unless it is backed by a
    PV or hostPath); ConfigMap/Secret contents are written once, at start (no live updates)."""
    namespace = pod["metadata"]["namespace"]
    out: dict[str, Path] = {}
    for vol in pod["spec"].get("volumes", []):
        name = vol["name"]
        target = pod_dir / "volumes" / name
        if "persistentVolumeClaim" in vol:
            out[name] = pvc_directory(api, namespace, vol["persistentVolumeClaim"]["claimName"])
            continue
        if "hostPath" in vol:
            out[name] = Path(vol["hostPath"]["path"])
            out[name].mkdir(parents=True, exist_ok=True)
            continue
        if "emptyDir" in vol:
            target.mkdir(parents=True, exist_ok=True)  # kept across container restarts
            out[name] = target
            continue
        fresh = target.with_name(name + ".new")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir(parents=True)
        if "configMap" in vol or "secret" in vol:
            src = vol.get("configMap") or vol["secret"]
            kind = "configmaps" if "configMap" in vol else "secrets"
            ref_name = src.get("name") or src.get("secretName")
            _write_items(fresh, _raw_data(api, kind, namespace, ref_name, src.get("optional", False)),
                         src.get("items"))
        elif "downwardAPI" in vol:
            _write_items(fresh, _downward_items(pod, vol["downwardAPI"].get("items", [])), None)
        elif "projected" in vol:
            for source in vol["projected"].get("sources", []):
                if "configMap" in source or "secret" in source:
                    src = source.get("configMap") or source["secret"]
                    kind = "configmaps" if "configMap" in source else "secrets"
                    _write_items(fresh, _raw_data(api, kind, namespace, src["name"], src.get("optional", False)),
                                 src.get("items"))
                elif "downwardAPI" in source:
                    _write_items(fresh, _downward_items(pod, source["downwardAPI"].get("items", [])), None)
                elif "serviceAccountToken" in source:
                    sat = source["serviceAccountToken"]
                    _write_items(fresh, {"t": _service_account_token(api, pod, sat)},
                                 [{"key": "t", "path": sat["path"]}])
        else:
            raise PodSpecError(f"volume {name}: unsupported type {sorted(k for k in vol if k != 'name')}")
        shutil.rmtree(target, ignore_errors=True)
        fresh.rename(target)
        out[name] = target
    return out
