"""A replay log as lines for a terminal: ``user>``/``agent>`` lines, tool calls dimmed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from storage.log_reader import Turn

__all__ = ["input_text", "render_turns", "short"]

DIM, RESET = "\x1b[2m", "\x1b[0m"
TOOL_RESULT_CHARS = 120


def short(text: Any, limit: int = TOOL_RESULT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def input_text(user_input: Any) -> str:
    """A run's input (a string, or a list of input items) as one line of text."""
    if isinstance(user_input, str):
        return user_input
    if isinstance(user_input, list):
        parts = []
        for item in user_input:
            content = item.get("content", "") if isinstance(item, dict) else item
            if isinstance(content, list):  # content parts: [{"type":"input_text","text":...}]
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            parts.append(str(content))
        return " ".join(parts)
    return "" if user_input is None else str(user_input)


def render_turns(turns: Iterable[Turn], *, color: bool = False, steps: bool = True) -> Iterator[str]:
    """Yield the lines of a transcript; ``steps`` adds tool calls and handoffs (dimmed)."""
    dim, reset = (DIM, RESET) if color else ("", "")
    for turn in turns:
        yield f"user> {input_text(turn.user_input)}"
        if steps:
            for step in turn.steps:
                kind = step.get("type")
                if kind == "agent_tool_start":
                    yield (f"{dim}  · {step.get('agentName')} calls {step.get('toolName')}"
                           f"({short(step.get('toolArgumentsStr', ''), 80)}){reset}")
                elif kind == "agent_tool_end":
                    yield f"{dim}    ← {step.get('toolName')}: {short(step.get('result', ''))}{reset}"
                elif kind == "handoff":
                    yield f"{dim}  · handoff {step.get('agentName')} → {step.get('toAgentName')}{reset}"
        model = f"({turn.model}) " if turn.model else ""
        suffix = "" if turn.complete else f" {dim}[incomplete]{reset}"
        yield f"agent> {model}{turn.text}{suffix}"
