"""``sessiontape export --format ledger``: recorded conversations as an Agents Ledger.

The module's world records conversations in-process with the real SDK Runner on scripted
models (parallel tool calls, an ``Agent.as_tool`` subagent, a failing tool, a handoff, a
streamed second turn), leaves some of them with only part of their files (a log without
its tree, a skilled_crew-style log, a tree without store or log, stored items alone),
then runs the real executable on them and reads the SQLite files it wrote: the seed's
columns, its example queries, and the content of every table against the recorded files.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import EXECUTABLE, CliResults, isolated, run_many
from scripted import call, fail, final, model, reasoning, run_agent, square, tools_step, usage

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import LoadedSession, load_session
from sessiontape.storage.catalog.conversation import LedgerConversation, LedgerSourceError
from sessiontape.storage.exports.ledger import LEDGER_FORMAT, export_ledger
from sessiontape.storage.names import reported_model
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.log_reader import SessionLogReader

ANN, BOB, CAROL, DAVE = "ann@example.com", "bob@example.com", "carol@example.com", \
    "dave@example.com"

# The Agents Ledger's tables and columns, as the seed document defines them.
SEED_COLUMNS = {
    "agent_sessions": [
        ("id", "TEXT"), ("source", "TEXT"), ("model", "TEXT"), ("project", "TEXT"),
        ("created_at", "INTEGER"), ("message_count", "INTEGER"),
        ("parent_session_id", "TEXT"), ("parent_message_id", "TEXT"), ("tool_call_id", "TEXT"),
        ("task_description", "TEXT"), ("task_status", "TEXT"), ("is_subagent", "INTEGER"),
        ("context_token_limit", "INTEGER"), ("context_tokens_used", "INTEGER"),
        ("is_agentic", "INTEGER"), ("force_mode", "TEXT"), ("workspace_path", "TEXT")],
    "agent_messages": [
        ("id", "TEXT"), ("session_id", "TEXT"), ("role", "TEXT"), ("content", "TEXT"),
        ("sequence", "INTEGER"), ("timestamp", "INTEGER"), ("checkpoint_id", "TEXT"),
        ("is_agentic", "INTEGER"), ("is_plan_execution", "INTEGER"), ("context_json", "TEXT"),
        ("cursor_rules_json", "TEXT"), ("metadata_json", "TEXT")],
    "agent_turns": [
        ("id", "TEXT"), ("session_id", "TEXT"), ("parent_turn_id", "TEXT"),
        ("query_message_ids", "TEXT"), ("response_message_id", "TEXT"), ("model", "TEXT"),
        ("token_count", "INTEGER"), ("timestamp", "INTEGER"), ("has_children", "INTEGER"),
        ("tool_call_count", "INTEGER")],
    "agent_tool_calls": [
        ("id", "TEXT"), ("message_id", "TEXT"), ("session_id", "TEXT"), ("tool_name", "TEXT"),
        ("tool_number", "INTEGER"), ("params_json", "TEXT"), ("result_json", "TEXT"),
        ("status", "TEXT"), ("child_session_id", "TEXT"), ("started_at", "INTEGER"),
        ("completed_at", "INTEGER")],
}

# The seed's example queries, copied from it (but for a space at the end of a line).
FULL_HISTORY = """SELECT * FROM agent_messages
WHERE session_id = ?
ORDER BY sequence;"""
TURN_TREE = """WITH RECURSIVE turn_tree AS (
  SELECT * FROM agent_turns WHERE id = ?  -- start from turn
  UNION ALL
  SELECT t.* FROM agent_turns t
  JOIN turn_tree tt ON t.id = tt.parent_turn_id
)
SELECT * FROM turn_tree ORDER BY timestamp;"""
SUBAGENTS = """SELECT * FROM agent_sessions
WHERE parent_session_id = ?;"""
TOOL_STATS = """SELECT tool_name, COUNT(*) as uses,
       SUM(CASE WHEN status='completed' THEN 1 ELSE 0 END) as success
