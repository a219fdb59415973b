"""One import name: the wheel installs `sessiontape` and nothing else at the top level.

The repository keeps the folders `recorder/` and `storage/`; pyproject.toml maps them
to `sessiontape` and `sessiontape.storage`. These tests build the real wheel, install it
(without dependencies) into a directory of its own and import from it in a subprocess
whose working directory is not the checkout, so the folders' own names cannot leak in.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from harness import REPO

from sessiontape.storage.version import __version__

FOLDERS = {"recorder": "sessiontape", "storage": "sessiontape/storage"}
OLD_NAMES = ("recorder", "storage")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from a copy of this checkout's sources (a build in the
    checkout itself would share its `build/` directory with any other build), with the
    environment's setuptools (the test extra): an isolated build would download setuptools
    from PyPI every time."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("sessiontape-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed (no dependencies) into a target directory of its own."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                           "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return target


def run_installed(target: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A Python process that finds sessiontape in `target` first (the dependencies come
    from this environment), started outside the checkout."""
    env = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env)


def test_the_wheel_holds_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"sessiontape", f"sessiontape-{__version__}.dist-info"}
    assert "sessiontape/py.typed" in names


def test_every_source_file_is_in_the_wheel(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"{package}/{path.relative_to(REPO / folder).as_posix()}"
                for folder, package in FOLDERS.items()
                for path in (REPO / folder).rglob("*.py") if "__pycache__" not in path.parts}
    assert len(expected) > 40
    assert expected <= names, sorted(expected - names)


