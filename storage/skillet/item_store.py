"""The skillet SQLite item store: ``session_items`` in ``.agent_sessions.sqlite``.

:class:`ItemStore` owns one file (one ``aiosqlite`` connection, opened on
first use); :meth:`ItemStore.session` gives the Agents SDK ``Session`` for a
``(user_id, session_name)`` pair, whose ``session_id`` is
``"{user_id}:{session_name}"``.

Rows hold the JavaScript Agents SDK's protocol items, as skilled_crew's do:
:meth:`ItemStoreSession.add_items` converts the Python SDK's items with
:func:`~sessiontape.storage.skillet.items.to_protocol_items` and the reads convert them back
(storage/skillet/items.py); rows in the Python SDK's shapes (written by sessiontape 0.1)
are read as they are. A row that is not an item (not JSON, not a JSON object) is
skipped, and one of a type neither SDK knows is passed on unchanged; both are
reported once per store object with their row id, and neither ever fails a read.

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
import logging
import sqlite3
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import aiosqlite
import orjson
from agents.items import TResponseInputItem
from agents.memory import SessionABC, SessionSettings
from agents.memory.session_settings import resolve_session_limit

from ..db import (
    BUSY_TIMEOUT_S,
    PAIR,
    ReadOnlyDatabase,
    connect,
    connect_readonly,
    damage,
    unwritable,
)
from ..files import prepare_private_file
from ..paths import SkilletPaths
from ..redaction import Redactor
from ..tables import CompactionInfo, StoredSession, list_sessions_sql
from . import archive, links
from .item_rows import (
    FORMAT,
    MAX_SNAPSHOTS,
    SCHEMA,
    Shared,
    Snapshot,
    Snapshots,
    call_names,
    decode_rows,
    item_json,
    loads_item,
    read_joined,
)
from .items import to_protocol

if TYPE_CHECKING:
    from .sink import EntryLog

__all__ = ["FORMAT", "MAX_SNAPSHOTS", "SCHEMA", "ItemStore", "ItemStoreSession", "RowStore",
           "Shared", "Snapshot", "Snapshots", "StoredSession", "decode_rows", "item_json",
           "loads_item", "read_joined"]

log = logging.getLogger("sessiontape")

# Rows per INSERT statement: the three shared values plus one per item must
# stay under SQLite's 32 766 host parameters.
MAX_ROWS_PER_STATEMENT = 32_000
ORDER_ASC = "ORDER BY created_at, id"
ORDER_DESC = "ORDER BY created_at DESC, id DESC"
WHERE_PAIR = f"WHERE {PAIR}"
ROWS_SQL = f"SELECT id, item_json FROM session_items {WHERE_PAIR} {ORDER_ASC}"  # a pair's rows


@lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    values = ",".join(f"(?1,?2,?3,?{n})" for n in range(4, rows + 4))
    return ("INSERT INTO session_items (user_id, session_name, created_at, item_json) "
            f"VALUES {values}")


_SHARED: Shared[Path, ItemStore] = Shared()  # ItemStore.shared's stores, by absolute path


class ItemStore:
    """One ``.agent_sessions.sqlite`` file.

    ``path`` defaults to ``SkilletPaths.resolve().store_file``. With
    ``readonly=True`` the file is opened read-only and never changed (for a
    store another tool owns, or one on a read-only disk); so is a file that
    cannot be written (it, or its directory, is read-only): its history is
    read, its writes fail. A damaged file is neither read nor written
    (:class:`~sessiontape.storage.db.DamagedDatabase`). :meth:`shared` gives
    the one store of a path that every user in the process shares.
    """

    @classmethod
    def shared(cls, path: Path | str) -> ItemStore:
        """The process's one store for ``path`` (one connection and worker thread however
        many use it). Each call takes a share; :meth:`release` gives it back, and the
        last share closes the connection."""
        key = Path(path).absolute()
        return _SHARED.take(key, lambda: cls(key))

    async def release(self) -> None:
        """Give back a share taken by :meth:`shared`; the last one closes the store."""
        if _SHARED.give_back(self.path, self):
            await self.close()

    @property
    def shares(self) -> int:
        """How many users share this store (:meth:`shared`), 0 when it is not shared."""
        return _SHARED.count(self.path, self)

    def __init__(self, path: Path | str | None = None, *, readonly: bool = False) -> None:
        self.path = Path(path) if path is not None else SkilletPaths.resolve().store_file
        self.readonly = readonly
        self._unwritable: str | None = None  # why the open file cannot be written, if so
        self._ready: asyncio.Future[aiosqlite.Connection] | None = None
        self._worker: threading.Thread | None = None
        self.reported: set[int] = set()  # bad rows already reported (by row id)
        self.snapshots = Snapshots()

    def _open_sync(self) -> sqlite3.Connection:
        """Open and prepare the file (runs on the connection's worker thread). A damaged
        file raises :class:`~sessiontape.storage.db.DamagedDatabase` untouched; one that
        cannot be written is opened read-only, as with ``readonly``: its items are read,
        and each write raises (nothing is made beside it)."""
        damaged = damage(self.path)
        if damaged is not None:
            raise damaged
        self._unwritable = "opened read-only" if self.readonly else unwritable(self.path)
        if self._unwritable is not None:
            ro = connect_readonly(self.path)
            if ro is None:
                raise sqlite3.OperationalError(f"unable to open database file: {self.path} "
                                               "does not exist")
            ro.execute("SELECT 1 FROM session_items LIMIT 1")  # a clear error if it is absent
            return ro
        prepare_private_file(self.path)
        conn = connect(self.path, check_same_thread=False)
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
        """Run one statement and return its rows (one round trip to the worker). A write
        to a file that cannot be written raises :class:`~sessiontape.storage.db.
        ReadOnlyDatabase`, which names it."""
        db = await self._db()
        try:
            return list(await db.execute_fetchall(sql, params))
        except sqlite3.OperationalError as exc:
            if self._unwritable is not None and "readonly" in str(exc):
                raise ReadOnlyDatabase(self.path, self._unwritable) from None
            raise

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

    @property
    def where(self) -> str:
        """The store as messages name it: its path."""
        return str(self.path)

    def holds_data(self) -> bool:
        """Whether the file exists with something in it (an unreadable one counts)."""
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False
        except OSError:
            return True

    async def list_sessions(self, user_id: str | None = None) -> list[StoredSession]:
        """Every pair with its item count and first/last ``created_at``, newest first."""
        params = (user_id,) if user_id is not None else ()
        rows = await self.execute(list_sessions_sql(user_id is not None), params)
        return [StoredSession(*row) for row in rows]

    # -- the rows of one pair (RowStore) --------------------------------------------

    async def pair_rows(self, user_id: str, session_name: str) -> list[tuple[int, str]]:
        """The pair's rows ``(id, item_json)`` in order."""
        return [(row[0], row[1]) for row in await self.execute(ROWS_SQL, (user_id, session_name))]

    async def pair_items(self, user_id: str, session_name: str, limit: int | None,
                         where: str) -> list[TResponseInputItem]:
        """The pair's items as the Python SDK's (the latest ``limit`` of them), in order.
        A full read converts only the rows added since the last one (see :class:`Snapshot`)."""
        pair = (user_id, session_name)
        snapshot = None if limit is not None else self.snapshots.get(pair)
        if snapshot is None:
            return await self._read(pair, where, limit)
        # The snapshot's last row and every row after it, with the count of rows up to it.
        rows = await self.execute(
            "SELECT id, item_json, (SELECT COUNT(*) FROM session_items "
            "WHERE user_id = ?1 AND session_name = ?2 AND id <= ?3) FROM session_items "
            f"WHERE user_id = ?1 AND session_name = ?2 AND id >= ?3 {ORDER_ASC}",
            (*pair, snapshot.last_id))
        items = self.snapshots.follow(snapshot, rows, where, self.reported)
        return items if items is not None else await self._read(pair, where)

    async def _read(self, pair: tuple[str, str], where: str, limit: int | None = None
                    ) -> list[TResponseInputItem]:
        """The pair's items (the latest ``limit`` of them) in one statement; all of them are
        remembered as the pair's :class:`Snapshot`."""
        if limit is None:
            rows_sql = ROWS_SQL
            params: tuple[Any, ...] = pair
        else:
            rows_sql = ("SELECT id, item_json FROM (SELECT id, item_json, created_at "
                        f"FROM session_items {WHERE_PAIR} {ORDER_DESC} LIMIT ?) {ORDER_ASC}")
            params = (*pair, limit)
        # SQLite joins the rows into one JSON array (the ordered subquery is not
        # flattened into the aggregate, so the order holds), which spares Python a tuple
        # per row; a row that is not JSON falls back to rows. So does an array whose
        # length is not the row count: a damaged row such as '1,2' can still join into
        # valid JSON. And so does a row that is not an item, to be reported with its id.
        rows = await self.execute(
            "SELECT max(id), '[' || group_concat(item_json, ',') || ']', COUNT(*), "
            f"(SELECT id FROM session_items {WHERE_PAIR} {ORDER_DESC} LIMIT 1) "
            f"FROM ({rows_sql})", (*pair, *params))
        max_id, joined, count, last_id = rows[0]
        if not count:
            self.snapshots.forget(pair)
            return []
        items = read_joined(joined, count)
        if items is None:
            items = [item for _, item in decode_rows(await self.execute(rows_sql, params),
                                                     where, self.reported)]
        if limit is None:
            self.snapshots.remember(pair, items, count, last_id, max_id)
        return items

    async def insert_rows(self, user_id: str, session_name: str, created: int,
                          encoded: list[str]) -> None:
        """Append rows holding ``encoded`` (item JSON), each batch in one statement. A batch
        of over 32 000 items is split into several statements (not atomic)."""
        for start in range(0, len(encoded), MAX_ROWS_PER_STATEMENT):
            chunk = encoded[start:start + MAX_ROWS_PER_STATEMENT]
            await self.execute(_insert_sql(len(chunk)), (user_id, session_name, created, *chunk))

    async def call_rows(self, user_id: str, session_name: str,
                        call_id: str) -> list[tuple[int, str]]:
        """The pair's last rows (newest first, a few) that name the call ``call_id``."""
        quoted = orjson.dumps(call_id).decode()
        rows = await self.execute(
            f"SELECT id, item_json FROM session_items {WHERE_PAIR} AND "
            "(instr(item_json, ?) > 0 OR instr(item_json, ?) > 0) ORDER BY id DESC LIMIT 8",
            (user_id, session_name, f'"callId":{quoted}', f'"call_id":{quoted}'))
        return [(row[0], row[1]) for row in rows]

    async def pop_row(self, user_id: str, session_name: str) -> tuple[int, int, str] | None:
        """Delete and return the pair's last row ``(id, created_at, item_json)`` that holds a
        JSON object; None when there is none."""
        rows = await self.execute(
            "DELETE FROM session_items WHERE id = (SELECT id FROM session_items "
            f"{WHERE_PAIR} AND json_valid(item_json) "
            "AND substr(ltrim(item_json, ' ' || char(9, 10, 13)), 1, 1) = '{' "
            f"{ORDER_DESC} LIMIT 1) RETURNING id, created_at, item_json",
            (user_id, session_name))
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def restore_row(self, user_id: str, session_name: str,
                          row: tuple[int, int, str]) -> None:
        """Put back a row :meth:`pop_row` took, with its id."""
        await self.execute(
            "INSERT INTO session_items (id, user_id, session_name, created_at, item_json) "
            "VALUES (?, ?, ?, ?, ?)", (row[0], user_id, session_name, row[1], row[2]))

    async def delete_pair(self, user_id: str, session_name: str) -> None:
        """Delete every row of the pair."""
        await self.execute(f"DELETE FROM session_items {WHERE_PAIR}", (user_id, session_name))
        self.snapshots.forget((user_id, session_name))

    async def replace_rows(self, info: CompactionInfo, archived_ids: list[int],
                           replacement: list[str], read_ids: list[int]) -> bool:
        """Compaction's one transaction (:func:`~.archive.apply_compaction`)."""
        return await asyncio.to_thread(archive.apply_compaction, self.path, info,
                                       archived_ids, replacement, read_ids)

    async def archived_rows(self, user_id: str,
                            session_name: str) -> list[tuple[int, str, str]]:
        """The pair's archived rows ``(id, compaction_id, item_json)`` in order."""
        return await asyncio.to_thread(archive.archived_rows, self.path, user_id, session_name)

    def log_copy(self, user_id: str, session_name: str) -> EntryLog | None:
        """Where the pair's log lines go besides its JSONL file: nowhere, for a file store."""
        return None

    def agentuse_dir_for(self, user_id: str, session_name: str, sessions_root: Path,
                         agent_name: str) -> Path:
        """The pair's linked AgentUse directory, linked now on first use
        (:func:`~.links.agentuse_dir_for`)."""
        return links.agentuse_dir_for(self.path, user_id, session_name, sessions_root,
                                      agent_name)

    def find_agentuse_dir(self, user_id: str, session_name: str,
                          sessions_root: Path | None = None) -> Path | None:
        """The pair's linked AgentUse directory, if any (:func:`~.links.find_agentuse_dir`)."""
        return links.find_agentuse_dir(self.path, user_id, session_name, sessions_root)


class RowStore(Protocol):
    """The row I/O an :class:`ItemStoreSession` and compaction need of a store: what a
    backend provides (this file's :class:`ItemStore`; PostgreSQL's in
    :mod:`sessiontape.storage.backends.postgres`). Rows hold item JSON; every conversion
    between the SDKs' shapes is :class:`ItemStoreSession`'s."""

    reported: set[int]

    @property
    def where(self) -> str: ...

    def holds_data(self) -> bool: ...

    async def pair_rows(self, user_id: str, session_name: str) -> list[tuple[int, str]]: ...

    async def pair_items(self, user_id: str, session_name: str, limit: int | None,
                         where: str) -> list[TResponseInputItem]: ...

    async def insert_rows(self, user_id: str, session_name: str, created: int,
                          encoded: list[str]) -> None: ...

    async def call_rows(self, user_id: str, session_name: str,
                        call_id: str) -> list[tuple[int, str]]: ...

    async def pop_row(self, user_id: str, session_name: str
                      ) -> tuple[int, int, str] | None: ...

    async def restore_row(self, user_id: str, session_name: str,
                          row: tuple[int, int, str]) -> None: ...

    async def delete_pair(self, user_id: str, session_name: str) -> None: ...

    async def replace_rows(self, info: CompactionInfo, archived_ids: list[int],
                           replacement: list[str], read_ids: list[int]) -> bool: ...

    async def archived_rows(self, user_id: str,
                            session_name: str) -> list[tuple[int, str, str]]: ...


class ItemStoreSession(SessionABC):
    """The Agents SDK ``Session`` over one pair's rows of a store (a :class:`RowStore`:
    the SQLite :class:`ItemStore`, or PostgreSQL's)."""

    def __init__(self, store: RowStore, user_id: str, session_name: str,
                 session_settings: SessionSettings | None = None,
                 redactor: Redactor | None = None) -> None:
        self.store = store
        self.redactor = redactor
        self.user_id = user_id
        self.session_name = session_name
        self.session_id = f"{user_id}:{session_name}"
        self.session_settings = session_settings

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """All items in order, or the latest ``limit`` of them (still in order).

        A row that is not an item counts toward ``limit`` (it is skipped).
        """
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        return await self.store.pair_items(self.user_id, self.session_name, limit,
                                           self.session_id)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in one transaction; they share one ``created_at`` (Unix ms).

        Each is stored as the JS SDK's protocol item (see storage/skillet/items.py).
        """
        if not items:
            return
        created = time.time_ns() // 1_000_000
        if self.redactor is not None:
            items = self.redactor.value(items)
        names, unnamed = call_names(items)
        for call_id in unnamed:  # a tool output whose call was stored by an earlier batch
            name = await self._stored_call_name(call_id)
            if name is not None:
                names[call_id] = name
        encoded = [item_json(row) for row in self._protocol_items(items, names)]
        await self.store.insert_rows(self.user_id, self.session_name, created, encoded)

    def _protocol_items(self, items: list[Any], names: dict[str, str]) -> list[Any]:
        """``items`` as protocol items (a protocol ``function_call_result`` carries its
        tool's name: ``names`` by call id)."""
        try:
            return [to_protocol(item, names) for item in items]
        except Exception:
            rows = []
            for item in items:
                try:
                    rows.append(to_protocol(item, names))
                except Exception:  # never fail a run for it: stored in the Python SDK's shape
                    log.warning("%s: an item could not be converted to the JS SDK's shape "
                                "and is stored as it is: %.80r", self.session_id, item,
                                exc_info=True)
                    rows.append(item)
            return rows

    async def _stored_call_name(self, call_id: str) -> str | None:
        """The tool name of the stored function call ``call_id`` (either shape), if any."""
        rows = await self.store.call_rows(self.user_id, self.session_name, call_id)
        for _, item in decode_rows(rows, self.session_id, self.store.reported):
            if isinstance(item, dict) and item.get("type") == "function_call" \
                    and item.get("call_id") == call_id and isinstance(item.get("name"), str):
                return str(item["name"])
        return None

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the most recent item (None when there is none).

        Rows that are not JSON objects are left where they are (get_items skips them).
        """
        row = await self.store.pop_row(self.user_id, self.session_name)
        if row is None:
            return None
        items = decode_rows([(row[0], row[2])], self.session_id, self.store.reported)
        if not items:  # the store took it for JSON and we cannot read it: put it back
            await self.store.restore_row(self.user_id, self.session_name, row)
            return None
        item: TResponseInputItem = items[0][1]
        return item

    async def clear_session(self) -> None:
        """Delete every item of this pair."""
        await self.store.delete_pair(self.user_id, self.session_name)
