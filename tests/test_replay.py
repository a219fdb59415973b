"""``sessiontape replay`` and :func:`sessiontape.replay.replay_session`.

A conversation recorded with the SDK's ``Runner`` (``tests/replay_agents.py``: a tool, a
subagent run as a tool, a handoff, the second turn streamed) is replayed unchanged
(identical, exit 0), then with today's agent changed in one way at a time: each divergence
is reported at its turn and call, by the library and by the real executable. The original
tools' recordings (fixtures) replay what they can and say what they cannot. Nothing is
written to the recorded session.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import replay_agents
from agents import GuardrailFunctionOutput, input_guardrail
from harness import REPO, isolated, run, run_cli
from scripted import run_agent
from web_world import tree_of

from sessiontape import Recorder
from sessiontape.replay import ReplayReport, recorded_turns, replay_session
from sessiontape.storage.catalog.index import Catalog
from sessiontape.storage.catalog.sessions import SessionInfo
from sessiontape.storage.paths import Locations

AGENTS = REPO / "tests" / "replay_agents.py"
AGENTUSE_PROJECT = "/home/dev/proj"  # as test_foreign_sessions.py


def found(name: str, user: str | None = None) -> SessionInfo:
    with Catalog() as catalog:
        catalog.refresh(Locations.resolve())
        return catalog.find(name, user)


def replayed(agent: Any, **options: Any) -> ReplayReport:
    return asyncio.run(replay_session(found("trip", "ann"), agent, **options))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("replay")
    with isolated(base) as env:
        agent = replay_agents.agent()

        async def record() -> None:
            async with Recorder(user_id="ann", session_name="trip") as rec:
                for number, prompt in enumerate(replay_agents.PROMPTS, 1):
                    await run_agent(rec, agent, prompt, streamed=number == 2)

        asyncio.run(record())
        yield {"base": base, "env": env}


def test_an_unchanged_agent_replays_identically(world: dict[str, Any]) -> None:
    with isolated(world["base"]):
        report = replayed(replay_agents.agent())
    assert report.to_json() == {"session": "trip", "turns": 3, "replayed": 3,
                                "identical": True, "divergences": [], "not_replayed": []}


@pytest.mark.parametrize(("changed", "expected"), [
    ("other_output", [{"turn": 1, "call": 1, "kind": "tool_output", "tool": "weather",
                       "recorded": "sunny in Porto", "replayed": "rainy in Porto"},
                      {"turn": 3, "call": 1, "kind": "tool_output", "tool": "weather",
                       "recorded": "sunny in Lisbon", "replayed": "rainy in Lisbon"}]),
    ("renamed_tool", [{"turn": 1, "call": 1, "kind": "tool_missing", "tool": "weather",
                       "recorded": "weather",
                       "replayed": "Tool weather not found in agent Guide"},
                      {"turn": 3, "call": 1, "kind": "tool_missing", "tool": "weather",
                       "recorded": "weather",
                       "replayed": "Tool weather not found in agent Guide"}]),
    ("other_instructions", [
        {"turn": n, "call": 1, "kind": "instructions", "tool": None,
         "recorded": "Help travellers; be brief.", "replayed": "Help travellers; be thorough."}
        for n in (1, 2, 3)]),
])
def test_each_change_is_reported_at_its_turn_and_call(
        world: dict[str, Any], changed: str, expected: list[dict[str, Any]]) -> None:
    with isolated(world["base"]):
        report = replayed(getattr(replay_agents, changed)())
    assert [d.to_json() for d in report.divergences] == expected
    assert not report.identical and report.replayed == 3


def test_a_run_that_ends_early_or_goes_on_is_reported(world: dict[str, Any],
                                                      tmp_path: Path) -> None:
    with isolated(world["base"]):
        early = replayed(replay_agents.stops_at_tools(), turn=1)
    assert [d.to_json() for d in early.divergences] == [
        {"turn": 1, "call": 2, "kind": "fewer_calls", "tool": None,
         "recorded": "2 model calls", "replayed": "1 model call"},
        {"turn": 1, "call": None, "kind": "final_answer", "tool": None,
         "recorded": "take the tram: it is sunny", "replayed": "sunny in Porto"}]
    with isolated(tmp_path):  # recorded stopping at its tool, replayed going on
        async def record() -> None:
            async with Recorder(user_id="ann", session_name="short") as rec:
                await rec.run(replay_agents.stops_at_tools(), replay_agents.PROMPTS[0])

        asyncio.run(record())
        longer = asyncio.run(replay_session(found("short", "ann"), replay_agents.agent()))
    assert [(d.turn, d.call, d.kind) for d in longer.divergences] == [
        (1, 2, "unrecorded_call")]


def test_one_turn_replays_with_the_turns_before_as_its_history(world: dict[str, Any]) -> None:
    with isolated(world["base"]):
        report = replayed(replay_agents.other_output(), turn=3)
        with pytest.raises(ValueError, match="no turn 4 to replay: the recording has 3"):
            replayed(replay_agents.agent(), turn=4)
    assert [(d.turn, d.replayed) for d in report.divergences] == [(3, "rainy in Lisbon")]


def test_input_guardrails_see_the_turns_before_as_recorded(world: dict[str, Any]) -> None:
    seen: list[int] = []

    @input_guardrail
    def count(context: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
        seen.append(len(given) if isinstance(given, list) else 1)
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)

    guarded = replay_agents.agent().clone(input_guardrails=[count])
    with isolated(world["base"]):
        report = replayed(guarded)
    assert report.identical
    assert seen[0] == 1 and seen[1] > seen[0] and seen[2] > seen[1]  # the prompt, then more


def test_recorded_tools_answer_as_they_did(world: dict[str, Any]) -> None:
    with isolated(world["base"]):
        report = replayed(replay_agents.other_output(), recorded_tools=True)
    assert report.identical


def test_the_cli_says_where_and_exits_by_what_it_found(world: dict[str, Any]) -> None:
    env = world["env"]
    layouts = [world["base"] / "skillet", world["base"] / "home" / "data"]
    before = [tree_of(root) for root in layouts]
    same = run_cli("replay", "trip", "--agent", f"{AGENTS}:agent", env=env)
    changed = run_cli("replay", "trip", "--user", "ann", "--agent", f"{AGENTS}:other_output",
                      env=env)
    as_json = run_cli("replay", "trip", "--agent", f"{AGENTS}:renamed_tool", "--json",
                      env=env)
    no_agent = run_cli("replay", "trip", env=env)
    assert [tree_of(root) for root in layouts] == before  # nothing written
    assert (same.returncode, same.stdout) == (
        0, "replay trip: 3 turns of 3 replayed, identical\n")
    assert changed.returncode == 1
    assert changed.stdout.splitlines() == [
        "replay trip: 3 turns of 3 replayed, 2 divergences",
        "turn 1, call 1 (weather): a tool returned another output",
        "  recorded: sunny in Porto", "  replayed: rainy in Porto",
        "turn 3, call 1 (weather): a tool returned another output",
        "  recorded: sunny in Lisbon", "  replayed: rainy in Lisbon"]
    assert as_json.returncode == 1
    assert [d["kind"] for d in json.loads(as_json.stdout)["divergences"]] == [
        "tool_missing", "tool_missing"]
    assert no_agent.returncode == 2 and "--agent MODULE:ATTR" in no_agent.stderr


def test_record_as_records_the_replay_elsewhere(world: dict[str, Any]) -> None:
    with isolated(world["base"]):
        report = replayed(replay_agents.agent(), turn=1, record_as="trip-replayed")
        copy = found("trip-replayed", "ann")
        original = found("trip", "ann")
    assert report.identical
    assert (copy.turns, original.turns) == (1, 3)


def test_the_demo_replays_without_naming_its_agent(tmp_path: Path) -> None:
    with isolated(tmp_path) as env:
        for _ in range(2):
            assert run_cli("demo", env=env).returncode == 0
        done = run_cli("replay", "sessiontape_demo", env=env)
    assert (done.returncode, done.stdout) == (
        0, "replay sessiontape_demo: 2 turns of 2 replayed, identical\n")


def test_skilled_crews_recording_replays_what_it_can(
        tmp_path: Path, skillet_fixture: Path) -> None:
    state = tmp_path / "skillet" / "state"
    shutil.copytree(skillet_fixture, state)
    with isolated(tmp_path) as env:
        listed = json.loads(run_cli("sessions", "list", "--json", env=env).stdout)
        (first, *_) = [s for s in listed if s["items"]]
        done = run_cli("replay", first["session_name"], "--user", first["user_id"],
                       "--agent", f"{AGENTS}:agent", "--json", env=env)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["turns"] >= 1 and report["replayed"] >= 1
    assert report["divergences"], "another agent than skilled_crew's cannot replay it alike"


def test_an_agentuse_session_says_it_cannot_replay(tmp_path: Path,
                                                   agentuse_fixture: Path) -> None:
    shutil.copytree(agentuse_fixture, tmp_path / "home" / "data")
    project = ("--project", AGENTUSE_PROJECT)  # the project the fixture's tree belongs to
    with isolated(tmp_path) as env:
        listed = json.loads(run_cli("sessions", "list", "--json", *project, env=env).stdout)
        (first, *_) = listed
        done = run_cli("replay", first["session_name"], "--agent", f"{AGENTS}:agent",
                       "--json", *project, env=env)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["replayed"] == 0
    assert "no stored items" in report["not_replayed"][0]


def test_recorded_turns_split_calls_at_tool_outputs() -> None:
    items = [{"role": "user", "content": "q"},
             {"type": "reasoning", "id": "r1", "summary": []},
             {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"},
             {"type": "function_call", "call_id": "c2", "name": "b", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "A"},
             {"type": "function_call_output", "call_id": "c2", "output": "B"},
             {"type": "message", "role": "assistant", "id": "m1",
              "content": [{"type": "output_text", "text": "done", "annotations": []}]},
             {"role": "user", "content": "q2"}]
    first, second = recorded_turns(items, ["be brief"])
    assert [[item.get("type") for item in call] for call in first.calls] == [
        ["reasoning", "function_call", "function_call"], ["message"]]
    assert (first.outputs, first.answer, first.instructions) == (
        {"c1": "A", "c2": "B"}, "done", "be brief")
    assert (second.prompt, second.calls, second.instructions) == ("q2", [], None)


PLUGIN_TEST = """
import pytest

