"""Reconcile a User (issue #18): its credentials in a Secret of its name (a SCRAM password the
operator generates and records in the cluster, or a client certificate from the Cluster's
clients CA), exactly its ACL bindings, and its quotas; behind a finalizer, deleting the User
removes its SCRAM credential, ACLs and quotas from the cluster (the Secret goes with the User,
its owner). The decisions are ``users.py``'s; this is the I/O around them.
"""

from __future__ import annotations

import base64
import datetime
import logging
from collections.abc import Mapping
from typing import Any

from riverlog.client.admin import AdminClient
from riverlog.client.errors import BrokerError
from riverlog.client.quotas import alter_user_quotas, describe_user_quotas
from riverlog.client.users import delete_scram_user, describe_scram_users, upsert_scram_user
from riverlog.protocol.errors import ErrorCode

from .. import API_VERSION, brokers
from ..builders.common import clients_ca_secret_name, labels
from ..builders.secrets import decoded, signed_by
from ..certificates import Issued, due_for_renewal, issue
from ..kubeapi import KubeApi
from ..status import topic_ready
from ..users import (
    AUTH_SCRAM,
    UserSpec,
    exact_filter,
    new_password,
    plan_acls,
    plan_quotas,
    principal_filter,
    scram_secret_data,
    tls_secret_data,
)
from .common import now
from .key_material import admin_endpoint, cert_policy_of

log = logging.getLogger(__name__)
SCRAM_MECHANISM = "SCRAM-SHA-512"


class UserRetry(Exception):
    """Transient: the cluster or its key material is not there yet; kopf retries."""


def _owner(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body["metadata"]
    return {"apiVersion": API_VERSION, "kind": "User", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _secret(body: Mapping[str, Any], cluster: str, data: Mapping[str, str]) -> dict[str, Any]:
    meta = body["metadata"]
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "labels": {**labels(cluster), "riverlog.dev/user": meta["name"]},
                         "ownerReferences": [_owner(body)]},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in sorted(data.items())}}


async def _tls_credentials(api: KubeApi, cluster: Mapping[str, Any], name: str, existing: Mapping[str, bytes],
                           when: datetime.datetime) -> dict[str, str]:
    namespace = cluster["metadata"]["namespace"]
    ca_data = decoded(await api.get("Secret", clients_ca_secret_name(cluster["metadata"]["name"]), namespace))
    if not ca_data:
        raise UserRetry("the Cluster's clients CA does not exist yet (is the Cluster secured?)")
    policy = cert_policy_of(cluster)
    ca = Issued(ca_data["ca.key"], ca_data["ca.crt"])
    cert = existing.get("user.crt")
    # Issued again after a CA renewal too (same key, so still "signed by" it): the Secret's
    # ca.crt and the certificate's lifetime follow the renewed CA.
    if cert and signed_by(cert, ca) and existing.get("ca.crt") == ca.cert_pem \
            and not due_for_renewal(cert, when, policy.renew_before):
        return {k: v.decode() for k, v in existing.items()}
    issued: Issued = issue(ca, name, cluster["metadata"]["name"], when, policy.cert_validity)
    return tls_secret_data(issued.key_pem, issued.cert_pem, ca_data.get("ca.crt", ca.cert_pem))


async def reconcile_user(api: KubeApi, body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    generation = int(meta.get("generation") or 0)
    previous = ((body.get("status") or {}).get("conditions")) or []
    spec = UserSpec.from_resource(name, body.get("spec") or {})

    async def write(ok: bool, reason: str, message: str) -> None:
        status = {"observedGeneration": generation, "username": name, "secret": name,
                  "conditions": topic_ready(ok, reason, message, generation, now(), previous)}
        await api.merge_patch("User", name, namespace, {"status": status}, subresource="status")

    cluster = await api.get("Cluster", spec.cluster, namespace)
    if cluster is None:
        await write(False, "ClusterNotFound", f"no Cluster {spec.cluster!r} in namespace {namespace}")
        return
    existing = decoded(await api.get("Secret", name, namespace))
    if spec.authentication == AUTH_SCRAM:
        password = existing.get("password", b"").decode() or new_password()
        data = scram_secret_data(name, password)
    else:
        try:
            data = await _tls_credentials(api, cluster, name, existing, datetime.datetime.now(datetime.UTC))
        except UserRetry as exc:
            await write(False, "KeyMaterialMissing", str(exc))
            raise
    await api.apply(_secret(body, spec.cluster, data))

    bootstrap, security = await admin_endpoint(api, cluster)
    try:
        async with brokers.admin_client(bootstrap, security) as admin:
            notes = await _converge(admin, name, spec, data)
    except BrokerError as exc:
        await write(False, "BrokerError", str(exc))
        raise UserRetry(str(exc)) from exc
    except brokers.UNREACHABLE_ERRORS as exc:
        message = f"cannot reach the brokers at {bootstrap}: {brokers.describe_error(exc)}"
        await write(False, "ClusterUnreachable", message)
        raise UserRetry(message) from exc
    await write(True, "UserReady", "; ".join(notes) or "credentials, ACLs and quotas in place")


async def _converge(admin: AdminClient, name: str, spec: UserSpec, secret: Mapping[str, str]) -> list[str]:
    notes: list[str] = []
    if spec.authentication == AUTH_SCRAM:
        known = await describe_scram_users(admin, None)
        if not any(u.name == name and any(m == SCRAM_MECHANISM for m, _ in u.credentials) for u in known):
            await upsert_scram_user(admin, name, secret["password"], mechanism=SCRAM_MECHANISM)
            notes.append("SCRAM credential recorded")
    principal = f"User:{name}"
    plan = plan_acls(spec.acls, await admin.describe_acls(principal_filter(principal)))
    if plan.create:
        await admin.create_acls(plan.create)
    if plan.delete:
        await admin.delete_acls([exact_filter(b) for b in plan.delete])
    if plan.create or plan.delete:
        notes.append(f"ACLs: {len(plan.create)} created, {len(plan.delete)} removed")
    changes = plan_quotas(spec.quotas, await describe_user_quotas(admin, name))
    if changes:
        await alter_user_quotas(admin, name, changes)
        notes.append(f"quotas changed: {', '.join(sorted(changes))}")
    return notes


async def delete_user(api: KubeApi, body: Mapping[str, Any]) -> None:
    """Before the finalizer goes: the user's SCRAM credential, ACLs and quotas leave the cluster."""
    meta = body["metadata"]
    spec = UserSpec.from_resource(meta["name"], body.get("spec") or {})
    cluster = await api.get("Cluster", spec.cluster, meta["namespace"])
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        return  # the cluster goes (or went) with everything in it
    bootstrap, security = await admin_endpoint(api, cluster)
    try:
        async with brokers.admin_client(bootstrap, security) as admin:
            if spec.authentication == AUTH_SCRAM:
                try:
                    await delete_scram_user(admin, meta["name"], mechanism=SCRAM_MECHANISM)
                except BrokerError as exc:
                    if exc.code != ErrorCode.RESOURCE_NOT_FOUND:
                        raise
            await admin.delete_acls([principal_filter(f"User:{meta['name']}")])
            quotas = await describe_user_quotas(admin, meta["name"])
            await alter_user_quotas(admin, meta["name"], dict.fromkeys(quotas))
    except BrokerError as exc:
        raise UserRetry(str(exc)) from exc
    except brokers.UNREACHABLE_ERRORS as exc:
        raise UserRetry(f"cannot reach the brokers at {bootstrap} to remove user {meta['name']}: "
                        f"{brokers.describe_error(exc)}") from exc
