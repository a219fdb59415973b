"""sessiontape installed as a user installs it, for timing whole processes.

The development environment installs sessiontape editable (``pip install -e .``): every
Python process it starts runs setuptools' editable-install import hook, about 12 ms of
start-up that an installed package does not have (``python -c pass``: 25 ms there, 10 ms
in a plain venv, on the team machine). :func:`installed_sessiontape` builds a wheel of this
checkout and installs it into a fresh venv in ``directory``, whose site-packages sees this
environment's dependencies (a ``.pth`` line; the dependencies' own ``.pth`` files are not
run), and returns that venv's ``sessiontape`` console script. About 2 s (pip builds the
wheel with its build backend from the package registry, or pip's cache).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                     "node_modules", ".skilled-agent", ".pytest_cache",
                                     ".mypy_cache", ".ruff_cache")


def installed_sessiontape(directory: Path) -> Path:
    """A ``sessiontape`` console script of a regular (wheel) install of this checkout in
    a fresh venv under ``directory``."""
    source, wheels, venv = directory / "source", directory / "wheels", directory / "venv"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE)  # the build leaves build/ beside it
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(source)],
                   check=True)  # its build backend from the package registry, as pip does
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", "--no-index",
                    *map(str, wheels.glob("sessiontape-*.whl"))], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin" / "sessiontape"
