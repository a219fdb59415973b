"""The skillet SQLite item store (storage/skillet/item_store.py) against FORMATS.md section 2.

Every test drives the store through ``asyncio.run`` and checks the file with a
plain ``sqlite3`` connection of its own, so that what is asserted is what
skilled_crew (or another process) would find on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import multiprocessing
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.memory import SessionSettings
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from harness import REPO, WAIT, next_millisecond, snapshot

from sessiontape.storage.skillet.item_store import ItemStore, StoredSession
from sessiontape.storage.skillet.items import item_shape

USER = "john@example.com"
STORE_NAME = ".agent_sessions.sqlite"


# --------------------------------------------------------------------------- helpers


def run_store(body: Callable[[ItemStore], Awaitable[Any]], path: Path | None = None,
              **kwargs: Any) -> Any:
    """``body(store)`` in a fresh event loop on a fresh, closed-afterwards store."""
    async def main() -> Any:
        async with ItemStore(path, **kwargs) as store:
            return await body(store)
    return asyncio.run(main())


def query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read through an independent read-only connection."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def insert_rows(path: Path, rows: list[tuple[str, str, int, str]]) -> None:
    """Insert ``(user_id, session_name, created_at, item_json)`` rows by hand, in order."""
    conn = sqlite3.connect(path)
    try:
        conn.executemany("INSERT INTO session_items (user_id, session_name, created_at, "
                         "item_json) VALUES (?, ?, ?, ?)", rows)
        conn.commit()
    finally:
        conn.close()


def make_store_file(path: Path) -> Path:
    """Create an empty store (schema only) at ``path``."""
    run_store(lambda store: store.execute("SELECT 1"), path)
    return path


def msg(text: str, role: str = "user") -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


def kind(item: dict[str, Any]) -> str:
    """``message:<role>`` for messages (typed or not), else the item type."""
    item_type = item.get("type", "message")
    return f"message:{item['role']}" if item_type == "message" else item_type


def strict_json(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity (which JSON does not have)."""
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / STORE_NAME


# --------------------------------------------------------------------------- schema


