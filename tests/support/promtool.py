"""Prometheus' ``promtool``, to check and unit-test the chart's alerting rules.

It comes from Debian's ``prometheus`` package, but installing that package would also install
(and, where an init system runs, start) a Prometheus server. So the package is only downloaded
(``apt-get download``) and ``promtool`` extracted from it into a cache outside the repository,
``${XDG_CACHE_HOME:-$HOME/.cache}/riverlog/promtool/<package version>/promtool``; warm runs find it
there. ``python tests/support/promtool.py`` installs it (``make k8s-deps`` does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "prometheus"


class PromtoolError(RuntimeError):
    pass


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "riverlog" / "promtool"


def _candidate_version() -> str:
    """The package version apt would fetch (so a Debian update gives a new cache entry)."""
    out = subprocess.run(["apt-cache", "policy", PACKAGE], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "Candidate" and value.strip() not in ("", "(none)"):
            return value.strip()
    return ""


def _download(workdir: Path) -> Path:
    def fetch() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["apt-get", "download", PACKAGE], cwd=workdir, capture_output=True, text=True,
                              check=False)

    proc = fetch()
    if proc.returncode != 0:
        # A fresh machine may have no package lists yet.
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True, check=False)
        proc = fetch()
    debs = sorted(workdir.glob(f"{PACKAGE}_*.deb"))
    if proc.returncode != 0 or not debs:
        raise PromtoolError(f"apt-get download {PACKAGE} failed: {proc.stderr.strip()}")
    return debs[0]


def ensure() -> Path:
    """The path of a working promtool, downloading and extracting it on first use."""
    cached = sorted(_cache_root().glob("*/promtool"))
    version = _candidate_version()
    if version:
        wanted = _cache_root() / version.replace(":", "_").replace("/", "_") / "promtool"
        if os.access(wanted, os.X_OK):
            return wanted
    elif cached:
        return cached[-1]  # no apt metadata (offline): any cached one will do
    with tempfile.TemporaryDirectory(prefix="riverlog-promtool-") as tmp:
        workdir = Path(tmp)
        deb = _download(workdir)
        version = version or deb.name.split("_")[1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(workdir / "root")], check=True)
        binary = workdir / "root" / "usr" / "bin" / "promtool"
        if not binary.exists():
            raise PromtoolError(f"{deb.name} holds no usr/bin/promtool")
        target = _cache_root() / version.replace(":", "_").replace("/", "_") / "promtool"
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copy2(binary, partial)
        partial.chmod(0o755)
        partial.replace(target)  # atomic: a concurrent run sees the whole file or none
        return target


if __name__ == "__main__":
    print(ensure())
    sys.exit(0)
