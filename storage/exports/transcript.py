"""What the Markdown and HTML transcripts say, before either format marks it up."""

from __future__ import annotations

from ..catalog.conversation import Exchange, LedgerConversation, Session
from ..json_style import dumps_pretty, loads
from ..text import cost_text
from .summary import ExportSummary

__all__ = ["TranscriptSummary", "json_or_text", "started", "totals", "turn_usage"]


class TranscriptSummary(ExportSummary):
    """What a transcript export wrote (its turns), and what it could not read."""

    UNIT = "turn"


def json_or_text(value: str | None) -> tuple[str, str]:
    """A call's arguments or result to show, and its language: pretty JSON (``json``), or
    the text itself (a JSON string's text, or what is not JSON at all; ``""``)."""
    if value is None:
        return "", ""
    try:
        parsed = loads(value)
    except ValueError:
        return value, ""
    if isinstance(parsed, str):
        return parsed, ""
    return dumps_pretty(parsed).decode(), "json"


def turn_usage(number: int, exchange: Exchange) -> str | None:
    """``Turn 2: 120 tokens in, 30 out, $0.000480 · openai/gpt-4.1``; None without usage."""
    usage = exchange.usage
    if not usage:
        return None
    model = f" · {exchange.model}" if exchange.model else ""
    return (f"Turn {number}: {usage['inputTokens']} tokens in, {usage['outputTokens']} out, "
            f"{cost_text(usage['cost'])}{model}")


def totals(conversation: LedgerConversation, session: Session) -> list[str]:
    """The conversation's header line, in parts: who recorded it, its model, its turns,
    tokens and cost (the user is the caller's to show, marked up)."""
    usages = [e.usage for e in session.exchanges if e.usage]
    turns = len(session.exchanges)
    said = [f"recorded by {conversation.origin}",
            f"model {session.model}" if session.model else None,
            f"{turns} turn{'s' * (turns != 1)}",
            f"{sum(u['inputTokens'] for u in usages)} tokens in, "
            f"{sum(u['outputTokens'] for u in usages)} out, "
            f"{cost_text(sum(u['cost'] for u in usages))}" if usages else None]
    return [part for part in said if part]


def started(exchange: Exchange) -> int | None:
    """When the turn began: its first timed message (Unix ms)."""
    return next((m.timestamp for m in exchange.messages if m.timestamp), None)