def test_schema_mode_and_modes_are_skilled_crews(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # the modes must not depend on a friendly umask
    try:
        async def body(store: ItemStore) -> dict[str, int]:
            await store.session(USER, "s").add_items([msg("hello")])
            # -wal and -shm exist only while a connection is open
            return {p.name: stat.S_IMODE(p.stat().st_mode) for p in store.path.parent.iterdir()}
        modes = run_store(body)  # default path: $SKILLET_HOME/state
    finally:
        os.umask(old_umask)

    state = tmp_path / "skillet" / "state"
    path = state / STORE_NAME
    assert modes == {STORE_NAME: 0o600, f"{STORE_NAME}-wal": 0o600, f"{STORE_NAME}-shm": 0o600}
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE(state.parent.stat().st_mode) == 0o700

    columns = [(name, type_, notnull, pk) for _, name, type_, notnull, _, pk
               in query(path, "PRAGMA table_info(session_items)")]
    assert columns == [
        ("id", "INTEGER", 0, 1),
        ("user_id", "TEXT", 1, 0),
        ("session_name", "TEXT", 1, 0),
        ("created_at", "INTEGER", 1, 0),
        ("item_json", "TEXT", 1, 0),
    ]
    (table_sql,), = query(path, "SELECT sql FROM sqlite_master WHERE name = 'session_items'")
    assert "AUTOINCREMENT" in table_sql.upper()
    assert query(path, "SELECT name FROM sqlite_master WHERE name = 'sqlite_sequence'")
    indexes = [(name, unique) for _, name, unique, *_ in
               query(path, "PRAGMA index_list(session_items)")]
    assert indexes == [("idx_session", 0)]
    assert [name for _, _, name in query(path, "PRAGMA index_info(idx_session)")] == [
        "user_id", "session_name", "created_at"]
    assert query(path, "PRAGMA journal_mode") == [("wal",)]


# --------------------------------------------------------------------------- protocol


def test_session_id_and_items_in_append_order(db: Path) -> None:
    first, second = [msg("one"), msg("two", "assistant")], [msg("three")]

    async def body(store: ItemStore) -> None:
        session = store.session(USER, "chat")
        assert session.session_id == f"{USER}:chat"
        assert await session.get_items() == []
        await session.add_items(first)
        await session.add_items([])  # nothing, and no error
        await session.add_items(second)
        assert await session.get_items() == first + second
        assert await store.session(USER, "other").get_items() == []
    run_store(body, db)


ITEMS = [msg(f"item {n}") for n in range(5)]


@pytest.mark.parametrize(("limit", "settings_limit", "expected"), [
    (None, None, ITEMS),
    (2, None, ITEMS[-2:]),
    (1, None, ITEMS[-1:]),
    (5, None, ITEMS),
    (100, None, ITEMS),
    (0, None, []),
    (None, 3, ITEMS[-3:]),   # the session's settings apply when no limit is given
    (None, 0, []),
    (4, 1, ITEMS[-4:]),      # an explicit limit wins over the settings
])
def test_get_items_limit(db: Path, limit: int | None, settings_limit: int | None,
                         expected: list[dict[str, Any]]) -> None:
    settings = SessionSettings(limit=settings_limit) if settings_limit is not None else None

    async def body(store: ItemStore) -> list[Any]:
        await store.session(USER, "s").add_items(ITEMS[:2])
        await store.session(USER, "s").add_items(ITEMS[2:])
        return await store.session(USER, "s", settings).get_items(limit)
    assert run_store(body, db) == expected


def test_pop_item_takes_the_latest_until_empty(db: Path) -> None:
    async def body(store: ItemStore) -> None:
        session, neighbour = store.session(USER, "s"), store.session(USER, "n")
        await session.add_items(ITEMS[:3])
        await neighbour.add_items([msg("keep")])
        assert await session.pop_item() == ITEMS[2]
        assert await session.get_items() == ITEMS[:2]
        assert await session.pop_item() == ITEMS[1]
        assert await session.pop_item() == ITEMS[0]
        assert await session.pop_item() is None
        assert await session.pop_item() is None
        assert await neighbour.get_items() == [msg("keep")]
    run_store(body, db)


def test_clear_session_removes_only_that_pair(db: Path) -> None:
    pairs = [(USER, "a"), (USER, "b"), ("jane@example.com", "a")]

    async def body(store: ItemStore) -> None:
        for user, name in pairs:
            await store.session(user, name).add_items([msg(f"{user}/{name}")])
        await store.session(USER, "a").clear_session()
        assert await store.session(USER, "a").get_items() == []
        for user, name in pairs[1:]:
            assert await store.session(user, name).get_items() == [msg(f"{user}/{name}")]
    run_store(body, db)
    assert sorted(query(db, "SELECT user_id, session_name FROM session_items")) == sorted(pairs[1:])


@pytest.mark.parametrize(("user", "name"), [
    (USER, "session_2026-05-27T20:11:02.482Z_9f3a"),
    ("john@example.com ", " my session "),
    ("ünïcødé", "emoji 🎉 session"),
    ("o'brien", 'say "hi"'),
    ("x'); DROP TABLE session_items; --", "'; DROP TABLE session_items; --"),
    ("a:b", "c"),
    ("", ""),
])
def test_names_are_stored_raw(db: Path, user: str, name: str) -> None:
    async def body(store: ItemStore) -> list[StoredSession]:
        session = store.session(user, name)
        assert session.session_id == f"{user}:{name}"
        await session.add_items([msg("hi")])
        assert await session.get_items() == [msg("hi")]
        return await store.list_sessions(user)
    listed = run_store(body, db)
    assert [(s.user_id, s.session_name, s.items) for s in listed] == [(user, name, 1)]
    assert query(db, "SELECT user_id, session_name FROM session_items") == [(user, name)]


def test_pairs_with_the_same_session_id_stay_apart(db: Path) -> None:
    async def body(store: ItemStore) -> tuple[list[Any], list[Any]]:
        left, right = store.session("a:b", "c"), store.session("a", "b:c")
        assert left.session_id == right.session_id
        await left.add_items([msg("left")])
        await right.add_items([msg("right")])
        return await left.get_items(), await right.get_items()
    assert run_store(body, db) == ([msg("left")], [msg("right")])


def test_rows_of_one_add_items_share_created_at(db: Path) -> None:
    async def body(store: ItemStore) -> None:
        session = store.session(USER, "s")
        await session.add_items(ITEMS[:3])
        next_millisecond()  # the next batch gets a later millisecond
        await session.add_items(ITEMS[3:])
    before = time.time_ns() // 1_000_000
    run_store(body, db)
    after = time.time_ns() // 1_000_000

    rows = query(db, "SELECT id, created_at, item_json FROM session_items ORDER BY created_at, id")
    assert [strict_json(text) for _, _, text in rows] == ITEMS
    stamps = [created for _, created, _ in rows]
    assert len(set(stamps[:3])) == 1 and len(set(stamps[3:])) == 1
    assert before <= stamps[0] < stamps[3] <= after
    assert [row_id for row_id, _, _ in rows] == sorted(row_id for row_id, _, _ in rows)


def test_item_json_is_compact_and_keeps_unicode(db: Path) -> None:
    text = "héllo 世界 🎉 \u2028 \"quoted\" \\ \n\t"
    item = {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text, "annotations": [],
                         "n": 1, "f": 0.5, "ok": True, "none": None}]}

    async def body(store: ItemStore) -> list[Any]:
        await store.session(USER, "s").add_items([item])
        return await store.session(USER, "s").get_items()
    assert run_store(body, db) == [item]
    (text,), = query(db, "SELECT item_json FROM session_items")
    # stored as the JS SDK's protocol item: what its input_text part has no field for rides
    # in the part's providerData
    row = {"type": "message", "role": "user",
           "content": [{"type": "input_text", "text": item["content"][0]["text"],
                        "providerData": {"annotations": [], "n": 1, "f": 0.5, "ok": True,
                                         "none": None}}]}
    assert text == json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    assert "🎉" in text and "世界" in text
    assert strict_json(text) == row


