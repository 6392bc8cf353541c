"""A Cluster's schema registry (issue #20, ``spec.schemaRegistry``): ``riverlog schema-registry``
from the broker image in a Deployment, its REST API (Confluent's, port 8081) behind a Service.

Pure, like the other builders: the Cluster's identity and spec in, manifests out. Instances
elect one writer through a consumer group and forward writes to it at the name it advertises
(``host.name``), so each pod advertises its own IP (``$(RIVERLOG_POD_IP)`` in the command, which
Kubernetes expands from the downward API). The registry serves Prometheus metrics at
``/metrics`` on its REST port; with metrics on, the Service has a port named ``metrics`` (the
brokers' and Connect workers' convention, which the chart's ServiceMonitors scrape) targeting it,
and the pods the ``prometheus.io/*`` annotations.

The registry's Kafka client speaks PLAINTEXT only (no ``kafkastore.security.protocol`` yet), so it
reaches the Cluster through the first listener without TLS or authentication, and not at all when
there is none or ACLs are on: ``registry_endpoint`` says what is missing, for the status.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..model import ClusterRef, ClusterSpec, SchemaRegistrySpec
from .common import (
    bootstrap_service_name,
    hardened_container,
    owner_reference,
    restricted_pod_security,
    spread_over_nodes,
)
from .statefulset import CONFIG_HASH_ANNOTATION

REST_PORT = 8081  # Confluent's
METRICS_PORT_NAME = "metrics"  # on the Service only: the REST port's /metrics, as the ServiceMonitor finds it
METRICS_SERVICE_PORT = 9404  # model.METRICS_PORT, the brokers' number
CONFIG_DIR = "/etc/riverlog-schema-registry"
CONFIG_FILE = "schema-registry.properties"
POD_IP_ENV = "RIVERLOG_POD_IP"
COMPONENT = "schema-registry"
# Properties the operator writes; the CRD refuses them in spec.schemaRegistry.config.
OWNED = ("listeners", "port", "host.name", "kafkastore.bootstrap.servers", "schema.compatibility.level",
         "avro.compatibility.level")
# Settings the operator cannot wire yet (the registry's TLS, authentication, and its Kafka
# client's security): refused by the CRD rather than half-configured.
UNWIRED_PREFIXES = ("ssl.", "authentication.", "kafkastore.security.", "kafkastore.sasl.", "kafkastore.ssl.")


class RegistryBlocked(ValueError):
    """The registry cannot reach the Cluster as it is configured (a message for the status)."""


@dataclass(frozen=True)
class RegistryInputs:
    """Everything the registry's manifests depend on."""

    ref: ClusterRef
    spec: SchemaRegistrySpec
    image: str  # the Cluster's broker image: the registry is the same `riverlog` program
    image_pull_policy: str | None
    bootstrap: str  # how the registry's pods reach the Cluster


# --- names and labels -------------------------------------------------------------------------


def deployment_name(cluster: str) -> str:
    return f"{cluster}-schema-registry"


def service_name(cluster: str) -> str:
    return f"{cluster}-schema-registry"


def config_map_name(cluster: str) -> str:
    return f"{cluster}-schema-registry-config"


def registry_url(cluster: str, namespace: str) -> str:
    """Where clients in the cluster reach the REST API (any instance; writes are forwarded)."""
    return f"http://{service_name(cluster)}.{namespace}.svc:{REST_PORT}"


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


def registry_endpoint(ref: ClusterRef, spec: ClusterSpec) -> str:
    """The bootstrap servers the registry's pods use: the Cluster's bootstrap Service on its first
    listener without TLS or authentication. RegistryBlocked when the registry cannot connect."""
    missing = ("the registry's Kafka client has no TLS or SASL settings yet (kafkastore.security.protocol, "
               "kafkastore.ssl.*, kafkastore.sasl.*)")
    if spec.authorization is not None:
        raise RegistryBlocked(f"Cluster {ref.name} has authorization on and {missing}, so it would connect as "
                              "User:ANONYMOUS; the schema registry is not deployed")
    for listener in spec.listeners:
        if not listener.tls and listener.authentication is None:
            return f"{bootstrap_service_name(ref.name)}.{ref.namespace}.svc:{listener.port}"
    raise RegistryBlocked(f"every listener of Cluster {ref.name} needs TLS or authentication and {missing}; add a "
                          "listener without them for the registry, or leave spec.schemaRegistry out until the "
                          "registry supports them; the schema registry is not deployed")


