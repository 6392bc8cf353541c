"""Fixtures shared by integration modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from support.sr_registry import RegistryProcess, broker_with_registry


@pytest.fixture(scope="module")
def schema_registry(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    """One broker and a ``riverlog schema-registry`` on it, per test module."""
    with broker_with_registry(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])) as process:
        yield process


@pytest.fixture
def registry_client(schema_registry: RegistryProcess) -> SchemaRegistryClient:
    """confluent-kafka's client of that registry."""
    return SchemaRegistryClient({"url": schema_registry.url})
