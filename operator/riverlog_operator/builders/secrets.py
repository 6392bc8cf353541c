"""The key-material Secrets of a secured Cluster (issue #18): the cluster and clients CAs, their
public certificate bundles, every broker's keystore and the operator's own client keystore.

Pure: the Secrets the operator read (their ``data``, decoded) and the time go in, the Secrets to
apply come out, renewed where due. A CA is renewed inside its renewal window (or when forced):
a new certificate for the same key and name, so whoever trusts the old certificate trusts what
the new one signs; its bundle keeps the old certificate while that is valid, and every
certificate the old one signed is issued again, so brokers (which reload key and trust files
without a restart) and running clients never stop trusting each other. Replacing a CA (forced
only) makes a new key: the bundle carries both until the old one expires, and clients must load
the new bundle before then.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from ..certificates import Issued, broker_dns_names, due_for_renewal, issue, new_ca, trust_bundle
from .common import (
    BuildInputs,
    bootstrap_service_name,
    brokers_secret_name,
    clients_ca_cert_secret_name,
    clients_ca_secret_name,
    cluster_ca_cert_secret_name,
    cluster_ca_secret_name,
    headless_service_name,
    metadata,
    operator_secret_name,
    statefulset_name,
)
from .config import BROKER_UNIT, OPERATOR_UNIT

CA_KEY, CA_CERT, PREVIOUS_CA_CERT = "ca.key", "ca.crt", "previous-ca.crt"
OPERATOR_KEYSTORE = "operator.pem"
CA_EXPIRY_ANNOTATION = "riverlog.dev/ca-not-after"


@dataclass(frozen=True)
class CertPolicy:
    ca_validity: datetime.timedelta = datetime.timedelta(days=365)
    cert_validity: datetime.timedelta = datetime.timedelta(days=365)
    renew_before: datetime.timedelta = datetime.timedelta(days=30)


@dataclass(frozen=True)
class CaGeneration:
    current: Issued
    previous_cert: bytes | None  # the CA it replaced, trusted until it expires
    renewed: bool  # made or renewed by this reconcile

    def bundle(self, now: datetime.datetime) -> bytes:
        return trust_bundle(self.current, self.previous_cert, now)


def decoded(secret: Mapping[str, Any] | None) -> dict[str, bytes]:
    """A Secret's data, base64 decoded (empty for a missing Secret)."""
    return {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}


def plan_ca(existing: Mapping[str, bytes], common_name: str, unit: str, now: datetime.datetime, policy: CertPolicy,
            force: bool = False, replace: bool = False) -> CaGeneration:
    """The CA to sign with: the existing one; renewed (same key) when due or forced; a new key
    when missing or when a replacement is asked for."""
    have = CA_KEY in existing and CA_CERT in existing
    if have and not force and not replace and not due_for_renewal(existing[CA_CERT], now, policy.renew_before):
        return CaGeneration(Issued(existing[CA_KEY], existing[CA_CERT]), existing.get(PREVIOUS_CA_CERT), False)
    previous = existing.get(CA_CERT)
    key = existing[CA_KEY] if have and not replace else None
    return CaGeneration(new_ca(common_name, unit, now, policy.ca_validity, key_pem=key), previous, True)


def signed_by(cert_pem: bytes, ca: Issued) -> bool:
    """Whether the leaf of ``cert_pem`` was signed by ``ca`` (its issuer key id is the CA's)."""
    leaf = x509.load_pem_x509_certificate(cert_pem)
    try:
        issuer_key = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
    except x509.ExtensionNotFound:
        return False
    ca_key = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    return issuer_key == ca_key


