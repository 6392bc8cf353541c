"""The schema registry's builder and model (``builders/schema_registry.py``, ``spec.schemaRegistry``):
pure functions, checked against the CRD and the registry's own settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from riverlog.config import parse_properties
from riverlog.schema_registry.compatibility import MODES
from riverlog.schema_registry.settings import settings_from
from riverlog_operator.builders.schema_registry import (
    OWNED,
    UNWIRED_PREFIXES,
    RegistryBlocked,
    build_schema_registry,
    inputs_for,
    registry_properties,
)
from riverlog_operator.model import COMPATIBILITY_LEVELS, ClusterRef, ClusterSpec, SchemaRegistrySpec

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
REF = ClusterRef("demo", "prod", "uid-1")


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
    for prefix in UNWIRED_PREFIXES:
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


def test_the_registry_uses_a_plain_listener_of_a_secured_cluster_or_says_what_is_missing() -> None:
    listeners = [{"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}},
                 {"name": "PLAIN", "port": 9092}]
    spec = ClusterSpec.from_dict({"listeners": listeners, "schemaRegistry": {}})
    inputs = inputs_for(REF, spec, "riverlog:1")
    assert inputs is not None and registry_properties(inputs)["kafkastore.bootstrap.servers"] == \
        "demo-bootstrap.prod.svc:9092"
    with pytest.raises(RegistryBlocked, match="kafkastore.security.protocol"):
        inputs_for(REF, ClusterSpec.from_dict({"listeners": listeners[:1], "schemaRegistry": {}}), "riverlog:1")
    with pytest.raises(RegistryBlocked, match="authorization on"):
        inputs_for(REF, ClusterSpec.from_dict({"listeners": listeners, "authorization": {},
                                               "schemaRegistry": {}}), "riverlog:1")
    assert inputs_for(REF, ClusterSpec.from_dict({"listeners": listeners[:1]}), "riverlog:1") is None
