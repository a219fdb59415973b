"""What the web pages show, shaped for the templates: a transcript's turns, entries and calls.

A conversation is read through the read model every export reads
(:func:`~sessiontape.storage.catalog.conversation.read_conversation`); this module only
shapes it: each turn's prompt, what the agent said, its reasoning, handoffs and tool calls
(numbered depth-first, subagents inside the call that ran them), tokens and cost. Long
arguments and outputs are cut to :data:`PREVIEW_CHARS`; the whole text is one request away
(:func:`call_text`). Text is left as recorded: the templates escape it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sessiontape.storage.catalog.conversation import (
    Exchange,
    LedgerConversation,
    Message,
    Session,
    read_conversation,
)
from sessiontape.storage.catalog.index import UsageRow
from sessiontape.storage.catalog.sessions import SessionInfo
from sessiontape.storage.exports.transcript import json_or_text, started, turn_usage
from sessiontape.storage.text import printable
from sessiontape.storage.times import shown_time

__all__ = ["PREVIEW_CHARS", "CallView", "Entry", "Shown", "Transcript", "TurnView",
           "call_text", "read_transcript", "usage_series"]

PREVIEW_CHARS = 2000  # of a call's arguments or output shown before "show all"


@dataclass
class Shown:
    """A text to show: its first :data:`PREVIEW_CHARS` characters, its language (``json``
    or ``""``) and its whole length."""

    text: str
    language: str
    size: int

    @property
    def cut(self) -> bool:
        return self.size > len(self.text)


def _shown(value: str | None, parse: bool = True, limit: int | None = PREVIEW_CHARS) -> Shown:
    """``value`` to show: pretty JSON (``parse``) or its text, controls escaped, cut to
    ``limit`` characters (None: whole)."""
    text, language = json_or_text(value) if parse else (value or "", "")
    text = printable(text)
    return Shown(text[:limit], language, len(text))


@dataclass
class CallView:
    """A tool call: its number in the conversation, how it ended, its arguments and output
    (or error), and the subagent it ran."""

    number: int
    name: str
    ended: str  # "returned", "failed" or "running"
    arguments: Shown
    output: Shown | None
    child_agent: str | None = None
    child_turns: list[TurnView] = field(default_factory=list)


@dataclass
class Entry:
    """One thing a turn shows: ``prompt``, ``text``, ``reasoning``, ``note`` (a handoff or
    another kind, named in ``label``) or ``call``."""

    kind: str
    who: str = ""
    text: str = ""
    label: str = ""
    call: CallView | None = None


@dataclass
class TurnView:
    number: int
    started: str
    entries: list[Entry]
    usage: str | None


@dataclass
class Transcript:
    """A conversation's turns and where it was read from (``agentuse`` or ``log``)."""

    info: SessionInfo
    read_from: str
    turns: list[TurnView]
    calls: int
    problems: list[str]
    model: str | None


class _Shaper:
    def __init__(self) -> None:
        self.calls = 0
        self.texts: dict[int, tuple[str | None, str | None, bool]] = {}

    def turns(self, session: Session) -> list[TurnView]:
        return [TurnView(number, shown_time(started(exchange)),
                         list(self.entries(exchange, session)), turn_usage(number, exchange))
                for number, exchange in enumerate(session.exchanges, 1)]

    def entries(self, exchange: Exchange, session: Session) -> Iterator[Entry]:
        for message in exchange.messages:
            entry = self.entry(message, session)
            if entry is not None:
                yield entry

    def entry(self, message: Message, session: Session) -> Entry | None:
        who = printable(str(message.metadata.get("agent") or session.agent or "agent"),
                        one_line=True)
        call = message.call
        if call is not None:
            self.calls += 1
            number = self.calls
            self.texts[number] = (call.params, call.error or call.result, call.failed)
            ended = "failed" if call.failed else "returned" if call.result is not None \
                else "running"
            output = None
            if call.failed:
                output = _shown(call.error or call.result or "", parse=False)
            elif call.result is not None:
                output = _shown(call.result)
            view = CallView(number, printable(call.name or "?", one_line=True), ended,
                            _shown(call.params), output)
            if call.child is not None:
                view.child_agent = printable(str(call.child.agent or "?"), one_line=True)
                view.child_turns = self.turns(call.child)
            return Entry("call", who, call=view)
        if message.role == "system" or not message.content:
            return None
        text = printable(message.content)
        if message.role == "user":
            return Entry("prompt", who, text)
        if message.kind == "reasoning":
            return Entry("reasoning", who, text)
        if message.kind == "handoff":
            return Entry("note", who, text, "handoff")
        if message.kind not in ("text", None):
            return Entry("note", who, text, printable(str(message.kind), one_line=True))
        return Entry("text", who, text)


def _read(info: SessionInfo) -> tuple[_Shaper, Session, str, list[str]]:
    problems: list[str] = []
    session, read_from = read_conversation(LedgerConversation(
        info.user_id, info.session_name, info.agentuse_dir, info.log_path, info.origin),
        problems)
    shaper = _Shaper()
    return shaper, session, read_from, problems


def read_transcript(info: SessionInfo) -> Transcript:
    """The conversation ``info`` names, shaped for a page. Raises
    :class:`~sessiontape.storage.catalog.conversation.LedgerSourceError` when there is
    nothing to read it from (deleted, say)."""
    shaper, session, read_from, problems = _read(info)
    turns = shaper.turns(session)
    return Transcript(info, read_from, turns, shaper.calls, problems, session.model)


def call_text(info: SessionInfo, number: int, part: str) -> Shown | None:
    """The whole ``arguments`` or ``output`` of call ``number`` (as :class:`CallView`
    numbers them) of the conversation ``info`` names; None when it has no such call."""
    shaper, session, _, _ = _read(info)
    shaper.turns(session)
    if number not in shaper.texts:
        return None
    params, result, failed = shaper.texts[number]
    value = params if part == "arguments" else result
    return _shown(value, parse=not (failed and part == "output"), limit=None)


def usage_series(rows: list[UsageRow]) -> dict[str, Any]:
    """``usage daily --breakdown`` rows as the usage page's charts take them: the days, and
    per model its cost and tokens on each day (0 where it made no call)."""
    days = [row.key for row in rows]
    models = sorted({model.key for row in rows for model in row.models})
    cost = {m: [0.0] * len(days) for m in models}
    tokens = {m: [0] * len(days) for m in models}
    for index, row in enumerate(rows):
        for model in row.models:
            cost[model.key][index] = round(model.cost or 0.0, 6)
            tokens[model.key][index] = (model.input_tokens or 0) + (model.output_tokens or 0)
    return {"days": days, "models": models, "cost": cost, "tokens": tokens}
