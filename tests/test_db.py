"""The SQLite connections every store module opens (storage/db.py), on real files.

What must hold: a reader never creates a store file (a missing one is None, not an empty
database), never changes one it opens, and finds it under any name a path can have; every
connection waits the one busy timeout for another process's write. A damaged file (its
header garbled, cut short, not SQLite) is said from its bytes, read as none and refused to
writers, and nothing is made beside it (every verb on it: test_damaged_store.py).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from sessiontape.storage.db import (
    BUSY_TIMEOUT_S,
    DamagedDatabase,
    connect,
    connect_readonly,
    damage,
    tables,
    unwritable,
    writing_problem,
)


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


# -- damaged files: said from their header and size, never opened by SQLite -------------------


def wal_store(path: Path) -> bytes:
    """A store in WAL mode of a few pages, as its last writer leaves it; its bytes."""
    with closing(connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 2000,)] * 8)
    return path.read_bytes()


@pytest.mark.parametrize("damage_it, said", [
    (lambda data: b"not the header!!" + data[16:], "not an SQLite database"),
    (lambda data: data[:50], "not an SQLite database"),
    (lambda data: b"hello\n" * 1000, "not an SQLite database"),
    (lambda data: data[:8192], "cut short: 8192 bytes of the {size} its header gives"),
])
def test_a_damaged_file_is_said_and_refused_and_nothing_is_made_beside_it(
        tmp_path: Path, damage_it: Any, said: str) -> None:
    store = tmp_path / "store.sqlite"
    data = wal_store(store)
    store.write_bytes(damage_it(data))
    found = damage(store)
    assert found is not None and found.path == store
    assert found.reason.startswith(said.format(size=len(data)))
    assert str(found).startswith(f"{store} is damaged ({found.reason}). To repair it")
    assert connect_readonly(store) is None  # read as no store
    with pytest.raises(DamagedDatabase):
        connect(store)
    assert writing_problem(store) is not None
    assert [p.name for p in tmp_path.iterdir()] == ["store.sqlite"]
    assert store.read_bytes() == damage_it(data)


def test_a_file_that_is_not_damaged_is_not_said(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    assert damage(store) is None  # no file
    store.write_bytes(b"")
    assert damage(store) is None  # an empty database
    data = wal_store(store)
    assert (damage(store), unwritable(store), writing_problem(store)) == (None, None, None)
    # Cut short while a writer's WAL is beside it (a checkpoint writing it back, seen half
    # way): not judged here; SQLite does, under its locks.
    store.write_bytes(data[:8192])
    (tmp_path / "store.sqlite-wal").write_bytes(b"")
    assert damage(store) is None


def test_a_second_connection_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock this process holds on it,
    SQLite's too: reading the header of a file this process has open through SQLite let
    another process, closing its own connection, take the file as unused and delete its
    WAL under the open one ("disk I/O error" from then on: found by ``serve``, whose
    requests each open a connection while its watcher keeps one open)."""
    path = tmp_path / "kept.sqlite"
    first = connect(path)
    first.execute("PRAGMA journal_mode = WAL")
    first.execute("CREATE TABLE t (n)")
    first.execute("INSERT INTO t VALUES (1)")
    connect(path).close()  # a second connection of this process, as each request makes
    other = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
             "c.execute('SELECT COUNT(*) FROM t').fetchall(); c.close()")
    subprocess.run([sys.executable, "-c", other, str(path)], check=True, timeout=60)
    assert os.path.exists(f"{path}-wal")
    assert first.execute("SELECT n FROM t").fetchall() == [(1,)]
    first.execute("INSERT INTO t VALUES (2)")
    first.close()


def test_a_writer_is_refused_a_read_only_file_this_process_reads(tmp_path: Path) -> None:
    """A recorder reads a read-only store (its history) while its writer thread links the
    AgentUse tree: the writer's connection was opened unchecked because the file was in use
    here, and SQLite, opening the WAL file read-only, made -wal and -shm beside it (CI:
    test_damaged_store.py's read-only world, under load). Refused, nothing made beside it."""
    store = tmp_path / "store.sqlite"
    with closing(connect(store)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x TEXT)")
    store.chmod(0o400)
    script = ("import sys\nfrom pathlib import Path\nfrom sessiontape.storage.db import "
              "ReadOnlyDatabase, connect, connect_readonly\npath = Path(sys.argv[1])\n"
              "reading = connect_readonly(path)\nreading.execute('SELECT * FROM t')\n"
              "try:\n    connect(path).execute('CREATE TABLE u (y)')\n"
              "except ReadOnlyDatabase as exc:\n    print('refused:', exc.reason)\n")
    argv = [sys.executable, "-c", script, str(store)]
    if os.geteuid() == 0:  # root's capabilities override file modes: drop them, as a user
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.strip() == "refused: it is read-only", done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.sqlite"]
