"""A Cluster's schema registry (issue #20, ``spec.schemaRegistry``): ``riverlog schema-registry``
from the broker image in a Deployment, its REST API (Confluent's, port 8081) behind a Service.

Pure, like the other builders: the Cluster's identity and spec in, manifests out. Instances
elect one writer through a consumer group and forward writes to it at the name it advertises
(``host.name``), so each pod advertises its own IP (``$(RIVERLOG_POD_IP)`` in the command, which
Kubernetes expands from the downward API). The registry serves Prometheus metrics at
``/metrics`` on its REST port; with metrics on, the Service has a port named ``metrics`` (the
brokers' and Connect workers' convention, which the chart's ServiceMonitors scrape) targeting it,
and the pods the ``prometheus.io/*`` annotations.

The registry reaches the Cluster as Connect does (``builders/connect.py``'s ``resolve_endpoint``):
without ``authentication`` through the first listener without authentication, with it as the
``User`` it names through the first listener of that type; the Cluster CA as truststore when the
listener speaks TLS. Key material is mounted from Secrets, never written into the ConfigMap: the
Cluster CA's ``ca.crt`` and a TLS User's ``user.pem`` as files the ``kafkastore.ssl.*``
properties name; a SCRAM User's password as a file the ``kafkastore.sasl.jaas.config`` names
through Kafka's DirectoryConfigProvider (``${dir:...:password}``, which the registry resolves at
start), so it is on no command line and in no environment. ``tls`` serves https with a keystore
Secret the operator keeps (``plan_tls_secret_data``), ``basicAuth`` mounts a Jetty users file.
``registry_endpoint`` says, for the status, what keeps a registry from being served.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..certificates import Issued
from ..connect_model import AuthenticationSpec, KafkaEndpointSpec, SecretKeyRef
from ..model import AUTH_SCRAM, AUTH_TLS, ClusterRef, ClusterSpec, SchemaRegistrySpec
from ..users import UserSpec
from .common import (
    hardened_container,
    owner_reference,
    restricted_pod_security,
    spread_over_nodes,
)
from .connect import (
    CREDENTIALS_ANNOTATION,
    SCRAM_LOGIN_MODULE,
    SCRAM_MECHANISM,
    Endpoint,
    EndpointError,
    resolve_endpoint,
    secret_key_volume,
)
from .secrets import CA_CERT, CA_KEY, CertPolicy, plan_server_keystore
from .statefulset import CONFIG_HASH_ANNOTATION

REST_PORT = 8081  # Confluent's
METRICS_PORT_NAME = "metrics"  # on the Service only: the REST port's /metrics, as the ServiceMonitor finds it
METRICS_SERVICE_PORT = 9404  # model.METRICS_PORT, the brokers' number
CONFIG_DIR = "/etc/riverlog-schema-registry"
CONFIG_FILE = "schema-registry.properties"
POD_IP_ENV = "RIVERLOG_POD_IP"
COMPONENT = "schema-registry"
# Properties the operator writes; the CRD refuses them in spec.schemaRegistry.config. Metrics stay
# open (riverlog.metrics.authentication): the probes and the ServiceMonitor carry no credentials.
OWNED = ("listeners", "port", "host.name", "kafkastore.bootstrap.servers", "schema.compatibility.level",
         "avro.compatibility.level", "inter.instance.protocol", "schema.registry.inter.instance.protocol",
         "riverlog.metrics.authentication")
# Security settings the operator sets from tls, basicAuth and authentication (with the key
# material mounted): refused by the CRD in config.
SECURITY_PREFIXES = ("ssl.", "authentication.", "kafkastore.security.", "kafkastore.sasl.", "kafkastore.ssl.")
# Key material in the pods, each beside the ConfigMap's directory (a mount point cannot be made
# inside a read-only volume).
TLS_DIR = "/etc/riverlog-schema-registry-tls"  # keystore.pem, ca.crt: the https listener's
KAFKA_DIR = "/etc/riverlog-schema-registry-kafka"  # ca/ca.crt, user/keystore.pem: the Kafka client's
AUTH_DIR = "/etc/riverlog-schema-registry-auth"  # users.properties: basic auth's users
KEYSTORE_FILE = "keystore.pem"
CA_FILE = "ca.crt"
USERS_FILE = "users.properties"
PASSWORD_FILE = "password"  # a SCRAM User's password, from its Secret, in KAFKA_DIR/user
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
SCHEMA_REGISTRY_UNIT = "riverlog-schema-registry"  # the OU of the certificate the operator issues
# A user-given certificate: kubernetes.io/tls keys (cert-manager's layout, ca.crt optional).
TLS_CERT_KEY, TLS_KEY_KEY, TLS_CA_KEY = "tls.crt", "tls.key", "ca.crt"


class RegistryBlocked(ValueError):
    """The registry cannot be served as the Cluster and spec are: ``reason`` and the message for
    the SchemaRegistryReady condition."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class RegistryInputs:
    """Everything the registry's manifests depend on."""

    ref: ClusterRef
    spec: SchemaRegistrySpec
    image: str  # the Cluster's broker image: the registry is the same `riverlog` program
    image_pull_policy: str | None
    endpoint: Endpoint  # how the registry's pods reach the Cluster, and as whom
    # A hash of the Secret keys the pods mount (handlers/schema_registry.py): the registry reads
    # key material once, so a rotated password or renewed certificate rolls the instances.
    credentials_version: str | None = None

    @property
    def bootstrap(self) -> str:
        return self.endpoint.bootstrap_servers


