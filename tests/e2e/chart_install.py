"""Installing the chart for an e2e scenario: one release per test module, in its own namespace,
its operator watching only that namespace."""

from __future__ import annotations

import os
from pathlib import Path

from support.kube import KubeCluster

CHART = Path(__file__).resolve().parents[2] / "charts" / "riverlog"


def install_chart(kube: KubeCluster, release: str, namespace: str, *settings: str) -> None:
    """``helm install`` without waiting (the scenario waits for what it needs). ``settings`` are
    more helm arguments (``--set``...); RIVERLOG_E2E_HELM_SET adds the ones e2e/kind.sh gives
    (the image it built and loaded: ``image.repository=...,image.tag=...``)."""
    extra = [arg for item in os.environ.get("RIVERLOG_E2E_HELM_SET", "").split(",") if item
             for arg in ("--set", item)]
    kube.helm("install", release, str(CHART), "-n", namespace, "--wait=false",
              "--set", f"operator.watchNamespaces={{{namespace}}}", "--set", "operator.verbose=true",
              "--set", "operator.readinessProbe.periodSeconds=2", *settings, *extra, timeout=180)
