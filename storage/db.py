"""SQLite connections and transactions, written once for every table sessiontape keeps.

Every connection to the item store file (``.agent_sessions.sqlite``) is opened here, with
the one busy timeout (:data:`BUSY_TIMEOUT_S`):

* :func:`connect`: read and write, autocommit (transactions are explicit: :func:`immediate`);
  the item store's setup, compaction, fork, links and clear use it;
* :func:`connect_readonly`: reads only (``file:...?mode=ro``), never creates the file, and
  None when there is none; every reader of the store uses it (links, compaction's archive,
  fork, the session listing, a read-only item store).

The SQL that several modules share is here too: :data:`PAIR`, the filter of one
``(user_id, session_name)`` pair (the same columns in every table of ours), :func:`tables`,
and :data:`META_SCHEMA`, the ``sessiontape_meta`` table of the item store and the ledger.
Each other table's ``CREATE`` statement is with the one module that writes it
(``session_items``: :mod:`~sessiontape.storage.item_store`; the archive and compaction
log: :mod:`~sessiontape.storage.compaction`; the links: :mod:`~sessiontape.storage.links`);
the table names are in :mod:`~sessiontape.storage.tables`.

The item store's aiosqlite connection is made of one of these (opened on aiosqlite's
thread, then set to WAL). Two other files are not the store and open themselves: the
catalog (:mod:`~sessiontape.storage.catalog`, its own busy timeout) and the ledger export
(:mod:`~sessiontape.storage.ledger`, a new file no other process has open).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["BUSY_TIMEOUT_S", "IN_PAIRS", "META_SCHEMA", "PAIR", "connect", "connect_readonly",
           "immediate", "tables"]

BUSY_TIMEOUT_S = 30.0  # how long a write waits for another process's write to end
# One conversation's rows, in any table of ours (two parameters: user_id, session_name).
PAIR = "user_id = ? AND session_name = ?"
# Rows of any of some pairs (one parameter: the pairs as a JSON array of [user, name]).
IN_PAIRS = ("(user_id, session_name) IN (SELECT json_extract(value, '$[0]'), "
            "json_extract(value, '$[1]') FROM json_each(?))")
META_SCHEMA = ("CREATE TABLE IF NOT EXISTS sessiontape_meta "
               "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def connect(path: Path | str, *, timeout: float = BUSY_TIMEOUT_S,
            check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit: :func:`immediate`).
    SQLite creates a missing file: a writer calls ``files.prepare_private_file`` first."""
    return sqlite3.connect(path, timeout=timeout, isolation_level=None,
                           check_same_thread=check_same_thread)


def connect_readonly(path: Path | str, *,
                     timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection | None:
    """A read-only connection (``file:...?mode=ro``), or None when nothing is at ``path``.

    Never creates the file (nor a journal): works on a store another tool owns and on a
    disk that cannot be written. A write through it raises ``sqlite3.OperationalError``.
    """
    path = Path(path)
    if not path.exists():
        return None
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout,
                           isolation_level=None)


def tables(conn: sqlite3.Connection) -> set[str]:
    """The names of the tables in the connection's database."""
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; on any exception ``ROLLBACK``, then the exception
    as it was. SQLite may have rolled back already (a full disk at ``COMMIT``): then no
    ``ROLLBACK`` is sent, which would raise "no transaction is active" in its place."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
