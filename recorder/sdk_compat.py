"""Every private detail of the Agents SDK that sessiontape relies on, and every difference
between the SDK releases it supports (openai-agents 0.21 to 0.24), in one place.

The rest of the recorder uses the SDK's public API only. Each name here says what it
reads; :func:`missing` lists what this SDK version lacks, and a test pins it, so an SDK
upgrade that moves one of them fails one test instead of recording silently wrong.
``.ci/sdk-range`` runs the recorder's tests on the oldest and the newest release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from importlib.metadata import version
from typing import Any

from agents import ToolErrorFormatterArgs
from agents.run import AgentRunner

__all__ = ["FORMATTER_SEES_TOOL_EXCEPTIONS", "SDK_VERSION", "cancel_requested",
           "formatter_misses_exceptions", "missing", "prefixed_mcp_tool_names",
           "run_sync_with", "stored_exception", "watch_handled_errors"]

SDK_VERSION = version("openai-agents")

# Whether RunConfig.tool_error_formatter is given the exception of a function tool on the
# SDK's default failure function (kind "tool_exception", with the exception as ``error``):
# from 0.24 on. Before, the SDK sends the model its default message and tells no one.
FORMATTER_SEES_TOOL_EXCEPTIONS = any(f.name == "error" for f in fields(ToolErrorFormatterArgs))


def stored_exception(result: Any) -> BaseException | None:
    """The exception a streamed run ended with, kept by ``RunResultStreaming`` when its
    consumer stopped reading before the end."""
    error = getattr(result, "_stored_exception", None)
    return error if isinstance(error, BaseException) else None


def cancel_requested(result: Any) -> bool:
    """Whether ``result.cancel()`` was called on a streamed run."""
    return getattr(result, "_cancel_mode", "none") != "none"


def run_sync_with(runner: Any, starting_agent: Any, input: Any, kwargs: dict[str, Any]) -> Any:
    """``AgentRunner.run_sync`` with ``runner.run`` as the run it drives.

    The SDK's ``run_sync`` calls ``self.run`` on its own runner object, so a wrapper's
    ``run`` would be bypassed; its event-loop handling (one default loop reused across
    calls, as the SDK does) lives in ``_run_sync_impl``, which is called here with the
    wrapper as ``self``.
    """
    return AgentRunner._run_sync_impl(runner, starting_agent, input, **kwargs)


def prefixed_mcp_tool_names(batches: list[tuple[int, Any, list[Any]]],
                            reserved: set[str]) -> dict[tuple[int, int], str]:
    """The names the SDK gives MCP tools under ``include_server_in_tool_names``, by (server
    index, tool index), from its own allocation (``MCPUtil``'s private
    ``_build_prefixed_tool_name_overrides``); {} if this SDK lacks it or it fails."""
    from agents.mcp import MCPUtil

    build = getattr(MCPUtil, "_build_prefixed_tool_name_overrides", None)
    if build is None:
        return {}
    try:
        names = build(batches, reserved_names=reserved)
    except Exception:
        return {}
    return names if isinstance(names, dict) else {}


def formatter_misses_exceptions(tool: Any) -> bool:
    """Whether this SDK turns an exception of ``tool`` into the model's text without telling
    ``tool_error_formatter``: a function tool on the default failure function (its private
    ``_use_default_failure_error_function``) before 0.24. Such a tool's exceptions are heard
    through :func:`watch_handled_errors` instead, as an MCP tool's are."""
    return (not FORMATTER_SEES_TOOL_EXCEPTIONS
            and getattr(tool, "_use_default_failure_error_function", False) is True)


def watch_handled_errors(tool: Any, note: Callable[[Any, BaseException], None]) -> bool:
    """Have a ``FunctionTool``'s invoker call ``note(tool_context, exception)`` whenever it
    turns an exception of the tool into a message for the model (its failure function).

    The SDK tells ``tool_error_formatter`` of such an exception only for a tool on the
    default failure function, and only from 0.24 on (:func:`formatter_misses_exceptions`);
    the tools it makes of an MCP server's are given the agent's (or the server's) failure
    function explicitly, so an MCP tool that raises (a server that died, a transport
    error) reaches hooks as an ordinary result. The hook is the
    invoker's private ``_on_handled_error``: it gets the exception and the call's
    ToolContext after the failure function ran, and what it did before (trace, log) it
    still does. Only ``tool``'s own invoker changes (the SDK makes MCP tools afresh for
    every turn; a function tool keeps the watch, which notes on the call's ToolContext
    only). False when it cannot be done (another invoker, or already done).
    """
    invoker = getattr(tool, "on_invoke_tool", None)
    handled = getattr(invoker, "_on_handled_error", None)
    if not callable(handled) or getattr(handled, "sessiontape_note", None) is not None:
        return False

    def on_handled_error(function_tool: Any, error: Exception, input_json: str,
                         context: Any) -> None:
        note(context, error)
        handled(function_tool, error, input_json, context)

    on_handled_error.sessiontape_note = note  # type: ignore[attr-defined]
    invoker._on_handled_error = on_handled_error  # type: ignore[union-attr]
    return True


def missing() -> list[str]:
    """The private SDK names this module needs that this SDK version does not have."""
    import agents.tool
    from agents import FunctionTool
    from agents.mcp import MCPUtil
    from agents.result import RunResultStreaming

    # MCPUtil's: the names the SDK gives MCP tools with include_server_in_tool_names
    # (describe.mcp_tools, for tools.json)
    wanted = [(AgentRunner, "_run_sync_impl"), (MCPUtil, "_build_prefixed_tool_name_overrides")]
    streamed = getattr(RunResultStreaming, "__dataclass_fields__", {})
    gaps = [f"{owner.__name__}.{name}" for owner, name in wanted if not hasattr(owner, name)]
    gaps += [f"RunResultStreaming.{name}" for name in ("_stored_exception", "_cancel_mode")
             if name not in streamed]
    invoker_type = getattr(agents.tool, "_FailureHandlingFunctionToolInvoker", None)
    try:  # what the SDK wraps every MCP tool's invocation in (watch_handled_errors)
        probe = invoker_type(_never_called, _never_called)  # type: ignore[misc]
    except Exception:
        probe = None
    if not callable(getattr(probe, "_on_handled_error", None)):
        gaps.append("_FailureHandlingFunctionToolInvoker._on_handled_error")
    if not FORMATTER_SEES_TOOL_EXCEPTIONS and "_use_default_failure_error_function" not in {
            f.name for f in fields(FunctionTool)}:  # formatter_misses_exceptions, before 0.24
        gaps.append("FunctionTool._use_default_failure_error_function")
    return gaps


def _never_called(*args: Any) -> None:
    """A stand-in for the callables of :func:`missing`'s probe invoker."""
