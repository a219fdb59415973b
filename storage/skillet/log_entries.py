"""The lines of a skillet JSONL replay log, built with skilled_crew's exact key order.

A turn is one ``user_message``, zero or more ``step`` entries and one
``final_result``. Tool arguments and results are JSON *strings* in a step.

A step must be of one of skilled_crew's six types (:data:`STEP_TYPES`): its ``run`` and
``chat`` replay the log before a prompt and stop at any other step type. What the log
adds beyond them goes on a line of its own ``kind``, which every skilled_crew reader
skips: a ``compaction`` line (:func:`compaction`), read back by :func:`step_of` as a
step of its turn. A step may carry keys beyond skilled_crew's, which its replay ignores:
a failed tool call's ``agent_tool_end`` adds ``status: "error"`` and ``error``
(:func:`tool_failure`, :func:`step_failed`).
"""

from __future__ import annotations

from typing import Any

from ..times import iso_ms

__all__ = [
    "FORMAT",
    "STEP_TYPES",
    "agent_end",
    "agent_start",
    "agent_tool_end",
    "agent_tool_start",
    "compaction",
    "final_result",
    "handoff",
    "model_call",
    "step",
    "step_failed",
    "step_of",
    "suspended",
    "text",
    "tool_failure",
    "user_message",
]


# The log's format, on each turn's first line (``user_message``): what a reader dispatches
# on. skilled_crew's own lines have no ``format`` key (docs/formats.md, "Format versions").
FORMAT = "sessiontape-log/1"

# What skilled_crew 1.0.11's replay (CliChatHelper.displayTurn) takes in a step.
STEP_TYPES = frozenset(("agent_start", "agent_end", "agent_tool_start", "agent_tool_end",
                        "handoff", "text"))


def user_message(user_input: str | list[Any], timestamp: str | None = None,
                 **where: Any) -> dict[str, Any]:
    """``{"kind":"user_message","userInput":...,"timestamp":...}``, then ``where``: the keys
    sessiontape adds (``format``, ``userId``, ``sessionName``, ``cwd``, ``projectRoot``,
    ``sessionId``, ``sessionDir``), which skilled_crew's readers ignore."""
    return {"kind": "user_message", "userInput": user_input, "timestamp": timestamp or iso_ms(),
            **where}


def model_call(fields: dict[str, Any], timestamp: str | None = None) -> dict[str, Any]:
    """``{"kind":"model_call",...fields,"timestamp":...}``: one model call's ``agentName``,
    ``model``, ``usage`` (``inputTokens``, ``outputTokens``, ``cachedTokens``,
    ``reasoningTokens``), ``cost`` (US dollars), ``durationMs`` and ``reasoning`` (its
    summaries). A line of its own kind, which skilled_crew's readers skip."""
    return {"kind": "model_call", **fields, "timestamp": timestamp or iso_ms()}


def step(step_result: dict[str, Any], timestamp: str | None = None) -> dict[str, Any]:
    """``{"kind":"step","stepResult":{...},"timestamp":...}``."""
    return {"kind": "step", "stepResult": step_result, "timestamp": timestamp or iso_ms()}


def compaction(fields: dict[str, Any], timestamp: str | None = None) -> dict[str, Any]:
    """``{"kind":"compaction",...fields,"timestamp":...}``: the store's history was compacted
    during the turn (``compactionId``, ``reason``, ``summarizer``, ``itemsBefore``,
    ``itemsAfter``, ``archived``)."""
    return {"kind": "compaction", **fields, "timestamp": timestamp or iso_ms()}


def suspended(pending: list[dict[str, Any]], timestamp: str | None = None) -> dict[str, Any]:
    """``{"kind":"suspended","pending":[{callId, toolName, arguments}],"timestamp":...}``: the
    run stopped to wait for a human's approval of these calls. The turn stays open (no
    ``final_result``); the resumed run's steps and ``final_result`` close it."""
    return {"kind": "suspended", "pending": pending, "timestamp": timestamp or iso_ms()}


def step_of(kind: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """The step a log line stands for: a ``step``'s ``stepResult``, a ``compaction`` or
    ``suspended`` line as a step of that type (sessiontape 0.2.0 wrote a ``compaction``
    step); None for others."""
    if kind == "step":
        result = data.get("stepResult")
        return result if isinstance(result, dict) else None
    if kind in ("compaction", "suspended"):
        return {"type": kind,
                **{key: value for key, value in data.items()
                   if key not in ("kind", "timestamp")}}
    return None


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


def agent_tool_start(agent_name: str, tool_name: str, arguments: str,
                     call_id: str | None = None) -> dict[str, Any]:
    """A tool call; ``arguments`` is the raw JSON arguments string; ``call_id`` (``callId``,
    a key skilled_crew ignores) pairs it with its end."""
    step = {"type": "agent_tool_start", "agentName": agent_name, "toolName": tool_name,
            "toolArgumentsStr": arguments}
    if call_id is not None:
        step["callId"] = call_id
    return step


def agent_tool_end(agent_name: str, tool_name: str, result: str,
                   error: str | None = None, call_id: str | None = None) -> dict[str, Any]:
    """A tool result, as a string (what the model saw), and its ``callId``. ``error``: the
    tool raised, and this is the exception (``ValueError: ...``); the step then says so
    (:func:`tool_failure`)."""
    step = {"type": "agent_tool_end", "agentName": agent_name, "toolName": tool_name,
            "result": result}
    if call_id is not None:
        step["callId"] = call_id
    if error is not None:
        step.update(tool_failure(error))
    return step


def tool_failure(error: str) -> dict[str, Any]:
    """The keys a failed call adds to its ``agent_tool_end`` step, after ``result``:
    ``{"status": "error", "error": "ValueError: ..."}`` (as an AgentUse tool part's
    ``state`` says it; skilled_crew's replay ignores keys it does not know)."""
    return {"status": "error", "error": error}


def step_failed(step: dict[str, Any]) -> bool:
    """Whether a step is a tool call that failed (``status: "error"``)."""
    return step.get("type") == "agent_tool_end" and step.get("status") == "error"


def handoff(agent_name: str, to_agent_name: str) -> dict[str, Any]:
    return {"type": "handoff", "agentName": agent_name, "toAgentName": to_agent_name}


def text(chunk: str) -> dict[str, Any]:
    """Model text: one per streamed chunk, or one with the whole text."""
    return {"type": "text", "text": chunk}
