"""``sessions show``: a conversation's header and transcript, as text or JSON.

Kept apart from :mod:`sessiontape.cli.sessions` so that the other ``sessions`` verbs do not
load the transcript's readers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sessiontape.storage.catalog.sessions import (
    SessionInfo,
    SubagentView,
    TurnView,
    Usage,
    show_session,
    tool_output_text,
)
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.paths import Locations
from sessiontape.storage.skillet.items import clip, content_text, input_text, item_text
from sessiontape.storage.skillet.log_entries import step_failed
from sessiontape.storage.times import shown_time

from .console import EXIT_OK, Style, cost_text, plural, print_json, printable, use_color
from .transcript import answer_line, describe_step


def _usage_text(usage: Usage, main: Usage | None) -> str:
    text = f"{usage.input} in / {usage.output} out tokens, {cost_text(usage.cost)}"
    if main is not None and (usage.tokens != main.tokens or usage.cost != main.cost):
        sub_in, sub_out = usage.input - main.input, usage.output - main.output
        text += f" (subagents {sub_in} in / {sub_out} out)"
    return text


def _user(info: SessionInfo) -> str:
    return info.user_id if info.user_id is not None else "-"


def _usage_line(view: TurnView | SubagentView, style: Style, pad: str) -> Iterator[str]:
    usage = view.usage
    main = view.usage_main if isinstance(view, TurnView) else None
    if usage is not None:
        yield f"{style.dim}{pad}  usage: {_usage_text(usage, main)}{style.reset}"


def _indented(text: str, pad: str) -> str:
    """``text`` (escaped) with its continuation lines indented by ``pad``."""
    return printable(text).replace("\n", "\n" + pad) if pad else printable(text)


def _call_text(tool: Any, arguments: str) -> str:
    """A tool call as shown: ``tool(arguments)``, the arguments cut at 80 characters."""
    return f"{tool}({clip(arguments, 80)})"


def _call_line(call: str, style: Style, pad: str, *, result: str | None = None,
               error: str | None = None, status: str = "no result") -> str:
    """A tool call with its ``result`` on one line, dimmed; one that failed with ✗ and its
    ``error`` in red; one with neither with its ``status`` in brackets."""
    dim, red, reset = style.dim, style.red, style.reset
    call = printable(call, one_line=True)
    if error is not None:
        return f"{pad}  · {call} {red}✗ {printable(clip(error))}{reset}"
    outcome = f"→ {printable(clip(result))}" if result is not None else \
        f"[{printable(status)}]"
    return f"{dim}{pad}  · {call} {outcome}{reset}"


def _part_lines(part: dict[str, Any], style: Style, pad: str) -> Iterator[str]:
    """One part of an AgentUse exchange; ``log`` and step markers are not shown."""
    kind = part.get("type")
    dim, red, reset = style.dim, style.red, style.reset
    if kind == "text":
        yield f"{pad}agent> {_indented(str(part.get('text', '')), pad)}"
    elif kind == "reasoning":
        yield f"{dim}{pad}  · reasoning: {printable(clip(part.get('text', '')))}{reset}"
    elif kind == "tool":
        state = part.get("state")
        state = state if isinstance(state, dict) else {}
        call = _call_text(part.get("tool"), dumps_compact(state.get("input", {})).decode())
        status = state.get("status")
        if status == "completed":
            yield _call_line(call, style, pad, result=tool_output_text(state.get("output")))
        elif status == "error":
            yield _call_line(call, style, pad, error=str(state.get("error", "")))
        else:
            yield _call_line(call, style, pad, status=str(status))
    elif kind == "error":
        detail = ", ".join(str(x) for x in (part.get("code"), part.get("statusCode") and
                                            f"HTTP {part.get('statusCode')}") if x)
        yield f"{pad}  {red}! error: {printable(str(part.get('message', '')))}" \
              f"{f' ({printable(detail)})' if detail else ''}{reset}"
    elif kind == "agent":
        yield f"{dim}{pad}  · agent {printable(str(part.get('name', '')), one_line=True)}{reset}"
    elif kind == "file":
        what = part.get("filename") or part.get("url") or ""
        yield f"{dim}{pad}  · file {printable(clip(what))}{reset}"
    elif kind == "compaction":
        yield f"{dim}{pad}  · compaction: {part.get('tokensBefore', '?')} → " \
              f"{part.get('tokensAfter', '?')} tokens{reset}"
    elif kind not in ("log", "step-start", "step-finish"):
        yield f"{dim}{pad}  · {printable(str(kind))}{reset}"


# An exchange's parts that may come before its answer (texts apart).
_BEFORE_ANSWER = ("reasoning", "tool", "error", "agent", "file", "compaction")


def _exchange_lines(view: TurnView, style: Style, pad: str = "") -> Iterator[str]:
    """An exchange of an AgentUse tree: its prompt, its parts in order (texts, reasoning,
    tool calls with their results or errors, errors), each subagent it ran under the
    call that ran it; a log turn's exchange ends with the log's answer line instead of
    its closing texts."""
    yield f"{pad}user> {_indented(input_text(view.turn.user_input), pad)}"
    by_call = {s.call_id: s for s in view.subagents if s.call_id is not None}
    parts = view.parts or []
    if view.source == "log":  # the log's answer line ends it, in place of the closing texts
        parts = parts[:max((i + 1 for i, part in enumerate(parts)
                            if part.get("type") in _BEFORE_ANSWER), default=0)]
    for part in parts:
        yield from _part_lines(part, style, pad)
        call_id = part.get("callID") if part.get("type") == "tool" else None
        sub = by_call.pop(call_id, None) if isinstance(call_id, str) else None
        if sub is not None:
            yield from _subagent_lines(sub, style, pad + "    ")
    for sub in view.subagents:
        if sub.call_id is None or sub.call_id in by_call:
            yield from _subagent_lines(sub, style, pad + "    ")
    if view.source == "log":
        yield answer_line(view.turn, style, view.halted)
    elif view.halted or not view.turn.complete:
        yield f"{pad}{style.dim}[{printable(view.halted or 'incomplete')}]{style.reset}"


def _log_turn_lines(view: TurnView, style: Style) -> Iterator[str]:
    """A turn known from the log alone: its prompt, its steps (each subagent run's under
    the call that ran it, each call with its result), its answer line."""
    yield f"user> {printable(input_text(view.turn.user_input))}"
    steps = view.turn.steps
    ends = _paired_ends(steps)
    children: dict[str | None, list[dict[str, Any]]] = {}
    for step in steps:
        parent = step.get("parentCallId")
        children.setdefault(parent if isinstance(parent, str) else None, []).append(step)
    yield from _step_lines(children.pop(None, []), children, ends, style, "")
    while children:  # runs of calls the log does not hold
        yield from _step_lines(children.pop(next(iter(children))), children, ends, style, "")
    yield answer_line(view.turn, style, view.halted)


def _paired_ends(steps: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each tool call's end, by the id of its start step: the end with its ``callId``,
    else the first open call of its tool name in its run (skilled_crew writes no ids)."""
    by_id: dict[Any, dict[str, Any]] = {}
    waiting: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    ends: dict[int, dict[str, Any]] = {}
    for step in steps:
        key = (step.get("parentCallId"), step.get("toolName"))
        if step.get("type") == "agent_tool_start":
            waiting.setdefault(key, []).append(step)
            if step.get("callId") is not None:
                by_id[step["callId"]] = step
        elif step.get("type") == "agent_tool_end":
            queue = waiting.get(key, [])
            start = by_id.pop(step.get("callId"), None) if step.get("callId") else None
            start = start or (queue[0] if queue else None)
            if start is not None:
                if start in queue:
                    queue.remove(start)
                ends[id(start)] = step
    return ends


