"""Recorded conversations as agentrun ``Message`` lines (JSONL), the Go library's vocabulary.

agentrun drives many agent runtimes through one output vocabulary: a ``Message`` of a
``type`` (``init``, ``system``, ``text``, ``thinking``, ``tool_use``, ``tool_result``,
``error``, ``result``, ``eof``...) with ``content``, ``tool`` (``name``, ``input``,
``output``: raw JSON), ``usage`` (tokens, cache and thinking tokens, ``cost_usd``),
``stop_reason``, ``error_code``, ``resume_id``, ``init`` (``model``, ``agent_name``),
``raw`` and ``timestamp``; no other field. :func:`agentrun_messages` gives one
conversation's messages in order: an ``init`` naming it (``resume_id``: the session name
that continues it), then each turn: its prompt as a ``system`` message (agentrun has no
message for what goes in; ``raw`` holds the record it came from, as on every message),
what the agent said and did (a subagent's messages between the ``tool_use`` and the
``tool_result`` of the call that ran it), and a ``result`` with the turn's usage and
cost; an ``eof`` ends the conversation. docs/interop.md maps each field.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .. import agentrun as vocab
from ..catalog.conversation import (
    Call,
    Exchange,
    LedgerConversation,
    Message,
    Session,
    read_conversation,
)
from ..json_style import dumps_compact
from .output import written_beside
from .summary import ExportSummary, read_each

__all__ = ["AgentrunSummary", "agentrun_messages", "export_agentrun"]

# A message's kind (the read model's) as agentrun's type; others are not sent.
_TYPES = {"text": "text", "reasoning": "thinking", "error": "error"}


class AgentrunSummary(ExportSummary):
    """What :func:`export_agentrun` wrote, and what it could not read."""

    FORMAT, UNIT = "agentrun", "message"


def _spent(exchange: Exchange, total: dict[str, Any]) -> dict[str, Any]:
    """The turn's tokens and cost added into ``total``: its own, and those of the subagents
    its calls ran."""
    vocab.add_usage(total, exchange.usage or {})
    children = [m.call.child for m in exchange.messages if m.call and m.call.child]
    for child_exchange in (e for child in children for e in child.exchanges):
        _spent(child_exchange, total)
    return total


def _given(call: Call) -> str | None:
    """What the call gave the model: a subagent's answer without the ``{"output",
    "metadata"}`` AgentUse's tree wraps it in (as the replay log keeps it)."""
    if call.child is not None:
        wrapped = vocab.raw_json(call.result)
        if isinstance(wrapped, dict) and set(wrapped) == {"output", "metadata"} \
                and isinstance(wrapped["output"], str):
            return wrapped["output"]
    return call.result


def _said(message: Message) -> Iterator[dict[str, Any]]:
    call = message.call
    if call is None:
        if message.role == "user" and message.content:
            yield vocab.message("system", message.timestamp, message.source,
                                content=message.content)
        elif message.role == "assistant" and message.kind in _TYPES and message.content:
            yield vocab.message(_TYPES[message.kind], message.timestamp, message.source,
                                content=message.content)
        return
    yield vocab.message("tool_use", message.timestamp, message.source,
                        tool=vocab.tool(call.name, input=vocab.raw_json(call.params)))
    if call.child is not None:
        yield from _session(call.child)
    if call.failed or call.result is not None:
        output = _given(call) if call.result is not None else call.error
        ended = call.ended_by if call.ended_by is not None else message.source
        yield vocab.message("tool_result", call.completed or message.timestamp, ended,
                            tool=vocab.tool(call.name, output=vocab.raw_json(output)))
        if call.failed:  # agentrun's ToolCall has no error flag: an error message says so
            yield vocab.message("error", call.completed or message.timestamp, ended,
                                content=call.error or "the tool failed",
                                error_code=vocab.TOOL_FAILED)


def _session(session: Session) -> Iterator[dict[str, Any]]:
    for exchange in session.exchanges:
        for message in exchange.messages:
            yield from _said(message)


def agentrun_messages(conversation: LedgerConversation, problems: list[str]
                      ) -> Iterator[dict[str, Any]]:
    """The conversation's messages in order (LedgerSourceError: nothing to read it from);
    what was read around is added to ``problems``."""
    session, _ = read_conversation(conversation, problems)
    return _conversation(conversation, session)


def _conversation(conversation: LedgerConversation, session: Session
                  ) -> Iterator[dict[str, Any]]:
    yield vocab.message("init", session.created_at, resume_id=conversation.session_name,
                        init={"model": session.model or "", "agent_name": session.agent or ""})
    for exchange in session.exchanges:
        for message in exchange.messages:
            yield from _said(message)
        texts = [m.content for m in exchange.messages if m.kind == "text" and m.content]
        spent = vocab.usage(_spent(exchange, {}))
        # a turn that ended in an error (AgentUse leaves it without an end time) has no
        # stop reason
        failed = bool(exchange.messages) and exchange.messages[-1].kind == "error"
        ended = exchange.completed or max(
            (m.timestamp for m in exchange.messages if m.timestamp), default=None)
        if exchange.completed is not None or failed:
            yield vocab.message("result", ended, stop_reason=None if failed else "end_turn",
                                content=texts[-1] if texts else None, usage=spent)
        else:  # a turn that did not finish: stopped or killed
            yield vocab.message("error", ended, content="the turn did not finish",
                                error_code=vocab.TURN_UNFINISHED)
            yield vocab.message("result", ended, usage=spent)
    ends = [e.completed for e in session.exchanges if e.completed]
    yield vocab.message("eof", max(ends, default=session.created_at))


def export_agentrun(out: Path, conversations: Iterable[LedgerConversation], *,
                    force: bool = False, strict: bool = False) -> AgentrunSummary:
    """Write ``conversations`` as agentrun Message lines to a new JSONL file at ``out``
    (mode 0600), one conversation after another. As the other exports: FileExistsError
    unless ``force``; ``skipped`` or, with ``strict``, LedgerSourceError; nothing left
    behind on an error."""
    out = Path(out)
    summary = AgentrunSummary(out)
    with written_beside(out, force=force) as tmp, tmp.open("wb") as file:
        for conversation, session, _ in read_each(conversations, summary, strict):
            for message in _conversation(conversation, session):
                file.write(dumps_compact(message) + b"\n")
                summary.written += 1
    return summary
