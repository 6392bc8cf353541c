"""Fixtures of the k8s tier: a real kube-apiserver + etcd + kube-controller-manager on loopback.

``kube`` (session scope) is a started :class:`support.kube.KubeCluster`; see that module for its
interface. The binaries come from ``make k8s-deps`` (built once from Go modules, then cached);
if they are missing the fixture builds them first, which takes minutes.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from support import kube_build
from support.kube import KubeCluster, k8s_bin_dir

_CLUSTER_KEY = pytest.StashKey[KubeCluster]()
_BUILD_ERROR_KEY = pytest.StashKey[kube_build.KubeBuildError]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # What the API server and the controllers said last is what explains most k8s failures.
    report = yield
    cluster = item.config.stash.get(_CLUSTER_KEY, None)
    if report.failed and cluster is not None:
        for component in cluster.components:
            report.sections.append((f"log of {component.name}", component.log_tail(60)))
    return report


def pytest_collection_finish(session: pytest.Session) -> None:
    # Build missing tools before the first test starts, so a cold build (minutes) is not counted
    # against that test's timeout; `make test` has normally built them already (make k8s-deps).
    if not any(item.get_closest_marker("k8s") for item in session.items):
        return
    if not kube_build.missing_tools():
        return
    try:
        kube_build.ensure()
    except kube_build.KubeBuildError as exc:
        # Reported by the k8s_bin fixture, i.e. as an error of each test that needs the tools.
        session.config.stash[_BUILD_ERROR_KEY] = exc


@pytest.fixture(scope="session")
def k8s_bin(request: pytest.FixtureRequest) -> Path:
    """Directory with kube-apiserver, kube-controller-manager, kubectl, helm, kind and etcd."""
    error = request.config.stash.get(_BUILD_ERROR_KEY, None)
    if error is not None:
        raise error
    return k8s_bin_dir()


@pytest.fixture(scope="session")
def kube(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, k8s_bin: Path
) -> Iterator[KubeCluster]:
    """A running control plane for the whole session (tests isolate themselves by namespace)."""
    cluster = KubeCluster(tmp_path_factory.mktemp("kube"), bin_dir=k8s_bin)
    cluster.start()
    request.config.stash[_CLUSTER_KEY] = cluster
    yield cluster
    del request.config.stash[_CLUSTER_KEY]
    cluster.stop()
