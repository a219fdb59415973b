"""A replay log as lines for a terminal: ``user>``/``agent>`` lines, tool calls dimmed
(a failed one in red, with ``✗`` and its exception); and, for ``log stream``, entries as
skillet's lines or as JSON lines (:class:`EntryFormatter`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.skillet.items import clip, input_text
from sessiontape.storage.skillet.log_entries import step_failed, step_of
from sessiontape.storage.skillet.log_reader import LogEntry, Turn

from .console import Style, printable

if TYPE_CHECKING:  # the follow engine is for log stream alone
    from sessiontape.storage.skillet.log_follow import LogSource

__all__ = ["EntryFormatter", "answer_line", "describe_step", "render_turns"]


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
    style = Style(color)
    dim, red, reset = style.dim, style.red, style.reset
    for turn in turns:
        yield f"user> {printable(input_text(turn.user_input))}"
        for step in turn.steps if steps else ():
            what = describe_step(step)
            if what is not None:
                yield f"{red if step_failed(step) else dim}  · {printable(what, one_line=True)}" \
                      f"{reset}"
        yield answer_line(turn, style)


def answer_line(turn: Turn, style: Style, halted: str | None = None) -> str:
    """A turn's ``agent> (model) answer`` line, ending ``[halted]`` when given (why the turn
    stopped), else ``[incomplete]`` for a turn without its final result."""
    model = f"({printable(turn.model, one_line=True)}) " if turn.model else ""
    note = halted or (None if turn.complete else "incomplete")
    suffix = f" {style.dim}[{printable(note, one_line=True)}]{style.reset}" if note else ""
    return f"agent> {model}{printable(turn.text)}{suffix}"


# -- log stream's lines ------------------------------------------------------------

# Step types describe_step() leaves out (None), skipped before calling it: most steps of a
# log are streamed text chunks (a test keeps this in step with describe_step).
_UNDESCRIBED_STEPS = frozenset(("text", "agent_end"))


def _printable(text: str, *, one_line: bool = False) -> str:
    """:func:`printable`, quicker for the usual text: ``str.isprintable()`` is False for
    every character that escapes (all are in Unicode's category Cc)."""
    return text if text.isprintable() else printable(text, one_line=one_line)


class EntryFormatter:
    """Entries as skillet's ``log stream`` lines, or as JSON lines.

    Text: a ``── user/session ──`` header whenever the source changes (the raw names of
    its owner record first when they differ: :attr:`LogSource.label`), then
    ``[ts] user> ...`` and ``[ts] agent> (model) ...``; with ``steps`` also
    agent starts, tool calls, tool results (abbreviated; a failed call as
    ``tool ✗ exception``, in red), handoffs and compactions. JSON: every entry,
    as one object with ``user``, ``session``, ``file``, ``user_id`` and
    ``session_name`` added.
    """

    def __init__(self, *, steps: bool = False, json: bool = False, color: bool = False) -> None:
        self.steps = steps
        self.json = json
        self._last: LogSource | None = None
        on = color
        style = Style(on)
        self._head, self._dim, self._red = style.heading, style.dim, style.red
        self._bold, self._reset = style.bold, style.reset

    def format(self, source: LogSource, entry: LogEntry) -> str | None:
        """The text for one entry (several lines when a header comes first), or None."""
        text = self.format_objects(source, [entry.data])
        return text[:-1] if text else None

    def format_objects(self, source: LogSource, objects: list[dict[str, Any]]) -> str:
        """The text for entries of one source, given as their objects: each line ends with a
        newline, a header comes first if the source changed; "" when none is shown."""
        if self.json:
            return self._json_lines(source, objects)
        lines = [text for text in map(self._line, objects) if text is not None]
        if not lines:
            return ""
        if source != self._last:
            self._last = source
            label = printable(source.label, one_line=True)
            lines.insert(0, f"{self._head}── {label} ──{self._reset}")
        lines.append("")  # for the last newline
        return "\n".join(lines)

    @staticmethod
    def _json_lines(source: LogSource, objects: list[dict[str, Any]]) -> str:
        """Each object with ``user``, ``session``, ``file``, ``user_id`` and ``session_name``
        (the owner record's raw names, or null) set (new keys last), a line each."""
        user_id, session_name = source.owner or (None, None)
        added = {"user": source.user, "session": source.session, "file": source.path,
                 "user_id": user_id, "session_name": session_name}
        dumps, option = orjson.dumps, orjson.OPT_APPEND_NEWLINE
        try:
            return b"".join([dumps({**data, **added}, default=str, option=option)
                             for data in objects]).decode()
        except orjson.JSONEncodeError:  # a lone surrogate, an integer beyond 64 bits
            return "".join(dumps_compact({**data, **added}).decode() + "\n"
                           for data in objects)

    def _line(self, data: dict[str, Any]) -> str | None:
        """The line for one entry's object (no newline), or None when it is not shown."""
        kind, reset = data["kind"], self._reset
        if kind == "user_message":
            text = input_text(data.get("userInput"))
            return f"{self._stamp(data)} {self._bold}user>{reset} {_printable(text)}"
        if kind == "final_result":
            final = data.get("finalResult")
            text = final.get("text", "") if isinstance(final, dict) else (final or "")
            model = data.get("model")
            model = f"({_printable(str(model), one_line=True)}) " if model else ""
            return f"{self._stamp(data)} {self._bold}agent>{reset} {model}{_printable(str(text))}"
        step = step_of(kind, data) if self.steps else None
        if step is None or step.get("type") in _UNDESCRIBED_STEPS:
            return None
        what = describe_step(step)
        if what is None:
            return None
        style = self._red if step_failed(step) else self._dim
        return f"{self._stamp(data)} {style}  · {_printable(what, one_line=True)}{reset}"

    def _stamp(self, data: dict[str, Any]) -> str:
        return f"{self._dim}[{_printable(str(data.get('timestamp', '')))}]{self._reset}"