def _names_of(cert_pem: bytes) -> tuple[str, ...]:
    try:
        san = x509.load_pem_x509_certificate(cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return ()
    return tuple(san.value.get_values_for_type(x509.DNSName))


def _keep(keystore: bytes | None, ca: Issued, names: tuple[str, ...], now: datetime.datetime,
          policy: CertPolicy) -> bool:
    if not keystore or b"CERTIFICATE" not in keystore:
        return False
    cert_pem = keystore[keystore.index(b"-----BEGIN CERTIFICATE-----"):]
    # The chain ends with the CA certificate it was issued under: a renewed CA (same key, so
    # still "signed by" it) re-issues too, so no keystore carries an expiring CA certificate.
    return signed_by(cert_pem, ca) and cert_pem.endswith(ca.cert_pem) \
        and not due_for_renewal(cert_pem, now, policy.renew_before) and _names_of(cert_pem) == names


def plan_broker_keystores(inputs: BuildInputs, ca: Issued, existing: Mapping[str, bytes], now: datetime.datetime,
                          policy: CertPolicy) -> dict[str, bytes]:
    """``<pod>.pem`` for every broker of the StatefulSet: kept while signed by ``ca``, not due
    and naming the right hosts; issued again otherwise."""
    ref = inputs.ref
    out: dict[str, bytes] = {}
    for ordinal in range(inputs.statefulset_replicas):
        pod = f"{statefulset_name(ref.name)}-{ordinal}"
        names = broker_dns_names(ref.name, ref.namespace, ordinal, headless_service_name(ref.name),
                                 bootstrap_service_name(ref.name))
        current = existing.get(f"{pod}.pem")
        if current is not None and _keep(current, ca, names, now, policy):
            out[f"{pod}.pem"] = current
        else:
            out[f"{pod}.pem"] = issue(ca, pod, BROKER_UNIT, now, policy.cert_validity, dns_names=names,
                                      server=True).keystore_pem
    return out


def plan_operator_keystore(ca: Issued, existing: Mapping[str, bytes], now: datetime.datetime,
                           policy: CertPolicy) -> bytes:
    current = existing.get(OPERATOR_KEYSTORE)
    if current is not None and _keep(current, ca, (), now, policy):
        return current
    return issue(ca, "riverlog-operator", OPERATOR_UNIT, now, policy.cert_validity).keystore_pem


def plan_server_keystore(ca: Issued, current: bytes | None, common_name: str, unit: str, names: tuple[str, ...],
                         now: datetime.datetime, policy: CertPolicy) -> bytes:
    """A serving-only certificate (no client use: the brokers never take it as a client's) for
    ``names``, as the brokers' are kept and renewed: ``current`` while signed by ``ca``, not due
    and naming ``names``; issued again otherwise."""
    if current is not None and _keep(current, ca, names, now, policy):
        return current
    return issue(ca, common_name, unit, now, policy.cert_validity, dns_names=names, server=True,
                 client=False).keystore_pem


def _secret(inputs: BuildInputs, name: str, data: Mapping[str, bytes],
            annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta = metadata(inputs, name)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta,
            "data": {k: base64.b64encode(v).decode() for k, v in sorted(data.items())}}


def build_ca_secrets(inputs: BuildInputs, cluster_ca: CaGeneration, clients_ca: CaGeneration,
                     now: datetime.datetime) -> list[dict[str, Any]]:
    """The two CA Secrets (private) and their certificate bundles (public)."""
    out = []
    for gen, private, public in ((cluster_ca, cluster_ca_secret_name, cluster_ca_cert_secret_name),
                                 (clients_ca, clients_ca_secret_name, clients_ca_cert_secret_name)):
        expiry = {CA_EXPIRY_ANNOTATION: gen.current.not_after.isoformat()}
        data = {CA_KEY: gen.current.key_pem, CA_CERT: gen.current.cert_pem}
        if gen.previous_cert:
            data[PREVIOUS_CA_CERT] = gen.previous_cert
        out.append(_secret(inputs, private(inputs.ref.name), data, expiry))
        out.append(_secret(inputs, public(inputs.ref.name), {CA_CERT: gen.bundle(now)}, expiry))
    return out


def build_keystore_secrets(inputs: BuildInputs, brokers: Mapping[str, bytes], operator: bytes) -> list[dict[str, Any]]:
    return [_secret(inputs, brokers_secret_name(inputs.ref.name), brokers),
            _secret(inputs, operator_secret_name(inputs.ref.name), {OPERATOR_KEYSTORE: operator})]
