"""What every export shares: reading each conversation in turn, and the summary it gives."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..catalog.conversation import (
    LedgerConversation,
    LedgerSourceError,
    Session,
    read_conversation,
)

__all__ = ["ExportSummary", "read_each"]


@dataclass
class ExportSummary:
    """What an export wrote (``conversations``; a format adds its counts) and what it could
    not: the conversations it left out and why (``skipped``), and what it read around
    (``problems``: bad lines, unreadable files)."""

    FORMAT: ClassVar[str]
    UNIT: ClassVar[str] = ""  # what a format counts in ``written``: ``event``, ``turn``...
    path: Path
    conversations: int = 0
    written: int = 0
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """The format's own counts, for :meth:`to_json`: ``{"events": written}``."""
        return {f"{self.UNIT}s": self.written} if self.UNIT else {}

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "format": self.FORMAT,
                "conversations": self.conversations, **self.counts(),
                "skipped": self.skipped, "problems": self.problems}


def read_each(conversations: Iterable[LedgerConversation], summary: ExportSummary,
              strict: bool) -> Iterator[tuple[LedgerConversation, Session, str]]:
    """Each conversation read (with where from: ``agentuse`` or ``log``), one at a time, and
    counted once the caller has written it. ``conversations`` may be any iterable (a list,
    or a generator streaming them from the catalog): each is taken from it only when the
    one before has been written, so only one conversation is held at a time. One with
    nothing to read is added to ``summary.skipped``, or with ``strict`` raises
    :class:`LedgerSourceError`."""
    for conversation in conversations:
        try:
            session, read_from = read_conversation(conversation, summary.problems)
        except LedgerSourceError as exc:
            if strict:
                raise
            summary.skipped.append(str(exc))
            continue
        yield conversation, session, read_from
        summary.conversations += 1
