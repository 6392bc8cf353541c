"""The brokers' StatefulSet: one pod and one volume claim per broker."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from ..model import CONTROLLER_PORT, METRICS_PORT
from .common import (
    CONFIG_DIR,
    CONFIG_FILE,
    DATA_DIR,
    PODINFO_DIR,
    BuildInputs,
    brokers_secret_name,
    clients_ca_cert_secret_name,
    cluster_ca_cert_secret_name,
    config_map_name,
    hardened_container,
    headless_service_name,
    labels,
    metadata,
    restricted_pod_security,
    selector_labels,
    service_account_name,
    statefulset_name,
)
from .config import CERTS_DIR, CLIENTS_CA_FILE, CLUSTER_CA_FILE, REPLICATION_PORT, config_hash

# The console script of riverlog_operator.pod_entrypoint, installed in the one image.
ENTRYPOINT = "riverlog-k8s-broker"
CONFIG_HASH_ANNOTATION = "riverlog.dev/config-hash"
RESTART_TOKEN_ANNOTATION = "riverlog.dev/restart-token"
# The operator copies the node's rack label here once the pod is scheduled; the pod reads it
# through a downward API volume (which, unlike env, sees annotations added after start).
RACK_ANNOTATION = "riverlog.dev/rack"


def _affinity(inputs: BuildInputs) -> dict[str, Any] | None:
    if inputs.spec.pod.affinity is not None:
        return inputs.spec.pod.affinity
    # Prefer one broker per node: a node failure then takes at most one replica of a partition.
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": selector_labels(inputs.ref.name)}},
    }]}}


def _topology_spread(inputs: BuildInputs) -> list[dict[str, Any]]:
    key = inputs.spec.rack_topology_key
    if not key:
        return []
    # Brokers evenly over racks; ScheduleAnyway so a lost zone never blocks replacing a broker.
    return [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": selector_labels(inputs.ref.name)}}]


def _pod_annotations(inputs: BuildInputs) -> dict[str, str]:
    out = dict(inputs.spec.pod.annotations)
    if inputs.spec.metrics_enabled:
        out.update({"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT),
                    "prometheus.io/path": "/metrics"})
    out[CONFIG_HASH_ANNOTATION] = config_hash(inputs)
    if inputs.restart_token:
        out[RESTART_TOKEN_ANNOTATION] = inputs.restart_token
    return out


def _container(inputs: BuildInputs) -> dict[str, Any]:
    spec = inputs.spec
    ports = [{"name": lst.name.lower().replace("_", "-"), "containerPort": lst.port, "protocol": "TCP"}
             for lst in spec.listeners]
    if spec.secured:
        ports.append({"name": "replication", "containerPort": REPLICATION_PORT, "protocol": "TCP"})
    ports += [{"name": "controller", "containerPort": CONTROLLER_PORT, "protocol": "TCP"},
              {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}]
    env: list[dict[str, Any]] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "RIVERLOG_K8S_HEADLESS_SERVICE", "value": headless_service_name(inputs.ref.name)},
    ]
    mounts = [
        {"name": "data", "mountPath": DATA_DIR},
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    if spec.rack_topology_key:
        env.append({"name": "RIVERLOG_K8S_RACK_FILE", "value": f"{PODINFO_DIR}/annotations"})
        mounts.append({"name": "podinfo", "mountPath": PODINFO_DIR, "readOnly": True})
    if spec.secured:
        # Key material from the operator's Secrets, updated in place when certificates are
        # renewed: the broker reloads changed files without a restart (ssl.file.reload.interval.ms).
        env.append({"name": "RIVERLOG_K8S_CERTS_DIR", "value": CERTS_DIR})
        mounts += [{"name": "broker-certs", "mountPath": CERTS_DIR, "readOnly": True},
                   {"name": "cluster-ca", "mountPath": str(PurePosixPath(CLUSTER_CA_FILE).parent), "readOnly": True},
                   {"name": "clients-ca", "mountPath": str(PurePosixPath(CLIENTS_CA_FILE).parent), "readOnly": True}]
    container: dict[str, Any] = {
        "name": "broker",
        "image": inputs.image,
        "command": [ENTRYPOINT, "--config", f"{CONFIG_DIR}/{CONFIG_FILE}"],
        "ports": ports,
        "env": env,
        "volumeMounts": mounts,
        # /readyz: logs recovered, listeners accepting, metadata caught up.
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"}, "periodSeconds": 5,
                           "timeoutSeconds": 3, "failureThreshold": 3},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10,
                          "timeoutSeconds": 5, "failureThreshold": 6},
        # Log recovery after an unclean stop can take a while: liveness starts after this passes.
        "startupProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 5,
                         "failureThreshold": 120},
    }
    return hardened_container(container, spec.image_pull_policy, spec.resources)


def _volumes(inputs: BuildInputs) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": config_map_name(inputs.ref.name)}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if inputs.spec.rack_topology_key:
        volumes.append({"name": "podinfo", "downwardAPI": {"items": [
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}})
    if inputs.spec.secured:
        cluster = inputs.ref.name
        # Readable by the broker's group only (fsGroup): private keys never world-readable.
        volumes += [{"name": "broker-certs",
                     "secret": {"secretName": brokers_secret_name(cluster), "defaultMode": 0o440}},
                    {"name": "cluster-ca", "secret": {"secretName": cluster_ca_cert_secret_name(cluster)}},
                    {"name": "clients-ca", "secret": {"secretName": clients_ca_cert_secret_name(cluster)}}]
    return volumes


def _pod_spec(inputs: BuildInputs) -> dict[str, Any]:
    pod = inputs.spec.pod
    spec: dict[str, Any] = {
        "serviceAccountName": service_account_name(inputs.ref.name),
        "automountServiceAccountToken": False,
        # SIGTERM starts a controlled shutdown (leadership moves away first); give it time.
        "terminationGracePeriodSeconds": pod.termination_grace_period_seconds,
        "securityContext": restricted_pod_security(),
        "containers": [_container(inputs)],
        "volumes": _volumes(inputs),
    }
    affinity = _affinity(inputs)
    if affinity:
        spec["affinity"] = affinity
    spread = _topology_spread(inputs)
    if spread:
        spec["topologySpreadConstraints"] = spread
    if pod.tolerations:
        spec["tolerations"] = pod.tolerations
    if pod.node_selector:
        spec["nodeSelector"] = pod.node_selector
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    return spec


def _claim_template(inputs: BuildInputs) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": inputs.spec.storage_size}}}
    if inputs.spec.storage_class:
        spec["storageClassName"] = inputs.spec.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "labels": selector_labels(inputs.ref.name)}, "spec": spec}


def build_statefulset(inputs: BuildInputs) -> dict[str, Any]:
    name = inputs.ref.name
    retention = "Delete" if inputs.spec.delete_claim else "Retain"
    pod_labels = {**inputs.spec.pod.labels, **labels(name)}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(inputs, statefulset_name(name)),
        "spec": {
            "serviceName": headless_service_name(name),
            "replicas": inputs.statefulset_replicas,
            # Voters must start together to form the quorum (OrderedReady would wait for pod 0's
            # readiness, which needs a majority): Parallel.
            "podManagementPolicy": "Parallel",
            # The operator restarts pods itself, one at a time, gated on readiness and zero
            # under-replicated partitions.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": selector_labels(name)},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": retention, "whenScaled": retention},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": _pod_annotations(inputs)},
                "spec": _pod_spec(inputs),
            },
            "volumeClaimTemplates": [_claim_template(inputs)],
        },
    }