# --- names and labels -------------------------------------------------------------------------


def deployment_name(cluster: str) -> str:
    return f"{cluster}-schema-registry"


def service_name(cluster: str) -> str:
    return f"{cluster}-schema-registry"


def config_map_name(cluster: str) -> str:
    return f"{cluster}-schema-registry-config"


def tls_secret_name(cluster: str) -> str:
    """The https listener's key and chain (``keystore.pem``) and the CAs to trust (``ca.crt``)."""
    return f"{cluster}-schema-registry-tls"


def registry_url(cluster: str, namespace: str, tls: bool = False) -> str:
    """Where clients in the cluster reach the REST API (any instance; writes are forwarded)."""
    return f"{'https' if tls else 'http'}://{service_name(cluster)}.{namespace}.svc:{REST_PORT}"


def registry_dns_names(cluster: str, namespace: str) -> tuple[str, ...]:
    """The names the operator's certificate carries: the Service's, short and qualified."""
    service = service_name(cluster)
    return (f"{service}.{namespace}.svc.cluster.local", f"{service}.{namespace}.svc", f"{service}.{namespace}",
            service)


def selector_labels(cluster: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "riverlog", "app.kubernetes.io/instance": cluster,
            "app.kubernetes.io/component": COMPONENT}


def labels(cluster: str) -> dict[str, str]:
    return {**selector_labels(cluster), "app.kubernetes.io/managed-by": "riverlog-operator",
            "riverlog.dev/cluster": cluster}


def _metadata(ref: ClusterRef, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": ref.namespace, "labels": labels(ref.name),
            "ownerReferences": [owner_reference(ref)]}


# --- the Kafka side ---------------------------------------------------------------------------