def _step_lines(steps: list[dict[str, Any]], children: dict[str | None, list[dict[str, Any]]],
                ends: dict[int, dict[str, Any]], style: Style, pad: str) -> Iterator[str]:
    """Log steps at one depth: a call with its result, then the steps of the run it started
    (taken from ``children``, by call id), indented; other steps described."""
    paired = {id(end) for end in ends.values()}
    for step in steps:
        if step.get("type") == "agent_tool_start":
            call = _call_text(step.get("toolName"), str(step.get("toolArgumentsStr", "")))
            end = ends.get(id(step))
            if end is None:
                yield _call_line(call, style, pad)
            elif step_failed(end):
                yield _call_line(call, style, pad,
                                 error=str(end.get("error") or end.get("result", "")))
            else:
                yield _call_line(call, style, pad, result=str(end.get("result", "")))
            run = children.pop(step["callId"], None) if step.get("callId") else None
            if run:
                yield from _step_lines(run, children, ends, style, pad + "    ")
        elif id(step) not in paired:
            what = describe_step(step)
            if what is not None:
                color = style.red if step_failed(step) else style.dim
                yield f"{color}{pad}  · {printable(what, one_line=True)}{style.reset}"


def _subagent_lines(sub: SubagentView, style: Style, pad: str) -> Iterator[str]:
    status = f", {sub.status}" if sub.status else ""
    yield (f"{pad}{style.bold}↳ subagent {printable(sub.agent or '-', one_line=True)}"
           f"{style.reset} "
           f"{style.dim}({sub.session_id}{printable(status)}){style.reset}")
    for turn in sub.turns:
        yield from _exchange_lines(turn, style, pad)
    yield from _usage_line(sub, style, pad)


