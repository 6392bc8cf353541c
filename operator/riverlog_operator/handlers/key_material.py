"""A secured Cluster's key material in the reconcile (issue #18): read the CA and keystore
Secrets, decide with ``builders/secrets.py`` what they should be now (made, kept, renewed; a
``riverlog.dev/force-renew-ca`` annotation of ``cluster``, ``clients`` or ``all`` forces a CA
renewal with the same key, ``riverlog.dev/force-replace-ca`` a new key, as Strimzi's
``force-renew`` and ``force-replace``), and give the operator's own TLS client settings for its
admin calls: the cluster CA's bundle as truststore, its ``riverlog-operator`` certificate as
keystore, the REPLICATION port.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from riverlog.security.client_config import ClientSecurity

from ..builders import BuildInputs
from ..builders.common import (
    bootstrap_service_name,
    brokers_secret_name,
    clients_ca_secret_name,
    cluster_ca_cert_secret_name,
    cluster_ca_secret_name,
    operator_secret_name,
)
from ..builders.config import REPLICATION_PORT
from ..builders.secrets import (
    CA_CERT,
    OPERATOR_KEYSTORE,
    CertPolicy,
    build_ca_secrets,
    build_keystore_secrets,
    decoded,
    plan_broker_keystores,
    plan_ca,
    plan_operator_keystore,
)
from ..kubeapi import KubeApi
from ..model import ClusterSpec
from .common import BOOTSTRAP_ANNOTATION, bootstrap_for

FORCE_RENEW_ANNOTATION = "riverlog.dev/force-renew-ca"
FORCE_REPLACE_ANNOTATION = "riverlog.dev/force-replace-ca"


@dataclass(frozen=True)
class KeyMaterial:
    secrets: list[dict[str, Any]]  # to apply before the StatefulSet
    status: dict[str, Any]  # status.certificateAuthorities
    renewed: tuple[str, ...]  # "cluster" / "clients": CAs made or renewed now


def security_from_keystore(keystore: bytes, bundle: bytes) -> ClientSecurity:
    """Mutual TLS with a PEM keystore (key, then chain) and a CA bundle, all inline."""
    cut = keystore.index(b"-----BEGIN CERTIFICATE-----")
    return ClientSecurity(protocol="SSL", truststore_certificates=bundle.decode(),
                          keystore_key=keystore[:cut].decode(), keystore_chain=keystore[cut:].decode())


def cert_policy(inputs: BuildInputs) -> CertPolicy:
    return cert_policy_of_spec(inputs.spec)


def cert_policy_of(cluster: Mapping[str, Any]) -> CertPolicy:
    return cert_policy_of_spec(ClusterSpec.from_dict(cluster.get("spec") or {}))


def cert_policy_of_spec(spec: ClusterSpec) -> CertPolicy:
    ca = spec.certificate_authority
    validity = datetime.timedelta(days=ca.validity_days)
    return CertPolicy(ca_validity=validity, cert_validity=validity,
                      renew_before=datetime.timedelta(days=ca.renewal_days))


async def plan_key_material(api: KubeApi, inputs: BuildInputs, annotations: Mapping[str, str],
                            now: datetime.datetime) -> KeyMaterial:
    name, namespace = inputs.ref.name, inputs.ref.namespace
    policy = cert_policy(inputs)
    read = {secret: decoded(await api.get("Secret", secret, namespace))
            for secret in (cluster_ca_secret_name(name), clients_ca_secret_name(name), brokers_secret_name(name),
                           operator_secret_name(name))}
    force = annotations.get(FORCE_RENEW_ANNOTATION, "").strip().lower()
    replace = annotations.get(FORCE_REPLACE_ANNOTATION, "").strip().lower()
    cluster_ca = plan_ca(read[cluster_ca_secret_name(name)], "riverlog cluster CA", name, now, policy,
                         force=force in ("cluster", "all", "true"), replace=replace in ("cluster", "all", "true"))
    clients_ca = plan_ca(read[clients_ca_secret_name(name)], "riverlog clients CA", name, now, policy,
                         force=force in ("clients", "all", "true"), replace=replace in ("clients", "all", "true"))
    brokers = plan_broker_keystores(inputs, cluster_ca.current, read[brokers_secret_name(name)], now, policy)
    operator = plan_operator_keystore(cluster_ca.current, read[operator_secret_name(name)], now, policy)
    secrets = build_ca_secrets(inputs, cluster_ca, clients_ca, now) + build_keystore_secrets(inputs, brokers, operator)
    status = {"cluster": {"notAfter": cluster_ca.current.not_after.strftime("%Y-%m-%dT%H:%M:%SZ")},
              "clients": {"notAfter": clients_ca.current.not_after.strftime("%Y-%m-%dT%H:%M:%SZ")}}
    renewed = tuple(kind for kind, gen in (("cluster", cluster_ca), ("clients", clients_ca)) if gen.renewed)
    return KeyMaterial(secrets, status, renewed)


def operator_bootstrap(cluster: str, namespace: str) -> str:
    return f"{bootstrap_service_name(cluster)}.{namespace}.svc:{REPLICATION_PORT}"


async def operator_security(api: KubeApi, cluster: str, namespace: str) -> ClientSecurity | None:
    """The operator's client settings for a secured cluster, from the Secrets it keeps (None
    while they do not exist yet)."""
    keystore = decoded(await api.get("Secret", operator_secret_name(cluster), namespace)).get(OPERATOR_KEYSTORE)
    bundle = decoded(await api.get("Secret", cluster_ca_cert_secret_name(cluster), namespace)).get(CA_CERT)
    if not keystore or not bundle:
        return None
    return security_from_keystore(keystore, bundle)


async def admin_endpoint(api: KubeApi, cluster: Mapping[str, Any]) -> tuple[str, ClientSecurity | None]:
    """Where and how the operator reaches a Cluster's brokers for admin calls: its client
    bootstrap in plaintext, or the REPLICATION listener with its own certificate when secured
    (the ``riverlog.dev/bootstrap-servers`` annotation overrides the address either way)."""
    meta = cluster["metadata"]
    name, namespace, annotations = meta["name"], meta["namespace"], meta.get("annotations") or {}
    spec = ClusterSpec.from_dict(cluster.get("spec") or {})
    bootstrap = bootstrap_for(name, namespace, annotations, spec)
    if not spec.secured:
        return bootstrap, None
    if not annotations.get(BOOTSTRAP_ANNOTATION):
        bootstrap = operator_bootstrap(name, namespace)
    return bootstrap, await operator_security(api, name, namespace)
