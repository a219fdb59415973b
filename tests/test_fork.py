"""``sessiontape sessions fork`` and ``storage.catalog.fork.fork_session``.

Conversations are recorded with the real ``Runner`` on scripted models (parallel tool
calls, reasoning, an ``Agent.as_tool`` subagent), forked by the installed executable (or
the library function, to make it fail half-way), and the fork is read back from the files:
the store rows, the log lines and the AgentUse tree of turns 1..N, the original unchanged
byte for byte, and a run that continues the fork giving the model exactly what the
original's model got at the start of turn N + 1.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel
from harness import now_ms, run_cli, snapshot
from scripted import call, final, model, parts, reasoning, run_agent, steps_of, tools_step, usage

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import LoadedSession, load_session
from sessiontape.storage.catalog import fork
from sessiontape.storage.ids import ulid_ms
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.compaction import archived_items
from sessiontape.storage.skillet.links import find_agentuse_dir
from sessiontape.storage.skillet.log_owners import log_owner
from sessiontape.storage.skillet.log_reader import SessionLogReader
from sessiontape.storage.skillet.summarizers import is_summary

ANN = "ann@example.com"
ULID = re.compile(rb"[0-9A-HJKMNP-TV-Z]{26}")
ID_KEYS = ("id", "sessionID", "messageID", "parentSessionID")


@function_tool
def square(n: int) -> int:
    """Square a number."""
    return n * n


def planner(turn: int) -> tuple[Agent[Any], ScriptedModel]:
    """Turn ``turn``: reasoning, two parallel calls of a tool and one of a subagent, an answer."""
    helper = Agent(name="Helper", model=model(final(f"helped {turn}", usage(3, 1))))
    scripted = model(tools_step(call("square", {"n": turn}), call("square", {"n": turn + 1}),
                                call("helper", {"input": f"q{turn}"}),
                                extra=[reasoning(f"plan {turn}")], u=usage(10, 2)),
                     final(f"answer {turn}", usage(20, 4)))
    return Agent(name="Planner", tools=[square, helper.as_tool("helper", "Ask.")],
                 model=scripted), scripted


def counter(turn: int) -> tuple[Agent[Any], ScriptedModel]:
    """Turn ``turn``: one tool call and an answer (three items that count for compaction)."""
    scripted = model(tools_step(call("square", {"n": turn})), final(f"counted {turn}"))
    return Agent(name="Counter", tools=[square], model=scripted), scripted


@dataclass
class Recorded:
    """A recorded conversation: where it went, and each turn's scripted model."""

    name: str
    session_dir: Path
    log_path: Path
    models: list[ScriptedModel]


async def record(name: str, turns: int, agent: Any = planner, first: int = 0,
                 **options: Any) -> Recorded:
    async with Recorder(ANN, name, **options) as rec:
        models = []
        for turn in range(first, first + turns):
            runner, scripted = agent(turn)
            await run_agent(rec, runner, f"prompt {turn}", streamed=turn % 2 == 1)
            models.append(scripted)
        assert rec.errors == 0
        session_dir, log_path = rec.session_dir, rec.log_path
    assert session_dir is not None
    return Recorded(name, session_dir, log_path, models)


def store_file() -> Path:
    return SkilletPaths.resolve().store_file


def rows(name: str, table: str = "session_items") -> list[tuple[int, str]]:
    """A pair's rows ``(created_at, item_json)`` in the order they are read (none when the
    store has no such table)."""
    with closing(sqlite3.connect(store_file())) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            return []
        return conn.execute(f"SELECT created_at, item_json FROM {table} WHERE user_id = ? "
                            "AND session_name = ? ORDER BY created_at, id", (ANN, name)).fetchall()


def before_prompt(found: list[tuple[int, str]], prompt: str) -> list[tuple[int, str]]:
    """The rows before the user message ``prompt`` (the start of a turn)."""
    [index] = [i for i, (_, text) in enumerate(found)
               if json.loads(text).get("role") == "user"
               and json.loads(text).get("content") == prompt]
    return found[:index]


def store_content() -> dict[str, list[Any]]:
    """Every row of every table of the store (its bytes may change with a checkpoint)."""
    with closing(sqlite3.connect(store_file())) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                             "'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}"), key=repr) for t in tables}


