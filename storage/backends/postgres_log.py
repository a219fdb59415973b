"""Every host's replay log lines in a PostgreSQL store, caught up and then followed live.

The library behind ``sessiontape log stream --store URL``, beside the file follower
(:mod:`sessiontape.storage.skillet.log_follow`), with the same callbacks and filter:

* :meth:`StoreLogStream.catch_up` reads every line there is, in the order the rows were
  written (pages of :data:`PAGE` rows by id), and remembers each conversation's last
  sequence number.
* :meth:`StoreLogStream.follow` waits on ``LISTEN sessiontape_log`` (no polling): each
  append says which conversation and its last sequence number, and the lines after the
  last one seen are read. ``LISTEN`` is issued before the catch-up, so a line written
  meanwhile is announced and read once. Within a conversation, lines commit in sequence
  order (the writer holds a per-conversation lock: ``postgres.PostgresLog``), so none is
  skipped.
* A lost connection (the server restarted) is said once (``on_notice``) and opened again,
  every :data:`RECONNECT_S`; then every conversation whose last sequence number grew is
  read from where it was.

Each conversation is a :class:`StoreLogSource` (a :class:`~.skillet.log_follow.LogSource`
whose names are the raw ones, and whose file is the store's redacted URL and the log's
name): ``--user``, ``--session``, ``--since``, ``--json``, ``--steps`` and ``--format
agentrun`` read it as they read a file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg

from ..names import sanitize_log_name
from ..skillet.log_follow import LogSource, OnEntries, StreamFilter
from .postgres import (
    CONNECT_TIMEOUT_S,
    LOG_CHANNEL,
    LOG_TABLE,
    PostgresStore,
    redacted,
    scrubbed,
)

__all__ = ["PAGE", "RECONNECT_S", "StoreLogSource", "StoreLogStream"]

PAGE = 5000  # rows a catch-up query reads at once
RECONNECT_S = 0.5  # between attempts to reach a server that went away
WAKE_S = 0.2  # how often a follower with nothing to read checks ``stop``

_COLUMNS = "id, user_id, session_name, seq, entry"


@dataclass(frozen=True)
class StoreLogSource(LogSource):
    """One conversation's log in the store: ``user``/``session`` as its file would be named
    on disk (skillet's sanitizing), :attr:`owner` the raw names."""

    user_id: str = ""
    session_name: str = ""

    @property
    def owner(self) -> tuple[str, str] | None:
        return self.user_id, self.session_name

    @classmethod
    def of_pair(cls, where: str, user_id: str, session_name: str) -> StoreLogSource:
        user = sanitize_log_name(user_id)
        session = sanitize_log_name(session_name, ".jsonl").removesuffix(".jsonl")
        return cls(f"{where}#{user}/{session}.jsonl", user, session, user_id, session_name)


class StoreLogStream:
    """Every conversation's log lines in the store at ``url``: :meth:`run` catches up, then
    follows (see the module doc). ``on_entries`` gets each conversation's lines of one
    read at once; ``on_problem`` a line that is not a JSON object; ``on_notice`` a lost and
    regained connection."""

    def __init__(self, url: str, *, on_entries: OnEntries,
                 on_problem: Callable[[str], None] | None = None,
                 on_notice: Callable[[str], None] | None = None,
                 filter: StreamFilter | None = None) -> None:
        self.url = url
        self.where = redacted(url)
        self.on_entries = on_entries
        self.on_problem = on_problem or (lambda text: None)
        self.on_notice = on_notice or (lambda text: None)
        self.filter = filter or StreamFilter()
        self._seen: dict[tuple[str, str], int] = {}  # each conversation's last seq shown
        self._sources: dict[tuple[str, str], StoreLogSource | None] = {}  # None: filtered out
        self._conn: psycopg.Connection[Any] | None = None

    # -- connecting ---------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                               application_name="sessiontape log stream")
        conn.execute(f"LISTEN {LOG_CHANNEL}")
        return conn

    def _fail(self, exc: Exception) -> OSError:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return OSError(f"PostgreSQL store {self.where}: {scrubbed(text, self.url)}")

    def open(self) -> None:
        """Connect (the schema brought up to date: a store no host wrote yet is followed
        too) and listen; OSError (naming the store, never its password) when the server
        cannot be reached."""
        store = PostgresStore(self.url)
        try:
            store.prepare()
        finally:
            store.close_sync()
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- reading ------------------------------------------------------------------------

    def _source(self, pair: tuple[str, str]) -> StoreLogSource | None:
        if pair not in self._sources:
            source = StoreLogSource.of_pair(self.where, *pair)
            self._sources[pair] = source if self.filter.keeps_source(source) else None
        return self._sources[pair]

    def _since_ms(self) -> int:
        since = self.filter.since
        return 0 if since is None else int(since.timestamp() * 1000) - 2000

    def _emit(self, rows: list[tuple[Any, ...]]) -> int:
        """Show rows (in order), each conversation's run of lines in one call; the count."""
        shown = 0
        batch: list[dict[str, Any]] = []
        batch_pair: tuple[str, str] | None = None

        def send() -> None:
            nonlocal shown
            if batch and batch_pair is not None:
                source = self._source(batch_pair)
                if source is not None:
                    self.on_entries(source, list(batch))
                    shown += len(batch)
            batch.clear()

        for _, user_id, session_name, seq, entry in rows:
            pair = (user_id, session_name)
            if seq <= self._seen.get(pair, 0):
                continue  # shown already (a catch-up page and a notification both had it)
            self._seen[pair] = seq
            if pair != batch_pair:
                send()
                batch_pair = pair
            if self._source(pair) is None:
                continue
            try:
                data = orjson.loads(entry)
            except orjson.JSONDecodeError:
                data = None
            if not isinstance(data, dict):
                self.on_problem(f"{self.where} {user_id}/{session_name}: line {seq}: "
                                "not a JSON object")
                continue
            if self.filter.keeps_object(data):
                batch.append(data)
        send()
        return shown

    def catch_up(self) -> int:
        """Show every line there is now (from ``since``); how many."""
        assert self._conn is not None
        shown, after, since = 0, 0, self._since_ms()
        while True:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM {LOG_TABLE} WHERE id > %s AND written_at >= %s "
                "ORDER BY id LIMIT %s", (after, since, PAGE)).fetchall()
            if not rows:
                return shown
            shown += self._emit(rows)
            after = rows[-1][0]

    def _read_pair(self, pair: tuple[str, str]) -> int:
        assert self._conn is not None
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM {LOG_TABLE} WHERE user_id = %s AND session_name = %s "
            "AND seq > %s ORDER BY seq", (*pair, self._seen.get(pair, 0))).fetchall()
        return self._emit(rows)

    def _pair_of(self, payload: str) -> tuple[str, str] | None:
        """The conversation a notification names (by its row id when its names are long)."""
        try:
            note = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return None
        if isinstance(note, list) and len(note) == 3:
            return str(note[0]), str(note[1])
        if isinstance(note, dict) and isinstance(note.get("id"), int):
            assert self._conn is not None
            row = self._conn.execute(f"SELECT user_id, session_name FROM {LOG_TABLE} "
                                     "WHERE id = %s", (note["id"],)).fetchone()
            return (row[0], row[1]) if row is not None else None
        return None

    def _read_grown(self) -> None:
        """After a reconnect: read every conversation whose last line is past the last seen."""
        assert self._conn is not None
        for user_id, session_name, last in self._conn.execute(
                f"SELECT user_id, session_name, MAX(seq) FROM {LOG_TABLE} "
                "WHERE written_at >= %s GROUP BY user_id, session_name",
                (self._since_ms(),)).fetchall():
            if last > self._seen.get((user_id, session_name), 0):
                self._read_pair((user_id, session_name))

    def follow(self, stop: Callable[[], bool] | None = None) -> None:
        """Show each line as it is written, until ``stop()`` is true."""
        stop = stop or (lambda: False)
        while not stop():
            try:
                if self._conn is None:
                    self._conn = self._connect()
                    self.on_notice(f"{self.where}: connected again")
                    self._read_grown()
                # The first notification wakes it; the ones already there come with it.
                notes = list(self._conn.notifies(timeout=WAKE_S, stop_after=1))
                if notes:
                    notes += self._conn.notifies(timeout=0.0)
                pairs = dict.fromkeys(pair for pair in map(self._pair_of,
                                                           (n.payload for n in notes))
                                      if pair is not None)
                for pair in pairs:
                    self._read_pair(pair)
            except psycopg.OperationalError as exc:
                if self._conn is not None:
                    self.on_notice(f"{self._fail(exc)}: connection lost, connecting again")
                    self.close()
                time.sleep(RECONNECT_S)

    def run(self, *, follow: bool = True, stop: Callable[[], bool] | None = None) -> None:
        """:meth:`open`, :meth:`catch_up`, then :meth:`follow` (unless ``follow`` is
        False); closes the connection at the end."""
        self.open()
        try:
            self.catch_up()
            if follow:
                self.follow(stop)
        except psycopg.Error as exc:  # a statement the server refused
            raise self._fail(exc) from None
        finally:
            self.close()
