"""One conversation that three tools wrote in turn: skilled_crew, sessiontape and AgentUse.

skilled_crew and sessiontape share a conversation through its store pair and replay log:
each appends its turns to the log (skilled_crew 1.0.11 writes ``user_message``, steps and
``final_result``, with none of the keys sessiontape adds; its ``final_result`` records no
usage). sessiontape also records its own turns as exchanges of an AgentUse tree, and AgentUse
0.15 continues that tree alone (``agentuse run --session-id``: it carries on the session's
first exchange, adding its parts and its tokens to that exchange's totals, and bumps
``time.updated``: src/runner/preparation.ts:115-143, src/runner/run.ts:95-110). So the log
is the conversation's list of turns, the tree adds detail (parts, tokens) to the turns
sessiontape recorded, and what AgentUse added belongs to the turn whose exchange it
continued. Every reader (list, show, search, usage, the Ledger export) numbers the turns and
sums the usage by that one rule (storage/catalog/timeline.py).
"""

from __future__ import annotations

import asyncio
import json
import os
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


def agentuse_continues(directory: Path, answer: str, tokens: tuple[int, int]) -> int:
    """AgentUse 0.15 continuing the session (``agentuse run --session-id``): it carries on
    the session's first exchange (``getPrimaryMessage``, src/runner/preparation.ts:115-143,
    src/session/manager.ts:633-637), adds its parts there, its tokens to the exchange's
    totals (``addAssistantTokens(priorTokens, ...)``, src/runner/run.ts:95-110), sets
    ``time.completed``, and bumps ``session.json``'s ``time.updated``; it records no prompt
    and no new exchange. Returns its completion time."""
    session = json.loads((directory / "session.json").read_text())
    first = sorted(p.parent for p in directory.glob("*/message.json"))[0]
    message = json.loads((first / "message.json").read_text())
    started = next_millisecond()
    completed = next_millisecond()
    for part in ({"type": "log", "level": "debug", "message": "Resuming session",
                  "time": {"start": started}},
                 {"type": "text", "text": answer, "time": {"start": started, "end": completed}}):
        part.update(id=new_ulid(), sessionID=session["id"], messageID=message["id"])
        (first / "part" / f"{part['id']}.json").write_text(json.dumps(part, indent=2))
    held = message["assistant"]["tokens"]
    held["input"] += tokens[0]
    held["output"] += tokens[1]
    message["time"]["completed"] = completed
    (first / "message.json").write_text(json.dumps(message, indent=2))
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
                completed = agentuse_continues(directory, answer, tokens)
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
                "WHERE s.parent_session_id IS NULL ORDER BY t.rowid").fetchall()
    _BUILT["mixed"] = Mixed(env, completed, listed, shown, text.stdout, searches, usage_rows,
                            [answer for (answer,) in ledger_turns])
    return _BUILT["mixed"]


# The log's turns; AgentUse's continuation is in the tree's first exchange: log turn 2's.
LOGGED = [answer for who, _, answer, _ in TURNS if who != "agentuse"]
EVORA = TURNS[-1][2]


def test_the_log_lists_the_turns_and_agentuse_continues_the_first_exchange(mixed: Mixed
                                                                            ) -> None:
    """Four turns, in the order logged; what AgentUse added to the tree's first exchange
    (sessiontape's first turn, the log's turn 2) is shown with that turn."""
    turns = mixed.shown["turns"]
    assert [t["text"] for t in turns] == LOGGED
    assert [t["source"] for t in turns] == ["log"] * 4
    assert [[p["text"] for p in t.get("continued", [])] for t in turns] == \
        [[], [EVORA], [], []]
    turn_2 = mixed.shown_text.split("\nTurn 2 ", 1)[1].split("\nTurn 3 ", 1)[0]
    assert f"(continued in its AgentUse exchange)\nagent> {EVORA}\n" in turn_2
    assert mixed.listed["turns"] == 4


