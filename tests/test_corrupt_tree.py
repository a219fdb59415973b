"""A damaged file in a conversation's AgentUse tree costs no later run (issue 24, item 5).

A truncated ``session.json`` is rebuilt from the files beside it on the next run (the damaged
bytes kept aside, said once); a truncated ``message.json`` or part file is left as it is,
reported by the readers, and the next run records in full.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import run_cli
from scripted import call, final, model, square, tools_step, usage
from test_human_in_the_loop import agent_asking, approve_in_a_new_recorder, paused_for_approval

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import load_session, read_json_object
from sessiontape.storage.paths import agentuse_data_root

USER, NAME = "ann@example.com", "trip"
KEPT = 40  # bytes of a file left by the damage


async def _turn(prompt: str, answer: str) -> Recorder:
    """One recorded turn with a tool call; the recorder, closed."""
    agent = Agent(name="Planner", tools=[square],
                  model=model(tools_step(call("square", {"n": 3}), u=usage(10, 2)),
                              final(answer, usage(20, 4))))
    async with Recorder(USER, NAME) as rec:
        await rec.run(agent, prompt)
    return rec


def _record(prompt: str, answer: str) -> Recorder:
    return asyncio.run(_turn(prompt, answer))


def _truncate(path: Path) -> bytes:
    """Cut ``path`` to its first KEPT bytes, as a crash of the disk would; those bytes."""
    kept = path.read_bytes()[:KEPT]
    path.write_bytes(kept)
    return kept


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "sessiontape" and r.levelno >= logging.WARNING]


def _prompts(directory: Path) -> list[str]:
    return [m.info["user"]["prompt"]["task"] for m in load_session(directory).messages]


def _tree() -> Path:
    """The one session directory of the isolated AgentUse root."""
    (session_json,) = agentuse_data_root().glob("project/*/session/*/session.json")
    return session_json.parent


def test_a_truncated_session_json_is_rebuilt_by_the_next_run_and_said_once(
        caplog: pytest.LogCaptureFixture) -> None:
    first = _record("Plan a day in Lisbon", "Lisbon it is")
    tree = first.session_dir
    assert tree is not None
    before = read_json_object(tree / "session.json")
    damaged = _truncate(tree / "session.json")

    with caplog.at_level(logging.WARNING, logger="sessiontape"):
        second = _record("Now Porto", "Porto it is")
    assert second.errors == 0
    (kept,) = tree.glob("session.json.corrupt-*")
    (warning,) = _warnings(caplog)
    assert str(tree / "session.json") in warning and kept.name in warning
    assert kept.read_bytes() == damaged
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600

    session = load_session(tree)
    assert _prompts(tree) == ["Plan a day in Lisbon", "Now Porto"]
    info = session.info
    for key in ("id", "agent", "version", "project", "format", "trigger"):
        assert info[key] == before[key], key
    assert info["time"]["created"] == before["time"]["created"]  # the first exchange's
    assert info["status"] == "completed"
    assert info["conversation"] == before["conversation"]
    recovered = info["recovered"]
    assert recovered["kept"] == kept.name and recovered["reason"].startswith("invalid JSON")
    assert recovered["at"] == int(kept.name.rpartition("-")[2])
    assert session.tools == [t for t in session.tools if t["name"] == "square"] != []

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sessiontape"):
        third = _record("And Braga?", "Braga it is")
    assert third.errors == 0 and _warnings(caplog) == []
    assert _prompts(tree) == ["Plan a day in Lisbon", "Now Porto", "And Braga?"]
    assert list(tree.glob("session.json.corrupt-*")) == [kept]


@pytest.mark.slow
def test_sessiontape_run_after_a_truncated_session_json_answers_and_warns_once() -> None:
    first = run_cli("run", "--session-name", NAME, "Plan a day in Lisbon")
    assert first.returncode == 0, first.stderr
    tree = _tree()
    damaged = _truncate(tree / "session.json")

    listed = run_cli("sessions", "list", "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    (conversation,) = json.loads(listed.stdout)
    assert conversation["turns"] == 1
    assert [line for line in listed.stderr.splitlines() if "session.json" in line] == [
        f"sessiontape sessions: warning: {tree / 'session.json'}: invalid JSON: "
        f"{conversation['problems'][0].partition('invalid JSON: ')[2]}"]
    shown = run_cli("sessions", "show", NAME)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "Plan a day in Lisbon" in shown.stdout and "A day in Lisbon" in shown.stdout
    assert sum("session.json" in line for line in shown.stderr.splitlines()) == 1

    second = run_cli("run", "--session-name", NAME, "Now Porto please")
    assert second.returncode == 0, second.stderr
    assert "agent> A day in Porto" in second.stdout
    assert "Traceback" not in second.stderr
    (warning,) = [line for line in second.stderr.splitlines() if "session.json" in line]
    (kept,) = tree.glob("session.json.corrupt-*")
    assert warning.startswith(f"sessiontape: {tree / 'session.json'}: invalid JSON")
    assert kept.name in warning and kept.read_bytes() == damaged
    assert _prompts(tree) == ["Plan a day in Lisbon", "Now Porto please"]


def _last_exchange(tree: Path) -> Path:
    return sorted(p.parent for p in tree.glob("*/message.json"))[-1]


def _as_if_killed(tree: Path, exchange: Path) -> None:
    """The session and its exchange as a recording killed during its run left them: still
    ``running``, the exchange not completed."""
    for path, key, value in ((tree / "session.json", "status", "running"),
                             (exchange / "message.json", "time", None)):
        info: dict[str, Any] = json.loads(path.read_bytes())
        if value is None:
            del info[key]["completed"]
        else:
            info[key] = value
        path.write_text(json.dumps(info))


@pytest.mark.parametrize("damaged", ["message.json", "a part", "message.json of a killed run",
                                     "a part of a killed run"])
def test_a_truncated_message_or_part_is_left_and_the_next_run_records(
        damaged: str, caplog: pytest.LogCaptureFixture) -> None:
    """The damaged file is not rewritten (readers name it); the next run records its whole
    exchange, and when the damaged exchange is one a killed recording left open, that it
    could not be closed is said once."""
    tree = _record("Plan a day in Lisbon", "Lisbon it is").session_dir
    assert tree is not None
    exchange = _last_exchange(tree)
    path = (exchange / "message.json" if damaged.startswith("message.json")
            else sorted((exchange / "part").iterdir())[0])
    killed = damaged.endswith("killed run")
    if killed:
        _as_if_killed(tree, exchange)
    cut = _truncate(path)

    with caplog.at_level(logging.WARNING, logger="sessiontape"):
        rec = _record("Now Porto", "Porto it is")
    assert rec.errors == 0
    assert path.read_bytes() == cut
    warnings = _warnings(caplog)
    assert len(warnings) == killed and all(str(path) in w for w in warnings)
    newest = _last_exchange(tree)
    assert newest != exchange
    message = read_json_object(newest / "message.json")
    assert message["user"]["prompt"]["task"] == "Now Porto"
    assert message["assistant"]["tokens"]["input"] == 30 and "completed" in message["time"]
    assert read_json_object(tree / "session.json")["status"] == "completed"

    shown = run_cli("sessions", "show", NAME, "--user", USER, "--json")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert [line for line in shown.stderr.splitlines() if str(path) in line] != []
    turns = json.loads(shown.stdout)["turns"]
    assert [t["user_input"] for t in turns] == ["Plan a day in Lisbon", "Now Porto"]
    assert os.path.exists(path)


@pytest.mark.parametrize("damaged", ["session.json", "the approval gate"])
def test_a_run_resumed_after_the_damage_is_recorded(damaged: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A run waits for approval; a file of its tree is cut; a new Recorder resumes it. A
    rebuilt session.json still leads to the waiting gate (the same exchange goes on); a
    gate that cannot be read leaves the resumed run to a new exchange, said once."""
    agent = agent_asking()
    tree, saved = paused_for_approval(agent, "waits")
    (exchange,) = [p.parent for p in tree.glob("*/message.json")]
    (gate,) = [p for p in exchange.glob("part/*.json") if b'"await_human"' in p.read_bytes()]
    path = tree / "session.json" if damaged == "session.json" else gate
    cut = _truncate(path)

    with caplog.at_level(logging.WARNING, logger="sessiontape"):
        rec = approve_in_a_new_recorder(agent, saved, "waits")
    assert rec.errors == 0
    (warning,) = _warnings(caplog)
    assert str(path) in warning
    info = read_json_object(tree / "session.json")
    assert info["status"] == "completed"
    parts = [(p.parent.parent, read_json_object(p)) for p in sorted(tree.glob("*/part/*.json"))
             if p != gate or damaged == "session.json"]
    calls = [(directory, p["state"]["status"], p["state"].get("output"))
             for directory, p in parts if p.get("tool") == "delete_file"]
    if damaged == "session.json":
        assert "rebuilt" in warning and "recovered" in info
        assert calls == [(exchange, "completed", "deleted x.txt")]
        assert read_json_object(gate)["state"]["output"] == {"status": "approved"}
    else:
        assert "new exchange" in warning and gate.read_bytes() == cut
        assert [(d == exchange, status, out) for d, status, out in calls] == [
            (False, "completed", "deleted x.txt")]
