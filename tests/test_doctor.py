"""``sessiontape doctor``: what is wrong with the layouts, and ``--fix``
(storage/catalog/doctor.py).

A world with one fault of each kind: ``doctor --json`` lists each with its repair; ``doctor
--fix`` repairs the safe ones and a second ``doctor`` finds only what it cannot repair;
every log line and stored row is still there after, and ``sessions show`` gives the same
turns. A damaged item store is reported with how to recover it and left untouched.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import EXECUTABLE, run, run_cli, snapshot
from scripted import final, model
from test_liveness import USER as KILLED_USER
from test_liveness import interrupted_at_every_depth, killed_in_a_nested_subagent

from sessiontape import Recorder
from sessiontape.storage.agentuse.liveness import RecordingLock
from sessiontape.storage.agentuse.reader import load_session, read_json_object
from sessiontape.storage.catalog.doctor import diagnose
from sessiontape.storage.catalog.index import SCHEMA_VERSION, default_catalog_path, stored_schema
from sessiontape.storage.paths import Locations, SkilletPaths

USER = "ann@example.com"
NAMES = ("moved", "gone", "lost", "cut", "torn", "unlinked", "fine")
KEPT = 40  # bytes of the truncated session.json


async def _record(name: str) -> Recorder:
    async with Recorder(USER, name) as rec:
        for n in (1, 2):
            await rec.run(Agent(name="Planner", model=model(final(f"{name} answer {n}"))),
                          f"{name} question {n}")
    return rec


def _doctor(*args: str) -> tuple[int, dict[str, Any]]:
    done = run_cli("doctor", "--json", *args)
    assert done.stderr == ""
    return done.returncode, json.loads(done.stdout)


def _kinds(document: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Each finding by its kind and conversation name (a log's: its file's stem)."""
    return {(f["kind"], f["session_name"] or Path(f["path"]).stem): f
            for f in document["findings"]}


def _rows() -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(SkilletPaths.resolve().store_file)) as conn:
        return conn.execute("SELECT * FROM session_items ORDER BY id").fetchall()


def _logs() -> dict[Path, bytes]:
    return {path: path.read_bytes()
            for path in sorted(SkilletPaths.resolve().logs_root.glob("*/*.jsonl"))}


def _turns(user: str, name: str) -> list[tuple[Any, str, bool]]:
    done = run_cli("sessions", "show", name, "--user", user, "--json")
    assert done.returncode == 0, done.stderr
    return [(t["user_input"], t["text"], t["complete"]) for t in json.loads(done.stdout)["turns"]]


def _link(store: Path, name: str, value: str | None = None, *, delete: bool = False) -> str:
    """The link of ``name`` (USER's): set to ``value``, or deleted, first; "" for none."""
    with closing(sqlite3.connect(store)) as conn, conn:
        if delete:
            conn.execute("DELETE FROM sessiontape_links WHERE session_name = ?", (name,))
        elif value is not None:
            conn.execute("INSERT INTO sessiontape_links VALUES (?, ?, ?) ON CONFLICT (user_id, "
                         "session_name) DO UPDATE SET agentuse_dir = excluded.agentuse_dir",
                         (USER, name, value))
        row = conn.execute("SELECT agentuse_dir FROM sessiontape_links WHERE session_name = ?",
                           (name,)).fetchone()
    return str(row[0]) if row else ""


