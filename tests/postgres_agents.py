"""The agent of the PostgreSQL tests' hosts (``--agent tests/postgres_agents.py:agent``).

Each host (process) answers in its own words (``HOST_LABEL``): a tool call, then the
answer. At exit, the input its model got on its first call is written as JSON to
``MODEL_INPUT`` (what the second host's model saw of the first host's turn).
"""

from __future__ import annotations

import atexit
import json
import os
from typing import Any

from agents import Agent, function_tool
from scripted import call, final, model, tools_step, usage

HOST = os.environ.get("HOST_LABEL", "host")


@function_tool
def where() -> str:
    """Where this agent runs."""
    return f"running on {HOST}"


def agent() -> Agent[Any]:
    scripted = model(tools_step(call("where", {}), u=usage(5, 1)),
                     final(f"answered on {HOST}", usage(6, 2)))
    dump = os.environ.get("MODEL_INPUT")
    if dump:
        def write() -> None:
            first = scripted.first_call
            with open(dump, "w") as out:
                json.dump(first.input if first is not None else None, out, default=str)
        atexit.register(write)
    return Agent(name="Worker", instructions="Answer briefly.", tools=[where], model=scripted)
