"""The Dockerfile's build stage, run without Docker (support/image_stage.py): the entrypoints
the image and the chart use must work from the tree it makes alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.image_stage import build_stage, clean_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_build_stage_installs_working_entrypoints(tmp_path: Path) -> None:
    root = build_stage(tmp_path / "opt-riverlog")
    bin_dir = root / "venv" / "bin"
    env = clean_env()
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