@pytest.mark.slow
def test_doctor_lists_each_fault_and_fix_repairs_the_safe_ones_keeping_every_turn() -> None:
    recs = {name: asyncio.run(_record(name)) for name in NAMES}
    dirs = {name: rec.session_dir for name, rec in recs.items()}
    store = SkilletPaths.resolve().store_file
    assert run_cli("sessions", "list").returncode == 0  # the catalog is made
    assert _doctor() == (0, {"findings": []})
    killed = killed_in_a_nested_subagent()

    tree = dirs["moved"]
    assert tree is not None
    _link(store, "moved", f"/old/data/agentuse/project/{tree.parent.parent.name}/session/"
                          f"{tree.name}")
    shutil.rmtree(dirs["gone"])  # type: ignore[arg-type]
    _link(store, "lost", "/nowhere/01M8DRKP5M8ZN8HH1QZ6VE4EAF-planner")  # its tree is there
    session_json = dirs["cut"] / "session.json"  # type: ignore[operator]
    damaged = session_json.read_bytes()[:KEPT]
    session_json.write_bytes(damaged)
    torn = recs["torn"].log_path
    with open(torn, "ab") as log:
        log.write(b'{"kind": "user_mess')
    _link(store, "unlinked", delete=True)

    turns = {name: _turns(USER, name) for name in NAMES if name != "cut"}
    turns["killed"] = _turns(KILLED_USER, "killed")
    rows, logs = _rows(), _logs()
    default_catalog_path().write_bytes(b"not a catalog at all")  # after show used it

    code, found = _doctor()
    assert code == 1
    kinds = _kinds(found)
    expected = {("link-moved", "moved"): True, ("link-dangling", "gone"): False,
                ("link-dangling", "lost"): True,
                ("session-json-damaged", "cut"): True, ("log-torn", torn.stem): True,
                ("tree-unlinked", "unlinked"): True, ("exchange-dead", "killed"): True,
                ("catalog-damaged", "catalog"): True}
    assert {key: f["fixable"] for key, f in kinds.items()} == expected
    assert all(f["repair"] == "sessiontape doctor --fix" for f in kinds.values() if f["fixable"])
    assert "its next run begins a new AgentUse session" in kinds["link-dangling", "gone"]["repair"]
    assert kinds["link-moved", "moved"]["target"] == str(tree)
    assert kinds["tree-unlinked", "unlinked"]["target"] == str(dirs["unlinked"])
    assert kinds["link-dangling", "lost"]["target"] == str(dirs["lost"])
    assert kinds["log-torn", "torn"]["user_id"] == USER
    assert kinds["exchange-dead", "killed"]["path"] == str(killed / "session.json")

    code, fixed = _doctor("--fix")
    assert code == 1  # the dangling link remains: its tree is lost
    assert sorted((r["kind"], r["done"]) for r in fixed["repaired"]) == sorted(
        (kind, True) for (kind, _), fixable in expected.items() if fixable)
    assert {(f["kind"], f["severity"]) for f in fixed["findings"]} == {
        ("link-dangling", "error"), ("log-lines-malformed", "note")}
    assert _doctor() == (1, {"findings": fixed["findings"]})

    # What was repaired, on disk.
    assert [_link(store, name) for name in ("moved", "unlinked", "lost")] == [
        str(tree), str(dirs["unlinked"]), str(dirs["lost"])]
    info = read_json_object(session_json)
    assert info["status"] == "completed" and info["conversation"] == {
        "user": USER, "name": "cut", "log": str(recs["cut"].log_path)}
    assert (session_json.parent / info["recovered"]["kept"]).read_bytes() == damaged
    assert interrupted_at_every_depth(load_session(killed)) > 0
    assert read_json_object(killed / "session.json")["status"] == "error"
    assert stored_schema(default_catalog_path()) == SCHEMA_VERSION
    # Nothing lost: every row, every log line, every turn.
    assert _rows() == rows
    after = _logs()
    assert after == {**logs, torn: logs[torn] + b"\n"}
    assert {name: _turns(USER, name) for name in NAMES if name != "cut"} | {
        "killed": _turns(KILLED_USER, "killed")} == turns
    assert _turns(USER, "cut")[:2] == [(f"cut question {n}", f"cut answer {n}", True)
                                       for n in (1, 2)]


def test_a_damaged_store_is_reported_with_how_to_recover_it_and_left_untouched() -> None:
    asyncio.run(_record("fine"))
    store = SkilletPaths.resolve().store_file
    done = run_cli("doctor")
    assert (done.returncode, done.stdout) == (0, "nothing wrong\n")
    store.write_bytes(b"garbage, not SQLite" + store.read_bytes()[19:])
    before = store.read_bytes()

    code, found = _doctor()
    assert code == 1
    [finding] = found["findings"]
    assert finding["kind"] == "store-damaged" and not finding["fixable"]
    assert f"sqlite3 {store}.damaged .recover | sqlite3 {store}" in finding["repair"]
    assert "listed apart" in finding["problem"]

    done = run_cli("doctor", "--fix")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"error store-damaged {store}", f"  {finding['problem']}",
        f"  repair: {finding['repair']}"]
    assert store.read_bytes() == before