FROM agent_tool_calls
WHERE session_id = ?
GROUP BY tool_name
ORDER BY uses DESC;"""


async def plan_trip(rec: Recorder) -> None:
    """Two turns. The first: reasoning, three parallel calls (a tool, a subagent with a tool
    of its own, a tool that raises), then a handoff to Closer, who answers. The second,
    streamed: two parallel calls (the tool and the subagent), then the answer."""
    for turn in range(2):
        helper = Agent(name="Helper", instructions="Help.", tools=[square], model=model(
            tools_step(call("square", {"n": 9})), final(f"helped {turn}", usage(3, 1))))
        closer = Agent(name="Closer", instructions="Close.",
                       model=model(final(f"closed {turn}", usage(4, 2))))
        calls = [call("square", {"n": turn + 2}), call("helper", {"input": f"q{turn}"})]
        calls += [call("fail", {"city": "Atlantis"})] if turn == 0 else []
        answer = tools_step(call("transfer_to_closer", {}), u=usage(6, 1)) if turn == 0 \
            else final("trip answer 1", usage(20, 4))
        planner = Agent(name="Planner", instructions="Plan trips.",
                        tools=[square, fail, helper.as_tool("helper", "Ask the helper.")],
                        handoffs=[closer], model=model(
                            tools_step(*calls, u=usage(10, 2), extra=[reasoning("think")]),
                            answer))
        await run_agent(rec, planner, f"trip prompt {turn}", streamed=turn == 1)


async def two_squares(rec: Recorder) -> None:
    """One turn with two parallel calls of one tool."""
    agent = Agent(name="Counter", tools=[square], model=model(
        tools_step(call("square", {"n": 2}), call("square", {"n": 3})),
        final("squared", usage(5, 5))))
    await run_agent(rec, agent, "square 2 and 3", streamed=False)


@dataclass
class World(CliResults):
    """What was recorded (with what was then removed), and every command run on it."""

    base: Path
    env: dict[str, str]
    trip_dir: Path
    trip_log: Path
    logonly_log: Path
    solo_dir: Path
    results: dict[str, subprocess.CompletedProcess[str]]


    def out(self, name: str) -> Path:
        return self.base / "out" / name


def record_all() -> dict[tuple[str, str], Recorder]:
    """Record every conversation under the current environment's paths."""
    async def main() -> dict[tuple[str, str], Recorder]:
        recorders = {}
        for user, name, scenario in ((ANN, "trip", plan_trip), (ANN, "logonly", plan_trip),
                                     (BOB, "plain", two_squares), (CAROL, "solo", two_squares),
                                     (DAVE, "stored", two_squares)):
            rec = Recorder(user, name)
            await scenario(rec)
            await rec.aclose()
            assert rec.errors == 0
            recorders[(user, name)] = rec
        return recorders

    return asyncio.run(main())


def strip_to_skilled_crew(log: Path) -> None:
    """Rewrite a log as skilled_crew writes one: no model_call lines, no keys of ours."""
    lines = []
    for raw in log.read_text().splitlines():
        entry = json.loads(raw)
        if entry["kind"] == "model_call":
            continue
        for key in ("format", "userId", "sessionName", "cwd", "projectRoot", "sessionId",
                    "sessionDir"):
            entry.pop(key, None)
        for key in ("callId", "parentCallId"):
            entry.get("stepResult", {}).pop(key, None)
        lines.append(json.dumps(entry, separators=(",", ":")) + "\n")
    log.write_text("".join(lines))


def forget_pair(rec: Recorder) -> None:
    """Leave only the conversation's AgentUse tree: no store rows, link, log or owner."""
    store = SkilletPaths.resolve().store_file
    with closing(sqlite3.connect(store)) as conn, conn:
        for table in ("session_items", "sessiontape_links"):
            conn.execute(f"DELETE FROM {table} WHERE user_id = ? AND session_name = ?",
                         (rec.user_id, rec.session_name))
    rec.log_path.unlink()
    rec.log_path.with_name(f".{rec.session_name}.owner.json").unlink()


def export(out: str, *args: str) -> list[str]:
    return [str(EXECUTABLE), "export", "--format", "ledger", "--out", f"<out>/{out}", *args]


