"""The broker ConfigMap: a server.properties shared by every broker of a Cluster.

Per-pod values (node.id, process.roles, the CONTROLLER listener for voters, advertised
listeners, broker.rack) cannot live in one shared file; the pod entrypoint
(``riverlog_operator.pod_entrypoint``) derives them from the pod's name and adds them.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

from ..model import AUTH_OAUTH, AUTH_SCRAM, AUTH_TLS, CONTROLLER_PORT, METRICS_PORT, ClusterSpec, ListenerSpec
from .common import CONFIG_FILE, LOG_DIR, BuildInputs, config_map_name, metadata, pod_dns

# A secured cluster's own listener: replication, the operator's admin calls; mutual TLS with
# certificates of the cluster CA (Strimzi's port 9091).
REPLICATION_LISTENER = "REPLICATION"
REPLICATION_PORT = 9091
# Where a broker pod finds its key material (Secrets the operator keeps, mounted read-only).
# Beside the ConfigMap's /etc/riverlog, not under it: a mount point inside a read-only volume
# cannot be created, by a kubelet's container runtime or by the e2e node.
CERTS_DIR = "/etc/riverlog-tls/certs"  # <pod>.pem: the broker's key and certificate chain
CLUSTER_CA_FILE = "/etc/riverlog-tls/cluster-ca/ca.crt"  # what brokers and the operator present chains to
CLIENTS_CA_FILE = "/etc/riverlog-tls/clients-ca/ca.crt"  # what TLS-authenticated users' certificates chain to
# The principals of the cluster's own certificates (see certificates.py): every broker is
# User:riverlog-broker, the operator User:riverlog-operator; both are super users.
BROKER_UNIT = "riverlog-brokers"
OPERATOR_UNIT = "riverlog-operator"
BROKER_PRINCIPAL = "User:riverlog-broker"
OPERATOR_PRINCIPAL = "User:riverlog-operator"
INTERNAL_MAPPING_RULES = (f"RULE:^CN=[^,]+,OU={BROKER_UNIT},O=riverlog[.]dev$/riverlog-broker/,"
                          f"RULE:^CN=[^,]+,OU={OPERATOR_UNIT},O=riverlog[.]dev$/riverlog-operator/,DEFAULT")
# A TLS-authenticated user is User:<the CN of its certificate>, as Strimzi names KafkaUsers.
CLIENT_MAPPING_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
OAUTH_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def _listener_security(lst: ListenerSpec) -> dict[str, str]:
    """The ``listener.name.<l>.*`` properties of one client listener."""
    prefix = f"listener.name.{lst.name.lower()}."
    auth = lst.authentication
    props: dict[str, str] = {}
    if auth is None:
        return props
    if auth.type == AUTH_TLS:
        props.update({"ssl.client.auth": "required", "ssl.truststore.type": "PEM",
                      "ssl.truststore.location": CLIENTS_CA_FILE, "ssl.principal.mapping.rules": CLIENT_MAPPING_RULES})
    elif auth.type == AUTH_SCRAM:
        props.update({"sasl.enabled.mechanisms": "SCRAM-SHA-512", "scram-sha-512.sasl.jaas.config": SCRAM_LOGIN})
    elif auth.type == AUTH_OAUTH:
        props.update({"sasl.enabled.mechanisms": "OAUTHBEARER", "oauthbearer.sasl.jaas.config": OAUTH_LOGIN,
                      "oauthbearer.sasl.server.callback.handler.class": OAUTH_VALIDATOR,
                      "oauthbearer.sasl.oauthbearer.jwks.endpoint.url": auth.jwks_endpoint_uri or ""})
        if auth.valid_issuer_uri:
            props["oauthbearer.sasl.oauthbearer.expected.issuer"] = auth.valid_issuer_uri
        if auth.audience:
            props["oauthbearer.sasl.oauthbearer.expected.audience"] = auth.audience
    return {prefix + key: value for key, value in props.items()}


def security_properties(spec: ClusterSpec) -> dict[str, str]:
    """TLS, SASL and authorization of a secured cluster (empty otherwise): the client listeners
    as the spec says, the REPLICATION and CONTROLLER listeners mutual TLS with the cluster CA."""
    if not spec.secured:
        return {}
    props = {"ssl.keystore.type": "PEM"}  # ssl.keystore.location is per pod (pod_entrypoint.py)
    for internal in ("replication", "controller"):
        prefix = f"listener.name.{internal}."
        props.update({prefix + "ssl.client.auth": "required", prefix + "ssl.truststore.type": "PEM",
                      prefix + "ssl.truststore.location": CLUSTER_CA_FILE,
                      prefix + "ssl.principal.mapping.rules": INTERNAL_MAPPING_RULES})
    for lst in spec.listeners:
        props.update(_listener_security(lst))
    if spec.authorization is not None:
        users = [BROKER_PRINCIPAL, OPERATOR_PRINCIPAL,
                 *(u for u in spec.authorization.super_users if u not in (BROKER_PRINCIPAL, OPERATOR_PRINCIPAL))]
        props.update({"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": ";".join(users)})
    return props


def cluster_id(uid: str) -> str:
    """A Kafka-style cluster id (22 characters of url-safe base64) from the resource's uid, so
    it stays the same for the Cluster's whole life, whatever happens to its voters."""
    return base64.urlsafe_b64encode(uuid.UUID(uid).bytes).decode().rstrip("=")


