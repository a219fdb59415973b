"""The Recorder, end to end: the real ``agents.Runner`` with scripted models.

Each test runs an agent through ``rec.run`` and/or ``rec.run_streamed`` and
reads what was written back through the storage readers (AgentUse tree,
JSONL replay log, SQLite item store).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    Handoff,
    RunConfig,
    RunHooks,
    Runner,
    default_tool_error_function,
    function_tool,
)
from agents.testing import ModelStep
from harness import snapshot
from scripted import (
    call,
    chunked_message,
    final,
    model,
    parts,
    read_session,
    read_turns,
    reasoning,
    run_agent,
    steps_of,
    store_items,
    tool_parts,
    tools_step,
    usage,
)

from sessiontape import Price, Recorder
from sessiontape.sdk_compat import FORMATTER_SEES_TOOL_EXCEPTIONS
from sessiontape.storage.paths import agentuse_sessions_root
from sessiontape.storage.skillet.replay_log import log_path_for

STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@function_tool
def kaboom(reason: str) -> str:
    """Always fails."""
    raise ValueError("kaboom")


@function_tool
async def echo(text: str, delay: float) -> str:
    """Echo after a delay."""
    await asyncio.sleep(delay)
    return text.upper()


def tokens(input: int, output: int, reasoning: int = 0, read: int = 0, write: int = 0) -> dict:
    """A ``tokens`` object as message.json and step-finish parts hold it."""
    return {"input": input, "output": output, "reasoning": reasoning,
            "cache": {"read": read, "write": write}}


# -- one run, both layouts ---------------------------------------------------------------


@STREAMED
def test_a_run_is_recorded_in_both_layouts(streamed: bool, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    helper = Agent(name="Helper", model=model())
    specialist = Agent(name="Specialist", handoff_description="knows things", model=model())
    helper_tool = helper.as_tool("helper", "Asks the helper.")
    u1 = usage(100, 20, reasoning=5, cached=40, cache_write=3)
    u2 = usage(50, 10, cached=10)
    agent = Agent(
        name="Main Agent", instructions="Be brief.",
        model=model(tools_step(call("add", {"a": 1, "b": 2}, "call_add"), u=u1,
                               extra=[reasoning("I should add.")]),
                    final("The sum is 3.", u2)),
        tools=[add, helper_tool], handoffs=[specialist])
    rec = Recorder("ann@example.com", "basics", project_root=project)

    async def main() -> list[Any]:
        assert await run_agent(rec, agent, "What is 1+2?", streamed, max_turns=7) == "The sum is 3."
        return await store_items(rec)

    items = asyncio.run(main())
    assert rec.errors == 0

    # session.json and tools.json
    assert rec.session_dir is not None
    assert rec.session_dir.parent == agentuse_sessions_root(project)
    assert rec.session_dir.name.endswith("-main-agent")
    session = read_session(rec)
    info = session.info
    assert info["agent"] == {"id": "Main Agent", "name": "Main Agent", "isSubAgent": False}
    assert info["model"] == "scripted:gpt-4.1"
    assert info["version"].startswith("sessiontape/")
    assert info["config"] == {"maxSteps": 7}
    assert info["project"] == {"root": os.path.abspath(project), "cwd": os.getcwd()}
    assert info["status"] == "completed" and "error" not in info
    assert info["trigger"] == "manual"
    assert info["time"]["updated"] >= info["time"]["created"]
    assert session.tools == [
        {"name": "add", "description": "Add two integers.", "inputSchema": add.params_json_schema},
        {"name": "helper", "description": "Asks the helper.",
         "inputSchema": helper_tool.params_json_schema},
        {"name": "transfer_to_specialist",
         "description": Handoff.default_tool_description(specialist)},
    ]
    assert session.subagents == []  # the helper was offered, not called

    # message.json: one exchange, the sum of the two calls
    [msg] = session.messages
    assert msg.info["user"] == {"prompt": {"task": "What is 1+2?"}}
    assistant = msg.info["assistant"]
    assert assistant["system"] == ["Be brief."]
    assert (assistant["modelID"], assistant["providerID"]) == ("scripted:gpt-4.1", "scripted")
    assert assistant["tokens"] == tokens(150, 30, reasoning=5, read=50, write=3)
    # gpt-4.1: $2 in, $0.50 cached in, $8 out per million tokens
    cost1 = (60 * 2.00 + 40 * 0.50 + 20 * 8.00) / 1_000_000
    cost2 = (40 * 2.00 + 10 * 0.50 + 10 * 8.00) / 1_000_000
    assert assistant["cost"] == cost1 + cost2
    assert msg.info["time"]["completed"] >= msg.info["time"]["created"]
    assert "error" not in assistant

    # parts, in order
    assert [p["type"] for p in msg.parts] == [
        "step-start", "reasoning", "step-finish", "tool", "step-start", "text", "step-finish"]
    finishes = parts(msg, "step-finish")
    assert finishes[0]["tokens"] == tokens(100, 20, reasoning=5, read=40, write=3)
    assert finishes[1]["tokens"] == tokens(50, 10, read=10)
    assert [f["cost"] for f in finishes] == [cost1, cost2]
    assert parts(msg, "reasoning")[0]["text"] == "I should add."
    [text] = parts(msg, "text")
    assert text["text"] == "The sum is 3." and text["time"]["end"] >= text["time"]["start"]
    tool = tool_parts(msg)["call_add"]
    assert tool["tool"] == "add"
    assert tool["state"]["status"] == "completed"
    assert tool["state"]["input"] == {"a": 1, "b": 2}
    assert tool["state"]["output"] == "3"
    assert tool["state"]["time"]["end"] >= tool["state"]["time"]["start"]
    assert all(p["sessionID"] == session.id and p["messageID"] == msg.info["id"]
               for p in msg.parts)

    # the JSONL replay log: one turn
    assert rec.log_path == log_path_for("ann@example.com", "basics")
    [turn] = read_turns(rec)
    assert turn.complete
    assert turn.user_input == "What is 1+2?"
    assert [s["type"] for s in turn.steps] == [
        "agent_start", "agent_tool_start", "agent_tool_end", "text", "agent_end"]
    assert turn.steps[1] == {"type": "agent_tool_start", "agentName": "Main Agent",
                             "toolName": "add", "toolArgumentsStr": '{"a":1,"b":2}',
                             "callId": "call_add"}
    assert turn.steps[2] == {"type": "agent_tool_end", "agentName": "Main Agent",
                             "toolName": "add", "result": "3", "callId": "call_add"}
    assert turn.steps[3] == {"type": "text", "text": "The sum is 3."}
    assert turn.final == {"text": "The sum is 3."}
    assert turn.model == "scripted/gpt-4.1"

    # the item store: the model's memory
    assert items[0] == {"role": "user", "content": "What is 1+2?"}
    kinds = [i.get("type") for i in items[1:]]
    assert kinds == ["reasoning", "function_call", "function_call_output", "message"]
    assert items[3] == {"call_id": "call_add", "output": "3", "type": "function_call_output"}


@STREAMED
def test_list_input_is_logged_as_given(streamed: bool) -> None:
    prompt = [{"role": "user", "content": "first"},
              {"role": "user", "content": [{"type": "input_text", "text": "second"}]}]
    agent = Agent(name="A", model=model(final("ok")))
    rec = Recorder(session_name="list-input")

    async def main() -> list[Any]:
        await run_agent(rec, agent, prompt, streamed)
        return await store_items(rec)

    items = asyncio.run(main())
    [turn] = read_turns(rec)
    assert turn.user_input == prompt
    [msg] = read_session(rec).messages
    assert msg.info["user"]["prompt"]["task"] == "first\nsecond"
    assert items[:2] == prompt


# -- tools -------------------------------------------------------------------------------


@STREAMED
def test_parallel_tool_calls_are_keyed_by_call_id(streamed: bool) -> None:
    # three calls in one model step; they finish in the reverse order they started
    agent = Agent(name="A", tools=[echo, kaboom], model=model(
        tools_step(call("echo", {"text": "slow", "delay": 0.15}, "c_slow"),
                   call("echo", {"text": "fast", "delay": 0.0}, "c_fast"),
                   call("kaboom", {"reason": "test"}, "c_bad")),
        final("done")))
    rec = Recorder(session_name="parallel")
    asyncio.run(run_agent(rec, agent, "go", streamed))

    [msg] = read_session(rec).messages
    tools = tool_parts(msg)
    assert set(tools) == {"c_slow", "c_fast", "c_bad"}
    assert tools["c_slow"]["state"]["status"] == "completed"
    assert tools["c_slow"]["state"]["output"] == "SLOW"
    assert tools["c_slow"]["state"]["input"] == {"text": "slow", "delay": 0.15}
    assert tools["c_fast"]["state"]["output"] == "FAST"
    bad = tools["c_bad"]["state"]
    assert bad["status"] == "error"
    assert bad["error"] == "ValueError: kaboom"
    assert "output" not in bad and bad["input"] == {"reason": "test"}
    assert tools["c_slow"]["state"]["time"]["end"] > tools["c_fast"]["state"]["time"]["end"]

    [turn] = read_turns(rec)
    starts = steps_of(turn, "agent_tool_start")
    ends = steps_of(turn, "agent_tool_end")
    assert [s["toolArgumentsStr"] for s in starts] == [
        '{"text":"slow","delay":0.15}', '{"text":"fast","delay":0.0}', '{"reason":"test"}']
    assert {(e["toolName"], e["result"]) for e in ends} == {
        ("echo", "SLOW"), ("echo", "FAST"),
        ("kaboom", default_tool_error_function(None, ValueError("kaboom")))}  # SDK's text
    assert [e["result"] for e in ends][-1] == "SLOW"  # the log keeps the real order


def test_a_user_tool_error_formatter_still_decides_the_model_text() -> None:
    seen: list[str] = []

    def formatter(args: Any) -> str:
        seen.append(args.call_id)
        return f"custom: {args.error}"

    model_ = model(tools_step(call("kaboom", {"reason": "x"}, "c_fmt")), final("ok"))
    agent = Agent(name="A", tools=[kaboom], model=model_)
    rec = Recorder(session_name="formatter")
    asyncio.run(rec.run(agent, "go", run_config=RunConfig(tool_error_formatter=formatter)))
    if FORMATTER_SEES_TOOL_EXCEPTIONS:
        assert seen == ["c_fmt"]
        assert model_.calls[1].input[-1]["output"] == "custom: kaboom"
    else:  # before 0.24 the SDK gives the formatter no tool exception: its own text goes
        assert seen == []
        assert model_.calls[1].input[-1]["output"] == default_tool_error_function(
            None, ValueError("kaboom"))
    [msg] = read_session(rec).messages
    assert tool_parts(msg)["c_fmt"]["state"]["error"] == "ValueError: kaboom"


class _Editor:
    def create_file(self, operation: Any) -> str:
        return f"created {operation.path}"

    def update_file(self, operation: Any) -> str:
        return f"updated {operation.path}"

    def delete_file(self, operation: Any) -> str:
        return f"deleted {operation.path}"


@STREAMED
def test_a_tool_without_a_tool_context_completes(streamed: bool) -> None:
    # apply_patch (like shell and computer tools) gets no ToolContext, hence no call id
    from agents import ApplyPatchTool

    def patch(call_id: str, path: str) -> dict[str, Any]:
        return {"type": "apply_patch_call", "call_id": call_id, "status": "completed",
                "operation": {"type": "create_file", "path": path, "diff": "+hi\n"}}

    agent = Agent(name="A", tools=[ApplyPatchTool(editor=_Editor())], model=model(
        tools_step(patch("c_p1", "a.txt"), patch("c_p2", "b.txt")), final("patched")))
    rec = Recorder(session_name="apply-patch")
    assert asyncio.run(run_agent(rec, agent, "patch", streamed)) == "patched"
    [msg] = read_session(rec).messages
    states = [p["state"] for p in parts(msg, "tool")]
    assert [(s["status"], s.get("output")) for s in states] == [
        ("completed", "created a.txt"), ("completed", "created b.txt")]
    [turn] = read_turns(rec)
    assert [s["result"] for s in steps_of(turn, "agent_tool_end")] == [
        "created a.txt", "created b.txt"]


# -- subagents and handoffs --------------------------------------------------------------


@STREAMED
def test_a_subagent_gets_a_nested_session(streamed: bool) -> None:
    sub_model = model(tools_step(call("add", {"a": 2, "b": 2}, "c_sub_add"), u=usage(7, 3)),
                      final("four", usage(9, 4, reasoning=2)))
    helper = Agent(name="Helper", instructions="Help.", tools=[add], model=sub_model)
    agent = Agent(name="Main", tools=[helper.as_tool("ask_helper", "Ask the helper.")],
                  model=model(tools_step(call("ask_helper", {"input": "2+2?"}, "c_helper"),
                                         u=usage(100, 10)),
                              final("It is four.", usage(120, 8))))
    rec = Recorder(session_name="subagent")
    assert asyncio.run(run_agent(rec, agent, "Ask the helper", streamed)) == "It is four."
    assert rec.errors == 0

    session = read_session(rec)
    [msg] = session.messages
    # the parent's totals are its own two calls: the subagent's are not added in
    assert msg.info["assistant"]["tokens"] == tokens(220, 18)
    [agent_part] = parts(msg, "agent")
    assert agent_part["name"] == "Helper"
    tool = tool_parts(msg)["c_helper"]
    assert tool["state"]["status"] == "completed"
    assert tool["state"]["output"]["output"] == "four"  # AgentUse's {output, metadata}

    [child] = session.subagents
    assert child.directory.parent == session.directory / "subagent"
    assert child.directory.name == f"{child.id}-helper"
    assert tool["state"]["metadata"]["sessionID"] == child.id
    assert child.info["parentSessionID"] == session.id
    assert child.info["agent"]["isSubAgent"] is True
    assert child.info["status"] == "completed"
    [child_msg] = child.messages
    assert child_msg.info["user"]["prompt"]["task"] == "2+2?"
    assert child_msg.info["assistant"]["system"] == ["Help."]
    assert child_msg.info["assistant"]["tokens"] == tokens(16, 7, reasoning=2)
    assert "completed" in child_msg.info["time"]
    assert [p["type"] for p in child_msg.parts] == [
        "step-start", "step-finish", "tool", "step-start", "text", "step-finish"]
    assert tool_parts(child_msg)["c_sub_add"]["state"]["output"] == "4"
    assert parts(child_msg, "text")[0]["text"] == "four"

    [turn] = read_turns(rec)
    assert ("agent_start", "Helper") in [(s["type"], s.get("agentName")) for s in turn.steps]
    assert {"type": "agent_tool_start", "agentName": "Helper", "toolName": "add",
            "toolArgumentsStr": '{"a":2,"b":2}', "callId": "c_sub_add",
            "parentCallId": "c_helper"} in turn.steps
    # only the conversation's own text reaches the log
    assert steps_of(turn, "text") == [{"type": "text", "text": "It is four."}]
    assert turn.final["text"] == "It is four."


@STREAMED
def test_subagents_nest_two_deep(streamed: bool) -> None:
    leaf = Agent(name="Leaf", model=model(final("leaf says hi", usage(3, 1))))
    middle = Agent(name="Middle", tools=[leaf.as_tool("ask_leaf", "Ask the leaf.")], model=model(
        tools_step(call("ask_leaf", {"input": "hi leaf"}, "c_leaf"), u=usage(5, 2)),
        final("middle relays: leaf says hi", usage(6, 2))))
    top = Agent(name="Top", tools=[middle.as_tool("ask_middle", "Ask the middle.")], model=model(
        tools_step(call("ask_middle", {"input": "hi middle"}, "c_middle"), u=usage(10, 3)),
        final("all done", usage(11, 3))))
    rec = Recorder(session_name="two-deep")
    assert asyncio.run(run_agent(rec, top, "start", streamed)) == "all done"

    session = read_session(rec)
    [mid] = session.subagents
    [lf] = mid.subagents
    assert (mid.directory.parent, lf.directory.parent) == (
        session.directory / "subagent", mid.directory / "subagent")
    assert (mid.info["parentSessionID"], lf.info["parentSessionID"]) == (session.id, mid.id)
    assert tool_parts(session.messages[0])["c_middle"]["state"]["metadata"]["sessionID"] == mid.id
    assert tool_parts(mid.messages[0])["c_leaf"]["state"]["metadata"]["sessionID"] == lf.id
    assert parts(mid.messages[0], "agent")[0]["name"] == "Leaf"
    assert [s.messages[0].info["assistant"]["tokens"] for s in (session, mid, lf)] == [
        tokens(21, 6), tokens(11, 4), tokens(3, 1)]
    assert [s.messages[0].info["user"]["prompt"]["task"] for s in (session, mid, lf)] == [
        "start", "hi middle", "hi leaf"]
    assert lf.subagents == [] and all(s.info["status"] == "completed" for s in (mid, lf))


@STREAMED
def test_a_failed_subagent_marks_its_tool_call_failed(streamed: bool) -> None:
    helper = Agent(name="Helper", model=model(ModelStep(error=RuntimeError("helper down"))))
    agent = Agent(name="Main", tools=[helper.as_tool("ask_helper", "Ask.")],
                  model=model(tools_step(call("ask_helper", {"input": "x"}, "c_h")),
                              final("carried on")))
    rec = Recorder(session_name="subagent-fails")
    assert asyncio.run(run_agent(rec, agent, "go", streamed)) == "carried on"
    session = read_session(rec)
    assert session.info["status"] == "completed"
    state = tool_parts(session.messages[0])["c_h"]["state"]
    assert state["status"] == "error"
    assert state["error"] == "RuntimeError: helper down"
    [child] = session.subagents
    assert child.info["status"] == "error"
    assert child.info["error"]["message"] == "helper down"
    assert "completed" not in child.messages[0].info["time"]


@STREAMED
def test_a_handoff_stays_in_the_same_exchange(streamed: bool) -> None:
    specialist = Agent(name="Specialist", model=model(final("special answer", usage(30, 6)),
                                                      name="gpt-4.1-mini"))
    triage = Agent(name="Triage", handoffs=[specialist], model=model(
        tools_step(call("transfer_to_specialist", {}, "c_handoff"), u=usage(20, 4))))
    rec = Recorder(session_name="handoff")
    assert asyncio.run(run_agent(rec, triage, "route me", streamed)) == "special answer"
    assert rec.errors == 0

    session = read_session(rec)
    assert session.info["agent"]["name"] == "Triage"
    [msg] = session.messages
    assert [p["type"] for p in msg.parts] == [
        "step-start", "step-finish", "agent", "log", "step-start", "text", "step-finish"]
    assert parts(msg, "agent")[0]["name"] == "Specialist"  # the handoff, where it happened
    # ... and said in a part AgentUse's own views print (test_recorded_features.py)
    assert parts(msg, "log")[0]["message"] == \
        "Handoff: Triage → Specialist (scripted:gpt-4.1-mini)"
    assert session.info["model"] == "scripted:gpt-4.1-mini"  # the model that answered last
    assert msg.info["assistant"]["tokens"] == tokens(50, 10)
    assert parts(msg, "step-finish")[1]["cost"] == (30 * 0.40 + 6 * 1.60) / 1_000_000
    assert "completed" in msg.info["time"]
    [turn] = read_turns(rec)
    assert [(s["type"], s.get("agentName")) for s in turn.steps] == [
        ("agent_start", "Triage"), ("handoff", "Triage"), ("agent_start", "Specialist"),
        ("text", None), ("agent_end", "Specialist")]
    assert steps_of(turn, "handoff")[0]["toAgentName"] == "Specialist"
    assert turn.final["text"] == "special answer"
    assert turn.model == "scripted/gpt-4.1-mini"


# -- cost --------------------------------------------------------------------------------


def test_a_custom_price_table() -> None:
    agent = Agent(name="A", model=model(final("ok", usage(1000, 500, cached=200)),
                                        name="house-model-7"))
    rec = Recorder(session_name="prices", prices={"house-model-7": Price(3.0, 1.0, 15.0)})
    asyncio.run(rec.run(agent, "hi"))
    [msg] = read_session(rec).messages
    expected = (800 * 3.0 + 200 * 1.0 + 500 * 15.0) / 1_000_000
    assert parts(msg, "step-finish")[0]["cost"] == expected
    assert msg.info["assistant"]["cost"] == expected


def test_an_unknown_model_costs_zero_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    name = f"mystery-{uuid.uuid4().hex[:8]}"  # the warning is once per process and model
    caplog.set_level(logging.WARNING, logger="sessiontape")
    for n in range(2):
        agent = Agent(name="A", model=model(final("ok", usage(10, 10)), final("again"), name=name))
        rec = Recorder(session_name=f"unknown-{n}")
        asyncio.run(rec.run(agent, "hi"))
        asyncio.run(rec.run(agent, "again"))
        for msg in read_session(rec).messages:
            assert msg.info["assistant"]["cost"] == 0
            assert [p["cost"] for p in parts(msg, "step-finish")] == [0]
    warnings = [r for r in caplog.records if r.name == "sessiontape"]
    assert len(warnings) == 1 and name in warnings[0].getMessage()


# -- streaming ---------------------------------------------------------------------------


@STREAMED
def test_text_chunks(streamed: bool) -> None:
    step = ModelStep(output=[chunked_message("Hel", "lo, ", "wor", "ld!")], usage=usage(5, 4),
                     response_id=f"resp-chunks-{streamed}")
    agent = Agent(name="A", model=model(step))
    rec = Recorder(session_name="chunks")
    assert asyncio.run(run_agent(rec, agent, "hi", streamed)) == "Hello, world!"

    [msg] = read_session(rec).messages
    [text] = parts(msg, "text")
    assert text["text"] == "Hello, world!"
    [turn] = read_turns(rec)
    texts = [s["text"] for s in steps_of(turn, "text")]
    # streamed: the chunks, those that came in one batch of the writer joined into one step
    # (test_skillet_sink.py pins that); otherwise one step with the whole text
    assert "".join(texts) == "Hello, world!"
    assert 1 <= len(texts) <= 4 if streamed else texts == ["Hello, world!"]
    assert turn.final["text"] == "Hello, world!"


def test_a_long_streamed_text_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    import sessiontape.storage.agentuse.sink as sink

    monkeypatch.setattr(sink, "TEXT_REWRITE_INTERVAL", 0.0)  # rewrite the part on every chunk
    chunks = [f"chunk {n} é\n" for n in range(200)]
    agent = Agent(name="A", model=model(ModelStep(output=[chunked_message(*chunks)],
                                                  usage=usage(1, 200), response_id="resp-long")))
    rec = Recorder(session_name="long-stream")
    assert asyncio.run(run_agent(rec, agent, "hi", True)) == "".join(chunks)
    [msg] = read_session(rec).messages
    assert [p["text"] for p in parts(msg, "text")] == ["".join(chunks)]
    texts = [s["text"] for s in steps_of(read_turns(rec)[0], "text")]
    assert "".join(texts) == "".join(chunks) and 1 <= len(texts) <= len(chunks)


# -- conversations -----------------------------------------------------------------------


@STREAMED
def test_a_new_recorder_continues_the_conversation(streamed: bool) -> None:
    first = Agent(name="Chat", model=model(final("Hi Ann.", usage(10, 3))))
    second_model = model(final("You are Ann.", usage(20, 4)))
    second = Agent(name="Chat", model=second_model)

    async def main() -> tuple[Recorder, Recorder, list[Any]]:
        rec1 = Recorder("ann", "chat")
        await run_agent(rec1, first, "I am Ann.", streamed)
        rec2 = Recorder("ann", "chat")
        await run_agent(rec2, second, "Who am I?", streamed)
        return rec1, rec2, await store_items(rec2)

    rec1, rec2, items = asyncio.run(main())
    assert rec2.session_dir == rec1.session_dir
    roots = list(rec1.session_dir.parent.iterdir())
    assert roots == [rec1.session_dir]  # no second session was made

    session = read_session(rec2)
    assert session.info["status"] == "completed"
    assert [m.info["user"]["prompt"]["task"] for m in session.messages] == [
        "I am Ann.", "Who am I?"]
    assert [m.info["assistant"]["tokens"]["input"] for m in session.messages] == [10, 20]
    assert all("completed" in m.info["time"] for m in session.messages)

    turns = read_turns(rec2)
    assert [(t.user_input, t.final["text"]) for t in turns] == [
        ("I am Ann.", "Hi Ann."), ("Who am I?", "You are Ann.")]
    # the model saw the first turn on the second
    seen = second_model.calls[0].input
    assert seen[0] == {"role": "user", "content": "I am Ann."}
    assert seen[1]["role"] == "assistant" and seen[1]["content"][0]["text"] == "Hi Ann."
    assert seen[-1] == {"role": "user", "content": "Who am I?"}
    assert [i.get("role") for i in items] == ["user", "assistant", "user", "assistant"]


def test_one_recorder_runs_many_turns() -> None:
    agent = Agent(name="Chat", model=model(final("one"), final("two"), final("three")))
    rec = Recorder(session_name="many")

    async def main() -> None:
        for prompt in ("a", "b", "c"):
            await rec.run(agent, prompt)

    asyncio.run(main())
    session = read_session(rec)
    assert [m.info["user"]["prompt"]["task"] for m in session.messages] == ["a", "b", "c"]
    assert [t.final["text"] for t in read_turns(rec)] == ["one", "two", "three"]
    assert len(agent.model.calls[2].input) == 5  # type: ignore[union-attr]


@STREAMED
def test_the_users_own_runner_call_with_the_recorders_hooks(streamed: bool) -> None:
    agent = Agent(name="A", tools=[add], model=model(
        tools_step(call("add", {"a": 4, "b": 5}, "c_own")), final("nine")))
    rec = Recorder(session_name="own-call")

    async def main() -> list[Any]:
        if streamed:
            result = Runner.run_streamed(agent, "4+5", hooks=rec.hooks, session=rec.session)
            async for _ in result.stream_events():
                pass
            assert result.final_output == "nine"
        else:
            result = await Runner.run(agent, "4+5", hooks=rec.hooks, session=rec.session)
            assert result.final_output == "nine"
        return await store_items(rec)

    items = asyncio.run(main())
    session = read_session(rec)
    assert session.info["status"] == "completed"
    [msg] = session.messages
    assert tool_parts(msg)["c_own"]["state"]["output"] == "9"
    assert [p["type"] for p in msg.parts].count("step-finish") == 2
    [turn] = read_turns(rec)
    assert turn.user_input == "4+5" and turn.final["text"] == "nine"
    assert items[0] == {"role": "user", "content": "4+5"} and len(items) == 4


def test_runs_without_a_recorder_are_untouched(tmp_path: Path) -> None:
    class Counting(RunHooks[Any]):
        def __init__(self) -> None:
            self.events: list[str] = []

        async def on_agent_start(self, context: Any, agent: Any) -> None:
            self.events.append("start")

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            self.events.append(f"tool:{result}")

    rec = Recorder(session_name="exists")
    asyncio.run(rec.run(Agent(name="A", model=model(final("recorded"))), "hi"))
    store_size = rec.store.path.stat().st_size
    log_size = rec.log_path.stat().st_size

    before = snapshot(tmp_path, mtimes=True)
    hooks = Counting()
    agent = Agent(name="Plain", tools=[add], model=model(
        tools_step(call("add", {"a": 1, "b": 1}, "c_plain")), final("two")))
    result = asyncio.run(Runner.run(agent, "1+1", hooks=hooks))
    assert result.final_output == "two"
    assert hooks.events == ["start", "tool:2"]
    streamed_agent = Agent(name="Plain", model=model(final("streamed")))

    async def stream() -> Any:
        result = Runner.run_streamed(streamed_agent, "x")
        async for _ in result.stream_events():
            pass
        return result.final_output

    assert asyncio.run(stream()) == "streamed"
    assert snapshot(tmp_path, mtimes=True) == before
    assert (rec.store.path.stat().st_size, rec.log_path.stat().st_size) == (store_size, log_size)


def test_a_plain_nested_run_inside_a_recorded_tool_is_not_a_subagent() -> None:
    inner = Agent(name="Inner", model=model(final("inner result")))

    @function_tool
    async def consult(question: str) -> str:
        """Runs another agent by hand, without the tool's context."""
        return (await Runner.run(inner, question)).final_output

    agent = Agent(name="Outer", tools=[consult], model=model(
        tools_step(call("consult", {"question": "q"}, "c_consult")), final("outer done")))
    rec = Recorder(session_name="plain-nested")
    assert asyncio.run(rec.run(agent, "go")).final_output == "outer done"
    session = read_session(rec)
    assert session.subagents == []
    assert tool_parts(session.messages[0])["c_consult"]["state"]["output"] == "inner result"
    [turn] = read_turns(rec)
    assert "Inner" not in [s.get("agentName") for s in turn.steps]


def test_the_users_own_hooks_run_beside_the_recording() -> None:
    from agents.testing import ScriptedModel, assistant_message

    from sessiontape.storage.agentuse.reader import load_session
    from sessiontape.storage.skillet.log_reader import SessionLogReader

    seen: list[str] = []

    class Mine(RunHooks):  # type: ignore[type-arg]
        async def on_agent_start(self, context, agent) -> None:  # type: ignore[no-untyped-def]
            seen.append(f"start {agent.name}")

        async def on_agent_end(self, context, agent, output) -> None:  # type: ignore[no-untyped-def]
            seen.append(f"end {output}")

    agent = Agent(name="Mine", model=ScriptedModel(
        [ModelStep(output=[assistant_message("ok", item_id="m_mine")], response_id="r_mine")]))
    rec = Recorder(session_name="own_hooks")
    result = asyncio.run(rec.run(agent, "go", hooks=Mine()))
    assert result.final_output == "ok"
    assert seen == ["start Mine", "end ok"]
    turns = SessionLogReader(rec.log_path).turns()
    assert [t.text for t in turns] == ["ok"] and turns[0].complete
    assert load_session(rec.session_dir).info["status"] == "completed"