def test_odd_values_are_stored_as_json_and_read_back(db: Path) -> None:
    circular: dict[str, Any] = {"type": "circular"}
    circular["self"] = circular
    odd = [
        {"type": "nan", "v": math.nan, "inf": math.inf, "neg": -math.inf},
        {"type": "set", "v": {1}},
        {"type": "object", "v": object()},
        {"type": "bytes", "v": b"raw"},
        {"type": "big", "v": 2**70},
        {"type": "keys", "v": {1: "one"}},
        {"type": "surrogate", "v": "lone \ud800 half"},
        circular,
    ]

    async def body(store: ItemStore) -> list[Any]:
        session = store.session(USER, "odd")
        await session.add_items(odd)
        return await session.get_items()
    items = run_store(body, db)

    stored = [strict_json(text) for (text,) in
              query(db, "SELECT item_json FROM session_items ORDER BY created_at, id")]
    assert [item["type"] for item in stored] == [item["type"] for item in odd]
    assert stored[0] == {"type": "nan", "v": None, "inf": None, "neg": None}
    assert stored[6]["v"] == "lone \ud800 half"
    # Everything that was written is read back, the same as a JSON parser sees it.
    assert items == stored


# --------------------------------------------------------------------------- order and damage


def test_order_is_created_at_then_id(db: Path) -> None:
    make_store_file(db)
    stamps = [300, 100, 200, 100, 300]  # by id: 1..5
    insert_rows(db, [(USER, "s", ms, json.dumps({"id": n + 1})) for n, ms in enumerate(stamps)])
    in_order = [{"id": 2}, {"id": 4}, {"id": 3}, {"id": 1}, {"id": 5}]

    async def body(store: ItemStore) -> None:
        session = store.session(USER, "s")
        assert await session.get_items() == in_order
        assert await session.get_items(limit=3) == in_order[-3:]
        assert await session.get_items(limit=1) == in_order[-1:]
        assert await session.pop_item() == {"id": 5}
        assert await session.pop_item() == {"id": 1}
        assert await session.get_items() == in_order[:3]
    run_store(body, db)


@pytest.mark.parametrize("corrupt", [
    '{"type": "message", "role": "us',   # truncated
    "not json at all",
    "",
    "NaN",
    '{"a": 1}, {"b": 2}',                # two values: valid only inside an array
    "1, 2",
    '{"a": 1}]',
])
def test_a_corrupt_row_is_skipped(db: Path, corrupt: str) -> None:
    make_store_file(db)
    good = [{"n": n} for n in range(4)]
    texts = [json.dumps(good[0]), json.dumps(good[1]), corrupt,
             json.dumps(good[2]), json.dumps(good[3])]
    insert_rows(db, [(USER, "s", 1000 + n, text) for n, text in enumerate(texts)])

    async def body(store: ItemStore) -> None:
        session = store.session(USER, "s")
        assert await session.get_items() == good
        assert await session.get_items(limit=3) == good[2:]  # the corrupt row is one of 3
        assert await session.get_items(limit=10) == good
    run_store(body, db)


# --------------------------------------------------------------------------- list_sessions


