"""Agents for the replay tests, loadable with ``--agent tests/replay_agents.py:NAME``.

``agent()`` is the one recorded: a guide with a tool (``weather``), a subagent run as a
tool (``helper``) and a handoff (to ``Booker``), on scripted models for three turns. The
others are today's versions of it, each changed in one way: a tool's output, a tool's
name, the instructions. A replay answers every model call from the recording, so their
models are never asked.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, function_tool
from scripted import call, final, model, tools_step, usage

PROMPTS = ["how do I get around Porto?", "book me a tram pass", "and the weather in Lisbon?"]


def _guide(weather_word: str = "sunny", tool_name: str = "weather",
           instructions: str = "Help travellers; be brief.",
           tool_use_behavior: Any = "run_llm_again") -> Agent[Any]:
    @function_tool(name_override=tool_name)
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"{weather_word} in {city}"

    helper = Agent(name="Helper", model=model(final("the tram is faster", usage(3, 1))))
    booker = Agent(name="Booker", instructions="Book passes.",
                   model=model(final("booked: one tram pass", usage(4, 1))))
    return Agent(name="Guide", instructions=instructions, handoffs=[booker],
                 tool_use_behavior=tool_use_behavior,
                 tools=[weather, helper.as_tool("helper", "Ask the helper.")],
                 model=model(
                     tools_step(call("weather", {"city": "Porto"}),
                                call("helper", {"input": "tram or bus?"}), u=usage(10, 2)),
                     final("take the tram: it is sunny", usage(12, 3)),
                     tools_step(call("transfer_to_booker", {}), u=usage(6, 1)),
                     tools_step(call("weather", {"city": "Lisbon"}), u=usage(7, 1)),
                     final("Lisbon is sunny too", usage(8, 2))))


def agent() -> Agent[Any]:
    """The agent as it was recorded."""
    return _guide()


def other_output() -> Agent[Any]:
    """Its weather tool now says "rainy"."""
    return _guide(weather_word="rainy")


def renamed_tool() -> Agent[Any]:
    """Its weather tool is now called "forecast"."""
    return _guide(tool_name="forecast")


def other_instructions() -> Agent[Any]:
    """New instructions."""
    return _guide(instructions="Help travellers; be thorough.")


def stops_at_tools() -> Agent[Any]:
    """It now ends a turn with its first tool's output (``stop_on_first_tool``)."""
    return _guide(tool_use_behavior="stop_on_first_tool")
