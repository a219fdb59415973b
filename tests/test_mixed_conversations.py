"""One conversation that three tools wrote in turn: skilled_crew, sessiontape and AgentUse.

skilled_crew and sessiontape share a conversation through its store pair and replay log:
each appends its turns to the log (skilled_crew 1.0.11 writes ``user_message``, steps and
``final_result``, with none of the keys sessiontape adds; its ``final_result`` records no
usage). sessiontape also records its own turns as exchanges of an AgentUse tree, and AgentUse
0.15 continues that tree alone (``agentuse run --session-id``: ``SessionManager.createMessage``
writes ``{messageID}/message.json`` and ``updateSession`` bumps ``time.updated``,
src/session/manager.ts). So the log is the conversation's list of turns, the tree adds detail
(parts, tokens) to the turns sessiontape recorded, and an exchange no log turn names
(AgentUse's own) is a turn of its own. Every reader (list, show, search, usage) numbers the
turns and sums the usage by that one rule.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import isolated, next_millisecond, run_cli
from scripted import final, model, run_agent, usage

from sessiontape import Recorder
from sessiontape.storage.ids import new_ulid
from sessiontape.storage.times import iso_ms

pytestmark = pytest.mark.xdist_group("mixed_conversations")

USER = "john@example.com"
NAME = "mixed"


def _state(env: dict[str, str]) -> Path:
    return Path(env["SKILLET_HOME"]) / "state"


def _log(env: dict[str, str]) -> Path:
    return _state(env) / ".agent_session_logs" / "john_example_com" / f"{NAME}.jsonl"


def skilled_crew_turn(env: dict[str, str], prompt: str, answer: str) -> None:
    """A turn as skilled_crew 1.0.11 writes it (fixture_session_1.jsonl's shape): log lines
    without sessiontape's keys and no usage, and its items in ``session_items``."""
    log = _log(env)
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lines = [{"kind": "user_message", "userInput": prompt, "timestamp": iso_ms()},
             {"kind": "step", "stepResult": {"type": "agent_start", "agentName": "crew"},
              "timestamp": iso_ms()},
             {"kind": "step", "stepResult": {"type": "agent_end", "agentName": "crew"},
              "timestamp": iso_ms()},
             {"kind": "step", "stepResult": {"type": "text", "text": answer},
              "timestamp": iso_ms()},
             {"kind": "final_result", "finalResult": {"text": answer}, "timestamp": iso_ms(),
              "model": "openai/gpt-4.1-nano"}]
    with log.open("a", encoding="utf-8") as out:
        out.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    store = _state(env) / ".agent_sessions.sqlite"
    with closing(sqlite3.connect(store)) as conn, conn:
        conn.execute("CREATE TABLE IF NOT EXISTS session_items (id INTEGER PRIMARY KEY "
                     "AUTOINCREMENT, user_id TEXT NOT NULL, session_name TEXT NOT NULL, "
                     "created_at INTEGER NOT NULL, item_json TEXT NOT NULL)")
        now = next_millisecond()
        for item in ({"type": "message", "role": "user", "content": prompt},
                     {"type": "message", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": answer}]}):
            conn.execute("INSERT INTO session_items (user_id, session_name, created_at, "
                         "item_json) VALUES (?,?,?,?)", (USER, NAME, now, json.dumps(item)))
    next_millisecond()


def sessiontape_turn(prompt: str, answer: str, tokens: tuple[int, int]) -> Path:
    """A turn recorded by sessiontape; the conversation's AgentUse session directory."""
    async def main() -> Path:
        async with Recorder(USER, NAME) as rec:
            agent = Agent(name="Planner", model=model(final(answer, usage(*tokens))))
            await run_agent(rec, agent, prompt, streamed=False)
            assert rec.errors == 0 and rec.session_dir is not None
            return rec.session_dir

    directory = asyncio.run(main())
    next_millisecond()
    return directory


def agentuse_exchange(directory: Path, prompt: str, answer: str,
                      tokens: tuple[int, int]) -> int:
    """An exchange AgentUse 0.15 appends to a session it continues (``--session-id``):
    message.json with its tokens and cost, a ``text`` part, ``session.json`` updated
    (src/session/manager.ts ``createMessage``, ``addPart``, ``updateSession``). Returns the
    exchange's completion time."""
    session = json.loads((directory / "session.json").read_text())
    created = next_millisecond()
    completed = next_millisecond()
    message_id = new_ulid()
    (directory / message_id / "part").mkdir(parents=True, mode=0o700)
    message = {"id": message_id, "sessionID": session["id"],
               "time": {"created": created, "completed": completed},
               "user": {"prompt": {"task": prompt}},
               "assistant": {"modelID": "demo:welcome", "providerID": "demo", "mode": "build",
                             "cost": 0.5, "tokens": {"input": tokens[0], "output": tokens[1],
                                                     "reasoning": 0,
                                                     "cache": {"read": 0, "write": 0}}}}
    (directory / message_id / "message.json").write_text(json.dumps(message, indent=2))
    part = {"type": "text", "text": answer, "time": {"start": created, "end": completed},
            "id": new_ulid(), "sessionID": session["id"], "messageID": message_id}
    (directory / message_id / "part" / f"{part['id']}.json").write_text(json.dumps(part))
    session["time"]["updated"] = completed
    session["status"] = "completed"
    (directory / "session.json").write_text(json.dumps(session, indent=2))
    return completed


@dataclass
class Mixed:
    env: dict[str, str]
    agentuse_completed: int
    listed: dict[str, Any]
    shown: dict[str, Any]
    shown_text: str
    searches: dict[str, list[dict[str, Any]]]
    usage_session: list[dict[str, Any]]
    ledger_answers: list[str]


# turn: (who, prompt, answer, tokens)
TURNS = [("skilled_crew", "crew question one", "crew answer about Lisbon", None),
         ("sessiontape", "tape question two", "tape answer about Porto", (100, 20)),
         ("skilled_crew", "crew question three", "crew answer about Faro", None),
         ("sessiontape", "tape question four", "tape answer about Braga", (200, 40)),
         ("agentuse", "agentuse question five", "agentuse answer about Evora", (70, 7))]

_BUILT: dict[str, Mixed] = {}


@pytest.fixture
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Mixed:
    """The conversation written by the three tools in TURNS' order, and what the CLI says of
    it (built once for this module)."""
    if "mixed" in _BUILT:
        return _BUILT["mixed"]
    base = tmp_path_factory.mktemp("mixed")
    with isolated(base, NO_COLOR="1") as env:
        directory: Path | None = None
        completed = 0
        for who, prompt, answer, tokens in TURNS:
            if who == "skilled_crew":
                skilled_crew_turn(env, prompt, answer)
            elif who == "sessiontape":
                assert tokens is not None
                directory = sessiontape_turn(prompt, answer, tokens)
            else:
                assert directory is not None and tokens is not None
                completed = agentuse_exchange(directory, prompt, answer, tokens)
            # The catalog follows each turn (a refresh per command), not only a first build.
            assert run_cli("sessions", "list", env=env).returncode == 0

        def cli_json(*args: str) -> Any:
            done = run_cli(*args, "--json", env=env)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        listed = {s["session_name"]: s for s in cli_json("sessions", "list")}[NAME]
        shown = cli_json("sessions", "show", NAME)
        text = run_cli("sessions", "show", NAME, env=env)
        assert text.returncode == 0, text.stderr
        searches = {word: cli_json("search", word)
                    for word in ("Lisbon", "Porto", "Faro", "Braga", "Evora")}
        usage_rows = cli_json("usage", "session")
        ledger = base / "ledger.sqlite"
        exported = run_cli("export", "--format", "ledger", "--out", ledger, "--session", NAME,
                           env=env)
        assert exported.returncode == 0, exported.stderr
        with closing(sqlite3.connect(ledger)) as conn:
            ledger_turns = conn.execute(
                "SELECT m.content FROM agent_turns t JOIN agent_sessions s ON "
                "s.id = t.session_id JOIN agent_messages m ON m.id = t.response_message_id "
                "WHERE s.parent_session_id IS NULL ORDER BY t.timestamp").fetchall()
    _BUILT["mixed"] = Mixed(env, completed, listed, shown, text.stdout, searches, usage_rows,
                            [answer for (answer,) in ledger_turns])
    return _BUILT["mixed"]


def test_the_log_lists_the_turns_and_agentuse_adds_its_own(mixed: Mixed) -> None:
    """Five turns, in the order written: the log's four, AgentUse's exchange last."""
    turns = mixed.shown["turns"]
    assert [t["text"] for t in turns] == [answer for _, _, answer, _ in TURNS]
    assert [t["source"] for t in turns] == ["log", "log", "log", "log", "agentuse"]
    assert mixed.listed["turns"] == 5


def test_the_ledger_export_has_the_same_turns(mixed: Mixed) -> None:
    assert mixed.ledger_answers == [answer for _, _, answer, _ in TURNS]


def test_search_finds_every_turn_by_the_number_show_gives_it(mixed: Mixed) -> None:
    """A turn only skilled_crew logged is found (issue 23 item 7), and every hit's turn is
    the turn ``sessions show`` numbers, not the tree exchange's index."""
    for number, word in enumerate(("Lisbon", "Porto", "Faro", "Braga", "Evora"), 1):
        hits = [h for h in mixed.searches[word] if h["session"] == NAME
                and h["kind"] == "answer"]
        assert [h["turn"] for h in hits] == [number], (word, mixed.searches[word])
    assert "Turn 3" in mixed.shown_text and "crew answer about Faro" in mixed.shown_text


def test_usage_sits_on_the_turns_that_recorded_it(mixed: Mixed) -> None:
    """skilled_crew's turns record no usage: they show none, and each sessiontape turn shows
    its own exchange's tokens (issue 23 item 8: an exchange belongs to the log turn that
    names it, never to a turn another tool wrote)."""
    usages = [t["usage"] for t in mixed.shown["turns"]]
    assert usages[0] is None and usages[2] is None
    assert [(u["input"], u["output"]) for u in (usages[1], usages[3], usages[4])] == \
        [(100, 20), (200, 40), (70, 7)]
    assert [t["agentuse_message_id"] is not None for t in mixed.shown["turns"]] == \
        [False, True, False, True, True]


def test_one_rule_for_the_conversations_usage(mixed: Mixed) -> None:
    """list, show and ``usage session`` give the same totals, AgentUse's exchange included,
    and the last activity is AgentUse's exchange (issue 23 item 6)."""
    tokens = 100 + 20 + 200 + 40 + 70 + 7
    assert mixed.listed["tokens"] == tokens
    assert mixed.shown["usage"]["tokens"] == tokens
    assert sum(t["usage"]["tokens"] for t in mixed.shown["turns"] if t["usage"]) == tokens
    (row,) = [r for r in mixed.usage_session if r["session"] == NAME]
    assert row["input_tokens"] + row["output_tokens"] == tokens
    assert row["cost"] == pytest.approx(mixed.listed["cost"])
    assert mixed.listed["last_ms"] == mixed.agentuse_completed
