"""Human in the loop: a tool call that needs approval suspends the run; the resume (the
same Recorder, or a new one from the saved RunState) runs (or rejects) that call.

Read in all three outputs: the AgentUse tree (session ``suspended`` with AgentUse's own
approval gate, a ``pending`` tool part ``await_human``, which AgentUse's ``sessions show``
and its serve's ``GET /api/approvals`` show as pending; the resume completes the gate with
the decision and records the call, in the same exchange), the JSONL log (one turn with a
``suspended`` line, closed by the resume) and the item store (the call and its output)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, RunState, function_tool
from agentuse_views import listed_approval, show_lines
from scripted import call, final, model, read_session, read_turns, store_items, tools_step

from sessiontape import Recorder
from sessiontape.storage.skillet.log_entries import STEP_TYPES


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


def tool_parts(rec: Recorder) -> dict[str, dict[str, Any]]:
    """The exchange's tool parts by tool name (one exchange, before and after the resume)."""
    [exchange] = read_session(rec).messages
    return {p["tool"]: p for p in exchange.parts if p["type"] == "tool"}


def check_suspended(rec: Recorder) -> None:
    """The wait is AgentUse's own approval gate, as its approval gate writes it
    (src/runner/stream.ts:776-797: the pending state ``{status: "pending", input,
    suspendedAt, resumePayload: {kind: "await_human", prompt, ...}}`` of the gate's tool
    part), checked against the two rules of AgentUse's readers:

    - ``sessions show`` prints ``Approval: pending`` under a ``tool`` part whose
      ``state.status`` is ``pending`` and ``state.resumePayload.kind`` ``await_human``
      (src/cli/sessions.ts:1029-1030);
    - ``GET /api/approvals`` lists a top-level session's newest part whose file matches
      ``/"tool"\\s*:\\s*"await_human"/`` and is a ``tool`` part of tool ``await_human``
      (src/session/manager.ts:666-692, 734-745), ``pending`` when that part is and the
      session is ``suspended`` or ``running`` (src/index.ts:2418-2432), with ``prompt``
      from ``state.input.prompt`` and ``suspendedAt`` (src/index.ts:2470-2473).
    """
    session = read_session(rec)
    assert session.info["status"] == "suspended" and "parentSessionID" not in session.info
    [exchange] = session.messages
    assert "completed" not in exchange.info["time"]
    assert list(tool_parts(rec)) == ["await_human"]  # the call itself has not run yet
    gate = tool_parts(rec)["await_human"]
    assert gate["callID"] == "approval_call_delete"
    state = gate["state"]
    assert list(state) == ["status", "input", "suspendedAt", "resumePayload"]  # AgentUse's
    assert state["status"] == "pending" and state["suspendedAt"] > 0
    # what a reviewer reads, and the call a resume in another process finds the gate by
    assert state["input"] == {"prompt": "Approve delete_file?", "tool": "delete_file",
                              "arguments": {"path": "x.txt"}}
    assert state["resumePayload"] == {"kind": "await_human", "prompt": "Approve delete_file?",
                                      "callID": "call_delete"}
    assert rec.session_dir is not None
    shown = show_lines(rec.session_dir)
    assert shown[shown.index("Output:") + 1:] == [
        "─── … await_human (Approve delete_file?) ───────────────────",
        "Approval: pending", "─" * 60]
    assert listed_approval(rec.session_dir) == {
        "sessionId": session.info["id"], "agentName": "Janitor", "status": "pending",
        "sessionStatus": "suspended", "prompt": "Approve delete_file?",
        "suspendedAt": state["suspendedAt"]}
    [turn] = read_turns(rec)
    assert not turn.complete  # the turn waits: no final_result yet
    [waiting] = [s for s in turn.steps if s["type"] == "suspended"]
    assert waiting["pending"] == [{"callId": "call_delete", "toolName": "delete_file",
                                   "arguments": '{"path":"x.txt"}'}]


def check_decided(rec: Recorder, decision: str) -> None:
    """After the resume: the gate is completed with the decision, as AgentUse's resume
    writes it (src/runner/resume.ts:63-74: ``output`` the decision ``{status,
    [comment]}``, ``metadata.resumePayload``, ``time {start: suspendedAt, end}``), which
    its serve lists as ``approved`` / ``rejected`` (src/index.ts:2433-2441); the call is a
    tool part of its own, completed, or failed with what the model was told."""
    tools = tool_parts(rec)
    assert list(tools) == ["await_human", "delete_file"]  # the gate, then the call
    gate, done = tools["await_human"]["state"], tools["delete_file"]["state"]
    output = "deleted x.txt" if decision == "approve" else "Tool execution was not approved."
    if decision == "approve":
        assert gate["output"] == {"status": "approved"}
        assert (done["status"], done["output"]) == ("completed", output)
    else:
        assert gate["output"] == {"status": "rejected", "comment": output}
        assert done["status"] == "error" and done["error"] == f"rejected: {output}"
    assert gate["status"] == "completed"
    assert gate["metadata"] == {"resumePayload": {"kind": "await_human",
                                                  "prompt": "Approve delete_file?",
                                                  "callID": "call_delete"}}
    assert gate["time"]["start"] <= gate["time"]["end"] <= done["time"]["start"]
    assert tools["delete_file"]["callID"] == "call_delete" and done["input"] == {"path": "x.txt"}
    assert rec.session_dir is not None
    listed = listed_approval(rec.session_dir)
    assert listed is not None and (listed["status"], listed["sessionStatus"]) == (
        "approved" if decision == "approve" else "rejected", "completed")


