"""A Kafka Connect cluster's manifests (issue #19): Apache Kafka's own Connect runtime in
distributed mode, in a Deployment of the Connect image (the Dockerfile's ``connect`` stage).

Pure, like the Cluster builders: a ``ConnectInputs`` in (the resource's identity and spec, the
Kafka endpoint resolved from a Cluster or ``bootstrapServers`` by ``resolve_endpoint``), the
ConfigMap with ``connect-distributed.properties`` (and the JMX exporter's rules,
``builders/connect_metrics.py``, unless ``spec.metrics.enabled`` is false), the REST API's
Service (and the metrics port), the NetworkPolicy guarding that API, the Deployment and its
PodDisruptionBudget out. A Mirror's own workers are built here too (``builders/mirror.py``).

Credentials never go into the ConfigMap. Each Kafka endpoint's Secrets are mounted under
``/etc/riverlog-connect-credentials/<endpoint>/`` (``user/password``, ``user/keystore.pem``,
``ca/ca.crt``), and the properties name them: PEM key and trust stores by path, the SCRAM
password as ``${directory:<dir>:password}``, which Kafka's DirectoryConfigProvider reads when the
worker starts (and when a connector's config mentions it, e.g. a Mirror's source password).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from .. import API_VERSION
from ..connect_model import (
    DEFAULT_CA_KEY,
    DEFAULT_CERTIFICATE_KEY,
    DEFAULT_PASSWORD_KEY,
    ConnectSpec,
    KafkaEndpointSpec,
    SecretKeyRef,
)
from ..model import AUTH_SCRAM, AUTH_TLS, MAX_VOTERS, METRICS_PORT, ClusterSpec, ListenerSpec
from .common import (
    bootstrap_service_name,
    cluster_ca_cert_secret_name,
    hardened_container,
    restricted_pod_security,
    spread_over_nodes,
)
from .connect_metrics import METRICS_CONFIG_ENV, METRICS_CONFIG_FILE, METRICS_PORT_ENV, exporter_config_text
from .statefulset import CONFIG_HASH_ANNOTATION

# Paths inside the Connect image (Dockerfile, stage ``connect``).
CONNECT_HOME = "/opt/riverlog-connect"
PLUGINS_DIR = f"{CONNECT_HOME}/plugins"
LAUNCHER = "riverlog-connect"  # scripts/riverlog-connect: java ... ConnectDistributed "$@"
# The ConfigMap's volume; key material beside it, not inside (a mount point cannot be made in a
# read-only volume).
CONFIG_DIR = "/etc/riverlog-connect"
CONFIG_FILE = "connect-distributed.properties"
CREDENTIALS_DIR = "/etc/riverlog-connect-credentials"
PASSWORD_FILE = "password"
KEYSTORE_FILE = "keystore.pem"
CA_FILE = "ca.crt"
REST_PORT = 8083
# The JMX exporter's /metrics in worker pods: model.METRICS_PORT, the brokers' metrics port, so one
# convention (port name "metrics", 9404) scrapes both.
# Each worker advertises its own pod IP to the others (they forward REST calls to the leader).
POD_IP_ENV = "RIVERLOG_CONNECT_POD_IP"
CREDENTIALS_ANNOTATION = "riverlog.dev/credentials-version"
# The endpoint name of a Connect's Kafka (a Mirror's workers have "target" and "source").
DEFAULT_ENDPOINT = "kafka"
# The label the API server puts on every namespace (its name): how a NetworkPolicy names one.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SCRAM_MECHANISM = "SCRAM-SHA-512"
# The worker's own clients take the unprefixed settings; its tasks' producers, consumers and
# admin clients take these prefixes (Connect does not pass the unprefixed ones on).
TASK_CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")


class EndpointError(ValueError):
    """The spec cannot be met by the Cluster as it is (no matching listener, ...): a spec error
    for the resource's status, not something retrying fixes."""


@dataclass(frozen=True)
class WorkerRef:
    """Identity of the resource that owns a Connect deployment: a ``Connect`` or a ``Mirror``."""

    kind: str  # "Connect" or "Mirror"
    name: str
    namespace: str
    uid: str

    @property
    def base(self) -> str:
        """The prefix of every name: ``<name>-connect`` or ``<name>-mirror``."""
        return f"{self.name}-{self.kind.lower()}"


@dataclass(frozen=True)
class OperatorPeer:
    """The operator's own pods as a NetworkPolicy names them: their namespace and labels (the
    chart tells the operator both, ``handlers/common.py``)."""

    namespace: str
    pod_labels: tuple[tuple[str, str], ...]  # never empty: an empty selector would be every pod

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.pod_labels)


