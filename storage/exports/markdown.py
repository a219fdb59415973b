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
from collections.abc import Iterable
from pathlib import Path

from ..catalog.conversation import (
    Exchange,
    LedgerConversation,
    Message,
    Session,
    read_conversation,
)
from ..text import printable
from ..times import shown_time
from .output import written_beside
from .summary import read_each
from .transcript import TranscriptSummary, json_or_text, started, totals, turn_usage

__all__ = ["MarkdownSummary", "export_markdown", "markdown_transcript"]

_BACKTICKS = re.compile("`+")


class MarkdownSummary(TranscriptSummary):
    """What :func:`export_markdown` wrote, and what it could not read."""

    FORMAT = "markdown"


# A line that would make a heading or a rule of recorded text: its first mark is escaped.
_BLOCK_MARK = re.compile(r"^( {0,3})(#|=+[ \t]*$|[-*_][-*_ \t]*$)", re.M)


def _prose(text: str) -> str:
    """Recorded text as Markdown prose: controls escaped, no HTML (``<`` escaped), and no
    heading or rule but the transcript's own (a line's leading ``#``, or a line of only
    ``=``, or of only ``-``, ``*``, ``_`` and blanks, escaped)."""
    return _BLOCK_MARK.sub(r"\1\\\2", printable(text).replace("<", "\\<"))


def _code(text: str, language: str = "") -> list[str]:
    """``text`` in a fenced code block whose fence no backtick run inside can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0) \
        if "`" in text else 0  # (most outputs have none: no scan)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", *printable(text).split("\n"), fence]


class _Writer:
    """The lines of one conversation's transcript."""

    def __init__(self) -> None:
        self.turns = 0

    def conversation(self, conversation: LedgerConversation, session: Session) -> list[str]:
        title = printable(conversation.session_name, one_line=True)
        user = conversation.user_id
        said = totals(conversation, session)
        if user is not None:
            said.insert(0, f"user `{printable(user, one_line=True)}`")
        lines = [f"# {_prose(title)}", "", _prose(" · ".join(said)), ""]
        for number, exchange in enumerate(session.exchanges, 1):
            self.turns += 1
            lines += [f"## Turn {number} · {shown_time(started(exchange))}", ""]
            lines += self.exchange(exchange, session)
            usage = turn_usage(number, exchange)
            if usage is not None:
                lines += [f"*{_prose(usage)}*", ""]
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
        arguments, language = json_or_text(call.params)
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
            result, language = json_or_text(call.result)
            lines += [f"`{name}` returned:", "", *_code(result, language), ""]
        else:
            lines += [f"`{name}` has not returned ({call.status or 'no result'}).", ""]
        return lines


def markdown_transcript(conversation: LedgerConversation, problems: list[str]) -> str:
    """The conversation as Markdown (LedgerSourceError: nothing to read it from); what was
    read around is added to ``problems``."""
    session, _ = read_conversation(conversation, problems)
    return "\n".join(_Writer().conversation(conversation, session))


def export_markdown(out: Path, conversations: Iterable[LedgerConversation], *,
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
            summary.written += writer.turns
    return summary
