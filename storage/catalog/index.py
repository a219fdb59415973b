"""The catalog: one SQLite index (a cache) of every conversation in the three layouts.

:class:`Catalog` keeps, in ``user_cache_dir("sessiontape")/catalog.sqlite``, one row per
conversation (a ``(user, session)`` pair of the item store or of a replay log, or a session
of an AgentUse tree that no pair links), its turns, subagent sessions, tool calls, model
calls (tokens and cost) and its texts behind an FTS5 full-text index, shaped on the Agents
Ledger model (docs/formats.md, "Catalog"). The conversations are the ones ``sessions
list`` lists (:func:`sessiontape.storage.catalog.sessions.gather_sessions`); each is kept as that
listing shows it (its ``SessionInfo`` JSON, :meth:`Catalog.listed`) and read into rows as
every export reads it
(:func:`sessiontape.storage.catalog.conversation.read_conversation`): from its AgentUse
tree when it has one, else from its replay log.

:meth:`Catalog.refresh` reconciles the catalog with the files, re-reading only the
conversations that changed and dropping those that vanished. What it states:

* the roots: the store file and its WAL, the logs root and each user directory, the AgentUse
  root. A change there (a conversation added, deleted or moved) lists the conversations
  again, reusing the owner records already read. When only the store changed (every
  recorded turn writes it), only the pairs whose counts in it changed are found again (its
  marks tell which when it only grew); when it only grew, no user directory is gone and
  the user directories (new ones too) and AgentUse root that changed hold nothing but its
  new pairs' logs and trees and sessions no pair links (a conversation sessiontape,
  skilled_crew or AgentUse began, a new user's first one), those are found the same way;
* the heads of each conversation but the quiet ones, and of ``head_slice`` quiet ones in
  turn: its log when it has one (every turn appends to it, whoever writes it), and its
  session directory (a new exchange or a rewritten ``session.json`` changes it: writers
  replace files by renaming; AgentUse continuing a conversation sessiontape logged writes
  its tree alone). A quiet conversation is a store pair whose log was found unchanged
  :data:`HOT_NS` after its last change: every recorded turn gives the pair items, which
  the store shows (above); what is logged without an item stored, and AgentUse writing its
  tree, is seen within ``conversations / head_slice`` refreshes;
* every file and directory of the trees of the live conversations (``running``,
  ``suspended``), of those with a file changed in the last :data:`HOT_NS`, and of the
  ``deep_slice`` least recently checked (as many of these as :data:`DEEP_BUDGET_NS` allows,
  at least one), as a digest of paths, sizes and mtimes. So an edit no head shows (a part
  file edited in place) is seen at once in a recent conversation and within
  ``conversations`` refreshes (``conversations / deep_slice`` when the trees are in the
  page cache) in an old one.

``refresh(full=True)`` states every head and every tree now.

Deleting the catalog loses nothing: the next refresh rebuilds it. A corrupt catalog, or one
of an older schema, is rebuilt; one that cannot be used (a newer schema, locked beyond the
busy timeout, a read-only disk) raises :class:`CatalogUnavailable`, and the caller reads the
layouts directly (or builds :meth:`Catalog.in_memory`). A long refresh commits every
:data:`COMMIT_EVERY` conversations, so a killed build keeps its work. This module only reads
the layouts.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import platformdirs

from ..db import connect, connect_readonly, tables
from ..json_style import dumps_compact, loads
from ..names import match_user
from ..paths import Locations
from ..times import ms_to_iso
from .search_query import fts5_problem, fts5_query

if TYPE_CHECKING:
    from .rows import Found, Rows
    from .sessions import SessionInfo, StoreFact

__all__ = [
    "GROUP_KEYS",
    "HIT_KEYS",
    "KINDS",
    "SCHEMA_VERSION",
    "SNIPPET_END",
    "SNIPPET_START",
    "USAGE_SUMS",
    "Catalog",
    "CatalogUnavailable",
    "Listed",
    "Listing",
    "RefreshSummary",
    "SearchHit",
    "SearchSyntaxError",
    "UsageRow",
    "default_catalog_path",
    "stored_schema",
]

SCHEMA_VERSION = 11
SNIPPET_START, SNIPPET_END = "\x02", "\x03"  # around each match in a snippet
# search --json's (and --csv's) keys
HIT_KEYS = ("session", "user", "turn", "kind", "snippet", "agent", "tool", "at")
# the JSON key that names a usage row's group, and a row's sums, as --json names them
GROUP_KEYS = {"daily": "day", "weekly": "week", "monthly": "month", "session": "session",
              "model": "model", "agent": "agent"}
USAGE_SUMS = ("calls", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens",
              "cost")
KINDS = ("user", "answer", "reasoning", "tool_args", "tool_output", "error")
GROUPS = ("daily", "weekly", "monthly", "session", "model", "agent")
# A file changed less than this before the scan started may change again with the same
# mtime (coarse file system clocks): it is recorded as unknown, so the next scan re-reads it.
RACY_NS = 50_000_000
# A conversation with a file changed this recently has its whole tree stated by each refresh
# (not only its head): it may be written again where its head does not show it. A store
# pair's log found unchanged this long after its last change makes its conversation quiet.
HOT_NS = 600_000_000_000
DEEP_SLICE = 32  # trees wholly stated per refresh beyond the live and the hot ones
# ... but no more than this long on them, beyond the first (old trees may not be in the page
# cache: reading 32 cold ones took 200 ms, 28 warm ones fit); the rest wait for the next
# refresh.
DEEP_BUDGET_NS = 5_000_000
HEAD_SLICE = 512  # quiet heads stated per refresh (the store shows their turns)
COMMIT_EVERY = 500  # conversations read per transaction: a long build killed keeps its work
BUSY_TIMEOUT_S = 5.0  # how long a call waits for another process's write
_UNKNOWN = -2
_MISSING = -1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS conversations (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,      -- [user, session name] (JSON); [null, dir]: a tree alone
  user TEXT,                     -- NULL: a session AgentUse wrote (no user)
  name TEXT NOT NULL,
  agentuse_dir BLOB, agentuse_name TEXT, log_path BLOB,  -- paths as bytes on disk
  status TEXT, last_ms INTEGER,
  found TEXT NOT NULL,           -- how the listing found it (SessionInfo JSON, not filled)
  fingerprint TEXT NOT NULL,     -- of that: another one, and it is read again
  log_owned INTEGER NOT NULL,    -- its log has an owner record
  info TEXT NOT NULL,            -- SessionInfo JSON: what `sessions list --json` shows
  problems TEXT NOT NULL,        -- its problems (JSON list), to warn without parsing info
  read_from TEXT NOT NULL,       -- the rows': agentuse, log, store
  head_size INTEGER, head_mtime_ns INTEGER,  -- of its head: its log, else its tree
  dir_mtime_ns INTEGER,          -- of its tree's directory, when it has a log too
  tree_stamp TEXT,               -- digest of every file of its tree ('': look again)
  newest_ns INTEGER NOT NULL,    -- newest mtime of its files, when last looked at
  checked_ns INTEGER NOT NULL,   -- when its whole tree was last stated
  quiet INTEGER NOT NULL);       -- 1: a store pair whose log was stated unchanged HOT_NS
                                 -- after its last change (its heads: stated in turn); -1:
                                 -- such a log of no pair (stated always, not judged again)
CREATE TABLE IF NOT EXISTS subagent_sessions (
  conversation INTEGER NOT NULL, session_id TEXT, parent_session_id TEXT, call_id TEXT,
  agent TEXT, turn INTEGER);
CREATE TABLE IF NOT EXISTS turns (
  conversation INTEGER NOT NULL, number INTEGER NOT NULL, user_text TEXT, final_text TEXT,
  started_ms INTEGER, ended_ms INTEGER, PRIMARY KEY (conversation, number));
CREATE TABLE IF NOT EXISTS texts (
  id INTEGER PRIMARY KEY, conversation INTEGER NOT NULL, turn INTEGER, kind TEXT NOT NULL,
  agent TEXT, tool TEXT, at_ms INTEGER, content TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS texts_fts
  USING fts5(content, content='texts', content_rowid='id');
CREATE TABLE IF NOT EXISTS tool_calls (
  conversation INTEGER NOT NULL, turn INTEGER, session_id TEXT, call_id TEXT, tool TEXT,
  status TEXT, started_ms INTEGER, completed_ms INTEGER);
CREATE TABLE IF NOT EXISTS model_calls (
  conversation INTEGER NOT NULL, turn INTEGER, agent TEXT, model TEXT,
  input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
  cached_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL,
  cost REAL NOT NULL, at_ms INTEGER);
-- what the store said of each pair at the last listing
CREATE TABLE IF NOT EXISTS store_pairs (
  key TEXT PRIMARY KEY, counts TEXT NOT NULL, link BLOB);
-- the store and its WAL, the log directories, the trees'
CREATE TABLE IF NOT EXISTS roots (
  path BLOB PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS conversations_checked ON conversations (checked_ns);
CREATE INDEX IF NOT EXISTS conversations_newest ON conversations (newest_ns);
CREATE INDEX IF NOT EXISTS conversations_status ON conversations (status);
CREATE INDEX IF NOT EXISTS conversations_heads  -- covers the heads' reads: those not quiet, a slice
  ON conversations (quiet, id, log_path, agentuse_dir, head_size, head_mtime_ns,
                    dir_mtime_ns);
CREATE INDEX IF NOT EXISTS conversations_logs  -- a log known, the logs of one directory
  ON conversations (log_path, log_owned);
-- a tree known, all
CREATE INDEX IF NOT EXISTS conversations_trees ON conversations (agentuse_dir);
CREATE INDEX IF NOT EXISTS conversations_name ON conversations (name);
CREATE INDEX IF NOT EXISTS conversations_found  -- covers a listing's reads of every conversation
  ON conversations (key, fingerprint, log_owned, log_path);
CREATE INDEX IF NOT EXISTS conversations_agentuse_name  -- for LIKE, case-insensitive as LIKE is
  ON conversations (agentuse_name COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS texts_conversation ON texts (conversation);
CREATE INDEX IF NOT EXISTS turns_conversation ON turns (conversation);
CREATE INDEX IF NOT EXISTS subagents_conversation ON subagent_sessions (conversation);
CREATE INDEX IF NOT EXISTS tool_calls_conversation ON tool_calls (conversation);
CREATE INDEX IF NOT EXISTS model_calls_conversation ON model_calls (conversation);
CREATE INDEX IF NOT EXISTS model_calls_at ON model_calls (at_ms);
"""
_COLUMNS = ("key", "user", "name", "agentuse_dir", "agentuse_name", "log_path", "status",
            "last_ms", "found", "fingerprint", "log_owned", "info", "problems", "read_from",
            "head_size", "head_mtime_ns", "dir_mtime_ns", "tree_stamp", "newest_ns",
            "checked_ns", "quiet")
