"""SDK callbacks -> recorder events. Each hook builds one event and queues it.

A :class:`RecorderHooks` is bound to one scope of a recorded run (the
conversation's run or a nested subagent run). Hooks never raise: an error
is reported to the recorder (and re-raised only in strict mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents import Agent, ModelResponse, RunContextWrapper, RunHooks, Tool
from agents.tool_context import ToolContext

from sessiontape.storage.events import (
    AgentEnded,
    AgentStarted,
    Event,
    Handoff,
    ModelCallFinished,
    ModelCallStarted,
    ToolFinished,
    ToolStarted,
)
from sessiontape.storage.ids import new_ulid
from sessiontape.storage.times import now_ms

from .describe import (
    agent_info,
    is_mcp_tool,
    note_tool_failure,
    response_content,
    response_usage,
    take_tool_failure,
    tool_output,
    watch_mcp_servers,
)
from .pricing import PriceTable
from .sdk_compat import formatter_misses_exceptions, watch_handled_errors
from .writer import WRITER

if TYPE_CHECKING:
    from .scope import RunScope

__all__ = ["ModelResponded", "RecorderHooks", "model_call_finished"]


@dataclass(frozen=True)
class ModelResponded(Event):
    """``on_llm_end`` as it came: the response is read on the writer thread
    (:func:`model_call_finished`, in ``Recorder.prepare``), not on the event loop."""

    agent_name: str
    model: str
    response: Any  # the SDK's ModelResponse
    streamed: bool


def model_call_finished(event: ModelResponded, prices: PriceTable) -> ModelCallFinished:
    """The model call's reasoning, texts, tokens and cost, read off its response."""
    reasoning, texts = response_content(event.response)
    return ModelCallFinished(event.scope, event.at, agent_name=event.agent_name,
                             model=event.model,
                             usage=response_usage(event.response, event.model, prices),
                             reasoning=reasoning, texts=texts, streamed=event.streamed)


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    # The SDK passes some hooks their arguments by keyword (on_handoff(context=...,
    # from_agent=..., to_agent=...)): accept both, or the call itself fails the run.
    async def hook(self: RecorderHooks, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception as exc:
            self.scope.recorder.report(exc, in_hook=True)
        if WRITER.pending > WRITER.high_water:  # the writer is far behind: let it catch up
            await WRITER.room()

    hook.__name__ = method.__name__
    hook.__doc__ = method.__doc__
    return hook


class RecorderHooks(RunHooks[Any]):
    """The ``RunHooks`` of one recorded scope."""

    def __init__(self, scope: RunScope) -> None:
        self.scope = scope

    def _emit(self, event_type: type[Event], **fields: Any) -> None:
        if self.scope.parent is None and self is self.scope.recorder.hooks:
            raise RuntimeError(
                "sessiontape: rec.hooks were called by a run that sessiontape did not start "
                "(the Agents SDK's default agent runner was replaced after sessiontape "
                "installed its own, or these hooks were used outside Runner.run/"
                "run_streamed/run_sync): this run is not recorded")
        scope = self.scope
        WRITER.submit(scope.recorder, event_type(scope=scope.id, at=now_ms(), **fields))

    @_guarded
    def on_agent_start(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        self.scope.agent = agent
        watch_mcp_servers(agent)  # an MCP tool's isError result is noted on its ToolContext
        self._emit(AgentStarted, agent_name=agent.name)

    @_guarded
    def on_agent_end(self, context: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> None:
        self._emit(AgentEnded, agent_name=agent.name)

    @_guarded
    def on_handoff(self, context: RunContextWrapper[Any], from_agent: Agent[Any],
                   to_agent: Agent[Any]) -> None:
        self._emit(Handoff, from_agent=from_agent.name, to_agent=to_agent.name,
                   target=agent_info(to_agent, self.scope.run_config, None))

    @_guarded
    def on_llm_start(self, context: RunContextWrapper[Any], agent: Agent[Any],
                     system_prompt: str | None, input_items: list[Any]) -> None:
        self.scope.settle_pending(input_items)
        self._emit(ModelCallStarted, agent_name=agent.name, model=self.scope.model_of(agent))
        self.scope.list_mcp_tools(agent)  # listed by the SDK for this turn, just before

    @_guarded
    def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any],
                   response: ModelResponse) -> None:
        model = self.scope.model_of(agent)
        self.scope.model = model
        self._emit(ModelResponded, agent_name=agent.name, model=model, response=response,
                   streamed=self.scope.streamed)

    @_guarded
    def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool) -> None:
        if isinstance(context, ToolContext):
            call_id, arguments = context.tool_call_id, context.tool_arguments
        else:  # shell, apply_patch, computer tools: no ToolContext, so no call id
            call_id, arguments = f"call_{new_ulid()}", ""
            self.scope.untracked.setdefault(tool.name, []).append(call_id)
        self.scope.open_call(call_id)
        self.scope.pending.pop(call_id, None)  # approved: it runs
        # the SDK tells no hook (nor, before 0.24, the run's tool_error_formatter) of its
        # exception
        if (agent.mcp_servers and is_mcp_tool(tool)) or formatter_misses_exceptions(tool):
            watch_handled_errors(tool, note_tool_failure)
        self._emit(ToolStarted, agent_name=agent.name, call_id=call_id, tool_name=tool.name,
                   arguments=arguments)

    @_guarded
    def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool,
                    result: Any) -> None:
        if isinstance(context, ToolContext):
            call_id = context.tool_call_id
        else:  # the id made up in on_tool_start (oldest first for the same tool)
            pending = self.scope.untracked.get(tool.name)
            call_id = pending.pop(0) if pending else ""
        failure = take_tool_failure(context)  # an MCP tool's error result or exception
        if failure is not None:
            self.scope.tool_failed(call_id, failure)
        self.scope.close_call(call_id)
        self._emit(ToolFinished, agent_name=agent.name, call_id=call_id, tool_name=tool.name,
                   output=tool_output(context, tool, result))
