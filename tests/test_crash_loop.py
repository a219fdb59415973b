"""``kill -9`` a recording process at random moments, again and again, on one conversation.

The children are real recording processes (``tests/crash_driver.py``), forked
by a server that imported the SDK once, so that each kill costs the run's
time and not the import's. After every kill nothing written before is lost
or damaged, and the next process continues the same conversation.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
import pytest
from crash_driver import SESSION, USER, final_text
from harness import REPO

from sessiontape.storage.agentuse.reader import load_session, scan_sessions
from sessiontape.storage.paths import SkilletPaths, agentuse_data_root
from sessiontape.storage.skillet.links import find_agentuse_dir
from sessiontape.storage.skillet.log_owners import find_log_path
from sessiontape.storage.skillet.log_reader import SessionLogReader
from sessiontape.storage.tables import ARCHIVE_TABLE

DRIVER = REPO / "tests" / "crash_driver.py"
KILLS = 50
MAX_RUNS = 200  # a safety stop: most runs are killed, a few complete
SEED_ENV = "SESSIONTAPE_CRASH_SEED"  # set it to replay a failing loop's kill delays


@dataclass(frozen=True)
class Outcome:
    """How one child ended: killed or exited (its code), after ``ms``; what its model saw."""

    killed: bool
    code: int | None
    ms: float
    seen: int | None


class ForkServer:
    """``crash_driver.py serve``: one run per ``run`` call, killed after a delay."""

    def __init__(self, stderr: IO[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(DRIVER), "serve"], cwd=REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, text=True, env=os.environ.copy())
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the fork server died (exit {self.proc.poll()})"
        return line.strip()

    def run(self, index: int, delay_ms: float) -> Outcome:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {index} {delay_ms:.2f}\n")
        self.proc.stdin.flush()
        seen = None
        while True:
            words = self._line().split()
            if words[:2] == ["seen", str(index)]:
                seen = int(words[2])
            elif words[:2] == ["end", str(index)]:
                killed = words[2] == "killed"
                code = None if killed else int(words[2].removeprefix("exit="))
                return Outcome(killed, code, float(words[3]), seen)
            else:
                raise AssertionError(f"unexpected line from the fork server: {words}")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(30) == 0


@contextmanager
def fork_server(stderr_path: Path) -> Iterator[ForkServer]:
    with open(stderr_path, "w") as stderr:
        server = ForkServer(stderr)
        try:
            yield server
        finally:
            if server.proc.poll() is None:
                server.close()


@dataclass(frozen=True)
class Kill:
    """Where a kill landed: after the first model call or not, what the run had written."""

    seen: bool
    lines: int  # log lines
    rows: int  # stored rows (live + archived)


@dataclass
class Snapshot:
    """What the previous check saw; every check compares with it."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    problems: int = 0
    rows: dict[int, str] = field(default_factory=dict)  # live rows of the pair, by row id
    archived: dict[int, str] = field(default_factory=dict)  # archived rows, by original id
    parts: dict[str, set[str]] = field(default_factory=dict)  # part ids by exchange id
    session_seen: bool = False


def check_agentuse(previous: Snapshot) -> dict[str, set[str]]:
    """Every file parses, both readers succeed, and no exchange or part was lost."""
    root = agentuse_data_root()
    for path in root.rglob("*.json"):
        assert isinstance(orjson.loads(path.read_bytes()), dict), path
    scan = scan_sessions(root)
    assert scan.problems == []
    directory = find_agentuse_dir(SkilletPaths.resolve().store_file, USER, SESSION)
    if directory is None or not (directory / "session.json").exists():
        # killed before the session's first file: nothing was recorded there yet
        assert not previous.session_seen
        return {}
    session = load_session(directory)
    assert [s.directory for s in scan.sessions if s.parent_id is None] == [directory]
    parts = {m.info["id"]: {p["id"] for p in m.parts} for m in session.messages}
    for message, ids in previous.parts.items():
        assert ids <= parts.get(message, set()), f"exchange {message} lost parts"
    return parts


def check_log(previous: Snapshot) -> tuple[list[dict[str, Any]], int]:
    """Every whole line is read, at most one torn line is added, and no line changed."""
    path = find_log_path(USER, SESSION)
    if path is None:
        assert previous.entries == []
        return [], 0
    reader = SessionLogReader(path)
    entries = [e.data for e in reader.entries()]
    raw_lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    parsed = 0
    for line in raw_lines:
        try:
            orjson.loads(line)
            parsed += 1
        except orjson.JSONDecodeError:
            pass
    assert len(entries) == parsed  # every whole line is read...
    assert len(reader.problems) == len(raw_lines) - parsed  # ...and every torn one reported
    assert len(reader.problems) - previous.problems <= 1, reader.problems
    assert entries[:len(previous.entries)] == previous.entries
    return entries, len(reader.problems)