def world(base: Path) -> dict[str, Any]:
    """Every file under ``base``, with the store as its rows."""
    found = {path: data for path, data in snapshot(base).items()
             if not path.endswith(".sqlite")}
    return {"files": found, "store": store_content()}


def original(recorded: Recorded) -> dict[str, Any]:
    """The original's own files (tree, log, owner record) and rows, byte for byte."""
    owner = recorded.log_path.with_name(f".{recorded.log_path.stem}.owner.json")
    return {"tree": snapshot(recorded.session_dir), "log": recorded.log_path.read_bytes(),
            "owner": owner.read_bytes(), "rows": rows(recorded.name),
            "archive": rows(recorded.name, "session_items_archive")}


def forked_json(*args: str) -> dict[str, Any]:
    done = run_cli("sessions", "fork", *args, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def without_ids(document: dict[str, Any]) -> dict[str, Any]:
    """A document without its ids and references to them (a subagent call's metadata)."""
    kept = {k: v for k, v in document.items() if k not in ID_KEYS}
    state = kept.get("state")
    if isinstance(state, dict) and isinstance(state.get("metadata"), dict):
        metadata = {k: v for k, v in state["metadata"].items() if k not in ("sessionID", "path")}
        kept["state"] = {**state, "metadata": metadata}
    return kept


def same_but_ids(old: LoadedSession, new: LoadedSession) -> None:
    """``new``'s exchanges, parts (in order) and subagents are ``old``'s, ids aside."""
    assert [without_ids(m.info) for m in new.messages] == \
        [without_ids(m.info) for m in old.messages]
    assert [[without_ids(p) for p in m.parts] for m in new.messages] == \
        [[without_ids(p) for p in m.parts] for m in old.messages]
    assert new.tools == old.tools
    for old_sub, new_sub in zip(old.subagents, new.subagents, strict=True):
        # created when the fork was made (test_a_fork_and_its_subagents_are_created_...)
        assert {**without_ids(new_sub.info), "time": None} == \
            {**without_ids(old_sub.info), "time": None}
        assert new_sub.info["parentSessionID"] == new.id
        same_but_ids(old_sub, new_sub)


def linked_consistently(session: LoadedSession) -> None:
    """Every id in the tree is the one its directory, file and parent say."""
    assert session.directory.name[:26] == session.id
    for message in session.messages:
        assert message.directory.name == message.info["id"]
        assert message.info["sessionID"] == session.id
        for part in message.parts:
            assert (part["sessionID"], part["messageID"]) == (session.id, message.info["id"])
            assert (message.directory / "part" / f"{part['id']}.json").is_file()
            metadata = part.get("state", {}).get("metadata", {})
            if "path" in metadata:
                child = session.directory / metadata["path"]
                assert child.name[:26] == metadata["sessionID"]
                assert json.loads((child / "session.json").read_bytes())["id"] == \
                    metadata["sessionID"]
    for sub in session.subagents:
        linked_consistently(sub)


def files_under(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file())


def private(root: Path) -> bool:
    return all(stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600)
               for p in [root, *root.rglob("*")])


async def continue_fork(name: str, turn: int) -> tuple[ScriptedModel, list[Any]]:
    """One more turn of ``name``; its model, and the items it read before the run."""
    async with Recorder(ANN, name) as rec:
        before = await rec.session.get_items()
        runner, scripted = planner(turn)
        await run_agent(rec, runner, f"prompt {turn}", streamed=False)
        assert rec.errors == 0
    return scripted, before


def history_sent(scripted: ScriptedModel) -> list[Any]:
    """What the first call of a run was sent before the run's own prompt (its last item)."""
    sent = scripted.calls[0].input
    assert isinstance(sent, list) and sent[-1]["role"] == "user"
    return sent[:-1]


# -- a plain conversation -----------------------------------------------------------------


