"""``sessions show`` prints every turn as a tree: each subagent run under the call that ran
it, each tool call with its result on one line, whether the turn is read with its AgentUse
exchange or from the replay log alone; a turn whose recording was killed says it was
interrupted."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from agents import Agent
from harness import EXECUTABLE, CliResults, isolated, run_cli, run_many
from scripted import blocking_agent, call, final, model, run_agent, square, tools_step
from test_liveness import NAME, USER, killed_in_a_nested_subagent

from sessiontape import Recorder
from sessiontape.storage.agentuse.liveness import INTERRUPTED

ANN = "ann@example.com"


def record_nested() -> Path:
    """One turn: the planner calls ``square`` and its helper in parallel, and the helper
    calls ``square`` too. Returns the log."""
    async def main() -> Path:
        rec = Recorder(ANN, "nested")
        helper = Agent(name="Helper", tools=[square], model=model(
            tools_step(call("square", {"n": 5})), final("helped")))
        planner = Agent(name="Planner", tools=[square, helper.as_tool("helper", "Ask.")],
                        model=model(tools_step(call("square", {"n": 3}),
                                               call("helper", {"input": "q"})),
                                    final("planned")))
        await run_agent(rec, planner, "plan please", streamed=False)
        await rec.aclose()
        assert rec.errors == 0 and rec.log_path is not None
        return rec.log_path

    return asyncio.run(main())


@dataclass
class Shown(CliResults):
    """``sessions show`` of a recorded conversation, and of a copy of its log alone."""

    results: dict[str, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> Shown:
    with isolated(tmp_path_factory.mktemp("nested"), NO_COLOR="1") as env:
        log = record_nested()
    alone = log.parent.parent / "carol" / "copied.jsonl"  # no tree, no store: the log alone
    alone.parent.mkdir()
    shutil.copyfile(log, alone)
    # a subagent run whose call the log lacks, which ran a subagent of its own
    at = "2026-01-02T03:04:05.000Z"
    steps = [{"type": "agent_tool_start", "agentName": "Middle", "toolName": "ask_leaf",
              "toolArgumentsStr": "{}", "callId": "c_leaf", "parentCallId": "c_gone"},
             {"type": "agent_start", "agentName": "Leaf", "parentCallId": "c_leaf"},
             {"type": "agent_tool_end", "agentName": "Middle", "toolName": "ask_leaf",
              "result": "leafed", "callId": "c_leaf", "parentCallId": "c_gone"}]
    (alone.parent / "lost.jsonl").write_text("".join(json.dumps(line) + "\n" for line in [
        {"kind": "user_message", "userInput": "go", "timestamp": at},
        *({"kind": "step", "stepResult": step, "timestamp": at} for step in steps),
        {"kind": "final_result", "finalResult": {"text": "done"}, "timestamp": at}]))
    commands = {"tree": ["show", "nested"], "log": ["show", "copied"],
                "log_json": ["show", "copied", "--json"], "lost": ["show", "lost"]}
    return Shown(run_many({key: [str(EXECUTABLE), "sessions", *args]
                           for key, args in commands.items()}, env))


def _transcript(text: str) -> list[str]:
    """The lines of turn 1, its usage lines apart."""
    lines = text.split("\nTurn 1 ", 1)[1].splitlines()[1:]
    return [line for line in lines if not line.lstrip().startswith("usage:")]


def test_a_logged_turn_with_its_exchange_is_shown_as_a_tree(shown: Shown) -> None:
    lines = _transcript(shown.ok("tree").stdout)
    assert lines[0] == "user> plan please"
    assert lines[-1] == "agent> (scripted/gpt-4.1) planned"  # the log's answer line
    assert '  · square({"n":3}) → 9' in lines
    at = lines.index('  · helper({"input":"q"}) → helped')
    assert lines[at + 1].startswith("    ↳ subagent Helper (")
    assert lines[at + 2:at + 5] == ["    user> q", '      · square({"n":5}) → 25',
                                    "    agent> helped"]
    assert not any(" calls " in line for line in lines)  # before: flat, a call apart


def test_a_turn_from_the_log_alone_nests_its_subagents_steps(shown: Shown) -> None:
    assert "(transcript from" not in shown.ok("log").stdout  # the log is the source
    lines = _transcript(shown.ok("log").stdout)
    assert lines == [
        "user> plan please",
        "  · agent Planner starts",
        '  · square({"n":3}) → 9',
        '  · helper({"input":"q"}) → helped',
        "      · agent Helper starts",
        '      · square({"n":5}) → 25',
        "agent> (scripted/gpt-4.1) planned",
    ]
    # a run whose call is not in the log: its steps, nested as far as the log tells, once
    assert _transcript(shown.ok("lost").stdout) == [
        "user> go", "  · ask_leaf({}) → leafed", "      · agent Leaf starts", "agent> done"]
    (turn,) = shown.json("log_json")["turns"]
    assert turn["number"] == 1 and turn["halted"] is None and turn["complete"] is True


@pytest.mark.slow
def test_a_killed_recording_is_shown_interrupted() -> None:
    """Killed (``kill -9``) while a subagent's subagent waited in a tool: the turn and the
    subagents' exchanges it left open say they were interrupted, at every depth."""
    killed_in_a_nested_subagent()
    done = run_cli("sessions", "show", NAME, "--user", USER)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "usage:" not in line]
    assert "[incomplete]" not in done.stdout
    assert lines[-1] == f"agent> [incomplete turn] [{INTERRUPTED}]"
    # the subagents' open exchanges, each under the call that ran it
    assert lines.count(f"    [{INTERRUPTED}]") == 1  # the middle one's
    assert lines.count(f"        [{INTERRUPTED}]") == 1  # the leaf's
    at = lines.index('          · wait_forever({}) [running]')
    assert lines[at + 1] == f"        [{INTERRUPTED}]"
    assert INTERRUPTED == "interrupted: the recording process ended before the run did"
    shown = json.loads(run_cli("sessions", "show", NAME, "--user", USER, "--json").stdout)
    assert [turn["halted"] for turn in shown["turns"]] == [INTERRUPTED]


def test_a_turn_stopped_by_ctrl_c_is_shown_stopped() -> None:
    """A run cancelled as Ctrl-C cancels it in ``run`` and ``chat`` (``USER_STOPPED``)."""
    async def main() -> None:
        agent, started = blocking_agent("c_stop")
        rec = Recorder(ANN, "stopped")
        task = asyncio.ensure_future(rec.run(agent, "wait for me"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await rec.aclose()

    asyncio.run(main())
    done = run_cli("sessions", "show", "stopped")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (answer,) = [line for line in lines if line.startswith("agent> ")]
    assert answer == "agent> (scripted/gpt-4.1) [run failed] CancelledError: the run was " \
                     "cancelled [stopped]"
    assert "  · wait_forever({}) ✗ CancelledError: the run was cancelled" in lines
    shown = json.loads(run_cli("sessions", "show", "stopped", "--json").stdout)
    assert [turn["halted"] for turn in shown["turns"]] == ["stopped"]
