"""``sessiontape ingest --format agentrun``: agentrun Message lines recorded into every layout.

The round trip: the conversation of ``test_agentrun_export.py`` (a subagent through
``as_tool``, a tool that fails, two turns), recorded with the real SDK Runner, exported as
agentrun lines and ingested by the real executable into another data directory, has the
same turns, tool calls, outputs, tokens and cost in the AgentUse tree, in the replay log
(the tree deleted) and in the item store, which the real Runner then continues. Then a
stream as an agentrun backend emits it (no prompt, pieces of text, parallel calls, a
failed turn, a cut-off one), bad lines, and a stream fed live on stdin.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import EXECUTABLE, cli_environ, isolated, run_cli, wait_for
from scripted import final, model, usage
from test_agentrun_export import continue_porto
from test_session_events import record

from sessiontape import Recorder
from sessiontape.ingest import ingest_agentrun, sdk_model
from sessiontape.storage.names import DEFAULT_USER_ID
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.times import iso_to_ms

# what the round trip keeps of each message (raw is the record it was read from, and ids
# and times are the new recording's)
KEPT = ("type", "content", "tool", "usage", "stop_reason", "error_code", "resume_id", "init")


def kept(path: Path) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in path.read_bytes().splitlines()]
    return [{key: m[key] for key in KEPT if key in m} for m in found]


def memory(store: Path, user: str, name: str) -> list[dict[str, Any]]:
    """The conversation's items as the SDK gets them, without the ids the recording made."""
    async def read() -> list[Any]:
        items = ItemStore(store)
        try:
            return await items.session(user, name).get_items()
        finally:
            await items.release()

    drop = {"id", "call_id", "status"}
    return [{k: v for k, v in dict(item).items() if k not in drop}
            for item in asyncio.run(read())]


@pytest.fixture(scope="module")
def trip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """porto recorded (two turns), exported as agentrun; ingested elsewhere and exported
    again from the ingested tree and, the tree deleted, from the ingested log."""
    base = tmp_path_factory.mktemp("trip")
    with isolated(base / "first") as env:
        rec = record()
        continue_porto()
        exported = run_cli("export", "--format", "agentrun", "--out", base / "first.jsonl",
                           env=env)
        spent = run_cli("usage", "session", "--json", env=env)
        first_memory = memory(rec.store.path, "ann", "porto")
        assert rec.session_dir is not None
        shutil.rmtree(rec.session_dir)
        from_log = run_cli("export", "--format", "agentrun", "--out",
                           base / "first-log.jsonl", env=env)
    with isolated(base / "second") as env:
        ingested = run_cli("ingest", "--format", "agentrun", "--user", "ann", "--json",
                           base / "first.jsonl", env=env)
        again = run_cli("export", "--format", "agentrun", "--out", base / "tree.jsonl",
                        env=env)
        respent = run_cli("usage", "session", "--json", env=env)
        shown = run_cli("sessions", "show", "porto", "--json", env=env)
        store = Path(env["SKILLET_HOME"])
        second_memory = memory(next(store.rglob("*.sqlite")), "ann", "porto")
        tree = json.loads(shown.stdout)["session"]["agentuse_dir"]
        shutil.rmtree(tree)
        log_only = run_cli("export", "--format", "agentrun", "--out", base / "log.jsonl",
                           env=env)
    for done in (exported, spent, from_log, ingested, again, respent, shown, log_only):
        assert done.returncode == 0, done.stderr
    return {"base": base, "ingested": json.loads(ingested.stdout),
            "spent": json.loads(spent.stdout), "respent": json.loads(respent.stdout),
            "memory": (first_memory, second_memory),
            "shown": json.loads(shown.stdout)["session"]}


def test_the_ingest_says_what_it_recorded(trip: dict[str, Any]) -> None:
    assert trip["ingested"] == {
        "messages": 15, "turns": 2, "tool_calls": 2, "conversations": ["ann/porto"],
        "problems": [], "ignored": {}, "recording_errors": 0}
    shown = trip["shown"]
    assert (shown["user_id"], shown["session_name"], shown["turns"]) == ("ann", "porto", 2)


@pytest.mark.parametrize("layout", ["tree", "log"])
def test_the_round_trip_keeps_turns_calls_outputs_tokens_and_cost(trip: dict[str, Any],
                                                                  layout: str) -> None:
    base = trip["base"]
    original = kept(base / ("first.jsonl" if layout == "tree" else "first-log.jsonl"))
    assert kept(base / f"{layout}.jsonl") == original
    assert [m["type"] for m in original].count("tool_use") == 2  # (not a vacuous match)


def test_usage_counts_the_same_tokens_and_cost(trip: dict[str, Any]) -> None:
    ((before,), (after,)) = trip["spent"], trip["respent"]
    for key in ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens"):
        assert after[key] == before[key], key
    assert after["cost"] == pytest.approx(before["cost"]) and before["cost"] > 0


