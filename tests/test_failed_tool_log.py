"""A tool that raised is told from one that succeeded in the JSONL replay log.

The SDK turns a tool's exception into a text for the model, and the recorder hears of the
exception (a ToolFailed event) beside the tool's end (ToolFinished). The log keeps the
``agent_tool_end`` step (skilled_crew's replay takes only its six step types) with the
text the model saw as ``result``, and adds ``status: "error"`` and the exception as
``error`` (keys skilled_crew ignores). ``sessiontape log stream --steps`` prints such a
call with ``✗`` and the exception. A subagent (``Agent.as_tool``) whose nested run fails
marks the parent's call failed the same way.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from agents.testing import ModelStep
from harness import run_cli
from scripted import (
    call,
    final,
    model,
    read_session,
    read_turns,
    run_way,
    tool_parts,
    tools_step,
)

from sessiontape import Recorder
from sessiontape.cli.transcript import render_turns
from sessiontape.storage.agentuse.reader import load_session
from sessiontape.storage.agentuse.sink import AgentUseSink
from sessiontape.storage.events import (
    AgentInfo,
    Event,
    RunFinished,
    RunStarted,
    ToolFailed,
    ToolFinished,
    ToolStarted,
)
from sessiontape.storage.skillet.log_entries import STEP_TYPES
from sessiontape.storage.skillet.replay_log import ReplayLog
from sessiontape.storage.skillet.sink import SkilletLogSink

WAYS = pytest.mark.parametrize("way", ["rec.run", "rec.run_streamed", "Runner.run_streamed"])


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@function_tool
def kaboom(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"kaboom: {reason}")


def log_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a replay log, parsed as it is."""
    return [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]


