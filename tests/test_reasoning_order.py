"""Part order in the AgentUse tree: a model call's reasoning sorts before its text.

In a streamed run the text part is written from the stream's first text chunk, while the
call's reasoning only reaches the recorder with the call's end. Part IDs (and part file
names) must still tell the true order, as docs/formats.md promises: step-start, reasoning,
text, step-finish, whichever way the run was made. The real ``Runner`` with scripted
models; the tree is read back with storage's reader and, for the names, listed as files.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, ModelSettings, function_tool
from agents.models.interface import ModelTracing
from agents.testing import ModelStep, ScriptedModel
from openai.types.responses import ResponseTextDeltaEvent
from scripted import (
    call,
    chunked_message,
    message,
    model,
    parts,
    read_session,
    read_turns,
    reasoning,
    run_way,
    steps_of,
    tools_step,
    usage,
)

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import LoadedMessage
from sessiontape.storage.json_style import loads

WAYS = pytest.mark.parametrize("way", ["rec.run", "rec.run_streamed", "Runner.run",
                                       "Runner.run_streamed"])


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


def file_order(msg: LoadedMessage) -> list[dict[str, Any]]:
    """The exchange's part files in name order (what AgentUse sorts by), read as they are."""
    directory = msg.directory / "part"
    names = sorted(n for n in os.listdir(directory) if not n.startswith("."))
    return [loads((directory / name).read_bytes()) for name in names]


def types(listed: list[dict[str, Any]]) -> list[str]:
    return [p["type"] for p in listed]


def reasoning_and_texts_agent() -> Agent[Any]:
    """Two model calls: reasoning, a text and a tool call; then two reasoning items and a
    chunked answer (three stream deltas)."""
    first = tools_step(call("lookup", {"key": "k"}, "c_lookup"), u=usage(20, 8, reasoning=3),
                       extra=[reasoning("I should look k up."), message("Let me look.")])
    second = ModelStep(output=[reasoning("k has a value."), reasoning("Answer briefly."),
                               chunked_message("The value ", "is ", "known.")],
                       usage=usage(30, 9, reasoning=4), response_id="resp-answer")
    return Agent(name="Thinker", tools=[lookup], model=model(first, second))


EXPECTED = ["step-start", "reasoning", "text", "step-finish", "tool",
            "step-start", "reasoning", "reasoning", "text", "step-finish"]


@WAYS
def test_reasoning_sorts_before_the_text_of_its_model_call(way: str) -> None:
    rec = Recorder(session_name=f"order-{way}")
    agent = reasoning_and_texts_agent()
    assert asyncio.run(run_way(way, rec, agent, "What is k?")) == "The value is known."
    assert rec.errors == 0

    [msg] = read_session(rec).messages
    assert types(msg.parts) == EXPECTED
    # the reader sorts our parts by id; the file names tell the same order, one file each
    listed = file_order(msg)
    assert listed == msg.parts
    assert [p["id"] for p in listed] == sorted(p["id"] for p in listed)
    assert len({p["id"] for p in listed}) == len(listed)

    # every other property as before: the texts are exact, the reasoning is there
    assert [p["text"] for p in parts(msg, "reasoning")] == [
        "I should look k up.", "k has a value.", "Answer briefly."]
    assert [p["text"] for p in parts(msg, "text")] == ["Let me look.", "The value is known."]
    assert parts(msg, "tool")[0]["state"]["output"] == "value of k"
    assert [p["tokens"]["reasoning"] for p in parts(msg, "step-finish")] == [3, 4]
    # times agree with the order: a call's reasoning ended before its text began
    for start in (0, 5):
        call_parts = msg.parts[start:start + 5]
        texts = [p for p in call_parts if p["type"] == "text"]
        for thought in (p for p in call_parts if p["type"] == "reasoning"):
            assert thought["time"]["start"] <= thought["time"]["end"]
            assert thought["time"]["end"] <= texts[0]["time"]["start"]
    # the log: streamed text as chunks, otherwise whole
    [turn] = read_turns(rec)
    chunks = [s["text"] for s in steps_of(turn, "text")]
    if way.endswith("streamed"):
        # the chunks; those of one batch of the writer are one step
        assert chunks[0] == "Let me look." and "".join(chunks[1:]) == "The value is known."
    else:
        assert chunks == ["Let me look.", "The value is known."]


