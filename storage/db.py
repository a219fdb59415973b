"""SQLite connections and transactions, written once for every table sessiontape keeps.

Every connection to the item store file (``.agent_sessions.sqlite``) is opened here, with
the one busy timeout (:data:`BUSY_TIMEOUT_S`):

* :func:`connect`: read and write, autocommit (transactions are explicit: :func:`immediate`);
  the item store's setup, compaction, fork, links and clear use it. It refuses a file it
  must not write before SQLite touches it: a damaged one (:class:`DamagedDatabase`) and
  one that cannot be written (:class:`ReadOnlyDatabase`);
* :func:`connect_readonly`: reads only (``file:...?mode=ro``), never creates the file, and
  None when there is none or it is damaged; every reader of the store uses it (links,
  compaction's archive, fork, the session listing, a read-only item store), so a damaged
  store is read as no store. A store that cannot be written is read as it is (immutable:
  nothing is made beside it).

One place says what is wrong with a file: :func:`damage` (damaged: its header garbled, cut
short, not SQLite at all; what the verbs say, with how to repair it) and :func:`unwritable`.

The SQL that several modules share is here too: :data:`PAIR`, the filter of one
``(user_id, session_name)`` pair (the same columns in every table of ours), :func:`tables`,
and :data:`META_SCHEMA`, the ``sessiontape_meta`` table of the item store and the ledger.
Each other table's ``CREATE`` statement is with the one module that writes it
(``session_items``: :mod:`~sessiontape.storage.skillet.item_store`; the archive and
compaction log: :mod:`~sessiontape.storage.skillet.archive`; the links:
:mod:`~sessiontape.storage.skillet.links`);
the table names are in :mod:`~sessiontape.storage.tables`.

The item store's aiosqlite connection is made of one of these (opened on aiosqlite's
thread, then set to WAL). Two other files are not the store and open themselves: the
catalog (:mod:`~sessiontape.storage.catalog.index`, its own busy timeout) and the ledger export
(:mod:`~sessiontape.storage.exports.ledger`, a new file no other process has open).
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["BUSY_TIMEOUT_S", "IN_PAIRS", "META_SCHEMA", "PAIR", "DamagedDatabase",
           "ReadOnlyDatabase", "connect", "connect_readonly", "damage", "immediate", "tables",
           "unwritable", "writing_problem"]

BUSY_TIMEOUT_S = 30.0  # how long a write waits for another process's write to end
# One conversation's rows, in any table of ours (two parameters: user_id, session_name).
PAIR = "user_id = ? AND session_name = ?"
# Rows of any of some pairs (one parameter: the pairs as a JSON array of [user, name]).
IN_PAIRS = ("(user_id, session_name) IN (SELECT json_extract(value, '$[0]'), "
            "json_extract(value, '$[1]') FROM json_each(?))")
META_SCHEMA = ("CREATE TABLE IF NOT EXISTS sessiontape_meta "
               "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
_MAGIC = b"SQLite format 3\x00"
_HEADER = 100  # bytes of a database file's header
# What a writer keeps beside the file while it writes (WAL mode, and the rollback journal).
_BESIDE = ("-wal", "-journal")


class DamagedDatabase(sqlite3.DatabaseError):
    """A SQLite file that is damaged (:func:`damage`): nothing reads or writes it until it
    is repaired. ``path``, ``reason``, and ``repair``: how to."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(f"{path} is damaged ({reason}). {self.repair}")

    @property
    def repair(self) -> str:
        """How to repair it: move it aside, and recover what it holds into its place."""
        here, aside = shlex.quote(str(self.path)), shlex.quote(f"{self.path}.damaged")
        return (f"To repair it, move it aside (mv {here} {aside}) and recover what it holds "
                f"into its place (sqlite3 {aside} .recover | sqlite3 {here}), or leave it "
                "aside: a new one is begun")


