"""The Connect, Connector and Mirror CRDs (issue #19) without an API server: their shape (names,
subresources, printer columns that point at fields), their defaults against the operator's
model, and their CEL rules read and tried by ``support.crd_check``'s interpreter on resources
that must pass and resources that must be refused with the rule's message. Every CEL rule of
every CRD in crds/ must at least parse and name only fields its schema has. The k8s tier
(tests/k8s/test_operator.py) applies the same CRDs and resources to a real API server.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from riverlog_operator.connect_model import ConnectorSpec, ConnectSpec, MirrorSpec
from support.crd_check import CelError, apply_defaults, check, compile_rule, tokenize, version_schema, walk

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"


def crd(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CRDS / f"{name}.yaml").read_text())
    return loaded


CONNECT, CONNECTOR, MIRROR = crd("connect"), crd("connector"), crd("mirror")


def resource(kind: str, spec: dict[str, Any], name: str = "etl") -> dict[str, Any]:
    return {"apiVersion": "riverlog.dev/v1alpha1", "kind": kind, "metadata": {"name": name, "namespace": "kafka"},
            "spec": spec}


def all_crds() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, doc) for p in sorted(CRDS.glob("*.yaml")) for doc in yaml.safe_load_all(p.read_text())
            if doc["spec"]["group"] == "riverlog.dev"]


# --- shape ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("doc", "kind", "plural", "short", "scale"), [
    (CONNECT, "Connect", "connects", "rlcn", True), (CONNECTOR, "Connector", "connectors", "rlcr", False),
    (MIRROR, "Mirror", "mirrors", "rlmm", True)])
def test_names_scope_and_subresources(doc: dict[str, Any], kind: str, plural: str, short: str, scale: bool) -> None:
    spec = doc["spec"]
    assert doc["metadata"]["name"] == f"{plural}.riverlog.dev"
    assert (spec["group"], spec["scope"]) == ("riverlog.dev", "Namespaced")
    assert spec["names"] == {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                             "shortNames": [short], "categories": ["riverlog"]}
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"]["status"] == {}
    if scale:
        assert version["subresources"]["scale"] == {"specReplicasPath": ".spec.replicas",
                                                    "statusReplicasPath": ".status.replicas",
                                                    "labelSelectorPath": ".status.labelSelector"}
    else:
        assert "scale" not in version["subresources"]
    schema = version_schema(doc)
    assert {"observedGeneration", "conditions"} <= set(schema["properties"]["status"]["properties"])


def test_short_names_are_unique() -> None:
    names = [n for _, doc in all_crds() for n in doc["spec"]["names"].get("shortNames", [])]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("doc", [CONNECT, CONNECTOR, MIRROR], ids=["connect", "connector", "mirror"])
def test_printer_columns_point_at_fields_of_the_schema(doc: dict[str, Any]) -> None:
    paths = {path for path, _ in walk(version_schema(doc))}
    (version,) = doc["spec"]["versions"]
    columns = version["additionalPrinterColumns"]
    for column in columns:
        path = re.sub(r"\[\?\(.*?\)\]", "[]", column["jsonPath"])
        if path == ".metadata.creationTimestamp":
            continue
        assert path in paths, column
    names = [c["name"] for c in columns]
    assert names[-1] == "Age"
    if doc is CONNECTOR:
        assert names[:4] == ["Connect", "Class", "Tasks", "State"] and "Ready" in names


def test_connect_and_mirror_sides_describe_an_endpoint_alike() -> None:
    # One way to say "which Kafka, as whom": Connect's spec and each side of a Mirror.
    connect = version_schema(CONNECT)["properties"]["spec"]
    for side in ("source", "target"):
        mirror_side = version_schema(MIRROR)["properties"]["spec"]["properties"][side]
        for field in ("clusterRef", "bootstrapServers", "authentication", "tls"):
            assert mirror_side["properties"][field] == connect["properties"][field], (side, field)
        assert mirror_side["x-kubernetes-validations"] == connect["x-kubernetes-validations"]


# --- every rule of every CRD ------------------------------------------------------------------


def rules_of(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [(path, node, item) for path, node in walk(version_schema(doc))
            for item in node.get("x-kubernetes-validations") or []]


def field_names(node: dict[str, Any], chain: tuple[str, ...]) -> bool:
    """Whether ``self.a.b`` names fields the schema declares from ``node`` down."""
    for name in chain:
        props = node.get("properties") or {}
        if name not in props:
            return False
        node = props[name]
    return True


@pytest.mark.parametrize(("file", "doc"), all_crds(), ids=[name for name, _ in all_crds()])
def test_every_rule_parses_says_why_and_names_real_fields(file: str, doc: dict[str, Any]) -> None:
    for path, node, item in rules_of(doc):
        assert item.get("message", "").strip(), (file, path, item["rule"])
        try:
            rule = compile_rule(item["rule"], item["message"])
        except CelError as exc:
            pytest.fail(f"{file} {path}: {item['rule']!r}: {exc}")
        for chain in rule.paths:
            assert field_names(node, chain[1:]), f"{file} {path}: {'.'.join(chain)} is not in the schema"
        # Iterating a map or a list: bounded, or the API server's cost estimate refuses the rule.
        if re.search(r"\bself\.(all|exists|exists_one|filter|map)\(", item["rule"]):
            assert "maxProperties" in node or "maxItems" in node, (file, path, item["rule"])


def test_the_interpreter_refuses_what_it_cannot_read() -> None:
    with pytest.raises(CelError):
        compile_rule("self.size() == 1 ? true : false")
    with pytest.raises(CelError):
        compile_rule("has(self)")
    assert tokenize("self.a != 'x y'") == ["self", ".", "a", "!=", "'x y'"]


# --- defaults ---------------------------------------------------------------------------------


def test_defaults_are_the_models() -> None:
    # The API server's defaults and the operator's give the same spec, from the shortest resources.
    connect = {"clusterRef": {"name": "secured"}}
    stored = apply_defaults(version_schema(CONNECT), {"spec": connect})["spec"]
    assert stored == {"clusterRef": {"name": "secured"}, "replicas": 1, "exactlyOnceSource": False,
                      "metrics": {"enabled": True}}
    assert ConnectSpec.from_dict(stored) == ConnectSpec.from_dict(connect)
    secrets = {"bootstrapServers": "k:9093", "tls": {"trustedCASecret": {"name": "ca"}},
               "authentication": {"type": "scram-sha-512", "username": "u", "passwordSecret": {"name": "pw"}}}
    stored = apply_defaults(version_schema(CONNECT), {"spec": secrets})["spec"]
    assert stored["authentication"]["passwordSecret"] == {"name": "pw", "key": "password"}
    assert stored["tls"]["trustedCASecret"] == {"name": "ca", "key": "ca.crt"}
    assert ConnectSpec.from_dict(stored) == ConnectSpec.from_dict(secrets)

    connector = {"connectRef": {"name": "etl"}, "class": "FileStreamSource"}
    stored = apply_defaults(version_schema(CONNECTOR), {"spec": connector})["spec"]
    assert stored == {**connector, "tasksMax": 1, "state": "running"}
    assert ConnectorSpec.from_dict(stored) == ConnectorSpec.from_dict(connector)

    mirror = {"source": {"alias": "a", "clusterRef": {"name": "x"}},
              "target": {"alias": "b", "clusterRef": {"name": "y"}}}
    stored = apply_defaults(version_schema(MIRROR), {"spec": mirror})["spec"]
    assert stored == {**mirror, "replicas": 1, "tasksMax": 1, "topics": ".*", "groups": ".*", "syncGroupOffsets": True,
                      "emitCheckpointsIntervalSeconds": 60, "syncGroupOffsetsIntervalSeconds": 60,
                      "refreshTopicsIntervalSeconds": 600, "refreshGroupsIntervalSeconds": 600,
                      "replicationPolicy": "default", "exactlyOnce": False, "metrics": {"enabled": True}}
    assert MirrorSpec.from_dict(stored) == MirrorSpec.from_dict(mirror)


# --- Connect ----------------------------------------------------------------------------------

SCRAM = {"type": "scram-sha-512", "userRef": {"name": "etl-worker"}}
OWNED = "config may not set what the operator owns"


def connect_errors(spec: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return check(CONNECT, resource("Connect", spec), None if old is None else resource("Connect", old))


@pytest.mark.parametrize("spec", [
    {"clusterRef": {"name": "secured"}},
    {"clusterRef": {"name": "secured", "listener": "SCRAM"}, "authentication": SCRAM, "replicas": 3},
    {"clusterRef": {"name": "secured"}, "authentication": {"type": "tls", "userRef": {"name": "w"}},
     "tls": {"trustedCASecret": {"name": "corporate-ca"}}},
    {"bootstrapServers": "b-1.msk:9096,b-2.msk:9096", "tls": {},
     "authentication": {"type": "scram-sha-512", "username": "etl", "passwordSecret": {"name": "msk", "key": "pw"}}},
    {"bootstrapServers": "[::1]:9093", "tls": {},
     "authentication": {"type": "tls", "certificateSecret": {"name": "c"}}},
    {"clusterRef": {"name": "secured"}, "exactlyOnceSource": True, "replicas": 0,
     "config": {"group.id": "shared", "offset.flush.interval.ms": 1000, "admin.listeners": "http://:8084",
                "producer.linger.ms": 5, "consumer.override.x": "y"},
     "plugins": [{"name": "jdbc", "volume": {"image": {"reference": "example/jdbc:1"}}},
                 {"name": "s3", "volume": {"persistentVolumeClaim": {"claimName": "p"}}},
                 {"name": "jars", "volume": {"configMap": {"name": "jars"}}},
                 {"name": "tmp", "volume": {"emptyDir": {}}}]},
])
def test_connects_that_are_accepted(spec: dict[str, Any]) -> None:
    assert connect_errors(spec) == []


@pytest.mark.parametrize(("spec", "needle"), [
    ({}, "give exactly one of clusterRef"),
    ({"clusterRef": {"name": "a"}, "bootstrapServers": "b:9092"}, "give exactly one of clusterRef"),
    ({"bootstrapServers": "no-port"}, ".spec.bootstrapServers: should match"),
    ({"clusterRef": {"name": "a"}, "replicas": -1}, ".spec.replicas: -1 out of bounds"),
    ({"clusterRef": {"name": "a"}, "authentication": {"type": "oauth"}}, "Unsupported value: 'oauth'"),
    ({"clusterRef": {"name": "a"}, "authentication": {"type": "scram-sha-512"}}, "give either userRef"),
    ({"clusterRef": {"name": "a"}, "authentication": {**SCRAM, "passwordSecret": {"name": "p"}, "username": "u"}},
     "give either userRef"),
    ({"clusterRef": {"name": "a"}, "authentication": {"type": "scram-sha-512", "passwordSecret": {"name": "p"}}},
     "username and passwordSecret go together"),
    ({"clusterRef": {"name": "a"}, "authentication": {"type": "tls", "username": "u", "userRef": {"name": "w"}}},
     "belong to authentication type scram-sha-512"),
    ({"clusterRef": {"name": "a"}, "authentication": {"type": "scram-sha-512", "certificateSecret": {"name": "c"}}},
     "certificateSecret belongs to authentication type tls"),
    ({"bootstrapServers": "b:9092", "authentication": SCRAM}, "userRef needs clusterRef"),
    ({"bootstrapServers": "b:9092", "authentication": {"type": "tls", "certificateSecret": {"name": "c"}}},
     "authentication type tls needs tls"),
    ({"clusterRef": {"name": "a"}, "authentication": {"type": "scram-sha-512", "username": 'a"b',
                                                      "passwordSecret": {"name": "p"}}}, "username: should match"),
    ({"clusterRef": {"name": "a"}, "config": {"bootstrap.servers": "x:9092"}}, OWNED),
    ({"clusterRef": {"name": "a"}, "config": {"rest.advertised.host.name": "x"}}, OWNED),
    ({"clusterRef": {"name": "a"}, "config": {"config.providers.vault.class": "x"}}, OWNED),
    ({"clusterRef": {"name": "a"}, "config": {"exactly.once.source.support": "enabled"}}, OWNED),
    ({"clusterRef": {"name": "a"}, "config": {"consumer.bootstrap.servers": "x:1"}}, OWNED),
    ({"clusterRef": {"name": "a"}, "config": {"ssl.truststore.location": "/x"}}, "config may not set TLS or SASL"),
    ({"clusterRef": {"name": "a"}, "config": {"producer.sasl.jaas.config": "x"}}, "config may not set TLS or SASL"),
    ({"clusterRef": {"name": "a"}, "config": {"admin.security.protocol": "SSL"}}, "config may not set TLS or SASL"),
    ({"clusterRef": {"name": "a"}, "config": {"flag": True}}, ".spec.config.flag: expected None"),
    ({"clusterRef": {"name": "a"}, "plugins": [{"name": "j", "volume": {}}]}, "exactly one of configMap"),
    ({"clusterRef": {"name": "a"}, "plugins": [{"name": "j", "volume": {"emptyDir": {}, "configMap": {"name": "c"}}}]},
     "exactly one of configMap"),
    ({"clusterRef": {"name": "a"}, "plugins": [{"name": "J_ar", "volume": {"emptyDir": {}}}]}, "name: should match"),
])
def test_connects_that_are_refused(spec: dict[str, Any], needle: str) -> None:
    found = connect_errors(spec)
    assert any(needle in e for e in found), found


# --- Connector --------------------------------------------------------------------------------

LINES = {"connectRef": {"name": "etl"}, "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
         "config": {"file": "/etc/riverlog-connect/connect-distributed.properties", "topic": "lines"}}


def test_connectors_accepted_refused_and_their_transitions() -> None:
    assert check(CONNECTOR, resource("Connector", LINES)) == []
    assert check(CONNECTOR, resource("Connector", {**LINES, "class": "FileStreamSource", "tasksMax": 4,
                                                   "state": "stopped"})) == []
    assert check(CONNECTOR, resource("Connector", {**LINES, "autoRestart": {"enabled": True, "maxRestarts": 5}})) == []
    refused = {
        "config may not set connector.class": {**LINES, "config": {"tasks.max": "2"}},
        "Unsupported value: 'sleeping'": {**LINES, "state": "sleeping"},
        ".spec.tasksMax: 0 out of bounds": {**LINES, "tasksMax": 0},
        ".spec.class: should match": {**LINES, "class": "not a class"},
        ".spec.connectRef: Required value": {"class": "X"},
        ".spec.autoRestart.maxRestarts: -1 out of bounds": {**LINES, "autoRestart": {"enabled": True,
                                                                                    "maxRestarts": -1}},
    }
    for needle, spec in refused.items():
        found = check(CONNECTOR, resource("Connector", spec))
        assert any(needle in e for e in found), (needle, found)
    moved = {**LINES, "connectRef": {"name": "other"}}
    assert any("connectRef cannot change" in e for e in check(CONNECTOR, resource("Connector", moved),
                                                              resource("Connector", LINES)))
    paused = {**LINES, "state": "paused", "config": {**LINES["config"], "topic": "lines2"}}
    assert check(CONNECTOR, resource("Connector", paused), resource("Connector", LINES)) == []


# --- Mirror -----------------------------------------------------------------------------------

OLD = {"alias": "old", "bootstrapServers": "kafka-0.old:9096", "tls": {},
       "authentication": {"type": "scram-sha-512", "username": "mirror", "passwordSecret": {"name": "old-mirror"}}}
NEW = {"alias": "new", "clusterRef": {"name": "secured"}, "authentication": {"type": "tls", "userRef": {"name": "mm2"}}}


def mirror_errors(spec: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return check(MIRROR, resource("Mirror", spec), None if old is None else resource("Mirror", old))


def test_mirrors_that_are_accepted() -> None:
    assert mirror_errors({"source": OLD, "target": NEW}) == []
    assert mirror_errors({"source": OLD, "target": NEW, "replicationPolicy": "identity", "exactlyOnce": True,
                          "topics": "orders.*", "topicsExclude": "orders-tmp", "groupsExclude": "test-.*",
                          "config": {"sync.topic.acls.enabled": "false", "offset-syncs.topic.location": "target",
                                     "source.consumer.fetch.max.bytes": 52428800,
                                     "producer.override.linger.ms": 100},
                          "workerConfig": {"offset.flush.interval.ms": 5000, "producer.linger.ms": 10}}) == []


@pytest.mark.parametrize(("spec", "needle"), [
    ({"source": {**OLD, "alias": "new"}, "target": NEW}, "source and target need different aliases"),
    ({"source": {**OLD, "alias": "a.b"}, "target": NEW}, ".spec.source.alias: should match"),
    ({"source": {k: v for k, v in OLD.items() if k != "alias"}, "target": NEW}, ".spec.source.alias: Required"),
    ({"source": {**OLD, "clusterRef": {"name": "x"}}, "target": NEW}, "give exactly one of clusterRef"),
    ({"source": OLD, "target": {**NEW, "bootstrapServers": "x:1"}}, "give exactly one of clusterRef"),
    ({"source": {**{k: v for k, v in OLD.items() if k != "tls"},
                 "authentication": {"type": "tls", "certificateSecret": {"name": "c"}}}, "target": NEW},
     "authentication type tls needs tls"),
    ({"source": OLD, "target": NEW, "replicationPolicy": "prefix"}, "Unsupported value: 'prefix'"),
    ({"source": OLD, "target": NEW, "config": {"topics": "x"}}, "config may not set what the Mirror's fields decide"),
    ({"source": OLD, "target": NEW, "config": {"key.converter": "x"}}, "config may not set what the Mirror's fields"),
    ({"source": OLD, "target": NEW, "config": {"source.cluster.bootstrap.servers": "x:1"}},
     "config may not set what the Mirror's fields"),
    ({"source": OLD, "target": NEW, "config": {"source.cluster.sasl.jaas.config": "x"}},
     "config may not set TLS or SASL properties of the clients"),
    ({"source": OLD, "target": NEW, "config": {"target.admin.ssl.keystore.location": "x"}},
     "config may not set TLS or SASL properties of the clients"),
    ({"source": OLD, "target": NEW, "config": {"producer.override.security.protocol": "PLAINTEXT"}},
     "config may not set TLS or SASL properties of the clients"),
    ({"source": OLD, "target": NEW, "emitCheckpointsIntervalSeconds": 0}, "out of bounds"),
    ({"source": OLD, "target": NEW, "workerConfig": {"listeners": "http://:1"}},
     "workerConfig may not set what the operator owns"),
    ({"source": OLD, "target": NEW, "workerConfig": {"config.providers.vault.class": "x"}},
     "workerConfig may not set what the operator owns"),
    ({"source": OLD, "target": NEW, "workerConfig": {"consumer.sasl.mechanism": "PLAIN"}},
     "workerConfig may not set TLS or SASL properties"),
])
def test_mirrors_that_are_refused(spec: dict[str, Any], needle: str) -> None:
    found = mirror_errors(spec)
    assert any(needle in e for e in found), found


def test_what_names_remote_topics_cannot_change() -> None:
    before = {"source": OLD, "target": NEW}
    renamed = copy.deepcopy(before)
    renamed["source"]["alias"] = "legacy"
    assert any("an alias cannot change" in e for e in mirror_errors(renamed, before))
    identity = {**before, "replicationPolicy": "identity"}
    assert any("replicationPolicy cannot change" in e for e in mirror_errors(identity, before))
    assert mirror_errors({**before, "replicas": 3, "topics": "orders.*"}, before) == []


# --- the samples ------------------------------------------------------------------------------


def test_the_examples_pass_their_crds() -> None:
    by_kind = {"Connect": CONNECT, "Connector": CONNECTOR, "Mirror": MIRROR, "User": crd("user"),
               "Topic": crd("topic")}
    seen = set()
    for sample in ("connect.yaml", "mirror.yaml"):
        for doc in yaml.safe_load_all((ROOT / "examples" / sample).read_text()):
            assert doc["kind"] in by_kind, (sample, doc["kind"])
            assert check(by_kind[doc["kind"]], doc) == [], (sample, doc["metadata"]["name"])
            seen.add(doc["kind"])
    assert seen == set(by_kind)
