"""Compaction's archive and log in the SQLite store: ``session_items_archive`` (the rows a
compaction replaced, with their ids) and ``sessiontape_compactions`` (one row each).

:func:`apply_compaction` is a compaction's one transaction in the file; what to compact is
decided in :mod:`~sessiontape.storage.skillet.compaction`, which every store shares (a
server's store has its own transaction: :mod:`sessiontape.storage.backends`).
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import orjson

from ..db import PAIR, connect, connect_readonly, immediate, tables
from ..tables import ARCHIVE_TABLE, COMPACTIONS_TABLE, CompactionInfo

__all__ = ["SCHEMA", "apply_compaction", "archived_rows"]

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {ARCHIVE_TABLE} (
  id INTEGER PRIMARY KEY,            -- the row's id in session_items
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  item_json TEXT NOT NULL,
  compaction_id TEXT NOT NULL );
CREATE INDEX IF NOT EXISTS idx_archive_session
  ON {ARCHIVE_TABLE} (user_id, session_name, created_at);
CREATE TABLE IF NOT EXISTS {COMPACTIONS_TABLE} (
  id TEXT PRIMARY KEY,               -- a ULID
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  reason TEXT NOT NULL,
  summarizer TEXT NOT NULL,
  items_before INTEGER NOT NULL,
  items_after INTEGER NOT NULL,
  tokens_before INTEGER NOT NULL,
  tokens_after INTEGER NOT NULL,
  archived INTEGER NOT NULL );
"""


def apply_compaction(path: Path, info: CompactionInfo, archived_ids: list[int],
                     replacement: list[str], read_ids: list[int] | None = None) -> bool:
    """Archive, delete and insert in one transaction; False if the rows changed meanwhile.

    ``read_ids`` are all the rows the plan was made from (default: the archived ones):
    if any of them is gone (popped, cleared), nothing is done.
    """
    ids = orjson.dumps(archived_ids).decode()
    read = read_ids if read_ids is not None else archived_ids
    in_ids = "id IN (SELECT value FROM json_each(?))"
    pair = (info.user_id, info.session_name)
    with closing(connect(path)) as conn:
        conn.executescript(SCHEMA)
        with immediate(conn):
            present = conn.execute(
                f"SELECT COUNT(*) FROM session_items WHERE {in_ids} AND {PAIR}",
                (orjson.dumps(read).decode(), *pair)).fetchone()[0]
            if present != len(read):  # popped or cleared since we read them: nothing written
                return False
            conn.execute(
                f"INSERT INTO {ARCHIVE_TABLE} (id, user_id, session_name, created_at, "
                "item_json, compaction_id) SELECT id, user_id, session_name, created_at, "
                f"item_json, ? FROM session_items WHERE {in_ids}", (info.id, ids))
            conn.execute(f"DELETE FROM session_items WHERE {in_ids}", (ids,))
            first = conn.execute(f"SELECT MIN(created_at) FROM session_items WHERE {PAIR}",
                                 pair).fetchone()[0]
            created = first - 1 if first is not None else info.at  # before every kept row
            conn.executemany(
                "INSERT INTO session_items (user_id, session_name, created_at, item_json) "
                "VALUES (?, ?, ?, ?)", [(*pair, created, text) for text in replacement])
            conn.execute(
                f"INSERT INTO {COMPACTIONS_TABLE} VALUES (?,?,?,?,?,?,?,?,?,?,?)", info.row())
    return True


def archived_rows(store_path: Path, user_id: str,
                  session_name: str) -> list[tuple[int, str, str]]:
    """The pair's archived rows ``(id, compaction_id, item_json)`` in order; reads only
    (``[]`` for a store never compacted)."""
    conn = connect_readonly(store_path)
    if conn is None:
        return []
    with closing(conn):
        if ARCHIVE_TABLE not in tables(conn):
            return []
        return conn.execute(f"SELECT id, compaction_id, item_json FROM {ARCHIVE_TABLE} "
                            f"WHERE {PAIR} ORDER BY created_at, id",
                            (user_id, session_name)).fetchall()