def test_a_fork_holds_turns_1_to_n_in_every_layout_and_the_original_is_untouched() -> None:
    trip = asyncio.run(record("trip", 3))
    before = original(trip)

    result = forked_json("trip", "--at-turn", "2", "--as", "trip-b")
    new_dir, new_log = Path(result["agentuse_dir"]), Path(result["log_path"])
    assert result == {"user_id": ANN, "session_name": "trip-b", "forked_from": "trip",
                      "at_turn": 2, "source_turns": 3, "rows": 18,
                      "from_archive": False, "log_path": str(new_log),
                      "agentuse_dir": str(new_dir), "forked": ["store", "log", "agentuse"],
                      "missing": []}
    assert original(trip) == before  # the original, byte for byte

    # store: the rows of turns 1..2, as they were (9 items a turn: never a call without output)
    assert rows("trip-b") == before_prompt(rows("trip"), "prompt 2") and len(rows("trip-b")) == 18
    assert find_agentuse_dir(store_file(), ANN, "trip-b") == new_dir

    # log: the lines of turns 1 and 2, complete, in a log owned by the new pair; each
    # user_message names the fork (its name, and its AgentUse session, which holds their
    # copies), every other line is the original's byte for byte
    old_turns = SessionLogReader(trip.log_path).turns()
    new_reader = SessionLogReader(new_log)
    new_dir_id = new_dir.name[:26]
    assert [dataclasses.replace(t, session_id=trip.session_dir.name[:26])
            for t in new_reader.turns()] == old_turns[:2] and new_reader.problems == []
    assert [t.session_id for t in new_reader.turns()] == [new_dir_id, new_dir_id]
    assert all(turn.complete for turn in new_reader.turns())
    third = [e.line for e in SessionLogReader(trip.log_path).entries()
             if e.kind == "user_message"][2]
    old_lines = trip.log_path.read_bytes().split(b"\n")[:third - 1]
    new_lines = new_log.read_bytes().split(b"\n")[:-1]
    assert len(new_lines) == third - 1
    for old_line, new_line in zip(old_lines, new_lines, strict=True):
        if b'"user_message"' not in old_line:
            assert new_line == old_line
            continue
        was, now = json.loads(old_line), json.loads(new_line)
        assert list(now) == list(was)  # the same keys, in the same order
        assert {**was, "sessionName": "trip-b", "sessionId": new_dir_id,
                "sessionDir": str(new_dir)} == now
    assert log_owner(new_log) == {"user_id": ANN, "session_name": "trip-b"}

    # tree: a new session beside the original with exchanges 1..2, their parts and subagents
    old, new = load_session(trip.session_dir), load_session(new_dir)
    assert new_dir.parent == trip.session_dir.parent
    assert new_dir.name.endswith("-planner") and new_dir.name != trip.session_dir.name
    assert len(new.messages) == 2 and len(new.subagents) == 2
    kept = LoadedSession(old.directory, old.info, old.tools, old.messages[:2], old.subagents[:2])
    same_but_ids(kept, new)
    linked_consistently(new)
    assert [p["type"] for p in parts(new.messages[0])].count("tool") == 3
    assert new.info["id"] == new_dir.name[:26] and new.info["status"] == "completed"
    assert new.info["conversation"] == {"user": ANN, "name": "trip-b", "log": str(new_log)}
    assert new.info["forkedFrom"] == {"sessionId": old.id,
                                      "messageId": old.messages[1].info["id"]}
    assert "recorder" not in new.info
    # tools.json as the recorder writes it (compact: storage/agentuse/writer.py)
    assert (new_dir / "tools.json").read_bytes() == (trip.session_dir / "tools.json").read_bytes()
    # every id is new: the original's appear only in forkedFrom
    old_ids = {m for p in files_under(trip.session_dir) for m in ULID.findall(p.read_bytes())}
    for path in files_under(new_dir):
        document = json.loads(path.read_bytes())
        document.pop("forkedFrom", None)
        assert not old_ids & set(ULID.findall(json.dumps(document).encode())), path
    assert private(new_dir) and stat.S_IMODE(new_log.stat().st_mode) == 0o600

    # listed with its two turns, the original with its three
    listed = json.loads(run_cli("sessions", "list", "--json").stdout)
    found = {entry["session_name"]: entry for entry in listed}
    assert (found["trip-b"]["turns"], found["trip-b"]["items"]) == (2, 18)
    assert found["trip-b"]["agentuse_dir"] == str(new_dir)
    assert (found["trip"]["turns"], found["trip"]["items"]) == (3, 27)