def _store_turn_lines(view: TurnView, style: Style) -> Iterator[str]:
    """A turn read from the stored items: the user message, the assistant's messages, the
    other items (tool calls and results, reasoning) dimmed."""
    if view.turn.user_input is not None:  # else items before any user message: a summary
        yield f"user> {printable(input_text(view.turn.user_input))}"
    for item in (view.items or [])[1 if view.turn.user_input is not None else 0:]:
        if isinstance(item, dict) and item.get("role") == "assistant":
            yield f"agent> {printable(content_text(item.get('content')))}"
        else:
            yield f"{style.dim}  · {printable(clip(item_text(item), 160))}{style.reset}"
    if not view.turn.complete:
        yield f"{style.dim}[incomplete]{style.reset}"


def print_session(found: SessionInfo, where: Locations, *, full: bool, as_json: bool,
                  warn: Callable[[list[str]], None], turn: int | None = None,
                  last: int | None = None) -> int:
    """``sessions show``: the session's header and transcript (``as_json``: its view as
    JSON); ``full`` adds the archived items, ``turn`` and ``last`` choose turns
    (:func:`show_session`). ``warn`` gets the problems met, reading included."""
    view = show_session(found, full=full, locations=where, turn=turn, last=last)
    warn(found.problems)
    if as_json:
        print_json(view.to_json())
        return EXIT_OK
    style = Style(use_color())
    info = found
    print(f"{style.bold}{printable(info.session_name, one_line=True)}{style.reset}  "
          f"user {printable(_user(info), one_line=True)}  "
          f"{plural(info.turns, 'turn')}  {plural(info.items, 'item')}"
          + (f" (+{info.archived} archived)" if info.archived else "")
          + f"  origin {info.origin}")
    if info.usage is not None:
        print(f"usage: {_usage_text(info.usage, info.usage_main)}")
    print(printable(f"log: {info.log_path or '-'}"))
    print(printable(f"agentuse: {info.agentuse_dir or '-'}"))
    if info.agent is not None or info.status is not None:
        print(printable(f"agent: {info.agent or '-'}  status: {info.status or '-'}",
                        one_line=True))
    if isinstance(view.error, dict):
        code = f" ({view.error['code']})" if view.error.get("code") else ""
        print(f"{style.red}error{printable(str(code))}: "
              f"{printable(str(view.error.get('message', '')))}{style.reset}")
    if not view.turns:
        print(f"{style.dim}(no turns: no replay log, AgentUse exchange or stored item)"
              f"{style.reset}")
    elif view.source != "log":
        where_from = {"agentuse": "the AgentUse tree", "store": "the stored items"}
        print(f"{style.dim}(transcript from {where_from.get(view.source or '', view.source)})"
              f"{style.reset}")
    for shown in view.turns:
        print(f"\n{style.bold}Turn {shown.number}{style.reset}"
              + (f" {style.dim}{shown_time(shown.turn.started)}{style.reset}"
                 if shown.turn.started else ""))
        if shown.source == "agentuse" or shown.parts is not None:  # the log's too
            lines: Iterator[str] = _exchange_lines(shown, style)
        elif shown.source == "store":
            lines = _store_turn_lines(shown, style)
        else:
            lines = _log_turn_lines(shown, style)
        for text in lines:
            print(text)
        if shown.continued:
            print(f"{style.dim}(continued in its AgentUse exchange){style.reset}")
            for part in shown.continued:
                for text in _part_lines(part, style, ""):
                    print(text)
        for text in _usage_line(shown, style, ""):
            print(text)
    if view.archived is not None:
        print(f"\n{style.bold}Archived (compacted) items: {len(view.archived)}{style.reset}")
        for compaction_id, item in view.archived:
            text = " ".join(item_text(item).split())
            text = text if len(text) <= 160 else text[:159] + "…"
            print(f"  {style.dim}[{compaction_id}]{style.reset} {text}")
    return EXIT_OK
