"""What we write for failed runs, subagent calls and handoffs, against AgentUse 0.15's own
files.

Shapes AgentUse writes that a reader of its tree (its ``sessions show``, its web view)
relies on, compared key by key, key ORDER included, with the fixture files AgentUse
itself wrote (``tests/fixtures/agentuse-v0.15.0``):

- the ``error`` part of a failed exchange (the ``-failing`` session: a provider HTTP 400),
  and session.json's ``error`` object (``code, message, time``);
- the parent's tool part of a subagent call (the ``-manager`` session's
  ``subagent__helper``): ``state.output = {output, metadata: {agent, toolCalls,
  tokensUsed, duration}}`` and ``state.metadata.tokens``;
- the ``info`` ``log`` part that names a handoff (the ``-tools`` session's log parts).

Every recorded case runs the real ``agents.Runner`` with scripted models (the provider
errors: the real OpenAI Responses model on a stand-in HTTP transport) through each way a
run is recorded: ``rec.run``, ``rec.run_streamed`` and the user's own ``Runner.run`` /
``Runner.run_streamed`` with ``rec.hooks`` and ``rec.session``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    input_guardrail,
)
from agents.testing import ModelStep
from agentuse_views import error_part_line
from harness import run_cli
from scripted import (
    blocking_agent,
    call,
    final,
    model,
    parts,
    read_session,
    run_agent,
    tool_parts,
    tools_step,
    usage,
)

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import LoadedMessage, load_session, scan_sessions
from sessiontape.storage.agentuse.sink import AgentUseSink
from sessiontape.storage.agentuse.writer import AgentUseSession
from sessiontape.storage.events import (
    AgentInfo,
    ModelCallFinished,
    RunFinished,
    RunStarted,
    SubagentStarted,
    Tokens,
    ToolFinished,
    ToolStarted,
    Usage,
)
from sessiontape.storage.json_style import dumps_pretty

MODES = ["run", "streamed", "own_run", "own_streamed"]
BASE = ["id", "sessionID", "messageID"]


# -- AgentUse's own files ------------------------------------------------------------------


def _session_dir(root: Path, suffix: str) -> Path:
    return next(s.directory for s in scan_sessions(root).sessions if s.agent_name == suffix)


def _raw_parts(session_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every part file of a session's exchanges, parsed as written (key order kept)."""
    return [(path, json.loads(path.read_text()))
            for path in sorted(session_dir.glob("*/part/*.json"))]


@pytest.fixture
def failing(agentuse_fixture: Path) -> dict[str, Any]:
    """AgentUse's failed session: session.json and the error part, as written."""
    directory = _session_dir(agentuse_fixture, "failing")
    [(path, part)] = [(p, d) for p, d in _raw_parts(directory) if d["type"] == "error"]
    return {"session": json.loads((directory / "session.json").read_text()),
            "part": part, "part_text": path.read_text()}


@pytest.fixture
def manager_tool(agentuse_fixture: Path) -> dict[str, Any]:
    """AgentUse's ``subagent__helper`` tool part of the ``-manager`` session, as written."""
    directory = _session_dir(agentuse_fixture, "manager")
    [part] = [d for _, d in _raw_parts(directory) if d.get("tool") == "subagent__helper"]
    return part


# -- running in each mode -----------------------------------------------------------------


async def run_in(mode: str, rec: Recorder, agent: Agent[Any], prompt: str,
                 **kwargs: Any) -> Any:
    """One recorded run, in one of :data:`MODES`; the final output."""
    if mode in ("run", "streamed"):
        return await run_agent(rec, agent, prompt, mode == "streamed", **kwargs)
    if mode == "own_run":
        result = await Runner.run(agent, prompt, hooks=rec.hooks, session=rec.session, **kwargs)
        return result.final_output
    streamed = Runner.run_streamed(agent, prompt, hooks=rec.hooks, session=rec.session, **kwargs)
    async for _ in streamed.stream_events():
        pass
    return streamed.final_output


PROVIDER_MESSAGE = "fixture: this request is rejected on purpose (simulated provider 400)"


def provider_body(message: str, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None,
                                 "code": None}}, separators=(",", ":")).encode()


