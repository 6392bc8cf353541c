"""PodDisruptionBudget and ServiceAccount of a Cluster's brokers."""

from __future__ import annotations

from typing import Any

from .common import BuildInputs, metadata, pdb_name, selector_labels, service_account_name


def build_pdb(inputs: BuildInputs) -> dict[str, Any]:
    # One broker down at a time: with replication factor 3 and min.insync.replicas 2 that keeps
    # every partition writable through node drains.
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(inputs, pdb_name(inputs.ref.name)),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(inputs.ref.name)}},
    }


def build_service_account(inputs: BuildInputs) -> dict[str, Any]:
    # Brokers never call the Kubernetes API (the operator passes the rack in a pod annotation).
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(inputs, service_account_name(inputs.ref.name)),
        "automountServiceAccountToken": False,
    }
