"""The runnable steps of a guide in ``docs/`` (issue #19: docs/migration.md runs as a test).

A step is either a shell block, fenced as ```` ```sh {step=NAME} ```` (``{step=NAME background}``
for a process that keeps running, such as a Connect worker), or an application step, the HTML
comment ``<!-- app-step: NAME -->``, where the reader changes their own applications and a test
plays them. :func:`guide_steps` returns them in the page's order; a malformed marker is an error,
so that a typo cannot silently drop a step from the test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SHELL, APP = "shell", "app"
_FENCE = re.compile(r"^```sh \{step=([a-z0-9-]+)((?: [a-z]+)*)\}\s*$")
_APP = re.compile(r"^<!-- app-step: ([a-z0-9-]+) -->\s*$")
_ATTRIBUTES = {"background"}


class GuideError(ValueError):
    pass


@dataclass(frozen=True)
class GuideStep:
    name: str
    kind: str  # SHELL or APP
    script: str = ""
    background: bool = False
    line: int = 0  # where the step starts in the page, from 1


def guide_steps(text: str) -> list[GuideStep]:
    steps: list[GuideStep] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        fence, app = _FENCE.match(line), _APP.match(line)
        looks_like_marker = (line.startswith("```") and "step=" in line) or line.startswith("<!-- app-step")
        if looks_like_marker and not (fence or app):
            raise GuideError(f"line {i + 1}: a step marker this parser cannot read: {line!r}")
        if app:
            steps.append(GuideStep(app.group(1), APP, line=i + 1))
        elif fence:
            attributes = set(fence.group(2).split())
            if attributes - _ATTRIBUTES:
                raise GuideError(f"line {i + 1}: unknown step attribute(s) {sorted(attributes - _ATTRIBUTES)}")
            end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
            if end is None:
                raise GuideError(f"line {i + 1}: step {fence.group(1)!r} has no closing fence")
            script = "\n".join(lines[i + 1:end]) + "\n"
            steps.append(GuideStep(fence.group(1), SHELL, script, "background" in attributes, i + 1))
            i = end
        i += 1
    names = [s.name for s in steps]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise GuideError(f"step names used twice: {repeated}")
    return steps
