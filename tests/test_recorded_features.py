"""SDK features recorded as they happened (issue 13): structured output, a user's hook
that raises, handoffs, guardrails. Each test reads the tree and the log (and the CLI's
view where it shows the feature)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    RunHooks,
    Usage,
    UserError,
    function_tool,
    input_guardrail,
    output_guardrail,
)
from agents.testing import ModelStep
from agentuse_views import show_lines
from harness import cli_environ, run_cli
from pydantic import BaseModel
from scripted import (
    call,
    final,
    message,
    model,
    read_session,
    read_turns,
    run_agent,
    run_way,
    tools_step,
)

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


@pytest.mark.parametrize("way", ["rec.run", "rec.run_streamed", "Runner.run"])
def test_a_handoff_is_in_the_tree_with_the_new_agents_model_and_tools(way: str) -> None:
    @function_tool
    def look_up(city: str) -> str:
        """Look a city up."""
        return f"{city}: sunny"

    rec = Recorder(session_name=f"handoff-{way}")
    specialist = Agent(name="Specialist", tools=[look_up], model=model(
        tools_step(call("look_up", {"city": "Paris"})), final("Paris is sunny"),
        name="gpt-4.1-mini"))
    triage = Agent(name="Triage", handoffs=[specialist], model=model(
        tools_step(call("transfer_to_specialist", {}))))
    assert asyncio.run(run_way(way, rec, triage, "weather?")) == "Paris is sunny"

    session = read_session(rec)
    [exchange] = session.messages
    kinds = [p["type"] for p in exchange.parts]
    handoff = kinds.index("agent")
    assert exchange.parts[handoff]["name"] == "Specialist"
    assert kinds[:handoff] == ["step-start", "step-finish"]  # Triage's call, then the handoff
    assert "tool" in kinds[handoff:]  # the Specialist's call comes after it
    assert exchange.info["assistant"]["modelID"] == "scripted:gpt-4.1-mini"  # who answered
    # AgentUse's own view names who answered and with which model: its `sessions show`
    # prints `Model:` from session.json's `model` (src/cli/sessions.ts:826), no `agent`
    # part (only text, tool, compaction, learning, error and log parts, :960-961), and a
    # `log` part of a level but debug as `  [LEVEL] message` (:1111-1117)
    said = "Handoff: Triage → Specialist (scripted:gpt-4.1-mini)"
    assert exchange.parts[handoff + 1] == {
        "type": "log", "level": "info", "message": said,
        "time": exchange.parts[handoff]["time"], "id": exchange.parts[handoff + 1]["id"],
        "sessionID": session.info["id"], "messageID": exchange.info["id"]}
    assert session.info["model"] == "scripted:gpt-4.1-mini"
    assert rec.session_dir is not None
    for full in (False, True):
        shown = show_lines(rec.session_dir, full=full)
        assert shown[:3] == ["Agent:       Triage", "Model:       scripted:gpt-4.1-mini",
                             "Status:      ✓ completed"]
        output = shown[shown.index("Output:") + 1:]
        assert output[0] == f"  [INFO] {said}"
        assert output[1].startswith("─── ✓ look_up (Paris)")
        assert output[-1] == "Paris is sunny"
    tools = json.loads((rec.session_dir / "tools.json").read_text())["tools"]
    assert [t["name"] for t in tools] == ["transfer_to_specialist", "look_up"]
    [turn] = read_turns(rec)
    assert [s["type"] for s in turn.steps if s["type"] in ("handoff", "agent_start")] == [
        "agent_start", "handoff", "agent_start"]
    assert turn.model == "scripted/gpt-4.1-mini"
    # sessiontape's own view of the tree alone still names the agent from its part
    rec.close()
    for path in (rec.log_path, rec.store.path):
        for leftover in path.parent.glob(path.name + "*"):
            leftover.unlink()
    shown_here = run_cli("sessions", "show", rec.session_dir.name[:26], env=cli_environ())
    assert shown_here.returncode == 0, shown_here.stderr
    assert "· agent Specialist" in shown_here.stdout and "Handoff:" not in shown_here.stdout


@output_guardrail
async def no_passwords(context: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info={"found": "password"}, tripwire_triggered=True)


@input_guardrail
async def be_polite(context: Any, agent: Any, prompt: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="rude words", tripwire_triggered=True)


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("kind", ["input", "output"])
def test_a_guardrail_tripwire_is_recorded_with_its_name_and_what_it_found(
        kind: str, streamed: bool) -> None:
    rec = Recorder(session_name=f"guardrail-{kind}-{streamed}")
    guardrails: dict[str, Any] = ({"input_guardrails": [be_polite]} if kind == "input"
                                  else {"output_guardrails": [no_passwords]})
    agent = Agent(name="A", model=model(final("the password is 123")), **guardrails)
    expected = ('input guardrail be_polite tripped: rude words' if kind == "input"
                else 'output guardrail no_passwords tripped: {"found":"password"}')
    with pytest.raises((InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered)):
        asyncio.run(run_agent(rec, agent, "tell me", streamed=streamed))
    session = read_session(rec)
    assert session.info["status"] == "error" and session.info["error"]["message"] == expected
    [turn] = read_turns(rec)
    assert turn.complete and turn.text.endswith(expected)
    # what the model wrote before the tripwire is in both layouts alike
    tree_text = "".join(p["text"] for p in session.messages[0].parts if p["type"] == "text")
    log_text = "".join(s["text"] for s in turn.steps if s["type"] == "text")
    assert tree_text == log_text


def test_a_model_that_reports_no_usage_is_recorded_with_zero_tokens() -> None:
    """A provider that sends no usage (the SDK's empty Usage): the run is unchanged, the
    model call is recorded with zero tokens and no cost, and nothing is an error."""
    rec = Recorder(session_name="no-usage")
    agent = Agent(name="A", model=model(ModelStep(output=[message("fine")], usage=Usage())))
    assert asyncio.run(run_agent(rec, agent, "hi", streamed=False)) == "fine"
    assert rec.errors == 0
    [exchange] = read_session(rec).messages
    [finish] = [p for p in exchange.parts if p["type"] == "step-finish"]
    assert finish["cost"] == 0
    assert finish["tokens"] == {"input": 0, "output": 0, "reasoning": 0,
                                "cache": {"read": 0, "write": 0}}
    [turn] = read_turns(rec)
    assert turn.complete and turn.text == "fine"


PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


@pytest.mark.parametrize(("content", "task"), [
    ([{"type": "input_image", "image_url": "https://example.com/trip/photo%201.png?w=2",
       "detail": "auto"}], "[image: photo 1.png]"),
    ([{"type": "input_image", "image_url": PNG, "detail": "high"}], "[image]"),
    ([{"type": "input_image", "file_id": "file_img1", "detail": "auto"}], "[image: file_img1]"),
    ([{"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=",
       "filename": "plan.pdf"}], "[file: plan.pdf]"),
    ([{"type": "input_text", "text": "What is this?"},
      {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "low"}],
     "What is this?\n[image: cat.png]"),
], ids=["image-url", "image-data", "image-file-id", "file", "text-and-image"])
def test_an_attachment_is_named_in_the_task(content: list[dict[str, Any]], task: str) -> None:
    """An input with no text is not a blank task: message.json's ``user.prompt.task`` names
    each attachment in its place (its file name, else the last segment of its URL, else its
    file id). AgentUse's ``sessions show`` prints the task's first line as ``Task:``
    (src/cli/sessions.ts:877-878), which was blank for an image alone."""
    rec = Recorder(session_name="attachment")
    agent = Agent(name="Viewer", model=model(final("a cat")))
    given = [{"role": "user", "content": content}]
    assert asyncio.run(run_agent(rec, agent, given, streamed=False)) == "a cat"
    [exchange] = read_session(rec).messages
    assert exchange.info["user"]["prompt"]["task"] == task
    assert rec.session_dir is not None
    assert f"Task: {task.splitlines()[0]}" in show_lines(rec.session_dir)
    [turn] = read_turns(rec)
    assert turn.user_input == given  # the log keeps the input as given
