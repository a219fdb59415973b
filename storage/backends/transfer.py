"""A store moved between SQLite and PostgreSQL, and a server's logs written out on a host.

:func:`copy_store` (``sessiontape store copy SRC DST``) copies every table a store has
(``session_items``, compaction's archive and log, the links) and the replay log's lines,
streaming, :data:`BATCH` rows at a time, into an empty store: rows keep their ids and their
item JSON byte for byte. A SQLite store's log lines are the JSONL files under its logs
root; a PostgreSQL store's are the ``sessiontape_log`` table.

:func:`materialize_logs` (``sessiontape sessions materialize``) writes each conversation's
log lines from a PostgreSQL store into this host's JSONL logs: the file every host's
recorders wrote, whole. A file here whose lines are not all in the database (written while
the server was out of reach and never sent) is left as it is and reported: nothing
recorded is ever lost.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from ..db import connect, connect_readonly, immediate, tables
from ..file_writes import atomic_write
from ..files import make_private_dir, prepare_private_file
from ..paths import SkilletPaths
from ..skillet import archive, links
from ..skillet.item_rows import SCHEMA as ITEMS_SCHEMA
from ..skillet.log_owners import find_log_path, owner_pair
from ..skillet.replay_log import log_path_for
from ..tables import ARCHIVE_TABLE, COMPACTIONS_TABLE, LINKS_TABLE
from . import is_store_url
from .postgres import LOG_TABLE, PostgresStore, add_conversation, redacted

__all__ = ["BATCH", "CopySummary", "Materialized", "StoreNotEmpty", "copy_store",
           "materialize_logs", "push_conversation"]

BATCH = 5000  # rows read and written at once
# Each table a store has, its columns in order, and the key it is read in order of.
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "session_items": (("id", "user_id", "session_name", "created_at", "item_json"), ("id",)),
    ARCHIVE_TABLE: (("id", "user_id", "session_name", "created_at", "item_json",
                     "compaction_id"), ("id",)),
    COMPACTIONS_TABLE: (("id", "user_id", "session_name", "created_at", "reason", "summarizer",
                         "items_before", "items_after", "tokens_before", "tokens_after",
                         "archived"), ("id",)),
    LINKS_TABLE: (("user_id", "session_name", "agentuse_dir"), ("user_id", "session_name")),
}
Rows = list[tuple[Any, ...]]
LogLines = tuple[str, str, list[str]]  # a conversation's (user_id, session_name, lines)


class StoreNotEmpty(ValueError):
    """The destination of a copy already holds rows or logs: nothing was written."""


@dataclass
class CopySummary:
    """What :func:`copy_store` copied: rows by table, and log lines."""

    rows: dict[str, int] = field(default_factory=dict)
    log_lines: int = 0
    conversations: int = 0  # conversations whose log lines were copied
    problems: list[str] = field(default_factory=list)  # lines not copied, and why

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "log_lines": self.log_lines,
                "logs": self.conversations, "problems": self.problems}


# -- the two kinds of store ---------------------------------------------------------------

class _SQLiteSide:
    """A SQLite store file and the JSONL logs under its logs root."""

    def __init__(self, path: Path, logs_root: Path) -> None:
        self.path, self.logs_root = path, logs_root
        self.name = str(path)
        self._conn: sqlite3.Connection | None = None

    def rows_held(self) -> int:
        conn = connect_readonly(self.path)
        if conn is None:
            return 0
        with closing(conn):
            present = tables(conn)
            return sum(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                       for table in TABLES if table in present)

    def logs_held(self) -> int:
        return sum(1 for path in self._log_files() if path.stat().st_size)

    def read(self, table: str) -> Iterator[Rows]:
        conn = connect_readonly(self.path)
        if conn is None:
            return
        columns, key = TABLES[table]
        with closing(conn):
            if table not in tables(conn):
                return
            cursor = conn.execute(f"SELECT {', '.join(columns)} FROM {table} "
                                  f"ORDER BY {', '.join(key)}")
            while rows := cursor.fetchmany(BATCH):
                yield rows

    def _writer(self) -> sqlite3.Connection:
        if self._conn is None:
            prepare_private_file(self.path)
            self._conn = connect(self.path)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(ITEMS_SCHEMA + archive.SCHEMA + links.SCHEMA + ";")
        return self._conn

    def write(self, table: str, rows: Rows) -> None:
        columns, _ = TABLES[table]
        conn = self._writer()
        with immediate(conn):
            conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                             f"({', '.join('?' for _ in columns)})", rows)

    def _log_files(self) -> list[Path]:
        if not self.logs_root.is_dir():
            return []
        return sorted(path for path in self.logs_root.rglob("*.jsonl")
                      if path.is_file() and not path.is_symlink())

    def read_logs(self, problems: list[str]) -> Iterator[LogLines]:
        for path in self._log_files():
            pair = owner_pair(path)
            if pair is None:  # a log without an owner record: its names are its file's
                pair = (path.parent.relative_to(self.logs_root).as_posix(), path.stem)
            data = path.read_bytes()
            lines = data.split(b"\n")
            if lines[-1]:
                problems.append(f"{path}: its last line is torn (no newline): not copied")
            texts = []
            for number, line in enumerate(lines[:-1], 1):
                if not line.strip():
                    continue
                try:
                    texts.append(line.decode())
                except UnicodeDecodeError:
                    problems.append(f"{path}:{number}: not UTF-8: not copied")
            if texts:
                yield pair[0], pair[1], texts

    def write_log(self, user_id: str, session_name: str, lines: list[str]) -> None:
        path = log_path_for(user_id, session_name, self.logs_root)
        _append_private(path, lines)

    def finish(self) -> None:
        """The store file made with its tables, rows or none (an empty store is a store)."""
        self._writer()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _PostgresSide:
    """A PostgreSQL store (its tables and ``sessiontape_log``)."""

    def __init__(self, url: str) -> None:
        self.store = PostgresStore(url)
        self.name = redacted(url)
        self.host = socket.gethostname()

    def _all(self, query: str, params: Sequence[Any] = ()) -> Rows:
        async def work(conn: psycopg.AsyncConnection[Any]) -> Rows:
            cur = await conn.execute(query.encode(), params)
            return list(await cur.fetchall())
        return self.store.run_sync(work)

    def rows_held(self) -> int:
        return sum(self._all(f"SELECT COUNT(*) FROM {table}")[0][0] for table in TABLES)

    def logs_held(self) -> int:
        return int(self._all(f"SELECT COUNT(*) FROM {LOG_TABLE}")[0][0])

    def read(self, table: str) -> Iterator[Rows]:
        columns, key = TABLES[table]
        select = f"SELECT {', '.join(columns)} FROM {table}"
        order = f"ORDER BY {', '.join(key)} LIMIT {BATCH}"
        rows = self._all(f"{select} {order}")
        while rows:
            yield rows
            last = tuple(rows[-1][columns.index(name)] for name in key)
            rows = self._all(f"{select} WHERE ({', '.join(key)}) > "
                             f"({', '.join('%s' for _ in key)}) {order}", last)

    def write(self, table: str, rows: Rows) -> None:
        columns, _ = TABLES[table]

        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction(), conn.cursor() as cur, \
                    cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN".encode()) as copy:
                for row in rows:
                    await copy.write_row(row)
        self.store.run_sync(work)

    def read_logs(self, problems: list[str], user_id: str | None = None,
                  session_name: str | None = None) -> Iterator[LogLines]:
        """Every conversation's lines (or only ``user_id``'s, ``session_name``'s), in order."""
        after: tuple[str, str, int] = ("", "", 0)
        only = "".join(f" AND {column} = %s" for column, value in
                       (("user_id", user_id), ("session_name", session_name)) if value is not None)
        wanted = tuple(value for value in (user_id, session_name) if value is not None)
        current: LogLines | None = None
        while True:
            rows = self._all(
                f"SELECT user_id, session_name, seq, entry FROM {LOG_TABLE} "
                f"WHERE (user_id, session_name, seq) > (%s, %s, %s){only} "
                f"ORDER BY user_id, session_name, seq LIMIT {BATCH}", (*after, *wanted))
            if not rows:
                break
            for user, name, _, entry in rows:
                if current is None or (current[0], current[1]) != (user, name):
                    if current is not None:
                        yield current
                    current = (user, name, [])
                current[2].append(entry)
            after = (rows[-1][0], rows[-1][1], rows[-1][2])
        if current is not None:
            yield current

    def write_log(self, user_id: str, session_name: str, lines: list[str]) -> None:
        now = time.time_ns() // 1_000_000

        async def work(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction(), conn.cursor() as cur, cur.copy(
                    f"COPY {LOG_TABLE} (user_id, session_name, seq, host, written_at, entry) "
                    "FROM STDIN".encode()) as copy:
                for seq, line in enumerate(lines, 1):
                    await copy.write_row((user_id, session_name, seq, self.host, now, line))
        self.store.run_sync(work)

    def finish(self) -> None:
        """Serial columns past the ids copied in (a later insert takes the next one)."""
        for table in ("session_items", LOG_TABLE):
            self._all(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                      f"GREATEST((SELECT MAX(id) FROM {table}), 1))")

    def close(self) -> None:
        self.store.close_sync()


def _side(location: str | os.PathLike[str], logs_root: Path | None) -> _SQLiteSide | _PostgresSide:
    if is_store_url(location):
        return _PostgresSide(str(location))
    root = logs_root if logs_root is not None else SkilletPaths.resolve().logs_root
    return _SQLiteSide(Path(location), root)


def copy_store(source: str | os.PathLike[str], destination: str | os.PathLike[str], *,
               source_logs: Path | None = None, destination_logs: Path | None = None,
               progress: Callable[[str, int], None] | None = None,
               logs: bool = True) -> CopySummary:
    """Copy every row and log line of the store at ``source`` into the empty store at
    ``destination`` (either a SQLite file or a ``postgresql://`` URL; a file's logs are
    under ``*_logs``, default the skillet logs root; ``logs=False``: the rows only).
    :class:`StoreNotEmpty` when the destination holds anything (nothing is written);
    ``progress(table, rows)`` after each batch."""
    src, dst = _side(source, source_logs), _side(destination, destination_logs)
    summary = CopySummary()
    try:
        held, logs_held = dst.rows_held(), dst.logs_held() if logs else 0
        if held or logs_held:
            raise StoreNotEmpty(f"{dst.name} already holds {held} rows and {logs_held} logs "
                                "(lines or files): copy into an empty store (nothing was "
                                "written)")
        for table in TABLES:
            summary.rows[table] = 0
            for rows in src.read(table):
                dst.write(table, rows)
                summary.rows[table] += len(rows)
                if progress is not None:
                    progress(table, summary.rows[table])
        for user_id, session_name, lines in src.read_logs(summary.problems) if logs else ():
            dst.write_log(user_id, session_name, lines)
            summary.log_lines += len(lines)
            summary.conversations += 1
            if progress is not None:
                progress("log lines", summary.log_lines)
        dst.finish()
    finally:
        src.close()
        dst.close()
    return summary


# -- a server's logs on this host -------------------------------------------------------

@dataclass(frozen=True)
class Materialized:
    """What :func:`materialize_logs` did with one conversation's log here."""

    user_id: str
    session_name: str
    path: Path | None
    lines: int  # the database's lines
    outcome: str  # "written", "up to date", or "kept: ..." (why the file here was left)

    def to_json(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "session_name": self.session_name,
                "path": str(self.path) if self.path else None, "lines": self.lines,
                "outcome": self.outcome}


def _append_private(path: Path, lines: list[str]) -> None:
    from ..files import open_private_append

    fd = open_private_append(path)
    try:
        os.write(fd, "".join(line + "\n" for line in lines).encode())
    finally:
        os.close(fd)


def _is_subsequence(local: list[str], whole: list[str]) -> bool:
    """Whether every line of ``local`` is in ``whole``, in the same order."""
    rest = iter(whole)
    return all(any(line == other for other in rest) for line in local)


def materialize_logs(url: str, logs_root: Path | None = None, *, user_id: str | None = None,
                     session_name: str | None = None) -> list[Materialized]:
    """Write each conversation's log lines (or only ``user_id``'s, ``session_name``'s) from
    the PostgreSQL store at ``url`` into the JSONL logs under ``logs_root`` (default: the
    skillet logs root): see the module doc."""
    root = logs_root if logs_root is not None else SkilletPaths.resolve().logs_root
    make_private_dir(root)
    side = _PostgresSide(url)
    done = []
    try:
        for user, name, lines in side.read_logs([], user_id, session_name):
            done.append(_write_log_here(user, name, lines, root))
    finally:
        side.close()
    return done


def _write_log_here(user_id: str, session_name: str, lines: list[str],
                    root: Path) -> Materialized:
    """The conversation's log here made the database's ``lines``, unless it holds one they
    lack. Under the log's lock (a recorder of this host appending waits, then appends to
    the file now at the path: :func:`~sessiontape.storage.file_writes.append_lines`)."""
    path = find_log_path(user_id, session_name, root)
    if path is None:
        path = log_path_for(user_id, session_name, root)
        atomic_write(path, "".join(line + "\n" for line in lines).encode())
        return Materialized(user_id, session_name, path, len(lines), "written")
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        local = _read_lines(path)
        if local == lines:
            return Materialized(user_id, session_name, path, len(lines), "up to date")
        if not _is_subsequence(local, lines):
            return Materialized(user_id, session_name, path, len(lines),
                                "kept: it holds lines the database does not")
        atomic_write(path, "".join(line + "\n" for line in lines).encode())
        return Materialized(user_id, session_name, path, len(lines), "written")
    finally:
        os.close(fd)


def _read_lines(path: Path) -> list[str]:
    """A log's whole lines (a torn last line counts: it is not in the database)."""
    data = path.read_bytes().decode(errors="replace")
    lines = data.split("\n")
    return [line for line in lines[:-1] if line.strip()] + ([lines[-1]] if lines[-1] else [])


def push_conversation(store: PostgresStore, store_file: Path, log_path: Path | None,
                      user_id: str, session_name: str) -> dict[str, int]:
    """A conversation made in a SQLite store (a fork made in a mirror) written to the
    PostgreSQL ``store``: its items in order, its link and its log's lines, in one
    transaction (:func:`~.postgres.add_conversation`); the rows written per table."""
    conn = connect_readonly(store_file)
    items: list[tuple[int, str]] = []
    link = None
    if conn is not None:
        with closing(conn):
            items = [(row[0], row[1]) for row in conn.execute(
                "SELECT created_at, item_json FROM session_items WHERE user_id = ? AND "
                "session_name = ? ORDER BY created_at, id", (user_id, session_name))]
            if LINKS_TABLE in tables(conn):
                row = conn.execute(f"SELECT agentuse_dir FROM {LINKS_TABLE} WHERE user_id = ? "
                                   "AND session_name = ?", (user_id, session_name)).fetchone()
                link = row[0] if row is not None else None
    lines = _read_lines(log_path) if log_path is not None and log_path.exists() else []
    return add_conversation(store, user_id, session_name, items, link, lines)