_UPSERT = (f"INSERT INTO conversations ({', '.join(_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(_COLUMNS))}) ON CONFLICT (key) DO UPDATE SET "
           f"{', '.join(f'{c} = excluded.{c}' for c in _COLUMNS[1:])} RETURNING id")
# A condition on the conversations table and its parameters: the conversations a refresh
# brings in line (beyond those added or gone).
_Scope = tuple[str, tuple[Any, ...]]


class _Nearby(NamedTuple):
    """What changed beside the store: user directories of logs, and whether the AgentUse
    root did."""

    logs: set[bytes]
    tree: bool


_PER_CONVERSATION = ("subagent_sessions", "turns", "texts", "tool_calls", "model_calls")


class CatalogUnavailable(RuntimeError):
    """The catalog cannot be used now (locked, read-only, of a newer sessiontape): read
    the layouts directly instead."""


class SearchSyntaxError(ValueError):
    """A raw search query that is not valid FTS5 syntax."""


@dataclass(frozen=True)
class SearchHit:
    """One text that matched: its conversation (session name, user), its 1-based turn, its
    kind (:data:`KINDS`), and a snippet with each match between :data:`SNIPPET_START` and
    :data:`SNIPPET_END`."""

    session: str
    user: str | None
    turn: int | None
    kind: str
    snippet: str
    agent: str | None
    tool: str | None
    at_ms: int | None

    def to_json(self) -> dict[str, Any]:
        """As ``search --json`` gives it (:data:`HIT_KEYS`; the snippet without marks)."""
        plain = self.snippet.replace(SNIPPET_START, "").replace(SNIPPET_END, "")
        return dict(zip(HIT_KEYS, (self.session, self.user, self.turn, self.kind, plain,
                                   self.agent, self.tool, ms_to_iso(self.at_ms)), strict=True))


@dataclass(frozen=True)
class UsageRow:
    """Model calls' tokens and cost summed over one group (a day, an ISO week, a month, a
    session, a model, an agent); ``user`` is the session's for the ``session`` group;
    ``models`` (with ``breakdown``) are the group's calls summed per model, each with the
    model as its ``key``."""

    key: str
    user: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost: float
    models: tuple[UsageRow, ...] = ()

    def to_json(self, group: str) -> dict[str, Any]:
        """As ``usage GROUP --json`` gives it (with a breakdown, its ``models`` too)."""
        record: dict[str, Any] = {GROUP_KEYS[group]: self.key}
        if group == "session":
            record["user"] = self.user
        record.update(zip(USAGE_SUMS, (self.calls, self.input_tokens, self.output_tokens,
                                       self.cached_tokens, self.reasoning_tokens, self.cost),
                          strict=True))
        if self.models:
            record["models"] = [model.to_json("model") for model in self.models]
        return record


@dataclass(frozen=True)
class Listed:
    """A conversation as ``sessions list --json`` shows it: the object as JSON text (as
    stored: parsing 10 000 of them would be most of a listing's time), and its problems."""

    json: str
    problems: list[str]

    def data(self) -> dict[str, Any]:
        """The object itself."""
        parsed: dict[str, Any] = loads(self.json)
        return parsed


class Listing(NamedTuple):
    """A conversation of :meth:`Catalog.page`: its catalog id, and what it is."""

    id: int
    info: SessionInfo


@dataclass
class RefreshSummary:
    """What a refresh did: conversations in the catalog, re-read, dropped, whether every
    conversation was listed again (a root changed) or only the store's changed pairs
    (``store_pairs``), and the problems met while reading."""

    conversations: int = 0
    reindexed: int = 0
    dropped: int = 0
    listed: bool = False  # the layouts were listed again
    store_pairs: int = 0  # pairs found again because only their counts in the store changed
    rebuilt: bool = False  # the catalog was made afresh (new, corrupt, older schema)
    problems: list[str] = field(default_factory=list)