@pytest.mark.parametrize("way", ["rec.run", "rec.run_streamed", "Runner.run"])
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_an_approval_waits_at_agentuses_gate_and_the_resume_decides_it(
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
    check_decided(rec, decision)
    output = "deleted x.txt" if decision == "approve" else "Tool execution was not approved."

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

    rec = approve_in_a_new_recorder(agent, saved, "hitl-later")
    assert read_session(rec).info["status"] == "completed"
    check_decided(rec, "approve")
    [turn] = read_turns(rec)
    assert turn.complete and turn.text == "all done"


def approve_in_a_new_recorder(agent: Agent[Any], saved: str, session_name: str) -> Recorder:
    """Approve the first waiting call of a saved RunState and resume it in a new Recorder,
    as a process other than the one that paused would."""
    async def resume() -> Recorder:
        state = await RunState.from_string(agent, saved)
        state.approve(state.get_interruptions()[0])
        async with Recorder(session_name=session_name) as rec:
            assert (await rec.run(agent, state)).final_output == "all done"
        return rec

    return asyncio.run(resume())


def paused_for_approval(agent: Agent[Any], session_name: str) -> tuple[Path, str]:
    """A recorded run of ``agent`` that waits for approval: its AgentUse session directory
    and its saved RunState."""
    async def pause() -> tuple[Path, str]:
        async with Recorder(session_name=session_name) as rec:
            result = await rec.run(agent, "please delete x.txt")
        assert rec.session_dir is not None
        return rec.session_dir, result.to_state().to_string()

    return asyncio.run(pause())


def test_a_wait_written_by_sessiontape_0_3_is_resumed() -> None:
    """A tree of sessiontape 0.3 has no gate: the waiting call's own part is ``pending``,
    with ``resumePayload {kind: "tool_approval", prompt}`` (docs/recording.md of 0.3). A new
    Recorder resuming from the saved RunState finds that part by its ``callID`` and
    completes it, as 0.3 did, keeping the payload in ``state.metadata``; no gate is added."""
    agent = agent_asking()
    session_dir, saved = paused_for_approval(agent, "hitl-old")
    [gate_file] = [p for p in session_dir.glob("*/part/*.json")
                   if json.loads(p.read_text())["type"] == "tool"]
    gate = json.loads(gate_file.read_text())
    old_payload = {"kind": "tool_approval", "prompt": "Approve delete_file?"}
    gate_file.write_text(json.dumps({  # the wait as sessiontape 0.3 wrote it
        "type": "tool", "callID": "call_delete", "tool": "delete_file",
        "state": {"status": "pending", "input": {"path": "x.txt"},
                  "suspendedAt": gate["state"]["suspendedAt"], "resumePayload": old_payload},
        "id": gate["id"], "sessionID": gate["sessionID"], "messageID": gate["messageID"]},
        indent=2))

    rec = approve_in_a_new_recorder(agent, saved, "hitl-old")
    assert read_session(rec).info["status"] == "completed"
    [(name, part)] = tool_parts(rec).items()
    assert (name, part["id"], part["callID"]) == ("delete_file", gate["id"], "call_delete")
    state = part["state"]
    assert (state["status"], state["output"]) == ("completed", "deleted x.txt")
    assert state["metadata"] == {"resumePayload": old_payload}


def test_two_waiting_calls_each_get_a_gate_and_their_own_decision() -> None:
    """Two calls wait at once: each has its gate (found again by ``resumePayload.callID``
    by a new Recorder), one is approved and one rejected, and each gate gets its own
    decision. AgentUse lists a session's newest gate (src/session/manager.ts:734-745)."""
    agent = Agent(name="Janitor", tools=[delete_file], model=model(
        tools_step(call("delete_file", {"path": "a.txt"}, "call_a"),
                   call("delete_file", {"path": "b.txt"}, "call_b")), final("half done")))

    async def pause() -> str:
        async with Recorder(session_name="hitl-two") as rec:
            result = await rec.run(agent, "delete a.txt and b.txt")
        assert rec.session_dir is not None
        gates = [p for p in read_session(rec).messages[0].parts if p["type"] == "tool"]
        assert [(g["tool"], g["state"]["resumePayload"]["callID"]) for g in gates] == [
            ("await_human", "call_a"), ("await_human", "call_b")]
        listed = listed_approval(rec.session_dir)
        assert listed is not None and listed["status"] == "pending"
        return result.to_state().to_string()

    saved = asyncio.run(pause())

    async def resume() -> Recorder:
        state = await RunState.from_string(agent, saved)
        first, second = state.get_interruptions()
        state.approve(first)
        state.reject(second)
        async with Recorder(session_name="hitl-two") as rec:
            assert (await rec.run(agent, state)).final_output == "half done"
        return rec

    rec = asyncio.run(resume())
    [exchange] = read_session(rec).messages
    tools = [p for p in exchange.parts if p["type"] == "tool"]
    decided = {p["state"]["metadata"]["resumePayload"]["callID"]: p["state"]["output"]
               for p in tools if p["tool"] == "await_human"}
    assert decided == {"call_a": {"status": "approved"},
                       "call_b": {"status": "rejected",
                                  "comment": "Tool execution was not approved."}}
    calls = {p["callID"]: p["state"]["status"] for p in tools if p["tool"] == "delete_file"}
    assert calls == {"call_a": "completed", "call_b": "error"}
    assert rec.session_dir is not None
    listed = listed_approval(rec.session_dir)
    assert listed is not None and listed["status"] == "rejected"  # call_b's, the newest
