"""A recorded conversation as one self-contained HTML page, to read on any screen.

The same transcript as :mod:`~sessiontape.storage.exports.markdown`, marked up: each turn
a section, each tool call a ``<details>`` (collapsed: its tool and how it ended in the
summary; its arguments, the subagent it ran, nested, and its result inside), tokens and
cost per turn. The page holds its style and needs nothing else: no script, no external
URL; a Content-Security-Policy forbids both, and every recorded text is escaped
(``html.escape``, control characters shown as escapes), so no record can add markup. It
fits a phone's width (long lines wrap, code scrolls inside its box).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from itertools import chain, islice
from pathlib import Path

from ..catalog.conversation import Exchange, LedgerConversation, Message, Session
from ..text import printable
from ..times import shown_time
from .output import written_beside
from .summary import read_each
from .transcript import TranscriptSummary, json_or_text, started, totals, turn_usage

__all__ = ["HtmlSummary", "export_html"]

_STYLE = """
:root { color-scheme: light dark; --line: #8884; --muted: #888; }
body { font: 16px/1.5 system-ui, sans-serif; margin: 0 auto; padding: 1rem;
       max-width: 52rem; overflow-wrap: anywhere; }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; } h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
.totals, .usage, .time { color: var(--muted); font-size: .9rem; }
.prompt { border-left: 3px solid #4a90d9; margin: .5rem 0; padding: .25rem .75rem; }
.text, .prompt { white-space: pre-wrap; }
.who { font-weight: 600; }
details { border: 1px solid var(--line); border-radius: 6px; margin: .5rem 0;
          padding: .25rem .75rem; }
summary { cursor: pointer; }
.failed > summary { color: #c0392b; }
pre { overflow-x: auto; background: #8881; padding: .5rem; border-radius: 4px;
      font-size: .85rem; white-space: pre; }
.subagent { border-left: 3px solid #8e44ad; margin: .5rem 0; padding-left: .75rem; }
"""
_POLICY = "default-src 'none'; style-src 'unsafe-inline'"


class HtmlSummary(TranscriptSummary):
    """What :func:`export_html` wrote, and what it could not read."""

    FORMAT = "html"


def _text(text: str) -> str:
    """Recorded text as HTML text: escaped, control characters shown as escapes."""
    return html.escape(printable(text))


def _pre(text: str, language: str = "") -> str:
    kind = f' class="language-{language}"' if language else ""
    return f"<pre><code{kind}>{_text(text)}</code></pre>"


class _Page:
    """The markup of one conversation."""

    def __init__(self) -> None:
        self.turns = 0

    def conversation(self, conversation: LedgerConversation, session: Session) -> str:
        said = totals(conversation, session)
        if conversation.user_id is not None:
            said.insert(0, f"user {conversation.user_id}")
        parts = [f"<article><header><h1>{_text(conversation.session_name)}</h1>",
                 f'<p class="totals">{_text(" · ".join(said))}</p></header>']
        for number, exchange in enumerate(session.exchanges, 1):
            self.turns += 1
            parts.append(f'<section class="turn"><h2>Turn {number} '
                         f'<span class="time">{shown_time(started(exchange))}</span></h2>')
            parts += self.exchange(exchange, session)
            usage = turn_usage(number, exchange)
            if usage is not None:
                parts.append(f'<p class="usage">{_text(usage)}</p>')
            parts.append("</section>")
        return "\n".join([*parts, "</article>"])

    def exchange(self, exchange: Exchange, session: Session) -> list[str]:
        return [markup for message in exchange.messages
                for markup in self.message(message, session)]

    def message(self, message: Message, session: Session) -> list[str]:
        call = message.call
        who = _text(str(message.metadata.get("agent") or session.agent or "agent"))
        if call is None:
            if message.role == "system" or not message.content:
                return []
            if message.role == "user":
                return [f'<div class="prompt">{_text(message.content)}</div>']
            if message.kind == "reasoning":
                return [f'<details class="reasoning"><summary><span class="who">{who}</span> '
                        f"reasoning</summary>{_pre(message.content)}</details>"]
            if message.kind not in ("text", None):
                return [f'<p class="note"><em>{_text(str(message.kind))}:</em> '
                        f"{_text(message.content)}</p>"]
            return [f'<p><span class="who">{who}</span></p>'
                    f'<div class="text">{_text(message.content)}</div>']
        name = _text(call.name or "?")
        ended = "failed" if call.failed else "returned" if call.result is not None \
            else "has not returned"
        inside = [_pre(*json_or_text(call.params))]
        if call.child is not None:
            child = call.child
            inside += [f'<div class="subagent"><p><span class="who">Subagent '
                       f"{_text(str(child.agent or '?'))}</span></p>",
                       *(markup for exchange in child.exchanges
                         for markup in self.exchange(exchange, child)), "</div>"]
        if call.failed:
            inside.append(_pre(call.error or call.result or ""))
        elif call.result is not None:
            inside.append(_pre(*json_or_text(call.result)))
        css = "call failed" if call.failed else "call"
        return [f'<details class="{css}"><summary><span class="who">{who}</span> calls '
                f"<code>{name}</code>: {ended}</summary>", *inside, "</details>"]


def _head(title: str) -> str:
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_text(title)}</title><style>{_STYLE}</style></head><body>", ""])


def export_html(out: Path, conversations: Iterable[LedgerConversation], *,
                force: bool = False, strict: bool = False) -> HtmlSummary:
    """Write ``conversations`` as one self-contained HTML page at ``out`` (mode 0600), each
    conversation written before the next is read. As the other exports: FileExistsError
    unless ``force``; ``skipped`` or, with ``strict``, LedgerSourceError; nothing left
    behind on an error."""
    out = Path(out)
    summary = HtmlSummary(out)
    conversations = iter(conversations)
    first = list(islice(conversations, 2))  # one conversation: the page is titled by it
    title = first[0].session_name if len(first) == 1 else "sessiontape"
    conversations = chain(first, conversations)
    with written_beside(out, force=force) as tmp, tmp.open("w", encoding="utf-8") as file:
        file.write(_head(title))
        for conversation, session, _ in read_each(conversations, summary, strict):
            page = _Page()
            file.write(page.conversation(conversation, session) + "\n")
            summary.written += page.turns
        file.write("</body></html>\n")
    return summary
