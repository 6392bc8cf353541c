"""A secured Cluster's broker configuration (issue #18): what the operator writes is a
configuration Riverlog's broker accepts and serves as asked. Listeners get Kafka's protocols
from ``tls`` and ``authentication``; a REPLICATION listener and the CONTROLLER listener speak
mutual TLS with the cluster CA; brokers and the operator map to super users; and the whole
file, with a pod's own keystore from the entrypoint and real certificates from
``certificates.py``, passes the broker's start-up checks (TLS files load, SASL parses, the
node's client side towards other brokers and the controllers builds)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from riverlog.cli.broker_cmd import check_security
from riverlog.config import BrokerConfig
from riverlog.security.principal_mapping import parse_rules, principal_name
from riverlog_operator.builders import BuildInputs, initial_voters
from riverlog_operator.builders import config as config_builder
from riverlog_operator.builders.common import bootstrap_service_name, headless_service_name
from riverlog_operator.certificates import broker_dns_names, issue, new_ca
from riverlog_operator.model import ClusterRef, ClusterSpec
from riverlog_operator.pod_entrypoint import per_pod_properties

pytestmark = pytest.mark.unit

REF = ClusterRef("events", "prod", "6f1c2a4e-0000-4000-8000-000000000002")
SECURED = {
    "listeners": [
        {"name": "PLAIN", "port": 9092},
        {"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}},
        {"name": "MTLS", "port": 9095, "tls": True, "authentication": {"type": "tls"}},
    ],
    "authorization": {"superUsers": ["User:admin"]},
}
NOW = datetime.datetime.now(datetime.UTC)


def props_of(spec: dict[str, Any]) -> dict[str, str]:
    parsed = ClusterSpec.from_dict(spec)
    return config_builder.server_properties(BuildInputs(REF, parsed, "riverlog:test", initial_voters(parsed.replicas)))


def test_a_plaintext_cluster_is_unchanged() -> None:
    props = props_of({})
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert not any(key.startswith(("ssl.", "listener.name.", "authorizer.")) for key in props)


def test_listeners_get_kafkas_protocols_and_the_cluster_its_own_mutual_tls() -> None:
    props = props_of(SECURED)
    assert props["listener.security.protocol.map"] == \
        "PLAIN:PLAINTEXT,SCRAM:SASL_SSL,MTLS:SSL,REPLICATION:SSL,CONTROLLER:SSL"
    assert props["listeners"] == "PLAIN://:9092,SCRAM://:9094,MTLS://:9095,REPLICATION://:9091"
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert props["listener.name.scram.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.mtls.ssl.client.auth"] == "required"
    assert props["listener.name.mtls.ssl.truststore.location"] == config_builder.CLIENTS_CA_FILE
    assert props["listener.name.replication.ssl.truststore.location"] == config_builder.CLUSTER_CA_FILE
    assert props["super.users"] == "User:riverlog-broker;User:riverlog-operator;User:admin"
    assert props["authorizer.class.name"] == config_builder.STANDARD_AUTHORIZER


def test_the_clusters_own_certificates_map_to_its_super_users() -> None:
    rules = parse_rules(config_builder.INTERNAL_MAPPING_RULES)
    assert principal_name(rules, "CN=events-2,OU=riverlog-brokers,O=riverlog.dev") == "riverlog-broker"
    assert principal_name(rules, "CN=riverlog-operator,OU=riverlog-operator,O=riverlog.dev") == "riverlog-operator"
    # Any other certificate the cluster CA might sign stays itself, never a super user.
    assert principal_name(rules, "CN=events-2,OU=elsewhere,O=riverlog.dev") == "CN=events-2,OU=elsewhere,O=riverlog.dev"
    client_rules = parse_rules(config_builder.CLIENT_MAPPING_RULES)
    assert principal_name(client_rules, "CN=alice,OU=events,O=riverlog.dev") == "alice"


def test_the_pods_configuration_passes_the_brokers_start_up_checks(tmp_path: Path) -> None:
    cluster_ca, clients_ca = new_ca("cluster-ca", "events", NOW), new_ca("clients-ca", "events", NOW)
    certs = tmp_path / "certs"
    certs.mkdir()
    names = broker_dns_names(REF.name, REF.namespace, 1, headless_service_name(REF.name),
                             bootstrap_service_name(REF.name))
    broker = issue(cluster_ca, "events-1", config_builder.BROKER_UNIT, NOW, datetime.timedelta(days=30),
                   dns_names=names, server=True)
    (certs / "events-1.pem").write_bytes(broker.keystore_pem)
    (tmp_path / "cluster-ca.crt").write_bytes(cluster_ca.cert_pem)
    (tmp_path / "clients-ca.crt").write_bytes(clients_ca.cert_pem)
    text = config_builder.render_properties(props_of(SECURED), "test")
    text = text.replace(config_builder.CLUSTER_CA_FILE, str(tmp_path / "cluster-ca.crt"))
    text = text.replace(config_builder.CLIENTS_CA_FILE, str(tmp_path / "clients-ca.crt"))
    from riverlog.config import parse_properties

    shared = parse_properties(text)
    pod = per_pod_properties(shared, "events-1", REF.namespace, headless_service_name(REF.name), None, str(certs))
    assert pod["ssl.keystore.location"] == str(certs / "events-1.pem")
    config = BrokerConfig({**shared, **pod, "log.dirs": str(tmp_path / "data")})
    check_security(config)  # raises ConfigError on anything the broker would refuse at start
    assert config.security_protocol("CONTROLLER") == "SSL"
    assert config.inter_broker_listener() == "REPLICATION"


# --- key material: the CA and keystore Secrets ------------------------------------------------


def _inputs(replicas: int = 3) -> BuildInputs:
    parsed = ClusterSpec.from_dict({**SECURED, "replicas": replicas})
    return BuildInputs(REF, parsed, "riverlog:test", initial_voters(3))


def test_secured_pods_mount_their_key_material_and_expose_replication() -> None:
    from riverlog_operator.builders.services import build_bootstrap_service
    from riverlog_operator.builders.statefulset import build_statefulset

    pod = build_statefulset(_inputs())["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": "RIVERLOG_K8S_CERTS_DIR", "value": config_builder.CERTS_DIR} in container["env"]
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {
        config_builder.CERTS_DIR, "/etc/riverlog-tls/cluster-ca", "/etc/riverlog-tls/clients-ca"}
    # No mount point inside a read-only volume: a container runtime cannot create it there.
    mounts = container["volumeMounts"]
    nested = [(a["mountPath"], b["mountPath"]) for a in mounts if a.get("readOnly") for b in mounts
              if b["mountPath"].startswith(a["mountPath"].rstrip("/") + "/")]
    assert nested == []
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"broker-certs": "events-brokers", "cluster-ca": "events-cluster-ca-cert",
                       "clients-ca": "events-clients-ca-cert"}
    assert 9091 in [p["containerPort"] for p in container["ports"]]
    assert 9091 in [p["port"] for p in build_bootstrap_service(_inputs())["spec"]["ports"]]


def test_key_material_is_made_once_kept_and_renewed_when_due() -> None:
    from riverlog_operator.builders.secrets import (
        CertPolicy,
        build_ca_secrets,
        decoded,
        plan_broker_keystores,
        plan_ca,
        signed_by,
    )

    policy = CertPolicy(ca_validity=datetime.timedelta(days=40), renew_before=datetime.timedelta(days=10))
    first = plan_ca({}, "cluster-ca", "events", NOW, policy)
    assert first.renewed and first.previous_cert is None
    brokers = plan_broker_keystores(_inputs(), first.current, {}, NOW, policy)
    assert sorted(brokers) == ["events-0.pem", "events-1.pem", "events-2.pem"]
    # The next reconcile reads the same Secrets back and changes nothing.
    secrets = {s["metadata"]["name"]: decoded(s) for s in build_ca_secrets(_inputs(), first, first, NOW)}
    again = plan_ca(secrets["events-cluster-ca"], "cluster-ca", "events", NOW, policy)
    assert not again.renewed and again.current == first.current
    assert plan_broker_keystores(_inputs(), again.current, brokers, NOW, policy) == brokers
    # Scaling out issues only the new broker's.
    grown = plan_broker_keystores(_inputs(4), again.current, brokers, NOW, policy)
    assert {k: grown[k] for k in brokers} == brokers and "events-3.pem" in grown
    # Inside the renewal window: a new CA, the old one still trusted, every broker re-issued.
    later = NOW + datetime.timedelta(days=35)
    renewed = plan_ca(secrets["events-cluster-ca"], "cluster-ca", "events", later, policy)
    assert renewed.renewed and renewed.previous_cert == first.current.cert_pem
    assert renewed.bundle(later).count(b"BEGIN CERTIFICATE") == 2
    reissued = plan_broker_keystores(_inputs(), renewed.current, brokers, later, policy)
    for name, keystore in reissued.items():
        assert keystore != brokers[name]
        assert signed_by(keystore[keystore.index(b"-----BEGIN CERTIFICATE-----"):], renewed.current)
    # A renewal keeps the CA's key (what running clients trust keeps verifying); the brokers'
    # keystores are re-issued even when not due, so none carries the older CA certificate.
    assert renewed.current.key_pem == first.current.key_pem
    forced = plan_ca(secrets["events-cluster-ca"], "cluster-ca", "events", NOW, policy, force=True)
    assert forced.renewed and forced.current.cert_pem != first.current.cert_pem
    assert forced.current.key_pem == first.current.key_pem
    refreshed = plan_broker_keystores(_inputs(), forced.current, brokers, NOW, policy)
    assert all(refreshed[name] != brokers[name] and refreshed[name].endswith(forced.current.cert_pem)
               for name in brokers)
    # Replacing it (forced only) makes a new key; the bundle trusts both until the old expires.
    replaced = plan_ca(secrets["events-cluster-ca"], "cluster-ca", "events", NOW, policy, replace=True)
    assert replaced.renewed and replaced.current.key_pem != first.current.key_pem
    assert replaced.bundle(NOW).count(b"BEGIN CERTIFICATE") == 2


def test_a_deleted_or_unsecured_clusters_ca_expiry_series_are_dropped() -> None:
    from riverlog_operator.metrics import CA_EXPIRY, REGISTRY, forget_ca_expiry

    def series() -> set[tuple[str, str, str]]:
        return {(s.labels["cluster_namespace"], s.labels["cluster"], s.labels["ca"])
                for m in REGISTRY.collect() if m.name == "riverlog_operator_ca_expiry_timestamp_seconds"
                for s in m.samples}

    for ca in ("cluster", "clients"):
        CA_EXPIRY.labels("prod", "gone", ca).set(1.0)
        CA_EXPIRY.labels("prod", "kept", ca).set(2.0)
    forget_ca_expiry("prod", "gone")
    forget_ca_expiry("prod", "never-secured")  # nothing to drop: no error
    assert {("prod", "kept", "cluster"), ("prod", "kept", "clients")} <= series()
    assert not {s for s in series() if s[1] == "gone"}
