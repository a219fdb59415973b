"""The SQLite connections every store module opens (storage/db.py), on real files.

What must hold: a reader never creates a store file (a missing one is None, not an empty
database), never changes one it opens, and finds it under any name a path can have; every
connection waits the one busy timeout for another process's write.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sessiontape.storage.db import BUSY_TIMEOUT_S, connect, connect_readonly, tables


def make_store(path: Path) -> None:
    with closing(connect(path)) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.execute("CREATE INDEX idx_t ON t (x)")
        conn.execute("INSERT INTO t VALUES ('kept')")


def read_only(store: Path) -> None:
    """The store's row is read through a reader, which refuses every write."""
    conn = connect_readonly(store)
    assert conn is not None
    with closing(conn):
        assert conn.execute("SELECT x FROM t").fetchall() == [("kept",)]
        for write in ("INSERT INTO t VALUES ('no')", "CREATE TABLE u (y)"):
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                conn.execute(write)


def files_of(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in directory.iterdir()}


def test_a_missing_file_is_none_and_is_not_created(tmp_path: Path) -> None:
    assert connect_readonly(tmp_path / "store.sqlite") is None
    assert connect_readonly(str(tmp_path / "no-such-dir" / "store.sqlite")) is None
    assert list(tmp_path.iterdir()) == []


def test_a_reader_reads_and_changes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    make_store(store)
    before = files_of(tmp_path)
    read_only(store)
    assert files_of(tmp_path) == before  # no journal, no other file, the same bytes


@pytest.mark.parametrize("name", ["a b.sqlite", "q?mode=rwc.sqlite", "h#x.sqlite",
                                  "p%20.sqlite", "é.sqlite"])
def test_a_reader_finds_a_file_whatever_its_name(tmp_path: Path, name: str) -> None:
    """The name goes into a ``file:`` URI: characters that mean something there are quoted,
    so the reader opens that file (read-only still) and no other."""
    store = tmp_path / name
    make_store(store)
    read_only(store)
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_every_connection_waits_the_one_busy_timeout(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    make_store(store)
    reader = connect_readonly(store)
    assert reader is not None
    with closing(connect(store)) as writer, closing(reader):
        for conn in (writer, reader):
            assert conn.execute("PRAGMA busy_timeout").fetchone() == (BUSY_TIMEOUT_S * 1000,)
            assert conn.isolation_level is None  # autocommit: no transaction held open
    assert BUSY_TIMEOUT_S == 30.0


def test_tables_names_the_tables_only(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    make_store(store)
    with closing(connect(store)) as conn:
        assert tables(conn) == {"t"}  # not its index
        conn.execute("CREATE TABLE u (y)")
        assert tables(conn) == {"t", "u"}
    with closing(connect(tmp_path / "empty.sqlite")) as conn:
        assert tables(conn) == set()
