"""Fixtures of the cluster tier: clusters of broker processes (``support/process_cluster.py``)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support.brokers import kafka_dist
from support.process_cluster import ProcessCluster

_CLUSTERS_KEY = pytest.StashKey[list[ProcessCluster]]()
# Other processes of a test (Connect workers, ...): a name and how to read its log's tail.
_LOGS_KEY = pytest.StashKey[list[tuple[str, Callable[[], str]]]]()

ClusterFactory = Callable[..., ProcessCluster]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # A failed cluster test needs every node's last words next to the assertion.
    report = yield
    if report.failed:
        for cluster in item.stash.get(_CLUSTERS_KEY, []):
            for node in cluster.nodes:
                report.sections.append((f"log of node {node.node_id} ({cluster.target})", node.log_tail(150)))
        for name, tail in item.stash.get(_LOGS_KEY, []):
            report.sections.append((f"log of {name}", tail()))
    return report


@pytest.fixture
def attach_log(request: pytest.FixtureRequest) -> Callable[[str, Callable[[], str]], None]:
    """``attach_log(name, tail)``: a failed test's report shows ``tail()`` under ``name``."""
    def attach(name: str, tail: Callable[[], str]) -> None:
        request.node.stash.setdefault(_LOGS_KEY, []).append((name, tail))
    return attach


@pytest.fixture
def process_cluster_factory(
    request: pytest.FixtureRequest, tmp_path: Path, broker_target: str
) -> Iterator[ClusterFactory]:
    """``make(size=3, overrides={...}, netns=True, start=True, target=None)``: a cluster of broker processes
    under the test's tmp_path, torn down (processes and namespaces) when the test ends."""
    created: list[ProcessCluster] = []
    request.node.stash[_CLUSTERS_KEY] = created

    def make(size: int = 3, *, overrides: Mapping[str, object] | None = None, netns: bool = True,
             start: bool = True, target: str | None = None, **options: Any) -> ProcessCluster:
        # ``target``: "kafka" for an Apache Kafka cluster whatever the tier's target (a source
        # cluster that migrates to the target under test).
        target = target or broker_target
        libs = Path(kafka_dist.install()) if target == "kafka" else None
        cluster = ProcessCluster(tmp_path / f"cluster{len(created)}", size, target=target,
                                 overrides=overrides, netns=netns, kafka_libs=libs, **options)
        created.append(cluster)
        if start:
            cluster.start()
        return cluster

    yield make
    for cluster in created:
        cluster.close()