class ReadOnlyDatabase(sqlite3.OperationalError):
    """A SQLite file that cannot be written here (:func:`unwritable`): refused before
    SQLite would try (and leave ``-wal`` and ``-shm`` files beside it)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(f"{path} cannot be written ({reason})")


def _header(path: Path) -> tuple[bytes, int] | None:
    """The first bytes of the file at ``path`` and its size; None when it is not a file."""
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            return file.read(_HEADER), size
    except OSError:
        return None


def _cut_short(header: bytes, size: int) -> int | None:
    """The size a database file's header gives it when ``size`` is less (cut short), else
    None (also when the header does not say: an old writer's, or no valid page size)."""
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # the size field is kept up to date
    if not valid or page < 512 or page & (page - 1):
        return None
    return pages * page if pages * page > size else None


def damage(path: Path | str) -> DamagedDatabase | None:
    """What is wrong with the SQLite file at ``path`` when it is damaged (its header
    garbled, cut short, not SQLite at all): read from its first 100 bytes and its size,
    without SQLite, so that nothing is made beside it; None when it is not (or there is no
    file; an empty file is an empty database). A file cut short while another process
    writes it (its ``-wal`` or ``-journal`` is there) is not judged: SQLite does, with its
    locks."""
    reason = _damage_reason(Path(path))
    return DamagedDatabase(path, reason) if reason is not None else None


def _damage_reason(path: Path) -> str | None:
    read = _header(path)
    if read is None or read[1] == 0:
        return None
    header, size = read
    if len(header) < _HEADER or not header.startswith(_MAGIC):
        return "not an SQLite database: its header is not SQLite's"
    expected = _cut_short(header, size)
    if expected is None or any(os.path.lexists(f"{path}{end}") for end in _BESIDE):
        return None
    again = _header(path)  # the same twice, with no writer between: cut short
    if again is None or _cut_short(*again) != expected or again[1] != size:
        return None
    return f"cut short: {size} bytes of the {expected} its header gives"


def unwritable(path: Path | str) -> str | None:
    """Why the existing SQLite file at ``path`` cannot be written by this process (it is
    read-only, or its directory is: SQLite keeps its ``-wal`` and ``-shm`` files there);
    None when it can, or there is no file."""
    path = Path(path)
    if not path.is_file():
        return None
    if not os.access(path, os.W_OK):
        return "it is read-only"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return f"its directory {path.parent} is read-only"
    return None


def writing_problem(path: Path | str) -> sqlite3.Error | None:
    """What a writer of the file at ``path`` would meet: :class:`DamagedDatabase`,
    :class:`ReadOnlyDatabase`, or None (it can be written, or made)."""
    damaged = damage(path)
    if damaged is not None:
        return damaged
    reason = unwritable(path)
    return ReadOnlyDatabase(path, reason) if reason is not None else None


class _Connection(sqlite3.Connection):
    """A connection :func:`connect` or :func:`connect_readonly` opened, known by its file
    while it is open (:func:`_in_use`)."""

    def close(self) -> None:
        with _OPEN_LOCK:
            for connections in _OPEN.values():
                connections.discard(self)
        super().close()


# This process's open connections by the file's (device, inode). POSIX drops every lock a
# process holds on a file when it closes any descriptor of it: the header of a file that
# SQLite holds open here is not read through one of our own (another process would then
# take the file as unused and delete its WAL under the open connection).
_OPEN: dict[tuple[int, int], weakref.WeakSet[_Connection]] = {}
_OPEN_LOCK = threading.Lock()


def _identity(path: Path | str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _in_use(path: Path | str) -> bool:
    """Whether this process has the file at ``path`` open through a live connection (its
    locks held: its header was judged when that one opened, and SQLite judges it now)."""
    identity = _identity(path)
    with _OPEN_LOCK:
        return identity is not None and bool(_OPEN.get(identity))


def _known(conn: _Connection, path: Path | str) -> _Connection:
    identity = _identity(path)
    if identity is not None:
        with _OPEN_LOCK:
            _OPEN.setdefault(identity, weakref.WeakSet()).add(conn)
    return conn


def connect(path: Path | str, *, timeout: float = BUSY_TIMEOUT_S,
            check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit: :func:`immediate`).
    SQLite creates a missing file: a writer calls ``files.prepare_private_file`` first.
    Raises :class:`DamagedDatabase` or :class:`ReadOnlyDatabase` (:func:`writing_problem`)
    before SQLite opens a file it must not write."""
    if str(path) == ":memory:":
        return sqlite3.connect(path, timeout=timeout, isolation_level=None,
                               check_same_thread=check_same_thread)
    if not _in_use(path):
        problem = writing_problem(path)
    else:  # its header is SQLite's to judge now (reading it would drop our locks); its
        # modes are not: SQLite would open a file it cannot write read-only, WAL sidecars
        # and all
        reason = unwritable(path)
        problem = ReadOnlyDatabase(path, reason) if reason is not None else None
    if problem is not None:
        raise problem
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                           check_same_thread=check_same_thread, factory=_Connection)
    return _known(conn, path)


def connect_readonly(path: Path | str, *,
                     timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection | None:
    """A read-only connection (``file:...?mode=ro``), or None when nothing is at ``path``
    or what is there is damaged (:func:`damage` says what): read as no file.

    Never creates the file (nor a journal): works on a store another tool owns and on a
    disk that cannot be written. A write through it raises ``sqlite3.OperationalError``.
    A file this process cannot write (:func:`unwritable`) with no ``-wal`` beside it is
    opened immutable: SQLite would otherwise make its ``-wal`` and ``-shm`` files beside
    it, or fail where it cannot.
    """
    path = Path(path)
    if not path.exists() or (not _in_use(path) and damage(path) is not None):
        return None
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if unwritable(path) is not None and not os.path.lexists(f"{path}-wal"):
        uri += "&immutable=1"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None,
                           factory=_Connection)
    return _known(conn, path)


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
