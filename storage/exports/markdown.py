"""A recorded conversation as a Markdown transcript, to read, share or attach to a bug.

:func:`markdown_transcript` writes one conversation read through
:func:`~sessiontape.storage.catalog.conversation.read_conversation`: a title and a line of
totals, then each turn with its time, the prompt (quoted), what the agent said, each tool
call with its arguments and result in code blocks, a subagent's run quoted under the call
that ran it (deeper runs quoted deeper), and the turn's tokens and cost. Recorded text
cannot change the page's structure: control characters are shown as escapes, a ``<``
outside code is escaped (no HTML reaches a renderer), and each code block's fence is
longer than any run of backticks inside it. :func:`export_markdown` writes conversations
to one new file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..catalog.conversation import (
    Exchange,
    LedgerConversation,
    Message,
    Session,
    read_conversation,
)
from ..json_style import dumps_pretty, loads
from ..text import cost_text, printable
from ..times import shown_time
from .output import written_beside
from .summary import ExportSummary, read_each

__all__ = ["MarkdownSummary", "export_markdown", "markdown_transcript"]

_BACKTICKS = re.compile("`+")


@dataclass
class MarkdownSummary(ExportSummary):
    """What :func:`export_markdown` wrote, and what it could not read."""

    FORMAT = "markdown"
    turns: int = 0

    def counts(self) -> dict[str, int]:
        return {"turns": self.turns}


# A line that would make a heading or a rule of recorded text: its first mark is escaped.
_BLOCK_MARK = re.compile(r"^( {0,3})(#|=+[ \t]*$|[-*_][-*_ \t]*$)", re.M)


def _prose(text: str) -> str:
    """Recorded text as Markdown prose: controls escaped, no HTML (``<`` escaped), and no
    heading or rule but the transcript's own (a line's leading ``#``, or a line of only
    ``=``, or of only ``-``, ``*``, ``_`` and blanks, escaped)."""
    return _BLOCK_MARK.sub(r"\1\\\2", printable(text).replace("<", "\\<"))


def _code(text: str, language: str = "") -> list[str]:
    """``text`` in a fenced code block whose fence no backtick run inside can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", *printable(text).split("\n"), fence]


def _json_or_text(value: str | None) -> tuple[str, str]:
    """A call's arguments or result for a code block: pretty JSON, or the text itself."""
    if value is None:
        return "", ""
    try:
        parsed = loads(value)
    except ValueError:
        return value, ""
    if isinstance(parsed, str):
        return parsed, ""
    return dumps_pretty(parsed).decode(), "json"


def _usage_line(number: int, exchange: Exchange) -> str | None:
    usage = exchange.usage
    if not usage:
        return None
    model = f" · {exchange.model}" if exchange.model else ""
    return (f"*Turn {number}: {usage['inputTokens']} tokens in, {usage['outputTokens']} out, "
            f"{cost_text(usage['cost'])}{model}*")


class _Writer:
    """The lines of one conversation's transcript."""

    def __init__(self) -> None:
        self.turns = 0

    def conversation(self, conversation: LedgerConversation, session: Session) -> list[str]:
        title = printable(conversation.session_name, one_line=True)
        user = conversation.user_id
        totals = [e.usage for e in session.exchanges if e.usage]
        said = [f"user `{printable(user, one_line=True)}`" if user is not None else None,
                f"recorded by {conversation.origin}",
                f"model {session.model}" if session.model else None,
                f"{len(session.exchanges)} turn{'s' * (len(session.exchanges) != 1)}",
                f"{sum(u['inputTokens'] for u in totals)} tokens in, "
                f"{sum(u['outputTokens'] for u in totals)} out, "
                f"{cost_text(sum(u['cost'] for u in totals))}" if totals else None]
        lines = [f"# {_prose(title)}", "", " · ".join(s for s in said if s), ""]
        for number, exchange in enumerate(session.exchanges, 1):
            self.turns += 1
            started = next((m.timestamp for m in exchange.messages if m.timestamp), None)
            lines += [f"## Turn {number} · {shown_time(started)}", ""]
            lines += self.exchange(exchange, session)
            usage = _usage_line(number, exchange)
            if usage is not None:
                lines += [usage, ""]
        return lines

    def exchange(self, exchange: Exchange, session: Session) -> list[str]:
        lines: list[str] = []
        for message in exchange.messages:
            lines += self.message(message, session)
        return lines

    def message(self, message: Message, session: Session) -> list[str]:
        call = message.call
        agent = message.metadata.get("agent") or session.agent or "agent"
        who = f"**{_prose(str(agent))}**"
        if call is None:
            if message.role == "system" or not message.content:
                return []
            if message.role == "user":
                return ["**User:**", "", *(f"> {line}" if line else ">"
                                          for line in _prose(message.content).split("\n")), ""]
            if message.kind == "reasoning":
                return [f"{who} *(reasoning)*:", "", *_code(message.content), ""]
            if message.kind not in ("text", None):
                return [f"*{_prose(str(message.kind))}:* {_prose(message.content)}", ""]
            return [f"{who}:", "", _prose(message.content), ""]
        name = printable(call.name or "?", one_line=True)
        arguments, language = _json_or_text(call.params)
        lines = [f"{who} calls `{name}`" + (f" ({printable(call.call_id, one_line=True)})"
                                             if call.call_id else "") + ":", "",
                 *_code(arguments, language), ""]
        if call.child is not None:
            child = call.child
            sub = [f"**Subagent {_prose(str(child.agent or '?'))}**, run by `{name}`:", ""]
            for exchange in child.exchanges:
                sub += self.exchange(exchange, child)
            lines += [f"> {line}" if line else ">" for line in sub] + [""]
        if call.failed:
            lines += [f"`{name}` failed:", "", *_code(call.error or call.result or ""), ""]
        elif call.result is not None:
            result, language = _json_or_text(call.result)
            lines += [f"`{name}` returned:", "", *_code(result, language), ""]
        else:
            lines += [f"`{name}` has not returned ({call.status or 'no result'}).", ""]
        return lines


def markdown_transcript(conversation: LedgerConversation, problems: list[str]) -> str:
    """The conversation as Markdown (LedgerSourceError: nothing to read it from); what was
    read around is added to ``problems``."""
    session, _ = read_conversation(conversation, problems)
    return "\n".join(_Writer().conversation(conversation, session))


def export_markdown(out: Path, conversations: Sequence[LedgerConversation], *,
                    force: bool = False, strict: bool = False) -> MarkdownSummary:
    """Write ``conversations`` as one Markdown file at ``out`` (mode 0600), one after another
    with a rule between them. As the other exports: FileExistsError unless ``force``;
    ``skipped`` or, with ``strict``, LedgerSourceError; nothing left behind on an error."""
    out = Path(out)
    summary = MarkdownSummary(out)
    with written_beside(out, force=force) as tmp, tmp.open("w", encoding="utf-8") as file:
        for conversation, session, _ in read_each(conversations, summary, strict):
            writer = _Writer()
            transcript = "\n".join(writer.conversation(conversation, session))
            file.write(("\n---\n\n" if summary.conversations else "") + transcript + "\n")
            summary.turns += writer.turns
    return summary