def test_list_sessions(db: Path) -> None:
    make_store_file(db)
    insert_rows(db, [
        (USER, "old", 1000, "{}"), (USER, "old", 1500, "{}"), (USER, "old", 1200, "{}"),
        ("jane@example.com", "mid", 1700, "{}"),
        (USER, "new", 1100, "{}"), (USER, "new", 2000, "{}"),
    ])

    async def body(store: ItemStore) -> tuple[list[StoredSession], ...]:
        return (await store.list_sessions(), await store.list_sessions(USER),
                await store.list_sessions("jane@example.com"),
                await store.list_sessions("nobody"))
    everyone, john, jane, nobody = run_store(body, db)
    assert everyone == [
        StoredSession(USER, "new", 2, 1100, 2000),
        StoredSession("jane@example.com", "mid", 1, 1700, 1700),
        StoredSession(USER, "old", 3, 1000, 1500),
    ]
    assert john == [everyone[0], everyone[2]]
    assert jane == [everyone[1]]
    assert nobody == []


# --------------------------------------------------------------------------- skilled_crew's file


FIXTURE_SESSIONS = [  # as skilled_crew wrote them, newest first
    StoredSession(USER, "fixture_session_stream_ok", 8, 1795342232583, 1795342232820),
    StoredSession(USER, "fixture_session_stream", 1, 1795342200135, 1795342200135),
    StoredSession(USER, "fixture_session_1", 18, 1795342173047, 1795342186703),
]
FIRST_ITEM = {"type": "message", "role": "user",
              "content": "How many lines are in the fixture data file?"}


async def read_fixture(store: ItemStore) -> tuple[list[StoredSession], list[Any]]:
    return (await store.list_sessions(),
            await store.session(USER, "fixture_session_1").get_items())


def check_fixture(sessions: list[StoredSession], items: list[Any]) -> None:
    assert sessions == FIXTURE_SESSIONS
    assert len(items) == 18 and all(isinstance(item, dict) for item in items)
    assert items[0] == FIRST_ITEM


def test_reads_skilled_crews_file_readonly_without_touching_it(skillet_fixture: Path) -> None:
    original = skillet_fixture / STORE_NAME
    before = snapshot(skillet_fixture, mtimes=True, sqlite_sidecars=True)
    check_fixture(*run_store(read_fixture, original, readonly=True))

    async def write(store: ItemStore) -> None:
        with pytest.raises(sqlite3.OperationalError):
            await store.session(USER, "fixture_session_1").add_items([msg("no")])
    run_store(write, original, readonly=True)
    assert snapshot(skillet_fixture, mtimes=True, sqlite_sidecars=True) == before


def test_reads_and_extends_a_copy_of_skilled_crews_file(skillet_fixture: Path,
                                                        tmp_path: Path) -> None:
    copy = tmp_path / "state" / STORE_NAME
    copy.parent.mkdir()
    shutil.copy(skillet_fixture / STORE_NAME, copy)
    schema = query(copy, "SELECT type, name, sql FROM sqlite_master ORDER BY name")

    async def body(store: ItemStore) -> tuple[tuple[Any, ...], list[Any]]:
        read = await read_fixture(store)
        await store.session(USER, "fixture_session_1").add_items([msg("and now?")])
        return read, await store.session(USER, "fixture_session_1").get_items(limit=2)
    read, latest = run_store(body, copy)
    check_fixture(*read)
    assert latest[-1] == msg("and now?") and len(latest) == 2
    # skilled_crew's tables as they were; sessiontape adds only its format record
    after = query(copy, "SELECT type, name, sql FROM sqlite_master ORDER BY name")
    assert [row for row in after if "sessiontape_meta" not in row[1]] == schema
    assert {row[1] for row in after} - {row[1] for row in schema} == {
        "sessiontape_meta", "sqlite_autoindex_sessiontape_meta_1"}
    assert query(copy, "SELECT key, value FROM sessiontape_meta") == [
        ("format", "sessiontape-store/1")]


def test_a_failed_open_fails_every_caller_cleanly_and_is_retried(db: Path) -> None:
    async def body(store: ItemStore) -> None:
        before = set(threading.enumerate())
        session = store.session(USER, "s")
        # two callers wait on the same failing open (the file is missing)
        failures = await asyncio.gather(session.get_items(), session.add_items([msg("x")]),
                                        return_exceptions=True)
        assert [type(f) for f in failures] == [sqlite3.OperationalError] * 2
        # its worker thread is gone before the caller resumes, so it cannot outlive the loop
        assert set(threading.enumerate()) <= before
        assert not db.exists() and not db.parent.exists()  # noqa: ASYNC240 (a test's check)
        async with ItemStore(db) as writer:  # the file appears: the same store now opens it
            await writer.session(USER, "s").add_items([msg("now")])
        assert await session.get_items() == [msg("now")]
    run_store(body, db, readonly=True)