@dataclass(frozen=True)
class Endpoint:
    """A Kafka as a worker's clients reach it: bootstrap servers and the key material they use,
    as Secret keys (mounted into the pods)."""

    bootstrap_servers: str
    tls: bool = False
    trusted_ca: SecretKeyRef | None = None  # None with tls: the JVM's default trust store
    authentication: str | None = None  # AUTH_SCRAM, AUTH_TLS or None
    username: str | None = None  # SCRAM
    password: SecretKeyRef | None = None  # SCRAM
    keystore: SecretKeyRef | None = None  # TLS client authentication: key and chain, PEM
    # Replication factor of the topics the workers create (storage topics, MirrorMaker 2's
    # internal topics): min(3, brokers) on a Riverlog Cluster, -1 (the broker's
    # default.replication.factor) elsewhere.
    replication_factor: int = -1

    @property
    def security_protocol(self) -> str:
        if self.authentication == AUTH_SCRAM:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"


def _listener_auth(lst: ListenerSpec) -> str | None:
    return lst.authentication.type if lst.authentication is not None else None


def _pick_listener(spec: KafkaEndpointSpec, cluster: ClusterSpec) -> ListenerSpec:
    wanted = spec.authentication.type if spec.authentication is not None else None
    wanted_text = f"authentication {wanted}" if wanted else "no authentication"
    if spec.listener:
        found = [lst for lst in cluster.listeners if lst.name == spec.listener]
        if not found:
            raise EndpointError(f"Cluster {spec.cluster!r} has no listener {spec.listener!r}")
        if _listener_auth(found[0]) != wanted:
            raise EndpointError(f"listener {spec.listener} of Cluster {spec.cluster!r} takes "
                                f"{_listener_auth(found[0]) or 'no authentication'}, the spec gives {wanted_text}")
        return found[0]
    for lst in cluster.listeners:
        if _listener_auth(lst) == wanted:
            return lst
    raise EndpointError(f"Cluster {spec.cluster!r} has no listener with {wanted_text}")


def resolve_endpoint(spec: KafkaEndpointSpec, namespace: str, cluster: ClusterSpec | None = None, *,
                     user_cluster: str | None = None, bootstrap_override: str | None = None) -> Endpoint:
    """Where and how a worker reaches its Kafka.

    ``cluster`` is the referenced Cluster's spec (``None`` when it does not exist: an error for
    a ``clusterRef``); ``user_cluster`` the Cluster of the referenced User, when the caller read
    it; ``bootstrap_override`` replaces the bootstrap Service address (an operator or test
    outside the cluster). A Cluster is reached through its bootstrap Service on the first
    listener whose authentication is the spec's (or the listener it names), with TLS when that
    listener has it, trusting the Cluster's CA unless ``tls.trustedCASecret`` says otherwise. A
    User's credentials are its Secret of the same name: ``password`` (SCRAM, user name = the
    User's name) or ``user.pem`` (TLS).
    """
    auth = spec.authentication
    if auth is not None and auth.type == AUTH_SCRAM and auth.user is None and not (auth.username and
                                                                                     auth.password_secret):
        raise EndpointError("authentication scram-sha-512 needs userRef, or username and passwordSecret")
    if auth is not None and auth.type == AUTH_TLS and auth.user is None and auth.certificate_secret is None:
        raise EndpointError("authentication tls needs userRef or certificateSecret")
    username = password = keystore = None
    if auth is not None and auth.type == AUTH_SCRAM:
        username = auth.user or auth.username
        password = SecretKeyRef(auth.user, DEFAULT_PASSWORD_KEY) if auth.user else auth.password_secret
    elif auth is not None and auth.type == AUTH_TLS:
        keystore = SecretKeyRef(auth.user, DEFAULT_CERTIFICATE_KEY) if auth.user else auth.certificate_secret
    auth_type = auth.type if auth is not None else None

    if spec.bootstrap_servers:
        if spec.cluster:
            raise EndpointError("give clusterRef or bootstrapServers, not both")
        if auth is not None and auth.user:
            raise EndpointError("authentication.userRef needs clusterRef (a User's credentials are for its own "
                                "Cluster); for another Kafka give passwordSecret or certificateSecret")
        if auth_type == AUTH_TLS and not spec.tls:
            raise EndpointError("authentication tls needs tls (client certificates are presented over TLS)")
        return Endpoint(bootstrap_override or spec.bootstrap_servers, spec.tls, spec.trusted_ca if spec.tls else None,
                        auth_type, username, password, keystore, -1)

    if not spec.cluster:
        raise EndpointError("give clusterRef (a Riverlog Cluster of this namespace) or bootstrapServers")
    if cluster is None:
        raise EndpointError(f"no Cluster {spec.cluster!r} in namespace {namespace}")
    if auth is not None and auth.user and user_cluster is not None and user_cluster != spec.cluster:
        raise EndpointError(f"User {auth.user!r} belongs to Cluster {user_cluster!r}, not {spec.cluster!r}")
    listener = _pick_listener(spec, cluster)
    if spec.tls and not listener.tls:
        raise EndpointError(f"listener {listener.name} of Cluster {spec.cluster!r} does not use TLS: remove tls, "
                            "or pick a TLS listener")
    trusted = None
    if listener.tls:
        trusted = spec.trusted_ca or SecretKeyRef(cluster_ca_cert_secret_name(spec.cluster), DEFAULT_CA_KEY)
    bootstrap = bootstrap_override or f"{bootstrap_service_name(spec.cluster)}.{namespace}.svc:{listener.port}"
    return Endpoint(bootstrap, listener.tls, trusted, auth_type, username, password, keystore,
                    min(MAX_VOTERS, cluster.replicas))