def tool_ends(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ``agent_tool_end`` steps by tool name."""
    return {s["toolName"]: s for s in (line["stepResult"] for line in lines
                                       if line["kind"] == "step")
            if s["type"] == "agent_tool_end"}


def model_saw(agent_model: Any, call_id: str) -> str:
    """The tool output the model was sent for ``call_id`` (in its second call's input)."""
    [output] = [i["output"] for i in agent_model.calls[1].input
                if isinstance(i, dict) and i.get("call_id") == call_id
                and i.get("type") == "function_call_output"]
    return str(output)


@WAYS
def test_a_failed_tool_and_a_failed_subagent_are_marked_in_the_log(way: str) -> None:
    helper = Agent(name="Helper", model=model(ModelStep(error=RuntimeError("helper down"))))
    agent_model = model(
        tools_step(call("add", {"a": 1, "b": 2}, "c_add"),
                   call("kaboom", {"reason": "bad input"}, "c_bad"),
                   call("ask_helper", {"input": "x"}, "c_help")),
        final("carried on"))
    agent = Agent(name="Main", tools=[add, kaboom, helper.as_tool("ask_helper", "Ask.")],
                  model=agent_model)
    rec = Recorder(session_name=f"failed-tools-{way}")
    assert asyncio.run(run_way(way, rec, agent, "go")) == "carried on"
    assert rec.errors == 0

    lines = log_lines(rec.log_path)
    # skilled_crew's replay takes every step of the turn: all of its six types
    steps = [line["stepResult"] for line in lines if line["kind"] == "step"]
    assert {s["type"] for s in steps} <= STEP_TYPES
    assert [line["kind"] for line in lines][0::len(lines) - 1] == ["user_message",
                                                                   "final_result"]
    ends = tool_ends(lines)
    # a success is as before, key for key
    assert ends["add"] == {"type": "agent_tool_end", "agentName": "Main", "toolName": "add",
                           "result": "3", "callId": "c_add"}
    # a failure: the same step, the text the model saw, then two keys that say it failed
    bad = ends["kaboom"]
    assert list(bad) == ["type", "agentName", "toolName", "result", "callId", "status", "error"]
    assert bad["result"] == model_saw(agent_model, "c_bad")
    assert bad["status"] == "error" and bad["error"] == "ValueError: kaboom: bad input"
    helped = ends["ask_helper"]
    assert list(helped) == ["type", "agentName", "toolName", "result", "callId", "status",
                            "error"]
    assert helped["result"] == model_saw(agent_model, "c_help")
    assert helped["status"] == "error" and helped["error"] == "RuntimeError: helper down"
    # the turn still reads as complete; the run went on
    [turn] = read_turns(rec)
    assert turn.complete and turn.final["text"] == "carried on"
    # a transcript (sessiontape run, chat, sessions show) prints the failures in red
    coloured = list(render_turns([turn], color=True))
    assert "\x1b[31m  · kaboom ✗ ValueError: kaboom: bad input\x1b[0m" in coloured
    assert "\x1b[2m  · add → 3\x1b[0m" in coloured

    # the AgentUse tree marks the same calls as before
    tools = tool_parts(read_session(rec).messages[0])
    assert tools["c_add"]["state"]["status"] == "completed"
    assert tools["c_bad"]["state"]["status"] == "error"
    assert tools["c_bad"]["state"]["error"] == "ValueError: kaboom: bad input"
    assert tools["c_help"]["state"]["status"] == "error"
    assert tools["c_help"]["state"]["error"] == "RuntimeError: helper down"

    # sessiontape log stream --steps, the real executable
    done = run_cli("log", "stream", "--no-follow", "--steps")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    shown = [text.split("] ", 1)[1] for text in done.stdout.splitlines()[1:]]
    assert "  · add → 3" in shown
    assert "  · kaboom ✗ ValueError: kaboom: bad input" in shown
    assert "  · ask_helper ✗ RuntimeError: helper down" in shown
    assert not any(text.startswith(("  · kaboom →", "  · ask_helper →")) for text in shown)
    assert shown[-1] == "agent> (scripted/gpt-4.1) carried on"


# -- the sinks, fed the events directly: a failure before or after the tool's end ------


MAIN = AgentInfo(name="Main", model="openai:gpt-4.1")
SESSION_DIR = "01KB0000000000000000000000-main"


def events(*middle: Event) -> list[Event]:
    return [RunStarted("root", 100, MAIN, "go", "go"),
            ToolStarted("root", 110, "Main", "c_1", "kaboom", '{"reason": "x"}'),
            *middle,
            RunFinished("root", 200, "done", "openai:gpt-4.1")]


FAILED = ToolFailed("root", 120, "c_1", "ValueError: x")
FINISHED = ToolFinished("root", 130, "Main", "c_1", "kaboom", "An error occurred.")
ORDERS = pytest.mark.parametrize("order", [
    pytest.param((FAILED, FINISHED), id="failed-first"),
    pytest.param((FINISHED, FAILED), id="finished-first")])


def feed(sinks: list[Any], batches: list[list[Event]]) -> None:
    """Hand each batch to the sinks, then flush them, as the writer thread does."""
    for batch in batches:
        for event in batch:
            for sink in sinks:
                sink.handle(event)
        for sink in sinks:
            sink.flush()


@ORDERS
def test_both_sinks_pair_a_failure_with_its_tool_end_in_either_order(
        order: tuple[Event, Event], tmp_path: Path) -> None:
    log = ReplayLog("u", "s", tmp_path / "logs")
    sinks = [AgentUseSink(tmp_path / SESSION_DIR, "/p", "/p"), SkilletLogSink(log)]
    feed(sinks, [events(*order)])
    [end] = tool_ends(log_lines(log.path)).values()
    assert end == {"type": "agent_tool_end", "agentName": "Main", "toolName": "kaboom",
                   "result": "An error occurred.", "callId": "c_1", "status": "error",
                   "error": "ValueError: x"}
    state = tool_parts(load_session(tmp_path / SESSION_DIR).messages[0])["c_1"]["state"]
    assert (state["status"], state["error"]) == ("error", "ValueError: x")
    assert state["time"] == {"start": 110, "end": 130}


def test_a_failure_in_an_earlier_batch_waits_for_its_tool_end(tmp_path: Path) -> None:
    log = ReplayLog("u", "s", tmp_path / "logs")
    sinks = [AgentUseSink(tmp_path / SESSION_DIR, "/p", "/p"), SkilletLogSink(log)]
    start, *rest = events(FAILED, FINISHED)
    feed(sinks, [[start, rest[0], rest[1]], rest[2:]])
    [end] = tool_ends(log_lines(log.path)).values()
    assert (end["status"], end["error"]) == ("error", "ValueError: x")


def test_a_failure_after_its_tool_end_was_written_changes_neither_layout(
        tmp_path: Path) -> None:
    """The log's step is on disk and the log is only appended to; the AgentUse part stays
    as written too, so both layouts agree (docs/formats.md says so). The recorder never
    reports a failure after its end; this is the sinks' answer if it did."""
    log = ReplayLog("u", "s", tmp_path / "logs")
    sinks = [AgentUseSink(tmp_path / SESSION_DIR, "/p", "/p"), SkilletLogSink(log)]
    start, started, *rest = events(FINISHED, FAILED)
    feed(sinks, [[start, started, rest[0]], rest[1:]])
    state = tool_parts(load_session(tmp_path / SESSION_DIR).messages[0])["c_1"]["state"]
    assert (state["status"], state["output"]) == ("completed", "An error occurred.")
    lines = log_lines(log.path)
    [end] = tool_ends(lines).values()
    assert "status" not in end and "error" not in end
    assert lines[-1]["kind"] == "final_result"  # the turn is whole, nothing else appended