def registry_endpoint(ref: ClusterRef, spec: ClusterSpec, user: UserSpec | None = None) -> Endpoint:
    """How the registry's pods reach the Cluster: its bootstrap Service on the first listener
    without authentication, or, with ``spec.schemaRegistry.authentication``, on the first of that
    type as the User named (``user``: that User's spec, None when there is no such User).
    RegistryBlocked when it cannot connect."""
    registry = spec.schema_registry
    assert registry is not None
    auth = registry.authentication
    if auth is None:
        add = ("add spec.schemaRegistry.authentication: a type (scram-sha-512 or tls) and a userRef to a User of "
               f"Cluster {ref.name}")
        if spec.authorization is not None:
            raise RegistryBlocked("KafkaAuthenticationNeeded", f"Cluster {ref.name} has authorization on, so "
                                  f"without authentication the registry would be User:ANONYMOUS; {add}, with the "
                                  "ACLs of docs/schema-registry.md; the schema registry is not deployed")
        if not any(lst.authentication is None for lst in spec.listeners):
            raise RegistryBlocked("KafkaAuthenticationNeeded", f"every listener of Cluster {ref.name} authenticates "
                                  f"its clients; {add}; the schema registry is not deployed")
    elif user is None:
        raise RegistryBlocked("UserNotFound", f"no User {auth.user!r} in namespace {ref.namespace} "
                              "(spec.schemaRegistry.authentication.userRef); the schema registry is not deployed")
    elif user.authentication != auth.type:
        raise RegistryBlocked("InvalidKafkaAuthentication", f"User {auth.user!r} authenticates with "
                              f"{user.authentication}, spec.schemaRegistry.authentication.type is {auth.type}")
    wanted = KafkaEndpointSpec(cluster=ref.name, authentication=None if auth is None else AuthenticationSpec(
        type=auth.type, user=auth.user))
    try:
        return resolve_endpoint(wanted, ref.namespace, spec, user_cluster=None if user is None else user.cluster)
    except EndpointError as exc:
        raise RegistryBlocked("InvalidKafkaAuthentication", f"{exc}; the schema registry is not deployed") from None


def inputs_for(ref: ClusterRef, spec: ClusterSpec, default_image: str, user: UserSpec | None = None,
               credentials_version: str | None = None) -> RegistryInputs | None:
    """The registry's inputs, None when the Cluster has none (RegistryBlocked as above, and for
    a certificate to issue without the Cluster CA)."""
    registry = spec.schema_registry
    if registry is None:
        return None
    endpoint = registry_endpoint(ref, spec, user)
    if registry.tls and registry.tls_secret is None and not spec.secured:
        raise RegistryBlocked("CertificateAuthorityMissing", f"spec.schemaRegistry.tls without certificateSecret "
                              f"asks for a certificate from the Cluster CA, and Cluster {ref.name} has no CAs (it "
                              "is not secured: no TLS or authenticating listener, no authorization); give "
                              "tls.certificateSecret, or secure the Cluster; the schema registry is not deployed")
    return RegistryInputs(ref, registry, spec.image or default_image, spec.image_pull_policy, endpoint,
                          credentials_version)


def mounted_secret_keys(inputs: RegistryInputs) -> list[SecretKeyRef]:
    """Every Secret key the pods mount or read: what the credentials version hashes."""
    ep, registry = inputs.endpoint, inputs.spec
    refs = [ref for ref in (ep.password, ep.keystore, ep.trusted_ca) if ref is not None]
    if registry.tls:
        tls = tls_secret_name(inputs.ref.name)
        refs += [SecretKeyRef(tls, KEYSTORE_FILE), SecretKeyRef(tls, CA_FILE)]
    if registry.basic_auth is not None:
        refs.append(SecretKeyRef(registry.basic_auth.users_secret, registry.basic_auth.users_key))
    return refs


def kafkastore_properties(endpoint: Endpoint) -> dict[str, str]:
    """The registry's Kafka client security (Kafka's client properties behind ``kafkastore.``),
    naming the mounted files (a SCRAM password through the ``dir`` config provider)."""
    props = {"kafkastore.security.protocol": endpoint.security_protocol}
    if endpoint.tls and endpoint.trusted_ca is not None:
        props.update({"kafkastore.ssl.truststore.type": "PEM",
                      "kafkastore.ssl.truststore.location": f"{KAFKA_DIR}/ca/{CA_FILE}"})
    if endpoint.authentication == AUTH_SCRAM:
        user_dir = f"{KAFKA_DIR}/user"
        props.update({
            "kafkastore.sasl.mechanism": SCRAM_MECHANISM, "config.providers": "dir",
            "config.providers.dir.class": DIRECTORY_PROVIDER, "config.providers.dir.param.allowed.paths": user_dir,
            "kafkastore.sasl.jaas.config": f'{SCRAM_LOGIN_MODULE} required username="{endpoint.username}" '
                                           f'password="${{dir:{user_dir}:{PASSWORD_FILE}}}";'})
    elif endpoint.authentication == AUTH_TLS:
        props.update({"kafkastore.ssl.keystore.type": "PEM",
                      "kafkastore.ssl.keystore.location": f"{KAFKA_DIR}/user/{KEYSTORE_FILE}"})
    return props


