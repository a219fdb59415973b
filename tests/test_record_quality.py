"""A versioned, self-describing, complete record (issue 14).

Each artefact declares its format; every part has a time, every step part its agent and
model; the log alone holds each model call (agent, model, tokens, cost, reasoning), pairs
parallel calls by id and links a subagent's steps to the call that ran it; each layout
names the other. All checked on the raw files, as an outside reader would read them.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from scripted import (
    call,
    final,
    model,
    read_session,
    reasoning,
    run_way,
    tools_step,
    usage,
)

from sessiontape import Price, Recorder
from sessiontape.storage.agentuse.reader import LoadedSession
from sessiontape.storage.events import AgentInfo, RunStarted, TextDelta, ToolStarted
from sessiontape.storage.skillet.log_entries import STEP_TYPES
from sessiontape.storage.skillet.replay_log import ReplayLog
from sessiontape.storage.skillet.sink import SkilletLogSink

PRICED = ("model-a", "model-b", "model-c", "model-r")
WAYS = pytest.mark.parametrize("way", ["rec.run", "rec.run_streamed", "Runner.run"])


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


def log_lines(rec: Recorder) -> list[dict[str, Any]]:
    """Every line of the log, read naively: one JSON object per line."""
    return [json.loads(line) for line in rec.log_path.read_bytes().splitlines()]


def all_sessions(session: LoadedSession) -> list[LoadedSession]:
    return [session, *(s for sub in session.subagents for s in all_sessions(sub))]


def three_models_and_a_subagent() -> Agent[Any]:
    """Triage (model a) hands off to Planner (model b), which asks a Researcher subagent
    (model r, as a tool) and hands off to Writer (model c), who calls weather twice in
    parallel and answers."""
    researcher = Agent(name="Researcher", instructions="Research.", model=model(
        final("facts", usage(7, 3)), name="model-r"))
    writer = Agent(name="Writer", tools=[weather], model=model(
        tools_step(call("weather", {"city": "Paris"}, "c_paris"),
                   call("weather", {"city": "Oslo"}, "c_oslo"), u=usage(30, 6)),
        final("Paris and Oslo are sunny", usage(40, 8, reasoning=4),
              reasoning("compare the two")),
        name="model-c"))
    planner = Agent(name="Planner", handoffs=[writer],
                    tools=[researcher.as_tool("research", "Research a topic.")],
                    model=model(tools_step(call("research", {"input": "cities"}, "c_research"),
                                           u=usage(20, 4)),
                                tools_step(call("transfer_to_writer", {}), u=usage(25, 5)),
                                name="model-b"))
    return Agent(name="Triage", handoffs=[planner], model=model(
        tools_step(call("transfer_to_planner", {}), u=usage(10, 2)), name="model-a"))


@WAYS
def test_the_log_alone_holds_every_model_call_and_links_every_step(way: str) -> None:
    rec = Recorder(session_name=f"quality-{way}", prices={
        name: Price(1.0 * n, 0.5, 2.0 * n) for n, name in enumerate(PRICED, start=1)})
    answer = asyncio.run(run_way(way, rec, three_models_and_a_subagent(), "weather?"))
    assert answer == "Paris and Oslo are sunny" and rec.errors == 0
    lines = log_lines(rec)
    session = read_session(rec)

    # one model_call line per model call, as the tree's step-finish parts say it
    calls = [line for line in lines if line["kind"] == "model_call"]
    finishes = [part for s in all_sessions(session) for m in s.messages for part in m.parts
                if part["type"] == "step-finish"]
    assert len(calls) == len(finishes) == 6
    assert sorted((c["agentName"], c["model"]) for c in calls) == sorted(
        (f["agent"], f["model"].replace(":", "/", 1)) for f in finishes)
    assert [c["model"] for c in calls if "parentCallId" not in c] == [
        "scripted/model-a", "scripted/model-b", "scripted/model-b", "scripted/model-c",
        "scripted/model-c"]
    [sub_call] = [c for c in calls if "parentCallId" in c]
    assert (sub_call["agentName"], sub_call["parentCallId"]) == ("Researcher", "c_research")
    assert sum(c["usage"]["inputTokens"] for c in calls) == 10 + 20 + 25 + 30 + 40 + 7
    assert sum(c["usage"]["outputTokens"] for c in calls) == 2 + 4 + 5 + 6 + 8 + 3
    last = calls[-1]
    assert last["usage"] == {"inputTokens": 40, "outputTokens": 8, "cachedTokens": 0,
                             "reasoningTokens": 4}
    assert last["reasoning"] == ["compare the two"]
    assert all(c["cost"] > 0 and c["durationMs"] >= 0 for c in calls)
    assert sum(c["cost"] for c in calls) == pytest.approx(
        sum(f["cost"] for f in finishes))

    # parallel calls of one tool pair by id; the subagent's steps name the call that ran it
    steps = [line["stepResult"] for line in lines if line["kind"] == "step"]
    assert {step["type"] for step in steps} <= STEP_TYPES
    starts = {s["callId"]: s for s in steps if s["type"] == "agent_tool_start"}
    ends = {s["callId"]: s for s in steps if s["type"] == "agent_tool_end"}
    assert ends["c_paris"]["result"] == "Paris: sunny"
    assert ends["c_oslo"]["result"] == "Oslo: sunny"
    assert json.loads(starts["c_oslo"]["toolArgumentsStr"]) == {"city": "Oslo"}
    assert set(starts) == set(ends)
    nested = [s for s in steps if s.get("parentCallId") == "c_research"]
    assert [s["type"] for s in nested] == ["agent_start", "agent_end"]
    assert all(s["agentName"] == "Researcher" for s in nested)


@WAYS
def test_every_part_has_a_time_and_every_step_part_its_agent_and_model(way: str) -> None:
    rec = Recorder(session_name=f"parts-{way}")
    asyncio.run(run_way(way, rec, three_models_and_a_subagent(), "weather?"))
    session = read_session(rec)
    for each in all_sessions(session):
        for message in each.messages:
            for part in message.parts:
                times = part.get("time") or part.get("state", {}).get("time")
                assert isinstance(times, dict) and isinstance(times.get("start"), int), part
                if part["type"] in ("step-start", "step-finish"):
                    assert part["agent"] and part["model"].startswith("scripted:"), part
    [exchange] = session.messages
    assistant = exchange.info["assistant"]
    # who answered last, and every model that answered, in order
    assert assistant["modelID"] == "scripted:model-c"
    assert assistant["models"] == ["scripted:model-a", "scripted:model-b", "scripted:model-c"]
    [researcher] = session.subagents
    assert researcher.messages[0].info["assistant"]["models"] == ["scripted:model-r"]


def test_each_artefact_declares_its_format_and_names_the_others() -> None:
    rec = Recorder(session_name="self-describing")
    asyncio.run(rec.run(Agent(name="A", model=model(final("hi"))), "hello"))
    session = read_session(rec)
    info = json.loads((session.directory / "session.json").read_bytes())
    assert info["format"] == "sessiontape-agentuse/2"
    assert info["conversation"] == {"user": rec.user_id, "name": "self-describing",
                                    "log": str(rec.log_path)}
    assert info["recorder"]["pid"] == os.getpid()
    assert info["recorder"]["host"] == socket.gethostname()
    assert info["time"]["created"] <= info["recorder"]["started"] <= info["time"]["updated"]

    [first, *_] = log_lines(rec)
    assert first["kind"] == "user_message"
    assert first["format"] == "sessiontape-log/1"
    assert first["cwd"] == os.getcwd() and first["projectRoot"] == rec.project_root
    assert first["sessionId"] == session.id and first["sessionDir"] == str(session.directory)

    with sqlite3.connect(rec.store.path) as conn:
        assert conn.execute("SELECT value FROM sessiontape_meta WHERE key = 'format'"
                            ).fetchall() == [("sessiontape-store/1",)]


def test_every_turn_of_the_log_names_its_conversation_with_the_raw_names() -> None:
    """Session-Bench P3 (issue 23, item 13): the log names its conversation. skilled_crew
    writes the log under its names sanitized (session_log_types.ts
    ``SessionLogTypes.sanitizeForPath``: runs outside ``[a-zA-Z0-9_-]`` become ``_``), so
    the file name loses them; each turn's ``user_message`` carries them raw, as it carries
    ``cwd``. Redaction (on here) leaves them as they are."""
    user, name = "John.Doe+x@example.com", "Trip: Porto & Lisbon"
    rec = Recorder(user, name, redact=True)
    agent = Agent(name="A", tools=[weather], model=model(
        tools_step(call("weather", {"city": "Porto"})), final("sunny"), final("still sunny")))
    asyncio.run(run_way("rec.run", rec, agent, "weather?"))
    asyncio.run(run_way("rec.run_streamed", rec, agent, "and tomorrow?"))
    assert rec.log_path.parent.name == "John_Doe_x_example_com"
    assert rec.log_path.name == "Trip_Porto_Lisbon.jsonl"
    messages = [line for line in log_lines(rec) if line["kind"] == "user_message"]
    assert [m["userInput"] for m in messages] == ["weather?", "and tomorrow?"]
    assert [(m["userId"], m["sessionName"]) for m in messages] == [(user, name)] * 2
    # after the format, before where the run happened
    assert list(messages[0])[3:7] == ["format", "userId", "sessionName", "cwd"]


def test_a_naive_reader_finds_every_message_once_in_each_artefact() -> None:
    """The log read as one JSON object per line, the tree as one per file: the user's
    prompts and the answers are each there exactly once."""
    rec = Recorder(session_name="naive")
    prompts = ["first question", "second question"]
    answers = ["first answer", "second answer"]
    for prompt, answer in zip(prompts, answers, strict=True):
        agent = Agent(name="A", model=model(final(answer)))
        assert asyncio.run(run_way("rec.run_streamed", rec, agent, prompt)) == answer
    lines = log_lines(rec)
    texts = [line["userInput"] for line in lines if line["kind"] == "user_message"]
    texts += ["".join(line["stepResult"]["text"] for line in lines
                      if line["kind"] == "step" and line["stepResult"]["type"] == "text"
                      and line["stepResult"]["text"] in answer) for answer in answers]
    assert texts == prompts + answers
    assert [line["finalResult"]["text"] for line in lines if line["kind"] == "final_result"] \
        == answers
    documents = [json.loads(path.read_bytes()) for path in rec.session_dir.rglob("*.json")]
    tasks = [d["user"]["prompt"]["task"] for d in documents if "user" in d]
    text_parts = [d["text"] for d in documents if d.get("type") == "text"]
    assert sorted(tasks) == sorted(prompts) and sorted(text_parts) == sorted(answers)
    # the store: one JSON item per row (skilled_crew's JS protocol items)
    with sqlite3.connect(rec.store.path) as conn:
        items = [json.loads(row) for (row,) in conn.execute(
            "SELECT item_json FROM session_items WHERE session_name = 'naive' ORDER BY id")]
    said = [(item["role"], item["content"] if isinstance(item["content"], str)
             else "".join(part.get("text", "") for part in item["content"]))
            for item in items if item.get("type", "message") == "message"]
    assert said == [("user", prompts[0]), ("assistant", answers[0]),
                    ("user", prompts[1]), ("assistant", answers[1])]


AGENT = AgentInfo(name="A", model="openai:gpt-4.1")


def test_streamed_text_is_one_line_per_batch_not_per_chunk(tmp_path: Path) -> None:
    """Chunks of one text in one batch of the writer are one ``text`` step; a chunk of the
    next batch starts a new one; another line in between starts a new one too."""
    log = ReplayLog("u", "s", tmp_path)
    sink = SkilletLogSink(log)
    sink.handle(RunStarted("run", 1, AGENT, "hi", "hi"))
    for at, chunk in enumerate(["Hel", "lo, ", "wor"], start=2):
        sink.handle(TextDelta("run", at, "A", "msg_1", chunk))
    sink.flush()
    sink.handle(TextDelta("run", 5, "A", "msg_1", "ld!"))
    sink.handle(TextDelta("run", 6, "A", "msg_2", "Other "))
    sink.handle(ToolStarted("run", 7, "A", "c1", "weather", "{}"))
    sink.handle(TextDelta("run", 8, "A", "msg_2", "text"))
    sink.flush()
    steps = [json.loads(line)["stepResult"] for line in log.path.read_bytes().splitlines()
             if b'"kind":"step"' in line]
    assert [(s["type"], s.get("text")) for s in steps] == [
        ("text", "Hello, wor"), ("text", "ld!"), ("text", "Other "),
        ("agent_tool_start", None), ("text", "text")]


def test_the_files_keep_what_the_original_readers_require() -> None:
    """What skilled_crew 1.0.11's and AgentUse 0.15's readers read without a fallback (from
    their code: docs/formats.md, "What the original readers require"), on every line and
    file of a rich recording. A change to one of these keys fails here."""
    rec = Recorder(session_name="required")
    asyncio.run(run_way("rec.run_streamed", rec, three_models_and_a_subagent(), "weather?"))
    for line in log_lines(rec):
        assert isinstance(line, dict) and isinstance(line.get("kind"), str)
        if line["kind"] == "user_message":
            assert isinstance(line["userInput"], str | list)
        elif line["kind"] == "step":
            step = line["stepResult"]
            assert step["type"] in STEP_TYPES  # any other type stops skilled_crew's replay
            if step["type"] == "text":
                assert isinstance(step["text"], str)
        elif line["kind"] == "final_result":
            assert isinstance(line["finalResult"], dict)
            assert isinstance(line["finalResult"]["text"], str)
    session = read_session(rec)
    for each in all_sessions(session):
        assert each.info["status"] in ("running", "completed", "error", "suspended")
        for message in each.messages:
            for part in message.parts:
                assert {"id", "sessionID", "messageID", "type"} <= set(part)
                if part["type"] == "tool" and part["state"]["status"] != "pending":
                    assert isinstance(part["state"]["time"]["start"], int)  # AgentUse sorts by it


def test_a_one_line_probe_adds_under_10_kb_across_tree_log_and_store() -> None:
    """Session-Bench's S1: one prompt, one answer. The bytes it adds to the tree and the log
    (every file of its session and its log), and to the store (the database's growth once
    its write-ahead log is checkpointed into it), on a store already in use."""
    agent = Agent(name="A", model=model(final("pong")))
    asyncio.run(Recorder(session_name="before").run(agent, "warm up"))  # the store exists

    def store_bytes(rec: Recorder) -> int:
        with sqlite3.connect(rec.store.path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return rec.store.path.stat().st_size

    rec = Recorder(session_name="probe")
    before = store_bytes(rec)
    asyncio.run(rec.run(Agent(name="A", model=model(final("pong"))), "ping"))
    asyncio.run(rec.aclose())
    tree = sum(p.stat().st_size for p in rec.session_dir.rglob("*") if p.is_file())
    logs = sum(p.stat().st_size for p in rec.log_path.parent.iterdir()
               if p.name.startswith(rec.log_path.stem))  # the log and its owner record
    added = tree + logs + store_bytes(rec) - before
    print(f"probe: tree {tree} B, log {logs} B, store {store_bytes(rec) - before} B")
    assert tree > 0 and logs > 0 and added <= 10_000
