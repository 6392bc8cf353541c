"""Build the Kubernetes tools the ``k8s`` test tier needs, from Go modules, into a cache.

The tier runs a real kube-apiserver and kube-controller-manager (see ``support/kube.py``). This
machine and CI reach the Go module proxy and Debian's packages but no release download site, so
the binaries are compiled here, once, and cached outside the repository in
``${XDG_CACHE_HOME:-$HOME/.cache}/riverlog/k8s/<kubernetes version>/bin``:

- ``kube-apiserver``, ``kube-controller-manager``, ``kubectl`` from ``k8s.io/kubernetes``;
- ``helm`` (``helm.sh/helm/v3/cmd/helm``) and ``kind`` (``sigs.k8s.io/kind``);
- ``etcd``: a link to Debian's ``etcd-server`` (``/usr/bin/etcd``), installed by ``make system-deps``.

``k8s.io/kubernetes`` cannot be ``go install``-ed at a version: its go.mod points every
``k8s.io/<staging module>`` at ``./staging/src/...`` with replace directives, which only apply
inside that module. So a throwaway module requires ``k8s.io/kubernetes`` and replaces each staging
module by its published ``v0.<minor>.<patch>`` twin, and ``go build`` runs there.

Run ``python tests/support/kube_build.py`` (``make k8s-deps``): it prints what it builds and how
long each step took, and does nothing when the cache is already complete. Concurrent runs
serialise on a lock file, so two test sessions never build twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# k8s.io/kubernetes versions on the module proxy are sparse (not every patch release is served):
# `go list -m -versions k8s.io/kubernetes` lists what can be had.
K8S_VERSION = "v1.36.3"
HELM_VERSION = "v3.22.0"
KIND_VERSION = "v0.33.0"

K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kubectl")
TOOLS = (*K8S_COMMANDS, "helm", "kind")

# Debian's etcd-server package (bookworm ships 3.4.x); kube-apiserver only needs its v3 API.
ETCD_CANDIDATES = ("/usr/bin/etcd",)

_STAMP = "versions.json"

Log = Callable[[str], None]


class KubeBuildError(RuntimeError):
    """A build step failed, or a prerequisite (Go, etcd) is missing; the message says which."""


def _stderr_log(message: str) -> None:
    print(f"[k8s-deps] {message}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "riverlog" / "k8s" / K8S_VERSION


def bin_dir() -> Path:
    return cache_dir() / "bin"


def wanted_versions() -> dict[str, str]:
    """What each cached binary must have been built from; a mismatch rebuilds that tool."""
    versions = {name: f"k8s.io/kubernetes@{K8S_VERSION}" for name in K8S_COMMANDS}
    versions["helm"] = f"helm.sh/helm/v3@{HELM_VERSION}"
    versions["kind"] = f"sigs.k8s.io/kind@{KIND_VERSION}"
    return versions


def _built_versions() -> dict[str, str]:
    try:
        loaded = json.loads((bin_dir() / _STAMP).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def missing_tools() -> list[str]:
    """Tools whose binary is absent or was built from another version than the pinned one."""
    built = _built_versions()
    return [
        name
        for name, version in wanted_versions().items()
        if built.get(name) != version or not os.access(bin_dir() / name, os.X_OK)
    ]


def find_etcd() -> Path | None:
    for candidate in (*ETCD_CANDIDATES, shutil.which("etcd")):
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def _record_built(name: str) -> None:
    built = _built_versions()
    built[name] = wanted_versions()[name]
    stamp = bin_dir() / _STAMP
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(json.dumps(built, indent=2, sort_keys=True) + "\n")
    tmp.replace(stamp)


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    # Static binaries like the upstream release builds; never fetch another Go toolchain (only
    # the module proxy is reachable); -mod=mod lets go.sum be completed in the throwaway module.
    env.update(CGO_ENABLED="0", GOTOOLCHAIN="local", GOFLAGS="-mod=mod -buildvcs=false")
    return env


def _run(args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env or _go_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-60:])
        raise KubeBuildError(f"{' '.join(args)} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise KubeBuildError("the Go toolchain (`go`) is needed to build the k8s test binaries")
    return go


@dataclass(frozen=True)
class _ModuleInfo:
    version: str
    go_mod: Path
    time: str


def _download(module: str, version: str) -> _ModuleInfo:
    out = json.loads(_run([_go(), "mod", "download", "-json", f"{module}@{version}"], cwd=Path(tempfile.gettempdir())))
    if out.get("Error"):
        raise KubeBuildError(f"go mod download {module}@{version}: {out['Error']}")
    info = json.loads(Path(out["Info"]).read_text())
    return _ModuleInfo(version=out["Version"], go_mod=Path(out["GoMod"]), time=str(info.get("Time", "")))


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The ``k8s.io/...`` modules that k8s.io/kubernetes' go.mod replaces by ./staging paths."""
    return sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", kubernetes_go_mod, re.MULTILINE)))


def _directive(go_mod: str, name: str) -> str | None:
    match = re.search(rf"^{name}\s+(\S.*)$", go_mod, re.MULTILINE)
    return match.group(1).strip() if match else None


