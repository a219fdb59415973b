"""``export --format agentrun``: agentrun's ``Message`` lines, exactly its types and fields.

The conversation of ``test_session_events.py`` (a subagent through ``as_tool``, a tool that
fails, an answer), recorded with the real SDK Runner and then continued by a second turn,
is exported by the real executable, from its tree and from its log alone. Every line uses
only the types and fields of agentrun's ``Message`` (its Go declaration, seed 002); each
turn ends with a ``result`` whose usage and cost are the turn's, subagents included, as
``sessiontape usage`` counts them.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import EXECUTABLE, Lines, isolated, run_cli
from scripted import final, model, usage
from test_session_events import record

from sessiontape import Recorder

# agentrun's Message (root package, seed 002): the only types and fields a line may hold
TYPES = {"text", "tool_use", "tool_result", "error", "system", "init", "result",
         "context_window", "eof", "thinking", "text_delta", "tool_use_delta",
         "thinking_delta"}
FIELDS = {"type", "content", "tool", "usage", "stop_reason", "error_code", "resume_id",
          "init", "process", "raw", "timestamp"}
TOOL = {"name", "input", "output"}
USAGE = {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
         "thinking_tokens", "cost_usd", "context_size_tokens", "context_used_tokens"}
INIT = {"model", "agent_name", "agent_version"}


def continue_porto() -> None:
    async def main() -> None:
        async with Recorder(user_id="ann", session_name="porto") as rec:
            await rec.run(Agent(name="Guide", model=model(final("by tram", usage(40, 4)))),
                          "and at night?")

    asyncio.run(main())


def exported_twice(tmp_path_factory: pytest.TempPathFactory, form: str) -> dict[str, Any]:
    """porto recorded over two turns and exported in ``form`` by the real executable, from
    its tree (``tree.jsonl``, with ``--json``) and, the tree deleted, from its log alone
    (``log.jsonl``); ``spent``: what ``usage session --json`` counted before."""
    base = tmp_path_factory.mktemp(form)
    with isolated(base) as env:
        rec = record()
        continue_porto()
        tree = run_cli("export", "--format", form, "--out", base / "tree.jsonl", "--json",
                       env=env)
        spent = run_cli("usage", "session", "--json", env=env)
        assert rec.session_dir is not None
        shutil.rmtree(rec.session_dir)
        log = run_cli("export", "--format", form, "--out", base / "log.jsonl", "--session",
                      "porto", env=env)
    for done in (tree, spent, log):
        assert done.returncode == 0, done.stderr
    return {"base": base, "tree": tree, "spent": json.loads(spent.stdout)}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return exported_twice(tmp_path_factory, "agentrun")


def messages(world: dict[str, Any], read_from: str) -> list[dict[str, Any]]:
    path: Path = world["base"] / f"{read_from}.jsonl"
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_every_line_holds_only_agentruns_types_and_fields(world: dict[str, Any],
                                                          read_from: str) -> None:
    for message in messages(world, read_from):
        assert message["type"] in TYPES and set(message) <= FIELDS, message
        assert set(message.get("tool", {})) <= TOOL and set(message.get("usage", {})) <= USAGE
        assert set(message.get("init", {})) <= INIT
        assert message["timestamp"].endswith("Z")


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_the_runs_order_with_each_turn_closed_by_its_result(world: dict[str, Any],
                                                            read_from: str) -> None:
    found = messages(world, read_from)
    said = [(m["type"], m.get("content") or m.get("tool", {}).get("name")) for m in found]
    assert said == [
        ("init", None), ("system", "how do I get around?"), ("tool_use", "helper"),
        ("system", "tram or bus?"), ("text", "the tram is faster"),
        ("tool_result", "helper"), ("tool_use", "fail"), ("tool_result", "fail"),
        ("error", "LookupError: no such city: Atlantis"), ("text", "take the tram"),
        ("result", "take the tram"),
        ("system", "and at night?"), ("text", "by tram"), ("result", "by tram"), ("eof", None)]
    assert found[0]["resume_id"] == "porto" and found[0]["init"]["agent_name"] == "Guide"
    (helper,) = [m for m in found if m["type"] == "tool_use" and m["tool"]["name"] == "helper"]
    assert helper["tool"]["input"] == {"input": "tram or bus?"}  # raw JSON, not a string
    # what the model was given, from the tree too (which wraps it in {"output", "metadata"})
    (answered,) = [m for m in found if m["type"] == "tool_result"
                   and m["tool"]["name"] == "helper"]
    assert answered["tool"]["output"] == "the tram is faster"
    (failed,) = [m for m in found if m["type"] == "tool_result" and m["tool"]["name"] == "fail"]
    assert "no such city: Atlantis" in json.dumps(failed["tool"]["output"])
    # agentrun's ToolCall has no error flag: the error just after the result says it failed
    (error,) = [m for m in found if m["type"] == "error"]
    assert error["error_code"] == "tool_failed"
    assert [m["stop_reason"] for m in found if m["type"] == "result"] == ["end_turn"] * 2


def test_the_results_usage_and_cost_are_what_usage_counts(world: dict[str, Any]) -> None:
    results = [m["usage"] for m in messages(world, "tree") if m["type"] == "result"]
    (spent,) = world["spent"]
    assert sum(r["input_tokens"] for r in results) == spent["input_tokens"]
    assert sum(r["output_tokens"] for r in results) == spent["output_tokens"]
    assert sum(r["cost_usd"] for r in results) == pytest.approx(spent["cost"])
    assert results[0]["input_tokens"] == 10 + 12 + 3  # the Guide's two calls, the Helper's
    summary = json.loads(world["tree"].stdout)
    assert (summary["format"], summary["messages"]) == ("agentrun", 15)


def test_raw_holds_the_record_each_message_was_read_from(world: dict[str, Any]) -> None:
    found = messages(world, "log")
    assert all(m["raw"]["kind"] for m in found if "raw" in m)
    (prompt, *_) = [m for m in found if m["type"] == "system"]
    assert prompt["raw"]["kind"] == "user_message"


# -- log stream --format agentrun -------------------------------------------------------------


def test_log_stream_speaks_agentrun_live_each_turn_closed_by_its_usage(
        tmp_path: Path) -> None:
    with isolated(tmp_path) as env:
        follower = Lines([EXECUTABLE, "log", "stream", "--format", "agentrun"], env=env)
        try:
            record()
            follower.expect('"type":"result"')
            continue_porto()
            lines = follower.expect('"content":"by tram"')
        finally:
            follower.stop()
        caught_up = run_cli("log", "stream", "--no-follow", "--format", "agentrun", env=env)
        exported = run_cli("export", "--format", "agentrun", "--out", tmp_path / "a.jsonl",
                           env=env)
    assert caught_up.returncode == 0 and exported.returncode == 0, caught_up.stderr
    streamed = [json.loads(line) for line in lines if line.startswith("{")]
    assert [json.loads(line) for line in caught_up.stdout.splitlines()] == streamed
    for message in streamed:
        assert message["type"] in TYPES and set(message) <= FIELDS, message
    assert streamed[0] == {"type": "init", "resume_id": "porto",
                           "timestamp": streamed[0]["timestamp"]}
    results = [m for m in streamed if m["type"] == "result"]
    assert [r["content"] for r in results] == ["take the tram", "by tram"]
    expected = [m for m in (json.loads(line) for line in
                            (tmp_path / "a.jsonl").read_bytes().splitlines())
                if m["type"] == "result"]
    for got, want in zip(results, expected, strict=True):  # the same usage, summed apart
        assert got["usage"] == {**want["usage"], "cost_usd": pytest.approx(
            want["usage"]["cost_usd"])}
    assert all(m["raw"]["kind"] for m in streamed[1:])