def quorum_voters(inputs: BuildInputs) -> str:
    ref = inputs.ref
    return ",".join(f"{i}@{pod_dns(ref.name, ref.namespace, i)}:{CONTROLLER_PORT}" for i in range(inputs.voters))


def server_properties(inputs: BuildInputs) -> dict[str, str]:
    """The shared properties; the user's config first, the operator's own keys win (the CRD
    refuses those keys in spec.config anyway)."""
    spec = inputs.spec
    listeners = list(spec.listeners)
    protocol_map = [f"{lst.name}:{lst.security_protocol}" for lst in listeners]
    inter_broker = listeners[0].name
    if spec.secured:
        listeners.append(ListenerSpec(REPLICATION_LISTENER, REPLICATION_PORT, tls=True))
        protocol_map += [f"{REPLICATION_LISTENER}:SSL", "CONTROLLER:SSL"]
        inter_broker = REPLICATION_LISTENER
    else:
        protocol_map.append("CONTROLLER:PLAINTEXT")
    owned = {
        "cluster.id": cluster_id(inputs.ref.uid),
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": quorum_voters(inputs),
        "inter.broker.listener.name": inter_broker,
        "listener.security.protocol.map": ",".join(protocol_map),
        "listeners": ",".join(f"{lst.name}://:{lst.port}" for lst in listeners),
        "log.dirs": LOG_DIR,
        "metrics.port": str(METRICS_PORT),
        **security_properties(spec),
    }
    return {**spec.config, **owned}


def render_properties(props: dict[str, str], header: str) -> str:
    lines = [f"# {header}"] + [f"{key}={props[key]}" for key in sorted(props)]
    return "\n".join(lines) + "\n"


def config_text(inputs: BuildInputs) -> str:
    ref = inputs.ref
    return render_properties(
        server_properties(inputs),
        f"Generated by the Riverlog operator from Cluster {ref.namespace}/{ref.name}; edit the Cluster instead.")


def config_hash(inputs: BuildInputs) -> str:
    """Goes into the pod template, so a config change makes a new revision and a rolling restart."""
    return hashlib.sha256(config_text(inputs).encode()).hexdigest()[:16]


def build_config_map(inputs: BuildInputs) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(inputs, config_map_name(inputs.ref.name)),
        "data": {CONFIG_FILE: config_text(inputs)},
    }
