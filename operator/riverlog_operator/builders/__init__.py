"""Pure builders: a Cluster's spec in, the Kubernetes manifests that run it out."""

from __future__ import annotations

from typing import Any

from .common import BuildInputs, initial_voters
from .config import build_config_map
from .policy import build_pdb, build_service_account
from .services import build_bootstrap_service, build_headless_service
from .statefulset import build_statefulset

__all__ = ["BuildInputs", "build_cluster", "initial_voters"]


def build_cluster(inputs: BuildInputs) -> list[dict[str, Any]]:
    """Every manifest of a Cluster, in the order they are applied (what pods mount first)."""
    return [
        build_service_account(inputs),
        build_config_map(inputs),
        build_headless_service(inputs),
        build_bootstrap_service(inputs),
        build_statefulset(inputs),
        build_pdb(inputs),
    ]
