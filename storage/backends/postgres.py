"""PostgreSQL: one store shared by many hosts (the ``postgres`` extra: psycopg 3 and its pool).

Every connection to a PostgreSQL store is opened here, and its schema kept here:

* ``session_items`` has the SQLite store's columns and holds the same item JSON (text, byte
  for byte), so rows move between the two (``sessiontape store copy``);
  ``session_items_archive``, ``sessiontape_compactions`` and ``sessiontape_links`` too;
* ``sessiontape_log`` holds the replay log's lines, each as the line a JSONL log has, with a
  sequence number per conversation and the host that wrote it; every append is announced
  with ``NOTIFY sessiontape_log`` (``log stream --store`` follows it:
  :mod:`sessiontape.storage.backends.postgres_log`).

:class:`PostgresStore` is a :class:`~sessiontape.storage.skillet.item_store.RowStore`: the
SDK ``Session`` over it is the SQLite store's own
:class:`~sessiontape.storage.skillet.item_store.ItemStoreSession` (every conversion between
the SDKs' shapes is there), and compaction, the links and the recorder use it as they use
the file.

Connections. One ``psycopg_pool.AsyncConnectionPool`` per store, on an event loop of the
store's own (a daemon thread): sessions are awaited from any event loop (each
``run_sync`` has a new one), and the recorder's writer thread waits on the same pool. A
connection the server dropped (a restart) is discarded by the pool; a statement that met
one before anything was committed is tried once more on a fresh connection, so a restart
between two runs costs nothing. One that fails again raises :class:`StoreUnavailable` (an
``OSError``: the recorder reports it and the run goes on); the items and log lines of a
write that failed are kept and written first by the next write of the same conversation.

Migrations are versioned (``sessiontape_migrations``) and applied on first use inside one
transaction that holds an advisory lock: two hosts starting at once apply them once.

The URL's password is never in a message: :func:`redacted` is how a store is named.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import orjson
import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..json_style import dumps_compact
from ..names import safe_join, sanitize_agent_name
from ..paths import AgentUseRoots
from ..skillet.item_rows import Shared, Snapshots, decode_rows, read_joined
from ..skillet.links import find_linked_dir, new_session_dir
from ..tables import (
    ARCHIVE_TABLE,
    COMPACTIONS_TABLE,
    LINKS_TABLE,
    CompactionInfo,
    StoredSession,
)
from . import is_store_url

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

    from ..redaction import Redactor
    from ..skillet.item_store import ItemStoreSession

__all__ = ["LOG_CHANNEL", "LOG_TABLE", "MIGRATIONS", "ConversationExists", "PostgresLog",
           "PostgresStore", "StoreUnavailable", "add_conversation", "delete_conversations",
           "redacted", "rename_conversation", "scrubbed", "store_facts"]

log = logging.getLogger("sessiontape")

LOG_TABLE = "sessiontape_log"
LOG_CHANNEL = "sessiontape_log"  # NOTIFY channel: payload [user_id, session_name, last seq]
MAX_NOTIFY_BYTES = 7900  # PostgreSQL's payload limit is 8000 bytes
MIGRATION_LOCK = 0x5E55_1074  # the advisory lock migrations hold (any constant of ours)
MAX_PENDING = 100_000  # items or log lines of one conversation kept for the next write
CONNECT_TIMEOUT_S = 10  # to open a connection
READ_WAIT_S = 5.0  # for a pooled connection, to read (a run's history: worth waiting for)
WRITE_WAIT_S = 1.0  # for a pooled connection, to write (kept and sent later when it fails)
RETRY_AFTER_S = 1.0  # after a failure, writes fail at once for this long

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "the item store, compaction, links and the replay log", f"""
CREATE TABLE IF NOT EXISTS session_items (
  id BIGSERIAL PRIMARY KEY,
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  item_json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS idx_session ON session_items (user_id, session_name, created_at, id);
CREATE TABLE IF NOT EXISTS sessiontape_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO sessiontape_meta (key, value) VALUES ('format', 'sessiontape-store/1')
  ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS {ARCHIVE_TABLE} (
  id BIGINT PRIMARY KEY,
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  item_json TEXT NOT NULL,
  compaction_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS idx_archive_session ON {ARCHIVE_TABLE} (user_id, session_name,
  created_at);
CREATE TABLE IF NOT EXISTS {COMPACTIONS_TABLE} (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  reason TEXT NOT NULL,
  summarizer TEXT NOT NULL,
  items_before INTEGER NOT NULL,
  items_after INTEGER NOT NULL,
  tokens_before INTEGER NOT NULL,
  tokens_after INTEGER NOT NULL,
  archived INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS {LINKS_TABLE} (
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  agentuse_dir TEXT NOT NULL,
  PRIMARY KEY (user_id, session_name));
CREATE TABLE IF NOT EXISTS {LOG_TABLE} (
  id BIGSERIAL PRIMARY KEY,
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  seq BIGINT NOT NULL,
  host TEXT NOT NULL,
  written_at BIGINT NOT NULL,
  entry TEXT NOT NULL,
  UNIQUE (user_id, session_name, seq));
"""),
)

PAIR = "user_id = %s AND session_name = %s"
ORDER = "ORDER BY created_at, id"

T = TypeVar("T")


class StoreUnavailable(OSError):
    """The PostgreSQL server could not be reached, or refused a statement; the message names
    the store by :func:`redacted` URL, never with its password."""


def _passwords(url: str) -> list[str]:
    """The passwords ``url`` holds: in its user part, or as a ``password`` parameter."""
    parts = urlsplit(url)
    found = [value for key, value in parse_qsl(parts.query) if key == "password" and value]
    return ([unquote(parts.password)] if parts.password else []) + found


def redacted(url: str) -> str:
    """``url`` without its password (``postgresql://user:***@host/db``, and ``password=***``
    among its parameters); what messages show."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    if "password=" in parts.query:
        parts = parts._replace(query=re.sub(r"(^|&)password=[^&]*", r"\1password=***",
                                            parts.query))
    return urlunsplit(parts)


def scrubbed(text: str, url: str) -> str:
    """``text`` with every password of ``url`` in it replaced by ``***``."""
    for password in _passwords(url):
        text = text.replace(password, "***")
    return text


class _StoreLoop:
    """An event loop on a daemon thread of its own, where a store's pool lives."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coro: Awaitable[T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


_SHARED: Shared[str, PostgresStore] = Shared()  # PostgresStore.shared's stores, by URL


class PostgresStore:
    """The item store, its archive, the links and the replay log's lines in one PostgreSQL
    database (see the module doc). Opened on first use; :meth:`shared` gives the one store
    of a URL that every user in the process shares."""

    @classmethod
    def shared(cls, url: str) -> PostgresStore:
        """The process's one store for ``url``; :meth:`release` gives the share back."""
        return _SHARED.take(url, lambda: cls(url))

    async def release(self) -> None:
        """Give back a share taken by :meth:`shared`; the last one closes the store."""
        if _SHARED.give_back(self.url, self):
            await self.close()

    def __init__(self, url: str, *, max_connections: int = 8) -> None:
        if not is_store_url(url):
            raise ValueError(f"not a PostgreSQL URL: {redacted(url)!r}")
        self.url = url
        self.max_connections = max_connections
        self.reported: set[int] = set()  # bad rows already reported (by row id)
        self.host = socket.gethostname()
        self._lock = threading.Lock()
        self._loop: _StoreLoop | None = None
        self._pool: AsyncConnectionPool | None = None
        self._opening: asyncio.Future[AsyncConnectionPool] | None = None
        self._pending: dict[tuple[str, str], tuple[int, list[str]]] = {}  # items to write
        self._down_until = 0.0  # monotonic time before which writes fail at once
        self.snapshots = Snapshots()  # the pairs read lately (see pair_items)

    @property
    def where(self) -> str:
        return redacted(self.url)

    def holds_data(self) -> bool:
        return True  # a server's store: a history that cannot be read is never taken as none

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    # -- connections ----------------------------------------------------------------

    def _store_loop(self) -> _StoreLoop:
        with self._lock:
            if self._loop is None:
                self._loop = _StoreLoop(f"sessiontape-postgres {self.where}")
            return self._loop

    async def _get_pool(self) -> AsyncConnectionPool:
        """The pool, opened and the schema migrated on first use (on the store's loop)."""
        if self._pool is not None:
            return self._pool
        if self._opening is None or (self._opening.done() and self._opening.exception()):
            self._opening = asyncio.ensure_future(self._open())
        return await asyncio.shield(self._opening)

    async def _open(self) -> AsyncConnectionPool:
        # One connection first: a server out of reach says so at once (the pool would
        # retry in the background), and the schema is brought up to date.
        async with await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                application_name="sessiontape") as conn:
            await migrate(conn)
        pool = AsyncConnectionPool(
            self.url, min_size=1, max_size=self.max_connections, open=False,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S,
                    "application_name": "sessiontape"},
            timeout=READ_WAIT_S, name="sessiontape")
        await pool.open(wait=False)
        self._pool = pool
        return pool

    def _failure(self, exc: BaseException) -> StoreUnavailable:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreUnavailable(f"PostgreSQL store {self.where}: {scrubbed(text, self.url)}")

    async def _with_connection(self, work: Callable[[psycopg.AsyncConnection[Any]],
                                                    Awaitable[T]], wait: float) -> T:
        """Run ``work`` with a pooled connection (on the store's loop), waiting at most
        ``wait`` seconds for one. A connection that fails before ``work`` could commit
        anything is replaced and ``work`` tried once more (see the module doc); psycopg's
        errors leave as :class:`StoreUnavailable`."""
        for attempt in range(2):
            try:
                pool = await self._get_pool()
                async with pool.connection(timeout=wait) as conn:
                    return await work(conn)
            except psycopg.OperationalError as exc:
                if attempt or not _dropped(exc):
                    raise self._failure(exc) from None
                if self._pool is not None:  # the others the server dropped go too
                    await self._pool.check()
            except (psycopg.Error, PoolTimeout, OSError) as exc:
                if isinstance(exc, StoreUnavailable):
                    raise
                raise self._failure(exc) from None
        raise AssertionError("unreachable")

    def _submit(self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
                write: bool) -> Future[T]:
        """``work`` on the store's loop. A write while the server is known to be out of
        reach fails at once (:data:`RETRY_AFTER_S` after the last failure it is tried
        again): a run is never held up waiting for a server that is down."""
        if write and time.monotonic() < self._down_until:
            raise StoreUnavailable(f"PostgreSQL store {self.where}: out of reach (tried again "
                                   f"at the next write after {RETRY_AFTER_S:g} s)")
        future = self._store_loop().submit(
            self._with_connection(work, WRITE_WAIT_S if write else READ_WAIT_S))
        future.add_done_callback(self._note_outcome)
        return future

    def _note_outcome(self, future: Future[Any]) -> None:
        failed = not future.cancelled() and isinstance(future.exception(), StoreUnavailable)
        self._down_until = time.monotonic() + RETRY_AFTER_S if failed else 0.0

    async def _run(self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
                   *, write: bool = False) -> T:
        """``work`` on the store's loop, awaited from any loop. Cancelling the caller does
        not cut a statement short (it ends on the store's loop)."""
        return await asyncio.shield(asyncio.wrap_future(self._submit(work, write)))

    def run_sync(self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]], *,
                 write: bool = False) -> T:
        """``work`` from a thread without an event loop (the recorder's writer)."""
        return self._submit(work, write).result()

    def prepare(self) -> None:
        """Connect and bring the schema up to date now (from a thread without an event
        loop); StoreUnavailable when the server cannot be reached."""
        self.run_sync(_connected)

    async def close(self) -> None:
        """Close the pool and its loop (a later call opens them again)."""
        await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        """:meth:`close` from a thread without an event loop."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        pool, self._pool, self._opening = self._pool, None, None
        if pool is not None:
            loop.submit(pool.close()).result()
        loop.stop()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the SDK session and the listing --------------------------------------------

    def session(self, user_id: str, session_name: str,
                session_settings: SessionSettings | None = None,
                redactor: Redactor | None = None) -> ItemStoreSession:
        """The SDK ``Session`` for ``(user_id, session_name)`` in this database."""
        from ..skillet.item_store import ItemStoreSession  # (the Agents SDK: loaded here)

        return ItemStoreSession(self, user_id, session_name, session_settings, redactor)

    async def list_sessions(self, user_id: str | None = None) -> list[StoredSession]:
        """Every pair with its item count and first/last ``created_at``, newest first."""
        async def work(conn: psycopg.AsyncConnection[Any]) -> list[StoredSession]:
            where, params = ("WHERE user_id = %s ", (user_id,)) if user_id is not None else ("", ())
            cur = await conn.execute(
                "SELECT user_id, session_name, COUNT(*), MIN(created_at), MAX(created_at) "
                f"FROM session_items {where}GROUP BY user_id, session_name "
                "ORDER BY MAX(created_at) DESC, user_id, session_name", params)
            return [StoredSession(*row) for row in await cur.fetchall()]
        return await self._run(work)

    # -- the rows of one pair (RowStore) --------------------------------------------

    async def pair_rows(self, user_id: str, session_name: str) -> list[tuple[int, str]]:
        await self._write_pending(user_id, session_name)

        async def work(conn: psycopg.AsyncConnection[Any]) -> list[tuple[int, str]]:
            cur = await conn.execute(f"SELECT id, item_json FROM session_items WHERE {PAIR} "
                                     f"{ORDER}", (user_id, session_name))
            return [(row[0], row[1]) for row in await cur.fetchall()]
        return await self._run(work)

    async def pair_items(self, user_id: str, session_name: str, limit: int | None,
                         where: str) -> list[TResponseInputItem]:
        """The pair's items as the Python SDK's (the latest ``limit``), in order. A full read
        converts only the rows added since the last one, as the file store does
        (:class:`~sessiontape.storage.skillet.item_store.Snapshot`): a row another host
        committed out of id order, or deleted, is seen by the count and read whole."""
        await self._write_pending(user_id, session_name)
        pair = (user_id, session_name)
        snapshot = None if limit is not None else self.snapshots.get(pair)
        if snapshot is not None:
            last_id = snapshot.last_id

            async def since(conn: psycopg.AsyncConnection[Any]) -> list[tuple[Any, ...]]:
                cur = await conn.execute(
                    "SELECT id, item_json, (SELECT COUNT(*) FROM session_items "
                    f"WHERE {PAIR} AND id <= %s) FROM session_items WHERE {PAIR} "
                    f"AND id >= %s {ORDER}", (*pair, last_id, *pair, last_id))
                return list(await cur.fetchall())
            items = self.snapshots.follow(snapshot, await self._run(since), where,
                                          self.reported)
            if items is not None:
                return items
        latest = "" if limit is None else f" ORDER BY created_at DESC, id DESC LIMIT {int(limit)}"

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[tuple[int, str]]:
            cur = await conn.execute(
                "SELECT id, item_json FROM (SELECT id, item_json, created_at FROM "
                f"session_items WHERE {PAIR}{latest}) AS r {ORDER}", pair)
            return [(row[0], row[1]) for row in await cur.fetchall()]
        rows = await self._run(read)
        if not rows:
            self.snapshots.forget(pair)
            return []
        # One JSON text of every row (one parse), else each row on its own (and reported).
        items = read_joined("[" + ",".join(text for _, text in rows) + "]", len(rows))
        if items is None:
            items = [item for _, item in decode_rows(rows, where, self.reported)]
        if limit is None:
            self.snapshots.remember(pair, items, len(rows), rows[-1][0],
                                    max(row_id for row_id, _ in rows))
        return items

    async def insert_rows(self, user_id: str, session_name: str, created: int,
                          encoded: list[str], *, at_once: bool = True) -> None:
        """Append the rows in one statement, after those of a write that failed (kept).
        ``at_once``: fail at once while the server is known to be out of reach (else try)."""
        pair = (user_id, session_name)
        with self._lock:
            earlier = self._pending.pop(pair, None)
        batches = ([earlier] if earlier else []) + [(created, encoded)]

        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(
                "INSERT INTO session_items (user_id, session_name, created_at, item_json) "
                "SELECT %s, %s, c, j FROM unnest(%s::bigint[], %s::text[]) "
                "WITH ORDINALITY AS r(c, j, n) ORDER BY n",
                (*pair, [c for c, texts in batches for _ in texts],
                 [text for _, texts in batches for text in texts]))
        try:
            await self._run(work, write=at_once)
        except StoreUnavailable:
            kept = [text for _, texts in batches for text in texts]
            dropped = max(0, len(kept) - MAX_PENDING)
            if dropped:
                log.warning("sessiontape: %s/%s: %d stored items dropped (%s unreachable "
                            "for too long)", user_id, session_name, dropped, self.where)
            with self._lock:  # one created_at for all kept: they are written as one batch
                self._pending[pair] = (batches[0][0], kept[dropped:])
            raise

    async def _write_pending(self, user_id: str, session_name: str) -> None:
        """Write the items a failed write kept, before anything reads the pair."""
        if (user_id, session_name) in self._pending:  # written now, or kept again
            await self.insert_rows(user_id, session_name, 0, [], at_once=False)

    async def call_rows(self, user_id: str, session_name: str,
                        call_id: str) -> list[tuple[int, str]]:
        quoted = orjson.dumps(call_id).decode()

        async def work(conn: psycopg.AsyncConnection[Any]) -> list[tuple[int, str]]:
            cur = await conn.execute(
                f"SELECT id, item_json FROM session_items WHERE {PAIR} AND "
                "(strpos(item_json, %s) > 0 OR strpos(item_json, %s) > 0) "
                "ORDER BY id DESC LIMIT 8",
                (user_id, session_name, f'"callId":{quoted}', f'"call_id":{quoted}'))
            return [(row[0], row[1]) for row in await cur.fetchall()]
        return await self._run(work)

    async def pop_row(self, user_id: str, session_name: str) -> tuple[int, int, str] | None:
        await self._write_pending(user_id, session_name)

        async def work(conn: psycopg.AsyncConnection[Any]) -> tuple[int, int, str] | None:
            cur = await conn.execute(
                "DELETE FROM session_items WHERE id = (SELECT id FROM session_items "
                f"WHERE {PAIR} AND ltrim(item_json, E' \\t\\n\\r') LIKE '{{%%' "
                "ORDER BY created_at DESC, id DESC LIMIT 1) RETURNING id, created_at, item_json",
                (user_id, session_name))
            row = await cur.fetchone()
            return (row[0], row[1], row[2]) if row is not None else None
        return await self._run(work, write=True)

    async def restore_row(self, user_id: str, session_name: str,
                          row: tuple[int, int, str]) -> None:
        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(
                "INSERT INTO session_items (id, user_id, session_name, created_at, item_json) "
                "VALUES (%s, %s, %s, %s, %s)", (row[0], user_id, session_name, row[1], row[2]))
        await self._run(work, write=True)

    async def delete_pair(self, user_id: str, session_name: str) -> None:
        with self._lock:
            self._pending.pop((user_id, session_name), None)
        self.snapshots.forget((user_id, session_name))

        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(f"DELETE FROM session_items WHERE {PAIR}", (user_id, session_name))
        await self._run(work, write=True)

    async def replace_rows(self, info: CompactionInfo, archived_ids: list[int],
                           replacement: list[str], read_ids: list[int]) -> bool:
        """Compaction's archive, delete and insert in one transaction (as the SQLite
        store's :func:`~sessiontape.storage.skillet.archive.apply_compaction`)."""
        pair = (info.user_id, info.session_name)

        async def work(conn: psycopg.AsyncConnection[Any]) -> bool:
            async with conn.transaction():
                cur = await conn.execute(
                    f"SELECT id FROM session_items WHERE id = ANY(%s) AND {PAIR} FOR UPDATE",
                    (read_ids, *pair))
                if len(await cur.fetchall()) != len(read_ids):
                    return False  # popped or cleared since they were read: nothing written
                await conn.execute(
                    f"INSERT INTO {ARCHIVE_TABLE} (id, user_id, session_name, created_at, "
                    "item_json, compaction_id) SELECT id, user_id, session_name, created_at, "
                    "item_json, %s FROM session_items WHERE id = ANY(%s)",
                    (info.id, archived_ids))
                await conn.execute("DELETE FROM session_items WHERE id = ANY(%s)",
                                   (archived_ids,))
                cur = await conn.execute(
                    f"SELECT MIN(created_at) FROM session_items WHERE {PAIR}", pair)
                first = (await cur.fetchone() or (None,))[0]
                created = first - 1 if first is not None else info.at
                await conn.execute(
                    "INSERT INTO session_items (user_id, session_name, created_at, item_json) "
                    "SELECT %s, %s, %s, j FROM unnest(%s::text[]) WITH ORDINALITY AS r(j, n) "
                    "ORDER BY n", (*pair, created, replacement))
                await conn.execute(
                    f"INSERT INTO {COMPACTIONS_TABLE} VALUES "
                    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", info.row())
            return True
        return await self._run(work, write=True)

    async def archived_rows(self, user_id: str,
                            session_name: str) -> list[tuple[int, str, str]]:
        async def work(conn: psycopg.AsyncConnection[Any]) -> list[tuple[int, str, str]]:
            cur = await conn.execute(
                f"SELECT id, compaction_id, item_json FROM {ARCHIVE_TABLE} WHERE {PAIR} "
                f"{ORDER}", (user_id, session_name))
            return [(row[0], row[1], row[2]) for row in await cur.fetchall()]
        return await self._run(work)

    # -- links (called on the writer thread) ----------------------------------------

    def agentuse_dir_for(self, user_id: str, session_name: str, sessions_root: Path,
                         agent_name: str) -> Path:
        """The pair's AgentUse directory, linked on first use by whichever host records
        it first; a host on which it is not (another machine's path) writes it where that
        host's AgentUse root has it (:func:`~.skillet.links.find_linked_dir`), under the
        same name, so each host's tree of the conversation has one name."""
        pair = (user_id, session_name)
        new = new_session_dir(sessions_root, sanitize_agent_name(agent_name))

        async def work(conn: psycopg.AsyncConnection[Any]) -> str:
            cur = await conn.execute(
                f"INSERT INTO {LINKS_TABLE} VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (*pair, new))
            cur = await conn.execute(f"SELECT agentuse_dir FROM {LINKS_TABLE} WHERE {PAIR}",
                                     pair)
            row = await cur.fetchone()
            assert row is not None
            return str(row[0])
        linked = self.run_sync(work, write=True)
        return _here(linked, sessions_root)

    def find_agentuse_dir(self, user_id: str, session_name: str,
                          sessions_root: Path | None = None) -> Path | None:
        async def work(conn: psycopg.AsyncConnection[Any]) -> str | None:
            cur = await conn.execute(f"SELECT agentuse_dir FROM {LINKS_TABLE} WHERE {PAIR}",
                                     (user_id, session_name))
            row = await cur.fetchone()
            return None if row is None else str(row[0])
        linked = self.run_sync(work)
        if linked is None:
            return None
        return _here(linked, sessions_root) if sessions_root is not None else Path(linked)

    def links(self) -> dict[tuple[str, str], str]:
        """Every conversation's linked AgentUse directory, as linked (one query)."""
        async def work(conn: psycopg.AsyncConnection[Any]) -> dict[tuple[str, str], str]:
            cur = await conn.execute(
                f"SELECT user_id, session_name, agentuse_dir FROM {LINKS_TABLE}")
            return {(row[0], row[1]): str(row[2]) for row in await cur.fetchall()}
        return self.run_sync(work)

    # -- the replay log's lines -----------------------------------------------------

    def log_copy(self, user_id: str, session_name: str) -> PostgresLog:
        """The conversation's replay log lines in this database (the recorder writes them
        beside its JSONL file)."""
        return PostgresLog(self, user_id, session_name)


async def _connected(conn: psycopg.AsyncConnection[Any]) -> None:
    return None


def _here(linked: str, sessions_root: Path) -> Path:
    """Where the linked directory is on this host: itself when it is in this host's
    AgentUse roots (or found moved), else its name under ``sessions_root``."""
    found = find_linked_dir(linked, AgentUseRoots.today(sessions_root))
    return Path(found) if found is not None else safe_join(sessions_root, Path(linked).name)


def _dropped(exc: psycopg.OperationalError) -> bool:
    """Whether the connection was gone before the statement (the server restarted): then
    nothing was done, and a fresh connection may try again."""
    text = str(exc)
    return any(sign in text for sign in (
        "server closed the connection", "terminating connection", "connection is closed",
        "the connection is lost", "consuming input failed", "sending query failed",
        "connection is bad", "SSL connection has been closed"))


async def migrate(conn: psycopg.AsyncConnection[Any]) -> int:
    """Apply the migrations this database lacks, under an advisory lock; the schema version."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute("CREATE TABLE IF NOT EXISTS sessiontape_migrations (version INTEGER "
                           "PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)")
        cur = await conn.execute("SELECT version FROM sessiontape_migrations")
        done = {row[0] for row in await cur.fetchall()}
        known = {version for version, _, _ in MIGRATIONS}
        newer = done - known
        if newer:
            raise psycopg.errors.FeatureNotSupported(
                f"its schema is version {max(newer)}, newer than this sessiontape knows "
                f"({max(known)}): upgrade sessiontape")
        for version, name, script in MIGRATIONS:
            if version not in done:
                await conn.execute(script.encode())
                await conn.execute("INSERT INTO sessiontape_migrations VALUES (%s, %s, %s)",
                                   (version, name, time.time_ns() // 1_000_000))
    return max(known)


class PostgresLog:
    """One conversation's replay log lines in ``sessiontape_log`` (the lines its JSONL
    file has), appended by the recorder's writer thread beside the file.

    Each append is one transaction: its lines get the conversation's next sequence
    numbers (under a per-conversation advisory lock, so they commit in order) and a
    ``NOTIFY`` says so. Lines of an append that failed (the server is down) are kept and
    sent first by the next one; :meth:`append_many` with no lines sends only those.
    """

    def __init__(self, store: PostgresStore, user_id: str, session_name: str) -> None:
        self.store = store
        self.user_id = user_id
        self.session_name = session_name
        self._pending: list[str] = []

    @property
    def pending(self) -> int:
        """Lines kept from appends that failed, to be sent by the next one."""
        return len(self._pending)

    def append_many(self, entries: Sequence[dict[str, Any]]) -> None:
        """Append ``entries`` (after any kept); StoreUnavailable when they could not be."""
        lines = self._pending + [dumps_compact(entry).decode() for entry in entries]
        if not lines:
            return
        pair = (self.user_id, self.session_name)
        now = time.time_ns() // 1_000_000

        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))",
                                   (f"{self.user_id}\x1f{self.session_name}",))
                cur = await conn.execute(
                    f"INSERT INTO {LOG_TABLE} (user_id, session_name, seq, host, written_at, "
                    "entry) SELECT %s, %s, base.seq + n, %s, %s, e "
                    f"FROM (SELECT COALESCE(MAX(seq), 0) AS seq FROM {LOG_TABLE} "
                    f"WHERE {PAIR}) AS base, unnest(%s::text[]) WITH ORDINALITY AS r(e, n) "
                    "ORDER BY n RETURNING id, seq",
                    (*pair, self.store.host, now, *pair, lines))
                written = await cur.fetchall()
                last_id = max(row[0] for row in written)
                last_seq = max(row[1] for row in written)
                note = orjson.dumps([*pair, last_seq]).decode()
                if len(note.encode()) > MAX_NOTIFY_BYTES:  # very long names: by row id
                    note = orjson.dumps({"id": last_id}).decode()
                await conn.execute("SELECT pg_notify(%s, %s)", (LOG_CHANNEL, note))
        try:
            self.store.run_sync(work, write=True)
        except StoreUnavailable:
            dropped = max(0, len(lines) - MAX_PENDING)
            if dropped:
                log.warning("sessiontape: %s/%s: %d log lines dropped (%s unreachable for too "
                            "long)", self.user_id, self.session_name, dropped, self.store.where)
            self._pending = lines[dropped:]
            raise
        self._pending = []


def store_facts(url: str) -> dict[str, Any]:
    """What the store at ``url`` holds: its location (redacted), schema version,
    conversations, items, archived items, log lines and the hosts that wrote them."""
    store = PostgresStore(url)

    async def work(conn: psycopg.AsyncConnection[Any]) -> dict[str, Any]:
        async def one(query: str) -> Any:
            cur = await conn.execute(query.encode())
            row = await cur.fetchone()
            return row[0] if row is not None else None
        return {
            "store": store.where, "kind": "postgresql",
            "schema_version": await one("SELECT MAX(version) FROM sessiontape_migrations"),
            "conversations": await one("SELECT COUNT(*) FROM (SELECT DISTINCT user_id, "
                                       "session_name FROM session_items) AS pairs"),
            "items": await one("SELECT COUNT(*) FROM session_items"),
            "archived_items": await one(f"SELECT COUNT(*) FROM {ARCHIVE_TABLE}"),
            "log_lines": await one(f"SELECT COUNT(*) FROM {LOG_TABLE}"),
            "hosts": await one(f"SELECT COALESCE(string_agg(DISTINCT host, ', '), '') "
                               f"FROM {LOG_TABLE}"),
        }
    try:
        return store.run_sync(work)
    finally:
        store.close_sync()


# -- changing conversations (the verbs clear, rename, prune, fork) --------------------------

PAIR_TABLES_HERE = ("session_items", ARCHIVE_TABLE, COMPACTIONS_TABLE, LINKS_TABLE, LOG_TABLE)


class ConversationExists(ValueError):
    """The conversation a rename or a fork would make already has rows in the store."""


async def _taken(conn: psycopg.AsyncConnection[Any], pair: tuple[str, str]) -> str | None:
    """The first table of ours that holds rows of ``pair``, or None."""
    for table in PAIR_TABLES_HERE:
        cur = await conn.execute(f"SELECT 1 FROM {table} WHERE {PAIR} LIMIT 1".encode(), pair)
        if await cur.fetchone() is not None:
            return table
    return None


def delete_conversations(store: PostgresStore,
                         pairs: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Delete every row of each of ``pairs`` (items, archive, compactions, link, log lines)
    in one transaction; the rows deleted per table."""
    async def work(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
        counts = dict.fromkeys(PAIR_TABLES_HERE, 0)
        async with conn.transaction():
            for pair in pairs:
                for table in PAIR_TABLES_HERE:
                    cur = await conn.execute(f"DELETE FROM {table} WHERE {PAIR}".encode(), pair)
                    counts[table] += max(cur.rowcount, 0)
        return counts
    counts = store.run_sync(work, write=True)
    for pair in pairs:
        store.snapshots.forget(pair)
    return counts


def rename_conversation(store: PostgresStore, user_id: str, old: str,
                        new: str) -> dict[str, int]:
    """Move every row of ``(user_id, old)`` to ``new`` in one transaction (the log's lines
    keep their sequence numbers); :class:`ConversationExists` when ``new`` has rows."""
    async def work(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
        counts = {}
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))",
                               (f"{user_id}\x1f{new}",))
            taken = await _taken(conn, (user_id, new))
            if taken is not None:
                raise ConversationExists(f"{new!r} of {user_id!r} is in {taken} already")
            for table in PAIR_TABLES_HERE:
                cur = await conn.execute(
                    f"UPDATE {table} SET session_name = %s WHERE {PAIR}".encode(),
                    (new, user_id, old))
                counts[table] = max(cur.rowcount, 0)
        return counts
    counts = store.run_sync(work, write=True)
    store.snapshots.forget((user_id, old))
    return counts