def provider_model(status: int, body: bytes) -> OpenAIResponsesModel:
    """The real OpenAI Responses model whose HTTP calls all get ``status`` and ``body``
    (a stand-in transport: nothing leaves the process); status 0: they time out."""
    def handler(request: httpx2.Request) -> httpx2.Response:
        if status == 0:
            raise httpx2.ReadTimeout("no answer in time", request=request)
        return httpx2.Response(status, content=body,
                               headers={"content-type": "application/json"})

    client = openai.AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1",
                                max_retries=0,
                                http_client=httpx2.AsyncClient(
                                    transport=httpx2.MockTransport(handler)))
    return OpenAIResponsesModel("gpt-4.1", client)


@function_tool(failure_error_function=None)
def fragile(x: int) -> str:
    """A tool whose exception fails the run (no failure function)."""
    raise ValueError("fragile broke")


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@input_guardrail
def refuse_everything(context: Any, agent: Any, user_input: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="refused", tripwire_triggered=True)


# Each failure: the agent, the runner keywords, and what the error part says.
FAILURES: dict[str, dict[str, Any]] = {
    "provider_400": {
        "agent": lambda: Agent(name="A", model=provider_model(400,
                                                              provider_body(PROVIDER_MESSAGE))),
        "code": "EXECUTION_ERROR", "message": PROVIDER_MESSAGE, "status": 400,
        "detail": provider_body(PROVIDER_MESSAGE).decode(), "type": "BadRequestError"},
    "provider_401": {
        "agent": lambda: Agent(name="A", model=provider_model(
            401, provider_body("Incorrect API key provided", "invalid_api_key"))),
        "code": "AUTH_ERROR", "message": "Incorrect API key provided", "status": 401,
        "detail": provider_body("Incorrect API key provided", "invalid_api_key").decode(),
        "type": "AuthenticationError"},
    "provider_timeout": {
        "agent": lambda: Agent(name="A", model=provider_model(0, b"")),
        "code": "TIMEOUT", "message": "Request timed out.", "status": None,
        "detail": "APITimeoutError: Request timed out.\nCaused by ReadTimeout: no answer in time",
        "type": "APITimeoutError"},
    "model_error": {
        "agent": lambda: Agent(name="A", model=model(ModelStep(
            error=RuntimeError("the model is down")))),
        "code": "EXECUTION_ERROR", "message": "the model is down", "status": None,
        "detail": "RuntimeError: the model is down", "type": "RuntimeError"},
    "max_turns": {
        "agent": lambda: Agent(name="A", tools=[add], model=model(
            tools_step(call("add", {"a": 1, "b": 2})), final("never"))),
        "kwargs": {"max_turns": 1},
        "code": "EXECUTION_ERROR", "message": "Max turns (1) exceeded", "status": None,
        "detail": "MaxTurnsExceeded: Max turns (1) exceeded", "type": "MaxTurnsExceeded"},
    "tool_error": {
        "agent": lambda: Agent(name="A", tools=[fragile], model=model(
            tools_step(call("fragile", {"x": 1})), final("never"))),
        "code": "EXECUTION_ERROR", "message": "Error running tool fragile: fragile broke",
        "status": None, "type": "UserError",
        "detail": "UserError: Error running tool fragile: fragile broke\n"
                  "Caused by ValueError: fragile broke"},
    "guardrail": {
        "agent": lambda: Agent(name="A", input_guardrails=[refuse_everything],
                               model=model(final("never"))),
        "code": "EXECUTION_ERROR",
        "message": "input guardrail refuse_everything tripped: refused",
        "status": None, "type": "InputGuardrailTripwireTriggered",
        "detail": "InputGuardrailTripwireTriggered: input guardrail refuse_everything "
                  "tripped: refused"},
}


def run_failing(mode: str, case: dict[str, Any], name: str) -> Recorder:
    """Record a run that fails as ``case`` says; the run's own exception reaches us."""
    rec = Recorder(session_name=name)
    with pytest.raises(Exception) as raised:
        asyncio.run(run_in(mode, rec, case["agent"](), "go", **case.get("kwargs", {})))
    assert type(raised.value).__name__ == case["type"]
    assert rec.errors == 0
    return rec


