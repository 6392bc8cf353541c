"""docs/migration.md's runnable steps (issue #19, acceptance 4): how they are found, and that the
page's own steps are well formed: bash parses every block, and every ``riverlog`` command in
them is one the CLI's parser accepts (the cluster tier runs them: tests/cluster/test_migration_guide.py)."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest
from riverlog.cli.main import build_parser
from support.brokers import REPO_ROOT
from support.guide_steps import APP, SHELL, GuideError, guide_steps

pytestmark = pytest.mark.unit

GUIDE = REPO_ROOT / "docs" / "migration.md"


def test_steps_are_found_in_page_order() -> None:
    text = "\n".join([
        "# Guide", "", "```sh {step=one}", "echo 1", "echo 2", "```", "prose",
        "<!-- app-step: move-things -->", "```sh {step=two background}", "sleep 9", "```",
        "```sh", "not a step", "```",
    ])
    steps = guide_steps(text)
    assert [(s.name, s.kind, s.background, s.line) for s in steps] == [
        ("one", SHELL, False, 3), ("move-things", APP, False, 8), ("two", SHELL, True, 9)]
    assert steps[0].script == "echo 1\necho 2\n"


@pytest.mark.parametrize(("text", "error"), [
    ("```sh {step=one}\necho\n", "no closing fence"),
    ("```sh {step=one}\n```\n```sh {step=one}\n```", "used twice"),
    ("```sh {step=one later}\n```", "unknown step attribute"),
    ("```bash {step=one}\n```", "cannot read"),
    ("<!-- app-step: Move -->", "cannot read"),
])
def test_malformed_markers_are_errors(text: str, error: str) -> None:
    with pytest.raises(GuideError, match=error):
        guide_steps(text)


def test_the_migration_guide_steps_parse() -> None:
    steps = guide_steps(GUIDE.read_text())
    names = [s.name for s in steps]
    assert names == ["worker-config", "connect-worker", "mirror-start", "wait-caught-up", "stop-kafka-consumers",
                     "check-offsets", "start-riverlog-consumers", "move-producers", "drain", "verify", "mirror-stop"]
    assert [s.name for s in steps if s.background] == ["connect-worker"]
    parser = build_parser()
    for step in steps:
        if step.kind != SHELL:
            continue
        result = subprocess.run(["bash", "-n"], input=step.script, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, f"step {step.name}: {result.stderr}"
        # Each riverlog command, its line continuations joined and variables given a value
        # (their default, or 1), as the CLI parses it.
        script = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", step.script.replace("\\\n", " "))
        for command in re.sub(r"\$\w+", "1", script).splitlines():
            words = shlex.split(command)
            if words and words[0] == "riverlog":
                parser.parse_args(words[1:])
    assert any(s.kind == APP for s in steps)
