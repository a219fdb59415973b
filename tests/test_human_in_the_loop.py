"""Human in the loop: a tool call that needs approval suspends the run; the resume (the
same Recorder, or a new one from the saved RunState) completes that same call.

Read in all three outputs: the AgentUse tree (session ``suspended``, a ``pending`` tool part,
then the same part completed or failed, in one exchange), the JSONL log (one turn with a
``suspended`` line, closed by the resume) and the item store (the call and its output)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, Runner, RunState, function_tool
from scripted import call, final, model, read_session, read_turns, store_items, tools_step

from sessiontape import Recorder
from sessiontape.storage.log_entries import STEP_TYPES


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def agent_asking() -> Agent[Any]:
    return Agent(name="Janitor", tools=[delete_file], model=model(
        tools_step(call("delete_file", {"path": "x.txt"}, "call_delete")), final("all done")))


async def run(way: str, rec: Recorder, agent: Agent[Any], given: Any) -> Any:
    """``rec.run``, ``rec.run_streamed`` (consumed) or ``Runner.run`` with rec's hooks."""
    if way == "rec.run":
        return await rec.run(agent, given)
    if way == "Runner.run":
        return await Runner.run(agent, given, hooks=rec.hooks, session=rec.session)
    result = rec.run_streamed(agent, given)
    async for _ in result.stream_events():
        pass
    return result


def tool_part(rec: Recorder) -> dict[str, Any]:
    [exchange] = read_session(rec).messages  # one exchange, before and after the resume
    [part] = [p for p in exchange.parts if p["type"] == "tool"]
    return part


def check_suspended(rec: Recorder) -> None:
    session = read_session(rec)
    assert session.info["status"] == "suspended"
    [exchange] = session.messages
    assert "completed" not in exchange.info["time"]
    part = tool_part(rec)
    assert part["callID"] == "call_delete" and part["tool"] == "delete_file"
    state = part["state"]
    assert (state["status"], state["input"]) == ("pending", {"path": "x.txt"})
    assert state["resumePayload"]["kind"] == "tool_approval" and state["suspendedAt"] > 0
    [turn] = read_turns(rec)
    assert not turn.complete  # the turn waits: no final_result yet
    [waiting] = [s for s in turn.steps if s["type"] == "suspended"]
    assert waiting["pending"] == [{"callId": "call_delete", "toolName": "delete_file",
                                   "arguments": '{"path":"x.txt"}'}]


@pytest.mark.parametrize("way", ["rec.run", "rec.run_streamed", "Runner.run"])
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_an_approval_suspends_the_run_and_the_resume_completes_the_same_call(
        way: str, decision: str) -> None:
    rec = Recorder(session_name=f"hitl-{way}-{decision}")
    agent = agent_asking()

    async def pause() -> Any:
        result = await run(way, rec, agent, "please delete x.txt")
        await rec.flush()
        return result

    paused = asyncio.run(pause())
    [asked] = paused.interruptions
    assert paused.final_output is None
    check_suspended(rec)

    state = paused.to_state()
    getattr(state, decision)(asked)

    async def resume() -> Any:
        result = await run(way, rec, agent, state)
        await rec.aclose()
        return result

    assert asyncio.run(resume()).final_output == "all done"
    assert rec.errors == 0
    session = read_session(rec)
    assert session.info["status"] == "completed"
    [exchange] = session.messages
    assert "completed" in exchange.info["time"]
    state_after = tool_part(rec)["state"]
    output = "deleted x.txt" if decision == "approve" else "Tool execution was not approved."
    if decision == "approve":
        assert (state_after["status"], state_after["output"]) == ("completed", output)
    else:
        assert state_after["status"] == "error" and state_after["error"] == f"rejected: {output}"
    assert state_after["metadata"]["resumePayload"]["kind"] == "tool_approval"

    [turn] = read_turns(rec)  # one turn: the resume closed it
    assert (turn.user_input, turn.text, turn.complete) == ("please delete x.txt", "all done",
                                                          True)
    [end] = [s for s in turn.steps if s["type"] == "agent_tool_end"]
    assert end["result"] == output and (end.get("status") == "error") == (decision == "reject")
    lines = [json.loads(t) for t in rec.log_path.read_text("utf-8").splitlines()]
    assert [line["kind"] for line in lines].count("user_message") == 1
    assert {line["stepResult"]["type"] for line in lines if line["kind"] == "step"} \
        <= STEP_TYPES  # skilled_crew's replay takes every step; it skips the suspended line

    items = asyncio.run(store_items(Recorder(session_name=f"hitl-{way}-{decision}")))
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [("call_delete", output)]


def test_a_new_recorder_resumes_from_a_saved_state() -> None:
    """The run is suspended by one Recorder; another (a new process would do the same)
    resumes from the RunState saved as a string, and completes the same exchange."""
    agent = agent_asking()

    async def pause() -> str:
        async with Recorder(session_name="hitl-later") as rec:
            result = await rec.run(agent, "please delete x.txt")
        check_suspended(rec)
        return result.to_state().to_string()

    saved = asyncio.run(pause())

    async def resume() -> Recorder:
        state = await RunState.from_string(agent, saved)
        state.approve(state.get_interruptions()[0])
        async with Recorder(session_name="hitl-later") as rec:
            assert (await rec.run(agent, state)).final_output == "all done"
        return rec

    rec = asyncio.run(resume())
    assert read_session(rec).info["status"] == "completed"
    state_after = tool_part(rec)["state"]
    assert (state_after["status"], state_after["output"]) == ("completed", "deleted x.txt")
    [turn] = read_turns(rec)
    assert turn.complete and turn.text == "all done"
