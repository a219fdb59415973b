"""Where things live: AgentUse root and project hash, SkilletPaths."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from harness import REPO

from sessiontape.storage import paths
from sessiontape.storage.paths import (
    SkilletPaths,
    agentuse_sessions_root,
    project_hash,
    resolved_paths,
)


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_project_hash_of_a_git_repo_is_its_toplevel(tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    (repo / "sub" / "dir").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=repo, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert project_hash(repo) == sha16(top)
    assert project_hash(repo / "sub" / "dir") == sha16(top)  # any dir of the work tree


def test_project_hash_of_a_plain_dir_is_its_abspath(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    link = tmp_path / "link"
    link.symlink_to(plain)
    monkeypatch.chdir(tmp_path)
    assert project_hash(plain) == sha16(str(plain))
    assert project_hash(Path("plain")) == sha16(str(plain))
    assert project_hash(link) == sha16(str(link))  # abspath, not realpath


def test_project_hash_without_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on PATH
    assert project_hash(tmp_path) == sha16(str(tmp_path))


def test_fixture_hash_matches_agentuse(agentuse_fixture: Path) -> None:
    # The fixtures' project hash folder is sha256("/home/dev/proj")[:16].
    assert (agentuse_fixture / "agentuse" / "project" / sha16("/home/dev/proj")).is_dir()


@pytest.mark.parametrize("value", [None, "", "   "])
def test_agentuse_root_falls_back_when_xdg_is_unset_or_empty(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("XDG_DATA_HOME")
    else:
        monkeypatch.setenv("XDG_DATA_HOME", value)
    expected = Path(os.environ["HOME"]) / ".local/share/agentuse/project"
    assert agentuse_sessions_root(tmp_path) == expected / project_hash(tmp_path) / "session"


def test_agentuse_root_follows_xdg_at_each_call(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "one"))
    first = agentuse_sessions_root(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "two"))
    assert first.is_relative_to(tmp_path / "one")
    assert agentuse_sessions_root(tmp_path).is_relative_to(tmp_path / "two")


def test_skillet_home_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SKILLET_HOME", str(tmp_path / "sk"))
    found = SkilletPaths.resolve()
    assert (found.state, found.cache, found.config) == (
        tmp_path / "sk/state", tmp_path / "sk/cache", tmp_path / "sk/config")
    assert found.store_file == tmp_path / "sk/state/.agent_sessions.sqlite"
    assert found.logs_root == tmp_path / "sk/state/.agent_session_logs"
    assert found.source == "SKILLET_HOME"


def test_source_checkout_uses_dot_skilled_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLET_HOME", "")
    found = SkilletPaths.resolve()
    assert found.source == "checkout"
    assert found.state == REPO / ".skilled-agent" / "state"


def test_installed_uses_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SKILLET_HOME")
    monkeypatch.setattr(paths, "_source_checkout", lambda: None)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "st"))
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    found = SkilletPaths.resolve()
    assert found.source == "xdg"
    assert found.state == tmp_path / "st" / "skilled-crew"
    assert found.cache == Path(os.environ["HOME"]) / ".cache" / "skilled-crew"
    assert found.config == Path(os.environ["XDG_CONFIG_HOME"]) / "skilled-crew"


def test_site_packages_is_not_a_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "lib" / "site-packages" / "sessiontape" / "storage" / "paths.py"
    fake.parent.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    monkeypatch.setattr(paths, "__file__", str(fake))
    assert paths._source_checkout() is None


def test_resolved_paths_lists_every_location(tmp_path: Path) -> None:
    found = resolved_paths(tmp_path)
    assert found["agentuse_root"] == str(agentuse_sessions_root(tmp_path))
    assert found["skillet_state"] == os.environ["SKILLET_HOME"] + "/state"
    assert set(found) >= {"skillet_cache", "skillet_config", "skillet_store", "skillet_logs"}