def endpoint_dir(endpoint_name: str) -> str:
    """Where one endpoint's key material is mounted in a worker pod."""
    return f"{CREDENTIALS_DIR}/{endpoint_name}"


def client_properties(endpoint: Endpoint, endpoint_name: str) -> dict[str, str]:
    """A Kafka client's security settings for ``endpoint``, naming the files its Secrets are
    mounted as (``endpoint_name``'s directory); the SCRAM password through the directory config
    provider, so it is read at run time and written nowhere."""
    props = {"security.protocol": endpoint.security_protocol}
    base = endpoint_dir(endpoint_name)
    if endpoint.tls and endpoint.trusted_ca is not None:
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": f"{base}/ca/{CA_FILE}"})
    if endpoint.authentication == AUTH_SCRAM:
        secret = "${directory:" + f"{base}/user:{PASSWORD_FILE}" + "}"
        props.update({"sasl.mechanism": SCRAM_MECHANISM,
                      "sasl.jaas.config": f'{SCRAM_LOGIN_MODULE} required username="{endpoint.username}" '
                                          f'password="{secret}";'})
    elif endpoint.authentication == AUTH_TLS:
        props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": f"{base}/user/{KEYSTORE_FILE}"})
    return props


@dataclass(frozen=True)
class ConnectInputs:
    """Everything a Connect deployment's manifests depend on."""

    ref: WorkerRef
    spec: ConnectSpec
    default_image: str  # the operator's (chart value connect.image)
    endpoint: Endpoint  # the workers' Kafka: their group, storage topics, tasks' clients
    endpoint_name: str = DEFAULT_ENDPOINT
    # More key material mounted for connectors to name (a Mirror's source cluster).
    extra_endpoints: tuple[tuple[str, Endpoint], ...] = ()
    # Changes when a mounted credential changes (the handler hashes the Secrets it read): Java
    # clients read key material once, so a new password or certificate rolls the workers.
    credentials_version: str | None = None

    @property
    def image(self) -> str:
        return self.spec.image or self.default_image

    @property
    def endpoints(self) -> tuple[tuple[str, Endpoint], ...]:
        return ((self.endpoint_name, self.endpoint), *self.extra_endpoints)


# --- names and labels -------------------------------------------------------------------------


def deployment_name(ref: WorkerRef) -> str:
    return ref.base


def config_map_name(ref: WorkerRef) -> str:
    return f"{ref.base}-config"


def api_service_name(ref: WorkerRef) -> str:
    return f"{ref.base}-api"


def pdb_name(ref: WorkerRef) -> str:
    return ref.base


def network_policy_name(ref: WorkerRef) -> str:
    # Named after the API it guards (the Service's name).
    return f"{ref.base}-api"


def rest_url(ref: WorkerRef) -> str:
    """The REST API inside the cluster (``status.restApi``; what the handlers call)."""
    return f"http://{api_service_name(ref)}.{ref.namespace}.svc:{REST_PORT}"


def selector_labels(ref: WorkerRef) -> dict[str, str]:
    return {"app.kubernetes.io/name": "riverlog-connect", "app.kubernetes.io/instance": ref.name,
            "app.kubernetes.io/component": ref.kind.lower()}


