"""One recorded run: the conversation's turn, or a nested subagent run inside it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import openai
from agents import (
    Agent,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    RunHooks,
    RunState,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
)
from agents.tool_context import ToolContext

from sessiontape.storage.events import (
    REJECTED,
    Event,
    PendingCall,
    RunFailed,
    RunFinished,
    RunStarted,
    RunSuspended,
    SubagentStarted,
    TextDelta,
    ToolFailed,
    ToolFinished,
    ToolInfo,
    ToolsListed,
    ToolStarted,
)
from sessiontape.storage.ids import new_ulid
from sessiontape.storage.json_style import safe_str, value_text
from sessiontape.storage.skillet.items import output_text
from sessiontape.storage.times import now_ms

from .describe import agent_info, mcp_tools, model_name, user_text
from .writer import Target

__all__ = ["MAX_DETAIL_CHARS", "Owner", "RunScope", "describe_failure", "failure_code"]


# The error part's and the session error's ``detail`` are cut here, as AgentUse cuts them.
MAX_DETAIL_CHARS = 4000
_MAX_CAUSES = 8  # how far an exception's ``__cause__`` chain is followed


def _api_error(error: BaseException) -> openai.APIStatusError | None:
    """The provider's HTTP error behind ``error``: itself, or one in its cause chain
    (AgentUse unwraps its AI SDK's retry wrappers and causes the same way)."""
    seen: BaseException | None = error
    for _ in range(_MAX_CAUSES):
        if seen is None:
            return None
        if isinstance(seen, openai.APIStatusError):
            return seen
        seen = seen.__cause__
    return None


def _response_body(error: openai.APIStatusError) -> str | None:
    """The provider's raw response body (cut at :data:`MAX_DETAIL_CHARS`), or None.
    Only what the client has already read: no I/O, and never an exception."""
    try:
        content = error.response.content  # raises when the body was not read
        if isinstance(content, (bytes, bytearray)) and content:
            return bytes(content[:MAX_DETAIL_CHARS * 4]).decode(
                "utf-8", "replace")[:MAX_DETAIL_CHARS]
    except Exception:
        pass
    return None


def failure_code(error: BaseException) -> tuple[str, dict[str, Any]]:
    """AgentUse's error code for an exception, and the extra fields of the session's
    ``error`` (``statusCode``, ``url``, ``detail`` of a provider's HTTP error, in
    AgentUse's order; ``detail`` is the response body)."""
    if isinstance(error, asyncio.CancelledError):
        return "USER_STOPPED", {}
    if isinstance(error, KeyboardInterrupt):
        return "USER_INTERRUPT", {}
    if isinstance(error, (TimeoutError, openai.APITimeoutError)):
        return "TIMEOUT", {}
    extra: dict[str, Any] = {}
    api = _api_error(error)
    status = api.status_code if api is not None else getattr(error, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        extra["statusCode"] = status
    if api is not None:
        with contextlib.suppress(Exception):  # no query string: it may carry a key
            extra["url"] = str(api.request.url).split("?", 1)[0]
        body = _response_body(api)
        if body:
            extra["detail"] = body
    if status in (401, 403):
        return "AUTH_ERROR", extra
    return "EXECUTION_ERROR", extra


def _guardrail_message(error: BaseException) -> str | None:
    """``input guardrail NAME tripped: OUTPUT_INFO`` for a guardrail's tripwire (the
    exception's own text names neither the guardrail nor what it found)."""
    if isinstance(error, (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered)):
        kind = "input" if isinstance(error, InputGuardrailTripwireTriggered) else "output"
        name = error.guardrail_result.guardrail.get_name()
        info: Any = error.guardrail_result.output.output_info
    elif isinstance(error, (ToolInputGuardrailTripwireTriggered,
                            ToolOutputGuardrailTripwireTriggered)):
        kind = "tool input" if isinstance(error, ToolInputGuardrailTripwireTriggered) \
            else "tool output"
        name, info = error.guardrail.get_name(), error.output.output_info
    else:
        return None
    found = value_text(info)
    return f"{kind} guardrail {name} tripped" + (f": {found}" if found else "")


def _message(error: BaseException) -> str:
    if isinstance(error, MaxTurnsExceeded):
        return error.message
    guardrail = _guardrail_message(error)
    if guardrail is not None:
        return guardrail
    if isinstance(error, asyncio.CancelledError):
        return "the run was cancelled"
    if isinstance(error, KeyboardInterrupt):
        return "the run was interrupted (Ctrl-C)"
    if isinstance(error, openai.APIStatusError):
        # The provider's own message (AgentUse's ``message``), not the client's
        # "Error code: 400 - ..." wrapper; the status and body go to statusCode and detail.
        body = error.body
        provided = body.get("message") if isinstance(body, dict) else None
        if isinstance(provided, str) and provided:
            return provided
    return safe_str(error) or type(error).__name__


def _exception_text(error: BaseException, message: str) -> str:
    """``Type: message``, then ``Caused by Type: message`` for each explicit cause:
    the ``detail`` of the error part when the provider sent no body."""
    lines = [f"{type(error).__name__}: {message}"]
    cause = error.__cause__
    for _ in range(_MAX_CAUSES):
        if cause is None:
            break
        lines.append(f"Caused by {type(cause).__name__}: {safe_str(cause)}")
        cause = cause.__cause__
    return "\n".join(lines)[:MAX_DETAIL_CHARS]


def pending_calls(items: Any) -> tuple[PendingCall, ...]:
    """The tool calls among ``items`` (the SDK's ``ToolApprovalItem``) that wait for a
    human's approval."""
    calls = []
    for item in items or ():
        call_id, name = getattr(item, "call_id", None), getattr(item, "tool_name", None)
        if isinstance(call_id, str) and isinstance(name, str):
            arguments = getattr(item, "arguments", None)
            calls.append(PendingCall(call_id, name, arguments if isinstance(arguments, str)
                                     else ""))
    return tuple(calls)


def describe_failure(error: BaseException) -> tuple[str, str, dict[str, Any], str]:
    """``(code, message, session error extras, error part detail)`` for a run's exception.

    Never raises: it runs in the runner's ``except`` clause, where an exception of ours
    would replace the run's own."""
    try:
        message = _message(error)
    except Exception:
        message = type(error).__name__
    try:
        code, extra = failure_code(error)
    except Exception:
        code, extra = "EXECUTION_ERROR", {}
    try:
        detail = extra.get("detail") or _exception_text(error, message)
    except Exception:
        detail = f"{type(error).__name__}: {message}"
    return code, message, extra, detail


class Owner(Target, Protocol):
    """What a run's scopes, their hooks and the runner need of the ``Recorder`` that owns
    them: the writer's target, and the conversation's turns and runs."""

    @property
    def hooks(self) -> RunHooks[Any]:
        """The ``rec.hooks`` a run is given to be recorded."""
        ...

    def submit(self, event: Event) -> None: ...

    def report(self, error: BaseException, *, in_hook: bool = False) -> None: ...

    def begin_run(self, streamed: bool, run_config: RunConfig | None) -> RunScope: ...

    async def end_run(self, session: Any) -> None: ...

    async def flush_after_run(self, run_failed: bool = False) -> None: ...

    def turn(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    def take_turn_now(self) -> None: ...

    def end_turn(self) -> None: ...


class RunScope:
    """The state of one recorded run; a :class:`~sessiontape.hooks.RecorderHooks` bound
    to it turns the SDK's callbacks into events."""

    def __init__(self, recorder: Owner, *, parent: RunScope | None, streamed: bool,
                 run_config: RunConfig | None) -> None:
        self.recorder = recorder
        self.id = new_ulid()
        self.parent = parent
        self.streamed = streamed
        self.run_config = run_config
        self.agent: Agent[Any] | None = None
        self.model = ""
        self.calls: dict[str, RunScope] = {}  # open tool calls of the whole tree (root only)
        self.call_id = ""  # the parent's tool call that started a nested run
        self.untracked: dict[str, list[str]] = {}  # made-up call ids of tools with no ToolContext
        self.mcp_listed: dict[str, tuple[ToolInfo, ...]] = {}  # MCP tools reported, by agent
        self.pending: dict[str, PendingCall] = {}  # a resumed run's calls awaiting a decision
        self._models: dict[int, str] = {}  # model names by agent (id), worked out once
        self.ended = False

    @property
    def root(self) -> RunScope:
        return self if self.parent is None else self.parent.root

    def submit(self, event: Event) -> None:
        self.recorder.submit(event)

    def open_call(self, call_id: str) -> None:
        self.root.calls[call_id] = self

    def close_call(self, call_id: str) -> None:
        self.root.calls.pop(call_id, None)

    def start(self, agent: Agent[Any], user_input: Any, max_turns: int | None) -> None:
        """Record the start of this run (a RunStarted, or SubagentStarted in the parent)."""
        self.agent = agent
        self.model = model_name(agent, self.run_config)
        info = agent_info(agent, self.run_config, max_turns)
        if self.parent is None and isinstance(user_input, RunState):
            # A suspended run goes on: the same exchange and turn, no new user input.
            pending = pending_calls(user_input.get_interruptions())
            self.pending = {call.call_id: call for call in pending}
            self.submit(RunStarted(self.id, now_ms(), info, None, "", resumed=True,
                                   pending=pending))
            return
        text = user_text(user_input)
        if self.parent is None:
            self.submit(RunStarted(self.id, now_ms(), info, user_input, text))
        else:
            self.submit(SubagentStarted(self.parent.id, now_ms(), self.call_id, self.id, info,
                                        text))

    def child(self, context: Any, streamed: bool, run_config: RunConfig | None) -> RunScope | None:
        """A scope for a nested run started by one of this tree's open tool calls."""
        if not isinstance(context, ToolContext):
            return None
        owner = self.root.calls.get(context.tool_call_id)
        if owner is None:
            return None
        scope = RunScope(self.recorder, parent=owner, streamed=streamed, run_config=run_config)
        scope.call_id = context.tool_call_id
        return scope

    def list_mcp_tools(self, agent: Agent[Any]) -> None:
        """The agent's MCP tools as the SDK listed them for this turn (it lists them just
        before ``on_llm_start``; read from the servers' copy, no request): a ToolsListed
        when they are new to this run or changed, so that ``tools.json`` has them."""
        if not agent.mcp_servers:
            return
        tools = mcp_tools(agent)
        if tools and self.mcp_listed.get(agent.name) != tools:
            self.mcp_listed[agent.name] = tools
            self.submit(ToolsListed(self.id, now_ms(), agent.name, tools))

    def tool_failed(self, call_id: str, error: BaseException) -> None:
        owner = self.root.calls.get(call_id, self)
        self.submit(ToolFailed(owner.id, now_ms(), call_id,
                               f"{type(error).__name__}: {safe_str(error)}"))

    def text_delta(self, item_id: str, text: str) -> None:
        name = self.agent.name if self.agent is not None else ""
        self.submit(TextDelta(self.id, now_ms(), name, item_id, text))

    def model_of(self, agent: Agent[Any]) -> str:
        """The agent's model name in this run (``provider:model``), worked out once."""
        model = self._models.get(id(agent))
        if model is None:
            model = self._models[id(agent)] = model_name(agent, self.run_config)
        return model

    def settle_pending(self, input_items: list[Any]) -> None:
        """A resumed run is about to call the model: the calls waiting for approval that
        did not run were rejected. Each is recorded as a failed call whose output is what
        the model gets for it (found among ``input_items``)."""
        if not self.pending:
            return
        outputs = {item.get("call_id"): item.get("output") for item in input_items
                   if isinstance(item, dict) and item.get("type") == "function_call_output"}
        agent = self.agent.name if self.agent is not None else ""
        for call in self.pending.values():
            if call.call_id not in outputs:
                continue
            text, at = output_text(outputs[call.call_id]), now_ms()
            self.submit(ToolStarted(self.id, at, agent_name=agent, call_id=call.call_id,
                                    tool_name=call.tool_name, arguments=call.arguments))
            self.submit(ToolFailed(self.id, at, call.call_id, f"{REJECTED}{text}"))
            self.submit(ToolFinished(self.id, at, agent_name=agent, call_id=call.call_id,
                                     tool_name=call.tool_name, output=text))
        self.pending.clear()

    def end(self, result: Any) -> None:
        """The run returned: finished, or suspended to wait for approvals."""
        interruptions = getattr(result, "interruptions", None)
        if interruptions:
            self.suspend(interruptions)
        else:
            self.finish(result.final_output)

    def suspend(self, interruptions: Any) -> None:
        if not self.ended:
            self.ended = True
            self.submit(RunSuspended(self.id, now_ms(), pending_calls(interruptions),
                                     self.model))

    def finish(self, final_output: Any) -> None:
        if not self.ended:
            self.ended = True
            self.submit(RunFinished(self.id, now_ms(), value_text(final_output), self.model))

    def fail(self, error: BaseException) -> None:
        if not self.ended:
            self.ended = True
            code, message, extra, detail = describe_failure(error)
            if self.parent is not None and self.call_id:
                # Agent.as_tool turns a failed nested run into a plain string for the model
                # through its own failure function, which bypasses tool_error_formatter:
                # the parent's tool call is marked failed here instead.
                self.submit(ToolFailed(self.parent.id, now_ms(), self.call_id,
                                       f"{type(error).__name__}: {message}"))
            self.submit(RunFailed(self.id, now_ms(), code, message, type(error).__name__,
                                  self.model, extra, detail))
