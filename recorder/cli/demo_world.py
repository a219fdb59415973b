"""The world of ``sessiontape demo`` (and of ``run``/``chat`` without ``--agent``): a bundled
agent, recorded; offline unless a real model is asked for.

Offline, scripted models stand in for the LLM (no key, no network): the
trip planner reasons, calls two tools in parallel (one of which fails) and a
researcher subagent (which calls its own tool), then streams its answer.
With ``model="gpt-4.1-mini"`` and ``OPENAI_API_KEY`` set, the same agents
run on the real model. Every run continues the same conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Usage, function_tool
from agents.items import TResponseStreamEvent
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseReasoningItem, ResponseTextDeltaEvent
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.log_reader import SessionLogReader

from ..describe import output_text_delta
from ..pricing import DEFAULT_PRICES
from ..recorder import Recorder

__all__ = ["DEMO_PRICES", "DEMO_SESSION", "DemoResult", "build_agent", "demo_agent", "run_demo"]

DEMO_SESSION = "sessiontape_demo"
CITIES = ["Lisbon", "Porto", "Madeira"]
STREAM_DELAY = 0.015  # seconds between streamed words, so the answer visibly streams


@function_tool
def get_weather(city: str) -> str:
    """Today's weather for a city."""
    return f"Sunny, 21°C in {city}"


@function_tool
def convert_currency(amount: float, currency: str) -> str:
    """Convert an amount in euros to another currency (EUR, USD or GBP)."""
    rates = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85}
    if currency not in rates:
        raise ValueError(f"unsupported currency {currency!r}")
    return f"{amount * rates[currency]:.2f} {currency}"


@function_tool
def search_notes(topic: str) -> str:
    """Search the travel notes for a topic."""
    return f"Notes on {topic}: visit the old town early; the viewpoints are best at sunset."


def _usage(input_tokens: int, output_tokens: int, cached: int = 0, reasoning: int = 0) -> Usage:
    return Usage(requests=1, input_tokens=input_tokens, output_tokens=output_tokens,
                 total_tokens=input_tokens + output_tokens,
                 input_tokens_details=InputTokensDetails(cached_tokens=cached,
                                                         cache_write_tokens=0),
                 output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning))