def add_conversation(store: PostgresStore, user_id: str, session_name: str,
                     items: Sequence[tuple[int, str]], link: str | None,
                     lines: Sequence[str]) -> dict[str, int]:
    """A conversation made elsewhere (a fork): its items ``(created_at, item_json)`` in
    order, its link and its log lines, in one transaction; :class:`ConversationExists`
    when the pair has rows."""
    pair = (user_id, session_name)

    async def work(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))",
                               (f"{user_id}\x1f{session_name}",))
            taken = await _taken(conn, pair)
            if taken is not None:
                raise ConversationExists(f"{session_name!r} of {user_id!r} is in {taken} "
                                         "already")
            await conn.execute(
                "INSERT INTO session_items (user_id, session_name, created_at, item_json) "
                "SELECT %s, %s, c, j FROM unnest(%s::bigint[], %s::text[]) "
                "WITH ORDINALITY AS r(c, j, n) ORDER BY n",
                (*pair, [c for c, _ in items], [j for _, j in items]))
            if link is not None:
                await conn.execute(f"INSERT INTO {LINKS_TABLE} VALUES (%s, %s, %s)",
                                   (*pair, link))
            now = time.time_ns() // 1_000_000
            await conn.execute(
                f"INSERT INTO {LOG_TABLE} (user_id, session_name, seq, host, written_at, "
                "entry) SELECT %s, %s, n, %s, %s, e FROM unnest(%s::text[]) "
                "WITH ORDINALITY AS r(e, n) ORDER BY n",
                (*pair, store.host, now, list(lines)))
        return {"session_items": len(items), LINKS_TABLE: int(link is not None),
                LOG_TABLE: len(lines)}
    return store.run_sync(work, write=True)