def test_the_console_script_points_into_sessiontape(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(f"sessiontape-{__version__}.dist-info/entry_points.txt")
    assert "sessiontape = sessiontape.cli:main" in entry_points.decode()


def test_the_wheel_is_mit_licensed_with_its_license_file(wheel: Path) -> None:
    """The metadata says MIT (an SPDX expression) and names the license file, which the
    wheel carries as the checkout has it."""
    dist_info = f"sessiontape-{__version__}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        headers = archive.read(f"{dist_info}/METADATA").decode().split("\n\n", 1)[0]
        license_text = archive.read(f"{dist_info}/licenses/LICENSE").decode()
    assert {"License-Expression: MIT", "License-File: LICENSE"} <= set(headers.splitlines())
    assert license_text == (REPO / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License\n\nCopyright (c) 2026 the sessiontape authors\n")


def test_the_wheel_is_the_changelogs_newest_release(wheel: Path) -> None:
    """The wheel's version is CHANGELOG.md's newest release (its first numbered heading;
    `Unreleased` comes before it)."""
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    assert changelog.index("## [Unreleased]") < changelog.index(f"## [{releases[0]}]")
    with zipfile.ZipFile(wheel) as archive:
        headers = archive.read(f"sessiontape-{__version__}.dist-info/METADATA").decode()
    assert f"Version: {releases[0]}" in headers.split("\n\n", 1)[0].splitlines()
    assert wheel.name.startswith(f"sessiontape-{releases[0]}-")


@pytest.mark.slow
def test_the_installed_wheel_imports_and_runs(installed: Path, tmp_path: Path) -> None:
    probe = (
        "import sys, sessiontape, sessiontape.storage as storage\n"
        "from sessiontape import Recorder, RecorderError, Price, PriceTable, DEFAULT_PRICES\n"
        "from sessiontape.storage import ItemStore, ReplayLog, load_session\n"
        "print(sessiontape.__file__); print(storage.__file__)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('recorder', 'storage')))\n"
    )
    done = run_installed(installed, "-c", probe, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    package_file, storage_file, old = done.stdout.splitlines()
    assert Path(package_file) == installed / "sessiontape" / "__init__.py"
    assert Path(storage_file) == installed / "sessiontape" / "storage" / "__init__.py"
    assert old == "[]"

    module = run_installed(installed, "-m", "sessiontape", "--version", cwd=tmp_path)
    assert module.returncode == 0, module.stderr
    assert module.stdout.strip() == f"sessiontape {__version__}"

    script = installed / "bin" / "sessiontape"
    paths = run_installed(installed, str(script), "paths", "--json", cwd=tmp_path)
    assert paths.returncode == 0, paths.stderr
    assert '"agentuse_root"' in paths.stdout


def test_the_old_names_do_not_import_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    for old in OLD_NAMES:
        done = run_installed(installed, "-c", f"import {old}", cwd=tmp_path)
        assert done.returncode == 1
        assert f"No module named '{old}'" in done.stderr


def python_files() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    return [REPO / name for name in tracked]


def test_no_code_imports_the_folder_names() -> None:
    """Run from the checkout, `import storage` would still find the folder: forbid it."""
    offenders = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            offenders += [f"{path.relative_to(REPO)}:{node.lineno} {module}" for module in modules
                          if module.split(".")[0] in OLD_NAMES]
    assert offenders == []


def documented_imports() -> list[str]:
    """Every `from sessiontape... import ...` statement in the README's and docs' code."""
    statements = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S):
            for node in ast.parse(block).body if _parses(block) else _import_lines(block):
                module = node.module if isinstance(node, ast.ImportFrom) else None
                if module and module.startswith("sessiontape"):
                    statements.append(ast.unparse(node))
    return statements


def _parses(block: str) -> bool:
    try:
        ast.parse(block)
    except SyntaxError:
        return False
    return True


def _import_lines(block: str) -> list[ast.stmt]:
    """The import statements of a block that is not Python as a whole (`await` at top level,
    signatures written as calls): each parenthesised `from ... import (...)` read whole."""
    found = re.findall(r"^from [\w.]+ import (?:\([^)]*\)|.*)$", block, re.M)
    return [ast.parse(statement).body[0] for statement in found]


def documented_names() -> list[tuple[str, list[str], str]]:
    """(section, modules, name) for each name written as `name`, `name(...)` or
    `Class.method(...)` or `sessiontape.module.name(...)` in a section of docs/api.md headed
    `## Title — `module`, ...`."""
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    found = []
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        modules = re.findall(r"`(sessiontape[\w.]*)`", title)
        if not modules:
            continue
        prose = re.sub(r"```.*?```", "", body, flags=re.S)
        for span in re.findall(r"`([^`]+)`", prose):
            match = re.fullmatch(r"(sessiontape[\w.]*\.)?(?:([A-Z]\w*)\.\w+(?=\()|([A-Za-z_]\w*))"
                                 r"(\(.*\))?( -> .*)?", span, re.S)
            if match is None or match.group(3) in {"None", "True", "False"}:
                continue
            qualified = (match.group(1) or "").rstrip(".")
            found.append((title, [qualified] if qualified else modules,
                          match.group(2) or match.group(3)))
    return found


def test_every_documented_import_works_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    statements = documented_imports()
    assert len(statements) >= 8
    assert any("import Recorder" in statement for statement in statements)
    done = run_installed(installed, "-c", "\n".join(statements), cwd=tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_every_name_docs_api_lists_is_importable(installed: Path, tmp_path: Path) -> None:
    """A name in a section of docs/api.md is an attribute of that section's modules, of the
    package itself or a builtin (an exception it raises)."""
    names = documented_names()
    assert len(names) >= 20
    checks = [f"assert any(hasattr(importlib.import_module(m), {name!r}) for m in {modules!r} "
              f"+ ['sessiontape', 'sessiontape.storage', 'builtins']), {title + ': ' + name!r}"
              for title, modules, name in names]
    done = run_installed(installed, "-c", "import importlib\n" + "\n".join(checks), cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_public_names_of_both_packages_import() -> None:
    import sessiontape
    import sessiontape.storage as storage

    for package in (sessiontape, storage):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
    assert "Recorder" in sessiontape.__all__ and "ItemStore" in storage.__all__
