"""Text shown to people, once for every place that shows it: the terminal, the transcripts.

:func:`printable` shows control characters as escapes, never to be acted on (recorded
names and outputs may hold escape sequences); :func:`cost_text` writes a cost in USD with
one precision everywhere.
"""

from __future__ import annotations

import re

__all__ = ["cost_text", "printable", "surrogates_escaped"]

# C0 and C1 controls but newline and tab (what a recorded text could use to act on a
# terminal), and lone surrogates (a text read from a JSON escape, which no terminal encodes);
# for a text that must stay on its line (a name), newline and tab too.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_UNPRINTABLE_IN_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with control characters shown as ``\\x1b`` escapes, never acted on by the
    terminal (recorded names and outputs may hold escape sequences), and lone surrogates as
    ``\\ud800``; keeps newlines and tabs, but with ``one_line`` (a name in a table cell or
    a message line) shows them as ``\\x0a`` and ``\\x09`` too."""
    return (_UNPRINTABLE_IN_LINE if one_line else _UNPRINTABLE).sub(_escape, text)


def surrogates_escaped(text: str) -> str:
    """``text`` with each lone surrogate (which no encoding writes) as its ``\\udXXX``
    escape, as :func:`printable` shows it, and nothing else changed."""
    return _SURROGATE.sub(_escape, text)


def cost_text(cost: float | None) -> str:
    """A cost in USD: ``$0.0123``, six places below a cent, ``-`` when unknown."""
    if cost is None:
        return "-"
    return f"${cost:.4f}" if cost >= 0.01 or cost == 0 else f"${cost:.6f}"
