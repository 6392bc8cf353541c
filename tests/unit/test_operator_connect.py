"""Connect (issue #19), the pure side: specs with the CRD's defaults, where a worker's Kafka is and
how it authenticates, the worker properties and the manifests that run the workers."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from riverlog_operator.builders.connect import (
    CONFIG_FILE,
    CREDENTIALS_ANNOTATION,
    ConnectInputs,
    Endpoint,
    EndpointError,
    OperatorPeer,
    WorkerRef,
    build_api_service,
    build_config_map,
    build_connect,
    build_deployment,
    build_network_policy,
    build_pdb,
    client_properties,
    config_hash,
    java_properties,
    resolve_endpoint,
    rest_url,
    selector_string,
    worker_properties,
)
from riverlog_operator.builders.connect_metrics import exporter_config_text
from riverlog_operator.builders.statefulset import CONFIG_HASH_ANNOTATION
from riverlog_operator.connect_model import ConnectSpec, KafkaEndpointSpec, SecretKeyRef
from riverlog_operator.model import ClusterSpec

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
UID = "0c6b5e1a-0000-4000-8000-000000000019"
REF = WorkerRef("Connect", "etl", "kafka", UID)
# examples/secured-cluster.yaml: PLAIN 9092, SCRAM 9094 (TLS), MTLS 9095 (TLS, client certificates).
SECURED = ClusterSpec.from_dict(yaml.safe_load((ROOT / "examples" / "secured-cluster.yaml").read_text())["spec"])
SCRAM_USER = {"type": "scram-sha-512", "userRef": {"name": "etl-worker"}}
TLS_USER = {"type": "tls", "userRef": {"name": "etl-worker"}}
SELECTOR = {"app.kubernetes.io/name": "riverlog-connect", "app.kubernetes.io/instance": "etl",
            "app.kubernetes.io/component": "connect"}
LABELS = {**SELECTOR, "app.kubernetes.io/managed-by": "riverlog-operator", "riverlog.dev/connect": "etl"}
OWNER = [{"apiVersion": "riverlog.dev/v1alpha1", "kind": "Connect", "name": "etl", "uid": UID, "controller": True,
          "blockOwnerDeletion": True}]
# The chart's operator pods (riverlog.operatorSelectorLabels) in its release namespace.
OPERATOR_LABELS = {"app.kubernetes.io/component": "operator", "app.kubernetes.io/instance": "riverlog",
                   "app.kubernetes.io/name": "riverlog"}
PEER = OperatorPeer("riverlog-system", tuple(sorted(OPERATOR_LABELS.items())))


def connect(spec: dict[str, Any], cluster: ClusterSpec | None = SECURED, **kw: Any) -> ConnectInputs:
    parsed = ConnectSpec.from_dict(spec)
    endpoint = resolve_endpoint(parsed.endpoint, "kafka", cluster)
    return ConnectInputs(REF, parsed, "riverlog-connect:test", endpoint, **kw)


def endpoint(spec: dict[str, Any], cluster: ClusterSpec | None = SECURED, **kw: Any) -> Endpoint:
    return resolve_endpoint(KafkaEndpointSpec.from_dict(spec), "kafka", cluster, **kw)


# --- specs ------------------------------------------------------------------------------------


def test_spec_defaults_are_the_crds() -> None:
    spec = ConnectSpec.from_dict({"clusterRef": {"name": "secured"}})
    assert spec == ConnectSpec(endpoint=KafkaEndpointSpec(cluster="secured"), replicas=1, config={}, plugins=(),
                               exactly_once_source=False)
    full = ConnectSpec.from_dict({
        "bootstrapServers": "kafka-0.old:9093", "replicas": 3, "image": "my/connect:1", "config": {"a": 1, "b": True},
        "tls": {"trustedCASecret": {"name": "old-ca"}},
        "authentication": {"type": "scram-sha-512", "username": "etl", "passwordSecret": {"name": "etl-pw"}},
        "plugins": [{"name": "jdbc", "volume": {"image": {"reference": "example/jdbc:1"}}}],
        "exactlyOnceSource": True})
    assert full.endpoint.tls and full.endpoint.trusted_ca == SecretKeyRef("old-ca", "ca.crt")
    assert full.endpoint.authentication is not None and full.endpoint.authentication.password_secret == \
        SecretKeyRef("etl-pw", "password")
    assert full.config == {"a": "1", "b": "true"}  # properties spell booleans in lower case
    assert full.plugins[0].volume == {"image": {"reference": "example/jdbc:1"}}
    assert (full.replicas, full.image, full.exactly_once_source) == (3, "my/connect:1", True)
    assert spec.metrics_enabled and not ConnectSpec.from_dict({"metrics": {"enabled": False}}).metrics_enabled


# --- the endpoint -----------------------------------------------------------------------------


def test_a_scram_user_reaches_the_cluster_on_its_scram_listener_over_tls() -> None:
    found = endpoint({"clusterRef": {"name": "secured"}, "authentication": SCRAM_USER})
    assert found == Endpoint("secured-bootstrap.kafka.svc:9094", tls=True,
                             trusted_ca=SecretKeyRef("secured-cluster-ca-cert", "ca.crt"),
                             authentication="scram-sha-512", username="etl-worker",
                             password=SecretKeyRef("etl-worker", "password"), replication_factor=3)
    assert found.security_protocol == "SASL_SSL"


def test_a_tls_user_presents_its_certificate_on_the_mutual_tls_listener() -> None:
    found = endpoint({"clusterRef": {"name": "secured"}, "authentication": TLS_USER})
    assert (found.bootstrap_servers, found.security_protocol) == ("secured-bootstrap.kafka.svc:9095", "SSL")
    assert found.keystore == SecretKeyRef("etl-worker", "user.pem") and found.password is None


def test_without_authentication_the_first_open_listener() -> None:
    found = endpoint({"clusterRef": {"name": "secured"}})
    assert found == Endpoint("secured-bootstrap.kafka.svc:9092", replication_factor=3)
    assert found.security_protocol == "PLAINTEXT"
    small = ClusterSpec.from_dict({"replicas": 1})
    assert endpoint({"clusterRef": {"name": "dev"}}, small).replication_factor == 1


def test_a_named_listener_and_another_trusted_ca() -> None:
    found = endpoint({"clusterRef": {"name": "secured", "listener": "SCRAM"}, "authentication": SCRAM_USER,
                      "tls": {"trustedCASecret": {"name": "corporate-ca", "key": "bundle.pem"}}})
    assert found.trusted_ca == SecretKeyRef("corporate-ca", "bundle.pem")
    assert endpoint({"clusterRef": {"name": "secured"}}, bootstrap_override="127.0.0.1:19092").bootstrap_servers == \
        "127.0.0.1:19092"


@pytest.mark.parametrize(("spec", "cluster", "needle"), [
    ({"clusterRef": {"name": "secured", "listener": "MTLS"}, "authentication": SCRAM_USER}, SECURED,
     "listener MTLS of Cluster 'secured' takes tls, the spec gives authentication scram-sha-512"),
    ({"clusterRef": {"name": "secured", "listener": "NOPE"}}, SECURED, "has no listener 'NOPE'"),
    ({"clusterRef": {"name": "demo"}, "authentication": SCRAM_USER}, ClusterSpec(),
     "Cluster 'demo' has no listener with authentication scram-sha-512"),
    ({"clusterRef": {"name": "gone"}}, None, "no Cluster 'gone' in namespace kafka"),
    ({"clusterRef": {"name": "secured", "listener": "PLAIN"}, "tls": {}}, SECURED, "does not use TLS"),
    ({"bootstrapServers": "x:9092", "authentication": SCRAM_USER}, None, "userRef needs clusterRef"),
    ({"bootstrapServers": "x:9092", "authentication": {"type": "tls", "certificateSecret": {"name": "c"}}}, None,
     "authentication tls needs tls"),
    ({"bootstrapServers": "x:9092", "authentication": {"type": "scram-sha-512", "username": "u"}}, None,
     "needs userRef, or username and passwordSecret"),
    ({}, None, "give clusterRef"),
])
def test_what_cannot_be_met_is_a_spec_error(spec: dict[str, Any], cluster: ClusterSpec | None, needle: str) -> None:
    with pytest.raises(EndpointError) as info:
        endpoint(spec, cluster)
    assert needle in str(info.value)


def test_a_user_of_another_cluster_is_refused() -> None:
    with pytest.raises(EndpointError, match="belongs to Cluster 'other'"):
        endpoint({"clusterRef": {"name": "secured"}, "authentication": SCRAM_USER}, user_cluster="other")
    endpoint({"clusterRef": {"name": "secured"}, "authentication": SCRAM_USER}, user_cluster="secured")


def test_any_kafka_with_its_own_secrets_and_public_cas() -> None:
    found = endpoint({"bootstrapServers": "b-1.msk:9096,b-2.msk:9096", "tls": {},
                      "authentication": {"type": "scram-sha-512", "username": "etl",
                                         "passwordSecret": {"name": "msk", "key": "pw"}}}, None)
    # No trusted CA: the JVM's own trust store. The broker's default replication factor.
    assert found == Endpoint("b-1.msk:9096,b-2.msk:9096", tls=True, authentication="scram-sha-512", username="etl",
                             password=SecretKeyRef("msk", "pw"), replication_factor=-1)
    assert client_properties(found, "kafka") == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" '
                            'password="${directory:/etc/riverlog-connect-credentials/kafka/user:password}";'}


# --- connect-distributed.properties -----------------------------------------------------------


def test_worker_properties_for_a_scram_user() -> None:
    props = worker_properties(connect({"clusterRef": {"name": "secured"}, "authentication": SCRAM_USER}))
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="etl-worker" '
            'password="${directory:/etc/riverlog-connect-credentials/kafka/user:password}";')
    security = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas,
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "/etc/riverlog-connect-credentials/kafka/ca/ca.crt"}
    expected = {
        "bootstrap.servers": "secured-bootstrap.kafka.svc:9094",
        "group.id": "etl-connect",
        "config.storage.topic": "etl-connect-configs", "offset.storage.topic": "etl-connect-offsets",
        "status.storage.topic": "etl-connect-status",
        "config.storage.replication.factor": "3", "offset.storage.replication.factor": "3",
        "status.storage.replication.factor": "3",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "listeners": "http://:8083", "rest.advertised.listener": "http",
        "rest.advertised.host.name": "${env:RIVERLOG_CONNECT_POD_IP}", "rest.advertised.port": "8083",
        "plugin.path": "/opt/riverlog-connect/plugins",
        "config.providers": "directory,env",
        "config.providers.directory.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
        "config.providers.directory.param.allowed.paths": "/etc/riverlog-connect-credentials",
        "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        "config.providers.env.param.allowlist.pattern": "^RIVERLOG_CONNECT_POD_IP$",
        # The worker's own clients, and its tasks' producers, consumers and admin clients.
        **security,
        **{f"{prefix}.{key}": value for prefix in ("producer", "consumer", "admin") for key, value in security.items()},
    }
    assert props == expected


def test_a_worker_without_credentials_has_no_directory_provider() -> None:
    # Kafka's DirectoryConfigProvider stops the worker at start-up when an allowed path does not
    # exist, and nothing is mounted under the credentials directory without credentials.
    props = worker_properties(connect({"bootstrapServers": "kafka:9092"}))
    assert props["config.providers"] == "env"
    assert not any(key.startswith("config.providers.directory.") for key in props)
    mounts = build_deployment(connect({"bootstrapServers": "kafka:9092"}))["spec"]["template"]["spec"][
        "containers"][0]["volumeMounts"]
    assert not any(m["mountPath"].startswith("/etc/riverlog-connect-credentials") for m in mounts)


def test_no_secret_reaches_the_config_map() -> None:
    inputs = connect({"clusterRef": {"name": "secured"}, "authentication": SCRAM_USER})
    text = build_config_map(inputs)["data"][CONFIG_FILE]
    # The password is named, never given: every JAAS line reads it from the mounted Secret.
    jaas_lines = [line for line in text.splitlines() if "sasl.jaas.config=" in line]
    assert len(jaas_lines) == 4
    assert all('password\\="${directory\\:' not in line and 'password="${directory:' in line for line in jaas_lines)
    assert all(line.count('password="') == 1 for line in jaas_lines)
    everything = json.dumps(build_connect(inputs, PEER))
    assert "sasl.jaas.config\": " not in everything and "secretKeyRef" not in everything  # nor in env


def test_tls_client_authentication_uses_the_pem_keystore() -> None:
    props = worker_properties(connect({"clusterRef": {"name": "secured"}, "authentication": TLS_USER}))
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[prefix + "security.protocol"] == "SSL"
        assert props[prefix + "ssl.keystore.type"] == "PEM"
        assert props[prefix + "ssl.keystore.location"] == "/etc/riverlog-connect-credentials/kafka/user/keystore.pem"
        assert prefix + "sasl.jaas.config" not in props


def test_user_config_overrides_defaults_but_never_what_the_operator_owns() -> None:
    props = worker_properties(connect({"clusterRef": {"name": "secured"}, "config": {
        "group.id": "shared", "config.storage.replication.factor": 1, "offset.flush.interval.ms": 1000,
        # Refused by the CRD; should one slip through, the operator's value wins anyway.
        "bootstrap.servers": "elsewhere:9092", "plugin.path": "/tmp", "security.protocol": "SSL"}}))
    assert (props["group.id"], props["config.storage.replication.factor"], props["offset.flush.interval.ms"]) == \
        ("shared", "1", "1000")
    assert props["bootstrap.servers"] == "secured-bootstrap.kafka.svc:9092"
    assert (props["plugin.path"], props["security.protocol"]) == ("/opt/riverlog-connect/plugins", "PLAINTEXT")


def test_exactly_once_source_support_only_when_asked() -> None:
    assert "exactly.once.source.support" not in worker_properties(connect({"clusterRef": {"name": "secured"}}))
    props = worker_properties(connect({"clusterRef": {"name": "secured"}, "exactlyOnceSource": True}))
    assert props["exactly.once.source.support"] == "enabled"


def test_java_properties_escaping() -> None:
    # Checked against java.util.Properties.load (ISO 8859-1): each line reads back as given.
    text = java_properties({"regex": r"^a\.b$", "k=y": " lead", "utf": "é€😀", "multi": "a\nb", "plain": "x=y:z"},
                           "header")
    assert text.splitlines() == [
        "# header",
        r"k\=y=\ lead",
        r"multi=a\nb",
        "plain=x=y:z",
        r"regex=^a\\.b$",
        r"utf=\u00e9\u20ac\ud83d\ude00",
    ]


def test_config_hash_follows_the_properties_only() -> None:
    base = connect({"clusterRef": {"name": "secured"}})
    changed = connect({"clusterRef": {"name": "secured"}, "config": {"offset.flush.interval.ms": "1000"}})
    rescaled = connect({"clusterRef": {"name": "secured"}, "replicas": 5})
    assert config_hash(base) != config_hash(changed)
    assert config_hash(base) == config_hash(rescaled)
    annotations = build_deployment(changed)["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {CONFIG_HASH_ANNOTATION: config_hash(changed), **SCRAPE_ANNOTATIONS}
    # The exporter's rules are in the ConfigMap too: metrics on or off is another revision.
    assert config_hash(base) != config_hash(connect({"clusterRef": {"name": "secured"}, "metrics": {"enabled": False}}))
    # A new password or certificate (the handler hashes the Secrets) rolls the workers too.
    rotated = connect({"clusterRef": {"name": "secured"}}, credentials_version="v2")
    assert build_deployment(rotated)["spec"]["template"]["metadata"]["annotations"][CREDENTIALS_ANNOTATION] == "v2"


# --- manifests --------------------------------------------------------------------------------


SCRAPE_ANNOTATIONS = {"prometheus.io/scrape": "true", "prometheus.io/port": "9404", "prometheus.io/path": "/metrics"}
METRICS_ENV = [{"name": "RIVERLOG_CONNECT_METRICS_PORT", "value": "9404"},
               {"name": "RIVERLOG_CONNECT_METRICS_CONFIG", "value": "/etc/riverlog-connect/metrics.yaml"}]


def meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": "kafka", "labels": LABELS, "ownerReferences": OWNER}


def test_every_manifest_in_apply_order() -> None:
    inputs = connect({"clusterRef": {"name": "secured"}})
    # The NetworkPolicy before the Deployment: no worker pod ever serves its REST API unguarded.
    assert [(m["kind"], m["metadata"]["name"]) for m in build_connect(inputs, PEER)] == [
        ("ConfigMap", "etl-connect-config"), ("Service", "etl-connect-api"), ("NetworkPolicy", "etl-connect-api"),
        ("Deployment", "etl-connect"), ("PodDisruptionBudget", "etl-connect")]
    for manifest in build_connect(inputs, PEER):
        assert manifest["metadata"] == meta(manifest["metadata"]["name"])
    # The operator does not know where its pods are, or policies are off: no policy.
    assert [m["kind"] for m in build_connect(inputs, None)] == ["ConfigMap", "Service", "Deployment",
                                                                "PodDisruptionBudget"]
    assert build_api_service(inputs)["spec"] == {
        "type": "ClusterIP", "selector": SELECTOR,
        "ports": [{"name": "rest", "port": 8083, "targetPort": "rest", "protocol": "TCP"},
                  {"name": "metrics", "port": 9404, "targetPort": "metrics", "protocol": "TCP"}]}
    assert build_pdb(inputs)["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": SELECTOR}}
    assert rest_url(REF) == "http://etl-connect-api.kafka.svc:8083"
    assert selector_string(REF) == ("app.kubernetes.io/component=connect,app.kubernetes.io/instance=etl,"
                                    "app.kubernetes.io/name=riverlog-connect")


def test_the_deployment_runs_the_worker_as_a_non_root_user() -> None:
    deployment = build_deployment(connect({"clusterRef": {"name": "secured"}, "replicas": 2}))
    spec = deployment["spec"]
    assert spec["replicas"] == 2 and spec["selector"] == {"matchLabels": SELECTOR}
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = spec["template"]["spec"]
    assert spec["template"]["metadata"]["labels"] == LABELS
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsUser"] == 10001 and pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["image"] == "riverlog-connect:test"
    assert container["command"] == ["riverlog-connect", "/etc/riverlog-connect/connect-distributed.properties"]
    assert container["env"] == [{"name": "RIVERLOG_CONNECT_POD_IP",
                                 "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, *METRICS_ENV]
    assert container["ports"] == [{"name": "rest", "containerPort": 8083, "protocol": "TCP"},
                                  {"name": "metrics", "containerPort": 9404, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "rest"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/", "port": "rest"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/etc/riverlog-connect", "/tmp"}
    assert "resources" not in container and "imagePullPolicy" not in container
    custom = build_deployment(connect({"clusterRef": {"name": "secured"}, "image": "my/connect:2",
                                       "imagePullPolicy": "Always", "resources": {"limits": {"memory": "2Gi"}}}))
    (container,) = custom["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["imagePullPolicy"], container["resources"]) == \
        ("my/connect:2", "Always", {"limits": {"memory": "2Gi"}})


def test_metrics_are_on_unless_turned_off() -> None:
    # On (the default): the exporter's rules beside the worker properties, the launcher told where
    # they are and which port to serve, that port on the pods and the Service, scrape annotations.
    on = connect({"clusterRef": {"name": "secured"}})
    data = build_config_map(on)["data"]
    assert sorted(data) == ["connect-distributed.properties", "metrics.yaml"]
    assert data["metrics.yaml"] == exporter_config_text()
    template = build_deployment(on)["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert container["env"][1:] == METRICS_ENV
    # The rules file is in the ConfigMap's volume, where the launcher is told to look.
    (config_mount,) = [m for m in container["volumeMounts"] if m["name"] == "config"]
    assert METRICS_ENV[1]["value"] == f"{config_mount['mountPath']}/metrics.yaml"
    assert template["metadata"]["annotations"].items() >= SCRAPE_ANNOTATIONS.items()
    # Off: no agent (the launcher starts it only with the port variable), no port, no annotations.
    off = connect({"clusterRef": {"name": "secured"}, "metrics": {"enabled": False}})
    assert list(build_config_map(off)["data"]) == ["connect-distributed.properties"]
    template = build_deployment(off)["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert [e["name"] for e in container["env"]] == ["RIVERLOG_CONNECT_POD_IP"]
    assert [p["name"] for p in container["ports"]] == ["rest"]
    assert not any(k.startswith("prometheus.io/") for k in template["metadata"]["annotations"])
    assert [p["name"] for p in build_api_service(off)["spec"]["ports"]] == ["rest"]


def test_the_rest_api_only_from_the_workers_and_the_operator_and_metrics_from_anywhere() -> None:
    inputs = connect({"clusterRef": {"name": "secured"}})
    policy = build_network_policy(inputs, PEER)
    assert (policy["apiVersion"], policy["kind"]) == ("networking.k8s.io/v1", "NetworkPolicy")
    assert policy["metadata"] == meta("etl-connect-api")
    spec = policy["spec"]
    # The workers' pods, exactly as the Deployment and the Service select them.
    assert spec["podSelector"] == {"matchLabels": SELECTOR} == build_deployment(inputs)["spec"]["selector"]
    assert spec["policyTypes"] == ["Ingress"]
    rest, metrics = spec["ingress"]
    assert rest == {"ports": [{"protocol": "TCP", "port": 8083}], "from": [
        # The workers (they forward requests to the leader), in the Connect's namespace.
        {"podSelector": {"matchLabels": SELECTOR}},
        # The operator's pods in the operator's namespace: one peer, both selectors ANDed.
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "riverlog-system"}},
         "podSelector": {"matchLabels": OPERATOR_LABELS}}]}
    # The port the pods serve REST on is the one let in.
    (container,) = build_deployment(inputs)["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert rest["ports"][0]["port"] == ports["rest"]
    # Metrics: no "from", any source (Prometheus wherever it runs).
    assert metrics == {"ports": [{"protocol": "TCP", "port": ports["metrics"]}]}
    # Metrics off: only the REST rule, so the (closed) metrics port is not opened either.
    off = build_network_policy(connect({"clusterRef": {"name": "secured"}, "metrics": {"enabled": False}}), PEER)
    assert off["spec"]["ingress"] == [rest]
    # Names: a Mirror's after its base, like its Service.
    mirror = ConnectInputs(WorkerRef("Mirror", "dr", "prod", "uid-m"), ConnectSpec(), "c:x", Endpoint("k:9092"))
    mirror_policy = build_network_policy(mirror, OperatorPeer("ops", (("team", "platform"),)))
    assert mirror_policy["metadata"]["name"] == "dr-mirror-api" == build_api_service(mirror)["metadata"]["name"]
    assert mirror_policy["metadata"]["namespace"] == "prod"
    assert mirror_policy["metadata"]["ownerReferences"][0]["kind"] == "Mirror"
    assert mirror_policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "mirror"
    assert mirror_policy["spec"]["ingress"][0]["from"][1] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}},
        "podSelector": {"matchLabels": {"team": "platform"}}}


def test_credentials_are_mounted_key_by_key_beside_the_config() -> None:
    pod = build_deployment(connect({"clusterRef": {"name": "secured"}, "authentication": SCRAM_USER}))
    spec = pod["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["kafka-user"] == {"name": "kafka-user", "secret": {
        "secretName": "etl-worker", "items": [{"key": "password", "path": "password"}], "defaultMode": 0o440}}
    assert volumes["kafka-ca"] == {"name": "kafka-ca", "secret": {
        "secretName": "secured-cluster-ca-cert", "items": [{"key": "ca.crt", "path": "ca.crt"}],
        "defaultMode": 0o440}}
    assert spec["securityContext"]["fsGroup"] == 10001  # the group that may read them
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["kafka-user"] == {"name": "kafka-user", "mountPath": "/etc/riverlog-connect-credentials/kafka/user",
                                    "readOnly": True}
    assert mounts["kafka-ca"]["mountPath"] == "/etc/riverlog-connect-credentials/kafka/ca"
    # No mount point inside the read-only ConfigMap volume (a container runtime cannot make one).
    config_dir = mounts["config"]["mountPath"] + "/"
    assert not any(m["mountPath"].startswith(config_dir) for m in mounts.values())
    tls = build_deployment(connect({"clusterRef": {"name": "secured"}, "authentication": TLS_USER}))
    tls_volumes = {v["name"]: v for v in tls["spec"]["template"]["spec"]["volumes"]}
    assert tls_volumes["kafka-user"]["secret"]["items"] == [{"key": "user.pem", "path": "keystore.pem"}]


def test_plugins_are_volumes_under_the_plugin_path() -> None:
    inputs = connect({"clusterRef": {"name": "secured"}, "plugins": [
        {"name": "jdbc", "volume": {"image": {"reference": "example/jdbc:1.2", "pullPolicy": "IfNotPresent"}}},
        {"name": "s3", "volume": {"persistentVolumeClaim": {"claimName": "connect-plugins"}}},
        {"name": "scratch", "volume": {"emptyDir": {}}}]})
    spec = build_deployment(inputs)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["plugin-jdbc"] == {"name": "plugin-jdbc",
                                      "image": {"reference": "example/jdbc:1.2", "pullPolicy": "IfNotPresent"}}
    assert volumes["plugin-s3"] == {"name": "plugin-s3", "persistentVolumeClaim": {"claimName": "connect-plugins"}}
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["plugin-jdbc"] == {"name": "plugin-jdbc", "mountPath": "/opt/riverlog-connect/plugins/jdbc",
                                     "readOnly": True}
    assert mounts["plugin-scratch"]["readOnly"] is False
    # One plugin.path entry: each mounted plugin is one directory (one class loader) under it.
    assert worker_properties(inputs)["plugin.path"] == "/opt/riverlog-connect/plugins"


def test_builders_are_pure() -> None:
    inputs = connect({"clusterRef": {"name": "secured"}, "authentication": SCRAM_USER,
                      "plugins": [{"name": "jdbc", "volume": {"configMap": {"name": "jdbc-jars"}}}]})
    before = copy.deepcopy(inputs)
    first = build_connect(inputs, PEER)
    assert build_connect(inputs, PEER) == first and inputs == before


def test_the_example_connect_reaches_the_example_cluster_as_its_user() -> None:
    docs = list(yaml.safe_load_all((ROOT / "examples" / "connect.yaml").read_text()))
    (spec,) = [ConnectSpec.from_dict(d["spec"]) for d in docs if d["kind"] == "Connect"]
    (user,) = [d for d in docs if d["kind"] == "User"]
    found = resolve_endpoint(spec.endpoint, "kafka", SECURED, user_cluster=user["spec"]["clusterRef"]["name"])
    assert (found.bootstrap_servers, found.security_protocol) == ("secured-bootstrap.kafka.svc:9094", "SASL_SSL")
    assert found.password == SecretKeyRef(user["metadata"]["name"], "password")
    # Its User may use the workers' group and topics (one prefix covers the storage topics).
    props = worker_properties(ConnectInputs(WorkerRef("Connect", "etl", "kafka", UID), spec, "x", found))
    acls = {(a["resource"]["type"], a["resource"]["name"]) for a in user["spec"]["authorization"]["acls"]}
    assert ("group", props["group.id"]) in acls
    assert all(props[t].startswith("etl-connect-") for t in ("config.storage.topic", "offset.storage.topic",
                                                            "status.storage.topic"))
    assert ("topic", "etl-connect-") in acls


def test_the_documented_client_policy_selects_the_example_workers() -> None:
    """The escape hatch users are shown (examples/connect.yaml's comments, the design notes): a
    NetworkPolicy of their own selecting the example Connect's workers, allowing the REST port."""
    example = (ROOT / "examples" / "connect.yaml").read_text().splitlines()
    start = example.index("#   apiVersion: networking.k8s.io/v1")
    block = []
    for line in example[start:]:
        if not line.startswith("#   "):
            break
        block.append(line[4:])
    notes = (ROOT / "docs" / "design-notes.md").read_text()
    notes_policy = notes[notes.index("```yaml\napiVersion: networking.k8s.io/v1"):]
    notes_policy = notes_policy[len("```yaml\n"):notes_policy.index("```\n", 4)]
    (connect_doc,) = [d for d in yaml.safe_load_all("\n".join(example)) if d["kind"] == "Connect"]
    inputs = ConnectInputs(WorkerRef("Connect", connect_doc["metadata"]["name"], "kafka", UID),
                           ConnectSpec.from_dict(connect_doc["spec"]), "x", Endpoint("k:9092"))
    for policy in (yaml.safe_load("\n".join(block)), yaml.safe_load(notes_policy)):
        assert policy["kind"] == "NetworkPolicy" and policy["spec"]["policyTypes"] == ["Ingress"]
        assert policy["spec"]["podSelector"] == build_network_policy(inputs, PEER)["spec"]["podSelector"]
        (rule,) = policy["spec"]["ingress"]
        assert rule["ports"] == [{"protocol": "TCP", "port": 8083}]
        assert rule["from"] == [{"podSelector": {"matchLabels": {"etl-connect-client": "true"}}}]
