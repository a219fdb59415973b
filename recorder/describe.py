"""What the recorder reads off SDK objects: agents, models, inputs, responses, stream events,
tool outputs; and what it notes on a tool call's ``ToolContext`` when the SDK would not tell
a hook that the call failed (an MCP tool's ``isError`` result or exception)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from agents import (
    Agent,
    FunctionTool,
    Handoff,
    ItemHelpers,
    ModelResponse,
    RawResponsesStreamEvent,
    RunConfig,
    StreamEvent,
)
from agents.mcp import MCPToolCustomDataContext, MCPUtil
from agents.models.default_models import get_default_model
from agents.tool import ToolOriginType, get_function_tool_origin
from agents.tool_context import ToolContext
from openai.types.responses import (
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseTextDeltaEvent,
)

from sessiontape.storage.events import AgentInfo, Tokens, ToolInfo, Usage
from sessiontape.storage.json_style import safe_str, value_text
from sessiontape.storage.skillet.items import content_text

from .pricing import PriceTable, split_model
from .sdk_compat import prefixed_mcp_tool_names

__all__ = ["MCPToolError", "agent_info", "agent_tools", "is_mcp_tool", "mcp_tools", "model_name",
           "note_tool_failure", "output_text_delta", "response_content", "response_usage",
           "take_tool_failure", "tool_output", "user_text", "watch_mcp_servers"]


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


# -- MCP tools, as the model sees them --------------------------------------------------


def _listed(server: Any) -> list[Any]:
    """The tools ``server`` last listed, as the SDK fetched them (``cached_tools``: a copy
    of the server's last ``tools/list`` answer, kept whether or not ``cache_tools_list`` is
    set; no request to the server), with a static ``tool_filter`` applied as the SDK applies
    it. A callable filter is not run here (it may await, or do anything): its server's
    tools are all listed. [] when the server has listed nothing yet."""
    try:
        tools = server.cached_tools
    except Exception:
        return []
    if not isinstance(tools, list):
        return []
    rule = getattr(server, "tool_filter", None)
    if isinstance(rule, dict):
        if "allowed_tool_names" in rule:
            tools = [t for t in tools if t.name in rule["allowed_tool_names"]]
        if "blocked_tool_names" in rule:
            tools = [t for t in tools if t.name not in rule["blocked_tool_names"]]
    return tools


def _prefixed_names(agent: Agent[Any], batches: list[tuple[int, Any, list[Any]]]
                    ) -> dict[tuple[int, int], str]:
    """The public names the SDK gives MCP tools under ``mcp_config={"include_server_in_tool_
    names": True}`` (``mcp_<server>__<tool>``, hashed on collisions), by (server index, tool
    index); the SDK's own allocation (``MCPUtil._build_prefixed_tool_name_overrides``), with
    the agent's handoff names reserved. {} (the tools' own names) if this SDK lacks it."""
    return prefixed_mcp_tool_names(batches, {_handoff_info(h).name for h in agent.handoffs})


def _mcp_tool_info(tool: Any, server: Any, strict: bool, agent: Agent[Any],
                   name: str | None) -> ToolInfo:
    """One MCP tool as the SDK hands it to the model: the ``FunctionTool`` it makes of it
    (its public name, the description it resolves, the parameters schema it sends, strict
    when ``convert_schemas_to_strict`` is set); built here from the listed tool, no I/O."""
    try:
        return _tool_info(MCPUtil.to_function_tool(tool, server, strict, agent,
                                                   tool_name_override=name))
    except Exception:
        return ToolInfo(name or str(getattr(tool, "name", "")),
                        getattr(tool, "description", None) or None)


def mcp_tools(agent: Agent[Any]) -> tuple[ToolInfo, ...]:
    """The tools of the agent's MCP servers (``mcp_servers=[...]``), as the model saw them
    in the last tool listing the SDK made: read from each server's copy of that listing,
    never by asking the server (a hook must not await or do I/O). Empty for a server that
    has not listed its tools yet (the SDK lists them at the start of each of the agent's
    turns, before ``on_llm_start``) and for one that keeps no copy (``MCPServer.cached_tools``
    is None)."""
    servers: Sequence[Any] = agent.mcp_servers
    if not servers:
        return ()
    config: Any = agent.mcp_config if isinstance(agent.mcp_config, dict) else {}
    strict = bool(config.get("convert_schemas_to_strict", False))
    batches = [(index, server, _listed(server)) for index, server in enumerate(servers)]
    names = (_prefixed_names(agent, batches) if config.get("include_server_in_tool_names")
             else {})
    return tuple(_mcp_tool_info(tool, server, strict, agent, names.get((index, position)))
                 for index, server, tools in batches for position, tool in enumerate(tools))


def agent_tools(agent: Agent[Any]) -> tuple[ToolInfo, ...]:
    """Every tool of the agent as ``tools.json`` lists it: its own tools, its handoffs (as
    their ``transfer_to_*`` tools), then its MCP servers' tools (last: they are known only
    once the SDK has listed them, and then join the list at its end)."""
    tools = tuple(_tool_info(t) for t in agent.tools)
    tools += tuple(_handoff_info(h) for h in agent.handoffs)
    return tools + mcp_tools(agent)


def agent_info(agent: Agent[Any], run_config: RunConfig | None,
               max_turns: int | None) -> AgentInfo:
    """The agent as ``session.json`` and ``tools.json`` describe it."""
    instructions = agent.instructions if isinstance(agent.instructions, str) else None
    return AgentInfo(name=agent.name, model=model_name(agent, run_config),
                     instructions=instructions, description=agent.handoff_description,
                     max_turns=max_turns, tools=agent_tools(agent))


# -- what a tool call gave the model, and whether it failed ------------------------------


def tool_output(context: Any, tool: Any, result: Any) -> str:
    """What the model saw of a tool's result, as one string: the ``output`` of the
    ``function_call_output`` item the SDK makes of it (the SDK's own conversion,
    ``ItemHelpers.tool_call_output_item``), as compact JSON when that is not a string. A
    structured result (an MCP tool's content, a ``ToolOutputText``/``ToolOutputImage``, a
    dict with a known ``type``) becomes a list of content items such as
    ``[{"type":"input_text","text":"5"}]``; a plain value becomes its ``str()``. A string
    result is the string itself (never copied). Never raises."""
    if isinstance(result, str):
        return result
    call = context.tool_call if isinstance(context, ToolContext) else None
    if isinstance(tool, FunctionTool) and call is not None:
        try:
            item = ItemHelpers.tool_call_output_item(
                call, result, output_json_schema=tool.output_json_schema)
            return value_text(item["output"])
        except Exception:
            pass
    return safe_str(result)


def is_mcp_tool(tool: Any) -> bool:
    """Whether ``tool`` is a ``FunctionTool`` the SDK made of an MCP server's tool."""
    try:
        origin = get_function_tool_origin(tool) if isinstance(tool, FunctionTool) else None
    except Exception:
        return False
    return origin is not None and origin.type == ToolOriginType.MCP


