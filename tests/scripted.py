"""Shared helpers for the recorder tests: scripted models, runs, and readers.

Every model step gets unique response, item and call ids (the SDK's runner
de-duplicates items by id, so the ScriptedModel defaults would collide).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from agents import Agent, Runner, Usage, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseOutputMessage, ResponseOutputText, ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import LoadedMessage, LoadedSession, load_session
from sessiontape.storage.skillet.log_reader import SessionLogReader, Turn

__all__ = [
    "PRICED_MODEL",
    "await_until",
    "call",
    "chunked_message",
    "fail",
    "final",
    "message",
    "model",
    "parts",
    "read_session",
    "read_turns",
    "reasoning",
    "record_conversation",
    "run_agent",
    "run_way",
    "square",
    "steps_of",
    "store_items",
    "tool_parts",
    "tools_step",
    "usage",
]

# A model name the default price table knows: gpt-4.1 = $2 in, $0.50 cached in, $8 out per 1M.
PRICED_MODEL = "gpt-4.1"

_ids = itertools.count(1)


def _next(prefix: str) -> str:
    return f"{prefix}_{next(_ids)}"


def usage(input: int, output: int, *, reasoning: int = 0, cached: int = 0,
          cache_write: int = 0) -> Usage:
    """One model call's usage, with every detail the recorder reads."""
    return Usage(requests=1, input_tokens=input, output_tokens=output,
                 total_tokens=input + output,
                 input_tokens_details=InputTokensDetails(cached_tokens=cached,
                                                         cache_write_tokens=cache_write),
                 output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning))


def message(text: str) -> Any:
    return assistant_message(text, item_id=_next("msg"))


def chunked_message(*chunks: str) -> Any:
    """One assistant message whose text has several content parts: one stream delta each."""
    return ResponseOutputMessage(
        id=_next("msg"), type="message", role="assistant", status="completed",
        content=[ResponseOutputText(text=c, type="output_text", annotations=[], logprobs=[])
                 for c in chunks])


def reasoning(text: str) -> Any:
    return ResponseReasoningItem(id=_next("rs"), type="reasoning",
                                 summary=[Summary(type="summary_text", text=text)])


def call(name: str, args: dict[str, Any] | str, call_id: str | None = None) -> Any:
    return function_call(name, args, call_id=call_id or _next("call"))


def final(text: str, u: Usage | None = None, *extra: Any) -> ModelStep:
    """A step that ends the agent's turn with ``text`` (after ``extra`` items)."""
    return ModelStep(output=[*extra, message(text)], usage=u or usage(10, 5),
                     response_id=_next("resp"))


def tools_step(*calls: Any, u: Usage | None = None, extra: Sequence[Any] = ()) -> ModelStep:
    """A step that calls one or more tools (several: parallel calls)."""
    return ModelStep(output=[*extra, *calls], usage=u or usage(10, 5), response_id=_next("resp"))


def model(*steps: Any, name: str | None = PRICED_MODEL) -> ScriptedModel:
    """A ScriptedModel whose recorded name is ``scripted:<name>`` (see describe.py)."""
    scripted = ScriptedModel(list(steps))
    if name is not None:
        scripted.model = name  # type: ignore[attr-defined]
    return scripted


@function_tool
def square(n: int) -> int:
    """Square a number."""
    return n * n


@function_tool
def fail(city: str) -> str:
    """Look up a city (always fails)."""
    raise LookupError(f"no such city: {city}")


def blocking_agent(call_id: str) -> tuple[Agent[Any], asyncio.Event]:
    """An agent whose one tool call never returns, and the event set when it has started."""
    started = asyncio.Event()

    @function_tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.sleep(3600)
        return "unreachable"

    agent = Agent(name="A", tools=[wait_forever], model=model(
        tools_step(call("wait_forever", {}, call_id)), final("never")))
    return agent, started