def test_fix_leaves_a_session_a_recorder_holds_and_project_names_the_tree_to_check(
        tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()

    async def record() -> Recorder:
        async with Recorder(USER, "elsewhere", project_root=project) as rec:
            await rec.run(Agent(name="Planner", model=model(final("there"))), "where?")
        return rec
    tree = asyncio.run(record()).session_dir
    assert tree is not None
    _link(SkilletPaths.resolve().store_file, "elsewhere", delete=True)
    session_json = tree / "session.json"
    session_json.write_bytes(damaged := session_json.read_bytes()[:KEPT])

    assert _doctor() == (0, {"findings": []})  # the current directory's project: not it
    code, found = _doctor("--project", str(project))
    assert code == 1
    assert [(f["kind"], f["fixable"]) for f in found["findings"]] == [
        ("session-json-damaged", False)]  # no link names it: its next run rebuilds it

    _link(SkilletPaths.resolve().store_file, "elsewhere", str(tree))  # linked again
    lock = RecordingLock(tree)  # as a recorder recording there holds it
    assert lock.acquire()
    try:
        code, held = _doctor("--fix", "--project", str(project))
    finally:
        lock.release()
    assert code == 1
    assert held["repaired"] == [{"kind": "session-json-damaged", "path": str(session_json),
                                 "done": False,
                                 "how": "a recorder is recording there: left as it is"}]
    assert session_json.read_bytes() == damaged

    done = run_cli("doctor", "--fix", "--project", str(project))
    assert done.returncode == 0, done.stdout
    kept = read_json_object(session_json)["recovered"]["kept"]
    assert done.stdout.splitlines() == [
        f"fixed session-json-damaged {session_json}: rebuilt (the damaged file kept as "
        f"{kept})", "nothing wrong"]


def test_a_fifo_or_a_link_among_the_logs_is_not_read() -> None:
    asyncio.run(_record("fine"))
    user_dir = SkilletPaths.resolve().logs_root / "ann_example_com"
    os.mkfifo(user_dir / "fifo.jsonl")  # opened for reading, it would block
    (user_dir / "link.jsonl").symlink_to(user_dir / "fine.jsonl")
    assert _doctor() == (0, {"findings": []})


def test_the_original_tools_own_files_are_sound_and_left_as_they_are(
        agentuse_fixture: Path, skillet_fixture: Path, tmp_path: Path) -> None:
    """AgentUse's sessions (no ``recorder`` key, no ``conversation``) and skilled_crew's
    store and logs (no links, no owner records): nothing is reported, nothing changed."""
    (session_root,) = agentuse_fixture.glob("agentuse/project/*/session")
    where = Locations(skillet_fixture / ".agent_sessions.sqlite",
                      skillet_fixture / ".agent_session_logs", session_root)
    before = snapshot(agentuse_fixture.parent), snapshot(skillet_fixture.parent)
    assert diagnose(where, tmp_path / "catalog.sqlite") == []
    assert (snapshot(agentuse_fixture.parent), snapshot(skillet_fixture.parent)) == before


def test_a_store_that_cannot_be_written_is_said_and_no_link_is_repaired() -> None:
    """Run without the capabilities that override file modes (we are root in CI), as any
    other user would be."""
    asyncio.run(_record("fine"))
    store = SkilletPaths.resolve().store_file
    _link(store, "fine", delete=True)
    store.chmod(0o400)
    before = snapshot(store.parent, sqlite_sidecars=True)
    as_user = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] \
        if os.geteuid() == 0 else []
    done = run([*as_user, EXECUTABLE, "doctor", "--fix", "--json"])
    assert (done.returncode, done.stderr) == (1, "")
    found = json.loads(done.stdout)
    assert found["repaired"] == []
    assert [(f["kind"], f["fixable"], f["repair"]) for f in found["findings"]] == [
        ("store-unwritable", False, f"chmod u+w {store}"),
        ("tree-unlinked", False, "make the item store writable, then sessiontape doctor --fix")]
    assert "it is read-only" in found["findings"][0]["problem"]
    assert snapshot(store.parent, sqlite_sidecars=True) == before
