"""What the recorder reads off SDK objects: agents, models, inputs, responses, stream events."""

from __future__ import annotations

from typing import Any

from agents import Agent, Handoff, ModelResponse, RawResponsesStreamEvent, RunConfig, StreamEvent
from agents.models.default_models import get_default_model
from openai.types.responses import (
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseTextDeltaEvent,
)

from sessiontape.storage.events import AgentInfo, Tokens, ToolInfo, Usage

from .pricing import PriceTable, split_model

__all__ = ["agent_info", "model_name", "output_text_delta", "response_content", "response_usage",
           "user_text"]


def _model_object_name(model: Any) -> str:
    module = type(model).__module__
    if module.startswith("agents.models.openai"):
        provider = "openai"
    elif "litellm" in module:
        provider = "litellm"
    else:
        provider = type(model).__name__.lower().removesuffix("model") or "custom"
    name = getattr(model, "model", None)
    return f"{provider}:{name if isinstance(name, str) and name else 'default'}"


def model_name(agent: Agent[Any], run_config: RunConfig | None) -> str:
    """The model an agent runs on, as ``provider:model`` (``openai:gpt-4.1``)."""
    model = run_config.model if run_config is not None and run_config.model else agent.model
    if model is None:
        model = get_default_model()
    if isinstance(model, str):
        provider, name = split_model(model)
        return f"{provider}:{name}"
    return _model_object_name(model)


def _tool_info(tool: Any) -> ToolInfo:
    schema = getattr(tool, "params_json_schema", None)
    return ToolInfo(str(getattr(tool, "name", type(tool).__name__)),
                    getattr(tool, "description", None) or None,
                    schema if isinstance(schema, dict) else None)


def _handoff_info(handoff: Any) -> ToolInfo:
    if isinstance(handoff, Handoff):
        return ToolInfo(handoff.tool_name, handoff.tool_description or None,
                        handoff.input_json_schema or None)
    return ToolInfo(Handoff.default_tool_name(handoff), Handoff.default_tool_description(handoff))


def agent_info(agent: Agent[Any], run_config: RunConfig | None,
               max_turns: int | None) -> AgentInfo:
    """The agent as ``session.json`` and ``tools.json`` describe it."""
    tools = tuple(_tool_info(t) for t in agent.tools)
    tools += tuple(_handoff_info(h) for h in agent.handoffs)
    instructions = agent.instructions if isinstance(agent.instructions, str) else None
    return AgentInfo(name=agent.name, model=model_name(agent, run_config),
                     instructions=instructions, description=agent.handoff_description,
                     max_turns=max_turns, tools=tools)


def user_text(user_input: Any) -> str:
    """The run's input as one string: the text of its user messages."""
    if isinstance(user_input, str):
        return user_input
    texts = []
    for item in user_input if isinstance(user_input, list) else ():
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(c.get("text", "")) for c in content
                         if isinstance(c, dict) and "text" in c)
    return "\n".join(texts)


def response_usage(response: ModelResponse, model: str, prices: PriceTable) -> Usage:
    """One call's tokens (from ``response.usage``, never the run's totals) and cost."""
    usage = response.usage
    inputs, outputs = usage.input_tokens_details, usage.output_tokens_details
    tokens = Tokens(input=usage.input_tokens, output=usage.output_tokens,
                    reasoning=getattr(outputs, "reasoning_tokens", 0) or 0,
                    cache_read=getattr(inputs, "cached_tokens", 0) or 0,
                    cache_write=getattr(inputs, "cache_write_tokens", 0) or 0)
    return Usage(tokens, prices.cost(model, tokens))


def _reasoning_text(item: ResponseReasoningItem) -> str:
    """The item's summaries, else its reasoning text; "" if it has neither."""
    summary = "\n".join(s.text for s in item.summary or ())  # None if built unvalidated
    return summary or "\n".join(c.text for c in item.content or () if c.text)


def _message_text(item: ResponseOutputMessage) -> str:
    """The output text of an assistant message (refusals left out)."""
    return "".join(c.text for c in item.content if isinstance(c, ResponseOutputText))


def response_content(response: ModelResponse
                     ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The reasoning summaries and the ``(message id, text)`` pairs of a response."""
    reasoning: list[str] = []
    texts: list[tuple[str, str]] = []
    for item in response.output:
        if isinstance(item, ResponseReasoningItem):
            text = _reasoning_text(item)
            if text:
                reasoning.append(text)
        elif isinstance(item, ResponseOutputMessage):
            texts.append((item.id or "", _message_text(item)))
    return tuple(reasoning), tuple(texts)


def output_text_delta(event: StreamEvent) -> ResponseTextDeltaEvent | None:
    """The text delta inside a stream event (a raw ``response.output_text.delta``), or None."""
    data = event.data if isinstance(event, RawResponsesStreamEvent) else None
    return data if isinstance(data, ResponseTextDeltaEvent) else None
