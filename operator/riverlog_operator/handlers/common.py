"""Shared plumbing of the handlers: the API client, settings, per-object locks, annotations."""

from __future__ import annotations

import asyncio
import datetime
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..builders.common import bootstrap_service_name
from ..builders.connect import OperatorPeer
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

# The NetworkPolicy guarding each Connect's and Mirror's REST API (builders/connect.py) names the
# operator's pods; the chart says where they are: the namespace (downward API) and the pods'
# selector labels as k=v,k=v. The switch is the chart's connect.networkPolicy.enabled.
NETWORK_POLICY_ENV = "RIVERLOG_OPERATOR_CONNECT_NETWORK_POLICY"
NAMESPACE_ENV = "RIVERLOG_OPERATOR_NAMESPACE"
POD_SELECTOR_ENV = "RIVERLOG_OPERATOR_POD_SELECTOR"
_ON = ("true", "1", "yes", "on")
_OFF = ("false", "0", "no", "off")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


@dataclass(frozen=True)
class NetworkPolicySetting:
    """Whether Connects and Mirrors get their REST API's NetworkPolicy: ``peer`` the operator's
    pods it lets in, None for no policy; ``note`` says which and why (logged once at start)."""

    peer: OperatorPeer | None
    note: str


def _selector_labels(text: str) -> tuple[tuple[str, str], ...]:
    """``k=v,k=v`` (Kubernetes label syntax) as pairs; ValueError when it is not that."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = (part.strip() for part in item.partition("="))
        prefix, slash, name = key.rpartition("/")
        if not sep or (slash and not _LABEL_PREFIX.fullmatch(prefix)) or not _LABEL_NAME.fullmatch(name) \
                or (value and not _LABEL_NAME.fullmatch(value)):
            raise ValueError(f"{POD_SELECTOR_ENV}: {item.strip()!r} is not a label key=value")
        if key in pairs:
            raise ValueError(f"{POD_SELECTOR_ENV}: label {key} given twice")
        pairs[key] = value
    return tuple(sorted(pairs.items()))


def network_policy_setting(env: Mapping[str, str]) -> NetworkPolicySetting:
    """The setting from the operator's environment. No policy when it is turned off, or when the
    operator does not know where its pods are (run outside the cluster, as the k8s test tier
    does: a policy naming no operator pods would lock it out of the REST API). A malformed value
    is a ValueError: the operator refuses to start rather than guess about a security control."""
    switch = (env.get(NETWORK_POLICY_ENV) or "true").strip().lower()
    if switch in _OFF:
        return NetworkPolicySetting(None, f"{NETWORK_POLICY_ENV}={env[NETWORK_POLICY_ENV]} (the chart's "
                                          "connect.networkPolicy.enabled): no NetworkPolicy guards the REST API "
                                          "of Connect and Mirror workers; any left is deleted")
    if switch not in _ON:
        raise ValueError(f"{NETWORK_POLICY_ENV}={env[NETWORK_POLICY_ENV]!r}: give true or false")
    namespace = (env.get(NAMESPACE_ENV) or "").strip()
    selector = (env.get(POD_SELECTOR_ENV) or "").strip()
    missing = [name for name, value in ((NAMESPACE_ENV, namespace), (POD_SELECTOR_ENV, selector)) if not value]
    if missing:
        return NetworkPolicySetting(None, f"{' and '.join(missing)} not set (an operator outside the cluster; the "
                                          "chart sets them): no NetworkPolicy guards the REST API of Connect and "
                                          "Mirror workers; any left is deleted")
    if not _DNS_LABEL.fullmatch(namespace):
        raise ValueError(f"{NAMESPACE_ENV}={namespace!r} is not a namespace name")
    peer = OperatorPeer(namespace, _selector_labels(selector))
    shown = ",".join(f"{k}={v}" for k, v in peer.pod_labels)
    return NetworkPolicySetting(peer, f"NetworkPolicies <name>-connect-api and <name>-mirror-api let only the "
                                      f"workers and the operator's pods ({shown} in namespace {namespace}) reach "
                                      "the workers' REST API")


@dataclass
class OperatorState:
    api: KubeApi | None = None
    default_image: str = field(default_factory=lambda: os.environ.get("RIVERLOG_OPERATOR_IMAGE", DEFAULT_IMAGE))
    default_connect_image: str = field(
        default_factory=lambda: os.environ.get("RIVERLOG_OPERATOR_CONNECT_IMAGE", DEFAULT_CONNECT_IMAGE))
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    network_policy: NetworkPolicySetting | None = None  # read from the environment when first asked

    def connect_network_policy(self) -> NetworkPolicySetting:
        """The Connect NetworkPolicy setting (ValueError when the environment is malformed; the
        start-up handler asks first, so the operator stops there)."""
        if self.network_policy is None:
            self.network_policy = network_policy_setting(os.environ)
        return self.network_policy

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
