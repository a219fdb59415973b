"""Recorded conversations as Agent Sessions' normalized ``SessionEvent`` lines (JSONL).

Agent Sessions (the macOS app) reads many agents' logs through one event: ``kind``
(``user``, ``assistant``, ``tool_call``, ``tool_result``, ``error``, ``meta``), ``text``,
``toolName``/``toolInput``/``toolOutput``, ``model``, ``timestamp``, ``messageID``,
``parentID`` and ``rawJSON``, the record the event was read from. :func:`session_events`
gives one conversation's events in order, read through
:func:`~sessiontape.storage.catalog.conversation.read_conversation`: each turn's prompt,
texts and tool calls, a subagent's events right after the call that ran it, linked to
that call's event by ``parentID``, then the call's result. docs/interop.md maps each
field. :func:`export_session_events` writes conversations to one new file, a line each.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..catalog.conversation import (
    Exchange,
    LedgerConversation,
    Message,
    Session,
    read_conversation,
)
from ..json_style import dumps_compact
from ..times import ms_to_iso
from .output import written_beside
from .summary import ExportSummary, read_each

__all__ = ["SessionEventsSummary", "export_session_events", "session_events"]

_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://sessiontape.invalid/session-events")
# A message's kind (the read model's) as Agent Sessions' kind; any other is ``meta``.
_KINDS = {"prompt": "user", "text": "assistant", "reasoning": "assistant", "error": "error"}


class SessionEventsSummary(ExportSummary):
    """What :func:`export_session_events` wrote, and what it could not read."""

    FORMAT, UNIT = "session-events", "event"


class _Events:
    """The events of one conversation, numbered for the ids no record gives."""

    def __init__(self, conversation: LedgerConversation) -> None:
        self.names = {"userID": conversation.user_id, "sessionName": conversation.session_name}
        self.count = 0

    def make(self, kind: str, session: Session, exchange: Exchange, turn: str,
             message: Message, record: Any, preferred: str | None,
             **fields: Any) -> dict[str, Any]:
        """One event; its id is the layout's (``preferred``) or a uuid5 of its position."""
        self.count += 1
        event: dict[str, Any] = {
            "id": preferred or str(uuid.uuid5(_NAMESPACE, f"{session.seed}\0{self.count}")),
            "kind": kind, "timestamp": ms_to_iso(message.timestamp), "role": message.role,
            "model": message.metadata.get("model") or exchange.model,
            "messageID": turn, "sessionID": session.preferred or session.seed,
            **self.names, **fields}
        event = {key: value for key, value in event.items() if value is not None}
        source = record if record is not None else dict(event)
        event["rawJSON"] = dumps_compact(source).decode()
        return event

    def session(self, session: Session, parent: str | None) -> Iterator[dict[str, Any]]:
        for number, exchange in enumerate(session.exchanges):
            turn = exchange.preferred or f"{session.preferred or session.seed}#{number + 1}"
            for message in exchange.messages:
                yield from self.message(session, exchange, turn, message, parent)

    def message(self, session: Session, exchange: Exchange, turn: str, message: Message,
                parent: str | None) -> Iterator[dict[str, Any]]:
        linked = {"parentID": parent} if parent is not None else {}
        call = message.call
        if call is None:
            kind = "meta" if message.role == "system" else _KINDS.get(message.kind, "meta")
            text, said = message.content, {}
            if kind == "meta":  # what it marks, where it holds no text (an ``agent`` part)
                said = {"metaKind": message.kind}
                named = message.metadata.get("name")
                text = text or " ".join(str(w) for w in (message.kind, named) if w)
            yield self.make(kind, session, exchange, turn, message, message.source,
                            message.preferred, text=text, **said, **linked)
            return
        started = self.make("tool_call", session, exchange, turn, message, message.source,
                            message.preferred, toolName=call.name, toolInput=call.params,
                            callID=call.call_id, **linked)
        yield started
        if call.child is not None:
            yield from self.session(call.child, started["id"])
        if call.failed:
            ended = {"kind": "error", "text": call.error or call.result or ""}
        elif call.result is not None:
            ended = {"kind": "tool_result"}
        else:
            return  # still running, or waiting for approval: no result yet
        yield self.make(ended.pop("kind"), session, exchange, turn, message,
                        call.ended_by if call.ended_by is not None else message.source,
                        f"{started['id']}:result", role="tool", toolName=call.name,
                        toolOutput=call.output, callID=call.call_id, **ended,
                        **linked)



def session_events(conversation: LedgerConversation, problems: list[str]
                   ) -> Iterator[dict[str, Any]]:
    """The conversation's events in order (LedgerSourceError: nothing to read it from);
    what was read around is added to ``problems``."""
    session, _ = read_conversation(conversation, problems)
    return _Events(conversation).session(session, None)


def export_session_events(out: Path, conversations: Iterable[LedgerConversation], *,
                          force: bool = False, strict: bool = False) -> SessionEventsSummary:
    """Write the events of ``conversations`` to a new JSONL file at ``out`` (mode 0600),
    one conversation after another, each read and written before the next is read.

    Raises FileExistsError if ``out`` exists, unless ``force``. A conversation with nothing
    to read is listed in the summary's ``skipped``, or with ``strict`` raises
    :class:`LedgerSourceError`. On any error nothing is left at ``out`` (nor beside it).
    """
    out = Path(out)
    summary = SessionEventsSummary(out)
    with written_beside(out, force=force) as tmp, tmp.open("wb") as file:
        for conversation, session, _ in read_each(conversations, summary, strict):
            for event in _Events(conversation).session(session, None):
                file.write(dumps_compact(event) + b"\n")
                summary.written += 1
    return summary