# --------------------------------------------------------------------------- two processes

BATCHES, BATCH_SIZE = 200, 5


def _writer(path: str, session_name: str, tag: str, start: Any) -> None:
    """One process: wait for the other, then open the store and append its batches."""
    async def main() -> None:
        store = ItemStore(path)
        session = store.session(USER, session_name)
        for batch in range(BATCHES):
            await session.add_items([{"w": tag, "b": batch, "i": i} for i in range(BATCH_SIZE)])
        await store.close()
    start.wait()
    asyncio.run(main())


@pytest.mark.parametrize("same_pair", [False, True], ids=["different-pairs", "same-pair"])
@pytest.mark.slow
def test_two_processes_write_one_file(db: Path, same_pair: bool) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    writers = [ctx.Process(target=_writer, args=(
        str(db), "shared" if same_pair else f"own-{tag}", tag, start)) for tag in "AB"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        if writer.is_alive():
            writer.kill()
    assert [w.exitcode for w in writers] == [0, 0]

    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    rows = query(db, "SELECT session_name, id, created_at, item_json FROM session_items "
                     "ORDER BY session_name, created_at, id")
    assert len(rows) == 2 * BATCHES * BATCH_SIZE
    expected_pairs = {"shared"} if same_pair else {"own-A", "own-B"}
    assert {name for name, *_ in rows} == expected_pairs

    for name in expected_pairs:
        pair = [(row_id, created, json.loads(text)) for n, row_id, created, text in rows
                if n == name]
        for tag in "AB" if same_pair else name[-1]:
            mine = [(pos, row_id, created, item) for pos, (row_id, created, item)
                    in enumerate(pair) if item["w"] == tag]
            # every item of this process, in its own order
            assert [(item["b"], item["i"]) for *_, item in mine] == [
                (b, i) for b in range(BATCHES) for i in range(BATCH_SIZE)]
            for start_at in range(0, len(mine), BATCH_SIZE):
                batch = mine[start_at:start_at + BATCH_SIZE]
                positions = [pos for pos, *_ in batch]
                ids = [row_id for _, row_id, _, _ in batch]
                assert positions == list(range(positions[0], positions[0] + BATCH_SIZE))
                assert ids == list(range(ids[0], ids[0] + BATCH_SIZE))
                assert len({created for _, _, created, _ in batch}) == 1
    if same_pair:  # the two really ran at once: their batches interleave
        writers_in_order = [json.loads(text)["w"] for *_, text in rows[::BATCH_SIZE]]
        assert writers_in_order.count("A") == writers_in_order.count("B") == BATCHES
        assert writers_in_order != sorted(writers_in_order)


# --------------------------------------------------------------------------- cancellation


@pytest.mark.parametrize("yields", [1, 2, 3, 5])
def test_cancelled_add_items_is_all_or_nothing(db: Path, yields: int) -> None:
    batch = [{"n": n, "pad": "x" * 200} for n in range(2000)]

    async def body(store: ItemStore) -> None:
        # twice: once while the connection is still opening, once on an open one
        for name in ("opening", "open"):
            session = store.session(USER, name)
            task = asyncio.create_task(session.add_items(batch))
            for _ in range(yields):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert task.cancelled()
            assert await session.get_items() in ([], batch)
        # and the store still works
        session = store.session(USER, "after")
        await session.add_items([msg("still here")])
        assert await session.get_items() == [msg("still here")]
    run_store(body, db)

    counts = dict(query(db, "SELECT session_name, COUNT(*) FROM session_items GROUP BY 1"))
    assert counts.pop("after") == 1
    assert all(count == len(batch) for count in counts.values())
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


# --------------------------------------------------------------------------- exit


@pytest.mark.slow
def test_an_unclosed_store_does_not_block_exit(db: Path) -> None:
    script = textwrap.dedent("""
        import asyncio, sys, threading
        from sessiontape.storage.skillet.item_store import ItemStore

        STORE = ItemStore(sys.argv[1])  # kept alive and never closed, as the Runner does

        async def main():
            session = STORE.session("john@example.com", "exit")
            await session.add_items([{"role": "user", "content": "bye"}])
            assert await session.get_items() == [{"role": "user", "content": "bye"}]

        asyncio.run(main())
        print("workers alive:", sum("_connection_worker_thread" in t.name
                                    for t in threading.enumerate()))
    """)
    done = subprocess.run([sys.executable, "-c", script, str(db)], cwd=REPO,
                          capture_output=True, text=True, timeout=WAIT)  # a hang never ends
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "workers alive: 1"  # the worker was there at exit
    assert "Traceback" not in done.stderr
    assert query(db, "SELECT COUNT(*) FROM session_items") == [(1,)]


# --------------------------------------------------------------------------- the real Runner


@function_tool
def count_lines(path: str) -> int:
    """Count the lines of a file."""
    return 3 if path == "data.txt" else 0


def run_turn(path: Path, question: str, steps: list[ModelStep]) -> tuple[str, ScriptedModel]:
    """One turn in its own loop, on new store, session, model and agent objects."""
    model = ScriptedModel(steps)
    agent = Agent(name="counter", instructions="Count lines.", model=model, tools=[count_lines])

    async def body(store: ItemStore) -> str:
        result = await Runner.run(agent, question, session=store.session(USER, "runner"))
        return result.final_output
    answer = run_store(body, path)
    model.assert_complete()
    return answer, model


def test_runner_remembers_the_first_turn_through_the_store(db: Path) -> None:
    answer, first = run_turn(db, "How many lines are in data.txt?", [
        ModelStep(output=[function_call("count_lines", {"path": "data.txt"},
                                        call_id="call_1", item_id="fc_1")],
                  response_id="resp_1"),
        ModelStep(output=[assistant_message("There are 3 lines.", item_id="msg_1")],
                  response_id="resp_2"),
    ])
    assert answer == "There are 3 lines."
    assert [kind(item) for item in first.calls[1].input] == [
        "message:user", "function_call", "function_call_output"]

    answer, second = run_turn(db, "What did I ask?", [
        ModelStep(output=[assistant_message("You asked about data.txt.", item_id="msg_2")],
                  response_id="resp_3"),
    ])
    assert answer == "You asked about data.txt."
    seen = second.calls[0].input
    assert [kind(item) for item in seen] == [
        "message:user", "function_call", "function_call_output", "message:assistant",
        "message:user"]
    assert seen[0]["content"] == "How many lines are in data.txt?"
    assert (seen[1]["call_id"], seen[1]["name"]) == ("call_1", "count_lines")
    assert (seen[2]["call_id"], seen[2]["output"]) == ("call_1", "3")
    assert seen[3]["content"][0]["text"] == "There are 3 lines."
    assert seen[4]["content"] == "What did I ask?"

    async def stored(store: ItemStore) -> list[Any]:
        return await store.session(USER, "runner").get_items()
    items = run_store(stored, db)
    assert [kind(item) for item in items] == [
        "message:user", "function_call", "function_call_output", "message:assistant",
        "message:user", "message:assistant"]
    assert items[-1]["content"][0]["text"] == "You asked about data.txt."


def test_preparing_an_open_store_does_not_drop_its_locks(tmp_path: Path) -> None:
    """Reopening the file (to create it 0600) must not release this process's SQLite locks.

    Closing any descriptor of a file drops every POSIX lock the process holds on
    it, so another process could then read (or write) under our transaction.
    """
    import sqlite3 as sq
    import subprocess
    import sys

    from sessiontape.storage.files import prepare_private_file

    path = tmp_path / "s.sqlite"
    writer = sq.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=DELETE")
    writer.execute("CREATE TABLE t (x)")
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("INSERT INTO t VALUES (1)")
    prepare_private_file(path)  # an open()+close() here would drop the exclusive lock
    probe = ("import sqlite3, sys\n"
             "try:\n"
             "    sqlite3.connect(sys.argv[1], timeout=0).execute('SELECT * FROM t').fetchall()\n"
             "    print('read')\n"
             "except sqlite3.OperationalError as e:\n"
             "    print(e)\n")
    seen = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True,
                          text=True, timeout=30).stdout.strip()
    writer.execute("COMMIT")
    assert "locked" in seen


