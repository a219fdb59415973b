"""``sessiontape sessions rename`` and ``prune``, and
``storage.catalog.sessions.rename_session`` and ``prune_sessions``.

Conversations are recorded with the real ``Runner`` on scripted models (a subagent, a
compaction), renamed or pruned by the installed executable (or the library function, to
make it fail half-way), and read back from the files: every layout under the new name and
nothing under the old, a run that continues the renamed conversation given its earlier
turns, refused and failed changes leaving every file and row as it was.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harness import EXECUTABLE, on_terminal, run, run_cli, snapshot
from scripted import run_agent
from test_foreign_sessions import PROJECT
from test_fork import (
    ANN,
    Recorded,
    continue_fork,
    counter,
    history_sent,
    original,
    record,
    rows,
    store_file,
    world,
)

from sessiontape import Recorder
from sessiontape.storage.agentuse.liveness import RecordingLock
from sessiontape.storage.catalog import sessions
from sessiontape.storage.catalog.sessions import find_session, prune_sessions, rename_session
from sessiontape.storage.paths import Locations, project_hash
from sessiontape.storage.skillet.links import find_agentuse_dir
from sessiontape.storage.skillet.log_owners import log_owner
from sessiontape.storage.skillet.log_reader import SessionLogReader

TABLES = ("session_items", "session_items_archive", "sessiontape_compactions")


def counts(name: str) -> dict[str, int]:
    """The pair's rows in each store table (its link included)."""
    with closing(sqlite3.connect(store_file())) as conn:
        present = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        found = {table: conn.execute(f"SELECT COUNT(*) FROM {table} WHERE user_id = ? AND "
                                     "session_name = ?", (ANN, name)).fetchone()[0]
                 if table in present else 0 for table in (*TABLES, "sessiontape_links")}
    return found


def cli_json(*args: str) -> Any:
    done = run_cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# -- rename -------------------------------------------------------------------------------


@pytest.fixture
def trip() -> Recorded:
    """Two turns of a planner with a subagent, compacted at the end of the second (18
    items over a threshold of 12): rows in every store table."""
    recorded = asyncio.run(record("trip", 2, compaction_threshold=12))
    assert all(counts("trip").values()), counts("trip")
    return recorded


def test_a_renamed_conversation_is_under_its_new_name_in_every_layout_and_goes_on(
        trip: Recorded) -> None:
    before = original(trip)
    moved = counts("trip")

    result = cli_json("sessions", "rename", "trip", "voyage")
    new_log = trip.log_path.with_name("voyage.jsonl")
    assert result == {"user_id": ANN, "old_name": "trip", "new_name": "voyage",
                      "rows": moved, "log_path": str(new_log),
                      "agentuse_dir": str(trip.session_dir)}

    # store: every row of every table under the new pair, as it was; none under the old
    assert counts("voyage") == moved and not any(counts("trip").values())
    assert rows("voyage") == before["rows"]
    assert rows("voyage", "session_items_archive") == before["archive"]
    assert find_agentuse_dir(store_file(), ANN, "voyage") == trip.session_dir
    # log: moved, byte for byte (its lines are history: they keep the name they had), owned
    # by the new pair; the old name and its owner record are gone
    assert new_log.read_bytes() == before["log"]
    assert {json.loads(line)["sessionName"] for line in before["log"].splitlines()
            if b'"user_message"' in line} == {"trip"}
    assert log_owner(new_log) == {"user_id": ANN, "session_name": "voyage"}
    assert sorted(p.name for p in trip.log_path.parent.iterdir()) == \
        [".voyage.owner.json", "voyage.jsonl"]
    # tree: the same directory; session.json names the new pair and log, nothing else changed
    info = json.loads((trip.session_dir / "session.json").read_bytes())
    was = json.loads(before["tree"][str(trip.session_dir / "session.json")])
    assert info == {**was, "conversation": {"user": ANN, "name": "voyage", "log": str(new_log)}}
    top = str(trip.session_dir / "session.json")
    assert {k: v for k, v in snapshot(trip.session_dir).items() if k != top} == \
        {k: v for k, v in before["tree"].items() if k != top}

    # shown, listed and searched under its new name, with every turn
    shown = cli_json("sessions", "show", "voyage")
    assert [turn["user_input"] for turn in shown["turns"]] == ["prompt 0", "prompt 1"]
    listed = {entry["session_name"] for entry in cli_json("sessions", "list")}
    assert listed == {"voyage"}
    hits = cli_json("search", "prompt")
    assert {hit["session"] for hit in hits} == {"voyage"} and hits

    # continued: the model gets the earlier turns, and the run goes on in the same files
    scripted, stored = asyncio.run(continue_fork("voyage", 2))
    assert history_sent(scripted) == stored and stored
    assert any(item.get("content") == "prompt 1" for item in stored)
    assert [t.user_input for t in SessionLogReader(new_log).turns()] == \
        ["prompt 0", "prompt 1", "prompt 2"]
    assert json.loads((trip.session_dir / "session.json").read_bytes())["conversation"] == \
        {"user": ANN, "name": "voyage", "log": str(new_log)}
    assert sorted(p.name for p in trip.session_dir.parent.iterdir()) == [trip.session_dir.name]
    assert not trip.log_path.exists() and not any(counts("trip").values())


