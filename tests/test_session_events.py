"""``export --format session-events``: Agent Sessions' SessionEvent lines (docs/interop.md).

A conversation recorded with the real SDK Runner (a subagent run through ``as_tool``, a
tool that fails, an answer) is exported by the real executable, from its AgentUse tree and,
with the tree gone, from its replay log alone. Every line is checked with the ``jsonschema``
package against Agent Sessions' own schema (tests/fixtures, copied from the app's
``docs/schemas/session_event.schema.json``); the events come in the run's order, the
subagent's linked by ``parentID`` to the call that ran it, and each ``rawJSON`` is the
record it was read from, byte for byte as JSON.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from agents import Agent
from harness import isolated, run_cli
from scripted import call, fail, final, model, tools_step, usage

from sessiontape import Recorder
from sessiontape.storage.catalog.conversation import LedgerConversation
from sessiontape.storage.exports.session_events import session_events

SCHEMA = json.loads(
    (Path(__file__).parent / "fixtures/agent-sessions-session_event.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def record() -> Recorder:
    helper = Agent(name="Helper", model=model(final("the tram is faster", usage(3, 1))))
    agent = Agent(name="Guide", tools=[helper.as_tool("helper", "Ask the helper."), fail],
                  model=model(tools_step(call("helper", {"input": "tram or bus?"}),
                                         call("fail", {"city": "Atlantis"}), u=usage(10, 2)),
                              final("take the tram", usage(12, 3))))

    async def main() -> Recorder:
        async with Recorder(user_id="ann", session_name="porto") as rec:
            await rec.run(agent, "how do I get around?")
        return rec

    return asyncio.run(main())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("events")
    with isolated(base) as env:
        rec = record()
        out = base / "tree.jsonl"
        tree = run_cli("export", "--format", "session-events", "--out", out, "--json", env=env)
        again = run_cli("export", "--format", "session-events", "--out", base / "again.jsonl",
                        env=env)
        exists = run_cli("export", "--format", "session-events", "--out", out, env=env)
        assert rec.session_dir is not None
        parts = {}
        for path in rec.session_dir.rglob("part/*.json"):
            part = json.loads(path.read_bytes())
            parts[part["id"]] = part
        messages = [json.loads(p.read_bytes()) for p in rec.session_dir.glob("*/message.json")]
        shutil.rmtree(rec.session_dir)
        log_out = base / "log.jsonl"
        log = run_cli("export", "--format", "session-events", "--out", log_out,
                      "--session", "porto", env=env)
    return {"tree": tree, "again": again, "exists": exists, "log": log, "out": out,
            "log_out": log_out, "base": base, "rec": rec, "parts": parts,
            "messages": messages}


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def shape(found: list[dict[str, Any]]) -> list[tuple[str, str | None, bool]]:
    """(kind, tool or text, whether it has a parent) of each event."""
    return [(e["kind"], e.get("toolName") or e.get("text"), "parentID" in e) for e in found]


EXPECTED = [
    ("user", "how do I get around?", False),
    ("tool_call", "helper", False),
    ("user", "tram or bus?", True),
    ("assistant", "the tram is faster", True),
    ("tool_result", "helper", False),
    ("tool_call", "fail", False),
    ("error", "fail", False),
    ("assistant", "take the tram", False),
]
# The tree also marks where the subagent's session is (AgentUse's ``agent`` part): meta.
TREE_ONLY = {7: ("meta", "agent Helper", False)}


def expected(read_from: str) -> list[tuple[str, str | None, bool]]:
    rows = list(EXPECTED)
    if read_from == "tree":
        for at, row in TREE_ONLY.items():
            rows.insert(at, row)
    return rows


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_every_line_is_a_valid_session_event_in_the_runs_order(world: dict[str, Any],
                                                                read_from: str) -> None:
    done = world[read_from]
    assert done.returncode == 0, done.stderr
    found = events(world["out" if read_from == "tree" else "log_out"])
    for event in found:
        VALIDATOR.validate(event)
    assert shape(found) == expected(read_from)
    assert len({e["id"] for e in found}) == len(found)
    assert {(e["userID"], e["sessionName"]) for e in found} == {("ann", "porto")}


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_a_subagents_events_name_the_call_that_ran_them(world: dict[str, Any],
                                                        read_from: str) -> None:
    found = events(world["out" if read_from == "tree" else "log_out"])
    (helper,) = [e for e in found if e["kind"] == "tool_call" and e["toolName"] == "helper"]
    children = [e for e in found if "parentID" in e]
    assert children and all(e["parentID"] == helper["id"] for e in children)
    assert {e["sessionID"] for e in children}.isdisjoint({helper["sessionID"]})
    (result,) = [e for e in found if e["kind"] == "tool_result"]
    assert result["callID"] == helper["callID"]
    if read_from == "log":  # the tool's output as the SDK gave it
        assert result["toolOutput"] == "the tram is faster"
    else:  # AgentUse's subagent result: the output with its metadata
        assert json.loads(result["toolOutput"])["output"] == "the tram is faster"
    (error,) = [e for e in found if e["kind"] == "error"]
    assert "no such city: Atlantis" in error["text"]
    assert json.loads(helper["toolInput"]) == {"input": "tram or bus?"}


def test_raw_json_is_the_part_each_event_was_read_from(world: dict[str, Any]) -> None:
    parts, (message,) = world["parts"], world["messages"]
    found = events(world["out"])
    read_from_parts = [e for e in found if e["kind"] in ("tool_call", "assistant", "meta")]
    assert len(read_from_parts) == 5  # 2 calls, 2 answers, the agent part
    assert all(json.loads(e["rawJSON"]) == parts[e["id"]] for e in read_from_parts)
    (prompt,) = [e for e in found if e["kind"] == "user" and "parentID" not in e]
    assert json.loads(prompt["rawJSON"]) == message  # the exchange's message.json


def test_from_the_log_raw_json_is_the_line_each_event_was_read_from(
        world: dict[str, Any]) -> None:
    rec = world["rec"]
    lines = [json.loads(line) for line in Path(rec.log_path).read_bytes().splitlines()]
    found = events(world["log_out"])
    for event in found:
        assert json.loads(event["rawJSON"]) in lines, event
    (prompt,) = [e for e in found if e["kind"] == "user" and "parentID" not in e]
    assert json.loads(prompt["rawJSON"])["kind"] == "user_message"


def test_the_same_conversations_export_to_the_same_bytes(world: dict[str, Any]) -> None:
    assert world["again"].returncode == 0, world["again"].stderr
    assert (world["base"] / "again.jsonl").read_bytes() == world["out"].read_bytes()
    assert (world["out"].stat().st_mode & 0o777) == 0o600
    summary = json.loads(world["tree"].stdout)
    assert summary["format"] == "session-events" and summary["conversations"] == 1
    assert summary["events"] == len(expected("tree"))


def test_an_existing_file_is_kept_without_force(world: dict[str, Any]) -> None:
    done = world["exists"]
    assert done.returncode == 2 and "already exists; pass --force" in done.stderr
    assert shape(events(world["out"])) == expected("tree")


# -- the original tools' own files ----------------------------------------------------------


def test_sessions_agentuse_wrote_export_valid_events_linked_to_their_subagent(
        agentuse_fixture: Path) -> None:
    manager = next(agentuse_fixture.glob("agentuse/project/*/session/*-manager"))
    problems: list[str] = []
    found = list(session_events(LedgerConversation(None, manager.name, manager, None,
                                                   "agentuse"), problems))
    for event in found:
        VALIDATOR.validate(event)
    assert problems == []
    (spawn,) = [e for e in found if e["kind"] == "tool_call"
                and e["toolName"].startswith("subagent__")]
    children = [e for e in found if e.get("parentID") == spawn["id"]]
    assert children and {e["kind"] for e in children} >= {"user", "assistant"}
    assert {e["kind"] for e in found if e["role"] == "system"} == {"meta"}  # system prompts


def test_a_log_skilled_crew_wrote_exports_every_line_it_read(skillet_fixture: Path) -> None:
    logs = sorted(skillet_fixture.rglob("*.jsonl"))
    assert logs
    for log in logs:
        lines = [json.loads(line) for line in log.read_bytes().splitlines()]
        found = list(session_events(LedgerConversation("x", log.stem, None, log,
                                                       "skilled_crew"), []))
        assert found, log
        for event in found:
            VALIDATOR.validate(event)
            assert json.loads(event["rawJSON"]) in lines
        assert [e["kind"] for e in found].count("user") >= 1
