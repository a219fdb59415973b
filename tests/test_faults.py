"""A full disk and read-only directories while recording.

The run always completes with its own output; the recorder reports the error
(one warning, counted in ``rec.errors``, raised after the run in strict mode);
what was written before stays whole; and once the fault is gone the next run
of the same conversation is recorded normally.

We run as root, so file modes stop nothing: :class:`FileFaults` wraps the
``os`` calls the storage layer makes, and the SQLite store is made to fail by
SQLite itself (``PRAGMA max_page_count``: "database or disk is full";
``PRAGMA query_only``: "attempt to write a readonly database").
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel
from scripted import call, final, model, read_session, read_turns, run_agent, tools_step

from sessiontape import Recorder, RecorderError
from sessiontape.storage.file_writes import WORKER
from sessiontape.storage.paths import SkilletPaths, agentuse_data_root
from sessiontape.storage.skillet.log_reader import SessionLogReader

BULK = 20_000  # a tool output this long needs new pages in the store


@function_tool
def bulky(n: int) -> str:
    """Returns a long text."""
    return f"bulk {n} " + "x" * BULK


class FileFaults:
    """Makes the file system under chosen paths act full (ENOSPC) or read-only (EROFS).

    A full path takes ``budget`` more bytes (a write that does not fit is cut
    short, as on a real disk, and the next one fails) and no new directory;
    a read-only one refuses every change. ``hits`` counts the refusals.
    """

    MUTATING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.faults: dict[str, list[int]] = {}  # path prefix -> [errno, bytes left]
        self.hits = 0
        real = {name: getattr(os, name) for name in (
            "write", "open", "mkdir", "replace", "rename", "link", "unlink", "ftruncate", "chmod")}
        self._real_ftruncate = real["ftruncate"]

        def write(fd: int, data: Any) -> int:
            fault = self._fault(os.readlink(f"/proc/self/fd/{fd}"))
            if fault is None:
                return real["write"](fd, data)
            if fault[0] == errno.ENOSPC and fault[1] > 0:
                written = real["write"](fd, memoryview(data)[:fault[1]])
                fault[1] -= written
                return written
            raise self._refuse(fault)

        def opener(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            fault = self._fault(path)
            if fault is not None and fault[0] == errno.EROFS and flags & self.MUTATING:
                raise self._refuse(fault)
            return real["open"](path, flags, *args, **kwargs)

        def guard(name: str, always: bool) -> Callable[..., Any]:
            def call(path: Any, *args: Any, **kwargs: Any) -> Any:
                fault = self._fault(path)
                if fault is not None and (always or fault[0] == errno.EROFS):
                    raise self._refuse(fault)
                return real[name](path, *args, **kwargs)
            return call

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "open", opener)
        monkeypatch.setattr(os, "mkdir", guard("mkdir", always=True))
        for name in ("replace", "rename", "link", "unlink", "chmod"):
            monkeypatch.setattr(os, name, guard(name, always=False))
        monkeypatch.setattr(os, "ftruncate", self._truncate)

    def _truncate(self, fd: int, size: int) -> None:
        fault = self._fault(os.readlink(f"/proc/self/fd/{fd}"))
        if fault is not None and fault[0] == errno.EROFS:
            raise self._refuse(fault)
        self._real_ftruncate(fd, size)

    def _fault(self, path: Any) -> list[int] | None:
        if isinstance(path, int):
            return None
        text = os.path.abspath(os.fsdecode(path))
        return next((f for root, f in self.faults.items() if text.startswith(root)), None)

    def _refuse(self, fault: list[int]) -> OSError:
        self.hits += 1
        return OSError(fault[0], os.strerror(fault[0]))

    def full(self, path: Path, budget: int = 0) -> None:
        self.faults[str(path)] = [errno.ENOSPC, budget]

    def read_only(self, path: Path) -> None:
        self.faults[str(path)] = [errno.EROFS, 0]

    def clear(self) -> None:
        self.faults.clear()


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> FileFaults:
    # The faults are made in this process: the tree's files are written here too, not
    # by the file-writing helper (whose own errors test_file_writes.py makes for real).
    monkeypatch.setattr(WORKER, "in_process", True)
    return FileFaults(monkeypatch)


def agent_for(turn: int) -> tuple[Agent[Any], ScriptedModel]:
    """One tool call with a long output, then the answer ``answer {turn}``."""
    scripted = model(tools_step(call("bulky", {"n": turn}, f"c_bulk{turn}")),
                     final(f"answer {turn}"))
    return Agent(name="Filler", tools=[bulky], model=scripted), scripted


def tree_files() -> dict[Path, bytes]:
    """Every file under the AgentUse root and the skillet state directory, but the store."""
    store = SkilletPaths.resolve().store_file
    files = {}
    for root in (agentuse_data_root(), SkilletPaths.resolve().state):
        for path in root.rglob("*") if root.exists() else ():
            if path.is_file() and not path.name.startswith(store.name):
                files[path] = path.read_bytes()
    return files


def store_rows() -> dict[int, str]:
    with sqlite3.connect(SkilletPaths.resolve().store_file) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return dict(conn.execute("SELECT id, item_json FROM session_items"))


def assert_nothing_damaged(before: dict[Path, bytes], rows: dict[int, str]) -> None:
    """Files and rows written before the fault are all there and whole; no temp file is left."""
    now = tree_files()
    assert not [p for p in now if p.name.endswith(".tmp")]
    for path, old in before.items():
        if path.suffix == ".jsonl":
            assert now[path].startswith(old)  # appended to, never changed
            reader = SessionLogReader(path)
            reader.entries()
            assert reader.problems == []  # a line cut short by the full disk was taken back
        elif path.suffix == ".json":
            assert isinstance(orjson.loads(now[path]), dict), path
    current = store_rows()
    assert all(current.get(row_id) == text for row_id, text in rows.items())


def recording_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "sessiontape" and "recording error" in r.getMessage()]


async def stored(rec: Recorder) -> list[Any]:
    return await rec.session.get_items()


def assert_recorded_normally(rec: Recorder, turn: int, history: int,
                             scripted: ScriptedModel) -> None:
    """Run ``turn`` is in every layout, and its model saw the ``history`` stored before it."""
    first = scripted.first_call
    assert first is not None and len(first.input) == history + 1
    session = read_session(rec)
    assert session.info["status"] == "completed"
    message = session.messages[-1]
    assert message.info["user"]["prompt"]["task"] == f"prompt {turn}"
    assert "completed" in message.info["time"]
    tool = next(p for p in message.parts if p["type"] == "tool")
    assert tool["state"]["status"] == "completed"
    assert tool["state"]["output"].startswith(f"bulk {turn} ")
    turns = read_turns(rec)
    assert turns[-1].complete and turns[-1].user_input == f"prompt {turn}"
    assert turns[-1].text == f"answer {turn}"
    items = asyncio.run(stored(rec))
    assert len(items) == history + 4  # prompt, call, output, answer
    assert items[-1]["content"][0]["text"] == f"answer {turn}"


# -- a disk that fills up during a run -----------------------------------------------------


def _fill_agentuse(rec: Recorder, faults: FileFaults) -> Callable[[], None]:
    faults.full(agentuse_data_root(), budget=1500)  # a file or two, then one cut short
    return faults.clear


def _fill_log(rec: Recorder, faults: FileFaults) -> Callable[[], None]:
    faults.full(SkilletPaths.resolve().logs_root, budget=300)  # a line, then one cut short
    return faults.clear


async def _pragma(rec: Recorder, sql: str) -> Any:
    rows = await rec.store.execute(sql)
    return rows[0][0] if rows else None


def _store_pragma(set_sql: str, reset_sql: str) -> Callable[[Recorder, FileFaults],
                                                            Callable[[], None]]:
    def start(rec: Recorder, faults: FileFaults) -> Callable[[], None]:
        asyncio.run(_pragma(rec, set_sql))
        return lambda: asyncio.run(_pragma(rec, reset_sql))
    return start


def _fill_store(rec: Recorder, faults: FileFaults) -> Callable[[], None]:
    """The store's connection may not grow the file: SQLite's own "disk is full"."""
    pages = asyncio.run(_pragma(rec, "PRAGMA page_count"))
    limit = asyncio.run(_pragma(rec, "PRAGMA max_page_count"))
    return _store_pragma(f"PRAGMA max_page_count = {pages}",
                         f"PRAGMA max_page_count = {limit}")(rec, faults)


FAULTS = {  # how to start it, the error it raises and what that error says
    "agentuse-full": (_fill_agentuse, OSError, "No space left on device"),
    "log-full": (_fill_log, OSError, "No space left on device"),
    "store-full": (_fill_store, sqlite3.OperationalError, "database or disk is full"),
    "store-read-only": (_store_pragma("PRAGMA query_only = ON", "PRAGMA query_only = OFF"),
                        sqlite3.OperationalError, "attempt to write a readonly database"),
}


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_during_a_run_costs_the_recording_never_the_run(
        fault: str, strict: bool, faults: FileFaults, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sessiontape")
    start, error_type, says = FAULTS[fault]
    rec = Recorder(session_name="faulty", strict=strict, compaction_threshold=None)
    agent, scripted = agent_for(0)
    assert asyncio.run(run_agent(rec, agent, "prompt 0", streamed=False)) == "answer 0"
    files, rows = tree_files(), store_rows()
    assert rec.errors == 0 and len(rows) == 4

    stop = start(rec, faults)
    agent, scripted = agent_for(1)
    if strict:
        with pytest.raises(RecorderError) as raised:
            asyncio.run(run_agent(rec, agent, "prompt 1", streamed=True))
        assert isinstance(raised.value.__cause__, error_type)
        assert scripted.remaining_steps == 0  # raised after the run went to its end
    else:
        assert asyncio.run(run_agent(rec, agent, "prompt 1", streamed=True)) == "answer 1"
    assert rec.errors >= 1
    [warning] = recording_warnings(caplog)
    assert says in warning
    assert faults.hits > 0 or error_type is not OSError
    stop()
    assert_nothing_damaged(files, rows)

    history = len(asyncio.run(stored(rec)))  # what run 1 could store
    errors = rec.errors
    agent, scripted = agent_for(2)
    assert asyncio.run(run_agent(rec, agent, "prompt 2", streamed=False)) == "answer 2"
    assert rec.errors == errors
    assert_recorded_normally(rec, 2, history, scripted)
    assert len(recording_warnings(caplog)) == 1


# -- directories that are read-only from the start -------------------------------------------


READ_ONLY = {
    "agentuse": lambda: agentuse_data_root(),
    "logs": lambda: SkilletPaths.resolve().logs_root,
    "store": lambda: SkilletPaths.resolve().store_file,
}


@pytest.mark.parametrize("where", list(READ_ONLY))
def test_a_read_only_directory_is_reported_and_the_rest_is_recorded(
        where: str, faults: FileFaults, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sessiontape")
    root = READ_ONLY[where]()
    faults.read_only(root)
    rec = Recorder(session_name="read-only")
    agent, scripted = agent_for(0)
    assert asyncio.run(run_agent(rec, agent, "prompt 0", streamed=False)) == "answer 0"
    assert rec.errors >= 1 and faults.hits > 0
    [warning] = recording_warnings(caplog)
    assert "Read-only file system" in warning
    assert not root.exists()  # nothing at all was made there

    # the layouts that could be written recorded the whole run
    if where != "logs":
        assert read_turns(rec)[0].text == "answer 0"
    if where == "logs":
        assert read_session(rec).info["status"] == "completed"
    if where != "store":
        assert len(asyncio.run(stored(rec))) == 4
    else:
        # the store holds the AgentUse link too: that layout waits for the store
        assert rec.session_dir is None

    faults.clear()
    errors = rec.errors
    history = len(asyncio.run(stored(rec)))
    agent, scripted = agent_for(1)
    assert asyncio.run(run_agent(rec, agent, "prompt 1", streamed=True)) == "answer 1"
    assert rec.errors == errors
    assert_recorded_normally(rec, 1, history, scripted)