def test_continuing_a_fork_gives_the_model_only_its_turns() -> None:
    trip = asyncio.run(record("trip", 3))
    result = forked_json("trip", "--at-turn", "2", "--as", "trip-b")
    before = original(trip)

    scripted, stored = asyncio.run(continue_fork("trip-b", 7))
    # what the original's model was sent at the start of turn 3: turns 1 and 2, as stored
    expected = history_sent(trip.models[2])
    assert stored == expected and len(expected) == 18
    assert history_sent(scripted) == expected
    assert scripted.calls[0].input[-1]["content"] == "prompt 7"
    assert original(trip) == before

    # the run went on in the fork's own files
    new = load_session(Path(result["agentuse_dir"]))
    assert len(new.messages) == 3 and new.messages[2].info["user"]["prompt"]["task"] == "prompt 7"
    assert new.info["forkedFrom"]["sessionId"] == load_session(trip.session_dir).id
    turns = SessionLogReader(Path(result["log_path"])).turns()
    assert [t.user_input for t in turns] == ["prompt 0", "prompt 1", "prompt 7"]
    assert len(rows("trip-b")) == 27


def test_a_fork_at_a_failed_turn_ends_with_its_error() -> None:
    async def main() -> tuple[Path, dict[str, Any]]:
        async with Recorder(ANN, "flaky") as rec:
            await run_agent(rec, Agent(name="A", model=model(final("one"))), "p0", False)
            with pytest.raises(RuntimeError):
                await run_agent(rec, Agent(name="A", model=model(RuntimeError("boom"))), "p1",
                                False)
            assert rec.session_dir is not None
            failed = json.loads((rec.session_dir / "session.json").read_bytes())
            await run_agent(rec, Agent(name="A", model=model(final("three"))), "p2", False)
            return rec.session_dir, failed

    session_dir, failed = asyncio.run(main())
    assert failed["status"] == "error" and failed["error"]["message"] == "boom"
    result = forked_json("flaky", "--at-turn", "2", "--as", "flaky-2")
    info = load_session(Path(result["agentuse_dir"])).info
    # the status and error the original had when that turn failed
    assert (info["status"], info["error"]) == ("error", failed["error"])
    assert load_session(session_dir).info["status"] == "completed"
    assert [json.loads(text)["content"] for _, text in rows("flaky-2")
            if json.loads(text)["role"] == "user"] == ["p0", "p1"]


def test_a_fork_and_its_subagents_are_created_when_it_is_made() -> None:
    """AgentUse dates a session when it creates it (createSession: ``time.created`` and
    ``updated`` are ``Date.now()``, beside a new ``ulid()``; src/session/manager.ts:355-368)
    and lists sessions newest first by ``time.created`` (src/cli/sessions.ts:187, 229), a
    session's subagents by it too (sessions.ts:800): a fork is created when it is made,
    the time its new ids carry, and its origin is in ``forkedFrom``."""
    trip = asyncio.run(record("trip", 3))
    old = load_session(trip.session_dir)
    before = now_ms()
    result = forked_json("trip", "--at-turn", "3", "--as", "trip-b")
    after = now_ms()
    new = load_session(Path(result["agentuse_dir"]))
    assert len(new.subagents) == 3
    for session in [new, *new.subagents]:
        made = ulid_ms(session.id)
        assert before <= made <= after
        assert session.info["time"] == {"created": made, "updated": made}
    assert new.info["forkedFrom"] == {"sessionId": old.id,
                                      "messageId": old.messages[2].info["id"]}
    # listed as AgentUse lists them: the fork first, the newest
    infos = [json.loads(p.read_bytes()) for p in trip.session_dir.parent.glob("*/session.json")]
    assert [i["id"] for i in sorted(infos, key=lambda i: -i["time"]["created"])] == \
        [new.id, old.id]
    # the exchanges keep their own times: when they happened
    assert [m.info["time"] for m in new.messages] == [m.info["time"] for m in old.messages]


# -- a compacted conversation ----------------------------------------------------------------


@pytest.fixture
def compacted() -> Recorded:
    """Five turns of three candidates with a threshold of 6: the end of turn 3 archives
    turns 1 and 2 under a summary; the end of turn 5 archives that summary, turns 3 and 4
    under a new one. Live: the new summary and turn 5."""
    recorded = asyncio.run(record("long", 5, agent=counter, compaction_threshold=6))
    archived = [json.loads(text) for _, text in rows("long", "session_items_archive")]
    assert [item["content"] for item in archived if item.get("role") == "user"] == \
        [f"prompt {turn}" for turn in range(4)]
    assert sum(map(is_summary, archived)) == 1
    live = [json.loads(text) for _, text in rows("long")]
    assert is_summary(live[0]) and live[1]["content"] == "prompt 4" and len(live) == 5
    return recorded


