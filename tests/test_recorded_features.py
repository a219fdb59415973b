"""SDK features recorded as they happened (issue 13): structured output, a user's hook
that raises. Each test reads the tree, the log and the CLI's view."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, RunHooks, UserError, function_tool
from harness import cli_environ, run_cli
from pydantic import BaseModel
from scripted import call, final, model, read_session, read_turns, run_agent, tools_step

from sessiontape import Recorder


class Weather(BaseModel):
    city: str
    temp_c: float


@pytest.mark.parametrize("streamed", [False, True])
def test_structured_output_is_recorded_as_json(streamed: bool) -> None:
    rec = Recorder(session_name=f"structured-{streamed}")
    agent = Agent(name="Forecaster", output_type=Weather, model=model(
        final('{"city":"Paris","temp_c":21.5}')))
    output = asyncio.run(run_agent(rec, agent, "weather in Paris?", streamed=streamed))
    assert output == Weather(city="Paris", temp_c=21.5)
    [turn] = read_turns(rec)
    assert json.loads(turn.text) == {"city": "Paris", "temp_c": 21.5}  # not "city='Paris' ..."
    session = read_session(rec)
    assert session.info["status"] == "completed"
    done = run_cli("log", "stream", "--no-follow", env=cli_environ())
    assert done.returncode == 0, done.stderr
    assert 'agent> (scripted/gpt-4.1) {"city":"Paris","temp_c":21.5}' in done.stdout


class FailingHooks(RunHooks[Any]):
    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        raise PermissionError(f"{tool.name} is not allowed here")


@pytest.mark.parametrize("streamed", [False, True])
def test_a_users_hook_that_raises_does_not_hide_the_call(streamed: bool) -> None:
    """The user's on_tool_start raises: the run fails with that error, and the record shows
    the call it failed on, closed as failed, and the run's error."""
    @function_tool
    def delete_everything() -> str:
        """Dangerous."""
        return "deleted"

    rec = Recorder(session_name=f"hook-raises-{streamed}")
    agent = Agent(name="A", tools=[delete_everything], model=model(
        tools_step(call("delete_everything", {}, "call_danger")), final("never")))
    # The SDK wraps what a hook raises while it runs a tool (UserError, from the hook's).
    with pytest.raises(UserError, match="not allowed") as raised:
        asyncio.run(run_agent(rec, agent, "clean up", streamed=streamed, hooks=FailingHooks()))
    assert isinstance(raised.value.__cause__, PermissionError)
    [turn] = read_turns(rec)
    started = [s for s in turn.steps if s["type"] == "agent_tool_start"]
    assert [s["toolName"] for s in started] == ["delete_everything"]
    assert turn.complete and "not allowed here" in turn.text
    session = read_session(rec)
    assert session.info["status"] == "error"
    [error] = [p for p in session.messages[0].parts if p["type"] == "error"]
    assert "Caused by PermissionError: delete_everything is not allowed here" in error["detail"]
    [tool] = [p for p in session.messages[0].parts if p["type"] == "tool"]
    assert tool["callID"] == "call_danger" and tool["state"]["status"] == "error"
