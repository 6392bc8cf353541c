"""The headless Service (stable per-broker DNS, quorum traffic) and the bootstrap Service."""

from __future__ import annotations

from typing import Any

from ..model import CONTROLLER_PORT, METRICS_PORT
from .common import BuildInputs, bootstrap_service_name, headless_service_name, metadata, selector_labels
from .config import REPLICATION_PORT


def _client_ports(inputs: BuildInputs) -> list[dict[str, Any]]:
    ports = [{"name": lst.name.lower().replace("_", "-"), "port": lst.port, "targetPort": lst.port,
              "protocol": "TCP"} for lst in inputs.spec.listeners]
    if inputs.spec.secured:  # the brokers' own listener, which the operator's admin calls use too
        ports.append({"name": "replication", "port": REPLICATION_PORT, "targetPort": REPLICATION_PORT,
                      "protocol": "TCP"})
    return ports


def build_headless_service(inputs: BuildInputs) -> dict[str, Any]:
    ports = _client_ports(inputs) + [
        {"name": "controller", "port": CONTROLLER_PORT, "targetPort": CONTROLLER_PORT, "protocol": "TCP"},
        {"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP"},
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(inputs, headless_service_name(inputs.ref.name)),
        "spec": {
            "clusterIP": "None",
            # Voters must find each other before any is ready: readiness needs the quorum.
            "publishNotReadyAddresses": True,
            "selector": selector_labels(inputs.ref.name),
            "ports": ports,
        },
    }


def build_bootstrap_service(inputs: BuildInputs) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(inputs, bootstrap_service_name(inputs.ref.name)),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(inputs.ref.name),
            "ports": _client_ports(inputs),
        },
    }
