"""The packages import in one direction (docs/architecture.md).

Read from the sources with ``ast`` (every import: top-level, inside functions, and under
``TYPE_CHECKING``): storage never imports the recorder; the shared ground (the modules of
``storage/`` itself) imports no subpackage; a subpackage imports the shared ground, itself,
and the siblings its ``__init__`` names after "May import:"; and no modules of either
package import each other in a circle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import REPO

STORAGE, RECORDER = REPO / "storage", REPO / "recorder"


def module_name(root: Path, package: str, path: Path) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(root: Path, package: str, path: Path) -> Iterator[str]:
    """Every sessiontape module ``path`` imports (a ``from P import m`` may name a module)."""
    me = module_name(root, package, path)
    here = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("sessiontape"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.startswith("sessiontape"):
                yield source
                yield from (f"{source}.{a.name}" for a in node.names)


def graph(root: Path, package: str) -> dict[str, set[str]]:
    modules = {module_name(root, package, p): p for p in root.rglob("*.py")}
    return {name: {m for m in imported(root, package, path) if m in modules and m != name}
            for name, path in modules.items()}


STORAGE_GRAPH = graph(STORAGE, "sessiontape.storage")
RECORDER_GRAPH = graph(RECORDER, "sessiontape")
SUBPACKAGES = sorted(p.name for p in STORAGE.iterdir() if (p / "__init__.py").exists())


def subpackage(module: str) -> str | None:
    """``agentuse`` for ``sessiontape.storage.agentuse.reader``; None for the shared ground."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in SUBPACKAGES else None


def allowed_siblings(package: str) -> set[str]:
    """The names after "May import:" in the subpackage's docstring (its first sentence)."""
    doc = ast.get_docstring(ast.parse((STORAGE / package / "__init__.py").read_text())) or ""
    said = re.search(r"May import: (.*?)\.(\s|$)", doc, re.S)
    assert said, f"storage/{package}/__init__.py does not say what it may import"
    assert said[1].startswith("the shared ground"), said[1]
    return set(re.findall(r"``([\w.]+)``", said[1]))


def test_there_are_the_subpackages_the_docs_name() -> None:
    assert SUBPACKAGES == ["agentuse", "backends", "catalog", "exports", "skillet"]


def test_storage_never_imports_the_recorder() -> None:
    for path in STORAGE.rglob("*.py"):
        outside = [m for m in imported(STORAGE, "sessiontape.storage", path)
                   if not m.startswith("sessiontape.storage")]
        assert outside == [], path


def test_the_shared_ground_imports_no_subpackage() -> None:
    for module, targets in STORAGE_GRAPH.items():
        if subpackage(module) is None and module != "sessiontape.storage":  # the facade
            assert {t for t in targets if subpackage(t)} == set(), module


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_a_subpackage_imports_the_ground_itself_and_the_siblings_it_names(package: str) -> None:
    allowed = allowed_siblings(package)
    for module, targets in STORAGE_GRAPH.items():
        if subpackage(module) != package:
            continue
        for target in targets:
            sibling = subpackage(target)
            if sibling in (None, package):
                continue
            short = target.removeprefix("sessiontape.storage.")
            assert sibling in allowed or short in allowed, f"{module} imports {target}"


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``edges``, or None (a depth-first search)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def without_facades(edges: dict[str, set[str]], facades: set[str]) -> dict[str, set[str]]:
    """The package ``__init__``s that only re-export (lazily) are not part of a circle."""
    return {m: t - facades for m, t in edges.items() if m not in facades}


@pytest.mark.parametrize("edges, facades", [
    (STORAGE_GRAPH, {"sessiontape.storage", *(f"sessiontape.storage.{p}" for p in SUBPACKAGES)}),
    (RECORDER_GRAPH, {"sessiontape"}),
], ids=["storage", "recorder"])
def test_no_modules_import_each_other_in_a_circle(edges: dict[str, set[str]],
                                                  facades: set[str]) -> None:
    assert cycle(without_facades(edges, facades)) is None


def test_the_circle_finder_finds_a_circle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