@pytest.mark.sessiontape_replay("trip", agent="{agents}:{agent}", user="ann")
def test_marked():
    pass

def test_fixture(replay_session):
    report = replay_session("trip", "{agents}:{agent}", user="ann", turn=1)
    assert report.identical, report.explain()
"""


@pytest.mark.parametrize(("agent", "outcome"), [("agent", "2 passed"),
                                                ("other_output", "2 failed")])
def test_the_pytest_plugin_fails_a_test_on_divergence(
        world: dict[str, Any], tmp_path: Path, agent: str, outcome: str) -> None:
    test = tmp_path / "test_recorded.py"
    test.write_text(PLUGIN_TEST.format(agents=AGENTS, agent=agent))
    done = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                "-o", "addopts=", str(test)], env=world["env"], cwd=tmp_path)
    assert outcome in done.stdout.splitlines()[-1], done.stdout
    if outcome == "2 failed":
        assert "turn 1, call 1 (weather): a tool returned another output" in done.stdout
        assert "  replayed: rainy in Porto" in done.stdout


def test_a_compacted_conversation_replays_the_turns_after_its_summary(tmp_path: Path) -> None:
    with isolated(tmp_path):
        agent = replay_agents.agent()

        async def record() -> None:
            async with Recorder(user_id="ann", session_name="trip",
                                compaction_threshold=4) as rec:
                for prompt in replay_agents.PROMPTS:
                    await run_agent(rec, agent, prompt, streamed=False)

        asyncio.run(record())
        info = found("trip", "ann")
        report = asyncio.run(replay_session(info, replay_agents.agent()))
        changed = asyncio.run(replay_session(info, replay_agents.other_output()))
    assert info.compactions >= 1
    summarized = report.turns - report.replayed
    assert summarized >= 1 and report.turns == 3
    assert report.identical and report.not_replayed == [
        f"turns 1 to {summarized}: compacted into a summary, which the turns after it are "
        "replayed with"]
    assert [(d.turn, d.kind) for d in changed.divergences] == [(3, "tool_output")]
