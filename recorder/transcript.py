"""A replay log as lines for a terminal: ``user>``/``agent>`` lines, tool calls dimmed
(a failed one in red, with ``✗`` and its exception)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sessiontape.storage.items import clip, content_text
from sessiontape.storage.log_entries import step_failed
from sessiontape.storage.log_reader import Turn

from .console import printable

__all__ = ["describe_step", "input_text", "render_turns"]

DIM, RED, RESET = "\x1b[2m", "\x1b[31m", "\x1b[0m"


def input_text(user_input: Any) -> str:
    """A run's input (a string, or a list of input items) as one line of text."""
    if isinstance(user_input, list):
        return " ".join(content_text(item.get("content", "")) if isinstance(item, dict)
                        else str(item) for item in user_input)
    return "" if user_input is None else str(user_input)


def describe_step(step: dict[str, Any]) -> str | None:
    """One log step (``stepResult``) in words; None for kinds not worth a line."""
    kind, agent = step.get("type"), step.get("agentName")
    if kind == "agent_start":
        return f"agent {agent} starts"
    if kind == "agent_tool_start":
        arguments = clip(step.get('toolArgumentsStr', ''), 80)
        return f"{agent} calls {step.get('toolName')}({arguments})"
    if kind == "agent_tool_end":
        if step_failed(step):  # the exception; a step without one says it in its result
            error = step.get("error") or step.get("result", "")
            return f"{step.get('toolName')} ✗ {clip(str(error))}"
        return f"{step.get('toolName')} → {clip(step.get('result', ''))}"
    if kind == "handoff":
        return f"handoff {agent} → {step.get('toAgentName')}"
    if kind == "compaction":
        detail = ", ".join(str(step[k]) for k in ("reason", "summarizer") if step.get(k))
        return (f"compaction: {step.get('itemsBefore', '?')} → {step.get('itemsAfter', '?')} items"
                + (f" ({detail})" if detail else ""))
    if kind == "suspended":
        calls = [f"{c.get('toolName')}({clip(c.get('arguments', ''), 80)})"
                 for c in step.get("pending") or () if isinstance(c, dict)]
        return "waiting for approval: " + ", ".join(calls)
    return None


def render_turns(turns: Iterable[Turn], *, color: bool = False,
                 steps: bool = True) -> Iterator[str]:
    """Yield the lines of a transcript for a terminal (control characters escaped);
    ``steps`` adds agents, tool calls, handoffs and compactions (dimmed; a failed tool
    call in red)."""
    dim, red, reset = (DIM, RED, RESET) if color else ("", "", "")
    for turn in turns:
        yield f"user> {printable(input_text(turn.user_input))}"
        for step in turn.steps if steps else ():
            what = describe_step(step)
            if what is not None:
                yield f"{red if step_failed(step) else dim}  · {printable(what)}{reset}"
        model = f"({turn.model}) " if turn.model else ""
        suffix = "" if turn.complete else f" {dim}[incomplete]{reset}"
        yield f"agent> {printable(model + turn.text)}{suffix}"