def test_refused_renames_change_nothing(isolated_env: Path, trip: Recorded) -> None:
    asyncio.run(record("taken", 1))
    # a name that only a log of skilled_crew's holds (no owner record, no rows)
    crew = trip.log_path.with_name("crew.jsonl")
    crew.write_bytes(trip.log_path.read_bytes())
    before = world(isolated_env)

    cases = {
        "taken": "'taken' of 'ann@example.com' already exists (rows in session_items)",
        "crew": "'crew' of 'ann@example.com' already exists (a replay log",
        "trip": "'trip' of 'ann@example.com' already exists",
        "": "the new session name is empty",
    }
    for new, message in cases.items():
        done = run_cli("sessions", "rename", "trip", new)
        assert (done.returncode, done.stdout) == (2, ""), (new, done.stderr)
        assert done.stderr.startswith("sessiontape sessions: not renaming 'trip': "), done.stderr
        assert message in done.stderr, (new, done.stderr)

    lock = RecordingLock(trip.session_dir)  # a recorder recording a run of it
    assert lock.acquire()
    try:
        done = run_cli("sessions", "rename", "trip", "voyage")
    finally:
        lock.release()
    assert (done.returncode, done.stdout) == (2, "")
    assert "a recorder is recording a run of it now" in done.stderr

    store_file().chmod(0o400)
    try:  # as a user whom file modes hold back, root included
        done = run([*as_user(), EXECUTABLE, "sessions", "rename", "trip", "voyage"])
        readonly = world(isolated_env)
    finally:
        store_file().chmod(0o600)
    assert (done.returncode, done.stdout) == (2, "")
    assert "not renaming 'trip', nothing was changed: item store " in done.stderr
    assert "cannot be written (it is read-only)" in done.stderr
    assert readonly == before
    assert world(isolated_env) == before


def test_a_new_name_that_sanitizes_to_the_old_log_name_keeps_that_log() -> None:
    """``trip plan`` and ``trip_plan`` share a log file name (``trip_plan.jsonl``): renamed,
    the log stays where it is, owned by the new pair, which a run then continues (its
    name is the first free one of NEW's: the one a new recorder finds)."""
    recorded = asyncio.run(record("trip plan", 1, agent=counter))
    assert recorded.log_path.name == "trip_plan.jsonl"
    result = cli_json("sessions", "rename", "trip plan", "trip_plan")
    assert result["log_path"] == str(recorded.log_path)
    assert log_owner(recorded.log_path) == {"user_id": ANN, "session_name": "trip_plan"}
    assert sorted(p.name for p in recorded.log_path.parent.iterdir()) == \
        [".trip_plan.owner.json", "trip_plan.jsonl"]
    asyncio.run(continue_fork("trip_plan", 1))
    assert [t.user_input for t in SessionLogReader(recorded.log_path).turns()] == \
        ["prompt 0", "prompt 1"]


def as_user() -> list[str]:
    """What makes a command run without the capabilities that override file modes, when
    we are root (as tests/test_damaged_store.py runs it)."""
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] \
        if os.geteuid() == 0 else []


def _fails(*_: Any) -> None:
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("where", ["session.json", "store"])
def test_a_rename_that_fails_half_way_leaves_everything_as_it_was(
        isolated_env: Path, trip: Recorded, monkeypatch: pytest.MonkeyPatch,
        where: str) -> None:
    before = world(isolated_env)
    # the log is moved before session.json is written, and both before the store commits
    monkeypatch.setattr(sessions, "_rename_in_tree" if where == "session.json" else
                        "_rename_rows", _fails)
    info = find_session("trip", ANN)
    with pytest.raises(OSError, match="No space left on device"):
        rename_session(info, "voyage")
    assert world(isolated_env) == before


# -- prune --------------------------------------------------------------------------------


DAYS_BACK = 100


def _shifted_times(document: Any, by_ms: int) -> Any:
    """``document`` with every number of a ``time`` object ``by_ms`` earlier."""
    if isinstance(document, list):
        return [_shifted_times(item, by_ms) for item in document]
    if not isinstance(document, dict):
        return document
    return {key: ({k: v - by_ms if isinstance(v, int) else v for k, v in value.items()}
                  if key == "time" and isinstance(value, dict) else _shifted_times(value, by_ms))
            for key, value in document.items()}


