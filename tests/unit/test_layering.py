"""The broker package's import graph: layered, one-way, without circles.

Every ``import`` and ``from ... import`` in ``broker_image/riverlog`` is read with ``ast``
(imports under ``if TYPE_CHECKING:`` count too: a type-only circle is still a circle a reader must
untangle). Three rules keep the package easy to move around in:

1. No circle between modules.
2. A module imports only from its own layer or the layers below (``LAYERS``, bottom first): codecs
   and settings at the bottom, the node assemblies (``broker``, ``controller_node``) and the CLI on
   top. Handlers, for example, see the broker only through ``handlers/host.py``.
3. Inside ``controller/``, the Raft core and the pure decisions never import the quorum's I/O, and
   the codecs (``protocol/``) and the Raft core import no I/O modules at all.
4. Inside the package, imports are relative.

``docs/design-notes.md`` draws the same layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "broker_image" / "riverlog"
ROOT = "riverlog"

# Bottom first. A module's layer is that of its top-level component (``riverlog.<component>...``).
LAYERS: list[set[str]] = [
    {"clock", "config", "config_refusals", "protocol", "topic_config", "group_config"},  # pure data: codecs,
    # settings, time
    {"storage", "client", "metrics", "security", "quotas"},  # the log on disk; the Kafka client; Prometheus;
    # TLS and SASL; client quota rates
    {"server"},  # listeners, connections, request dispatch
    {"controller"},  # metadata: records, image, decisions, Raft, the quorum
    {"cluster"},  # partitions and replication, following the metadata image
    # consumer groups, transactions, share groups' state (share partitions, the share coordinator), their shared shell
    {"coordinator", "transactions", "share", "coordinator_runtime"},
    {"handlers"},  # one module per API family, bound to a host (handlers/host.py)
    {"schema_registry"},  # the schema registry (issue #20): a Kafka client of the cluster, servable in a broker
    {"broker", "controller_node", "devcluster"},  # the nodes, assembled
    {"cli", "__main__"},  # the command line
]

# Inside controller/: the pure parts below, the quorum (asyncio, sockets, files) on top.
CONTROLLER_LAYERS: list[set[str]] = [
    {"raft", "topic_names"},  # the pure Raft state machine; names of special topics
    {"records", "image", "placement", "topic_ops", "partition_ops", "reassignment", "leader_balance",
     "features", "scram", "acls", "client_quotas", "group_config_ops", "snapshot", "api"},
    {"local"},
    {"quorum"},
]

IO_MODULES = {"asyncio", "socket", "select", "selectors", "threading", "subprocess", "os", "shutil",
              "aiohttp", "uvloop", "time"}
PURE_PACKAGES = ("riverlog.protocol", "riverlog.controller.raft")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}


def imports_of(name: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import of ``name``, resolved to modules of the package
    where they are ours (``from .x import y`` names the submodule ``x.y`` if there is one, else the
    module ``x``), or to the top-level name for anything else."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in MODULES else target), node.lineno


def internal_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for name in MODULES:
        for target, _ in imports_of(name):
            if target in MODULES and target != name:
                edges[name].add(target)
    return edges


def component(name: str, depth: int = 1) -> str:
    parts = name.split(".")
    return parts[depth] if len(parts) > depth else ""


def layer_of(name: str, layers: list[set[str]], depth: int = 1) -> int:
    comp = component(name, depth)
    for index, members in enumerate(layers):
        if comp in members:
            return index
    raise AssertionError(f"{name}: component {comp!r} is in no layer; add it to the layer table of {__name__}")


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (the package has a few hundred modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    found.append(sorted(members))
    return found


def test_the_package_is_found() -> None:
    # The rules below would pass vacuously on an empty walk.
    assert len(MODULES) > 100 and "riverlog.broker" in MODULES and "riverlog.handlers.host" in MODULES


def test_no_import_circles() -> None:
    circles = [c for c in strongly_connected(internal_edges()) if len(c) > 1]
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_every_module_sits_in_a_layer() -> None:
    for name in MODULES:
        if name != ROOT:
            layer_of(name, LAYERS)


def test_no_import_reaches_a_higher_layer() -> None:
    upward = []
    for name in sorted(MODULES):
        if name == ROOT:
            continue
        own = layer_of(name, LAYERS)
        for target, line in imports_of(name):
            if target in MODULES and target != ROOT and layer_of(target, LAYERS) > own:
                upward.append(f"{MODULES[name].relative_to(PACKAGE_DIR.parent)}:{line} imports {target}")
    assert upward == [], "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_controller_parts_import_downwards_only() -> None:
    upward = []
    for name in sorted(MODULES):
        if not name.startswith("riverlog.controller.") or name.count(".") < 2:
            continue
        own = layer_of(name, CONTROLLER_LAYERS, depth=2)
        for target, line in imports_of(name):
            if target.startswith("riverlog.controller.") and layer_of(target, CONTROLLER_LAYERS, depth=2) > own:
                upward.append(f"{MODULES[name].relative_to(PACKAGE_DIR.parent)}:{line} imports {target}")
    assert upward == [], "controller parts importing upwards:\n" + "\n".join(upward)


@pytest.mark.parametrize("package", PURE_PACKAGES)
def test_codecs_and_the_raft_core_do_no_io(package: str) -> None:
    def io_or_outside(target: str) -> bool:
        # An I/O module, or a part of the package other than itself and the codecs (which carry
        # no I/O either).
        if target.split(".")[0] in IO_MODULES:
            return True
        return target.startswith(ROOT + ".") and not target.startswith((package, "riverlog.protocol"))

    found = [f"{MODULES[name].relative_to(PACKAGE_DIR.parent)}:{line} imports {target}"
             for name in sorted(MODULES) if name == package or name.startswith(package + ".")
             for target, line in imports_of(name) if io_or_outside(target)]
    assert found == [], f"{package} must stay free of I/O:\n" + "\n".join(found)


def test_the_package_imports_itself_relatively() -> None:
    # One spelling for one module: relative inside the package, as everywhere else in it.
    absolute = []
    for path in sorted(MODULES.values()):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(ROOT):
                absolute.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{node.lineno} from {node.module}")
            elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == ROOT for a in node.names):
                absolute.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{node.lineno} import riverlog")
    assert absolute == [], "absolute imports of the package from inside it:\n" + "\n".join(absolute)


def test_the_rules_catch_a_circle_and_an_upward_import() -> None:
    # The checker itself on a made-up graph: a circle is found, a chain is not.
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"], ["d"]]
    assert all(len(c) == 1 for c in strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}))
    assert layer_of("riverlog.handlers.fetch", LAYERS) > layer_of("riverlog.cluster.partition", LAYERS)
    assert layer_of("riverlog.controller.quorum.driver", CONTROLLER_LAYERS, depth=2) > \
        layer_of("riverlog.controller.raft.node", CONTROLLER_LAYERS, depth=2)
