"""agentrun's output vocabulary: its ``Message``, ``ToolCall`` and ``Usage`` as JSON.

agentrun (Go) drives many agent runtimes through one ``Message``: a ``type`` (``init``,
``system``, ``text``, ``thinking``, ``tool_use``, ``tool_result``, ``error``, ``result``,
``eof``...) with ``content``, ``tool`` (``name``, ``input``, ``output``: raw JSON),
``usage``, ``stop_reason``, ``error_code``, ``resume_id``, ``init``, ``raw`` and
``timestamp``, and no other field. What makes one is here, once, for the export of a
recorded conversation (:mod:`sessiontape.storage.exports.agentrun`) and for the live
stream of the logs (:mod:`sessiontape.storage.skillet.agentrun_stream`); and what reads
one back, for ``sessiontape ingest`` (:mod:`sessiontape.ingest`).
"""

from __future__ import annotations

from typing import Any

from .events import Tokens
from .json_style import dumps_compact, loads
from .times import ms_to_iso

__all__ = ["TOOL_FAILED", "TURN_UNFINISHED", "ZERO_TIME", "add_usage", "message", "raw_json",
           "raw_text", "spent", "tool", "usage"]

ZERO_TIME = "0001-01-01T00:00:00Z"  # how Go writes a zero time.Time
# Our error codes: the tool call whose ``tool_result`` comes just before failed (agentrun's
# ``ToolCall`` has no error flag); the turn did not finish (stopped or killed).
TOOL_FAILED, TURN_UNFINISHED = "tool_failed", "turn_unfinished"
# our usage names (the log's, the read model's) as agentrun's Usage fields
_USAGE = {"inputTokens": "input_tokens", "outputTokens": "output_tokens",
          "cachedTokens": "cache_read_tokens", "reasoningTokens": "thinking_tokens",
          "cost": "cost_usd"}


def message(kind: str, at: int | str | None, source: Any = None, **fields: Any
            ) -> dict[str, Any]:
    """One ``Message``: its set fields (as Go's ``omitempty`` leaves them), ``raw`` (the
    record it was read from) and ``timestamp`` (Unix ms or ISO text), which Go always
    writes."""
    made = {"type": kind, **{k: v for k, v in fields.items() if v not in (None, "", {})}}
    if source is not None:
        made["raw"] = source
    made["timestamp"] = (at if isinstance(at, str) and at else ms_to_iso(
        at if isinstance(at, int) else None)) or ZERO_TIME
    return made


def raw_json(value: str | None) -> Any:
    """Arguments or an output as agentrun's raw JSON: the JSON they are, else a string."""
    if value is None:
        return None
    try:
        return loads(value)
    except ValueError:
        return value


def tool(name: str | None, **raw: Any) -> dict[str, Any]:
    """A ``ToolCall``: its name, and its ``input`` or ``output`` unless there is none."""
    return {"name": name or "", **{k: v for k, v in raw.items() if v is not None}}


def usage(spent: dict[str, Any]) -> dict[str, Any]:
    """A ``Usage`` of our token and cost names; as Go's ``omitempty``, only the two token
    counts are always written."""
    counted = {_USAGE[key]: spent.get(key) or 0 for key in _USAGE}
    return {k: v for k, v in counted.items() if v or k in ("input_tokens", "output_tokens")}


def add_usage(total: dict[str, Any], spent: dict[str, Any]) -> None:
    """Add ``spent`` (our token and cost names) into ``total``."""
    for key in _USAGE:
        value = spent.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value


def raw_text(value: Any) -> str:
    """agentrun's raw JSON (a tool's ``input`` or ``output``) as the text a tool call keeps:
    a string as it is, any other value as compact JSON, nothing as ``""``."""
    if value is None:
        return ""
    return value if isinstance(value, str) else dumps_compact(value).decode()


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def spent(usage: Any) -> tuple[Tokens, float | None]:
    """A ``Usage`` as our tokens, and its ``cost_usd`` (None when it has none)."""
    if not isinstance(usage, dict):
        return Tokens(), None
    cost = usage.get("cost_usd")
    tokens = Tokens(_count(usage.get("input_tokens")), _count(usage.get("output_tokens")),
                    _count(usage.get("thinking_tokens")), _count(usage.get("cache_read_tokens")),
                    _count(usage.get("cache_write_tokens")))
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
        return tokens, float(cost)
    return tokens, None
