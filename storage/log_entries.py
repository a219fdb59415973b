"""The lines of a skillet JSONL replay log, built with skilled_crew's exact key order.

A turn is one ``user_message``, zero or more ``step`` entries and one
``final_result``. Tool arguments and results are JSON *strings* in a step.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = [
    "agent_end",
    "agent_start",
    "agent_tool_end",
    "agent_tool_start",
    "final_result",
    "handoff",
    "iso_ms",
    "step",
    "text",
    "user_message",
]


def iso_ms(moment: datetime | None = None) -> str:
    """UTC ISO-8601 with milliseconds and ``Z``: ``2026-05-27T20:11:02.482Z``."""
    moment = (moment or datetime.now(timezone.utc)).astimezone(timezone.utc)
    # isoformat, not strftime: glibc's %Y does not pad years before 1000 to 4 digits.
    return moment.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def user_message(user_input: str | list[Any], timestamp: str | None = None) -> dict[str, Any]:
    """``{"kind":"user_message","userInput":...,"timestamp":...}``."""
    return {"kind": "user_message", "userInput": user_input, "timestamp": timestamp or iso_ms()}


def step(step_result: dict[str, Any], timestamp: str | None = None) -> dict[str, Any]:
    """``{"kind":"step","stepResult":{...},"timestamp":...}``."""
    return {"kind": "step", "stepResult": step_result, "timestamp": timestamp or iso_ms()}


def final_result(text: str, *, model: str | None = None, job_ids: list[str] | None = None,
                 timestamp: str | None = None) -> dict[str, Any]:
    """``{"kind":"final_result","finalResult":{"text"[,"jobIds"]},"timestamp"[,"model"]}``."""
    result: dict[str, Any] = {"text": text}
    if job_ids is not None:
        result["jobIds"] = job_ids
    entry = {"kind": "final_result", "finalResult": result, "timestamp": timestamp or iso_ms()}
    if model is not None:
        entry["model"] = model
    return entry


def agent_start(agent_name: str) -> dict[str, Any]:
    return {"type": "agent_start", "agentName": agent_name}


def agent_end(agent_name: str) -> dict[str, Any]:
    return {"type": "agent_end", "agentName": agent_name}


def agent_tool_start(agent_name: str, tool_name: str, arguments: str) -> dict[str, Any]:
    """A tool call; ``arguments`` is the raw JSON arguments string."""
    return {"type": "agent_tool_start", "agentName": agent_name, "toolName": tool_name,
            "toolArgumentsStr": arguments}


def agent_tool_end(agent_name: str, tool_name: str, result: str) -> dict[str, Any]:
    """A tool result, as a string."""
    return {"type": "agent_tool_end", "agentName": agent_name, "toolName": tool_name,
            "result": result}


def handoff(agent_name: str, to_agent_name: str) -> dict[str, Any]:
    return {"type": "handoff", "agentName": agent_name, "toAgentName": to_agent_name}


def text(chunk: str) -> dict[str, Any]:
    """Model text: one per streamed chunk, or one with the whole text."""
    return {"type": "text", "text": chunk}
