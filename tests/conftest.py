"""Fixtures shared by all test tiers: broker processes and Kafka's Java tools.

Which broker runs is chosen by ``RIVERLOG_TEST_TARGET`` (``riverlog`` by default, or ``kafka``
for Apache Kafka from Maven Central jars); see ``support/brokers.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path

import pytest
from support.brokers import BrokerProcess, kafka_dist, selected_target
from support.java_tools import JavaTools

_BROKERS_KEY = pytest.StashKey[list[BrokerProcess]]()

BrokerFactory = Callable[..., BrokerProcess]


def pytest_report_header(config: pytest.Config) -> str:
    target = selected_target()
    if target == "kafka":
        return f"broker target: Apache Kafka {kafka_dist.kafka_version()} (RIVERLOG_TEST_TARGET=kafka)"
    return "broker target: riverlog (set RIVERLOG_TEST_TARGET=kafka to validate against Apache Kafka)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # When a test fails, its brokers' log tails are the first thing one needs: attach them to
    # the report so they print next to the assertion.
    report = yield
    if report.failed:
        for broker in item.stash.get(_BROKERS_KEY, []):
            report.sections.append((f"log of {broker.name} ({broker.target})", broker.log_tail(120)))
    return report


@pytest.fixture(scope="session")
def broker_target() -> str:
    return selected_target()


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """Directory of Apache Kafka's jars (installed from Maven Central on first use, then cached).

    Needed for Kafka's Java tools whatever the target, and for the broker itself when the target
    is Kafka. A failed install fails the tests that need it; it never skips them.
    """
    return Path(kafka_dist.install())


@pytest.fixture(scope="session")
def java_tools(kafka_libs: Path) -> JavaTools:
    return JavaTools(kafka_libs)


@pytest.fixture
def broker_factory(
    request: pytest.FixtureRequest, tmp_path: Path, broker_target: str
) -> Iterator[BrokerFactory]:
    """Make brokers: ``broker_factory(overrides={...}, start=True, name=...)``.

    Each gets its own directory under the test's tmp_path and free loopback ports; all are
    stopped when the test ends.
    """
    created: list[BrokerProcess] = []
    request.node.stash[_BROKERS_KEY] = created
    libs: Path | None = None
    if broker_target == "kafka":
        libs = Path(request.getfixturevalue("kafka_libs"))

    def make(
        overrides: Mapping[str, object] | None = None,
        *,
        start: bool = True,
        name: str | None = None,
        node_id: int = 1,
    ) -> BrokerProcess:
        name = name or f"broker{len(created)}"
        broker = BrokerProcess(
            tmp_path / name,
            overrides=overrides,
            target=broker_target,
            node_id=node_id,
            name=name,
            kafka_libs=libs,
        )
        created.append(broker)
        if start:
            broker.start()
        return broker

    yield make
    for broker in created:
        broker.close()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A fresh single broker with default settings, started and ready."""
    return broker_factory()
