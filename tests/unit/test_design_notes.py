"""``docs/design-notes.md``'s module map matches the broker package: every module is named in the
row of its package (or a row of its own), and every row names a package or module that exists.
The notes are the architecture as built; a module added or moved without them fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO / "broker_image" / "riverlog"
NOTES = REPO / "docs" / "design-notes.md"
# One module per Kafka API, named in the map by pattern (``messages/<api>.py``).
BY_PATTERN = ("protocol", "messages")


def module_rows() -> dict[str, str]:
    """First cell of each row of the "Modules" table -> the rest of the row."""
    text = NOTES.read_text()
    section = text[text.index("### Modules"):]
    section = section[: section.index("\n## ")]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        match = re.match(r"^\| (.+?) \| (.*) \|$", line)
        if match and match.group(1) not in ("module", "---"):
            rows[match.group(1)] = match.group(2)
    return rows


def named(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_map_is_found() -> None:
    rows = module_rows()
    assert len(rows) > 10 and "`storage/`" in rows


def test_every_module_is_named_in_its_packages_row() -> None:
    rows = module_rows()
    top_level = {name for key in rows for name in named(key) if not name.endswith("/")}
    missing = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR)
        if path.name == "__init__.py" or rel.parts[:2] == BY_PATTERN:
            continue
        if len(rel.parts) == 1:
            if path.name not in top_level:
                missing.append(str(rel))
            continue
        # The deepest package with a row of its own, e.g. controller/quorum/ before controller/.
        packages = ["/".join(rel.parts[:depth]) + "/" for depth in range(len(rel.parts) - 1, 0, -1)]
        row = next((rows[f"`{p}`"] for p in packages if f"`{p}`" in rows), None)
        if row is None or f"`{path.name}`" not in row:
            missing.append(str(rel))
    assert missing == [], "modules the design notes' module map does not name:\n" + "\n".join(missing)


def test_every_row_names_something_that_exists() -> None:
    gone = []
    for key in module_rows():
        for name in named(key):
            if not (PACKAGE_DIR / name).exists():
                gone.append(name)
    assert gone == [], "rows of the module map for what is not in the tree: " + ", ".join(gone)
