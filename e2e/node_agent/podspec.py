"""From a Pod object to what a local process needs: environment (downward API, ConfigMap and
Secret references, ``$(VAR)`` expansion) and volume directories."""

from __future__ import annotations

import base64
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from node_agent.kubeapi import KubeApi, NotFound

Obj = dict[str, Any]
log = logging.getLogger(__name__)


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


Payload = dict[str, bytes]  # a volume's files: path relative to the volume -> content


def _volume_path(rel: str) -> str:
    """An item path of a volume, checked as the API server does: relative, no ``..``."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or parts[0].startswith(".."):
        raise PodSpecError(f"invalid volume item path {rel!r}")
    return "/".join(parts)


def _items_payload(data: dict[str, str | bytes], items: list[Obj] | None) -> Payload:
    chosen = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
    out: Payload = {}
    for key, rel in chosen:
        if key not in data:
            continue
        value = data[key]
        out[_volume_path(rel)] = value if isinstance(value, bytes) else value.encode()
    return out


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


def _downward_items(pod: Obj, items: list[Obj]) -> Payload:
    data: dict[str, str | bytes] = {i["path"]: field_value(pod, i["fieldRef"]["fieldPath"])
                                    for i in items if "fieldRef" in i}
    return _items_payload(data, None)


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


# --- ConfigMap, Secret, downwardAPI and projected volumes: the kubelet's atomic writer -------------
#
# The volume directory (bind-mounted into containers, so it must stay the same inode) holds
#   ..2026_11_26_12_00_00.123456789/   the data, one timestamped directory per version
#   ..data -> ..2026_11_26_12_00_00.123456789
#   <key> -> ..data/<key>              one symlink per top-level entry of the payload
# An update writes a new timestamped directory, points ``..data_tmp`` at it and renames that over
# ``..data`` (atomic: a reader sees the old or the new version, never a mix), then adds and removes
# the per-key symlinks and deletes the old directory, as the kubelet's AtomicWriter does.

DATA_LINK = "..data"
_DATA_TMP = "..data_tmp"
_LIVE_KINDS = ("configMap", "secret", "downwardAPI", "projected")


def is_live_volume(vol: Obj) -> bool:
    """Whether the kubelet keeps ``vol``'s content up to date while the pod runs."""
    return any(k in vol for k in _LIVE_KINDS)


def _current_dir(target: Path) -> Path | None:
    link = target / DATA_LINK
    if not link.is_symlink() or not link.is_dir():
        return None
    return target / os.readlink(link)


def read_volume(target: Path) -> Payload | None:
    """The files of an atomically written volume (None when ``target`` is not one)."""
    data_dir = _current_dir(target)
    if data_dir is None:
        return None
    out: Payload = {}
    for root, _dirs, files in os.walk(data_dir):
        for file in files:
            path = Path(root, file)
            out[path.relative_to(data_dir).as_posix()] = path.read_bytes()
    return out


def write_volume(target: Path, payload: Payload) -> bool:
    """Make ``target`` hold exactly ``payload``, atomically; a no-op (nothing written, no mtime or
    inode changes) when it already does. True when the content changed."""
    target.mkdir(parents=True, exist_ok=True)
    changed = read_volume(target) != payload
    if changed:
        stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
        new_dir = Path(tempfile.mkdtemp(prefix=stamp, dir=target))
        new_dir.chmod(0o755)
        for rel, content in payload.items():
            dest = new_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(content)
        tmp_link = target / _DATA_TMP
        tmp_link.unlink(missing_ok=True)
        tmp_link.symlink_to(new_dir.name)
        os.replace(tmp_link, target / DATA_LINK)
    visible = {rel.split("/", 1)[0] for rel in payload}
    for name in sorted(visible):
        link, want = target / name, f"{DATA_LINK}/{name}"
        if link.is_symlink() and os.readlink(link) == want:
            continue
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)
        else:
            link.unlink(missing_ok=True)
        link.symlink_to(want)
    current = os.readlink(target / DATA_LINK)
    for entry in target.iterdir():
        name = entry.name
        if not name.startswith(".."):
            # Only the key links this writer made go; anything else (a subPath directory the agent
            # created) stays.
            if name not in visible and entry.is_symlink() and os.readlink(entry) == f"{DATA_LINK}/{name}":
                entry.unlink()
        elif name not in (DATA_LINK, current):  # the previous version, a stale ..data_tmp
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    return changed


