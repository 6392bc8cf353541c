"""Which brokers a Metadata response lists, from the metadata image."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from riverlog.config import BrokerConfig
from riverlog.controller.image import MetadataImage
from riverlog.controller.records import Endpoint, RegisterBrokerRecord
from riverlog.handlers.metadata import broker_entries

pytestmark = pytest.mark.unit


def image(fenced: set[int]) -> MetadataImage:
    return MetadataImage(cluster_id="c").apply(
        RegisterBrokerRecord(n, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + n),), None, n in fenced, f"inc-{n}")
        for n in (1, 2, 3))


def this_broker(node_id: int) -> Any:
    return SimpleNamespace(node_id=node_id, config=BrokerConfig({"node.id": str(node_id)}))


def test_fenced_brokers_are_left_out() -> None:
    entries = broker_entries(this_broker(1), image(fenced={2}))
    assert [(e["node_id"], e["port"]) for e in entries] == [(1, 9001), (3, 9003)]


def test_with_every_broker_fenced_the_answering_broker_lists_itself() -> None:
    # An empty list would make librdkafka forget every broker it knows, coordinator included.
    entries = broker_entries(this_broker(2), image(fenced={1, 2, 3}))
    assert [(e["node_id"], e["host"], e["port"]) for e in entries] == [(2, "127.0.0.1", 9002)]