def check_store(previous: Snapshot) -> tuple[dict[int, str], dict[int, str]]:
    """The file is sound, and every row ever stored is still live or archived, unchanged."""
    store_file = SkilletPaths.resolve().store_file
    if not store_file.exists():
        return {}, {}
    with closing(sqlite3.connect(store_file, timeout=30)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        pair = (USER, SESSION)
        rows = dict(conn.execute("SELECT id, item_json FROM session_items "
                                 "WHERE user_id = ? AND session_name = ?", pair))
        archived = dict(conn.execute(f"SELECT id, item_json FROM {ARCHIVE_TABLE} "
                                     "WHERE user_id = ? AND session_name = ?", pair)) \
            if ARCHIVE_TABLE in tables else {}
    assert not rows.keys() & archived.keys()
    every = {**previous.rows, **previous.archived}
    now = {**rows, **archived}
    assert all(now.get(row_id) == text for row_id, text in every.items()), "a stored row changed"
    assert len(now) >= len(every)
    return rows, archived


def check_everything(previous: Snapshot) -> Snapshot:
    parts = check_agentuse(previous)
    entries, problems = check_log(previous)
    rows, archived = check_store(previous)
    return Snapshot(entries, problems, rows, archived, parts, previous.session_seen or bool(parts))


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_nothing_and_the_conversation_goes_on(
        tmp_path: Path) -> None:
    seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**32))
    print(f"crash loop seed: {seed} (replay with {SEED_ENV}={seed})")
    rng = random.Random(seed)
    state = Snapshot()
    kills: list[Kill] = []
    longest = 0.0
    index = 0
    with fork_server(tmp_path / "server.stderr") as server:
        while len(kills) < KILLS:
            assert index < MAX_RUNS, f"only {len(kills)} kills in {index} runs (seed {seed})"
            # two whole runs first: they measure how long a run takes, and give history
            delay = -1.0 if index < 2 else rng.uniform(0, longest * 1.1)
            before = state
            outcome = server.run(index, delay)
            if not outcome.killed:
                assert outcome.code == 0, (tmp_path / "server.stderr").read_text()
                longest = max(longest, outcome.ms)
            state = check_everything(before)
            if outcome.seen is not None:  # the model got the whole stored history + the prompt
                assert outcome.seen == len(before.rows) + 1, f"seed {seed}, run {index}"
            if outcome.killed:
                kills.append(Kill(outcome.seen is not None,
                                  len(state.entries) - len(before.entries),
                                  len(state.rows) + len(state.archived)
                                  - len(before.rows) - len(before.archived)))
            index += 1

    # a fresh process (not forked) continues the conversation and completes normally
    done = subprocess.run([sys.executable, str(DRIVER), "run", str(index)], cwd=REPO,
                          capture_output=True, text=True, timeout=60, env=os.environ.copy(),
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["seen", str(index), str(len(state.rows) + 1)]
    check_everything(state)
    session = load_session(find_agentuse_dir(SkilletPaths.resolve().store_file, USER, SESSION))
    assert session.info["status"] == "completed"
    last = session.messages[-1]
    assert last.info["user"]["prompt"]["task"] == f"prompt {index}"
    assert "completed" in last.info["time"]
    assert [p["text"] for p in last.parts if p["type"] == "text"] == [final_text(index)]
    reader = SessionLogReader(find_log_path(USER, SESSION))
    turns = reader.turns()
    assert turns[-1].complete and turns[-1].user_input == f"prompt {index}"
    assert turns[-1].text == final_text(index)
    assert len(reader.problems) <= len(kills)
    with closing(sqlite3.connect(SkilletPaths.resolve().store_file)) as conn:
        (last_row,) = conn.execute("SELECT item_json FROM session_items WHERE user_id = ? AND "
                                   "session_name = ? ORDER BY created_at DESC, id DESC LIMIT 1",
                                   (USER, SESSION)).fetchone()
    assert "".join(c["text"] for c in orjson.loads(last_row)["content"]) == final_text(index)

    # the kills landed all over the run: before the model was called, and after; before
    # the first log line, mid-turn; before the first item was stored, and after
    print(f"{len(kills)} kills in {index} runs; log lines added by killed runs: "
          f"{sorted({k.lines for k in kills})}")
    assert {k.seen for k in kills} == {False, True}, f"seed {seed}"
    assert min(k.lines for k in kills) == 0 and len({k.lines for k in kills}) >= 4, f"seed {seed}"
    assert min(k.rows for k in kills) == 0 and max(k.rows for k in kills) > 0, f"seed {seed}"
