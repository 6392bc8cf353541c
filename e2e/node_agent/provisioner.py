"""A local-directory PV provisioner for the e2e tier's StorageClass.

Polls PVCs whose storageClassName is ``class_name`` and, for each one still Pending, creates a
hostPath PV of the claimed size backed by ``<root>/<namespace>_<claim>_<uid>``, pre-bound to the
claim through ``claimRef`` (the controller-manager's PV controller completes the binding). The
directory outlives Pods, so data survives a Pod being recreated; reclaim policy Delete removes
the PV object when the claim goes (the directory stays for inspection under the test's tmp dir).
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

from node_agent.kubeapi import Conflict, KubeApi

PROVISIONER = "riverlog.dev/e2e-local-dir"
POLL = 0.5


def storage_class(name: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name, "annotations": {
                # The default class, so PVCs of charts and StatefulSets that name none land here.
                "storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}


class LocalDirProvisioner:
    def __init__(self, kubeconfig: str | Path, root: Path, class_name: str = "e2e-local") -> None:
        self.api = KubeApi(str(kubeconfig))
        self.root = Path(root)
        self.class_name = class_name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def start(self) -> None:
        with contextlib.suppress(Conflict):
            self.api.post("/apis/storage.k8s.io/v1/storageclasses", storage_class(self.class_name))
        self._thread = threading.Thread(target=self._run, name="local-dir-provisioner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.api.close()

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            try:
                self.sync_once()
            except Exception as exc:  # noqa: BLE001 - keep provisioning; errors are kept for tests
                self.errors.append(repr(exc))

    def sync_once(self) -> None:
        for pvc in self.api.get("/api/v1/persistentvolumeclaims").get("items", []):
            spec, meta = pvc["spec"], pvc["metadata"]
            if spec.get("storageClassName") != self.class_name or spec.get("volumeName"):
                continue
            if pvc.get("status", {}).get("phase") != "Pending" or meta.get("deletionTimestamp"):
                continue
            self._provision(pvc)

    def _provision(self, pvc: dict[str, Any]) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        # Named after the claim's uid: one PV per claim even if two polls race.
        name = f"pvc-{meta['uid']}"
        directory = self.root / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"
        directory.mkdir(parents=True, exist_ok=True)
        pv = {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {
                "capacity": {"storage": spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")},
                "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": self.class_name,
                "volumeMode": spec.get("volumeMode", "Filesystem"),
                "hostPath": {"path": str(directory), "type": "DirectoryOrCreate"},
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                             "name": meta["name"], "uid": meta["uid"]},
            },
        }
        with contextlib.suppress(Conflict):
            self.api.post("/api/v1/persistentvolumes", pv)
