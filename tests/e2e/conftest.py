"""Fixtures of the e2e tier: the k8s tier's real control plane plus a test node.

``kube`` is a started :class:`support.kube.KubeCluster` (its own, for this tier); ``node`` a
running :class:`node_agent.agent.NodeAgent` with a :class:`node_agent.provisioner.LocalDirProvisioner`
for StorageClass ``e2e-local`` (both session scoped: tests isolate themselves by namespace).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from node_agent.agent import NodeAgent
from node_agent.provisioner import LocalDirProvisioner
from support.kube import KubeCluster, k8s_bin_dir

_CLUSTER_KEY = pytest.StashKey[KubeCluster]()
_AGENT_KEY = pytest.StashKey[NodeAgent]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    cluster = item.config.stash.get(_CLUSTER_KEY, None)
    agent = item.config.stash.get(_AGENT_KEY, None)
    if report.failed and cluster is not None:
        for component in cluster.components:
            report.sections.append((f"log of {component.name}", component.log_tail(40)))
    if report.failed and agent is not None:
        report.sections.append(("node agent errors", "\n".join(agent.errors[-20:])))
        for run in agent.pods.values():
            for c in run.containers:
                log = run.directory / f"{c.name}.log"
                if log.exists():
                    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                    report.sections.append((f"log of pod {run.key} container {c.name}", tail))
    return report


@pytest.fixture(scope="session")
def kube(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    cluster = KubeCluster(tmp_path_factory.mktemp("kube"), bin_dir=k8s_bin_dir())
    cluster.start()
    request.config.stash[_CLUSTER_KEY] = cluster
    yield cluster
    del request.config.stash[_CLUSTER_KEY]
    cluster.stop()


@pytest.fixture(scope="session")
def node(
    request: pytest.FixtureRequest, kube: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodeAgent]:
    root: Path = tmp_path_factory.mktemp("node")
    provisioner = LocalDirProvisioner(kube.kubeconfig, root / "volumes")
    provisioner.start()
    agent = NodeAgent(kube.kubeconfig, root / "agent")
    agent.start()
    request.config.stash[_AGENT_KEY] = agent
    yield agent
    del request.config.stash[_AGENT_KEY]
    agent.stop()
    provisioner.stop()
