"""Fixtures of the e2e tier: the k8s tier's real control plane plus a test node.

``kube`` is a started :class:`support.kube.KubeCluster` (its own, for this tier); ``node`` a
running :class:`node_agent.agent.NodeAgent` with a :class:`node_agent.provisioner.LocalDirProvisioner`
for StorageClass ``e2e-local`` (both session scoped: tests isolate themselves by namespace).

With ``RIVERLOG_E2E_KUBECONFIG`` set (``e2e/kind.sh`` does, on machines with Docker) the same
scenarios run against that cluster instead: ``kube`` only drives kubectl and helm there and
``node`` is None (client pods' logs come from ``kubectl logs``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path

import pytest
from node_agent.agent import NodeAgent
from node_agent.provisioner import LocalDirProvisioner
from support.brokers import kafka_dist
from support.connect import metrics_agent
from support.kube import KubeCluster, k8s_bin_dir

EXISTING_KUBECONFIG = os.environ.get("RIVERLOG_E2E_KUBECONFIG", "")

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


class ExistingCluster(KubeCluster):
    """A cluster run by someone else (kind): kubectl and helm from PATH against its kubeconfig."""

    def __init__(self, workdir: Path, kubeconfig: Path) -> None:
        super().__init__(workdir, bin_dir=workdir)
        self.kubeconfig = kubeconfig

    def start(self, timeout: float = 0.0) -> None:
        pass

    def stop(self) -> None:
        pass

    def _tool(self, tool: str, args: Sequence[str], input: str | None, check: bool, timeout: float):  # type: ignore[no-untyped-def]
        found = shutil.which(tool)
        if found is None:
            raise FileNotFoundError(f"{tool} is not on PATH (e2e/kind.sh puts the k8s tools there)")
        self.bin_dir = Path(found).parent
        return super()._tool(tool, args, input, check, timeout)


def connect_image_env() -> dict[str, str]:
    """What the Connect image (the Dockerfile's ``connect`` stage) would provide: Kafka's jars
    (here the ones ``make java-deps`` cached), the JMX exporter's agent, and JVM options (a small
    heap, quick start-up on a two-core machine rather than the image's share of a memory limit)."""
    libs = kafka_dist.install()
    return {"RIVERLOG_CONNECT_HOME": str(libs.parent),
            "RIVERLOG_CONNECT_METRICS_AGENT": str(metrics_agent()),
            "RIVERLOG_CONNECT_JAVA_OPTS": "-Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"}


@pytest.fixture(scope="session")
def kube(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    if EXISTING_KUBECONFIG:
        yield ExistingCluster(tmp_path_factory.mktemp("kube"), Path(EXISTING_KUBECONFIG))
        return
    cluster = KubeCluster(tmp_path_factory.mktemp("kube"), bin_dir=k8s_bin_dir())
    cluster.start()
    request.config.stash[_CLUSTER_KEY] = cluster
    yield cluster
    del request.config.stash[_CLUSTER_KEY]
    cluster.stop()


@pytest.fixture(scope="session")
def node(
    request: pytest.FixtureRequest, kube: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodeAgent | None]:
    if EXISTING_KUBECONFIG:
        yield None  # the cluster has real nodes
        return
    root: Path = tmp_path_factory.mktemp("node")
    provisioner = LocalDirProvisioner(kube.kubeconfig, root / "volumes")
    provisioner.start()
    agent = NodeAgent(kube.kubeconfig, root / "agent", image_env=connect_image_env())
    agent.start()
    request.config.stash[_AGENT_KEY] = agent
    yield agent
    del request.config.stash[_AGENT_KEY]
    agent.stop()
    provisioner.stop()
