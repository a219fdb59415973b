"""SQLite connections and transactions, written once for every table sessiontape keeps.

The item store's own connection (aiosqlite, in :mod:`sessiontape.storage.item_store`) and
the catalog's (:mod:`sessiontape.storage.catalog`) are set up where they live; the short
synchronous connections that compaction, fork and clear open on the store come from here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["BUSY_TIMEOUT_S", "connect", "immediate"]

BUSY_TIMEOUT_S = 30.0  # how long a write waits for another process's write to end


def connect(path: Path | str, *, timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit: :func:`immediate`)."""
    return sqlite3.connect(path, timeout=timeout, isolation_level=None)


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