def selector_string(ref: WorkerRef) -> str:
    """The label selector as the scale subresource reports it."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(ref).items()))


def labels(ref: WorkerRef) -> dict[str, str]:
    return {**selector_labels(ref), "app.kubernetes.io/managed-by": "riverlog-operator",
            f"riverlog.dev/{ref.kind.lower()}": ref.name}


def owner_reference(ref: WorkerRef) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": ref.kind, "name": ref.name, "uid": ref.uid,
            "controller": True, "blockOwnerDeletion": True}


def metadata(ref: WorkerRef, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": ref.namespace, "labels": labels(ref),
            "ownerReferences": [owner_reference(ref)]}


# --- connect-distributed.properties ----------------------------------------------------------


def worker_properties(inputs: ConnectInputs) -> dict[str, str]:
    """The worker configuration: defaults, then ``spec.config``, then what the operator owns
    (the CRD refuses those keys in spec.config anyway).

    Defaults: the group ``<name>-connect`` and its storage topics ``<name>-connect-configs``,
    ``-offsets`` and ``-status`` (one prefix for a User's ACLs; no clash with an application's
    consumer group of the resource's name), replicated min(3, brokers) times on a Riverlog
    Cluster or as the broker's default elsewhere; JSON converters, as Kafka's sample config.
    """
    ref, spec, endpoint = inputs.ref, inputs.spec, inputs.endpoint
    factor = str(endpoint.replication_factor)
    defaults = {
        "group.id": ref.base,
        "config.storage.topic": f"{ref.base}-configs",
        "offset.storage.topic": f"{ref.base}-offsets",
        "status.storage.topic": f"{ref.base}-status",
        "config.storage.replication.factor": factor,
        "offset.storage.replication.factor": factor,
        "status.storage.replication.factor": factor,
        "key.converter": JSON_CONVERTER,
        "value.converter": JSON_CONVERTER,
    }
    security = client_properties(endpoint, inputs.endpoint_name)
    owned = {
        "bootstrap.servers": endpoint.bootstrap_servers,
        "listeners": f"http://:{REST_PORT}",
        "rest.advertised.listener": "http",
        "rest.advertised.host.name": "${env:" + POD_IP_ENV + "}",
        "rest.advertised.port": str(REST_PORT),
        "plugin.path": PLUGINS_DIR,
        # The pod IP from the environment (only that variable) and, when credentials are mounted,
        # Secrets by file (only under the credentials directory): what the operator's own
        # properties need, and nothing more for connectors' configs to read.
        "config.providers.env.class": ENV_PROVIDER,
        "config.providers.env.param.allowlist.pattern": f"^{POD_IP_ENV}$",
        **security,
        **{prefix + key: value for prefix in TASK_CLIENT_PREFIXES for key, value in security.items()},
    }
    if _credential_volumes(inputs)[0]:
        # Only then: Kafka's DirectoryConfigProvider refuses to start the worker when an allowed
        # path does not exist, and without credentials nothing is mounted there.
        owned.update({"config.providers": "directory,env", "config.providers.directory.class": DIRECTORY_PROVIDER,
                      "config.providers.directory.param.allowed.paths": CREDENTIALS_DIR})
    else:
        owned["config.providers"] = "env"
    if spec.exactly_once_source:
        owned["exactly.once.source.support"] = "enabled"
    return {**defaults, **spec.config, **owned}


def _escape(text: str, key: bool) -> str:
    """Java's properties syntax (``Properties.load``, ISO 8859-1): backslashes, line breaks and
    non-ASCII characters escaped; in keys also separators and spaces, in values a leading space."""
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[char])
        elif char == " " and (key or index == 0):
            out.append("\\ ")
        elif key and char in "=:#!":
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) > 0x7E:
            units = char.encode("utf-16-be")
            out.extend(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
        else:
            out.append(char)
    return "".join(out)


def java_properties(props: dict[str, str], header: str) -> str:
    lines = [f"# {header}"] + [f"{_escape(key, True)}={_escape(props[key], False)}" for key in sorted(props)]
    return "\n".join(lines) + "\n"


def config_text(inputs: ConnectInputs) -> str:
    ref = inputs.ref
    return java_properties(worker_properties(inputs), f"Generated by the Riverlog operator from {ref.kind} "
                                                      f"{ref.namespace}/{ref.name}; edit the {ref.kind} instead.")


def config_files(inputs: ConnectInputs) -> dict[str, str]:
    """The ConfigMap's files: the worker properties, and the JMX exporter's rules when metrics
    are on."""
    files = {CONFIG_FILE: config_text(inputs)}
    if inputs.spec.metrics_enabled:
        files[METRICS_CONFIG_FILE] = exporter_config_text()
    return files


def config_hash(inputs: ConnectInputs) -> str:
    """In the pod template: a config change (or new exporter rules) makes a new revision, which
    the Deployment rolls."""
    digest = hashlib.sha256()
    for name, text in sorted(config_files(inputs).items()):
        digest.update(f"{name}\0{text}\0".encode())
    return digest.hexdigest()[:16]


# --- manifests --------------------------------------------------------------------------------


def build_config_map(inputs: ConnectInputs) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(inputs.ref, config_map_name(inputs.ref)),
            "data": config_files(inputs)}


def build_api_service(inputs: ConnectInputs) -> dict[str, Any]:
    ports = [{"name": "rest", "port": REST_PORT, "targetPort": "rest", "protocol": "TCP"}]
    if inputs.spec.metrics_enabled:
        # What the chart's ServiceMonitor scrapes: its endpoints are every worker pod, each scraped
        # once (the brokers' headless Service has the same port name).
        ports.append({"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(inputs.ref, api_service_name(inputs.ref)),
        "spec": {"type": "ClusterIP", "selector": selector_labels(inputs.ref), "ports": ports},
    }


def build_network_policy(inputs: ConnectInputs, operator_peer: OperatorPeer) -> dict[str, Any]:
    """Who may reach the workers' pods, as Strimzi does for a KafkaConnect: the REST API has no
    authentication, and whoever can call it can run a connector that reads the credentials
    mounted into the workers and writes them to a topic. So its port is open only to the
    workers themselves (a worker forwards requests it cannot serve to the group's leader) and to
    the operator's pods; the metrics port, which only reads, to anyone. Any other port of the
    pods is closed (the policy isolates them for ingress). NetworkPolicies add up: a user lets
    other clients in with a policy of their own selecting the same pods (docs/design-notes.md)."""
    ref = inputs.ref
    rest_from: list[dict[str, Any]] = [
        # A podSelector alone means pods of the policy's own namespace.
        {"podSelector": {"matchLabels": selector_labels(ref)}},
        # Both selectors in one peer: pods with these labels in that namespace only (as two peers
        # they would allow every pod of the namespace, and such pods in every namespace).
        {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: operator_peer.namespace}},
         "podSelector": {"matchLabels": operator_peer.labels}},
    ]
    ingress: list[dict[str, Any]] = [{"ports": [{"protocol": "TCP", "port": REST_PORT}], "from": rest_from}]
    if inputs.spec.metrics_enabled:
        # No "from": any source (Prometheus runs wherever its users put it).
        ingress.append({"ports": [{"protocol": "TCP", "port": METRICS_PORT}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(ref, network_policy_name(ref)),
        "spec": {"podSelector": {"matchLabels": selector_labels(ref)}, "policyTypes": ["Ingress"],
                 "ingress": ingress},
    }


def secret_key_volume(name: str, ref: SecretKeyRef, path: str) -> dict[str, Any]:
    # Only the key the worker needs, readable by its group only (fsGroup).
    return {"name": name, "secret": {"secretName": ref.name, "items": [{"key": ref.key, "path": path}],
                                     "defaultMode": 0o440}}


def _credential_volumes(inputs: ConnectInputs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for name, endpoint in inputs.endpoints:
        base = endpoint_dir(name)
        if endpoint.password is not None:
            volumes.append(secret_key_volume(f"{name}-user", endpoint.password, PASSWORD_FILE))
        elif endpoint.keystore is not None:
            volumes.append(secret_key_volume(f"{name}-user", endpoint.keystore, KEYSTORE_FILE))
        if endpoint.password is not None or endpoint.keystore is not None:
            mounts.append({"name": f"{name}-user", "mountPath": f"{base}/user", "readOnly": True})
        if endpoint.tls and endpoint.trusted_ca is not None:
            volumes.append(secret_key_volume(f"{name}-ca", endpoint.trusted_ca, CA_FILE))
            mounts.append({"name": f"{name}-ca", "mountPath": f"{base}/ca", "readOnly": True})
    return volumes, mounts


def plugin_dir(name: str) -> str:
    return f"{PLUGINS_DIR}/{name}"


def _volumes_and_mounts(inputs: ConnectInputs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": config_map_name(inputs.ref)}},
        {"name": "tmp", "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    secret_volumes, secret_mounts = _credential_volumes(inputs)
    volumes += secret_volumes
    mounts += secret_mounts
    # Each plugin in a directory of its own under plugin.path: its jars share one class loader,
    # isolated from the other plugins'.
    for plugin in inputs.spec.plugins:
        volumes.append({"name": f"plugin-{plugin.name}", **plugin.volume})
        mounts.append({"name": f"plugin-{plugin.name}", "mountPath": plugin_dir(plugin.name),
                       "readOnly": "emptyDir" not in plugin.volume})
    return volumes, mounts


def _container(inputs: ConnectInputs, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    spec = inputs.spec
    env: list[dict[str, Any]] = [{"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    ports: list[dict[str, Any]] = [{"name": "rest", "containerPort": REST_PORT, "protocol": "TCP"}]
    if spec.metrics_enabled:
        # scripts/riverlog-connect starts the JMX exporter's agent on this port with these rules.
        env += [{"name": METRICS_PORT_ENV, "value": str(METRICS_PORT)},
                {"name": METRICS_CONFIG_ENV, "value": f"{CONFIG_DIR}/{METRICS_CONFIG_FILE}"}]
        ports.append({"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"})
    container: dict[str, Any] = {
        "name": "connect",
        "image": inputs.image,
        "command": [LAUNCHER, f"{CONFIG_DIR}/{CONFIG_FILE}"],
        "env": env,
        "ports": ports,
        "volumeMounts": mounts,
        # /health (Kafka 3.9+, KIP-1017) answers 200 once the worker has joined its group and its
        # herder runs: a rolling update waits for that, not just for the REST server.
        "readinessProbe": {"httpGet": {"path": "/health", "port": "rest"}, "periodSeconds": 10,
                           "timeoutSeconds": 5, "failureThreshold": 3},
        # Liveness only asks whether the REST server answers: a worker waiting for its Kafka is
        # not restarted for it.
        "livenessProbe": {"httpGet": {"path": "/", "port": "rest"}, "periodSeconds": 10, "timeoutSeconds": 5,
                          "failureThreshold": 6},
        # Scanning plugin.path and joining the group can take a while.
        "startupProbe": {"httpGet": {"path": "/", "port": "rest"}, "periodSeconds": 5, "failureThreshold": 60},
    }
    return hardened_container(container, spec.image_pull_policy, spec.resources)


def build_deployment(inputs: ConnectInputs) -> dict[str, Any]:
    ref = inputs.ref
    volumes, mounts = _volumes_and_mounts(inputs)
    annotations = {CONFIG_HASH_ANNOTATION: config_hash(inputs)}
    if inputs.credentials_version:
        annotations[CREDENTIALS_ANNOTATION] = inputs.credentials_version
    if inputs.spec.metrics_enabled:
        # As on broker pods (builders/statefulset.py), for Prometheus set up by annotations.
        annotations.update({"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT),
                            "prometheus.io/path": "/metrics"})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(ref, deployment_name(ref)),
        "spec": {
            "replicas": inputs.spec.replicas,
            "selector": {"matchLabels": selector_labels(ref)},
            # One worker at a time, the new one ready (joined) before an old one goes: each step
            # is one rebalance of the group.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": labels(ref), "annotations": annotations},
                "spec": {
                    # Workers never call the Kubernetes API.
                    "automountServiceAccountToken": False,
                    "securityContext": restricted_pod_security(),
                    # Workers on different nodes where possible: a node failure stops fewer tasks.
                    "affinity": spread_over_nodes(selector_labels(ref)),
                    "containers": [_container(inputs, mounts)],
                    "volumes": volumes,
                },
            },
        },
    }


def build_pdb(inputs: ConnectInputs) -> dict[str, Any]:
    # One worker down at a time through node drains: its tasks move to the others.
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata(inputs.ref,
                                                                                          pdb_name(inputs.ref)),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(inputs.ref)}}}


def build_connect(inputs: ConnectInputs, operator_peer: OperatorPeer | None) -> list[dict[str, Any]]:
    """Every manifest of a Connect (or a Mirror's workers), in the order they are applied (what
    the pods mount first; the NetworkPolicy before the pods, so none ever serves unguarded).
    No ``operator_peer`` (the operator does not know where its pods are, or the policy is turned
    off): no NetworkPolicy."""
    guard = [build_network_policy(inputs, operator_peer)] if operator_peer is not None else []
    return [build_config_map(inputs), build_api_service(inputs), *guard, build_deployment(inputs), build_pdb(inputs)]
