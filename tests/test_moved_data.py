"""Moving the data directory: a conversation's AgentUse tree is found where it is today.

The store links a conversation to its AgentUse directory by absolute path. When
``XDG_DATA_HOME`` changes (the directory moved, or copied elsewhere), the next run and the
readers find the tree at its new place; nothing is written outside today's roots (issue 24,
item 3).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import run_cli, snapshot
from scripted import final, model, read_turns, usage

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import load_session
from sessiontape.storage.paths import SkilletPaths

USER, NAME = "ann@example.com", "trip"
PROMPTS = ["Plan a day in Lisbon", "Now Porto", "And Braga?"]


async def _record(turns: range, project: Path | None = None) -> Recorder:
    """Record ``turns`` of the conversation (turn i: 10(i+1) tokens in, i+1 out)."""
    async with Recorder(USER, NAME, project_root=project) as rec:
        for i in turns:
            agent = Agent(name="Planner",
                          model=model(final(f"answer {i}", usage(10 * (i + 1), i + 1))))
            await rec.run(agent, PROMPTS[i])
    return rec


def _listed(*args: str) -> dict[str, Any]:
    """The conversation as ``sessions list --json`` prints it (a subprocess)."""
    done = run_cli("sessions", "list", "--json", *args)
    assert done.returncode == 0, done.stderr
    (listed,) = [s for s in json.loads(done.stdout) if s["session_name"] == NAME]
    return dict(listed)


def _shown() -> list[tuple[Any, ...]]:
    """Each turn of ``sessions show --json``: its exchange and its tokens in and out."""
    done = run_cli("sessions", "show", NAME, "--user", USER, "--json")
    assert done.returncode == 0, done.stderr
    return [(turn["agentuse_message_id"] is not None, turn["usage"]["input"],
             turn["usage"]["output"]) for turn in json.loads(done.stdout)["turns"]]


def _link() -> str:
    with closing(sqlite3.connect(SkilletPaths.resolve().store_file)) as conn:
        return str(conn.execute("SELECT agentuse_dir FROM sessiontape_links").fetchone()[0])


def _prompts(directory: Path) -> list[str]:
    return [m.info["user"]["prompt"]["task"] for m in load_session(directory).messages]


@pytest.mark.parametrize("how", ["moved", "copied", "moved with the project"])
def test_a_moved_data_directory_is_found_again_and_the_old_place_is_not_written(
        how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two turns, then XDG_DATA_HOME moves (or is copied elsewhere, the old copy left; or
    moves while the project's directory moves too, so that its hash changes): the readers
    find the two turns at the new place before any run, and the third run continues that
    tree; the old place is neither recreated nor changed."""
    project = tmp_path / "project-a"
    project.mkdir()
    tree = asyncio.run(_record(range(2), project)).session_dir
    assert tree is not None
    monkeypatch.chdir(project)  # the readers' project, as the recorder's
    assert _listed()["agentuse_dir"] == str(tree)  # the catalog knows it there
    old_data = Path(os.environ["XDG_DATA_HOME"])
    new_data = tmp_path / "elsewhere" / "data"
    new_data.parent.mkdir()
    if how == "copied":
        shutil.copytree(old_data, new_data, symlinks=True)
        before = snapshot(old_data)
    else:
        shutil.move(old_data, new_data)
    monkeypatch.setenv("XDG_DATA_HOME", str(new_data))
    if how == "moved with the project":
        project = project.rename(tmp_path / "project-b")
    moved = new_data / tree.relative_to(old_data)
    monkeypatch.chdir(project)

    for args in ((), ("--user", USER)):
        listed = _listed(*args)
        assert (listed["agentuse_dir"], listed["turns"]) == (str(moved), 2)
        assert (listed["usage"]["input"], listed["usage"]["output"]) == (10 + 20, 1 + 2)
    assert _shown() == [(True, 10, 1), (True, 20, 2)]

    rec = asyncio.run(_record(range(2, 3), project))
    assert rec.session_dir == moved
    assert _prompts(moved) == PROMPTS
    assert _link() == str(moved)
    assert read_turns(rec)[-1].session_id == moved.name[:26]
    if how == "copied":
        assert snapshot(old_data) == before
    else:
        assert not old_data.exists()
    listed = _listed()
    assert (listed["agentuse_dir"], listed["turns"]) == (str(moved), 3)
    assert (listed["usage"]["input"], listed["usage"]["output"]) == (10 + 20 + 30, 1 + 2 + 3)


def test_a_tree_found_nowhere_today_is_begun_again_under_todays_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """XDG_DATA_HOME points somewhere new that holds no copy of the tree: the next run does
    not write into the old tree (outside today's roots) but begins a new session directory
    under today's root, says so once, and relinks the conversation; the earlier turns stay
    turns of the conversation, from its log, with their tokens."""
    first = asyncio.run(_record(range(2))).session_dir
    assert first is not None
    old_data = Path(os.environ["XDG_DATA_HOME"])
    before = snapshot(old_data)
    new_data = tmp_path / "elsewhere" / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(new_data))

    with caplog.at_level(logging.WARNING, logger="sessiontape"):
        rec = asyncio.run(_record(range(2, 3)))
    assert snapshot(old_data) == before
    again = rec.session_dir
    assert again is not None and again.parent == new_data / first.parent.relative_to(old_data)
    assert again.name != first.name and again.name.endswith("-planner")
    assert _prompts(again) == PROMPTS[2:]
    assert _link() == str(again)
    assert rec.errors == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "sessiontape"]
    assert str(first) in warning and str(again) in warning
    listed = _listed()
    assert (listed["agentuse_dir"], listed["turns"]) == (str(again), 3)
    assert (listed["usage"]["input"], listed["usage"]["output"]) == (10 + 20 + 30, 1 + 2 + 3)