def rest_security_properties(inputs: RegistryInputs) -> dict[str, str]:
    """https (``tls``) and basic authentication (``basicAuth``) of the REST API. Instances
    forward writes to each other's pod IPs, which no certificate names: they check the chain
    against ``ca.crt`` but not the host name."""
    props: dict[str, str] = {}
    if inputs.spec.tls:
        props.update({"inter.instance.protocol": "https", "ssl.keystore.type": "PEM",
                      "ssl.keystore.location": f"{TLS_DIR}/{KEYSTORE_FILE}", "ssl.truststore.type": "PEM",
                      "ssl.truststore.location": f"{TLS_DIR}/{CA_FILE}",
                      "ssl.endpoint.identification.algorithm": ""})
    basic = inputs.spec.basic_auth
    if basic is not None:
        props.update({"authentication.method": "BASIC", "authentication.realm": basic.realm,
                      "authentication.users.file": f"{AUTH_DIR}/{USERS_FILE}"})
        if basic.roles:
            props["authentication.roles"] = ",".join(basic.roles)
    return props


def plan_tls_secret_data(cluster_ca: Mapping[str, bytes], user_given: Mapping[str, bytes] | None,
                         current: Mapping[str, bytes], names: tuple[str, ...], now: datetime.datetime,
                         policy: CertPolicy) -> dict[str, bytes] | None:
    """What Secret ``<cluster>-schema-registry-tls`` holds: from a user-given Secret
    (``user_given``: tls.key then tls.crt as the keystore, ca.crt, or else the chain, as what
    instances trust), or a serving certificate issued from the Cluster CA and kept, renewed and
    re-issued as the brokers' are (``cluster_ca``: the CA Secret's ``ca.key`` and ``ca.crt``).
    None while what it comes from is not there yet."""
    if user_given is not None:
        if not user_given.get(TLS_CERT_KEY) or not user_given.get(TLS_KEY_KEY):
            return None
        key, chain = user_given[TLS_KEY_KEY], user_given[TLS_CERT_KEY]
        sep = b"" if key.endswith(b"\n") else b"\n"
        return {KEYSTORE_FILE: key + sep + chain, CA_FILE: user_given.get(TLS_CA_KEY) or chain}
    if not cluster_ca.get(CA_KEY) or not cluster_ca.get(CA_CERT):
        return None
    ca = Issued(cluster_ca[CA_KEY], cluster_ca[CA_CERT])
    keystore = plan_server_keystore(ca, current.get(KEYSTORE_FILE), SCHEMA_REGISTRY_UNIT, SCHEMA_REGISTRY_UNIT, names,
                                    now, policy)
    return {KEYSTORE_FILE: keystore, CA_FILE: ca.cert_pem}


def build_tls_secret(ref: ClusterRef, data: Mapping[str, bytes]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _metadata(ref, tls_secret_name(ref.name)),
            "data": {k: base64.b64encode(v).decode() for k, v in sorted(data.items())}}


# --- schema-registry.properties ---------------------------------------------------------------


