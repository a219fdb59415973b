"""Names of the tables sessiontape keeps beside ``session_items`` in the store file.

Kept apart from the modules that use them so that readers (the CLI) can name
and query them without importing the Agents SDK.
"""

from __future__ import annotations

from dataclasses import dataclass

ARCHIVE_TABLE = "session_items_archive"
COMPACTIONS_TABLE = "sessiontape_compactions"
LINKS_TABLE = "sessiontape_links"
# Every table that holds rows of a (user_id, session_name) pair: what a pair owns in the store.
PAIR_TABLES = ("session_items", ARCHIVE_TABLE, COMPACTIONS_TABLE, LINKS_TABLE)


def list_sessions_sql(by_user: bool, where: str | None = None) -> str:
    """Every ``(user_id, session_name)`` of ``session_items`` with its item count and
    first/last ``created_at``, newest first (one ``?`` for the user when ``by_user``;
    ``where``: a further condition on the rows, with its parameters after the user's)."""
    conditions = ["user_id = ?"] * by_user + ([where] if where else [])
    filtered = f"WHERE {' AND '.join(conditions)} " if conditions else ""
    return ("SELECT user_id, session_name, COUNT(*), MIN(created_at), MAX(created_at) "
            f"FROM session_items {filtered}GROUP BY user_id, session_name "
            "ORDER BY MAX(created_at) DESC, user_id, session_name")


@dataclass(frozen=True)
class StoredSession:
    """One ``(user_id, session_name)`` pair found in the store."""

    user_id: str
    session_name: str
    items: int
    first_ms: int
    last_ms: int


@dataclass(frozen=True)
class CompactionInfo:
    """What one compaction did (a row of ``sessiontape_compactions``: :meth:`row`)."""

    id: str
    user_id: str
    session_name: str
    reason: str  # "threshold" or "manual"
    summarizer: str
    items_before: int
    items_after: int
    tokens_before: int
    tokens_after: int
    archived: int
    at: int

    def row(self) -> tuple[str, str, str, int, str, str, int, int, int, int, int]:
        """Its row of ``sessiontape_compactions``, the columns in order."""
        return (self.id, self.user_id, self.session_name, self.at, self.reason,
                self.summarizer, self.items_before, self.items_after, self.tokens_before,
                self.tokens_after, self.archived)