class MCPToolError(Exception):
    """An MCP tool answered with an error result (``isError: true``); the message is the
    result's text, which is also what the model saw."""


# The attribute under which a call's failure is noted on its ToolContext (one object per
# call, passed to the failure's source and to on_tool_end alike; gone with the call).
_FAILURE_ATTRIBUTE = "_sessiontape_tool_failure"


def note_tool_failure(context: Any, error: BaseException) -> None:
    """Note on a tool call's ``ToolContext`` that the call failed with ``error``, for
    :func:`take_tool_failure` at the call's end. Never raises."""
    if isinstance(context, ToolContext):
        with contextlib.suppress(Exception):
            setattr(context, _FAILURE_ATTRIBUTE, error)


def take_tool_failure(context: Any) -> BaseException | None:
    """The failure noted for this tool call (then forgotten), or None."""
    error = getattr(context, _FAILURE_ATTRIBUTE, None)
    if error is None:
        return None
    with contextlib.suppress(Exception):
        delattr(context, _FAILURE_ATTRIBUTE)
    return error if isinstance(error, BaseException) else None


class _ErrorResultWatch:
    """An MCP server's ``custom_data_extractor`` that notes an ``isError`` result on the
    call's ToolContext, then returns what the server's own extractor (if any) returns.

    The SDK (0.24) turns an error result into ordinary tool output, and this extractor is
    the one place it shows ``isError`` (``MCPToolCustomDataContext.is_error``). The watch
    is stateless: it serves recorded and unrecorded runs of the server alike (only a
    recorder's ``on_tool_end`` reads the note)."""

    def __init__(self, extractor: Any) -> None:
        self.extractor = extractor

    def __call__(self, context: MCPToolCustomDataContext) -> Any:
        try:
            if context.is_error:
                message = content_text(context.tool_output) or "(no content)"
                note_tool_failure(context.run_context, MCPToolError(message))
        except Exception:
            pass
        return self.extractor(context) if self.extractor is not None else None


def watch_mcp_servers(agent: Agent[Any]) -> None:
    """Have each of the agent's MCP servers note an ``isError`` result on the call's
    ToolContext (:class:`_ErrorResultWatch` wraps the server's ``custom_data_extractor``,
    once; the server's own extractor, if it had one, still runs and its result is used as
    before). No I/O, no await."""
    for server in agent.mcp_servers:
        current = getattr(server, "custom_data_extractor", None)
        if not isinstance(current, _ErrorResultWatch):
            with contextlib.suppress(Exception):
                server.custom_data_extractor = _ErrorResultWatch(current)


# An attachment's content part type, and what it is called in a task's text.
_ATTACHMENTS = {"input_image": "image", "input_file": "file", "input_audio": "audio"}


def _url_name(url: Any) -> str | None:
    """The file name at the end of a URL's path (None for a ``data:`` URL, or none)."""
    if not isinstance(url, str) or url.startswith("data:"):
        return None
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or None


def _attachment_text(part: dict[str, Any]) -> str:
    """An attachment in a task's text: ``[image: photo.png]``, ``[file: a.pdf]``; its
    file name (given, else the last segment of its URL), else its file id, else nothing
    (``[image]``: a ``data:`` URL, audio)."""
    name = part.get("filename") or _url_name(part.get("image_url") or part.get("file_url")) \
        or part.get("file_id")
    kind = _ATTACHMENTS[part["type"]]
    return f"[{kind}: {name}]" if isinstance(name, str) and name else f"[{kind}]"


def user_text(user_input: Any) -> str:
    """The run's input as one string (message.json's task): the text of its messages, each
    attachment named in its place (``[image: photo.png]``), so that an input with no text
    is not a blank task."""
    if isinstance(user_input, str):
        return user_input
    texts = []
    for item in user_input if isinstance(user_input, list) else ():
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and "text" in part:
                    texts.append(str(part["text"]))
                elif isinstance(part, dict) and part.get("type") in _ATTACHMENTS:
                    texts.append(_attachment_text(part))
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
