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
# Brokers of module-scoped factories, by module node id, so failures show their logs too.
_MODULE_BROKERS_KEY = pytest.StashKey[dict[str, list[BrokerProcess]]]()

BrokerFactory = Callable[..., BrokerProcess]


def pytest_report_header(config: pytest.Config) -> str:
    target = selected_target()
    if target == "kafka":
        return f"broker target: Apache Kafka {kafka_dist.kafka_version()} (RIVERLOG_TEST_TARGET=kafka)"
    return "broker target: riverlog (set RIVERLOG_TEST_TARGET=kafka to validate against Apache Kafka)"


TIERS = ("unit", "integration", "cluster", "k8s", "spark", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `make <tier>` selects by marker: a test with no tier marker would run only under
    # `make test` and silently drop out of its tier's command (four unit tests once did).
    untiered = [item.nodeid for item in items if not any(item.get_closest_marker(t) for t in TIERS)]
    if untiered:
        raise pytest.UsageError(f"tests without a tier marker ({', '.join(TIERS)}): {', '.join(untiered)}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # When a test fails, its brokers' log tails are the first thing one needs: attach them to
    # the report so they print next to the assertion.
    report = yield
    if report.failed:
        module_brokers = item.config.stash.get(_MODULE_BROKERS_KEY, {}).get(item.nodeid.split("::")[0], [])
        for broker in [*module_brokers, *item.stash.get(_BROKERS_KEY, [])]:
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


def _factory(base: Path, target: str, libs: Path | None, created: list[BrokerProcess]) -> BrokerFactory:
    """``make(overrides={...}, start=True, name=..., node_id=1)``: a broker in its own directory
    under ``base`` with free loopback ports, remembered in ``created`` for teardown."""

    def make(
        overrides: Mapping[str, object] | None = None,
        *,
        start: bool = True,
        name: str | None = None,
        node_id: int = 1,
    ) -> BrokerProcess:
        name = name or f"broker{len(created)}"
        broker = BrokerProcess(
            base / name, overrides=overrides, target=target, node_id=node_id, name=name, kafka_libs=libs
        )
        created.append(broker)
        if start:
            broker.start()
        return broker

    return make


def _kafka_libs(request: pytest.FixtureRequest, target: str) -> Path | None:
    return Path(request.getfixturevalue("kafka_libs")) if target == "kafka" else None


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
    yield _factory(tmp_path, broker_target, _kafka_libs(request, broker_target), created)
    for broker in created:
        broker.close()


@pytest.fixture(scope="module")
def module_broker_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, broker_target: str
) -> Iterator[BrokerFactory]:
    """Like ``broker_factory``, but its brokers serve every test of a module (stopped when the
    module ends): for modules whose tests each use their own topics and groups, where one broker
    start instead of one per test saves much of the run time."""
    created: list[BrokerProcess] = []
    request.config.stash.setdefault(_MODULE_BROKERS_KEY, {})[request.node.nodeid] = created
    base = tmp_path_factory.mktemp(request.node.name.removesuffix(".py"))
    yield _factory(base, broker_target, _kafka_libs(request, broker_target), created)
    for broker in created:
        broker.close()
    request.config.stash[_MODULE_BROKERS_KEY].pop(request.node.nodeid, None)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A fresh single broker with default settings, started and ready."""
    return broker_factory()