def _volume_payload(api: KubeApi, pod: Obj, vol: Obj, previous: Payload) -> Payload:
    """What a configMap/secret/downwardAPI/projected volume holds now. A projected
    serviceAccountToken already written (in ``previous``) is kept, not requested again."""
    namespace = pod["metadata"]["namespace"]
    if "configMap" in vol or "secret" in vol:
        src = vol.get("configMap") or vol["secret"]
        kind = "configmaps" if "configMap" in vol else "secrets"
        ref_name = src.get("name") or src.get("secretName")
        return _items_payload(_raw_data(api, kind, namespace, ref_name, src.get("optional", False)),
                              src.get("items"))
    if "downwardAPI" in vol:
        return _downward_items(pod, vol["downwardAPI"].get("items", []))
    payload: Payload = {}
    for source in vol["projected"].get("sources", []):
        if "configMap" in source or "secret" in source:
            src = source.get("configMap") or source["secret"]
            kind = "configmaps" if "configMap" in source else "secrets"
            payload.update(_items_payload(_raw_data(api, kind, namespace, src["name"], src.get("optional", False)),
                                          src.get("items")))
        elif "downwardAPI" in source:
            payload.update(_downward_items(pod, source["downwardAPI"].get("items", [])))
        elif "serviceAccountToken" in source:
            sat = source["serviceAccountToken"]
            rel = _volume_path(sat["path"])
            payload[rel] = previous[rel] if rel in previous else _service_account_token(api, pod, sat).encode()
    return payload


def materialize_volumes(api: KubeApi, pod: Obj, pod_dir: Path) -> dict[str, Path]:
    """Each volume of ``pod`` as a directory (created under ``pod_dir`` unless it is backed by a
    PV or hostPath). ConfigMap, Secret, downwardAPI and projected volumes are written in the
    kubelet's layout (see :func:`write_volume`) so that :func:`refresh_volumes` can update them in
    place while the pod runs; a missing required ConfigMap or Secret raises :class:`PodSpecError`
    (the pod waits), a missing optional one gives no files."""
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
        if not is_live_volume(vol):
            raise PodSpecError(f"volume {name}: unsupported type {sorted(k for k in vol if k != 'name')}")
        previous = read_volume(target)
        if previous is None and target.exists():
            shutil.rmtree(target)  # not in the atomic layout (nothing runs yet: safe to replace)
        write_volume(target, _volume_payload(api, pod, vol, previous or {}))
        out[name] = target
    return out


def refresh_volumes(api: KubeApi, pod: Obj, pod_dir: Path) -> list[str]:
    """Bring the ConfigMap, Secret, downwardAPI and projected volumes of a running ``pod`` (written
    by :func:`materialize_volumes`) up to date, in place, as a kubelet's periodic sync does; files
    are only rewritten when their content changed. A volume whose required ConfigMap or Secret is
    gone keeps its last content (logged). Returns the names of the volumes that changed."""
    changed = []
    for vol in pod["spec"].get("volumes", []):
        if not is_live_volume(vol):
            continue
        target = pod_dir / "volumes" / vol["name"]
        previous = read_volume(target)
        if previous is None:
            continue  # not materialized (yet)
        try:
            payload = _volume_payload(api, pod, vol, previous)
        except PodSpecError as exc:
            log.warning("pod %s/%s volume %s kept as it was: %s", pod["metadata"]["namespace"],
                        pod["metadata"]["name"], vol["name"], exc)
            continue
        if write_volume(target, payload):
            changed.append(vol["name"])
    return changed