def _json_files(directory: Path) -> Iterator[Path]:
    return (path for path in directory.rglob("*.json") if path.is_file())


def age(recorded: Recorded, days: int = DAYS_BACK) -> None:
    """Move every time of a recorded conversation ``days`` back: its log's timestamps, its
    tree's times and its stored rows' ``created_at``."""
    by = timedelta(days=days)
    lines = []
    for line in recorded.log_path.read_bytes().splitlines():
        entry = json.loads(line)
        stamp = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")) - by
        entry["timestamp"] = stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        lines.append(json.dumps(entry).encode())
    recorded.log_path.write_bytes(b"\n".join(lines) + b"\n")
    for path in _json_files(recorded.session_dir):
        path.write_text(json.dumps(_shifted_times(json.loads(path.read_bytes()),
                                                  int(by.total_seconds() * 1000))))
    with closing(sqlite3.connect(store_file())) as conn, conn:
        present = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        for table in present & set(TABLES[:2]):
            conn.execute(f"UPDATE {table} SET created_at = created_at - ? WHERE user_id = ? "
                         "AND session_name = ?", (int(by.total_seconds() * 1000), ANN,
                                                  recorded.name))


@pytest.fixture
def aged() -> list[Recorded]:
    """Three conversations of one turn; the first two 100 days old."""
    recorded = [asyncio.run(record(name, 1, agent=counter)) for name in ("old-a", "old-b", "new")]
    for old in recorded[:2]:
        age(old)
    return recorded


def test_a_dry_run_lists_exactly_the_old_conversations_and_changes_nothing(
        isolated_env: Path, aged: list[Recorded]) -> None:
    before = world(isolated_env)
    report = cli_json("sessions", "prune", "--older-than", "90d", "--dry-run")
    assert report["dry_run"] is True and report["failed"] == []
    assert [(e["session_name"], e["user_id"], e["turns"], e["items"]) for e in report["removed"]] \
        == [("old-a", ANN, 1, 4), ("old-b", ANN, 1, 4)]
    for entry, old in zip(report["removed"], aged[:2], strict=True):
        assert entry["bytes"] == old.log_path.stat().st_size + sum(
            p.stat().st_size for p in old.session_dir.rglob("*") if p.is_file())
        assert entry["last_ms"] < datetime.now().timestamp() * 1000 - 99 * 86400_000
        assert "removed_paths" not in entry
    text = run_cli("sessions", "prune", "--older-than", "90d", "--dry-run")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("would remove 2 sessions last active before ")
    assert [line.split()[:3] for line in lines[1:]] == [["old-a", "user", ANN],
                                                       ["old-b", "user", ANN]]
    assert all(" 1 turn  4 stored items  " in line for line in lines[1:])
    assert world(isolated_env) == before


