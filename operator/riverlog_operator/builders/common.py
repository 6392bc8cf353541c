"""Names, labels and owner references shared by every manifest of a Cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import API_VERSION
from ..model import MAX_VOTERS, ClusterRef, ClusterSpec

DATA_DIR = "/var/lib/riverlog"
LOG_DIR = f"{DATA_DIR}/data"
CONFIG_DIR = "/etc/riverlog"
PODINFO_DIR = "/etc/riverlog-pod"
CONFIG_FILE = "server.properties"
# Broker pods run as this non-root user (the image's `riverlog` user).
RUN_AS_USER = 10001


@dataclass(frozen=True)
class BuildInputs:
    """Everything the manifests depend on; the builders are pure functions of it."""

    ref: ClusterRef
    spec: ClusterSpec
    default_image: str
    # Quorum voters: the first ``voters`` ordinals. Fixed when the cluster is created, because
    # the metadata quorum's voter set is static.
    voters: int
    # The StatefulSet size to apply: the spec's, except while brokers are being drained.
    replicas: int | None = None
    # Set when a rolling restart was requested; it changes the pod template.
    restart_token: str | None = None

    @property
    def image(self) -> str:
        return self.spec.image or self.default_image

    @property
    def statefulset_replicas(self) -> int:
        return self.spec.replicas if self.replicas is None else self.replicas


def restricted_pod_security() -> dict[str, Any]:
    """The pod securityContext of every pod the operator makes (broker and Connect images both
    run as RUN_AS_USER): the Kubernetes "restricted" profile."""
    return {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
            "fsGroup": RUN_AS_USER, "seccompProfile": {"type": "RuntimeDefault"}}


def hardened_container(container: dict[str, Any], image_pull_policy: str | None,
                       resources: dict[str, Any] | None) -> dict[str, Any]:
    """``container`` with the restricted container securityContext and the spec's optional
    pull policy and resources."""
    container["securityContext"] = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    if image_pull_policy:
        container["imagePullPolicy"] = image_pull_policy
    if resources:
        container["resources"] = resources
    return container


def spread_over_nodes(selector: dict[str, str]) -> dict[str, Any]:
    """A pod affinity preferring one pod of ``selector`` per node: a node failure takes fewer."""
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector}},
    }]}}


def initial_voters(replicas: int) -> int:
    return min(MAX_VOTERS, replicas)


def statefulset_name(cluster: str) -> str:
    return cluster


def headless_service_name(cluster: str) -> str:
    return f"{cluster}-brokers"


def bootstrap_service_name(cluster: str) -> str:
    return f"{cluster}-bootstrap"


def config_map_name(cluster: str) -> str:
    return f"{cluster}-config"


def cluster_ca_secret_name(cluster: str) -> str:
    """The cluster CA's key and certificate (the operator's alone)."""
    return f"{cluster}-cluster-ca"


def cluster_ca_cert_secret_name(cluster: str) -> str:
    """The cluster CA's certificate bundle, public: what clients and brokers trust."""
    return f"{cluster}-cluster-ca-cert"


def clients_ca_secret_name(cluster: str) -> str:
    return f"{cluster}-clients-ca"


def clients_ca_cert_secret_name(cluster: str) -> str:
    """The clients CA's certificate bundle: what TLS-authenticating listeners trust."""
    return f"{cluster}-clients-ca-cert"


def brokers_secret_name(cluster: str) -> str:
    """Every broker's keystore, ``<pod>.pem``."""
    return f"{cluster}-brokers"


def operator_secret_name(cluster: str) -> str:
    """The operator's own client keystore for this cluster (User:riverlog-operator)."""
    return f"{cluster}-operator"


def service_account_name(cluster: str) -> str:
    return f"{cluster}-broker"


def pdb_name(cluster: str) -> str:
    return cluster


def selector_labels(cluster: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "riverlog",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": "broker",
    }


def selector_string(cluster: str) -> str:
    """The label selector as the scale subresource reports it (for HPA and kubectl)."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(cluster).items()))


def labels(cluster: str) -> dict[str, str]:
    return {**selector_labels(cluster), "app.kubernetes.io/managed-by": "riverlog-operator",
            "riverlog.dev/cluster": cluster}


def owner_reference(ref: ClusterRef) -> dict[str, Any]:
    # controller + blockOwnerDeletion: the garbage collector deletes children with the Cluster,
    # and foreground deletion waits for them.
    return {"apiVersion": API_VERSION, "kind": "Cluster", "name": ref.name, "uid": ref.uid,
            "controller": True, "blockOwnerDeletion": True}


def metadata(inputs: BuildInputs, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": inputs.ref.namespace,
        "labels": labels(inputs.ref.name),
        "ownerReferences": [owner_reference(inputs.ref)],
    }


def pod_dns(cluster: str, namespace: str, ordinal: int) -> str:
    """A broker pod's stable name through the headless Service."""
    return f"{statefulset_name(cluster)}-{ordinal}.{headless_service_name(cluster)}.{namespace}.svc"