def test_the_item_store_holds_the_same_memory(trip: dict[str, Any]) -> None:
    first, second = trip["memory"]

    def by_kind(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        kinds: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            kinds.setdefault(item.get("type", item.get("role")), []).append(item)
        return kinds

    # the same items, each kind in its order; agentrun's stream does not say which calls one
    # response made, so the SDK's parallel calls come back one after the other
    (*_, failed_before), (*_, failed_after) = (
        by_kind(items)["function_call_output"] for items in (first, second))
    # a failed call's result is its error: the text the SDK gave the model instead is in
    # neither the AgentUse tree nor agentrun's message
    assert failed_before["output"].startswith("An error occurred while running the tool")
    assert failed_after["output"] == "LookupError: no such city: Atlantis"
    failed_after["output"] = failed_before["output"]
    assert by_kind(second) == by_kind(first)
    assert [item.get("type", item.get("role")) for item in second] == [
        "user", "function_call", "function_call_output", "function_call",
        "function_call_output", "message", "user", "message"]


def test_the_sdk_runner_continues_an_ingested_conversation(tmp_path: Path) -> None:
    lines = [{"type": "init", "resume_id": "lisbon",
              "init": {"model": "openai/gpt-4.1-mini", "agent_name": "Guide"}},
             {"type": "system", "content": "where is the castle?"},
             {"type": "tool_use", "tool": {"name": "maps", "input": {"q": "castle"}}},
             {"type": "tool_result", "tool": {"name": "maps", "output": "up the hill"}},
             {"type": "text", "content": "up the hill"},
             {"type": "result", "stop_reason": "end_turn",
              "usage": {"input_tokens": 20, "output_tokens": 5, "cost_usd": 0.25}}]
    summary = asyncio.run(ingest_agentrun(json.dumps(m) for m in lines))
    assert (summary.turns, summary.tool_calls, summary.problems) == (1, 1, [])
    scripted = model(final("take tram 28", usage(30, 4)))

    async def go_on() -> None:
        async with Recorder(session_name="lisbon") as rec:
            await rec.run(Agent(name="Guide", model=scripted), "and how do I get there?")

    asyncio.run(go_on())
    assert scripted.first_call is not None
    seen = json.dumps(scripted.first_call.input)
    for earlier in ("where is the castle?", '{\\"q\\":\\"castle\\"}', "up the hill"):
        assert earlier in seen
    shown = run_cli("sessions", "show", "lisbon", "--json", env=cli_environ())
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["session"]["turns"] == 2


# -- a stream as agentrun's backends emit it --------------------------------------------------


def at(second: int) -> str:
    return f"2026-11-20T10:00:{second:02d}.123456789Z"  # Go writes nanoseconds


BACKEND = [
    {"type": "init", "resume_id": "be-1", "timestamp": at(0),
     "init": {"model": "claude-sonnet-4-5", "agent_name": "coder"}},
    {"type": "system", "content": "hello", "timestamp": at(1)},
    {"type": "thinking_delta", "content": "let me ", "timestamp": at(2)},
    {"type": "thinking_delta", "content": "look", "timestamp": at(2)},
    {"type": "text_delta", "content": "Reading ", "timestamp": at(3)},
    {"type": "text_delta", "content": "both.", "timestamp": at(3)},
    {"type": "text", "content": "Reading both.", "timestamp": at(3)},
    {"type": "tool_use", "tool": {"name": "read", "input": {"path": "a.go"}}, "timestamp": at(4)},
    {"type": "tool_use_delta", "content": "{\"pa", "timestamp": at(4)},
    {"type": "tool_use", "tool": {"name": "read", "input": {"path": "b.go"}}, "timestamp": at(4)},
    {"type": "tool_result", "tool": {"name": "read", "output": "package a"}, "timestamp": at(5)},
    {"type": "tool_result", "tool": {"name": "read", "output": "package b"}, "timestamp": at(5)},
    {"type": "context_window", "usage": {"input_tokens": 0, "output_tokens": 0,
                                         "context_size_tokens": 200000}, "timestamp": at(5)},
    {"type": "text", "content": "Both are packages.", "timestamp": at(6)},
    {"type": "result", "stop_reason": "end_turn", "content": "Both are packages.",
     "timestamp": at(7), "usage": {"input_tokens": 900, "output_tokens": 40,
                                   "cache_read_tokens": 600, "thinking_tokens": 12,
                                   "cost_usd": 0.0123}},
    {"type": "text", "content": "Trying again.", "timestamp": at(8)},
    {"type": "error", "content": "rate limited", "error_code": "rate_limit", "timestamp": at(9)},
    {"type": "result", "timestamp": at(9), "usage": {"input_tokens": 5, "output_tokens": 1}},
    {"type": "system", "content": "one more thing", "timestamp": at(10)},
    {"type": "text", "content": "Working on", "timestamp": at(11)},
    {"type": "eof", "timestamp": at(12)},
]


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("backend")
    stream = base / "stream.jsonl"
    stream.write_text("".join(json.dumps(m) + "\n" for m in BACKEND))
    with isolated(base) as env:
        ingested = run_cli("ingest", "--format", "agentrun", "--json", stream, env=env)
        exported = run_cli("export", "--format", "agentrun", "--out", base / "out.jsonl",
                           env=env)
        shown = run_cli("sessions", "show", "be-1", "--json", env=env)
        spent = run_cli("usage", "session", "--json", env=env)
    for done in (ingested, exported, shown, spent):
        assert done.returncode == 0, done.stderr
    return {"ingested": json.loads(ingested.stdout), "out": kept(base / "out.jsonl"),
            "lines": [json.loads(line) for line in (base / "out.jsonl").read_bytes().splitlines()],
            "shown": json.loads(shown.stdout)["session"], "spent": json.loads(spent.stdout),
            "parts": [json.loads(part.read_bytes()) for part in base.rglob("part/*.json")]}


def test_a_backends_stream_is_read_into_turns(backend: dict[str, Any]) -> None:
    said = [(m["type"], m.get("content") or m.get("tool", {}).get("name"))
            for m in backend["out"]]
    assert said == [
        ("init", None), ("system", "hello"), ("thinking", "let me look"),
        # the export writes each call's result after it
        ("text", "Reading both."), ("tool_use", "read"), ("tool_result", "read"),
        ("tool_use", "read"), ("tool_result", "read"), ("text", "Both are packages."),
        ("result", "Both are packages."),
        # a turn opened by no prompt, which ended in an error: no stop reason
        ("text", "Trying again."), ("error", "rate limited"), ("result", "Trying again."),
        # cut off by eof: unfinished, as a killed run
        ("system", "one more thing"), ("text", "Working on"),
        ("error", "the turn did not finish"), ("result", None), ("eof", None)]
    results = [m for m in backend["out"] if m["type"] == "result"]
    assert [r.get("stop_reason") for r in results] == ["end_turn", None, None]
    assert results[0]["usage"] == {"input_tokens": 900, "output_tokens": 40,
                                   "cache_read_tokens": 600, "thinking_tokens": 12,
                                   "cost_usd": 0.0123}
    outputs = [m["tool"]["output"] for m in backend["out"] if m["type"] == "tool_result"]
    inputs = [m["tool"]["input"] for m in backend["out"] if m["type"] == "tool_use"]
    assert (inputs, outputs) == ([{"path": "a.go"}, {"path": "b.go"}],
                                 ["package a", "package b"])
    init = backend["out"][0]
    assert init["init"] == {"model": "agentrun/claude-sonnet-4-5", "agent_name": "coder"}


def test_what_no_layout_holds_is_counted(backend: dict[str, Any]) -> None:
    ingested = backend["ingested"]
    assert ingested["ignored"] == {"context_window": 1, "tool_use_delta": 1}
    assert (ingested["messages"], ingested["turns"], ingested["problems"]) == (
        len(BACKEND), 3, [])
    (spent,) = backend["spent"]
    assert (spent["input_tokens"], spent["output_tokens"]) == (905, 41)


def test_times_are_the_streams(backend: dict[str, Any]) -> None:
    stamps = {(m["type"], m.get("content") or json.dumps(m.get("tool"))): m["timestamp"]
              for m in backend["lines"]}
    assert stamps["system", "hello"] == "2026-11-20T10:00:01.123Z"  # to the ms

    # every part of the tree is timed within the stream, a model call begun by pieces of
    # text too: its step begins with its first piece (not when the ingest ran)
    first, last = (iso_to_ms(at(second)) for second in (0, 12))
    times = [(part["type"], moment) for part in backend["parts"]
             for moment in part.get("time", {}).values()]
    assert times and [t for t in times if not first <= t[1] <= last] == []
    assert ("step-start", iso_to_ms(at(2))) in times
    results = [stamp for (kind, _), stamp in stamps.items() if kind == "tool_result"]
    assert results == ["2026-11-20T10:00:05.123Z"] * 2


def test_models_keep_their_provider() -> None:
    assert sdk_model("openai/gpt-4.1") == "openai:gpt-4.1"
    assert sdk_model("ollama:llama3:8b") == "ollama:llama3:8b"
    assert sdk_model("claude-sonnet-4-5") == "agentrun:claude-sonnet-4-5"


# -- bad lines, and a live stream -------------------------------------------------------------


def test_bad_lines_are_reported_by_number_and_the_rest_recorded(tmp_path: Path) -> None:
    good = [json.dumps(m) for m in BACKEND[:2]] + [json.dumps(m) for m in BACKEND[6:15]]
    text = "\n".join([good[0], "{not json", good[1], "[1, 2]", '{"type": "frobnicate"}',
                      "\x00\x1b[31m", *good[2:]]) + '\n{"type": "text", "cont'
    stream = tmp_path / "bad.jsonl"
    stream.write_text(text)
    done = run_cli("ingest", "--format", "agentrun", stream, env=cli_environ())
    assert done.returncode == 1
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    last = len(text.splitlines())
    assert [w.split(": ")[2] for w in warnings] == [
        "line 2", "line 4", "line 5", "line 6", f"line {last}"]
    assert "torn" in warnings[-1] and "frobnicate" in warnings[2]
    assert "\x1b" not in done.stderr  # a hostile line is not echoed raw
    assert "1 turn, 2 tool calls; 5 lines skipped" in done.stdout
    shown = run_cli("sessions", "show", "be-1", "--json", env=cli_environ())
    assert json.loads(shown.stdout)["session"]["turns"] == 1


def test_a_stream_on_stdin_is_recorded_as_it_comes(tmp_path: Path) -> None:
    env = cli_environ()
    proc = subprocess.Popen([EXECUTABLE, "ingest", "--format", "agentrun",
                             "--session-name", "live", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    try:
        for message in BACKEND[1:15]:  # the first turn, then the stream stays open
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

        def first_turn_recorded() -> bool:
            streamed = run_cli("log", "stream", "--no-follow", "--format", "agentrun",
                               env=env)
            return '"type":"result"' in streamed.stdout

        wait_for(first_turn_recorded, "the first turn in the replay log")
        assert proc.poll() is None  # still reading
        rest = b"".join(json.dumps(message).encode() + b"\n" for message in BACKEND[15:18])
        out, err = proc.communicate(rest, timeout=60)  # and stdin is closed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert b"into john@example.com/live: 2 turns, 2 tool calls" in out
    shown = run_cli("sessions", "show", "live", "--json", env=env)
    assert json.loads(shown.stdout)["session"]["turns"] == 2


def test_a_turn_the_run_failed_comes_back_failed(tmp_path: Path) -> None:
    async def failing_then_answering() -> None:
        async with Recorder(user_id="ann", session_name="boom") as rec:
            with pytest.raises(RuntimeError):
                await rec.run(Agent(name="G", model=model(RuntimeError("provider down"))), "hi")
            await rec.run(Agent(name="G", model=model(final("ok", usage(2, 1)))), "again")

    with isolated(tmp_path / "first") as env:
        asyncio.run(failing_then_answering())
        exported = run_cli("export", "--format", "agentrun", "--out", tmp_path / "a.jsonl",
                           env=env)
    with isolated(tmp_path / "second") as env:
        ingested = run_cli("ingest", "--format", "agentrun", "--user", "ann",
                           tmp_path / "a.jsonl", env=env)
        again = run_cli("export", "--format", "agentrun", "--out", tmp_path / "b.jsonl",
                        env=env)
    for done in (exported, ingested, again):
        assert done.returncode == 0, done.stderr
    first = kept(tmp_path / "a.jsonl")
    # AgentUse leaves a failed exchange without an end time: still a failed turn, not one
    # that did not finish
    assert [(m["type"], m.get("content"), m.get("stop_reason")) for m in first] == [
        ("init", None, None), ("system", "hi", None), ("error", "provider down", None),
        ("result", None, None), ("system", "again", None), ("text", "ok", None),
        ("result", "ok", "end_turn"), ("eof", None, None)]
    assert kept(tmp_path / "b.jsonl") == first


def test_a_name_no_layout_can_key_is_reported_and_the_stream_goes_on(tmp_path: Path) -> None:
    lines = [json.dumps({"type": "init", "resume_id": "first"}),
             json.dumps({"type": "system", "content": "one"}),
             json.dumps({"type": "result", "stop_reason": "end_turn"}),
             '{"type": "init", "resume_id": "bad\\ud800name"}',  # a lone surrogate
             json.dumps({"type": "system", "content": "two"}),
             json.dumps({"type": "result", "stop_reason": "end_turn"})]
    summary = asyncio.run(ingest_agentrun(lines))
    (problem,) = summary.problems
    assert problem.startswith("line 4: cannot record a conversation named")
    assert (summary.conversations, summary.turns) == ([f"{DEFAULT_USER_ID}/first"], 2)
    empty = run_cli("ingest", "--format", "agentrun", "--user", "", "-", stdin="",
                    env=cli_environ())
    assert empty.returncode == 2 and "user_id is empty" in empty.stderr