def inputs_for(ref: ClusterRef, spec: ClusterSpec, default_image: str) -> RegistryInputs | None:
    """The registry's inputs, None when the Cluster has none (RegistryBlocked as above)."""
    if spec.schema_registry is None:
        return None
    return RegistryInputs(ref, spec.schema_registry, spec.image or default_image, spec.image_pull_policy,
                          registry_endpoint(ref, spec))


# --- schema-registry.properties ---------------------------------------------------------------


def registry_properties(inputs: RegistryInputs) -> dict[str, str]:
    """Defaults, then spec.config, then what the operator owns (``host.name`` comes from the
    command line: each pod's own IP)."""
    defaults = {"kafkastore.topic": "_schemas"}
    owned = {"listeners": f"http://0.0.0.0:{REST_PORT}", "kafkastore.bootstrap.servers": inputs.bootstrap,
             "schema.compatibility.level": inputs.spec.compatibility_level.lower()}
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


def build_service(inputs: RegistryInputs) -> dict[str, Any]:
    ports = [{"name": "http", "port": REST_PORT, "targetPort": "http", "protocol": "TCP"}]
    if inputs.spec.metrics_enabled:
        # The same /metrics, under the port name the chart's ServiceMonitor scrapes.
        ports.append({"name": METRICS_PORT_NAME, "port": METRICS_SERVICE_PORT, "targetPort": "http",
                      "protocol": "TCP"})
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(inputs.ref, service_name(inputs.ref.name)),
            "spec": {"type": "ClusterIP", "selector": selector_labels(inputs.ref.name), "ports": ports}}


def _container(inputs: RegistryInputs) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "schema-registry",
        "image": inputs.image,
        "command": ["riverlog", "schema-registry", "--config", f"{CONFIG_DIR}/{CONFIG_FILE}",
                    "--set", f"host.name=$({POD_IP_ENV})"],
        "env": [{"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": REST_PORT, "protocol": "TCP"}],
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}],
        # The REST listener opens once _schemas has been read to its end: ready means it answers
        # with everything registered so far.
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5, "timeoutSeconds": 3,
                           "failureThreshold": 3},
        "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10, "timeoutSeconds": 5,
                          "failureThreshold": 6},
        # Start-up waits for the Cluster (up to a minute, then the container restarts).
        "startupProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 2, "failureThreshold": 60},
    }
    return hardened_container(container, inputs.image_pull_policy, inputs.spec.resources)


def build_deployment(inputs: RegistryInputs) -> dict[str, Any]:
    cluster = inputs.ref.name
    annotations = {CONFIG_HASH_ANNOTATION: config_hash(inputs)}
    if inputs.spec.metrics_enabled:
        annotations.update({"prometheus.io/scrape": "true", "prometheus.io/port": str(REST_PORT),
                            "prometheus.io/path": "/metrics"})
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
                    "containers": [_container(inputs)],
                    "volumes": [{"name": "config", "configMap": {"name": config_map_name(cluster)}},
                                {"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


def build_schema_registry(inputs: RegistryInputs) -> list[dict[str, Any]]:
    """Every manifest of the registry, in the order they are applied."""
    return [build_config_map(inputs), build_service(inputs), build_deployment(inputs)]


def owned_objects(cluster: str) -> list[tuple[str, str]]:
    """(kind, name) of what ``build_schema_registry`` makes: what goes when the spec does."""
    return [("Deployment", deployment_name(cluster)), ("Service", service_name(cluster)),
            ("ConfigMap", config_map_name(cluster))]