async def run_agent(rec: Recorder, agent: Agent[Any], prompt: Any, streamed: bool,
                    **kwargs: Any) -> Any:
    """``rec.run`` or ``rec.run_streamed`` (stream consumed); returns the final output."""
    if not streamed:
        return (await rec.run(agent, prompt, **kwargs)).final_output
    result = rec.run_streamed(agent, prompt, **kwargs)
    async for _ in result.stream_events():
        pass
    return result.final_output


async def run_way(way: str, rec: Recorder, agent: Agent[Any], prompt: str) -> Any:
    """One run in one of the four ways a recorded run is made (``rec.run``,
    ``rec.run_streamed``, ``Runner.run`` or ``Runner.run_streamed`` with the recorder's
    hooks and session; streams consumed); the final output."""
    if way == "rec.run":
        return (await rec.run(agent, prompt)).final_output
    if way == "Runner.run":
        return (await Runner.run(agent, prompt, hooks=rec.hooks,
                                 session=rec.session)).final_output
    result = (rec.run_streamed(agent, prompt) if way == "rec.run_streamed"
              else Runner.run_streamed(agent, prompt, hooks=rec.hooks, session=rec.session))
    async for _ in result.stream_events():
        pass
    return result.final_output


def read_session(rec: Recorder) -> LoadedSession:
    assert rec.session_dir is not None, "no AgentUse session was linked"
    return load_session(rec.session_dir)


def read_turns(rec: Recorder) -> list[Turn]:
    reader = SessionLogReader(rec.log_path)
    turns = reader.turns()
    assert reader.problems == []
    return turns


def parts(msg: LoadedMessage, kind: str | None = None) -> list[dict[str, Any]]:
    return [p for p in msg.parts if kind is None or p["type"] == kind]


def tool_parts(msg: LoadedMessage) -> dict[str, dict[str, Any]]:
    """The exchange's tool parts by call id."""
    return {p["callID"]: p for p in parts(msg, "tool")}


def steps_of(turn: Turn, kind: str) -> list[dict[str, Any]]:
    return [s for s in turn.steps if s.get("type") == kind]


async def store_items(rec: Recorder) -> list[Any]:
    return await rec.session.get_items()


async def await_until(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    """Poll ``predicate`` (exceptions count as false) until it is truthy, without
    blocking the event loop; the files it reads are written by another thread."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except (OSError, ValueError, KeyError, IndexError, AssertionError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        await asyncio.sleep(0.01)


# -- a whole recorded conversation in another process (multiprocessing "spawn") ---------


def record_conversation(session_name: str, turns: int, barrier: Any = None,
                        tag: str | None = None) -> None:
    """Record ``turns`` runs with a tool and a subagent (a ``spawn`` process target).

    Paths come from the environment the child inherits from the test. With a
    ``barrier``, the processes start recording together (after their imports).
    Prompts, answers and the helper's name carry ``tag`` (default: the session
    name), so that two processes recording one session can be told apart.
    """
    tag = tag if tag is not None else session_name
    if barrier is not None:
        barrier.wait(60)
    from agents import function_tool

    @function_tool
    def square(n: int) -> int:
        """Square a number."""
        return n * n

    async def main() -> None:
        rec = Recorder("proc@example.com", session_name)
        for turn in range(turns):
            helper = Agent(name=f"Helper {tag}", model=model(final(f"helped {turn}", usage(3, 1))))
            agent = Agent(name=f"Agent {session_name}",
                          tools=[square, helper.as_tool("helper", "Ask the helper.")],
                          model=model(tools_step(call("square", {"n": turn}),
                                                 call("helper", {"input": f"turn {turn}"}),
                                                 u=usage(10, 2)),
                                      final(f"{tag} turn {turn}", usage(20, 4))))
            await run_agent(rec, agent, f"{tag} prompt {turn}", streamed=turn % 2 == 1)
        if rec.errors:
            raise SystemExit(f"{rec.errors} recording errors")

    asyncio.run(main())
