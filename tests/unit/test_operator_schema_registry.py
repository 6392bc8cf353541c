"""The schema registry's builder and model (``builders/schema_registry.py``, ``spec.schemaRegistry``):
pure functions, checked against the CRD and the registry's own settings."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from riverlog.config import parse_properties, parse_set_flags
from riverlog.schema_registry.compatibility import MODES
from riverlog.schema_registry.security_settings import DEFAULT_REALM
from riverlog.schema_registry.settings import settings_from
from riverlog_operator.builders.schema_registry import (
    OWNED,
    SECURITY_PREFIXES,
    RegistryBlocked,
    RegistryInputs,
    build_config_map,
    build_deployment,
    build_schema_registry,
    build_service,
    build_tls_secret,
    inputs_for,
    mounted_secret_keys,
    plan_tls_secret_data,
    registry_dns_names,
    registry_properties,
    registry_url,
)
from riverlog_operator.builders.secrets import CertPolicy
from riverlog_operator.certificates import issue, new_ca
from riverlog_operator.model import (
    AUTH_SCRAM,
    AUTH_TLS,
    COMPATIBILITY_LEVELS,
    ClusterRef,
    ClusterSpec,
    SchemaRegistrySpec,
)
from riverlog_operator.users import UserSpec

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
REF = ClusterRef("demo", "prod", "uid-1")
NOW = datetime.datetime.now(datetime.UTC)


def crd_block() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / "cluster.yaml").read_text())
    block: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["schemaRegistry"]
    return block


def manifests(**registry: Any) -> dict[str, dict[str, Any]]:
    inputs = inputs_for(REF, ClusterSpec.from_dict({"schemaRegistry": registry}), "riverlog:1")
    assert inputs is not None
    return {m["kind"]: m for m in build_schema_registry(inputs)}


def test_the_models_defaults_and_levels_are_the_crds_and_the_registrys() -> None:
    props = crd_block()["properties"]
    assert SchemaRegistrySpec.from_dict({}) == SchemaRegistrySpec()
    assert SchemaRegistrySpec().replicas == props["replicas"]["default"]
    assert SchemaRegistrySpec().compatibility_level == props["compatibilityLevel"]["default"]
    assert set(COMPATIBILITY_LEVELS) == set(MODES) == set(props["compatibilityLevel"]["enum"])
    assert SchemaRegistrySpec.from_dict({"enabled": False}) is None and SchemaRegistrySpec.from_dict(None) is None
    assert ClusterSpec.from_dict({}).schema_registry is None


def test_the_crd_refuses_exactly_what_the_operator_owns_or_cannot_wire() -> None:
    rules = " ".join(r["rule"] for r in crd_block()["properties"]["config"]["x-kubernetes-validations"])
    for key in OWNED:
        assert f"'{key}'" in rules, key
    for prefix in SECURITY_PREFIXES:
        assert f"k.startsWith('{prefix}')" in rules, prefix


def test_the_properties_are_what_the_registry_reads() -> None:
    found = manifests(compatibilityLevel="FULL_TRANSITIVE", config={"kafkastore.topic": "_demo_schemas",
                                                                     "schema.registry.group.id": "demo-sr"})
    text = found["ConfigMap"]["data"]["schema-registry.properties"]
    # As `riverlog schema-registry --config FILE --set host.name=<pod IP>` reads them.
    settings = settings_from({**parse_properties(text), "host.name": "10.0.0.7"})
    assert settings.bootstrap == "demo-bootstrap.prod.svc:9092"
    assert settings.compatibility == "FULL_TRANSITIVE" and settings.topic == "_demo_schemas"
    assert settings.group_id == "demo-sr" and settings.port == 8081 and settings.host == ""
    assert settings.url == "http://10.0.0.7:8081"


def test_the_deployment_runs_the_registry_advertising_its_pod_ip() -> None:
    found = manifests(replicas=3, resources={"limits": {"memory": "256Mi"}})
    deployment = found["Deployment"]
    assert deployment["metadata"]["name"] == "demo-schema-registry" and deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["riverlog", "schema-registry", "--config",
                                    "/etc/riverlog-schema-registry/schema-registry.properties",
                                    "--set", "host.name=$(RIVERLOG_POD_IP)"]
    assert container["env"] == [{"name": "RIVERLOG_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    assert container["image"] == "riverlog:1" and container["resources"] == {"limits": {"memory": "256Mi"}}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "schema-registry"
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert found["Service"]["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_metrics_off_leaves_out_the_scrape_port_and_annotations() -> None:
    on, off = manifests(), manifests(metrics={"enabled": False})
    assert [p["name"] for p in on["Service"]["spec"]["ports"]] == ["http", "metrics"]
    assert on["Deployment"]["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "8081"
    assert [p["name"] for p in off["Service"]["spec"]["ports"]] == ["http"]
    assert not any(k.startswith("prometheus.io/") for k in off["Deployment"]["spec"]["template"]["metadata"][
        "annotations"])


def test_a_config_change_changes_the_pod_template() -> None:
    one, two = manifests(), manifests(compatibilityLevel="NONE")
    key = "riverlog.dev/config-hash"
    assert one["Deployment"]["spec"]["template"]["metadata"]["annotations"][key] != \
        two["Deployment"]["spec"]["template"]["metadata"]["annotations"][key]


def test_without_authentication_the_registry_uses_a_listener_that_needs_none() -> None:
    listeners = [{"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}},
                 {"name": "TLS", "port": 9093, "tls": True}, {"name": "PLAIN", "port": 9092}]
    inputs = inputs_for(REF, ClusterSpec.from_dict({"listeners": listeners, "schemaRegistry": {}}), "riverlog:1")
    assert inputs is not None
    props = registry_properties(inputs)
    # The first without authentication: TLS, trusting the Cluster CA (mounted, not inlined).
    assert props["kafkastore.bootstrap.servers"] == "demo-bootstrap.prod.svc:9093"
    assert props["kafkastore.security.protocol"] == "SSL"
    assert props["kafkastore.ssl.truststore.location"] == "/etc/riverlog-schema-registry-kafka/ca/ca.crt"
    volumes = {v["name"]: v for v in build_deployment(inputs)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["kafka-ca"]["secret"] == {"secretName": "demo-cluster-ca-cert", "defaultMode": 0o440,
                                             "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    plain = inputs_for(REF, ClusterSpec.from_dict({"listeners": listeners[2:], "schemaRegistry": {}}), "riverlog:1")
    assert plain is not None and registry_properties(plain)["kafkastore.security.protocol"] == "PLAINTEXT"
    assert inputs_for(REF, ClusterSpec.from_dict({"listeners": listeners[:1]}), "riverlog:1") is None


SCRAM_ONLY = [{"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}}]
MTLS = [{"name": "MTLS", "port": 9095, "tls": True, "authentication": {"type": "tls"}}]


def blocked(spec: dict[str, Any], user: UserSpec | None = None) -> RegistryBlocked:
    with pytest.raises(RegistryBlocked) as caught:
        inputs_for(REF, ClusterSpec.from_dict(spec), "riverlog:1", user)
    return caught.value


def test_what_the_registry_cannot_be_served_with_is_a_reason_and_what_to_do() -> None:
    scram = {"type": "scram-sha-512", "userRef": {"name": "registry"}}
    found = blocked({"listeners": SCRAM_ONLY, "schemaRegistry": {}})
    assert found.reason == "KafkaAuthenticationNeeded" and "every listener of Cluster demo authenticates" in str(found)
    assert "add spec.schemaRegistry.authentication" in str(found)
    found = blocked({"listeners": [{"name": "PLAIN", "port": 9092}], "authorization": {}, "schemaRegistry": {}})
    assert found.reason == "KafkaAuthenticationNeeded" and "User:ANONYMOUS" in str(found)
    found = blocked({"listeners": SCRAM_ONLY, "schemaRegistry": {"authentication": scram}})
    assert found.reason == "UserNotFound" and "no User 'registry' in namespace prod" in str(found)
    found = blocked({"listeners": SCRAM_ONLY, "schemaRegistry": {"authentication": scram}},
                    UserSpec("demo", AUTH_TLS))
    assert found.reason == "InvalidKafkaAuthentication" and "authenticates with tls" in str(found)
    found = blocked({"listeners": SCRAM_ONLY, "schemaRegistry": {"authentication": scram}},
                    UserSpec("other", AUTH_SCRAM))
    assert found.reason == "InvalidKafkaAuthentication" and "belongs to Cluster 'other'" in str(found)
    found = blocked({"listeners": MTLS, "schemaRegistry": {"authentication": scram}}, UserSpec("demo", AUTH_SCRAM))
    assert found.reason == "InvalidKafkaAuthentication"
    assert "no listener with authentication scram-sha-512" in str(found)
    found = blocked({"listeners": [{"name": "PLAIN", "port": 9092}], "schemaRegistry": {"tls": {}}})
    assert found.reason == "CertificateAuthorityMissing" and "tls.certificateSecret" in str(found)


def secured_inputs(registry: dict[str, Any], listeners: list[dict[str, Any]], user: UserSpec) -> RegistryInputs:
    inputs = inputs_for(REF, ClusterSpec.from_dict({"listeners": listeners, "authorization": {},
                                                    "schemaRegistry": registry}), "riverlog:1", user)
    assert inputs is not None
    return inputs


def start_properties(inputs: RegistryInputs, files: dict[str, bytes], tmp: Path,
                     env: dict[str, str]) -> dict[str, str]:
    """What ``riverlog schema-registry`` reads in a pod: the ConfigMap's file, then each --set with
    Kubernetes' $(VAR) expansion from ``env``; the pod's mount directories moved under ``tmp``
    with ``files`` (pod path: content) written there."""
    container = build_deployment(inputs)["spec"]["template"]["spec"]["containers"][0]
    command = container["command"]
    flags = [command[i + 1] for i, arg in enumerate(command) if arg == "--set"]
    for name, value in env.items():
        flags = [flag.replace(f"$({name})", value) for flag in flags]
    text = build_config_map(inputs)["data"]["schema-registry.properties"]
    props = {**parse_properties(text), **parse_set_flags(flags)}
    for path, content in files.items():
        target = tmp / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return {k: v.replace("/etc/", f"{tmp}/etc/") for k, v in props.items()}


CA = new_ca("riverlog cluster CA", "demo", NOW)


def volumes_items(pod: dict[str, Any], name: str) -> list[dict[str, str]]:
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == name]
    return list(volume["secret"]["items"])


def test_a_scram_user_over_tls_with_https_and_basic_auth_as_the_registry_reads_it(tmp_path: Path) -> None:
    user = UserSpec("demo", AUTH_SCRAM)
    inputs = secured_inputs({"authentication": {"type": "scram-sha-512", "userRef": {"name": "registry"}},
                             "tls": {}, "basicAuth": {"usersSecret": {"name": "sr-users"}, "roles": ["admin", "dev"]}},
                            SCRAM_ONLY, user)
    props = registry_properties(inputs)
    # No password in the ConfigMap, the command line or the environment: the JAAS line names the
    # file mounted from the User's Secret, read through Kafka's DirectoryConfigProvider.
    assert props["kafkastore.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="registry" '
        'password="${dir:/etc/riverlog-schema-registry-kafka/user:password}";')
    assert props["config.providers"] == "dir"
    assert props["config.providers.dir.param.allowed.paths"] == "/etc/riverlog-schema-registry-kafka/user"
    pod = build_deployment(inputs)["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert [e["name"] for e in container["env"]] == ["RIVERLOG_POD_IP"]
    assert not any("jaas" in arg for arg in container["command"])
    assert props["kafkastore.bootstrap.servers"] == "demo-bootstrap.prod.svc:9094"
    assert props["listeners"] == "https://0.0.0.0:8081" and props["inter.instance.protocol"] == "https"
    # Probes over https, on /metrics: the registry serves it without credentials.
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/metrics", "port": "https", "scheme": "HTTPS"}, probe
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"config": "/etc/riverlog-schema-registry", "tmp": "/tmp",
                      "kafka-ca": "/etc/riverlog-schema-registry-kafka/ca", "tls": "/etc/riverlog-schema-registry-tls",
                      "users": "/etc/riverlog-schema-registry-auth",
                      "kafka-user": "/etc/riverlog-schema-registry-kafka/user"}
    assert volumes_items(pod, "kafka-user") == [{"key": "password", "path": "password"}]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "demo-schema-registry-tls"
    assert volumes["users"]["secret"]["items"] == [{"key": "users.properties", "path": "users.properties"}]
    assert [(p["name"], p["targetPort"]) for p in build_service(inputs)["spec"]["ports"]] == [
        ("https", "https"), ("metrics-https", "https")]
    assert pod["metadata"]["annotations"]["prometheus.io/scheme"] == "https"
    assert registry_url("demo", "prod", True) == "https://demo-schema-registry.prod.svc:8081"
    assert {(r.name, r.key) for r in mounted_secret_keys(inputs)} == {
        ("registry", "password"), ("demo-cluster-ca-cert", "ca.crt"), ("demo-schema-registry-tls", "keystore.pem"),
        ("demo-schema-registry-tls", "ca.crt"), ("sr-users", "users.properties")}

    # The registry's own settings loader takes it, key material and all.
    tls = plan_tls_secret_data({"ca.key": CA.key_pem, "ca.crt": CA.cert_pem}, None, {},
                               registry_dns_names("demo", "prod"), NOW, CertPolicy())
    assert tls is not None
    files = {"/etc/riverlog-schema-registry-kafka/ca/ca.crt": CA.cert_pem,
             "/etc/riverlog-schema-registry-tls/keystore.pem": tls["keystore.pem"],
             "/etc/riverlog-schema-registry-tls/ca.crt": tls["ca.crt"],
             "/etc/riverlog-schema-registry-auth/users.properties": b"alice: alice-secret,admin\n",
             "/etc/riverlog-schema-registry-kafka/user/password": b"s3cret"}
    settings = settings_from(start_properties(inputs, files, tmp_path, {"RIVERLOG_POD_IP": "10.0.0.7"}))
    assert settings.url == "https://10.0.0.7:8081" and settings.https is not None
    assert settings.https.client_authentication == "NONE" and not settings.https.check_hostname
    security = settings.kafka_security
    assert security is not None and security.protocol == "SASL_SSL"
    assert (security.mechanism, security.username, security.password) == ("SCRAM-SHA-512", "registry", "s3cret")
    assert settings.auth is not None and settings.auth.authenticator.realm == "SchemaRegistry-Props"
    assert settings.auth.skips("/metrics") and not settings.auth.skips("/subjects")


def test_a_tls_user_presents_its_certificate_from_its_secret(tmp_path: Path) -> None:
    inputs = secured_inputs({"authentication": {"type": "tls", "userRef": {"name": "registry"}}}, MTLS,
                            UserSpec("demo", AUTH_TLS))
    props = registry_properties(inputs)
    assert props["kafkastore.security.protocol"] == "SSL" and "kafkastore.sasl.mechanism" not in props
    assert props["kafkastore.ssl.keystore.location"] == "/etc/riverlog-schema-registry-kafka/user/keystore.pem"
    assert props["listeners"] == "http://0.0.0.0:8081" and "ssl.keystore.location" not in props
    pod = build_deployment(inputs)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["kafka-user"]["secret"]["items"] == [{"key": "user.pem", "path": "keystore.pem"}]
    (container,) = pod["containers"]
    assert [e["name"] for e in container["env"]] == ["RIVERLOG_POD_IP"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/", "port": "http"}
    client = issue(CA, "registry", "clients", NOW, datetime.timedelta(days=30))
    settings = settings_from(start_properties(
        inputs, {"/etc/riverlog-schema-registry-kafka/ca/ca.crt": CA.cert_pem,
                 "/etc/riverlog-schema-registry-kafka/user/keystore.pem": client.keystore_pem},
        tmp_path, {"RIVERLOG_POD_IP": "10.0.0.8"}))
    assert settings.kafka_security is not None and settings.kafka_security.protocol == "SSL"
    assert settings.kafka_security.keystore_location.endswith("/user/keystore.pem")


def test_the_https_certificate_is_issued_kept_and_renewed_like_the_brokers() -> None:
    names = registry_dns_names("demo", "prod")
    assert names == ("demo-schema-registry.prod.svc.cluster.local", "demo-schema-registry.prod.svc",
                     "demo-schema-registry.prod", "demo-schema-registry")
    ca = {"ca.key": CA.key_pem, "ca.crt": CA.cert_pem}
    first = plan_tls_secret_data(ca, None, {}, names, NOW, CertPolicy())
    assert first is not None and first["ca.crt"] == CA.cert_pem
    leaf = x509.load_pem_x509_certificate(first["keystore.pem"])
    assert leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName) == list(names)
    # Serving only: the brokers never take it as a client certificate.
    assert list(leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    assert plan_tls_secret_data(ca, None, first, names, NOW, CertPolicy()) == first
    later = NOW + datetime.timedelta(days=340)  # inside the renewal window of a year's certificate
    assert plan_tls_secret_data(ca, None, first, names, later, CertPolicy())["keystore.pem"] != first["keystore.pem"]  # type: ignore[index]
    other = new_ca("riverlog cluster CA", "demo", NOW)
    replaced = plan_tls_secret_data({"ca.key": other.key_pem, "ca.crt": other.cert_pem}, None, first, names, NOW,
                                    CertPolicy())
    assert replaced is not None and replaced["keystore.pem"] != first["keystore.pem"]
    assert plan_tls_secret_data({}, None, {}, names, NOW, CertPolicy()) is None


def test_a_user_given_certificate_becomes_the_registrys_keystore() -> None:
    given = issue(CA, "registry.example", "ops", NOW, datetime.timedelta(days=30), dns_names=("registry.example",),
                  server=True)
    key = given.key_pem.rstrip(b"\n")
    data = plan_tls_secret_data({}, {"tls.crt": given.cert_pem, "tls.key": key, "ca.crt": CA.cert_pem}, {}, (),
                                NOW, CertPolicy())
    assert data == {"keystore.pem": key + b"\n" + given.cert_pem, "ca.crt": CA.cert_pem}
    # Without ca.crt, the chain itself; without the key, nothing yet.
    assert plan_tls_secret_data({}, {"tls.crt": given.cert_pem, "tls.key": key}, {}, (), NOW,
                                CertPolicy())["ca.crt"] == given.cert_pem  # type: ignore[index]
    assert plan_tls_secret_data({}, {"tls.crt": given.cert_pem}, {}, (), NOW, CertPolicy()) is None
    secret = build_tls_secret(REF, data)
    assert secret["metadata"]["name"] == "demo-schema-registry-tls"
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "riverlog-operator"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_the_security_blocks_defaults_are_the_crds() -> None:
    props = crd_block()["properties"]
    basic = props["basicAuth"]["properties"]
    spec = SchemaRegistrySpec.from_dict({"basicAuth": {"usersSecret": {"name": "u"}}, "tls": {},
                                         "authentication": {"type": "tls", "userRef": {"name": "r"}}})
    assert spec is not None and spec.basic_auth is not None and spec.tls and spec.tls_secret is None
    assert spec.basic_auth.users_key == basic["usersSecret"]["properties"]["key"]["default"]
    assert spec.basic_auth.realm == basic["realm"]["default"] == DEFAULT_REALM
    assert spec.authentication is not None and (spec.authentication.type, spec.authentication.user) == ("tls", "r")
    assert props["authentication"]["properties"]["type"]["enum"] == [AUTH_SCRAM, AUTH_TLS]
    with_secret = SchemaRegistrySpec.from_dict({"tls": {"certificateSecret": {"name": "sr-cert"}}})
    assert with_secret is not None and with_secret.tls_secret == "sr-cert"
