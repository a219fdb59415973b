"""Every private detail of the Agents SDK that sessiontape relies on, in one place.

The rest of the recorder uses the SDK's public API only. Each name here says what it
reads; :func:`missing` lists what this SDK version lacks, and a test pins it, so an SDK
upgrade that moves one of them fails one test instead of recording silently wrong.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from agents.run import AgentRunner

__all__ = ["SDK_VERSION", "cancel_requested", "missing", "run_sync_with", "stored_exception"]

SDK_VERSION = version("openai-agents")


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


def missing() -> list[str]:
    """The private SDK names this module needs that this SDK version does not have."""
    from agents.result import RunResultStreaming

    wanted = [(AgentRunner, "_run_sync_impl")]
    fields = getattr(RunResultStreaming, "__dataclass_fields__", {})
    gaps = [f"{owner.__name__}.{name}" for owner, name in wanted if not hasattr(owner, name)]
    gaps += [f"RunResultStreaming.{name}" for name in ("_stored_exception", "_cancel_mode")
             if name not in fields]
    return gaps
