"""Where the two layouts live, read from the environment at every call.

* AgentUse: ``$XDG_DATA_HOME/agentuse/project/{hash}/session`` on every OS.
* Skillet (SkilletPaths): ``state``, ``cache`` and ``config`` directories from
  ``SKILLET_HOME``, a source checkout, or the XDG base directories.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from platformdirs.unix import Unix

__all__ = [
    "AgentUseRoots",
    "Locations",
    "SkilletPaths",
    "agentuse_data_root",
    "agentuse_sessions_root",
    "git_toplevel",
    "project_hash",
    "project_key",
    "resolved_paths",
    "sessions_root_for_key",
]

SKILLET_APP = "skilled-crew"
STORE_FILE = ".agent_sessions.sqlite"
LOGS_DIR = ".agent_session_logs"
DEV_DIR = ".skilled-agent"


def agentuse_data_root() -> Path:
    """``$XDG_DATA_HOME/agentuse`` (``~/.local/share/agentuse`` when unset or empty)."""
    # platformdirs' Unix rules are exactly AgentUse's, on every OS.
    return Path(Unix(appname="agentuse").user_data_dir)


def git_toplevel(directory: Path) -> str | None:
    """``git rev-parse --show-toplevel`` run in ``directory``, or None outside a work tree."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=directory, capture_output=True,
            text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    top = done.stdout.strip()
    return top if done.returncode == 0 and top else None


def project_key(project_root: str | os.PathLike[str] | None = None) -> str:
    """What AgentUse hashes for ``project_root`` (default: cwd).

    Its git top level, else its absolute path.
    """
    root = Path(project_root) if project_root is not None else Path.cwd()
    return git_toplevel(root) or os.path.abspath(root)


def _hash16(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def project_hash(project_root: str | os.PathLike[str] | None = None) -> str:
    """First 16 hex chars of SHA-256 over the project's git top level (else its abspath)."""
    return _hash16(project_key(project_root))


def sessions_root_for_key(key: str) -> Path:
    """``.../agentuse/project/{hash}/session`` for an already resolved :func:`project_key`."""
    return agentuse_data_root() / "project" / _hash16(key) / "session"


def agentuse_sessions_root(project_root: Path | str | None = None) -> Path:
    """``.../agentuse/project/{hash}/session`` for ``project_root`` (default: cwd)."""
    return sessions_root_for_key(project_key(project_root))


@dataclass(frozen=True)
class AgentUseRoots:
    """Today's AgentUse roots, as the environment resolves them when made (:meth:`today`):
    ``sessions_root`` (a recorder's or a reader's project root), and every project's
    ``session/`` of today's :func:`agentuse_data_root`."""

    sessions_root: Path | None
    projects: Path  # <data root>/project

    @classmethod
    def today(cls, sessions_root: Path | None = None) -> AgentUseRoots:
        return cls(sessions_root, agentuse_data_root() / "project")

    def holds(self, directory: str) -> bool:
        """Whether the session ``directory`` is in one of the roots (by its text alone: no
        file system call)."""
        parent = os.path.dirname(directory)
        if self.sessions_root is not None and parent == str(self.sessions_root):
            return True
        return os.path.basename(parent) == "session" and \
            os.path.dirname(os.path.dirname(parent)) == str(self.projects)


def _source_checkout() -> Path | None:
    """The repository root when this package runs from a source checkout, else None."""
    here = Path(__file__).resolve()
    if {"site-packages", "dist-packages"} & set(here.parts):
        return None
    for parent in here.parents:
        if (parent / ".git").exists():
            return parent
    return None


@dataclass(frozen=True)
class SkilletPaths:
    """The three Skillet roles, resolved as skilled_crew resolves them.

    1. ``SKILLET_HOME`` set and non-empty: ``$SKILLET_HOME/<role>``;
    2. run from a source checkout: ``<repo>/.skilled-agent/<role>``;
    3. installed: ``$XDG_STATE_HOME``, ``$XDG_CACHE_HOME``, ``$XDG_CONFIG_HOME``
       (``/skilled-crew`` under each).
    """

    state: Path
    cache: Path
    config: Path
    source: str  # "SKILLET_HOME", "checkout" or "xdg": which rule decided

    @classmethod
    def resolve(cls) -> SkilletPaths:
        """Resolve the roles from the environment as it is now."""
        home = os.environ.get("SKILLET_HOME", "").strip()
        if home:
            base = Path(home).expanduser()
            return cls(base / "state", base / "cache", base / "config", "SKILLET_HOME")
        checkout = _source_checkout()
        if checkout is not None:
            base = checkout / DEV_DIR
            return cls(base / "state", base / "cache", base / "config", "checkout")
        xdg = Unix(appname=SKILLET_APP)
        return cls(Path(xdg.user_state_dir), Path(xdg.user_cache_dir),
                   Path(xdg.user_config_dir), "xdg")

    @property
    def store_file(self) -> Path:
        """The SQLite item store: ``<state>/.agent_sessions.sqlite``."""
        return self.state / STORE_FILE

    @property
    def logs_root(self) -> Path:
        """The JSONL replay logs: ``<state>/.agent_session_logs``."""
        return self.state / LOGS_DIR


@dataclass(frozen=True)
class Locations:
    """The store file, logs root and AgentUse sessions root to read (default: as the
    environment resolves them, the AgentUse root of the current directory's project).

    ``agentuse_root`` None: no AgentUse tree is scanned (linked sessions are still read
    where their links point)."""

    store_file: Path
    logs_root: Path
    agentuse_root: Path | None = None

    @classmethod
    def resolve(cls, store_file: Path | None = None, logs_root: Path | None = None, *,
                project_root: Path | str | None = None,
                agentuse_root: Path | None = None) -> Locations:
        skillet = SkilletPaths.resolve()
        return cls(store_file or skillet.store_file, logs_root or skillet.logs_root,
                   agentuse_root or agentuse_sessions_root(project_root))


def resolved_paths(project_root: Path | str | None = None) -> dict[str, str]:
    """Every resolved location, as ``sessiontape paths`` prints them."""
    skillet = SkilletPaths.resolve()
    return {
        "agentuse_root": str(agentuse_sessions_root(project_root)),
        "skillet_state": str(skillet.state),
        "skillet_cache": str(skillet.cache),
        "skillet_config": str(skillet.config),
        "skillet_store": str(skillet.store_file),
        "skillet_logs": str(skillet.logs_root),
        "skillet_source": skillet.source,
    }