COMMANDS = {
    "trip": export("trip.sqlite", "--session", "trip", "--user", ANN, "--json"),
    "trip_again": export("trip-again.sqlite", "--session", "trip", "--user", ANN, "--json"),
    "trip_text": export("trip-text.sqlite", "--session", "trip"),
    "all": export("all.sqlite", "--json"),
    "exists": export("existing.sqlite", "--session", "trip"),
    "force": export("replaced.sqlite", "--session", "trip", "--force"),
    "unknown": export("unknown.sqlite", "--session", "nope"),
    "ambiguous": export("ambiguous.sqlite", "--session", "01"),
    "stored_only": export("stored.sqlite", "--session", "stored"),
    "no_dir": export("no/such/dir.sqlite", "--session", "trip"),
    "no_format": [str(EXECUTABLE), "export", "--out", "x.sqlite"],
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    base = tmp_path_factory.mktemp("ledger")
    with isolated(base, NO_COLOR="1") as env:
        recs = record_all()
        shutil.rmtree(recs[(ANN, "logonly")].session_dir)   # its log alone is left
        shutil.rmtree(recs[(BOB, "plain")].session_dir)
        strip_to_skilled_crew(recs[(BOB, "plain")].log_path)
        forget_pair(recs[(CAROL, "solo")])                   # its tree alone is left
        shutil.rmtree(recs[(DAVE, "stored")].session_dir)    # its stored items alone
        recs[(DAVE, "stored")].log_path.unlink()
    out = base / "out"
    out.mkdir()
    for name in ("existing.sqlite", "replaced.sqlite"):
        (out / name).write_bytes(b"not a ledger")
    commands = {key: [str(out) + a[5:] if a.startswith("<out>/") else a for a in argv]
                for key, argv in COMMANDS.items()}
    trip, logonly, solo = recs[(ANN, "trip")], recs[(ANN, "logonly")], recs[(CAROL, "solo")]
    assert trip.session_dir is not None and solo.session_dir is not None
    return World(base, env, trip.session_dir, trip.log_path, logonly.log_path,
                 solo.session_dir, run_many(commands, env))


# -- reading a ledger ---------------------------------------------------------------------


def query(db: Path, sql: str, *params: Any) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute(sql, params)]


def conversation(db: Path, name: str) -> dict[str, Any]:
    """The ``sessiontape_conversations`` row of ``name`` with its session's row."""
    (row,) = query(db, "SELECT * FROM sessiontape_conversations WHERE session_name = ?", name)
    (session,) = query(db, "SELECT * FROM agent_sessions WHERE id = ?", row["session_id"])
    return {**row, "session": session}


def metadata(message: dict[str, Any]) -> dict[str, Any]:
    return json.loads(message["metadata_json"])


