"""Fixtures of the spark tier: the connector jars (``make spark-deps``) and one broker per module.

Pipelines run as ``python -m riverlog_spark run ...`` processes (Spark in local mode) against a
live broker process; each test uses its own topics and checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from riverlog_spark import deps
from support.brokers import BrokerProcess
from support.sr_registry import RegistryProcess, broker_with_registry


@pytest.fixture(scope="session")
def spark_jars() -> list[Path]:
    """Spark's Kafka connector and its dependencies; resolved with Maven on first use (cached)."""
    return deps.ensure()


@pytest.fixture(scope="module")
def spark_broker(module_broker_factory: Callable[..., BrokerProcess], spark_jars: list[Path]) -> BrokerProcess:
    return module_broker_factory(name="spark-broker")


@pytest.fixture(scope="module")
def spark_registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                   spark_jars: list[Path]) -> Iterator[RegistryProcess]:
    """A broker and a ``riverlog schema-registry`` process on it (``.bootstrap``, ``.url``), per module."""
    with broker_with_registry(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])) as process:
        yield process