# --------------------------------------------------------------------------- both SDKs' shapes


LEGACY = [  # rows as sessiontape 0.1 wrote them: the Python SDK's own shapes
    {"content": "How many files?", "role": "user"},
    {"id": "rs_1", "summary": [{"text": "List, then count.", "type": "summary_text"}],
     "type": "reasoning"},
    {"arguments": '{"commandLine":"ls"}', "call_id": "call_1", "name": "run",
     "type": "function_call", "id": "fc_1", "status": "completed"},
    {"call_id": "call_1", "output": "a b", "type": "function_call_output"},
    {"id": "msg_1", "content": [{"annotations": [], "text": "Two.", "type": "output_text",
                                 "logprobs": []}],
     "role": "assistant", "status": "completed", "type": "message"},
    {"role": "assistant", "content": "[Summary of the earlier conversation]\nearlier"},
    {"id": "ws_1", "action": {"type": "search", "query": "q"}, "status": "completed",
     "type": "web_search_call"},
]


def test_legacy_python_rows_read_back_unchanged_and_new_rows_are_protocol_items(
        db: Path) -> None:
    make_store_file(db)
    insert_rows(db, [(USER, "s", 1000, json.dumps(item)) for item in LEGACY])
    new_turn = [msg("And now?", "user"),
                {"type": "function_call", "call_id": "call_2", "name": "run", "arguments": "{}",
                 "id": "fc_2", "status": "completed"},
                {"type": "function_call_output", "call_id": "call_2", "output": "c"}]

    async def body(store: ItemStore) -> None:
        session = store.session(USER, "s")
        assert await session.get_items() == LEGACY
        assert await session.get_items(limit=3) == LEGACY[-3:]
        await session.add_items(new_turn)
        assert await session.get_items() == LEGACY + new_turn
        assert await store.session(USER, "s").get_items() == LEGACY + new_turn
        assert await session.pop_item() == new_turn[-1]
        await session.add_items(new_turn[-1:])  # its call is in an earlier batch
    run_store(body, db)

    texts = [text for (text,) in query(db, "SELECT item_json FROM session_items ORDER BY id")]
    assert texts[:len(LEGACY)] == [json.dumps(item) for item in LEGACY]  # untouched
    added = [json.loads(text) for text in texts[len(LEGACY):]]
    assert [item_shape(item) for item in added] == ["both", "protocol", "protocol"]
    assert added[1]["callId"] == "call_2" and "call_id" not in added[1]
    # the output stored alone got its tool's name from the stored call
    assert added[2] == {"type": "function_call_result", "name": "run", "callId": "call_2",
                        "status": "completed", "output": {"type": "text", "text": "c"}}
    # a fresh store (no memory of earlier reads) reads the same
    assert run_store(lambda store: store.session(USER, "s").get_items(), db) == \
        LEGACY + new_turn


