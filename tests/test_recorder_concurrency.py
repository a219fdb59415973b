"""Several recorded conversations at once: in one event loop, and in two processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from typing import Any

import pytest
from agents import Agent, function_tool
from scripted import (
    call,
    final,
    model,
    parts,
    read_session,
    read_turns,
    record_conversation,
    run_agent,
    steps_of,
    store_items,
    tool_parts,
    tools_step,
    usage,
)

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import scan_sessions
from sessiontape.storage.paths import SkilletPaths, agentuse_sessions_root


@function_tool
async def pause(label: str, delay: float) -> str:
    """Sleeps, then returns its label."""
    await asyncio.sleep(delay)
    return f"{label} after {delay}"


def test_recorders_running_together_in_one_loop_stay_apart() -> None:
    count = 6

    def agent_for(n: int) -> Agent[Any]:
        helper = Agent(name=f"Helper{n}", model=model(
            tools_step(call("pause", {"label": f"h{n}", "delay": 0.01 * (count - n)}, f"c_h{n}"),
                       u=usage(1, n)),
            final(f"helper {n} done", usage(2, n))), tools=[pause])
        return Agent(name=f"Agent{n}", tools=[pause, helper.as_tool("helper", "Ask.")],
                     model=model(
                         tools_step(call("pause", {"label": f"p{n}", "delay": 0.02 * (n % 3)},
                                         f"c_p{n}"),
                                    call("helper", {"input": f"task {n}"}, f"c_sub{n}"),
                                    u=usage(100 + n, 10 + n)),
                         final(f"answer {n}", usage(200 + n, 20 + n))))

    recs = [Recorder("u", f"together-{n}") for n in range(count)]

    async def main() -> list[list[Any]]:
        outputs = await asyncio.gather(*(
            run_agent(rec, agent_for(n), f"prompt {n}", streamed=n % 2 == 1)
            for n, rec in enumerate(recs)))
        assert outputs == [f"answer {n}" for n in range(count)]
        return [await store_items(rec) for rec in recs]

    stored = asyncio.run(main())
    assert len({rec.session_dir for rec in recs}) == count
    assert len({rec.log_path for rec in recs}) == count
    for n, rec in enumerate(recs):
        assert rec.errors == 0
        session = read_session(rec)
        assert session.info["agent"]["name"] == f"Agent{n}"
        assert session.info["status"] == "completed"
        [msg] = session.messages
        assert msg.info["user"]["prompt"]["task"] == f"prompt {n}"
        assert msg.info["assistant"]["tokens"]["input"] == 300 + 2 * n
        assert msg.info["assistant"]["tokens"]["output"] == 30 + 2 * n
        tools = tool_parts(msg)
        assert set(tools) == {f"c_p{n}", f"c_sub{n}"}
        assert tools[f"c_p{n}"]["state"]["output"] == f"p{n} after {0.02 * (n % 3)}"
        assert tools[f"c_sub{n}"]["state"]["output"]["output"] == f"helper {n} done"
        [child] = session.subagents
        assert child.info["agent"]["name"] == f"Helper{n}"
        assert tools[f"c_sub{n}"]["state"]["metadata"]["sessionID"] == child.id
        [child_msg] = child.messages
        assert child_msg.info["assistant"]["tokens"]["output"] == 2 * n
        assert tool_parts(child_msg)[f"c_h{n}"]["state"]["output"] == \
            f"h{n} after {0.01 * (count - n)}"
        assert parts(child_msg, "text")[0]["text"] == f"helper {n} done"

        [turn] = read_turns(rec)
        assert turn.user_input == f"prompt {n}" and turn.final["text"] == f"answer {n}"
        names = {s["agentName"] for s in turn.steps if "agentName" in s}
        assert names == {f"Agent{n}", f"Helper{n}"}
        assert [s["text"] for s in steps_of(turn, "text")] == [f"answer {n}"]
        assert stored[n][0] == {"role": "user", "content": f"prompt {n}"}
        assert {i["call_id"] for i in stored[n] if "call_id" in i} == {f"c_p{n}", f"c_sub{n}"}


@pytest.mark.slow
def test_two_processes_record_into_the_same_store() -> None:
    context = multiprocessing.get_context("spawn")
    turns = 4
    names = ["alpha", "beta"]
    barrier = context.Barrier(len(names))
    processes = [context.Process(target=record_conversation, args=(name, turns, barrier))
                 for name in names]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [p.exitcode for p in processes] == [0, 0]

    store_file = SkilletPaths.resolve().store_file
    with sqlite3.connect(store_file) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = dict(conn.execute(
            "SELECT session_name, COUNT(*) FROM session_items GROUP BY session_name"))
    # per turn: user, 2 function calls, 2 outputs, the answer
    assert rows == dict.fromkeys(names, 6 * turns)

    scan = scan_sessions(agentuse_sessions_root())
    assert scan.problems == []
    top = [s for s in scan.sessions if s.parent_id is None]
    assert sorted(s.agent_name for s in top) == ["agent-alpha", "agent-beta"]
    assert len(scan.sessions) == 2 + 2 * turns  # one helper session per turn
    for name in names:
        rec = Recorder("proc@example.com", name)
        session = read_session(rec)
        assert session.info["status"] == "completed"
        assert [m.info["user"]["prompt"]["task"] for m in session.messages] == [
            f"{name} prompt {t}" for t in range(turns)]
        assert len(session.subagents) == turns
        turns_read = read_turns(rec)
        assert [t.final["text"] for t in turns_read] == [f"{name} turn {t}" for t in range(turns)]
        assert all(t.complete for t in turns_read)

        async def items(rec: Recorder = rec) -> list[Any]:
            return await store_items(rec)

        assert len(asyncio.run(items())) == 6 * turns
