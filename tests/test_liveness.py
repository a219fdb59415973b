"""A recording whose process died is told from a live one (storage/agentuse/liveness.py).

A recorder holds a lock on its session's directory while it records a run and names
itself in session.json (``recorder``). After a ``kill -9`` the session still says
``running`` on disk (AgentUse lists unknown statuses as running, so none is written),
but ``sessions list`` and ``sessions show`` report it ``crashed``; while the process
lives they report ``running``. The next run of the conversation closes the dead
exchange: its open tool call and the exchange end as interrupted, and so do those of its
subagents, at every depth.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import REPO, Lines, now_ms, run_cli, wait_for
from scripted import final, model, read_session, tool_parts

from sessiontape import Recorder
from sessiontape.storage.agentuse.liveness import (
    CRASHED,
    INTERRUPTED,
    close_interrupted,
    reported_status,
)
from sessiontape.storage.agentuse.reader import LoadedSession, load_session
from sessiontape.storage.agentuse.writer import AgentUseSession

USER, NAME = "live@example.com", "killed"

# A script's start: a tool that never returns, after printing "waiting".
WAITS_FOREVER = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, "tests")
    from agents import Agent, function_tool
    from scripted import call, final, model, tools_step
    from sessiontape import Recorder

    @function_tool
    async def wait_forever() -> str:
        \"\"\"Never returns.\"\"\"
        print("waiting", flush=True)
        await asyncio.sleep(3600)
        return "never"
""")

WAITING = WAITS_FOREVER + textwrap.dedent(f"""
    async def main():
        rec = Recorder(user_id={USER!r}, session_name={NAME!r})
        agent = Agent(name="A", tools=[wait_forever], model=model(
            tools_step(call("wait_forever", {{}}, "c_wait")), final("never")))
        await rec.run(agent, "wait please")

    asyncio.run(main())
""")


def listed_status() -> str:
    done = run_cli("sessions", "list", "--json", "--user", USER)
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(done.stdout)
    return str(entry["status"])