def default_catalog_path() -> Path:
    """``user_cache_dir("sessiontape")/catalog.sqlite`` (``$XDG_CACHE_HOME`` on Linux)."""
    return Path(platformdirs.user_cache_dir("sessiontape")) / "catalog.sqlite"


def _schema_version(conn: sqlite3.Connection) -> int:
    """The schema version a catalog's ``meta`` table holds (0: none readable)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row and str(row[0]).isdigit() else 0


def stored_schema(path: Path) -> int | None:
    """The schema version of the catalog at ``path``, read without changing it; None when
    there is no file or it is not a catalog (which the next refresh rebuilds)."""
    conn = connect_readonly(path, timeout=BUSY_TIMEOUT_S)
    if conn is None:
        return None
    with closing(conn), suppress(sqlite3.Error):
        return _schema_version(conn) or None
    return None


def _ms(value: int | datetime | None) -> int | None:
    """A time as Unix ms (a datetime, or ms already)."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return value


# -- sources ------------------------------------------------------------------------------


_Stat = tuple[int, int]  # size, mtime_ns


def _sql(value: Any) -> Any:
    """``value`` as SQLite text can hold it: a lone surrogate (a name from bytes that are
    not UTF-8, JSON's ``\\udXXX``) becomes U+FFFD. Only in what is shown and searched:
    keys and paths are kept exact (:func:`_path`, the JSON of ``key`` and ``info``)."""
    if type(value) is str and not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
    return value


def _path(path: str) -> bytes:
    """A path as the bytes it has on disk (a BLOB column): exact, whatever its name."""
    try:
        return os.fsencode(path)
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return path.encode("utf-8", "surrogatepass")


def _stat(path: str | bytes) -> _Stat:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return _MISSING, _MISSING
    return st.st_size, st.st_mtime_ns


def _recorded(paths: Sequence[str], started_ns: int) -> list[tuple[bytes, int, int]]:
    """``(path, size, mtime_ns)`` of each path, a racy one (changed just before the scan)
    with an unknown size, so that it is looked at again."""
    rows = []
    for path in paths:
        size, mtime = _stat(path)
        rows.append((_path(path), _UNKNOWN if mtime >= started_ns - RACY_NS else size, mtime))
    return rows


def _same(path: bytes, size: int | None, mtime: int) -> bool:
    """Whether ``path`` has the size (None: whatever it is) and mtime recorded (a racy
    record never has: its size, or its mtime, is ``_UNKNOWN``)."""
    now_size, now_mtime = _stat(path)
    return now_mtime == mtime and (size is None or now_size == size)


