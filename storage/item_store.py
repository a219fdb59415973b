"""The skillet SQLite item store: ``session_items`` in ``.agent_sessions.sqlite``.

:class:`ItemStore` owns one file (one ``aiosqlite`` connection, opened on
first use); :meth:`ItemStore.session` gives the Agents SDK ``Session`` for a
``(user_id, session_name)`` pair, whose ``session_id`` is
``"{user_id}:{session_name}"``.

Every write is a single SQL statement, so it is one transaction that either
happened or did not, even when the awaiting task is cancelled, and sessions
that share the connection cannot interleave partial transactions. The file
is in WAL mode with ``synchronous=NORMAL``: a commit survives a crash of the
process at once and a power loss after the next checkpoint (see
docs/reliability.md). Two processes may write the same file; SQLite's lock
and a busy timeout serialize them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import aiosqlite
import orjson
from agents.items import TResponseInputItem
from agents.memory import SessionABC, SessionSettings
from agents.memory.session_settings import resolve_session_limit

from .files import prepare_private_file
from .json_style import dumps_compact
from .paths import SkilletPaths
from .redaction import Redactor
from .tables import StoredSession, list_sessions_sql

__all__ = ["ItemStore", "ItemStoreSession", "StoredSession", "item_json", "loads_item"]

log = logging.getLogger("sessiontape")

SCHEMA = """
CREATE TABLE IF NOT EXISTS session_items (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  item_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_session ON session_items (user_id, session_name, created_at);
"""
BUSY_TIMEOUT_S = 30.0
# Rows per INSERT statement: the three shared values plus one per item must
# stay under SQLite's 32 766 host parameters.
MAX_ROWS_PER_STATEMENT = 32_000
ORDER_ASC = "ORDER BY created_at, id"
ORDER_DESC = "ORDER BY created_at DESC, id DESC"
WHERE_PAIR = "WHERE user_id = ? AND session_name = ?"


@lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    values = ",".join(f"(?1,?2,?3,?{n})" for n in range(4, rows + 4))
    return ("INSERT INTO session_items (user_id, session_name, created_at, item_json) "
            f"VALUES {values}")


def item_json(item: Any) -> str:
    """One input item as compact JSON (orjson; the careful encoder for odd values)."""
    try:
        return orjson.dumps(item).decode()
    except (TypeError, orjson.JSONEncodeError):
        return dumps_compact(item).decode()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_item(text: str | bytes) -> Any:
    """One stored item; ValueError when the row is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # orjson refuses a lone surrogate escape ("\\ud800"), which JSON.stringify and
        # item_json write for a string holding one; the stdlib parser reads it.
        return json.loads(text, parse_constant=_refuse_constant)


class ItemStore:
    """One ``.agent_sessions.sqlite`` file.

    ``path`` defaults to ``SkilletPaths.resolve().store_file``. With
    ``readonly=True`` the file is opened read-only and never changed (for a
    store another tool owns, or one on a read-only disk).
    """

    def __init__(self, path: Path | str | None = None, *, readonly: bool = False) -> None:
        self.path = Path(path) if path is not None else SkilletPaths.resolve().store_file
        self.readonly = readonly
        self._ready: asyncio.Future[aiosqlite.Connection] | None = None
        self._worker: threading.Thread | None = None

    def _open_sync(self) -> sqlite3.Connection:
        """Open and prepare the file (runs on the connection's worker thread)."""
        if self.readonly:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S)
            conn.execute("SELECT 1 FROM session_items LIMIT 1")  # a clear error if it is absent
            return conn
        prepare_private_file(self.path)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S,
                               check_same_thread=False)
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:  # switching to WAL needs a moment alone with the file
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(SCHEMA)
        return conn

    async def _db(self) -> aiosqlite.Connection:
        ready = self._ready
        if ready is not None and ready.done() and not ready.cancelled() \
                and ready.exception() is None:
            return ready.result()
        if ready is None or ready.done():  # no attempt yet, or one cut short by a cancel
            conn = aiosqlite.Connection(self._open_sync, 64)
            # A Session handed to the SDK's Runner is never closed, and aiosqlite's
            # worker thread would then hold up interpreter exit forever.
            conn._thread.daemon = True
            ready = self._ready = asyncio.ensure_future(conn)
            self._worker = conn._thread
        worker = self._worker
        try:
            return await asyncio.shield(ready)
        except BaseException:
            # Every caller waiting on a failed open gets here: only the attempt
            # that failed is forgotten, so the next call tries again.
            if ready.done() and (ready.cancelled() or ready.exception() is not None):
                if self._ready is ready:
                    self._ready = None
                # aiosqlite has queued the worker's stop; let it end while this loop
                # runs, or it dies with a traceback posting to a closed loop. (The
                # worker is a thread: there is no asyncio.Event to await, hence noqa.)
                deadline = time.monotonic() + 1.0
                while worker is not None and worker.is_alive() and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.001)
            raise

    async def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Run one statement and return its rows (one round trip to the worker)."""
        db = await self._db()
        return list(await db.execute_fetchall(sql, params))

    async def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        ready = self._ready
        if ready is not None and ready.done() and not ready.cancelled() and not ready.exception():
            await ready.result().close()
        self._ready = None

    async def __aenter__(self) -> ItemStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def session(self, user_id: str, session_name: str,
                session_settings: SessionSettings | None = None,
                redactor: Redactor | None = None) -> ItemStoreSession:
        """The SDK ``Session`` for ``(user_id, session_name)`` in this file.

        With a ``redactor``, secrets are removed from items before they are stored.
        """
        return ItemStoreSession(self, user_id, session_name, session_settings, redactor)

    async def list_sessions(self, user_id: str | None = None) -> list[StoredSession]:
        """Every pair with its item count and first/last ``created_at``, newest first."""
        params = (user_id,) if user_id is not None else ()
        rows = await self.execute(list_sessions_sql(user_id is not None), params)
        return [StoredSession(*row) for row in rows]


class ItemStoreSession(SessionABC):
    """The Agents SDK ``Session`` over one pair's rows of an :class:`ItemStore`."""

    def __init__(self, store: ItemStore, user_id: str, session_name: str,
                 session_settings: SessionSettings | None = None,
                 redactor: Redactor | None = None) -> None:
        self.store = store
        self.redactor = redactor
        self.user_id = user_id
        self.session_name = session_name
        self.session_id = f"{user_id}:{session_name}"
        self.session_settings = session_settings

    def _decode(self, rows: list[sqlite3.Row]) -> list[TResponseInputItem]:
        items = []
        for (text,) in rows:
            try:
                items.append(loads_item(text))
            except ValueError:
                log.warning("skipping an item of %s that is not JSON: %.80r", self.session_id, text)
        return items

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """All items in order, or the latest ``limit`` of them (still in order)."""
        limit = resolve_session_limit(limit, self.session_settings)
        pair = (self.user_id, self.session_name)
        if limit is None:
            # SQLite joins the rows into one JSON array (the ordered subquery is
            # not flattened into the aggregate, so the order holds), which spares
            # Python a tuple per row; a row that is not JSON falls back to rows.
            # So does an array whose length is not the row count: a damaged row
            # such as '1,2' can still join into valid JSON.
            rows = await self.store.execute(
                "SELECT '[' || group_concat(item_json, ',') || ']', COUNT(*) FROM "
                f"(SELECT item_json FROM session_items {WHERE_PAIR} {ORDER_ASC})", pair)
            joined, count = rows[0]
            if joined is None:
                return []
            try:
                items = orjson.loads(joined)
            except orjson.JSONDecodeError:
                items = None
            if isinstance(items, list) and len(items) == count:
                return items
            rows = await self.store.execute(
                f"SELECT item_json FROM session_items {WHERE_PAIR} {ORDER_ASC}", pair)
            return self._decode(rows)
        if limit <= 0:
            return []
        rows = await self.store.execute(
            f"SELECT item_json FROM session_items {WHERE_PAIR} {ORDER_DESC} LIMIT ?",
            (*pair, limit))
        return self._decode(rows[::-1])

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in one transaction; they share one ``created_at`` (Unix ms)."""
        if not items:
            return
        created = time.time_ns() // 1_000_000
        if self.redactor is not None:
            items = self.redactor.value(items)
        encoded = [item_json(item) for item in items]
        # A batch of over 32 000 items is split into several statements (not atomic).
        for start in range(0, len(encoded), MAX_ROWS_PER_STATEMENT):
            chunk = encoded[start:start + MAX_ROWS_PER_STATEMENT]
            await self.store.execute(_insert_sql(len(chunk)),
                                     (self.user_id, self.session_name, created, *chunk))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the most recent item (None when there is none)."""
        rows = await self.store.execute(
            "DELETE FROM session_items WHERE id = (SELECT id FROM session_items "
            f"{WHERE_PAIR} {ORDER_DESC} LIMIT 1) RETURNING item_json",
            (self.user_id, self.session_name))
        items = self._decode(rows)
        return items[0] if items else None

    async def clear_session(self) -> None:
        """Delete every item of this pair."""
        await self.store.execute(f"DELETE FROM session_items {WHERE_PAIR}",
                                 (self.user_id, self.session_name))