def check_error_part(msg: LoadedMessage, session: dict[str, Any], fixture: dict[str, Any],
                     case: dict[str, Any]) -> dict[str, Any]:
    """The exchange's last part is an error part shaped exactly like AgentUse's."""
    part = msg.parts[-1]
    fixture_part = fixture["part"]
    # AgentUse's keys in AgentUse's order; statusCode only when there is one (AgentUse
    # omits it, never writes null)
    expected_keys = [k for k in fixture_part if k != "statusCode" or case["status"] is not None]
    assert list(part) == expected_keys
    assert list(part["time"]) == list(fixture_part["time"]) == ["start"]
    assert part["type"] == "error" and part["source"] == fixture_part["source"] == "agent"
    assert (part["code"], part["message"], part["detail"]) == (
        case["code"], case["message"], case["detail"])
    assert part.get("statusCode") == case["status"]
    for key in expected_keys:  # the same JSON types as AgentUse's
        assert type(part[key]) is type(fixture_part[key]), key
    assert [p for p in msg.parts if p["type"] == "error"] == [part]
    # the session's error: AgentUse's order, the same code, message and time
    error = session["error"]
    assert list(error)[:2] == list(fixture["session"]["error"])[:2] == ["code", "message"]
    assert list(error)[-1] == list(fixture["session"]["error"])[-1] == "time"
    assert (error["code"], error["message"]) == (case["code"], case["message"])
    assert error["time"] == part["time"]["start"] == session["time"]["updated"]
    assert "completed" not in msg.info["time"]
    return part


# -- 1. the error part of a failed run ------------------------------------------------------


def test_the_error_part_has_agentuses_bytes(failing: dict[str, Any], tmp_path: Path) -> None:
    """Written from the fixture's values, our error part is AgentUse's file byte for byte
    (ids aside)."""
    fixture_part = failing["part"]
    session = AgentUseSession.create(tmp_path, "failing", model="anthropic:claude-haiku-4-5",
                                     project_root="/home/dev/proj", cwd="/home/dev/proj")
    message = session.add_message("SCENARIO=fail")
    ours = message.add_error(fixture_part["message"], code=fixture_part["code"],
                             detail=fixture_part["detail"],
                             status_code=fixture_part["statusCode"],
                             at=fixture_part["time"]["start"])
    expected = dict(fixture_part, id=ours.id, sessionID=session.id, messageID=message.id)
    assert ours.path.read_bytes() == dumps_pretty(expected)
    assert dumps_pretty(fixture_part) == failing["part_text"].encode()  # the check is fair


def test_an_error_part_without_status_or_detail_omits_them(tmp_path: Path) -> None:
    session = AgentUseSession.create(tmp_path, "a", model="openai:gpt-4.1",
                                     project_root="/p", cwd="/p")
    message = session.add_message("x")
    part = message.add_error("boom", code="EXECUTION_ERROR", detail="", at=5)
    assert json.loads(part.path.read_text()) == {
        "type": "error", "source": "agent", "message": "boom", "code": "EXECUTION_ERROR",
        "time": {"start": 5}, "id": part.id, "sessionID": session.id, "messageID": message.id}
    long = message.add_error("boom", detail="x" * 5000, at=6)
    assert json.loads(long.path.read_text())["detail"] == "x" * 4000


