"""The Dockerfile's build stage, run without Docker (no engine runs here): its COPYs, through
.dockerignore's allow-list, into a scratch directory standing in for /opt/riverlog, then its RUN
(scripts/install.sh, the install step CI runs too). Tests run the image's entrypoints, and the
operator against the test API server, from the tree this makes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
IMAGE_ROOT = "/opt/riverlog"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction]

    def all(self, keyword: str) -> list[str]:
        return [i.args for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # comments may also sit inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        raise ValueError("the Dockerfile ends inside a continued line")
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "FROM":
            parts = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), parts[0])
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base, name, []))
        elif not stages:
            if keyword != "ARG":
                raise ValueError(f"{keyword} before the first FROM")
            key, _, value = rest.partition("=")
            args[key] = value
        else:
            stages[-1].instructions.append(Instruction(keyword, rest))
    return args, stages


def clean_env() -> dict[str, str]:
    """The environment without this test run's virtualenv or import paths."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}


def build_stage(dest: Path) -> Path:
    """Run the build stage into ``dest`` (standing for /opt/riverlog); returns ``dest``."""
    _, stages = parse_dockerfile(DOCKERFILE.read_text())
    build = stages[0]
    if build.all("WORKDIR")[-1] != IMAGE_ROOT:
        raise ValueError(f"the build stage does not work in {IMAGE_ROOT}")
    dest.mkdir(parents=True, exist_ok=True)
    for copy in build.all("COPY"):
        *sources, target = copy.split()
        for source in sources:
            src = ROOT / source
            if target == "./":
                to = dest / Path(source).name
            elif target.endswith("/"):
                to = dest / target / Path(source).name
            else:
                to = dest / target
            to.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, to, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
            else:
                shutil.copy2(src, to)
    for run in build.all("RUN"):
        args = [arg.replace(IMAGE_ROOT, str(dest)) for arg in shlex.split(run)]
        proc = subprocess.run(args, cwd=dest, env=clean_env(), capture_output=True, text=True, timeout=540,
                              check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"RUN {run} failed:\n{proc.stdout}\n{proc.stderr}")
    return dest
