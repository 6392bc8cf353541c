"""Fixtures of the spark tier: the connector jars (``make spark-deps``) and one broker per module.

Pipelines run as ``python -m riverlog_spark run ...`` processes (Spark in local mode) against a
live broker process; each test uses its own topics and checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from riverlog_spark import deps
from support.brokers import BrokerProcess


@pytest.fixture(scope="session")
def spark_jars() -> list[Path]:
    """Spark's Kafka connector and its dependencies; resolved with Maven on first use (cached)."""
    return deps.ensure()


@pytest.fixture(scope="module")
def spark_broker(module_broker_factory: Callable[..., BrokerProcess], spark_jars: list[Path]) -> BrokerProcess:
    return module_broker_factory(name="spark-broker")
