"""Shared plumbing of the handlers: the API client, settings, per-object locks, annotations."""

from __future__ import annotations

import asyncio
import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..builders.common import bootstrap_service_name
from ..kubeapi import KubeApi
from ..model import ClusterSpec

PAUSE_ANNOTATION = "riverlog.dev/pause-reconciliation"
MANUAL_ROLL_ANNOTATION = "riverlog.dev/manual-rolling-update"
# Where the operator reaches a cluster's brokers, when not through its bootstrap Service (an
# operator outside the cluster, or tests pointing at a broker on loopback).
BOOTSTRAP_ANNOTATION = "riverlog.dev/bootstrap-servers"

DEFAULT_IMAGE = "riverlog:0.1.0"
# The Connect image (the Dockerfile's connect stage), for Connects and Mirrors without spec.image.
DEFAULT_CONNECT_IMAGE = "riverlog-connect:0.1.0"


@dataclass
class OperatorState:
    api: KubeApi | None = None
    default_image: str = field(default_factory=lambda: os.environ.get("RIVERLOG_OPERATOR_IMAGE", DEFAULT_IMAGE))
    default_connect_image: str = field(
        default_factory=lambda: os.environ.get("RIVERLOG_OPERATOR_CONNECT_IMAGE", DEFAULT_CONNECT_IMAGE))
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def lock(self, uid: str) -> asyncio.Lock:
        # Kopf runs change handlers and timers of one object concurrently; one reconcile at a time.
        return self.locks.setdefault(uid, asyncio.Lock())

    def kube(self) -> KubeApi:
        if self.api is None:
            self.api = KubeApi()
        return self.api


STATE = OperatorState()


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def bootstrap_for(name: str, namespace: str, annotations: Mapping[str, str], spec: ClusterSpec) -> str:
    override = annotations.get(BOOTSTRAP_ANNOTATION)
    if override:
        return override
    return f"{bootstrap_service_name(name)}.{namespace}.svc:{spec.listeners[0].port}"