def _tree_stamp(directory: str, started_ns: int) -> tuple[str | None, int]:
    """A digest of the path, size and mtime of a session tree's directory and of every
    file and directory in it (not ``.``-names, not what links point to), and the newest
    mtime; the digest is ``""`` when something changed just before the scan (racy: looked
    at again) and None without the directory."""
    top = os.stat(directory, follow_symlinks=False) if os.path.lexists(directory) else None
    if top is None:
        return None, 0
    lines, newest, stack = [], top.st_mtime_ns, [directory]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                newest = max(newest, st.st_mtime_ns)
                lines.append(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\n")
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    if newest >= started_ns - RACY_NS:
        return "", newest
    lines.sort()  # the order of the entries, not that of the directory listing
    return hashlib.blake2b(f"{top.st_mtime_ns}\n{''.join(lines)}".encode(
        "utf-8", "surrogateescape"), digest_size=16).hexdigest(), newest


# -- finding the conversations --------------------------------------------------------------


def _store_pairs(conn: sqlite3.Connection, pairs: set[tuple[str, str]] | None
                 ) -> dict[tuple[str, ...], tuple[str, bytes | None]]:
    """The catalog's ``store_pairs`` rows (of ``pairs`` only, when given) by pair."""
    among = "" if pairs is None else " WHERE key IN (SELECT value FROM json_each(?))"
    params = () if pairs is None else (
        dumps_compact([dumps_compact(list(pair)).decode() for pair in pairs]).decode(),)
    return {tuple(loads(key)): (counts, link) for key, counts, link in
            conn.execute(f"SELECT key, counts, link FROM store_pairs{among}", params)}


def _root_paths(where: Locations) -> list[str]:
    """What says that a conversation came or went: the store (and its WAL), the log
    directories, the AgentUse root."""
    paths = [str(where.store_file), f"{where.store_file}-wal", str(where.logs_root)]
    with suppress(OSError):
        paths += sorted(e.path for e in os.scandir(where.logs_root)
                        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    return paths + ([str(where.agentuse_root)] if where.agentuse_root is not None else [])


def _describe(where: Locations) -> str:
    return dumps_compact([str(where.store_file), str(where.logs_root),
                          str(where.agentuse_root) if where.agentuse_root else None]).decode()


# -- the catalog ----------------------------------------------------------------------------


def _like_escaped(text: str) -> str:
    """``text`` matched as written by ``LIKE ... ESCAPE '\\'`` (its ``%``, ``_``, ``\\``
    escaped)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _is_fts_syntax(exc: sqlite3.OperationalError) -> bool:
    """Whether a failed MATCH was the query's fault (fts5 says so in many ways: syntax
    errors, unterminated strings, unknown columns), not the file's."""
    text = str(exc)
    return not any(word in text for word in ("locked", "busy", "disk", "unable to open",
                                              "readonly", "malformed"))


class Catalog:
    """The SQLite index of every conversation at ``path`` (default
    :func:`default_catalog_path`; directories 0700, file 0600).

    Opened on first use; ``busy_timeout`` seconds is how long a call waits for another
    process's write before raising :class:`CatalogUnavailable`; ``deep_slice`` trees
    beyond the recent ones are wholly stated per refresh, and ``head_slice`` quiet heads;
    a refresh commits every ``commit_every`` conversations read. Use it as a context
    manager, or :meth:`close` it.
    """

    def __init__(self, path: Path | None = None, *, busy_timeout: float = BUSY_TIMEOUT_S,
                 deep_slice: int = DEEP_SLICE, head_slice: int = HEAD_SLICE,
                 commit_every: int = COMMIT_EVERY) -> None:
        self.path = Path(path) if path is not None else default_catalog_path()
        self.busy_timeout = busy_timeout
        self.deep_slice = deep_slice
        self.head_slice = head_slice
        self.commit_every = commit_every
        self._conn: sqlite3.Connection | None = None
        self._nothing = False  # the last refresh found no layout and no catalog
        self._memory = False  # see in_memory()
        self._rebuilt = False

    @classmethod
    def in_memory(cls) -> Catalog:
        """A catalog in memory, gone when closed: built from the layouts by its first
        refresh, for answering when the catalog on disk cannot be used."""
        catalog = cls(Path(":memory:"))
        catalog._memory = True
        return catalog

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection (the next call opens it again)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- opening ----------------------------------------------------------------------

    def _unavailable(self, exc: BaseException) -> CatalogUnavailable:
        reason = getattr(exc, "strerror", None) or str(exc)
        if "locked" in reason or "busy" in reason:
            reason = f"locked by another process for more than {self.busy_timeout:g} s"
        return CatalogUnavailable(f"catalog {self.path} cannot be used ({reason}); "
                                  "reading the sessions directly")

    def _open(self) -> sqlite3.Connection:
        if self._memory:
            conn = connect(":memory:")
            self._version_ok(conn)
            return conn
        if not os.path.lexists(self.path):
            # Only to make it (private): these helpers load the file writer's machinery.
            from ..files import make_private_dir, prepare_private_file

            make_private_dir(self.path.parent)
            prepare_private_file(self.path)
        conn = connect(self.path, timeout=self.busy_timeout)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if not self._version_ok(conn):
                conn.close()
                self._remove()
                return self._open()
        except BaseException:
            conn.close()
            raise
        return conn

    def _version_ok(self, conn: sqlite3.Connection) -> bool:
        """True when the file holds our schema (made now if the file is empty); False for
        an older schema (rebuilt); CatalogUnavailable for a newer one."""
        names = tables(conn)
        if not names:
            # Under the write lock, and each statement IF NOT EXISTS: processes that found
            # the file empty at once make the schema one after the other, the first for all.
            conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA}; INSERT OR IGNORE INTO meta "
                               f"VALUES ('schema_version', '{SCHEMA_VERSION}'); COMMIT;")
            self._rebuilt = True
            return True
        version = _schema_version(conn) if "meta" in names else 0
        if version > SCHEMA_VERSION:
            raise CatalogUnavailable(
                f"catalog {self.path} has schema version {version}, newer than this "
                f"sessiontape's ({SCHEMA_VERSION}); reading the sessions directly")
        return version == SCHEMA_VERSION

    def _remove(self) -> None:
        """Delete the catalog's files (it is only a cache)."""
        for suffix in ("", "-wal", "-shm"):
            with suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self._conn = self._open()
            except CatalogUnavailable:
                raise
            except sqlite3.OperationalError as exc:
                raise self._unavailable(exc) from None
            except sqlite3.DatabaseError:  # not a database, malformed: start again
                self._remove()
                self._conn = self._retry_open()
            except OSError as exc:
                raise self._unavailable(exc) from None
        return self._conn

    def _retry_open(self) -> sqlite3.Connection:
        try:
            return self._open()
        except (sqlite3.Error, OSError) as exc:
            raise self._unavailable(exc) from None

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection (an empty one in memory when nothing is recorded); sqlite errors
        as CatalogUnavailable."""
        if self._nothing:
            with closing(sqlite3.connect(":memory:")) as empty:
                empty.executescript(_SCHEMA)
                yield empty
            return
        conn = self._connection()
        try:
            yield conn
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None

    # -- refresh ----------------------------------------------------------------------

    def refresh(self, where: Locations, progress: Callable[[int, int], None] | None = None,
                *, full: bool = False) -> RefreshSummary:
        """Bring the catalog in line with the layouts, re-reading only the conversations
        that changed (a corrupt catalog is rebuilt from scratch). What it states is in the
        module's docstring; ``full`` states every file of every tree. ``progress`` is
        called with (conversations re-read, conversations to re-read) after each."""
        return self._refreshed(where, progress, full, None)

    def _refreshed(self, where: Locations, progress: Callable[[int, int], None] | None,
                   full: bool, scope: _Scope | None) -> RefreshSummary:
        """:meth:`refresh`, of the conversations ``scope`` selects when given (and of any
        conversation added or gone)."""
        if (self._memory or not os.path.lexists(self.path)) and not any(
                os.path.lexists(path) for path in (where.store_file, where.logs_root,
                                                   where.agentuse_root) if path is not None):
            self._nothing = True  # nothing recorded: answer from an empty catalog in memory
            return RefreshSummary()
        self._nothing = False
        try:
            return self._refresh(where, progress, full, scope)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise self._unavailable(exc) from None
            self.close()
            self._remove()
            return self._refresh(where, progress, full, scope)

    def _refresh(self, where: Locations, progress: Callable[[int, int], None] | None,
                 full: bool, scope: _Scope | None) -> RefreshSummary:
        conn = self._connection()
        summary = RefreshSummary(rebuilt=self._rebuilt)
        started = time.time_ns()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._unavailable(exc) from None
        try:
            self._reconcile(conn, where, started, summary, progress, full, scope)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._rebuilt = False
        summary.conversations = conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
        return summary

    def _reconcile(self, conn: sqlite3.Connection, where: Locations, started: int,
                   summary: RefreshSummary, progress: Callable[[int, int], None] | None,
                   full: bool, scope: _Scope | None) -> None:
        new, roots = self._listing(conn, where, started, summary)
        due = self._due(conn, started, full, scope)
        if new or due:
            from .rows import Found  # the layouts' readers: only when something is read

            listed = {item.key for item in new}
            changed = new + [Found.stored(text, owned) for key, text, owned in conn.execute(
                "SELECT key, found, log_owned FROM conversations WHERE id IN "
                "(SELECT value FROM json_each(?))", (dumps_compact(sorted(due)).decode(),))
                if key not in listed]
            for done, item in enumerate(changed, start=1):
                self._index(conn, item, where.store_file, started, summary)
                if done % self.commit_every == 0:  # kept if this process is killed
                    conn.execute("COMMIT")
                    conn.execute("BEGIN IMMEDIATE")
                if progress is not None:
                    progress(done, len(changed))
        if roots is not None:
            # Last: after a refresh that did not end, the next one lists the conversations
            # again, and skips those this one read (their fingerprints match).
            conn.execute("DELETE FROM roots")
            conn.executemany("INSERT INTO roots VALUES (?, ?, ?)", roots)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('locations', ?)",
                         (_describe(where),))

    def _listing(self, conn: sqlite3.Connection, where: Locations, started: int,
                 summary: RefreshSummary) -> tuple[list[Found], list[Any] | None]:
        """The conversations found anew, and the roots to keep (None: none changed). A
        changed root lists them all again, except that a store written for known pairs
        finds only those again, and a store grown with new pairs those too when the user
        directories (new ones included) and the AgentUse root that changed hold nothing
        else (:meth:`_store_changed`)."""
        roots = conn.execute("SELECT path, size, mtime_ns FROM roots").fetchall()
        known, now = {r[0] for r in roots}, set(map(_path, _root_paths(where)))
        same_place = bool(roots) and conn.execute(
            "SELECT value FROM meta WHERE key = 'locations'").fetchone() == (_describe(where),)
        changed = {path for path, size, mtime in roots if _stat(path) != (size, mtime)}
        if same_place and now == known and not changed:
            return [], None
        store = {_path(str(where.store_file)), _path(f"{where.store_file}-wal")}
        tree_root = {_path(str(where.agentuse_root))} if where.agentuse_root else set()
        logs_root = _path(str(where.logs_root))
        user_dirs = known - store - tree_root - {logs_root}
        begun = now - known  # user directories: the other roots are the same place's
        explained = store | user_dirs | tree_root | ({logs_root} if begun else set())
        if same_place and known <= now and changed <= explained:
            found = self._store_changed(conn, where, started, _Nearby(
                (changed & user_dirs) | begun, bool(changed & tree_root)))
            if found is not None:
                summary.store_pairs = len(found[0])
                return found
        summary.listed = True
        return self._found_again(conn, where, started, summary)

    def _due(self, conn: sqlite3.Connection, started: int, full: bool,
             scope: _Scope | None) -> set[int]:
        """The catalog's conversations (those ``scope`` selects) whose files changed, by
        their heads (:meth:`_heads_changed`) and their trees (:meth:`_trees_changed`)."""
        among, params = (f" AND ({scope[0]})", scope[1]) if scope is not None else ("", ())
        every = full or scope is not None
        due = self._heads_changed(conn, started, every, among, params)
        return due | self._trees_changed(conn, started, every, among, params, due)

    def _heads_changed(self, conn: sqlite3.Connection, started: int, every: bool,
                       among: str, params: tuple[Any, ...]) -> set[int]:
        """The conversations whose heads changed: the heads not quiet and
        :attr:`head_slice` quiet ones are stated (``every``: all), and the directory of a
        tree linked to a log with its log (AgentUse continuing the conversation changes
        it). A store pair's log found unchanged HOT_NS after its last change becomes quiet:
        the store shows its turns."""
        heads = "SELECT id, log_path, agentuse_dir, head_size, head_mtime_ns, dir_mtime_ns, " \
            "quiet FROM conversations WHERE (log_path IS NOT NULL OR agentuse_dir IS NOT NULL)"
        if every:
            rows = conn.execute(f"{heads}{among}", params).fetchall()
        else:
            rows = conn.execute(f"{heads} AND quiet <= 0").fetchall() + self._quiet_slice(
                conn, heads)
        due, settled = set(), []
        for conversation, log, directory, size, mtime, dir_mtime, quiet in rows:
            if not _same(log or directory, size, mtime) or (
                    dir_mtime is not None and not _same(directory, None, dir_mtime)):
                due.add(conversation)
            elif quiet == 0 and log is not None and mtime < started - HOT_NS:
                settled.append((conversation,))
        # Judged once until read again: quiet when the store shows its turns, else -1.
        conn.executemany("UPDATE conversations SET quiet = CASE WHEN key IN (SELECT key "
                         "FROM store_pairs) THEN 1 ELSE -1 END WHERE id = ?", settled)
        return due

    def _trees_changed(self, conn: sqlite3.Connection, started: int, every: bool,
                       among: str, params: tuple[Any, ...], due: set[int]) -> set[int]:
        """The conversations (beyond ``due``) whose trees changed: every file of the trees
        of the live ones, the hot ones and the :attr:`deep_slice` least recently checked,
        within :data:`DEEP_BUDGET_NS`, is stated (``every``: of all trees). Trees found
        unchanged are marked checked."""
        trees = "SELECT id, agentuse_dir, tree_stamp FROM conversations WHERE agentuse_dir " \
            f"IS NOT NULL{among}"
        if every:
            recent, oldest = conn.execute(trees, params).fetchall(), []
        else:  # each by its index: a scan of the table costs more than all the rest
            recent = conn.execute(f"{trees} AND (status IN ('running', 'suspended') OR "
                                  "newest_ns >= ?)", (started - HOT_NS,)).fetchall()
            oldest = conn.execute(f"{trees} ORDER BY checked_ns LIMIT ?",
                                  (self.deep_slice,)).fetchall()
        looked = {row[0] for row in recent}
        old = [row for row in oldest if row[0] not in looked]
        changed, checked, old_since = set(), [], 0
        for index, (conversation, directory, stamp) in enumerate(recent + old):
            if index >= len(recent):  # old trees: within the budget, at least one
                old_since = old_since or time.time_ns()
                if time.time_ns() - old_since > DEEP_BUDGET_NS:
                    break  # those not reached are the first of the next refresh
            if conversation in due:
                continue
            if stamp == "" or _tree_stamp(os.fsdecode(directory), started)[0] != stamp:
                changed.add(conversation)
            else:
                checked.append((started, conversation))
        conn.executemany("UPDATE conversations SET checked_ns = ? WHERE id = ?", checked)
        return changed

    def _quiet_slice(self, conn: sqlite3.Connection, heads: str) -> list[Any]:
        """The next :attr:`head_slice` quiet heads, in turn (by id, from where the last
        refresh stopped, round again at the end)."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'head_cursor'").fetchone()
        after = int(row[0]) if row else 0
        rows = conn.execute(f"{heads} AND quiet = 1 AND id > ? ORDER BY id LIMIT ?",
                            (after, self.head_slice)).fetchall()
        if len(rows) < self.head_slice and after:
            rows += conn.execute(f"{heads} AND quiet = 1 AND id <= ? ORDER BY id LIMIT ?",
                                 (after, self.head_slice - len(rows))).fetchall()
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('head_cursor', ?)",
                     (str(rows[-1][0] if rows else 0),))
        return rows

    def _store_changed(self, conn: sqlite3.Connection, where: Locations, started: int,
                       nearby: _Nearby) -> tuple[list[Found], list[Any]] | None:
        """The store was written (every recorded turn writes it), and perhaps user
        directories of logs and the AgentUse root (a conversation sessiontape began): the
        pairs whose counts changed or that are new, found again (not every conversation),
        to be read if that changed them, and the roots; None when the conversations must
        be listed again (a pair gone, a link changed, a log or tree that no new pair of
        the store owns, a log or tree gone: :meth:`_nearby_explained`)."""
        from .rows import Found
        from .sessions import gather_sessions, store_facts

        roots = _recorded(_root_paths(where), started)  # before reading: a later change shows
        growth = self._store_grown(conn, where)
        grown, links_added = growth if growth is not None else (None, 0)
        before = _store_pairs(conn, grown)
        if grown is not None:  # only items (and links) added: those pairs' facts alone
            facts = store_facts(where.store_file, grown)
            if facts.keys() != grown or links_added != sum(
                    1 for pair, fact in facts.items() if fact.link and pair not in before):
                return None  # a link added or changed beyond the new pairs' own
        elif nearby.logs or nearby.tree:
            return None
        else:
            facts = store_facts(where.store_file)
            if facts.keys() != before.keys():
                return None
        now = {pair: (repr(fact[:5]), _path(fact.link) if fact.link else None)
               for pair, fact in facts.items()}
        new = facts.keys() - before.keys()
        changed = {pair for pair in facts if pair in new or now[pair] != before[pair]}
        if any(now[pair][1] != before[pair][1] for pair in changed - new):
            return None
        infos = gather_sessions(None, where, pairs=changed) if changed else []
        if any(info.agentuse_dir is not None and not info.agentuse_dir.is_dir()
               for info in infos):
            return None  # a link to a moved tree: the listing finds it again
        besides = self._nearby_explained(conn, where, nearby, [
            info for info in infos if (info.user_id, info.session_name) in new])
        if besides is None:
            return None
        infos += besides
        conn.executemany("INSERT OR REPLACE INTO store_pairs VALUES (?, ?, ?)",
                         [(dumps_compact(list(pair)).decode(), *now[pair]) for pair in changed])
        found = [Found.of(info) for info in infos]
        stored = dict(conn.execute(
            "SELECT key, fingerprint FROM conversations WHERE key IN "
            "(SELECT value FROM json_each(?))",
            (dumps_compact([item.key for item in found]).decode(),)).fetchall())
        return [item for item in found if stored.get(item.key) != item.fingerprint()], roots

    @staticmethod
    def _nearby_explained(conn: sqlite3.Connection, where: Locations, nearby: _Nearby,
                          new: list[SessionInfo]) -> list[SessionInfo] | None:
        """The sessions AgentUse began in its root (new directories that no pair links),
        when the rest of what changed in the user directories and the AgentUse root is
        the ``new`` pairs' own: every log found there that the catalog does not know is
        one of theirs (as listing everything would give it them), and every other new
        session directory; none that it knows is gone, has gained or lost its owner
        record, or is theirs. Then listing everything again would find nothing else;
        None when it would."""
        from ..skillet.log_owners import owner_record_name

        logs = {_path(str(info.log_path)) for info in new if info.log_path is not None}
        dirs = {_path(str(info.agentuse_dir)) for info in new if info.agentuse_dir is not None}
        if any(conn.execute(f"SELECT 1 FROM conversations WHERE {column} = ?",
                            (path,)).fetchone()
               for column, paths in (("log_path", logs), ("agentuse_dir", dirs))
               for path in paths):
            return None  # a new pair takes over a known log or tree: that one goes
        for directory in nearby.logs:
            entries = {}
            with suppress(OSError):  # as sessions list lists them: _listed_logs
                entries = {entry.name: entry for entry in os.scandir(directory)}
            owned = {entry.path: os.fsencode(owner_record_name(os.fsdecode(name))) in entries
                     for name, entry in entries.items()
                     if name.endswith(b".jsonl") and not name.startswith(b".")
                     and entry.is_file()}
            known = dict(conn.execute(
                "SELECT log_path, log_owned FROM conversations WHERE log_path >= ? AND "
                "log_path < ?", (directory + b"/", directory + b"0")).fetchall())
            if any(path not in owned or owned[path] != bool(was_owned)
                   for path, was_owned in known.items()):
                return None  # a log gone, or its owner record come or gone
            if not owned.keys() - known <= logs:
                return None  # a log no new pair takes (skilled_crew's logs have no owner)
        besides: list[SessionInfo] = []
        if nearby.tree and where.agentuse_root is not None:
            from .sessions import session_dir_id, tree_only_session

            present: dict[str, os.DirEntry[str]] = {}
            with suppress(OSError), os.scandir(where.agentuse_root) as listing:
                present = {entry.name: entry for entry in listing
                           if entry.is_dir(follow_symlinks=False)}
            root = _path(str(where.agentuse_root))
            under = {os.fsdecode(name) for (name,) in conn.execute(  # known trees in it
                "SELECT substr(agentuse_dir, ?) FROM conversations WHERE agentuse_dir > ? "
                "AND agentuse_dir < ?", (len(root) + 2, root + b"/", root + b"0"))}
            if under - present.keys():
                return None  # a known tree gone or renamed: the listing finds it again
            # A link may spell the root otherwise (through a symbolic link): known by name
            # (agentuse_name shows a name that is not UTF-8 otherwise: listed then).
            named = {name for (name,) in conn.execute(
                "SELECT agentuse_name FROM conversations WHERE agentuse_name IS NOT NULL")}
            ours = {info.agentuse_dir.name for info in new if info.agentuse_dir is not None}
            for name in sorted(present.keys() - under - named - ours):
                session_id = session_dir_id(present[name])
                if session_id is None:
                    continue  # not a session directory, as sessions list reads the root
                if conn.execute("SELECT 1 FROM conversations WHERE agentuse_name LIKE ?",
                                (f"{session_id}%",)).fetchone():
                    return None  # its ULID known: a tree merges with its pair, the listing
                    # decides
                info = tree_only_session(Path(present[name].path))
                if info is not None:
                    besides.append(info)
        return besides

    def _store_grown(self, conn: sqlite3.Connection, where: Locations
                     ) -> tuple[set[tuple[str, str]], int] | None:
        """The pairs given items since the store was last looked at and the number of
        links added, when nothing else happened to it
        (:func:`~sessiontape.storage.catalog.sessions.store_growth`); the marks are kept for next
        time."""
        from .sessions import store_growth

        row = conn.execute("SELECT value FROM meta WHERE key = 'store_marks'").fetchone()
        before = loads(row[0]) if row else None
        marks, grown = store_growth(where.store_file, before)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('store_marks', ?)",
                     (dumps_compact(marks).decode(),))
        if grown is None or marks is None or before is None:
            return None
        return grown, marks[-1] - before[-1]

    def _keep_store_facts(self, conn: sqlite3.Connection, where: Locations
                          ) -> dict[tuple[str, str], StoreFact]:
        """What the store says of each pair now, kept for :meth:`_store_changed` to compare
        (and its marks, taken first: a pair written meanwhile is looked at again)."""
        from .sessions import store_facts

        self._store_grown(conn, where)
        facts = store_facts(where.store_file)
        kept = {key: (counts, link) for key, counts, link in
                conn.execute("SELECT key, counts, link FROM store_pairs")}
        rows = {dumps_compact(list(pair)).decode(): (
            repr(fact[:5]), _path(fact.link) if fact.link else None)
            for pair, fact in facts.items()}
        conn.executemany("DELETE FROM store_pairs WHERE key = ?",
                         [(key,) for key in kept.keys() - rows.keys()])
        conn.executemany("INSERT OR REPLACE INTO store_pairs VALUES (?, ?, ?)", [
            (key, *row) for key, row in rows.items() if kept.get(key) != row])
        return facts

    def _found_again(self, conn: sqlite3.Connection, where: Locations, started: int,
                     summary: RefreshSummary) -> tuple[list[Found], list[Any]]:
        """List the conversations again: drop the gone ones; the new ones and those found
        otherwise than before (another tree, log or origin, the store's counts), to be
        read, and the roots as stated before the listing."""
        from .rows import discover

        roots = _recorded(_root_paths(where), started)  # before listing: a later change shows
        facts = self._keep_store_facts(conn, where)
        stored = {key: (conversation, fingerprint) for conversation, key, fingerprint in
                  conn.execute("SELECT id, key, fingerprint FROM conversations")}
        owners = {os.fsdecode(log): tuple(loads(key)) for log, key in conn.execute(
            "SELECT log_path, key FROM conversations WHERE log_owned")}
        found = discover(where, owners, facts)
        keys = {item.key for item in found}
        for key, (conversation, _) in stored.items():
            if key not in keys:
                self._drop(conn, conversation)
                summary.dropped += 1
        to_read = [item for item in found
                   if stored.get(item.key, (0, None))[1] != item.fingerprint()]
        return to_read, roots

    def _drop(self, conn: sqlite3.Connection, conversation: int) -> None:
        self._clear(conn, conversation)
        conn.execute("DELETE FROM conversations WHERE id = ?", (conversation,))

    def _index(self, conn: sqlite3.Connection, item: Found, store_file: Path, started: int,
               summary: RefreshSummary) -> None:
        """(Re-)read one conversation: its head and tree stated first, so that a change
        made while it is read shows at the next refresh."""
        from .rows import read

        directory, log = (str(path) if path else None
                          for path in (item.info.agentuse_dir, item.info.log_path))
        head = log or directory
        ((_, head_size, head_mtime),) = _recorded([head] if head else [], started) or \
            [(b"", _MISSING, _MISSING)]
        dir_mtime = None
        if log and directory:  # a tree linked to a log: its directory is a second head
            ((_, dir_size, dir_mtime),) = _recorded([directory], started)
            dir_mtime = _UNKNOWN if dir_size == _UNKNOWN else dir_mtime
        stamp, newest = _tree_stamp(directory, started) if directory else (None, 0)
        reading = read(item, store_file)
        info = reading.info
        summary.problems += reading.problems
        summary.reindexed += 1
        conversation = conn.execute(_UPSERT, (
            item.key, _sql(info.user_id), _sql(info.session_name),
            _path(directory) if directory else None,
            _sql(os.path.basename(directory)) if directory else None,
            _path(log) if log else None, _sql(info.status),
            info.last_ms, item.json(), item.fingerprint(), item.log_owned,
            dumps_compact(info.to_json()).decode(), dumps_compact(info.problems).decode(),
            reading.read_from, head_size, head_mtime, dir_mtime, stamp,
            max(newest, head_mtime), started, 0)).fetchone()[0]
        self._clear(conn, conversation)
        self._insert(conn, conversation, reading.rows)

    def _clear(self, conn: sqlite3.Connection, conversation: int) -> None:
        conn.execute("INSERT INTO texts_fts (texts_fts, rowid, content) "
                     "SELECT 'delete', id, content FROM texts WHERE conversation = ?",
                     (conversation,))
        for table in _PER_CONVERSATION:
            conn.execute(f"DELETE FROM {table} WHERE conversation = ?", (conversation,))

    def _insert(self, conn: sqlite3.Connection, conversation: int, rows: Rows) -> None:
        def many(table: str, values: list[tuple[Any, ...]]) -> None:
            if values:
                marks = ",".join("?" * (len(values[0]) + 1))
                conn.executemany(f"INSERT INTO {table} VALUES ({marks})",
                                 [(conversation, *map(_sql, v)) for v in values])

        many("turns", rows.turns)
        many("subagent_sessions", rows.subagents)
        many("tool_calls", rows.tool_calls)
        many("model_calls", rows.model_calls)
        for text in rows.texts:
            values = [*map(_sql, text)]
            rowid = conn.execute("INSERT INTO texts (conversation, turn, kind, agent, tool, "
                                 "at_ms, content) VALUES (?,?,?,?,?,?,?)",
                                 (conversation, *values)).lastrowid
            conn.execute("INSERT INTO texts_fts (rowid, content) VALUES (?, ?)",
                         (rowid, values[-1]))

    # -- queries ----------------------------------------------------------------------

    def search(self, query: str, *, user: str | None = None, agent: str | None = None,
               tool: str | None = None, kind: str | None = None,
               since: int | datetime | None = None, limit: int = 50,
               raw: bool = False) -> list[SearchHit]:
        """The texts matching ``query``, best first, filtered by the conversation's user (as
        typed: :meth:`user`), the agent, the tool, the kind and the time (``since``: Unix ms
        or a datetime). ``query`` is the search syntax
        (:func:`~sessiontape.storage.catalog.search_query.fts5_query`: words as written,
        ``"phrases"``, ``prefix*``, ``OR``/``NOT``/``AND``), which any string is; with
        ``raw``, FTS5's own, and a malformed one raises :class:`SearchSyntaxError`."""
        user = self.user(user) if user is not None else None
        match = _sql(query) if raw else fts5_query(_sql(query))
        if not match:
            return []
        where, params = ["texts_fts MATCH ?"], [match]  # type: list[str], list[Any]
        for column, value in (("c.user", user), ("t.agent", agent), ("t.tool", tool),
                              ("t.kind", kind)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(_sql(value))
        if since is not None:
            where.append("t.at_ms >= ?")
            params.append(_ms(since))
        sql = ("SELECT c.name, c.user, t.turn, t.kind, snippet(texts_fts, 0, ?, ?, '…', 16), "
               "t.agent, t.tool, t.at_ms FROM texts_fts JOIN texts t ON t.id = texts_fts.rowid "
               f"JOIN conversations c ON c.id = t.conversation WHERE {' AND '.join(where)} "
               "ORDER BY rank LIMIT ?")
        with self._reading() as conn:
            try:
                rows = conn.execute(sql, [SNIPPET_START, SNIPPET_END, *params, limit]).fetchall()
            except sqlite3.OperationalError as exc:
                if _is_fts_syntax(exc):
                    raise SearchSyntaxError(f"invalid search query {query!r}: "
                                            f"{fts5_problem(str(exc))}") from None
                raise
        return [SearchHit(*row) for row in rows]

    def user(self, typed: str) -> str:
        """The user id ``typed`` means among the catalog's users, the way people type one
        (:func:`~sessiontape.storage.names.match_user`: the exact id, else case ignored,
        else the part before ``@``, else the log folder's name); raises
        :class:`~sessiontape.storage.names.AmbiguousUserError` when it means several."""
        with self._reading() as conn:
            users = [user for (user,) in conn.execute(
                "SELECT DISTINCT user FROM conversations WHERE user IS NOT NULL")]
        return match_user(_sql(typed), users)

    def usage(self, group: str, *, since: int | datetime | None = None,
              until: int | datetime | None = None, user: str | None = None,
              breakdown: bool = False) -> list[UsageRow]:
        """Tokens and cost of the model calls, summed per ``group`` (:data:`GROUPS`:
        ``daily``, ``weekly`` (ISO weeks, ``2025-W01``) and ``monthly`` in UTC, ``session``,
        ``model``, ``agent``), from ``since`` (included) to ``until`` (excluded), of
        ``user`` (as typed: :meth:`user`) or everyone's. With ``breakdown`` (not for
        ``model``), each row's ``models`` sum its calls per model."""
        thursday = "date(m.at_ms / 1000, 'unixepoch', '-3 days', 'weekday 4')"  # its ISO week's
        keys = {"daily": "strftime('%Y-%m-%d', m.at_ms / 1000, 'unixepoch')",
                "weekly": f"strftime('%Y', {thursday}) || "
                          f"printf('-W%02d', (strftime('%j', {thursday}) - 1) / 7 + 1)",
                "monthly": "strftime('%Y-%m', m.at_ms / 1000, 'unixepoch')",
                "session": "c.name", "model": "m.model", "agent": "m.agent"}
        if group not in keys:
            raise ValueError(f"unknown usage group {group!r}; one of {', '.join(GROUPS)}")
        if breakdown and group == "model":
            raise ValueError("a breakdown per model is for the groups other than model")
        owner = "c.user" if group == "session" else "NULL"
        where, params = ["1"], []  # type: list[str], list[Any]
        for op, value in ((">=", since), ("<", until)):
            if value is not None:
                where.append(f"m.at_ms {op} ?")
                params.append(_ms(value))
        if user is not None:
            where.append("c.user = ?")
            params.append(_sql(self.user(user)))

        def sql(*extra: str) -> str:
            columns = ", ".join([f"COALESCE({keys[group]}, '')", owner, *extra])
            by = ", ".join(str(n) for n in range(1, 3 + len(extra)))
            return (f"SELECT {columns}, COUNT(*), SUM(m.input_tokens), SUM(m.output_tokens), "
                    "SUM(m.cached_tokens), SUM(m.reasoning_tokens), SUM(m.cost) FROM "
                    "model_calls m JOIN conversations c ON c.id = m.conversation "
                    f"WHERE {' AND '.join(where)} GROUP BY {by} ORDER BY {by}")

        with self._reading() as conn:
            rows = conn.execute(sql(), params).fetchall()
            per_model = (conn.execute(sql("COALESCE(m.model, '')"), params).fetchall()
                         if breakdown else [])
        models: dict[tuple[Any, Any], list[UsageRow]] = {}
        for key, owner_id, model, *sums in per_model:
            models.setdefault((key, owner_id), []).append(UsageRow(model, None, *sums))
        return [replace(UsageRow(*row), models=tuple(models.get(row[:2], ()))) for row in rows]

    def listed(self, user: str | None = None) -> list[Listed]:
        """Every conversation (of ``user``, and then no AgentUse-only one) as ``sessions
        list --json`` shows it, in its order
        (:func:`~sessiontape.storage.catalog.sessions.listing_key`); ``running`` becomes
        ``crashed`` when its recorder is gone."""
        from .sessions import SessionInfo, listing_key, recheck_status

        where, params = ("WHERE user = ?", [_sql(user)]) if user is not None else ("", [])
        with self._reading() as conn:
            rows = conn.execute("SELECT key, last_ms, status, info, problems FROM "
                                f"conversations {where}", params).fetchall()
        found = []
        for key, last_ms, status, info, problems in rows:
            if status == "running":
                info = dumps_compact(recheck_status(SessionInfo.from_json(loads(info))
                                                    ).to_json()).decode()
            user_id, name = loads(key)  # exact, as the columns shown are not
            name = name if user_id is not None else os.path.basename(name)
            found.append((listing_key(last_ms, user_id, name), info, problems))
        found.sort(key=lambda row: row[0])
        return [Listed(info, loads(problems) if problems != "[]" else [])
                for _, info, problems in found]

    def oldest_first(self, user: str | None = None) -> Iterator[SessionInfo]:
        """Every conversation :meth:`listed` gives (of ``user``), oldest first as the exports
        take them (:func:`~sessiontape.storage.catalog.sessions.export_key`), one at a time:
        SQLite orders them by their first activity and hands them over a row at a time, so
        only the conversations that began in the same millisecond are held together (to
        order them by user and name exactly as Python does: the ``user`` and ``name``
        columns are the shown, not the exact, names). The statuses are not checked again
        (:meth:`listed` does). Hold the catalog open until the iterator is done."""
        from .sessions import SessionInfo, export_key

        where, params = ("WHERE user = ?", [_sql(user)]) if user is not None else ("", [])
        with self._reading() as conn:
            # Only the ids are sorted (SQLite's sorter holds what it sorts), then each
            # conversation's info is read by its id.
            rows = conn.execute(
                f"SELECT coalesce(json_extract(info, '$.first_ms'), 0) AS began, id FROM "
                f"conversations {where} ORDER BY began", params)
            same: list[SessionInfo] = []
            began: int | None = None
            for first_ms, row_id in rows:
                if same and first_ms != began:
                    same.sort(key=export_key)
                    yield from same
                    same = []
                began = first_ms
                (info,), = conn.execute("SELECT info FROM conversations WHERE id = ?",
                                        (row_id,)).fetchall()
                same.append(SessionInfo.from_json(loads(info)))
            same.sort(key=export_key)
            yield from same

    def page(self, *, text: str | None = None, status: str | None = None,
             user: str | None = None, since: int | datetime | None = None, offset: int = 0,
             limit: int = 50) -> tuple[int, list[Listing]]:
        """``limit`` conversations from ``offset``, in the order of :meth:`listed` (newest
        activity first, then user and name), of those whose name, user or agent holds
        ``text`` (case ignored), whose status is ``status``, of ``user`` (as typed:
        :meth:`user`) and last active at or after ``since`` (Unix ms or a datetime); and
        how many there are in all. SQLite sorts and slices, so a page of 10 000
        conversations parses only its own rows; ``running`` becomes ``crashed`` when its
        recorder is gone (of the page's rows: a ``status`` filter goes by the status the
        catalog holds)."""
        from .sessions import SessionInfo, recheck_status

        where, params = ["1"], []  # type: list[str], list[Any]
        if text:
            pattern = f"%{_like_escaped(_sql(text))}%"
            where.append("(name LIKE ?1 ESCAPE '\\' OR user LIKE ?1 ESCAPE '\\' OR "
                         "agentuse_name LIKE ?1 ESCAPE '\\' OR "
                         "json_extract(info, '$.agent') LIKE ?1 ESCAPE '\\')")
            params.append(pattern)
        for column, value in (("status", status),
                              ("user", self.user(user) if user is not None else None)):
            if value is not None:
                where.append(f"{column} = ?{len(params) + 1}")
                params.append(_sql(value))
        if since is not None:
            where.append(f"last_ms >= ?{len(params) + 1}")
            params.append(_ms(since))
        condition = " AND ".join(where)
        with self._reading() as conn:
            (total,), = conn.execute(f"SELECT COUNT(*) FROM conversations WHERE {condition}",
                                     params).fetchall()
            rows = conn.execute(
                f"SELECT id, info FROM conversations WHERE {condition} ORDER BY "
                "coalesce(last_ms, 0) DESC, coalesce(user, ''), name, id "
                f"LIMIT ?{len(params) + 1} OFFSET ?{len(params) + 2}",
                [*params, max(0, limit), max(0, offset)]).fetchall()
        page = []
        for row_id, info in rows:
            found = SessionInfo.from_json(loads(info))
            page.append(Listing(row_id, recheck_status(found) if found.status == "running"
                                else found))
        return total, page

    def by_id(self, row_id: int) -> SessionInfo | None:
        """The conversation of catalog id ``row_id`` (:meth:`page` gives them; stable while
        the catalog is not rebuilt), or None."""
        from .sessions import SessionInfo, recheck_status

        with self._reading() as conn:
            rows = conn.execute("SELECT info FROM conversations WHERE id = ?",
                                (row_id,)).fetchall()
        return recheck_status(SessionInfo.from_json(loads(rows[0][0]))) if rows else None

    def ids_of(self, hits: Sequence[SearchHit]) -> list[int | None]:
        """The catalog id of each hit's conversation (None: gone since)."""
        with self._reading() as conn:
            return [next((row_id for (row_id,) in conn.execute(
                "SELECT id FROM conversations WHERE name = ? AND user IS ?",
                (hit.session, hit.user))), None) for hit in hits]

    def versions(self) -> dict[int, tuple[Any, ...]]:
        """Each conversation's id and what changes when it does (its last activity, status
        and the size of what the listing shows): two calls tell which changed between
        them."""
        with self._reading() as conn:
            return {row_id: rest for row_id, *rest in conn.execute(
                "SELECT id, last_ms, status, length(info), problems FROM conversations")}

    def listing(self, user: str | None = None) -> list[dict[str, Any]]:
        """:meth:`listed`, each object parsed."""
        return [listed.data() for listed in self.listed(user)]

    def conversations(self, user: str | None = None) -> list[SessionInfo]:
        """:meth:`listing` as SessionInfo."""
        from .sessions import SessionInfo

        return [SessionInfo.from_json(data) for data in self.listing(user)]

    def find(self, query: str, user: str | None = None, *, by_id: bool = True,
             where: Locations | None = None,
             progress: Callable[[int, int], None] | None = None) -> SessionInfo:
        """The conversation ``sessions show QUERY`` means: named ``query``, else with an
        AgentUse id starting with it (:func:`~sessiontape.storage.catalog.sessions.find_session`'s
        rules and errors). With ``where``, what the answer depends on is brought in line
        first, not the whole catalog: the roots (conversations added or gone) and the
        conversations ``query`` names, their heads and every file of their trees."""
        from .sessions import SessionInfo, match_session, recheck_status

        name = _sql(query)
        pattern = _like_escaped(name) + "%"
        named: _Scope = ("(name = ? OR (? AND agentuse_name LIKE ? ESCAPE '\\')) AND "
                         "(? IS NULL OR user = ?)",
                         (name, by_id and bool(query), pattern, _sql(user), _sql(user)))
        if where is not None:
            self._refreshed(where, progress, False, named)
        with self._reading() as conn:
            infos = [info for (info,) in conn.execute(
                f"SELECT info FROM conversations WHERE {named[0]}", named[1])]
        return match_session(query, [recheck_status(SessionInfo.from_json(loads(info)))
                                     for info in infos], user, by_id=by_id)