def shown_status() -> str:
    done = run_cli("sessions", "show", NAME, "--user", USER, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session"]["status"])


def session_dir() -> Path:
    return read_session(Recorder(user_id=USER, session_name=NAME)).directory


def on_disk(directory: Path) -> dict[str, Any]:
    return dict(json.loads((directory / "session.json").read_bytes()))


@pytest.mark.slow
def test_a_killed_recording_is_reported_crashed_and_closed_by_the_next_run() -> None:
    waiting = Lines([sys.executable, "-c", WAITING], cwd=REPO)
    try:
        waiting.expect("waiting")

        def tool_part_on_disk() -> bool:
            directory = Recorder(user_id=USER, session_name=NAME).session_dir
            parts = list(directory.glob("*/part/*.json")) if directory is not None else []
            return any(b'"c_wait"' in path.read_bytes() for path in parts)
        wait_for(tool_part_on_disk, "the running tool call on disk")
        assert listed_status() == "running" and shown_status() == "running"  # alive
        waiting.proc.send_signal(signal.SIGKILL)
        waiting.finish()
    finally:
        waiting.stop()

    directory = session_dir()
    assert on_disk(directory)["status"] == "running"  # what the dead process left
    assert listed_status() == CRASHED and shown_status() == CRASHED

    # The next run of the conversation closes the dead exchange, then records its own.
    rec = Recorder(user_id=USER, session_name=NAME)
    result = asyncio.run(rec.run(Agent(name="A", model=model(final("back again"))), "again"))
    assert result.final_output == "back again" and rec.errors == 0
    session = read_session(rec)
    dead, alive = session.messages
    call = tool_parts(dead)["c_wait"]
    assert call["state"]["status"] == "error"
    assert call["state"]["error"].startswith("interrupted")
    assert call["state"]["time"]["end"] >= call["state"]["time"]["start"]
    assert dead.info["assistant"]["error"]["type"] == "Interrupted"
    assert "completed" not in dead.info["time"]
    [error] = [p for p in dead.parts if p["type"] == "error"]
    assert error["code"] == "INTERRUPTED"
    assert "completed" in alive.info["time"]
    assert on_disk(directory)["status"] == "completed"
    assert listed_status() == "completed"


def test_a_session_without_a_recorder_keeps_its_status(tmp_path: Path) -> None:
    """AgentUse's own sessions (no ``recorder`` key) cannot be judged: running stays."""
    session = AgentUseSession.create(tmp_path, "Foreign", model="openai:gpt-4.1",
                                     project_root="/p", cwd="/p")
    assert reported_status(on_disk(session.directory), session.directory) == "running"
    info = {**on_disk(session.directory), "recorder": {"pid": 1, "host": "h", "started": 1}}
    # with a recorder named and nobody holding the lock: crashed, and so is its subagent
    assert reported_status(info, session.directory) == CRASHED
    (session.directory / "session.json").write_text(json.dumps(info))
    child = session.create_subagent("Helper", model="openai:gpt-4.1")
    assert reported_status(on_disk(child.directory), child.directory) == CRASHED
    assert reported_status({**info, "status": "completed"}, session.directory) == "completed"


# Top asks Middle (an ``Agent.as_tool`` subagent), which asks Leaf, whose tool never returns.
NESTED = WAITS_FOREVER + textwrap.dedent(f"""
    async def main():
        leaf = Agent(name="Leaf", tools=[wait_forever], model=model(
            tools_step(call("wait_forever", {{}}, "c_wait")), final("never")))
        middle = Agent(name="Middle", tools=[leaf.as_tool("ask_leaf", "Ask.")], model=model(
            tools_step(call("ask_leaf", {{"input": "go"}}, "c_leaf")), final("never")))
        top = Agent(name="Top", tools=[middle.as_tool("ask_middle", "Ask.")], model=model(
            tools_step(call("ask_middle", {{"input": "go"}}, "c_middle")), final("never")))
        await Recorder(user_id={USER!r}, session_name={NAME!r}).run(top, "wait please")

    asyncio.run(main())
""")


def killed_in_a_nested_subagent() -> Path:
    """The session directory of a recording killed (``kill -9``) while its subagent's
    subagent waits in a tool call, once that call is on disk."""
    waiting = Lines([sys.executable, "-c", NESTED], cwd=REPO)
    try:
        waiting.expect("waiting")

        def leaf_call_on_disk() -> bool:
            directory = Recorder(user_id=USER, session_name=NAME).session_dir
            found = directory.glob("subagent/*/subagent/*/*/part/*.json") if directory else []
            return any(b'"c_wait"' in path.read_bytes() for path in found)
        wait_for(leaf_call_on_disk, "the leaf's running tool call on disk")
        waiting.proc.send_signal(signal.SIGKILL)
        waiting.finish()
    finally:
        waiting.stop()
    directory = session_dir()
    middle = load_session(directory).subagents[0]
    assert tool_parts(middle.messages[0])["c_leaf"]["state"]["status"] == "running"
    assert middle.subagents[0].info["status"] == "running"  # what the dead process left
    return directory


def interrupted_at_every_depth(dead: LoadedSession) -> int:
    """Check that the dead run's exchange and its subagents' are closed as interrupted, at
    one time, and return it: each call's tool part is ``error`` with the reason, each
    subagent session ``error`` (``INTERRUPTED``) and its exchange failed with an ``error``
    part (what the recorder writes for a failed subagent run)."""
    [top] = [m for m in dead.messages if "error" in m.info["assistant"]]
    middle = dead.subagents[0]
    [leaf] = middle.subagents
    calls = [(top, "c_middle"), (middle.messages[0], "c_leaf"), (leaf.messages[0], "c_wait")]
    ends = set()
    for message, call_id in calls:
        state = tool_parts(message)[call_id]["state"]
        assert (state["status"], state.get("error")) == ("error", INTERRUPTED), call_id
        assert state["time"]["end"] >= state["time"]["start"]
        ends.add(state["time"]["end"])
        assert message.info["assistant"]["error"] == {"message": INTERRUPTED,
                                                      "type": "Interrupted"}
        assert "completed" not in message.info["time"]
        [error] = [p for p in message.parts if p["type"] == "error"]
        assert error["code"] == "INTERRUPTED"
    for sub in (middle, leaf):
        assert sub.info["status"] == "error"
        assert sub.info["error"] == {"code": "INTERRUPTED", "message": INTERRUPTED,
                                     "time": sub.info["time"]["updated"]}
        ends.add(sub.info["time"]["updated"])
    [at] = ends
    return at


@pytest.mark.slow
def test_a_dead_exchange_is_closed_as_interrupted_at_every_depth() -> None:
    """AgentUse stops a session tree whole (``stopSessionTree``, src/session/manager.ts:
    804-858): every session still running becomes ``error`` and its pending or running
    tool parts ``error``, nested subagents included. So does :func:`close_interrupted`,
    which the next run applies to a session whose recorder is gone."""
    directory = killed_in_a_nested_subagent()
    before = now_ms()
    close_interrupted(AgentUseSession.open(directory), before)
    assert interrupted_at_every_depth(load_session(directory)) == before


@pytest.mark.slow
def test_the_next_run_closes_a_killed_recording_at_every_depth() -> None:
    directory = killed_in_a_nested_subagent()
    assert listed_status() == CRASHED
    before = now_ms()
    rec = Recorder(user_id=USER, session_name=NAME)
    result = asyncio.run(rec.run(Agent(name="Top", model=model(final("back again"))), "again"))
    assert result.final_output == "back again" and rec.errors == 0
    session = read_session(rec)
    assert interrupted_at_every_depth(session) >= before
    assert "completed" in session.messages[1].info["time"]
    assert on_disk(directory)["status"] == "completed"