def test_the_session_error_has_agentuses_key_order(failing: dict[str, Any],
                                                   tmp_path: Path) -> None:
    session = AgentUseSession.create(tmp_path, "a", model="openai:gpt-4.1",
                                     project_root="/p", cwd="/p")
    session.set_status("error", at=7, error={"message": "boom", "code": "TIMEOUT"})
    written = json.loads((session.directory / "session.json").read_text())
    assert list(written["error"]) == list(failing["session"]["error"]) == [
        "code", "message", "time"]
    assert written["error"] == {"code": "TIMEOUT", "message": "boom", "time": 7}
    # a provider's error: AgentUse's {code, message, statusCode, url, detail, time}
    session.set_status("error", at=8, error={"code": "EXECUTION_ERROR", "message": "bad",
                                             "statusCode": 400, "url": "http://x/v1",
                                             "detail": "{}", "time": 1})
    written = json.loads((session.directory / "session.json").read_text())
    assert list(written["error"]) == ["code", "message", "statusCode", "url", "detail", "time"]
    assert written["error"]["time"] == 8 == written["time"]["updated"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", list(FAILURES))
def test_a_failed_run_writes_agentuses_error_part(kind: str, mode: str,
                                                  failing: dict[str, Any]) -> None:
    case = FAILURES[kind]
    rec = run_failing(mode, case, f"{kind}-{mode}")
    session = read_session(rec)
    assert session.info["status"] == "error"
    [msg] = session.messages
    part = check_error_part(msg, session.info, failing, case)
    error = session.info["error"]
    if case["status"] is not None:
        # the provider's status, URL and body, as AgentUse puts them in session.json
        assert list(error) == ["code", "message", "statusCode", "url", "detail", "time"]
        assert error["statusCode"] == case["status"]
        assert error["url"] == "http://127.0.0.1:9/v1/responses"
        assert error["detail"] == case["detail"]
        assert list(part) == list(failing["part"])  # exactly the fixture's keys
        assert error_part_line(part) == f"✗ Run error ({case['code']}): " \
                                          f"HTTP {case['status']}: {case['detail']}"
    else:
        assert list(error) == list(failing["session"]["error"])
        assert error_part_line(part) == f"✗ Run error ({case['code']}): {case['detail']}"
    assert msg.info["assistant"]["error"] == {"message": case["message"], "type": case["type"]}


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_run_writes_an_error_part(mode: str, failing: dict[str, Any]) -> None:
    agent, started = blocking_agent(f"c_wait_{mode}")
    rec = Recorder(session_name=f"cancelled-{mode}")

    async def main() -> None:
        task = asyncio.ensure_future(run_in(mode, rec, agent, "hi"))
        await asyncio.wait_for(started.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    session = read_session(rec)
    [msg] = session.messages
    case = {"code": "USER_STOPPED", "message": "the run was cancelled", "status": None,
            "detail": "CancelledError: the run was cancelled"}
    part = check_error_part(msg, session.info, failing, case)
    # the tool call the cancellation cut short was closed first: the error part is last
    [tool] = parts(msg, "tool")
    assert tool["state"]["status"] == "error" and tool["id"] < part["id"]
    assert error_part_line(part) == \
        "✗ Run error (USER_STOPPED): CancelledError: the run was cancelled"


def test_a_provider_body_with_a_secret_is_redacted() -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 5
    body = provider_body(f"key {secret} is revoked")
    rec = Recorder(session_name="redacted-provider-error", redact=True)
    with pytest.raises(openai.BadRequestError):
        asyncio.run(rec.run(Agent(name="A", model=provider_model(400, body)), "hi"))
    session = read_session(rec)
    part = session.messages[0].parts[-1]
    for text in (part["message"], part["detail"], session.info["error"]["detail"],
                 session.info["error"]["message"]):
        assert secret not in text and "[REDACTED:openai_key]" in text


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_subagent_has_its_own_error_part(mode: str, failing: dict[str, Any]) -> None:
    helper = Agent(name="Helper", tools=[add], model=model(
        tools_step(call("add", {"a": 1, "b": 1}, "c_sub"), u=usage(6, 2)),
        ModelStep(error=RuntimeError("helper down"))))
    agent = Agent(name="Main", tools=[helper.as_tool("ask_helper", "Ask.")], model=model(
        tools_step(call("ask_helper", {"input": "x"}, "c_h")), final("carried on")))
    rec = Recorder(session_name=f"subagent-fails-{mode}")
    assert asyncio.run(run_in(mode, rec, agent, "go")) == "carried on"
    session = read_session(rec)
    assert session.info["status"] == "completed" and "error" not in session.info
    assert parts(session.messages[0], "error") == []  # the parent's run did not fail
    [child] = session.subagents
    [child_msg] = child.messages
    check_error_part(child_msg, child.info, failing, {
        "code": "EXECUTION_ERROR", "message": "helper down", "status": None,
        "detail": "RuntimeError: helper down"})
    # the parent's tool part: error, with the child's tokens as AgentUse's metadata.tokens
    state = tool_parts(session.messages[0])["c_h"]["state"]
    assert list(state) == ["status", "input", "error", "time", "metadata"]
    assert state["error"] == "RuntimeError: helper down"
    assert list(state["metadata"]) == ["tokens", "sessionID", "agent", "path"]
    assert state["metadata"]["tokens"] == 8 and state["metadata"]["sessionID"] == child.id


# -- 2. the parent's tool part of a subagent call -------------------------------------------


def subagent_agents() -> tuple[Agent[Any], Agent[Any]]:
    helper = Agent(name="Helper", instructions="Count.", tools=[add], model=model(
        tools_step(call("add", {"a": 2, "b": 2}, "c_sub_add"), u=usage(470, 8, cached=120)),
        final("There are 4 entries.", usage(478, 10, cached=128))))
    agent = Agent(name="Manager", tools=[helper.as_tool("subagent__helper", "The helper.")],
                  model=model(tools_step(call("subagent__helper", {"input": "Count the files."},
                                              "c_helper"), u=usage(100, 10)),
                              final("The helper counted.", usage(120, 8))))
    return helper, agent


def check_subagent_part(tool: dict[str, Any], fixture: dict[str, Any]) -> dict[str, Any]:
    """Our subagent tool part has AgentUse's shape, key order included; its values."""
    assert list(tool) == list(fixture)
    state, fixture_state = tool["state"], fixture["state"]
    assert list(state) == list(fixture_state) == [
        "status", "input", "output", "time", "metadata"]
    assert list(state["output"]) == list(fixture_state["output"]) == ["output", "metadata"]
    summary, fixture_summary = state["output"]["metadata"], fixture_state["output"]["metadata"]
    assert list(summary) == list(fixture_summary) == [
        "agent", "toolCalls", "tokensUsed", "duration"]
    assert [list(c) for c in summary["toolCalls"]] == \
        [list(c) for c in fixture_summary["toolCalls"]] == [["tool", "args"]]
    for key in summary:
        assert type(summary[key]) is type(fixture_summary[key]), key
    assert list(state["time"]) == list(fixture_state["time"])
    # AgentUse's {tokens} first; then ours, which link the part to the child's session
    assert list(state["metadata"])[:1] == list(fixture_state["metadata"]) == ["tokens"]
    assert list(state["metadata"])[1:] == ["sessionID", "agent", "path"]
    assert state["metadata"]["tokens"] == summary["tokensUsed"]
    return summary


@pytest.mark.parametrize("mode", MODES)
def test_a_subagent_tool_part_has_agentuses_metadata(mode: str,
                                                     manager_tool: dict[str, Any]) -> None:
    _, agent = subagent_agents()
    rec = Recorder(session_name=f"subagent-metadata-{mode}")
    assert asyncio.run(run_in(mode, rec, agent, "Ask the helper")) == "The helper counted."
    assert rec.errors == 0
    session = read_session(rec)
    tool = tool_parts(session.messages[0])["c_helper"]
    summary = check_subagent_part(tool, manager_tool)
    [child] = session.subagents
    assert tool["state"]["output"]["output"] == "There are 4 entries."
    assert summary["agent"] == "Helper" == child.info["agent"]["name"]
    assert summary["toolCalls"] == [{"tool": "add", "args": {"a": 2, "b": 2}}]
    # the child's own calls, input + output (cached input is part of input), as AgentUse's
    # usage.totalTokens; the same number as the child's message.json
    child_tokens = child.messages[0].info["assistant"]["tokens"]
    assert summary["tokensUsed"] == child_tokens["input"] + child_tokens["output"] == 966
    # from the child's start to its end: its session's created and last update
    assert summary["duration"] == child.info["time"]["updated"] - child.info["time"]["created"]
    assert tool["state"]["metadata"]["sessionID"] == child.id


def test_a_subagent_without_tool_calls_has_no_tool_calls_key(
        manager_tool: dict[str, Any]) -> None:
    helper = Agent(name="Helper", model=model(final("hi", usage(3, 1))))
    agent = Agent(name="Main", tools=[helper.as_tool("ask", "Ask.")], model=model(
        tools_step(call("ask", {"input": "x"}, "c_ask")), final("done")))
    rec = Recorder(session_name="subagent-no-calls")
    assert asyncio.run(rec.run(agent, "go")).final_output == "done"
    state = tool_parts(read_session(rec).messages[0])["c_ask"]["state"]
    # AgentUse: `toolCalls: calls.length > 0 ? calls : undefined`, which JSON leaves out
    assert state["output"]["metadata"] == {"agent": "Helper", "tokensUsed": 4,
                                           "duration": state["output"]["metadata"]["duration"]}
    assert list(state["output"]["metadata"]) == [
        k for k in manager_tool["state"]["output"]["metadata"] if k != "toolCalls"]


def test_a_subagent_that_used_no_tokens_has_no_tokens_metadata() -> None:
    helper = Agent(name="Helper", model=model(final("free", usage(0, 0))))
    agent = Agent(name="Main", tools=[helper.as_tool("ask", "Ask.")], model=model(
        tools_step(call("ask", {"input": "x"}, "c_free")), final("done")))
    rec = Recorder(session_name="subagent-no-tokens")
    asyncio.run(rec.run(agent, "go"))
    state = tool_parts(read_session(rec).messages[0])["c_free"]["state"]
    assert state["output"]["metadata"]["tokensUsed"] == 0
    assert list(state["metadata"]) == ["sessionID", "agent", "path"]  # AgentUse: tokens && ...


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
def test_nested_subagents_each_report_their_own_run(streamed: bool,
                                                    manager_tool: dict[str, Any]) -> None:
    leaf = Agent(name="Leaf", tools=[add], model=model(
        tools_step(call("add", {"a": 1, "b": 1}, "c_leaf_add"), u=usage(3, 1)),
        final("leaf says 2", usage(4, 1))))
    middle = Agent(name="Middle", tools=[leaf.as_tool("ask_leaf", "Ask the leaf.")], model=model(
        tools_step(call("ask_leaf", {"input": "1+1"}, "c_leaf"), u=usage(5, 2)),
        final("middle relays 2", usage(6, 2))))
    top = Agent(name="Top", tools=[middle.as_tool("ask_middle", "Ask the middle.")],
                model=model(tools_step(call("ask_middle", {"input": "go"}, "c_middle"),
                                       u=usage(10, 3)),
                            final("all done", usage(11, 3))))
    rec = Recorder(session_name=f"nested-metadata-{streamed}")
    assert asyncio.run(run_agent(rec, top, "start", streamed)) == "all done"
    session = read_session(rec)
    [mid] = session.subagents
    [lf] = mid.subagents
    top_tool = tool_parts(session.messages[0])["c_middle"]
    mid_tool = tool_parts(mid.messages[0])["c_leaf"]
    top_summary = check_subagent_part(top_tool, manager_tool)
    mid_summary = check_subagent_part(mid_tool, manager_tool)
    # each summary is that subagent's own run: its own calls and tokens, not its children's
    assert top_summary["agent"] == "Middle" and mid_summary["agent"] == "Leaf"
    assert top_summary["toolCalls"] == [{"tool": "ask_leaf", "args": {"input": "1+1"}}]
    assert mid_summary["toolCalls"] == [{"tool": "add", "args": {"a": 1, "b": 1}}]
    assert (top_summary["tokensUsed"], mid_summary["tokensUsed"]) == (15, 9)
    assert top_summary["duration"] >= mid_summary["duration"]
    assert (top_tool["state"]["metadata"]["sessionID"],
            mid_tool["state"]["metadata"]["sessionID"]) == (mid.id, lf.id)


def test_a_summary_that_arrives_after_the_tool_part_closed_is_still_written(
        tmp_path: Path) -> None:
    """The sink, fed the events directly: if the parent's tool call were recorded as ended
    before the nested run's end, the summary still reaches its tool part."""
    sink = AgentUseSink(tmp_path / "01KB0000000000000000000000-main", "/p", "/p")
    main = AgentInfo(name="Main", model="openai:gpt-4.1")
    helper = AgentInfo(name="Helper", model="openai:gpt-4.1")
    for event in (
        RunStarted("root", 100, main, "go", "go"),
        ToolStarted("root", 110, "Main", "c_1", "ask", '{"input": "x"}'),
        SubagentStarted("root", 120, "c_1", "child", helper, "x"),
        ToolStarted("child", 130, "Helper", "c_2", "add", '{"a": 1}'),
        ToolFinished("child", 140, "Helper", "c_2", "add", "1"),
        ModelCallFinished("child", 150, "Helper", "openai:gpt-4.1",
                          Usage(Tokens(input=7, output=3))),
        ToolFinished("root", 160, "Main", "c_1", "ask", "helped"),  # before the child ends
        RunFinished("child", 170, "helped", "openai:gpt-4.1"),
        RunFinished("root", 180, "done", "openai:gpt-4.1"),
    ):
        sink.handle(event)
    sink.flush()
    session = load_session(tmp_path / "01KB0000000000000000000000-main")
    state = tool_parts(session.messages[0])["c_1"]["state"]
    assert list(state) == ["status", "input", "output", "time", "metadata"]
    assert state["output"] == {"output": "helped", "metadata": {
        "agent": "Helper", "toolCalls": [{"tool": "add", "args": {"a": 1}}],
        "tokensUsed": 10, "duration": 50}}
    assert state["time"] == {"start": 110, "end": 160}
    assert state["metadata"]["tokens"] == 10


# -- 3. the log part that names a handoff --------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_handoff_log_part_has_agentuses_shape(mode: str, agentuse_fixture: Path) -> None:
    """The handoff's ``log`` part has the keys, key order and JSON types of the ``info``
    log parts AgentUse writes (its ``-tools`` session; ``LogPart``,
    src/session/types.ts:391-401), so that its ``sessions show`` prints it as
    ``  [INFO] message`` (src/cli/sessions.ts:1111-1117)."""
    fixture = next(d for _, d in _raw_parts(_session_dir(agentuse_fixture, "tools"))
                   if d["type"] == "log" and d["level"] == "info")
    closer = Agent(name="Closer", model=model(final("closed"), name="gpt-4.1-mini"))
    opener = Agent(name="Opener", handoffs=[closer], model=model(
        tools_step(call("transfer_to_closer", {}))))
    rec = Recorder(session_name=f"handoff-log-{mode}")
    assert asyncio.run(run_in(mode, rec, opener, "close it")) == "closed"
    assert rec.session_dir is not None
    [log] = [d for _, d in _raw_parts(rec.session_dir) if d["type"] == "log"]
    assert list(log) == list(fixture) == ["type", "level", "message", "time", *BASE]
    assert list(log["time"]) == list(fixture["time"]) == ["start"]
    for key in fixture:
        assert type(log[key]) is type(fixture[key]), key
    assert (log["level"], log["message"]) == (
        "info", "Handoff: Opener → Closer (scripted:gpt-4.1-mini)")


# -- our own readers -------------------------------------------------------------------------


def test_sessions_show_reads_the_error_part_and_the_subagent_part() -> None:
    _, agent = subagent_agents()
    failing_agent = Agent(name="Manager", model=provider_model(400,
                                                               provider_body(PROVIDER_MESSAGE)))

    async def main() -> Recorder:
        rec = Recorder(session_name="show-fidelity")
        await rec.run(agent, "Ask the helper")
        with pytest.raises(openai.BadRequestError):
            await rec.run(failing_agent, "fail now")
        return rec

    rec = asyncio.run(main())
    session = read_session(rec)
    assert [m.parts[-1]["type"] for m in session.messages] == ["step-finish", "error"]
    shown = run_cli("sessions", "show", "show-fidelity")  # turns from the replay log
    assert shown.returncode == 0, shown.stderr
    assert "There are 4 entries." in shown.stdout and PROVIDER_MESSAGE in shown.stdout

    # without its log and store, the session is shown from the AgentUse tree alone
    for path in (rec.log_path, rec.store.path):
        for leftover in path.parent.glob(path.name + "*"):
            leftover.unlink()
    assert rec.session_dir is not None
    session_id = rec.session_dir.name[:26]
    shown = run_cli("sessions", "show", session_id)
    assert shown.returncode == 0, shown.stderr
    assert "There are 4 entries." in shown.stdout  # the subagent's output object, as text
    assert PROVIDER_MESSAGE in shown.stdout and "HTTP 400" in shown.stdout
    as_json = run_cli("sessions", "show", session_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    written = json.loads(as_json.stdout)
    error_parts = [p for turn in written["turns"] for p in turn.get("parts", [])
                   if p.get("type") == "error"]
    assert [(p["code"], p["statusCode"]) for p in error_parts] == [("EXECUTION_ERROR", 400)]