def registry_properties(inputs: RegistryInputs) -> dict[str, str]:
    """Defaults, then spec.config, then what the operator owns (``host.name`` comes from the
    command line: each pod's own IP)."""
    defaults = {"kafkastore.topic": "_schemas"}
    scheme = "https" if inputs.spec.tls else "http"
    owned = {"listeners": f"{scheme}://0.0.0.0:{REST_PORT}", "kafkastore.bootstrap.servers": inputs.bootstrap,
             "schema.compatibility.level": inputs.spec.compatibility_level.lower(),
             **kafkastore_properties(inputs.endpoint), **rest_security_properties(inputs)}
    return {**defaults, **inputs.spec.config, **owned}


def config_text(inputs: RegistryInputs) -> str:
    ref = inputs.ref
    props = registry_properties(inputs)
    # One line each (the CRD refuses line breaks in values); the registry reads key=value lines.
    lines = [f"# Generated by the Riverlog operator from Cluster {ref.namespace}/{ref.name} "
             "(spec.schemaRegistry); edit the Cluster instead."]
    lines += [f"{key}={props[key]}" for key in sorted(props)]
    return "\n".join(lines) + "\n"


def config_hash(inputs: RegistryInputs) -> str:
    """In the pod template: a config change rolls the instances."""
    return hashlib.sha256(config_text(inputs).encode()).hexdigest()[:16]


# --- manifests --------------------------------------------------------------------------------


def build_config_map(inputs: RegistryInputs) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _metadata(inputs.ref, config_map_name(inputs.ref.name)),
            "data": {CONFIG_FILE: config_text(inputs)}}


def _port_name(inputs: RegistryInputs) -> str:
    """The REST port's name, its scheme: ``http``, or ``https`` with ``tls``."""
    return "https" if inputs.spec.tls else "http"


def metrics_port_name(inputs: RegistryInputs) -> str:
    """``metrics`` (plain http), or ``metrics-https``: the chart's ServiceMonitor scrapes the latter
    over https (``charts/riverlog/templates/servicemonitor.yaml``)."""
    return f"{METRICS_PORT_NAME}-https" if inputs.spec.tls else METRICS_PORT_NAME


def build_service(inputs: RegistryInputs) -> dict[str, Any]:
    port = _port_name(inputs)
    ports = [{"name": port, "port": REST_PORT, "targetPort": port, "protocol": "TCP"}]
    if inputs.spec.metrics_enabled:
        # The same /metrics, under the port name the chart's ServiceMonitor scrapes.
        ports.append({"name": metrics_port_name(inputs), "port": METRICS_SERVICE_PORT, "targetPort": port,
                      "protocol": "TCP"})
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(inputs.ref, service_name(inputs.ref.name)),
            "spec": {"type": "ClusterIP", "selector": selector_labels(inputs.ref.name), "ports": ports}}


def _volumes_and_mounts(inputs: RegistryInputs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ConfigMap and /tmp, then the key material (each Secret key as one file, readable by
    the pod's group only)."""
    cluster, ep, registry = inputs.ref.name, inputs.endpoint, inputs.spec
    volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": config_map_name(cluster)}},
                                     {"name": "tmp", "emptyDir": {}}]
    mounts: list[dict[str, Any]] = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                                    {"name": "tmp", "mountPath": "/tmp"}]

    def mount(name: str, volume: dict[str, Any], path: str) -> None:
        volumes.append(volume)
        mounts.append({"name": name, "mountPath": path, "readOnly": True})

    if ep.tls and ep.trusted_ca is not None:
        mount("kafka-ca", secret_key_volume("kafka-ca", ep.trusted_ca, CA_FILE), f"{KAFKA_DIR}/ca")
    if ep.keystore is not None:
        mount("kafka-user", secret_key_volume("kafka-user", ep.keystore, KEYSTORE_FILE), f"{KAFKA_DIR}/user")
    elif ep.password is not None:
        mount("kafka-user", secret_key_volume("kafka-user", ep.password, PASSWORD_FILE), f"{KAFKA_DIR}/user")
    if registry.tls:
        tls = tls_secret_name(cluster)
        mount("tls", {"name": "tls", "secret": {"secretName": tls, "defaultMode": 0o440, "items": [
            {"key": KEYSTORE_FILE, "path": KEYSTORE_FILE}, {"key": CA_FILE, "path": CA_FILE}]}}, TLS_DIR)
    if registry.basic_auth is not None:
        users = SecretKeyRef(registry.basic_auth.users_secret, registry.basic_auth.users_key)
        mount("users", secret_key_volume("users", users, USERS_FILE), AUTH_DIR)
    return volumes, mounts