def test_prune_removes_exactly_the_old_conversations_from_every_layout(
        isolated_env: Path, aged: list[Recorded]) -> None:
    recent = original(aged[2])
    refused = run_cli("sessions", "prune", "--older-than", "90d")  # no terminal, no --yes
    assert (refused.returncode, refused.stdout) == (2, "")
    assert "refusing to remove 2 sessions without a terminal to confirm on; pass --yes" \
        in refused.stderr

    done = run_cli("sessions", "prune", "--older-than", "90d", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("removed 2 sessions last active before ")
    for old in aged[:2]:
        assert not any(counts(old.name).values())
        assert not old.log_path.exists() and not old.session_dir.exists()
        assert not old.log_path.with_name(f".{old.log_path.stem}.owner.json").exists()
    assert original(aged[2]) == recent
    assert sorted(p.name for p in aged[2].log_path.parent.iterdir()) == \
        [".new.owner.json", "new.jsonl"]
    assert [p.name for p in aged[2].session_dir.parent.iterdir()] == [aged[2].session_dir.name]
    assert [e["session_name"] for e in cli_json("sessions", "list")] == ["new"]


def test_a_conversation_that_cannot_be_removed_is_left_whole_and_the_others_go(
        aged: list[Recorded], monkeypatch: pytest.MonkeyPatch) -> None:
    kept = original(aged[0])
    clear = sessions.clear_session

    def fails_for_old_a(info: sessions.SessionInfo, **options: Any) -> sessions.ClearResult:
        if info.session_name == "old-a":
            raise sqlite3.OperationalError("database is locked")
        return clear(info, **options)

    monkeypatch.setattr(sessions, "clear_session", fails_for_old_a)
    cutoff = int((datetime.now() - timedelta(days=90)).timestamp() * 1000)
    result = prune_sessions(cutoff, locations=Locations.resolve())
    assert [(p.info.session_name, p.error) for p in result.failed] == \
        [("old-a", "database is locked")]
    assert [p.info.session_name for p in result.removed] == ["old-b"]
    assert original(aged[0]) == kept  # whole: its log and tree moved back
    assert not aged[1].log_path.exists() and not aged[1].session_dir.exists()
    assert not list(aged[0].session_dir.parent.glob(".pruning*"))
    assert not list(aged[0].log_path.parent.glob(".pruning*"))


def test_a_conversation_being_recorded_is_not_pruned(aged: list[Recorded]) -> None:
    kept = original(aged[0])
    lock = RecordingLock(aged[0].session_dir)
    assert lock.acquire()
    try:
        done = run_cli("sessions", "prune", "--older-than", "90d", "--yes")
    finally:
        lock.release()
    assert done.returncode == 1
    assert "sessiontape sessions: not removed: old-a of ann@example.com: " in done.stderr
    assert "a recorder is recording a run of it now" in done.stderr
    assert done.stdout.splitlines()[1].split()[0] == "old-b"
    assert original(aged[0]) == kept and not aged[1].log_path.exists()


def test_prune_on_a_terminal_asks_once(aged: list[Recorded]) -> None:
    kept = [original(old) for old in aged]
    command = [EXECUTABLE, "sessions", "prune", "--older-than", "90d"]
    code, shown, err = on_terminal(command, stdin=b"n\n")
    assert code == 1 and "removed" not in shown and err.count("[y/N]") == 1
    assert err.startswith("This removes 2 sessions last active before ")
    assert [line.split()[0] for line in err.splitlines()[1:3]] == ["old-a", "old-b"]
    assert "sessiontape sessions: nothing removed" in err
    assert [original(old) for old in aged] == kept

    code, shown, err = on_terminal(command, stdin=b"y\n")
    assert code == 0, err
    assert "\nremoved 2 sessions last active before " in shown  # after the typed answer
    assert not aged[0].session_dir.exists() and not aged[1].log_path.exists()
    assert original(aged[2]) == kept[2]


def test_agentuse_only_sessions_are_pruned_only_when_asked(
        agentuse_fixture: Path, isolated_env: Path) -> None:
    """AgentUse's own sessions (no user) are its history: left alone unless
    --include-agentuse. The fixture's are days old: the cutoff is a time to come."""
    data = isolated_env / "home" / "data"
    shutil.copytree(agentuse_fixture, data)
    root = data / "agentuse" / "project" / project_hash(PROJECT) / "session"
    theirs = sorted(p.name for p in root.iterdir())
    assert len(theirs) == 4
    prune = ("sessions", "prune", "--older-than", "2100-01-01", "--project", PROJECT)

    alone = cli_json(*prune, "--yes")
    assert alone["removed"] == [] and sorted(p.name for p in root.iterdir()) == theirs
    asked = cli_json(*prune, "--include-agentuse", "--dry-run")
    assert sorted(e["session_name"] for e in asked["removed"]) == theirs
    assert all(e["user_id"] is None and e["origin"] == "agentuse" for e in asked["removed"])
    removed = cli_json(*prune, "--include-agentuse", "--yes")
    assert sorted(Path(e["removed_paths"][0]).name for e in removed["removed"]) == theirs
    assert list(root.iterdir()) == []


BOB = "bob@example.com"


async def record_bob(name: str) -> Path:
    """One turn of ``name`` for Bob; its log."""
    async with Recorder(BOB, name) as rec:
        runner, _ = counter(0)
        await run_agent(rec, runner, "bob's prompt", streamed=False)
        assert rec.errors == 0
        return rec.log_path


@pytest.mark.slow
def test_user_chooses_whose_conversation_is_renamed_or_pruned(aged: list[Recorded]) -> None:
    bob_log = asyncio.run(record_bob("old-a"))
    ann = original(aged[0])

    ambiguous = run_cli("sessions", "rename", "old-a", "older")
    assert (ambiguous.returncode, ambiguous.stdout) == (2, "")
    assert "2 users have a session named 'old-a'; choose one with --user" in ambiguous.stderr
    renamed = cli_json("sessions", "rename", "old-a", "older", "--user", BOB)
    assert (renamed["user_id"], renamed["new_name"]) == (BOB, "older")
    assert Path(renamed["log_path"]) == bob_log.with_name("older.jsonl")
    assert original(aged[0]) == ann

    # Bob's conversation is new: --user ann prunes Ann's old ones, and nobody else's
    # (--user as people type it: the part before @, as every other verb takes it)
    pruned = cli_json("sessions", "prune", "--older-than", "90d", "--user",
                      ANN.partition("@")[0], "--yes")
    assert [(e["user_id"], e["session_name"]) for e in pruned["removed"]] == \
        [(ANN, "old-a"), (ANN, "old-b")]
    assert cli_json("sessions", "prune", "--older-than", "90d", "--user", BOB,
                    "--dry-run")["removed"] == []
    assert {(e["user_id"], e["session_name"]) for e in cli_json("sessions", "list")} == \
        {(ANN, "new"), (BOB, "older")}