def test_the_ledger_export_has_the_same_turns(mixed: Mixed) -> None:
    assert len(mixed.ledger_answers) == 4
    assert [mixed.ledger_answers[i] for i in (0, 2, 3)] == [LOGGED[i] for i in (0, 2, 3)]
    assert mixed.ledger_answers[1] in (LOGGED[1], EVORA)


def test_search_finds_every_turn_by_the_number_show_gives_it(mixed: Mixed) -> None:
    """A turn only skilled_crew logged is found (issue 23 item 7), and every hit's turn is
    the turn ``sessions show`` numbers, not the tree exchange's index; AgentUse's answer is
    in the turn whose exchange it continued."""
    for word, number in (("Lisbon", 1), ("Porto", 2), ("Faro", 3), ("Braga", 4), ("Evora", 2)):
        hits = [h for h in mixed.searches[word] if h["session"] == NAME
                and h["kind"] == "answer"]
        assert [h["turn"] for h in hits] == [number], (word, mixed.searches[word])
    assert "Turn 3" in mixed.shown_text and "crew answer about Faro" in mixed.shown_text


def test_usage_sits_on_the_turns_that_recorded_it(mixed: Mixed) -> None:
    """skilled_crew's turns record no usage: they show none, and each sessiontape turn shows
    its own exchange's tokens, AgentUse's added to the exchange it continued (issue 23 item
    8: an exchange belongs to the log turn that names it, never to a turn another tool
    wrote)."""
    usages = [t["usage"] for t in mixed.shown["turns"]]
    assert usages[0] is None and usages[2] is None
    assert [(u["input"], u["output"]) for u in (usages[1], usages[3])] == \
        [(100 + 70, 20 + 7), (200, 40)]
    assert [t["agentuse_message_id"] is not None for t in mixed.shown["turns"]] == \
        [False, True, False, True]


def test_one_rule_for_the_conversations_usage(mixed: Mixed) -> None:
    """list, show and ``usage session`` give the same totals, AgentUse's tokens included
    (it lists no model call of its own: the catalog counts what the exchange's totals hold
    beyond the calls listed), and the last activity is AgentUse's (issue 23 item 6)."""
    tokens = 100 + 20 + 200 + 40 + 70 + 7
    assert mixed.listed["tokens"] == tokens
    assert mixed.shown["usage"]["tokens"] == tokens
    assert sum(t["usage"]["tokens"] for t in mixed.shown["turns"] if t["usage"]) == tokens
    (row,) = [r for r in mixed.usage_session if r["session"] == NAME]
    assert row["input_tokens"] + row["output_tokens"] == tokens
    assert row["cost"] == pytest.approx(mixed.listed["cost"])
    assert mixed.listed["last_ms"] == mixed.agentuse_completed


def test_an_exchange_whose_log_lines_were_lost_is_a_turn_of_its_own(isolated_env: Path) -> None:
    """The recorder writes the tree and the log apart: a log that lost a turn (a full disk
    when its lines were written, a log cut by hand) leaves that turn in the tree alone.
    It stays a turn, in its place, with its usage, in list, show and search alike."""
    env = dict(os.environ)
    directory = sessiontape_turn("first question", "first answer about Sintra", (10, 2))
    kept = _log(env).read_bytes()
    sessiontape_turn("second question", "second answer about Tavira", (30, 4))
    _log(env).write_bytes(kept)  # the second turn's lines are lost

    def cli_json(*args: str) -> Any:
        done = run_cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    (listed,) = [s for s in cli_json("sessions", "list") if s["session_name"] == NAME]
    shown = cli_json("sessions", "show", NAME)
    assert [(t["source"], t["text"]) for t in shown["turns"]] == [
        ("log", "first answer about Sintra"), ("agentuse", "second answer about Tavira")]
    assert shown["turns"][1]["agentuse_message_id"] == sorted(
        p.parent.name for p in directory.glob("*/message.json"))[1]
    assert listed["turns"] == 2 and listed["tokens"] == 10 + 2 + 30 + 4
    assert [h["turn"] for h in cli_json("search", "Tavira") if h["kind"] == "answer"] == [2]