async def archived_originals(name: str) -> list[Any]:
    """The archived items but the summaries, as the Python SDK reads them."""
    found = await archived_items(store_file(), ANN, name)
    return [item for _, item in found if not is_summary(item)]


def test_a_fork_inside_the_compacted_part_takes_its_turns_from_the_archive(
        compacted: Recorded) -> None:
    before = original(compacted)
    result = forked_json("long", "--at-turn", "1", "--as", "long-1")
    assert (result["from_archive"], result["source_turns"]) == (True, 5)
    # the rows of turn 1 as they were added, from the archive, without a summary
    archived = rows("long", "session_items_archive")
    assert rows("long-1") == before_prompt(archived, "prompt 1") and len(rows("long-1")) == 4
    assert [t.user_input for t in SessionLogReader(Path(result["log_path"])).turns()] == \
        ["prompt 0"]
    assert original(compacted) == before
    # continued: the model gets what the original's got at the start of turn 2
    scripted, stored = asyncio.run(continue_fork("long-1", 9))
    assert history_sent(scripted) == stored == history_sent(compacted.models[1])


@pytest.mark.parametrize("at_turn", [3, 4])
def test_a_fork_across_two_compactions_leaves_out_the_archived_summary(
        compacted: Recorded, at_turn: int) -> None:
    # turn 3 and turn 4 were archived by the second compaction (with the first's summary)
    result = forked_json("long", "--at-turn", str(at_turn), "--as", "fork")
    assert result["from_archive"] is True
    originals = [row for row in rows("long", "session_items_archive")
                 if not is_summary(json.loads(row[1]))]
    assert rows("fork") == originals[:4 * at_turn]
    scripted, stored = asyncio.run(continue_fork("fork", 9))
    expected = asyncio.run(archived_originals("long"))[:4 * at_turn]
    assert history_sent(scripted) == stored == expected


def test_a_fork_at_a_live_turn_keeps_the_summary(compacted: Recorded) -> None:
    result = forked_json("long", "--at-turn", "5", "--as", "long-5")
    assert result["from_archive"] is False
    # the summary and turn 5: what the original's model gets from now on
    assert rows("long-5") == rows("long")
    # the compactions, during turns 3 and 5, are in the fork's log and tree
    turns = SessionLogReader(Path(result["log_path"])).turns()
    assert [len(steps_of(t, "compaction")) for t in turns] == [0, 0, 1, 0, 1]
    tree = load_session(Path(result["agentuse_dir"]))
    assert [len(parts(m, "compaction")) for m in tree.messages] == [0, 0, 1, 0, 1]

    async def items_of_the_original() -> list[Any]:
        async with Recorder(ANN, "long") as rec:
            return await rec.session.get_items()

    expected = asyncio.run(items_of_the_original())
    scripted, stored = asyncio.run(continue_fork("long-5", 9))
    assert history_sent(scripted) == stored == expected


# -- what is refused, and what is left ---------------------------------------------------------


def test_a_fork_may_take_the_longest_name_skilled_crew_can_write() -> None:
    """A session name of 249 characters is a 255-byte log file name, as skilled_crew writes
    it (``{name}.jsonl``, uncut): the fork's log is written there, through a temporary
    file whose own name must fit too (storage/file_writes.py ``atomic_write``)."""
    asyncio.run(record("trip", 2))
    longest = "t" * 249
    result = forked_json("trip", "--at-turn", "1", "--as", longest)
    assert Path(result["log_path"]).name == f"{longest}.jsonl"
    assert [t.user_input for t in SessionLogReader(Path(result["log_path"])).turns()] == \
        ["prompt 0"]