def kinds(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(role, kind, content) of each message, in order."""
    return [(m["role"], metadata(m)["kind"], m["content"]) for m in messages]


def answer(result_json: str) -> Any:
    """A call's result: AgentUse's ``{output, metadata}`` by its output."""
    result = json.loads(result_json)
    return result["output"] if isinstance(result, dict) else result


def text_value(text: str) -> Any:
    """A tool's text as the ledger holds it: what it says if it is JSON, else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def turns_of(db: Path, session_id: str) -> list[dict[str, Any]]:
    """The session's turns, first to last, following the chain from its last turn."""
    (last,) = query(db, "SELECT id FROM agent_turns WHERE session_id = ? AND has_children = 0",
                    session_id)
    return query(db, TURN_TREE, last["id"])


def tool_parts(session: LoadedSession) -> list[dict[str, Any]]:
    return [p for m in session.messages for p in m.parts if p["type"] == "tool"]


# -- the file and its tables --------------------------------------------------------------


def test_the_ledger_has_the_seeds_tables_and_columns(world: World) -> None:
    db = world.out("trip.sqlite")
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    for table, columns in SEED_COLUMNS.items():
        info = query(db, f"PRAGMA table_info({table})")
        assert [(c["name"], c["type"]) for c in info] == columns
    assert [(c["name"], c["pk"]) for c in query(db, "PRAGMA table_info(agent_messages)")
            if c["pk"]] == [("id", 1)]
    assert query(db, "SELECT * FROM sessiontape_meta") == [{"key": "format",
                                                            "value": LEDGER_FORMAT}]
    summary = world.json("trip")
    assert summary == {"path": str(db), "format": LEDGER_FORMAT, "conversations": 1,
                       "sessions": 3, "subagents": 2,
                       "messages": query(db, "SELECT COUNT(*) n FROM agent_messages")[0]["n"],
                       "turns": 4, "tool_calls": 7, "skipped": [], "problems": []}
    assert list(world.base.joinpath("out").glob(".*")) == []  # no temporary file left


def test_the_seeds_queries_on_a_recorded_conversation(world: World) -> None:
    db = world.out("trip.sqlite")
    trip = conversation(db, "trip")
    main = trip["session"]
    tree = load_session(world.trip_dir)
    assert trip["user_id"] == ANN and trip["read_from"] == "agentuse"
    assert main["id"] == tree.id and main["is_subagent"] == 0 and main["source"] == "sessiontape"

    # the full history: both exchanges, in order, numbered from 0
    history = query(db, FULL_HISTORY, main["id"])
    assert [m["sequence"] for m in history] == list(range(len(history)))
    assert main["message_count"] == len(history)
    rows = kinds(history)
    second = rows.index(("system", "system", "Plan trips."), 1)
    turn0, turn1 = rows[:second], rows[second:]
    for rows, prompt, tools, agents, text in (
            (turn0, "trip prompt 0", 3, ["Helper", "Closer"], "closed 0"),
            (turn1, "trip prompt 1", 2, ["Helper"], "trip answer 1")):
        assert rows[:3] == [("system", "system", "Plan trips."), ("user", "prompt", prompt),
                            ("assistant", "reasoning", "think")]
        assert rows[-1] == ("assistant", "text", text)
        assert rows.count(("assistant", "tool", "")) == tools
        assert rows.count(("assistant", "agent", "")) == len(agents)
        assert len(rows) == 4 + tools + len(agents)
    handoffs = [metadata(m)["name"] for m in history if metadata(m)["kind"] == "agent"]
    assert handoffs == ["Helper", "Closer", "Helper"]
    assert {metadata(m)["agent"] for m in history if m["role"] == "assistant"} == {
        "Planner", "Closer"}
    assert all(m["timestamp"] for m in history)

    # the turn tree from the last turn: both turns, chained
    turns = turns_of(db, main["id"])
    assert [t["id"] for t in turns] == [m.info["id"] for m in tree.messages]
    assert turns[0]["parent_turn_id"] is None and turns[1]["parent_turn_id"] == turns[0]["id"]
    assert [t["has_children"] for t in turns] == [1, 0]
    assert [t["tool_call_count"] for t in turns] == [3, 2]
    by_id = {m["id"]: m for m in history}
    for turn, prompt, text in zip(turns, ("trip prompt 0", "trip prompt 1"),
                                  ("closed 0", "trip answer 1"), strict=True):
        assert [by_id[i]["content"] for i in json.loads(turn["query_message_ids"])] == [prompt]
        assert by_id[turn["response_message_id"]]["content"] == text

    # the subagents, linked both ways to the calls that ran them
    subagents = query(db, SUBAGENTS, main["id"])
    assert sorted(s["task_description"] for s in subagents) == ["q0", "q1"]
    assert sorted(s["id"] for s in subagents) == sorted(s.id for s in tree.subagents)
    for sub in subagents:
        assert sub["is_subagent"] == 1 and sub["task_status"] == "completed"
        (spawn,) = query(db, "SELECT * FROM agent_tool_calls WHERE id = ?", sub["tool_call_id"])
        assert spawn["tool_name"] == "helper" and spawn["child_session_id"] == sub["id"]
        assert spawn["message_id"] == sub["parent_message_id"]
        assert json.loads(spawn["params_json"]) == {"input": sub["task_description"]}
        assert answer(spawn["result_json"]) == f"helped {sub['task_description'][1]}"
        own = query(db, FULL_HISTORY, sub["id"])
        assert kinds(own) == [("system", "system", "Help."),
                              ("user", "prompt", sub["task_description"]),
                              ("assistant", "tool", ""),
                              ("assistant", "text", answer(spawn["result_json"]))]
        (call_row,) = query(db, "SELECT * FROM agent_tool_calls WHERE session_id = ?", sub["id"])
        assert (call_row["tool_name"], json.loads(call_row["params_json"]),
                json.loads(call_row["result_json"])) == ("square", {"n": 9}, 81)

    # tool usage: square and helper twice, fail once (and failed)
    stats = query(db, TOOL_STATS, main["id"])
    assert sorted((s["tool_name"], s["uses"], s["success"]) for s in stats) == [
        ("fail", 1, 0), ("helper", 2, 2), ("square", 2, 2)]
    assert [s["uses"] for s in stats] == [2, 2, 1]


def test_a_tool_call_keeps_its_ids_input_output_and_times(world: World) -> None:
    db = world.out("trip.sqlite")
    main = conversation(db, "trip")["session"]
    tree = load_session(world.trip_dir)
    calls = {c["id"]: c for c in query(db, "SELECT * FROM agent_tool_calls WHERE session_id = ?",
                                       main["id"])}
    parts = tool_parts(tree)
    assert sorted(calls) == sorted(p["callID"] for p in parts)  # the calls' own ids
    for part in parts:
        row = calls[part["callID"]]
        state = part["state"]
        assert row["message_id"] == part["id"]
        assert json.loads(row["params_json"]) == state["input"]
        assert (row["started_at"], row["completed_at"]) == (state["time"]["start"],
                                                            state["time"]["end"])
    by_name = {}
    for row in calls.values():
        by_name.setdefault(row["tool_name"], []).append(row)
    squares = sorted(by_name["square"], key=lambda c: c["started_at"])
    assert [(json.loads(c["params_json"]), json.loads(c["result_json"])) for c in squares] == [
        ({"n": 2}, 4), ({"n": 3}, 9)]
    (failed,) = by_name["fail"]
    assert failed["status"] == "failed"
    assert json.loads(failed["result_json"]) == "LookupError: no such city: Atlantis"
    for exchange in tree.messages:  # numbered in their exchange, in the order they were made
        made = [p["callID"] for p in exchange.parts if p["type"] == "tool"]
        assert [calls[c]["tool_number"] for c in made] == list(range(len(made)))
    (tool_message,) = query(db, "SELECT * FROM agent_messages WHERE id = ?", failed["message_id"])
    assert metadata(tool_message)["toolFormerData"] == {
        "name": "fail", "callId": failed["id"], "status": "failed",
        "params": failed["params_json"], "result": failed["result_json"],
        "error": "LookupError: no such city: Atlantis"}


def test_usage_comes_from_the_exchanges_and_their_model_calls(world: World) -> None:
    db = world.out("trip.sqlite")
    main = conversation(db, "trip")["session"]
    tree = load_session(world.trip_dir)
    turns = turns_of(db, main["id"])
    for turn, exchange in zip(turns, tree.messages, strict=True):
        tokens = exchange.info["assistant"]["tokens"]
        assert turn["token_count"] == tokens["input"] + tokens["output"]
        assert exchange.info["assistant"]["modelID"] == "scripted:gpt-4.1"
        assert turn["model"] == "scripted/gpt-4.1"  # as the log spells it
        assert turn["timestamp"] == exchange.info["time"]["completed"]
        (response,) = query(db, "SELECT * FROM agent_messages WHERE id = ?",
                            turn["response_message_id"])
        counted = metadata(response)["tokenCount"]
        assert (counted["inputTokens"], counted["outputTokens"]) == (tokens["input"],
                                                                     tokens["output"])
        assert counted["cost"] == pytest.approx(exchange.info["assistant"]["cost"])
        assert counted["cost"] > 0
    # planner 10+2, 6+1, closer 4+2; then planner 10+2, 20+4 (the subagent's are its own)
    assert [t["token_count"] for t in turns] == [25, 36]
    last_call = [p for p in tree.messages[-1].parts if p["type"] == "step-finish"][-1]
    assert main["context_tokens_used"] == last_call["tokens"]["input"] + \
        last_call["tokens"]["output"] == 24
    assert main["created_at"] == tree.info["time"]["created"]
    assert (main["workspace_path"], main["project"]) == (tree.info["project"]["root"],
                                                         Path(tree.info["project"]["root"]).name)
    assert main["is_agentic"] == 1 and main["model"] == reported_model(tree.info["model"])
    for sub in query(db, SUBAGENTS, main["id"]):
        (turn,) = query(db, "SELECT * FROM agent_turns WHERE session_id = ?", sub["id"])
        assert turn["token_count"] == 10 + 5 + 3 + 1 and turn["parent_turn_id"] is None


def test_a_re_export_gives_the_same_rows(world: World) -> None:
    def dump(db: Path) -> dict[str, list[dict[str, Any]]]:
        return {table: query(db, f"SELECT * FROM {table} ORDER BY {key}")
                for table, key in [*((t, "id") for t in SEED_COLUMNS),
                                   ("sessiontape_meta", "key"),
                                   ("sessiontape_conversations", "session_id")]}

    first, again = dump(world.out("trip.sqlite")), dump(world.out("trip-again.sqlite"))
    assert first == again and len(first["agent_messages"]) > 20
    text = world.ok("trip_text").stdout
    assert text == (f"exported 1 conversation to {world.out('trip-text.sqlite')}: 3 sessions "
                    f"(2 subagents), {len(first['agent_messages'])} messages, 4 turns, "
                    "7 tool calls\n")
    assert dump(world.out("trip-text.sqlite")) == first


# -- conversations without a tree, or with only a tree --------------------------------------


def test_a_log_only_conversation_is_exported_from_its_turns(world: World) -> None:
    db = world.out("all.sqlite")
    logonly, trip = conversation(db, "logonly"), conversation(db, "trip")
    assert logonly["read_from"] == "log" and logonly["agentuse_dir"] is None
    assert logonly["log_path"] == str(world.logonly_log)
    main = logonly["session"]
    log_turns = SessionLogReader(world.logonly_log).turns()
    turns = turns_of(db, main["id"])
    assert len(turns) == len(log_turns) == 2
    assert turns[0]["parent_turn_id"] is None and turns[1]["parent_turn_id"] == turns[0]["id"]
    assert [t["model"] for t in turns] == [t.model for t in log_turns] == ["scripted/gpt-4.1"] * 2
    assert [t["token_count"] for t in turns] == [25, 36]
    history = query(db, FULL_HISTORY, main["id"])
    assert [m["content"] for m in history if m["role"] == "user"] == ["trip prompt 0",
                                                                      "trip prompt 1"]
    texts = [m["content"] for m in history if metadata(m)["kind"] == "text"]
    assert texts == ["closed 0", "trip answer 1"]  # the streamed answer's chunks are one row
    assert [metadata(m)["toAgent"] for m in history if metadata(m)["kind"] == "handoff"] == [
        "Closer"]

    # every call as the log has it: its id, arguments and result
    starts = {s["callId"]: s for t in log_turns for s in t.steps
              if s["type"] == "agent_tool_start" and "parentCallId" not in s}
    ends = {s["callId"]: s for t in log_turns for s in t.steps if s["type"] == "agent_tool_end"}
    calls = query(db, "SELECT * FROM agent_tool_calls WHERE session_id = ?", main["id"])
    assert sorted(c["id"] for c in calls) == sorted(starts) and len(calls) == 5
    for row in calls:
        assert json.loads(row["params_json"]) == json.loads(starts[row["id"]]["toolArgumentsStr"])
        end = ends[row["id"]]
        assert answer(row["result_json"]) == (end["error"] if "error" in end
                                              else text_value(end["result"]))

    # the same calls, statuses and results as the conversation exported from its tree
    def shape(session_id: str) -> list[tuple[Any, ...]]:
        rows = query(db, "SELECT * FROM agent_tool_calls WHERE session_id = ?", session_id)
        return sorted((r["tool_name"], r["params_json"], r["status"],
                       json.dumps(answer(r["result_json"]))) for r in rows)

    assert shape(main["id"]) == shape(trip["session"]["id"])

    # each subagent run is a session named after its call, linked both ways
    subagents = query(db, SUBAGENTS, main["id"])
    assert len(subagents) == 2
    for sub in subagents:
        (spawn,) = query(db, "SELECT * FROM agent_tool_calls WHERE child_session_id = ?",
                         sub["id"])
        assert sub["id"] == f"task-{spawn['id']}" == f"task-{sub['tool_call_id']}"
        assert sub["parent_message_id"] == spawn["message_id"]
        assert sub["task_status"] == "completed" and sub["model"] == "scripted/gpt-4.1"
        assert kinds(query(db, FULL_HISTORY, sub["id"])) == [
            ("user", "prompt", sub["task_description"]), ("assistant", "tool", ""),
            ("assistant", "text", answer(spawn["result_json"]))]
        (turn,) = query(db, "SELECT * FROM agent_turns WHERE session_id = ?", sub["id"])
        assert turn["token_count"] == 19 and turn["timestamp"] == spawn["completed_at"]
    assert shape(subagents[0]["id"]) == [("square", '{"n":9}', "completed", "81")]


def test_a_skilled_crew_log_pairs_its_calls_in_order(world: World) -> None:
    db = world.out("all.sqlite")
    plain = conversation(db, "plain")
    assert plain["read_from"] == "log" and plain["session"]["workspace_path"] is None
    calls = query(db, "SELECT * FROM agent_tool_calls WHERE session_id = ? ORDER BY tool_number",
                  plain["session"]["id"])
    assert [(json.loads(c["params_json"]), json.loads(c["result_json"]), c["status"])
            for c in calls] == [({"n": 2}, 4, "completed"), ({"n": 3}, 9, "completed")]
    assert all(len(c["id"]) == 36 for c in calls)  # no call ids in the log: uuid5s
    (turn,) = turns_of(db, plain["session"]["id"])
    assert turn["token_count"] is None  # skilled_crew records no usage
    assert turn["model"] == "scripted/gpt-4.1" and turn["tool_call_count"] == 2


def test_every_conversation_exports_and_one_with_only_items_is_skipped(world: World) -> None:
    db = world.out("all.sqlite")
    summary = world.json("all")
    names = {row["session_name"]: row for row in query(
        db, "SELECT * FROM sessiontape_conversations")}
    assert set(names) == {"trip", "logonly", "plain", world.solo_dir.name}
    assert summary["conversations"] == 4 and summary["sessions"] == 8
    assert summary["subagents"] == 4 and summary["turns"] == 4 + 4 + 1 + 1
    assert summary["skipped"] == [f"{DAVE}:stored: nothing to export: no AgentUse tree and "
                                  "no replay log"]
    assert f"warning: skipped {DAVE}:stored" in world.results["all"].stderr
    # the session only AgentUse's tree holds: no user, read from the tree
    solo = conversation(db, world.solo_dir.name)
    assert solo["user_id"] is None and solo["read_from"] == "agentuse"
    assert solo["session_id"] == world.solo_dir.name[:26]
    assert solo["session"]["source"] == "sessiontape"  # its session.json says so
    assert query(db, TOOL_STATS, solo["session_id"]) == [
        {"tool_name": "square", "uses": 2, "success": 2}]
    counts = {table: query(db, f"SELECT COUNT(*) n FROM {table}")[0]["n"]
              for table in SEED_COLUMNS}
    assert counts["agent_sessions"] == summary["sessions"]
    assert counts["agent_messages"] == summary["messages"]
    assert counts["agent_tool_calls"] == summary["tool_calls"] == 7 + 7 + 2 + 2


# -- refusals and failures ----------------------------------------------------------------


def test_an_existing_file_is_replaced_only_with_force(world: World) -> None:
    done = world.results["exists"]
    assert done.returncode == 2 and done.stdout == ""
    assert "already exists; pass --force" in done.stderr
    assert world.out("existing.sqlite").read_bytes() == b"not a ledger"
    world.ok("force")
    replaced = world.out("replaced.sqlite")
    assert query(replaced, "SELECT value FROM sessiontape_meta") == [{"value": LEDGER_FORMAT}]
    assert stat.S_IMODE(os.stat(replaced).st_mode) == 0o600


@pytest.mark.parametrize(("key", "code", "says"), [
    ("unknown", 1, "no session named 'nope'"),
    ("ambiguous", 2, "sessions have an AgentUse id starting with '01'"),
    ("stored_only", 1, "nothing to export: no AgentUse tree and no replay log; nothing written"),
    ("no_dir", 1, "cannot write"),
    ("no_format", 2, "the following arguments are required: --format"),
])
def test_a_failed_export_exits_as_the_other_verbs_and_writes_nothing(
        world: World, key: str, code: int, says: str) -> None:
    done = world.results[key]
    assert done.returncode == code and done.stdout == ""
    assert says in done.stderr and "Traceback" not in done.stderr
    assert {p.name for p in world.base.joinpath("out").iterdir()} == {
        "trip.sqlite", "trip-again.sqlite", "trip-text.sqlite", "all.sqlite",
        "existing.sqlite", "replaced.sqlite"}


def test_a_failure_midway_leaves_nothing_and_keeps_the_old_file(world: World,
                                                                 tmp_path: Path) -> None:
    good = LedgerConversation(ANN, "trip", world.trip_dir, world.trip_log, "sessiontape")
    gone = LedgerConversation(DAVE, "stored", tmp_path / "gone", None, "sessiontape")
    out = tmp_path / "ledger.sqlite"
    with pytest.raises(LedgerSourceError, match=re.escape(f"{DAVE}:stored: nothing to export")):
        export_ledger(out, [good, gone], strict=True)
    assert list(tmp_path.iterdir()) == []
    out.write_bytes(b"old")
    with pytest.raises(LedgerSourceError):
        export_ledger(out, [good, gone], strict=True, force=True)
    assert out.read_bytes() == b"old" and list(tmp_path.iterdir()) == [out]
    with pytest.raises(FileExistsError):
        export_ledger(out, [good])
    summary = export_ledger(out, [good, gone], force=True)
    assert summary.conversations == 1 and len(summary.skipped) == 1
    assert query(out, "SELECT COUNT(*) n FROM agent_sessions") == [{"n": 3}]


def test_a_layout_id_two_conversations_share_stays_with_the_first(world: World,
                                                                  tmp_path: Path) -> None:
    copy = tmp_path / world.trip_dir.name
    shutil.copytree(world.trip_dir, copy)
    out = tmp_path / "twice.sqlite"
    summary = export_ledger(out, [
        LedgerConversation(ANN, "trip", world.trip_dir, None, "sessiontape"),
        LedgerConversation(None, copy.name, copy, None, "agentuse")])
    assert summary.sessions == 6 and summary.tool_calls == 14
    first, second = (query(out, "SELECT * FROM agent_sessions WHERE id = ?", row["session_id"])[0]
                     for row in query(out, "SELECT * FROM sessiontape_conversations"))
    assert first["id"] == world.trip_dir.name[:26] and len(second["id"]) == 36
    for sub in query(out, SUBAGENTS, second["id"]):  # the copy's links use its own ids
        (spawn,) = query(out, "SELECT * FROM agent_tool_calls WHERE id = ?", sub["tool_call_id"])
        assert spawn["session_id"] == second["id"] and spawn["child_session_id"] == sub["id"]


# -- AgentUse's own files -------------------------------------------------------------------


def test_a_session_agentuse_wrote_links_its_subagent(agentuse_fixture: Path,
                                                     tmp_path: Path) -> None:
    manager = next(agentuse_fixture.glob("agentuse/project/*/session/*-manager"))
    out = tmp_path / "agentuse.sqlite"
    export_ledger(out, [LedgerConversation(None, manager.name, manager, None, "agentuse")])
    tree = load_session(manager)
    (main,) = query(out, "SELECT * FROM agent_sessions WHERE is_subagent = 0")
    (sub,) = query(out, SUBAGENTS, main["id"])
    assert (main["id"], sub["id"]) == (tree.id, tree.subagents[0].id)
    # AgentUse's subagent__ part names no session: linked by the call running when it began
    (spawn,) = query(out, "SELECT * FROM agent_tool_calls WHERE child_session_id = ?", sub["id"])
    (part,) = tool_parts(tree)
    assert (spawn["id"], spawn["tool_name"], sub["tool_call_id"]) == (
        part["callID"], "subagent__helper", part["callID"])
    assert sub["task_description"] == part["state"]["input"]["task"]
    assert answer(spawn["result_json"]) == part["state"]["output"]["output"]
    context = tree.messages[-1].info["assistant"]["context"]
    assert (main["context_token_limit"], main["context_tokens_used"]) == (
        context["contextLimit"], context["activeTokens"])
    history = query(out, FULL_HISTORY, main["id"])
    assert [m["role"] for m in history][:3] == ["system", "system", "user"]
    assert "log" not in {metadata(m)["kind"] for m in history}  # AgentUse's debug lines
