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


def image(fenced: set[int], second_listener_on: tuple[int, ...] = ()) -> MetadataImage:
    def endpoints(n: int) -> tuple[Endpoint, ...]:
        second = (Endpoint("EXTERNAL", f"ext-{n}.example", 19000 + n),) if n in second_listener_on else ()
        return (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + n), *second)

    return MetadataImage(cluster_id="c").apply(
        RegisterBrokerRecord(n, endpoints(n), None, n in fenced, f"inc-{n}") for n in (1, 2, 3))


def on_listener(name: str) -> Any:
    """A request context whose connection arrived on listener ``name``."""
    return SimpleNamespace(connection=SimpleNamespace(listener=name), version=12)


def this_broker(node_id: int) -> Any:
    return SimpleNamespace(node_id=node_id, config=BrokerConfig({"node.id": str(node_id)}))


def test_fenced_brokers_are_left_out() -> None:
    entries = broker_entries(this_broker(1), on_listener("PLAINTEXT"), image(fenced={2}))
    assert [(e["node_id"], e["port"]) for e in entries] == [(1, 9001), (3, 9003)]


def test_with_every_broker_fenced_the_answering_broker_lists_itself() -> None:
    # An empty list would make librdkafka forget every broker it knows, coordinator included.
    entries = broker_entries(this_broker(2), on_listener("PLAINTEXT"), image(fenced={1, 2, 3}))
    assert [(e["node_id"], e["host"], e["port"]) for e in entries] == [(2, "127.0.0.1", 9002)]


def test_brokers_are_listed_with_the_address_of_the_listener_the_request_came_in_on() -> None:
    # Kafka's rule: a client of the EXTERNAL listener is handed EXTERNAL addresses only, and a
    # broker without that listener is left out.
    img = image(fenced=set(), second_listener_on=(1, 3))
    external = broker_entries(this_broker(1), on_listener("EXTERNAL"), img)
    assert [(e["node_id"], e["host"], e["port"]) for e in external] == [
        (1, "ext-1.example", 19001), (3, "ext-3.example", 19003)]
    internal = broker_entries(this_broker(1), on_listener("PLAINTEXT"), img)
    assert [(e["node_id"], e["port"]) for e in internal] == [(1, 9001), (2, 9002), (3, 9003)]