def test_refused_forks_write_nothing(isolated_env: Path) -> None:
    trip = asyncio.run(record("trip", 3))
    asyncio.run(record("taken", 1))
    # a name that only a log of skilled_crew's holds (no owner record, no rows)
    shutil.copy(trip.log_path, trip.log_path.with_name("crew.jsonl"))
    before = world(isolated_env)

    cases = {
        ("--at-turn", "2", "--as", "taken"): (1, "'taken' of 'ann@example.com' already exists"),
        ("--at-turn", "2", "--as", "trip"): (1, "already exists (rows in session_items)"),
        ("--at-turn", "1", "--as", "crew"): (1, "already exists (a replay log"),
        ("--at-turn", "0", "--as", "new"): (2, "turn 0 is out of range: 'trip' has 3 turns"),
        ("--at-turn", "4", "--as", "new"): (2, "turn 4 is out of range: 'trip' has 3 turns"),
        ("--at-turn", "2", "--as", ""): (2, "--as is empty: the new session needs a name"),
    }
    for args, (code, message) in cases.items():
        done = run_cli("sessions", "fork", "trip", *args)
        assert (done.returncode, done.stdout) == (code, ""), (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    unknown = run_cli("sessions", "fork", "nope", "--at-turn", "1", "--as", "new")
    assert unknown.returncode == 1 and "no session named 'nope'" in unknown.stderr
    usage_error = run_cli("sessions", "fork", "trip", "--as", "new")
    assert usage_error.returncode == 2 and "--at-turn" in usage_error.stderr
    assert world(isolated_env) == before


def test_layouts_that_disagree_on_the_turns_are_not_forked(isolated_env: Path) -> None:
    trip = asyncio.run(record("trip", 3))
    shutil.rmtree(load_session(trip.session_dir).messages[2].directory)
    before = world(isolated_env)
    done = run_cli("sessions", "fork", "trip", "--at-turn", "1", "--as", "new")
    assert done.returncode == 1
    assert "disagree on its turns (store 3, log 3, agentuse 2)" in done.stderr
    assert world(isolated_env) == before


def test_a_missing_layout_is_left_out_and_named() -> None:
    trip = asyncio.run(record("trip", 3))
    trip.log_path.unlink()
    done = run_cli("sessions", "fork", "trip", "--at-turn", "2", "--as", "no-log")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("forked 'trip' at turn 2 of 3 as 'no-log' of "
                                  "'ann@example.com': 18 stored items, AgentUse ")
    assert done.stdout.rstrip().endswith("; not forked, 'trip' has none: log")
    tree_dir = find_agentuse_dir(store_file(), ANN, "no-log")
    assert tree_dir is not None
    assert load_session(tree_dir).info["conversation"] == {"user": ANN, "name": "no-log"}
    assert rows("no-log") == before_prompt(rows("trip"), "prompt 2")
    assert not list(trip.log_path.parent.glob("*no*log*")) and \
        not list(trip.log_path.parent.glob(".no*log*"))


def _store_fails(*_: Any) -> None:
    raise OSError(28, "No space left on device")


def _fails_on_the_fifth_file(calls: list[int]) -> Any:
    write = fork._write_json

    def failing(path: Path, document: dict[str, Any]) -> None:
        calls.append(1)
        if len(calls) == 5:
            raise OSError(28, "No space left on device", str(path))
        write(path, document)
    return failing


@pytest.mark.parametrize("where", ["tree", "store", "store race"])
def test_a_fork_that_fails_half_way_leaves_nothing(isolated_env: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   where: str) -> None:
    trip = asyncio.run(record("trip", 3))
    if where == "tree":
        monkeypatch.setattr(fork, "_write_json", _fails_on_the_fifth_file([]))
    elif where == "store":
        monkeypatch.setattr(fork, "_write_store", _store_fails)
    else:  # the name is taken between the checks and the store's transaction
        monkeypatch.setattr(fork, "_check_new_pair", lambda *_: None)
        with closing(sqlite3.connect(store_file())) as conn, conn:
            conn.execute("INSERT INTO sessiontape_links VALUES (?, ?, ?)", (ANN, "new", "/x"))
    before = world(isolated_env)
    paths = SkilletPaths.resolve()
    with pytest.raises((OSError, fork.NameTakenError)):
        fork.fork_session(paths.store_file, ANN, "trip", "new", at_turn=2,
                          agentuse_dir=trip.session_dir, log_path=trip.log_path,
                          logs_root=paths.logs_root)
    assert world(isolated_env) == before
    assert os.listdir(trip.session_dir.parent) == [trip.session_dir.name]
