"""JSON bytes exactly as the original (JavaScript) tools write them.

AgentUse writes ``JSON.stringify(x, null, 2)`` (two-space indent, no trailing
newline); skilled_crew writes ``JSON.stringify(x)`` (compact). Both print
non-ASCII as-is, integral numbers without ``.0`` and NaN/Infinity as ``null``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["CIRCULAR", "dumps_compact", "dumps_pretty", "js_values"]


CIRCULAR = "[Circular]"


def js_values(value: Any, _path: frozenset[int] = frozenset()) -> Any:
    """Return a copy of ``value`` with numbers as JavaScript would print them.

    Integral floats become ints (``1.0`` -> ``1``), non-finite floats become
    ``None``, and a container that contains itself is cut at the repeat with
    the string ``"[Circular]"`` instead of failing.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() else value
    if isinstance(value, (dict, list, tuple)):
        if id(value) in _path:
            return CIRCULAR
        inner = _path | {id(value)}
        if isinstance(value, dict):
            return {k: js_values(v, inner) for k, v in value.items()}
        return [js_values(v, inner) for v in value]
    return value


def _unknown(value: Any) -> Any:
    """Fallback for objects JSON has no form for: their ``str``."""
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _dumps(value: Any, option: int, indent: int | None) -> bytes:
    value = js_values(value)
    try:
        return orjson.dumps(value, default=_unknown, option=option)
    except (TypeError, orjson.JSONEncodeError):
        # Lone surrogates or integers beyond 64 bits: the stdlib encoder
        # escapes what orjson refuses, as JSON.stringify does.
        separators = (",", ": ") if indent else (",", ":")
        text = json.dumps(value, default=_unknown, indent=indent, separators=separators,
                          ensure_ascii=True)
        return text.encode("ascii")


def dumps_pretty(value: Any) -> bytes:
    """Two-space indented JSON with no trailing newline (AgentUse files)."""
    return _dumps(value, orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, 2)


def dumps_compact(value: Any) -> bytes:
    """Compact one-line JSON (JSONL lines and SQLite item rows)."""
    return _dumps(value, orjson.OPT_NON_STR_KEYS, None)
