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

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..catalog.conversation import (
    Exchange,
    LedgerConversation,
    Message,
    Session,
    read_conversation,
)
from ..json_style import dumps_compact, loads
from ..times import ms_to_iso
from .output import written_beside
from .summary import ExportSummary, read_each

__all__ = ["AgentrunSummary", "agentrun_messages", "export_agentrun"]

_ZERO_TIME = "0001-01-01T00:00:00Z"  # how Go writes a zero time.Time
# A message's kind (the read model's) as agentrun's type; others are not sent.
_TYPES = {"text": "text", "reasoning": "thinking", "error": "error"}


class AgentrunSummary(ExportSummary):
    """What :func:`export_agentrun` wrote, and what it could not read."""

    FORMAT, UNIT = "agentrun", "message"


def _raw_json(value: str | None) -> Any:
    """A call's arguments or output as agentrun's raw JSON: the JSON it is, else a string."""
    if value is None:
        return None
    try:
        return loads(value)
    except ValueError:
        return value


def _message(kind: str, at: int | None, source: Any = None, **fields: Any) -> dict[str, Any]:
    """One agentrun ``Message``: its set fields, ``raw`` (the record it was read from) and
    ``timestamp``, which Go always writes."""
    message = {"type": kind, **{k: v for k, v in fields.items() if v not in (None, "", {})}}
    if source is not None:
        message["raw"] = source
    message["timestamp"] = ms_to_iso(at) or _ZERO_TIME
    return message


def _tool(name: str | None, **raw: Any) -> dict[str, Any]:
    """A ``ToolCall``: its name, and its input or output unless there is none."""
    return {"name": name or "", **{k: v for k, v in raw.items() if v is not None}}


_USAGE = {"inputTokens": "input_tokens", "outputTokens": "output_tokens",
          "cachedTokens": "cache_read_tokens", "reasoningTokens": "thinking_tokens",
          "cost": "cost_usd"}


def _spent(exchange: Exchange) -> dict[str, Any]:
    """The turn's tokens and cost: its own, and those of the subagents its calls ran."""
    spent = dict.fromkeys(_USAGE, 0)
    for key in _USAGE:
        spent[key] += (exchange.usage or {}).get(key, 0)
    children = [m.call.child for m in exchange.messages if m.call and m.call.child]
    for child_exchange in (e for child in children for e in child.exchanges):
        for key, value in _spent(child_exchange).items():
            spent[key] += value
    return spent


def _usage(exchange: Exchange) -> dict[str, Any]:
    counted = {_USAGE[key]: value for key, value in _spent(exchange).items()}
    # as Go's omitempty: only the two token counts are always written
    return {k: v for k, v in counted.items() if v or k in ("input_tokens", "output_tokens")}


def _said(message: Message) -> Iterator[dict[str, Any]]:
    call = message.call
    if call is None:
        if message.role == "user" and message.content:
            yield _message("system", message.timestamp, message.source, content=message.content)
        elif message.role == "assistant" and message.kind in _TYPES and message.content:
            yield _message(_TYPES[message.kind], message.timestamp, message.source,
                           content=message.content)
        return
    yield _message("tool_use", message.timestamp, message.source,
                   tool=_tool(call.name, input=_raw_json(call.params)))
    if call.child is not None:
        yield from _session(call.child)
    if call.failed or call.result is not None:
        output = call.result if call.result is not None else call.error
        ended = call.ended_by if call.ended_by is not None else message.source
        yield _message("tool_result", call.completed or message.timestamp, ended,
                       tool=_tool(call.name, output=_raw_json(output)))


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
    yield _message("init", session.created_at, resume_id=conversation.session_name,
                   init={"model": session.model or "", "agent_name": session.agent or ""})
    for exchange in session.exchanges:
        for message in exchange.messages:
            yield from _said(message)
        texts = [m.content for m in exchange.messages if m.kind == "text" and m.content]
        if exchange.completed is not None:
            yield _message("result", exchange.completed, content=texts[-1] if texts else None,
                           stop_reason="end_turn", usage=_usage(exchange))
        else:  # a turn that did not finish: failed, stopped or killed
            ended = max((m.timestamp for m in exchange.messages if m.timestamp), default=None)
            yield _message("error", ended, content="the turn did not finish",
                           error_code="turn_unfinished")
            yield _message("result", ended, usage=_usage(exchange))
    yield _message("eof", max((e.completed for e in session.exchanges if e.completed),
                              default=session.created_at))


def export_agentrun(out: Path, conversations: Sequence[LedgerConversation], *,
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