def throwaway_go_mod(kubernetes_go_mod: str, version: str) -> str:
    """go.mod of a module that can build k8s.io/kubernetes' commands at ``version`` (v1.X.Y):
    each staging module is replaced by its published v0.X.Y, and the commands are its tools."""
    staging_version = "v0." + version.removeprefix("v1.")
    lines = ["module riverlog.dev/k8s-test-tools", ""]
    lines.append(f"go {_directive(kubernetes_go_mod, 'go') or '1.22'}")
    # Keep upstream's GODEBUG defaults: they are part of how its binaries behave.
    godebug = _directive(kubernetes_go_mod, "godebug")
    if godebug:
        lines.append(f"godebug {godebug}")
    lines += ["", f"require k8s.io/kubernetes {version}", "", "replace ("]
    lines += [f"\t{module} => {module} {staging_version}" for module in staging_modules(kubernetes_go_mod)]
    lines += [")", "", "tool ("]
    lines += [f"\tk8s.io/kubernetes/cmd/{name}" for name in K8S_COMMANDS]
    lines += [")", ""]
    return "\n".join(lines)


def _k8s_ldflags(version: str, released: str) -> str:
    major, minor = version.removeprefix("v").split(".")[:2]
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        # The release's publication time on the proxy: reproducible, unlike the build time.
        "buildDate": released or "1970-01-01T00:00:00Z",
    }
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return " ".join(flags)


def _timed(log: Log, what: str, step: Callable[[], object]) -> None:
    log(f"{what} ...")
    start = time.monotonic()
    step()
    log(f"{what}: done in {time.monotonic() - start:.0f} s")


def _build_k8s(names: list[str], log: Log) -> None:
    module = _download("k8s.io/kubernetes", K8S_VERSION)
    src = cache_dir() / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text(throwaway_go_mod(module.go_mod.read_text(), K8S_VERSION))
    _timed(log, f"resolving k8s.io/kubernetes {K8S_VERSION} dependencies (go mod tidy)",
           lambda: _run([_go(), "mod", "tidy"], cwd=src))
    ldflags = _k8s_ldflags(K8S_VERSION, module.time)
    for name in names:
        _timed(log, f"building {name} {K8S_VERSION}",
               functools.partial(_go_build, src, f"k8s.io/kubernetes/cmd/{name}", name, ldflags))


def _go_build(cwd: Path, package: str, name: str, ldflags: str) -> None:
    # Build next to the target and rename, so an interrupted build never leaves half a binary.
    partial = bin_dir() / f".{name}.partial"
    _run([_go(), "build", "-trimpath", "-ldflags", ldflags, "-o", str(partial), package], cwd=cwd)
    partial.replace(bin_dir() / name)
    _record_built(name)


def _go_install(package: str, version: str, name: str, ldflags: str) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache_dir()))
    try:
        env = _go_env()
        env["GOBIN"] = str(scratch)
        # `go install pkg@version` builds outside any module, as the module's own go.mod says.
        env["GOFLAGS"] = "-buildvcs=false"
        _run([_go(), "install", "-trimpath", "-ldflags", ldflags, f"{package}@{version}"],
             cwd=scratch, env=env)
        built = next(p for p in scratch.iterdir() if p.is_file())
        built.replace(bin_dir() / name)
        _record_built(name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def helm_ldflags(helm_go_mod: str, version: str) -> str:
    """Helm's own release flags: its version, and the Kubernetes version that `helm template`
    and `helm lint` assume without a cluster (the client-go minor it was built against; the
    source default is 1.20, which charts with a kubeVersion constraint would fail)."""
    match = re.search(r"^\s*k8s\.io/client-go\s+v0\.(\d+)\.", helm_go_mod, re.MULTILINE)
    flags = ["-s", "-w", f"-X helm.sh/helm/v3/internal/version.version={version}",
             "-X helm.sh/helm/v3/internal/version.gitTreeState=clean"]
    if match:
        for package in ("helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/lint/rules"):
            flags += [f"-X {package}.k8sVersionMajor=1", f"-X {package}.k8sVersionMinor={match.group(1)}"]
    return " ".join(flags)


def _build_helm(log: Log) -> None:
    module = _download("helm.sh/helm/v3", HELM_VERSION)
    ldflags = helm_ldflags(module.go_mod.read_text(), HELM_VERSION)
    _timed(log, f"building helm {HELM_VERSION}",
           lambda: _go_install("helm.sh/helm/v3/cmd/helm", HELM_VERSION, "helm", ldflags))


def _build_kind(log: Log) -> None:
    _timed(log, f"building kind {KIND_VERSION}",
           lambda: _go_install("sigs.k8s.io/kind", KIND_VERSION, "kind", "-s -w"))


def _link_etcd() -> None:
    etcd = find_etcd()
    if etcd is None:
        raise KubeBuildError(
            "etcd is missing: install Debian's etcd-server package (`make system-deps`, or "
            "`apt-get install etcd-server`)"
        )
    link = bin_dir() / "etcd"
    if link.is_symlink() and Path(os.readlink(link)) == etcd:
        return
    tmp = bin_dir() / ".etcd.link"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(etcd)
    tmp.replace(link)


def ensure(log: Log = _stderr_log) -> Path:
    """Build whatever is missing and return the directory holding every tool (quick when cached)."""
    if not missing_tools() and (bin_dir() / "etcd").exists():
        return bin_dir()
    with _locked():
        bin_dir().mkdir(parents=True, exist_ok=True)
        todo = missing_tools()
        if todo:
            log(f"building {', '.join(todo)} into {bin_dir()} (Go builds take minutes when cold)")
            start = time.monotonic()
            k8s = [name for name in K8S_COMMANDS if name in todo]
            if k8s:
                _build_k8s(k8s, log)
            if "helm" in todo:
                _build_helm(log)
            if "kind" in todo:
                _build_kind(log)
            log(f"all built in {time.monotonic() - start:.0f} s")
        _link_etcd()
    return bin_dir()


def main() -> int:
    try:
        path = ensure()
    except KubeBuildError as exc:
        _stderr_log(str(exc))
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