BAD_ROWS = [  # (row text, what a read does with it)
    ('{"type": "message", "role": "us', "skipped"),            # truncated
    ("not json at all", "skipped"),
    ("42", "skipped"),                                          # JSON, but no item
    ('["a", "b"]', "skipped"),
    ("null", "skipped"),
    ('{"n": 1}', "passed"),                                     # neither SDK's
    ('{"type": "tool_approval_v9", "callId": "c9"}', "passed"),  # a future protocol item
    ('{"type": "function_call_result", "output": 3}', "passed"),  # malformed (no callId)
]


def test_bad_rows_are_reported_with_their_row_id_and_never_fail_a_read(
        db: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sessiontape")
    make_store_file(db)
    good = [msg(f"item {n}") for n in range(len(BAD_ROWS) + 1)]
    rows = []
    for n, (text, _) in enumerate(BAD_ROWS):
        rows += [(USER, "s", 1000 + 2 * n, json.dumps(good[n])), (USER, "s", 1001 + 2 * n, text)]
    rows.append((USER, "s", 5000, json.dumps(good[-1])))
    insert_rows(db, rows)
    ids = {text: row_id for row_id, text in query(db, "SELECT id, item_json FROM session_items")}
    expected = []
    for n, (text, fate) in enumerate(BAD_ROWS):
        expected += [good[n]] + ([json.loads(text)] if fate == "passed" else [])
    expected.append(good[-1])

    async def body(store: ItemStore) -> None:
        session = store.session(USER, "s")
        assert await session.get_items() == expected
        assert await session.get_items() == expected  # again, from what was read
        assert await store.session(USER, "s").get_items(limit=2) == expected[-2:]
    run_store(body, db)
    warnings = [r.getMessage() for r in caplog.records if r.name == "sessiontape"]
    assert len(warnings) == len(BAD_ROWS)  # each bad row once, however often it is read
    for text, fate in BAD_ROWS:
        [warning] = [w for w in warnings if f"session_items row {ids[text]}:" in w]
        assert ("skipped" if fate == "skipped" else "passed on as it is") in warning
        assert f"{USER}:s" in warning

    # the runner takes such a history and runs; pop_item leaves rows that are no item
    model = ScriptedModel([[assistant_message("fine", item_id="m_bad")]])

    async def run(store: ItemStore) -> Any:
        session = store.session(USER, "s")
        result = await Runner.run(Agent(name="a", model=model), "go on", session=session)
        popped = [await session.pop_item() for _ in range(len(expected) + 2)]
        return result.final_output, popped
    answer, popped = run_store(run, db)
    assert answer == "fine"
    assert model.calls[0].input == [*expected, {"content": "go on", "role": "user"}]
    assert [p for p in popped if p is not None][2:] == expected[::-1]
    left = [text for (text,) in query(db, "SELECT item_json FROM session_items ORDER BY id")]
    assert left == [text for text, fate in BAD_ROWS if fate == "skipped"]


def test_reads_follow_changes_made_by_another_connection(db: Path) -> None:
    """Reads remember the rows they converted; rows added, deleted or popped by anyone
    else between two reads show exactly (each read is checked against a fresh store)."""
    make_store_file(db)
    first = [msg("one"), {"type": "function_call", "call_id": "c1", "name": "f",
                          "arguments": "{}"}]

    async def body(store: ItemStore) -> None:
        session = store.session(USER, "s")
        await session.add_items(first)

        async def check(expected: list[Any]) -> None:
            assert await session.get_items() == expected
            async with ItemStore(db) as fresh:
                assert await fresh.session(USER, "s").get_items() == expected
            assert await session.get_items(limit=1) == expected[-1:]

        await check(first)
        # skilled_crew appends a protocol row
        insert_rows(db, [(USER, "s", 2_000_000_000_000, json.dumps(
            {"type": "function_call_result", "name": "f", "callId": "c1",
             "status": "completed", "output": {"type": "text", "text": "ok"}}))])
        output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
        await check([*first, output])
        # a row in the middle goes, one is added before the rest (as a compaction does)
        conn = sqlite3.connect(db)
        conn.execute("DELETE FROM session_items WHERE item_json LIKE '%\"one\"%'")
        conn.execute("INSERT INTO session_items (user_id, session_name, created_at, item_json) "
                     "VALUES (?, 's', 1, ?)", (USER, json.dumps(msg("zero"))))
        conn.commit()
        conn.close()
        await check([msg("zero"), first[1], output])
        # a row added with an older time than the last one (another writer's clock) is
        # read in its place, and so are rows added after it
        insert_rows(db, [(USER, "s", 1_000_000, json.dumps(msg("early")))])
        await check([msg("zero"), msg("early"), first[1], output])
        insert_rows(db, [(USER, "s", 2_000_000_000_001, json.dumps(msg("late")))])
        await check([msg("zero"), msg("early"), first[1], output, msg("late")])
        conn = sqlite3.connect(db)
        conn.execute("DELETE FROM session_items WHERE item_json LIKE '%early%' "
                     "OR item_json LIKE '%late%'")
        conn.commit()
        conn.close()
        await check([msg("zero"), first[1], output])
        assert await session.pop_item() == output
        await check([msg("zero"), first[1]])
        await session.clear_session()
        assert await session.get_items() == []
    run_store(body, db)


def test_items_read_are_the_callers_own(db: Path) -> None:
    """Each read returns new objects, even when nothing changed since the last one."""
    items = [msg("one"), {"type": "reasoning", "id": "rs_1", "summary": [
        {"type": "summary_text", "text": "hm"}]}]

    async def body(store: ItemStore) -> None:
        session = store.session(USER, "s")
        await session.add_items(items)
        for limit in (None, None, 2, 2):
            got = await session.get_items(limit)
            assert got == items
            got[0]["content"] = "changed"
            got[1]["summary"].append("junk")
            got.append("more")
        assert items[0]["content"] == "one" and len(items[1]["summary"]) == 1
    run_store(body, db)


def test_a_store_keeps_the_converted_items_of_a_bounded_number_of_pairs(db: Path) -> None:
    """Full reads of many conversations through one store keep at most MAX_SNAPSHOTS of
    them converted (the oldest read goes first), and every read stays exact."""
    from sessiontape.storage.skillet.item_store import MAX_SNAPSHOTS

    async def body(store: ItemStore) -> None:
        names = [f"s{n}" for n in range(MAX_SNAPSHOTS + 5)]
        for name in names:
            session = store.session(USER, name)
            await session.add_items([msg(name)])
            assert await session.get_items() == [msg(name)]
        assert len(store.snapshots.by_pair) == MAX_SNAPSHOTS
        assert (USER, names[0]) not in store.snapshots.by_pair
        assert (USER, names[-1]) in store.snapshots.by_pair
        assert await store.session(USER, names[0]).get_items() == [msg(names[0])]
    run_store(body, db)