def _probe(inputs: RegistryInputs, **timing: int) -> dict[str, Any]:
    """An https probe with ``tls`` (the kubelet does not verify the certificate); with basic auth
    on, ``/metrics``, which the registry serves without credentials (the probes have none)."""
    get: dict[str, Any] = {"path": "/metrics" if inputs.spec.basic_auth is not None else "/",
                           "port": _port_name(inputs)}
    if inputs.spec.tls:
        get["scheme"] = "HTTPS"
    return {"httpGet": get, **timing}


def _container(inputs: RegistryInputs, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    env: list[dict[str, Any]] = [{"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    container: dict[str, Any] = {
        "name": "schema-registry",
        "image": inputs.image,
        "command": ["riverlog", "schema-registry", "--config", f"{CONFIG_DIR}/{CONFIG_FILE}",
                    "--set", f"host.name=$({POD_IP_ENV})"],
        "env": env,
        "ports": [{"name": _port_name(inputs), "containerPort": REST_PORT, "protocol": "TCP"}],
        "volumeMounts": mounts,
        # The REST listener opens once _schemas has been read to its end: ready means it answers
        # with everything registered so far.
        "readinessProbe": _probe(inputs, periodSeconds=5, timeoutSeconds=3, failureThreshold=3),
        "livenessProbe": _probe(inputs, periodSeconds=10, timeoutSeconds=5, failureThreshold=6),
        # Start-up waits for the Cluster (up to a minute, then the container restarts).
        "startupProbe": _probe(inputs, periodSeconds=2, failureThreshold=60),
    }
    return hardened_container(container, inputs.image_pull_policy, inputs.spec.resources)


def build_deployment(inputs: RegistryInputs) -> dict[str, Any]:
    cluster = inputs.ref.name
    volumes, mounts = _volumes_and_mounts(inputs)
    annotations = {CONFIG_HASH_ANNOTATION: config_hash(inputs)}
    if inputs.credentials_version:
        annotations[CREDENTIALS_ANNOTATION] = inputs.credentials_version
    if inputs.spec.metrics_enabled:
        annotations.update({"prometheus.io/scrape": "true", "prometheus.io/port": str(REST_PORT),
                            "prometheus.io/path": "/metrics", "prometheus.io/scheme": _port_name(inputs)})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(inputs.ref, deployment_name(cluster)),
        "spec": {
            "replicas": inputs.spec.replicas,
            "selector": {"matchLabels": selector_labels(cluster)},
            # A new instance ready before an old one goes: the REST API never goes away.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": labels(cluster), "annotations": annotations},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": restricted_pod_security(),
                    "affinity": spread_over_nodes(selector_labels(cluster)),
                    "containers": [_container(inputs, mounts)],
                    "volumes": volumes,
                },
            },
        },
    }


def build_schema_registry(inputs: RegistryInputs) -> list[dict[str, Any]]:
    """Every manifest of the registry, in the order they are applied."""
    return [build_config_map(inputs), build_service(inputs), build_deployment(inputs)]


def owned_objects(cluster: str) -> list[tuple[str, str]]:
    """(kind, name) of what ``build_schema_registry`` makes: what goes when the spec does. Not the
    https keystore Secret: the operator may not delete Secrets (the chart's RBAC), so it stays,
    owned by the Cluster, until the Cluster goes."""
    return [("Deployment", deployment_name(cluster)), ("Service", service_name(cluster)),
            ("ConfigMap", config_map_name(cluster))]
