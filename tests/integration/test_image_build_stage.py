"""The Dockerfile's build stage, run without Docker: its COPYs (through .dockerignore) into a
scratch directory standing in for /opt/riverlog, then its RUN, the shared install step. The
entrypoints the image and the chart use must then work from that tree alone."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from test_dockerfile import DOCKERFILE, ROOT, parse_dockerfile

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

IMAGE_ROOT = "/opt/riverlog"


def test_build_stage_installs_working_entrypoints(tmp_path: Path) -> None:
    _, stages = parse_dockerfile(DOCKERFILE.read_text())
    build = stages[0]
    workdir = build.all("WORKDIR")[-1]
    assert workdir == IMAGE_ROOT
    root = tmp_path / "opt-riverlog"
    root.mkdir()
    for copy in build.all("COPY"):
        *sources, dest = copy.split()
        for source in sources:
            target = root / dest if not dest.endswith("/") else root / dest / Path(source).name
            if dest == "./":
                target = root / Path(source).name
            src = ROOT / source
            target.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
            else:
                shutil.copy2(src, target)
    (run,) = build.all("RUN")
    args = [arg.replace(IMAGE_ROOT, str(root)) for arg in shlex.split(run)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=540, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    bin_dir = root / "venv" / "bin"
    # The packages come from the copied tree, not from this checkout.
    located = subprocess.run(
        [str(bin_dir / "python"), "-c", "import riverlog, riverlog_operator; print(riverlog.__file__); "
                                        "print(riverlog_operator.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(path.startswith(str(root)) for path in located), located
    # ENTRYPOINT riverlog (CMD broker), the operator as the chart runs it, the broker pods' entrypoint.
    for command in (["riverlog", "broker", "--help"], ["riverlog-operator", "--help"],
                    ["python", "-m", "riverlog_operator", "--help"], ["riverlog-k8s-broker", "--help"]):
        result = subprocess.run([str(bin_dir / command[0]), *command[1:]], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, (command, result.stdout, result.stderr)
    # The test extras stay out of the image.
    assert not (bin_dir / "pytest").exists()