class DemoModel(ScriptedModel):
    """A scripted model whose streamed text arrives word by word."""

    model = "scripted-demo"

    async def stream_response(self, *args: Any,
                              **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        async for event in super().stream_response(*args, **kwargs):
            if not isinstance(event, ResponseTextDeltaEvent):
                yield event
                continue
            words = event.delta.split(" ")
            for index, word in enumerate(words):
                chunk = word if index == len(words) - 1 else word + " "
                yield event.model_copy(update={"delta": chunk})
                await asyncio.sleep(STREAM_DELAY)


def _scripted_models(turn: int, city: str) -> tuple[DemoModel, DemoModel]:
    tag = f"t{turn}"
    planner = DemoModel([
        ModelStep(output=[
            ResponseReasoningItem(id=f"rs_{tag}", type="reasoning", summary=[Summary(
                type="summary_text",
                text=f"Check the weather in {city}, price the day, ask the researcher.")]),
            function_call("get_weather", {"city": city}, call_id=f"call_weather_{tag}",
                          item_id=f"fc_weather_{tag}"),
            function_call("convert_currency", {"amount": 80, "currency": "XYZ"},
                          call_id=f"call_fx_{tag}", item_id=f"fc_fx_{tag}"),
            function_call("ask_researcher", {"input": f"What should I see in {city}?"},
                          call_id=f"call_research_{tag}", item_id=f"fc_research_{tag}"),
        ], usage=_usage(420, 96, cached=128, reasoning=32), response_id=f"resp_plan1_{tag}"),
        ModelStep(output=[assistant_message(
            f"A day in {city}: it is sunny and 21°C, so start in the old town early and "
            "end at a viewpoint for the sunset. The currency conversion failed (XYZ is not "
            "supported), so budget about 80 EUR.", item_id=f"msg_plan_{tag}")],
            usage=_usage(780, 64, cached=384), response_id=f"resp_plan2_{tag}"),
    ])
    researcher = DemoModel([
        ModelStep(output=[function_call("search_notes", {"topic": city},
                                        call_id=f"call_notes_{tag}", item_id=f"fc_notes_{tag}")],
                  usage=_usage(150, 20), response_id=f"resp_res1_{tag}"),
        ModelStep(output=[assistant_message(
            f"In {city}: the old town in the morning, a viewpoint at sunset.",
            item_id=f"msg_res_{tag}")], usage=_usage(210, 18), response_id=f"resp_res2_{tag}"),
    ])
    return planner, researcher


# The scripted model is priced like gpt-4.1-mini (and shows how to extend the table).
DEMO_PRICES = {**DEFAULT_PRICES, DemoModel.model: DEFAULT_PRICES["gpt-4.1-mini"]}


def demo_city(turn: int, prompt: str = "") -> str:
    """The city of a demo turn: one the prompt names, else the next in :data:`CITIES`."""
    lowered = prompt.lower()
    for city in CITIES:
        if city.lower() in lowered:
            return city
    return CITIES[(turn - 1) % len(CITIES)]


def demo_agent(turn: int, prompt: str = "", model: str | None = None) -> Agent[Any]:
    """The demo agent for turn ``turn`` (1-based) of a conversation.

    Offline (``model=None``) it runs on fresh scripted models, which are used up
    by one turn: call this once per prompt. Their item ids carry the turn
    number, so the turns of one conversation never share an id.
    """
    if model is not None:
        return build_agent(model, model)
    return build_agent(*_scripted_models(turn, demo_city(turn, prompt)))


def build_agent(planner_model: Any, researcher_model: Any) -> Agent[Any]:
    """The trip planner and its researcher subagent, on the given models."""
    researcher = Agent(name="Researcher", model=researcher_model, tools=[search_notes],
                       instructions="You research travel destinations in the notes.")
    return Agent(
        name="Trip planner", model=planner_model,
        instructions="You plan day trips. Check the weather, price the day in the "
                     "traveller's currency, and ask the researcher what to see.",
        tools=[get_weather, convert_currency,
               researcher.as_tool("ask_researcher", "Ask the researcher about a destination")])


@dataclass
class DemoResult:
    """What a demo run recorded, and where."""

    recorder: Recorder
    final_output: str
    prompt: str
    model_input_items: int | None  # items the model got on its first call (None: real model)
    earlier_turns: int


async def run_demo(*, user_id: str, session_name: str = DEMO_SESSION, model: str | None = None,
                   on_text: Callable[[str], None] | None = None,
                   store: str | None = None) -> DemoResult:
    """Run one recorded, streamed turn of the demo conversation (``store``: where, as
    ``Recorder(store=)`` takes it)."""
    recorder = Recorder(user_id=user_id, session_name=session_name, prices=DEMO_PRICES,
                        store=store)
    earlier = len(SessionLogReader(recorder.log_path).turns()) if recorder.log_path.exists() else 0
    city = CITIES[earlier % len(CITIES)]
    prompt = f"Plan a day in {city} for me."
    if model is None:
        planner, researcher = _scripted_models(earlier + 1, city)
        agent = build_agent(planner, researcher)
    else:
        planner, researcher = None, None
        agent = build_agent(model, model)
    # Offline there is no trace exporter to send to; a real model keeps tracing on.
    result = recorder.run_streamed(agent, prompt,
                                   run_config=RunConfig(tracing_disabled=model is None))
    async for event in result.stream_events():
        delta = output_text_delta(event)
        if on_text and delta is not None:
            on_text(delta.delta)
    inputs = len(planner.first_call.input) if planner and planner.first_call else None
    return DemoResult(recorder, str(result.final_output), prompt, inputs, earlier)


def demo_paths(recorder: Recorder) -> dict[str, Path | str | None]:
    """Where the demo conversation is recorded."""
    store = recorder.store
    return {"AgentUse session": recorder.session_dir, "JSONL log": recorder.log_path,
            "SQLite store" if isinstance(store, ItemStore) else "PostgreSQL store":
            store.path if isinstance(store, ItemStore) else store.where}
