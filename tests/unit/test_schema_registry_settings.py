"""The registry's settings under Confluent's property names, and the writer choice of the election."""

from __future__ import annotations

import pytest
from riverlog.config import ConfigError
from riverlog.schema_registry.election import Identity, assignment, choose_writer
from riverlog.schema_registry.kafkastore import topic_settings
from riverlog.schema_registry.settings import settings_from

pytestmark = pytest.mark.unit


def test_confluent_property_names() -> None:
    s = settings_from({"listeners": "http://0.0.0.0:8085", "kafkastore.bootstrap.servers": "PLAINTEXT://k1:9092,k2:9092",
                       "kafkastore.topic": "_schemas_x", "avro.compatibility.level": "full_transitive",
                       "host.name": "sr-1.internal", "master.eligibility": "false"})
    assert (s.host, s.port, s.advertised_host, s.url) == ("", 8085, "sr-1.internal", "http://sr-1.internal:8085")
    assert (s.bootstrap, s.topic, s.compatibility, s.leader_eligible) == ("k1:9092,k2:9092", "_schemas_x",
                                                                          "FULL_TRANSITIVE", False)
    assert settings_from({"kafkastore.bootstrap.servers": "k:9092", "port": "9000"}).port == 9000
    local = settings_from({"kafkastore.bootstrap.servers": "k:9092", "listeners": "http://127.0.0.1:8081"})
    assert (local.host, local.advertised_host, local.compatibility) == ("127.0.0.1", "127.0.0.1", "BACKWARD")


@pytest.mark.parametrize("props,words", [
    ({}, "kafkastore.bootstrap.servers"),
    ({"kafkastore.bootstrap.servers": "k:1", "listeners": "https://h:1"}, "ssl.keystore.location"),
    ({"kafkastore.bootstrap.servers": "k:1", "listeners": "ftp://h:1"}, "http://HOST:PORT"),
    ({"kafkastore.bootstrap.servers": "k:1", "listeners": "http://h"}, "http://HOST:PORT"),
    ({"kafkastore.bootstrap.servers": "k:1", "schema.compatibility.level": "lenient"}, "one of"),
])
def test_bad_settings_say_what_to_fix(props: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        settings_from(props)


def test_topic_settings_follow_the_cluster_size() -> None:
    assert topic_settings(1) == (1, {"cleanup.policy": "compact", "min.insync.replicas": "1"})
    assert topic_settings(2)[0] == 2 and topic_settings(2)[1]["min.insync.replicas"] == "1"
    assert topic_settings(5) == (3, {"cleanup.policy": "compact", "min.insync.replicas": "2"})


def test_writer_choice_is_sticky_and_skips_ineligible_members() -> None:
    a, b, c = Identity("a", 1), Identity("b", 1), Identity("c", 1, leader_eligibility=False)
    assert choose_writer({"m1": b, "m2": a}, None) == "m2"  # smallest URL
    assert choose_writer({"m1": b, "m2": a}, b) == "m1"  # the writer so far stays
    assert choose_writer({"m1": c}, None) is None
    assert choose_writer({"m1": c, "m2": b}, c) == "m2"
    assert b'"leader": "m2"' in assignment("m2", {"m2": a})
