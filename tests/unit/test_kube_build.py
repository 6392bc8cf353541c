"""The pure parts of the k8s tools build (tests/support/kube_build.py): the throwaway go.mod that
makes k8s.io/kubernetes buildable at a version, and helm's release flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import kube_build

pytestmark = pytest.mark.unit

KUBERNETES_GO_MOD = """// generated
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/spf13/cobra v1.10.0
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiextensions-apiserver => ./staging/src/k8s.io/apiextensions-apiserver
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/cri-api => ./staging/src/k8s.io/cri-api
)
"""


def test_staging_modules_are_the_replaced_local_paths() -> None:
    assert kube_build.staging_modules(KUBERNETES_GO_MOD) == [
        "k8s.io/api", "k8s.io/apiextensions-apiserver", "k8s.io/cri-api",
    ]


def test_throwaway_go_mod_replaces_staging_modules_by_their_published_twins() -> None:
    assert kube_build.throwaway_go_mod(KUBERNETES_GO_MOD, "v1.36.3") == """module riverlog.dev/k8s-test-tools

go 1.26.0
godebug default=go1.26

require k8s.io/kubernetes v1.36.3

replace (
\tk8s.io/api => k8s.io/api v0.36.3
\tk8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.36.3
\tk8s.io/cri-api => k8s.io/cri-api v0.36.3
)

tool (
\tk8s.io/kubernetes/cmd/kube-apiserver
\tk8s.io/kubernetes/cmd/kube-controller-manager
\tk8s.io/kubernetes/cmd/kubectl
)
"""


def test_helm_assumes_the_kubernetes_version_of_its_client_go() -> None:
    flags = kube_build.helm_ldflags("require (\n\tk8s.io/client-go v0.37.0\n)\n", "v3.22.0")
    assert "-X helm.sh/helm/v3/internal/version.version=v3.22.0" in flags
    assert "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37" in flags
    assert "-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1" in flags


def test_cache_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kube_build.bin_dir() == tmp_path / "riverlog" / "k8s" / kube_build.K8S_VERSION / "bin"
    assert kube_build.missing_tools() == list(kube_build.TOOLS)  # an empty cache needs everything