def test_several_text_items_of_one_streamed_call_keep_their_order() -> None:
    step = ModelStep(output=[reasoning("first thought"), message("one"), reasoning("more"),
                             message("two")], usage=usage(5, 5), response_id="resp-two-texts")
    rec = Recorder(session_name="two-texts")
    agent = Agent(name="A", model=model(step))
    assert asyncio.run(run_way("rec.run_streamed", rec, agent, "go")) == "two"
    [msg] = read_session(rec).messages
    assert types(file_order(msg)) == [
        "step-start", "reasoning", "reasoning", "text", "text", "step-finish"]
    assert [p["text"] for p in parts(msg, "text")] == ["one", "two"]


def test_more_reasoning_items_than_set_aside_ids_are_kept_before_the_text(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sessiontape.storage.agentuse.sink as sink

    monkeypatch.setattr(sink, "REASONING_SLOTS", 2)
    step = ModelStep(output=[reasoning("a"), reasoning("b"), reasoning("c"), message("done")],
                     usage=usage(5, 5), response_id="resp-many-thoughts")
    rec = Recorder(session_name="many-thoughts")
    agent = Agent(name="A", model=model(step))
    assert asyncio.run(run_way("rec.run_streamed", rec, agent, "go")) == "done"
    [msg] = read_session(rec).messages
    assert types(file_order(msg)) == ["step-start", "reasoning", "reasoning", "text",
                                      "step-finish"]
    # nothing lost: the reasoning beyond the set-aside ids joins the last of them
    assert [p["text"] for p in parts(msg, "reasoning")] == ["a", "b\n\nc"]


# -- the text part while it streams ----------------------------------------------------


def gated_stream(step: ModelStep, gate: asyncio.Event) -> Any:
    """A stream factory: the events the scripted model streams for ``step``, held after
    the first text delta until ``gate`` is set."""

    async def events(_call: Any) -> AsyncIterator[Any]:
        source = ScriptedModel([step]).stream_response(
            None, "", ModelSettings(), [], None, [], ModelTracing.DISABLED,
            previous_response_id=None, conversation_id=None, prompt=None)
        held = False
        async for event in source:
            yield event
            if isinstance(event, ResponseTextDeltaEvent) and not held:
                held = True
                await gate.wait()

    return events


def test_a_streamed_text_part_grows_under_one_id_after_its_reasoning() -> None:
    step = ModelStep(output=[reasoning("Think first."), chunked_message("Hello", ", world")],
                     usage=usage(4, 4), response_id="resp-gated")
    gate = asyncio.Event()
    agent = Agent(name="A", model=model(ModelStep.stream(
        gated_stream(step, gate), output=step.output, usage=step.usage,
        response_id="resp-gated")))
    rec = Recorder(session_name="gated")

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        result = rec.run_streamed(agent, "hi")
        during: list[dict[str, Any]] = []
        async for event in result.stream_events():
            if not during and isinstance(getattr(event, "data", None), ResponseTextDeltaEvent):
                await rec.flush()  # the first chunk is recorded; the model is held
                during = file_order(read_session(rec).messages[0])
                gate.set()
        return during, file_order(read_session(rec).messages[0])

    during, after = asyncio.run(main())
    # while streaming: the text part holds the first chunk; the reasoning is not known yet
    assert types(during) == ["step-start", "text"]
    assert during[1]["text"] == "Hello" and "end" not in during[1]["time"]
    # at the end: the same text part (same id, same file), whole, after the reasoning
    assert types(after) == ["step-start", "reasoning", "text", "step-finish"]
    assert after[2]["id"] == during[1]["id"]
    assert after[2]["text"] == "Hello, world"
    assert after[2]["time"]["start"] == during[1]["time"]["start"]
    assert after[1]["text"] == "Think first."
    assert after[1]["time"]["end"] <= after[2]["time"]["start"]
    assert after[0]["id"] < after[1]["id"] < after[2]["id"] < after[3]["id"]
