"""The catalog: one SQLite index (a cache) of every conversation in the three layouts.

:class:`Catalog` keeps, in ``user_cache_dir("sessiontape")/catalog.sqlite``, one row per
conversation (a ``(user, session)`` pair of the item store or of a replay log, or a session
of an AgentUse tree that no pair links), its turns, subagent sessions, tool calls, model
calls (tokens and cost) and its texts behind an FTS5 full-text index, shaped on the Agents
Ledger model (docs/formats.md, "Catalog"). Each conversation is read as the ledger export
reads it (:func:`sessiontape.storage.ledger.read_conversation`): from its AgentUse tree when
it has one, else from its replay log.

:meth:`Catalog.refresh` reconciles the catalog with the files: it stats every source (the
store file, the log directories, the AgentUse roots, each conversation's log and the
directories, ``session.json`` and ``message.json`` files of its tree) and re-reads only the
conversations whose sources changed, dropping those whose sources vanished. Writers add or
replace tree files by renaming into a directory, which changes that directory's mtime, so
stating the directories sees every new or replaced part without listing them.

Deleting the catalog loses nothing: the next refresh rebuilds it. A corrupt catalog, or one
of an older schema, is rebuilt; one that cannot be used (a newer schema, locked beyond the
busy timeout, a read-only disk) raises :class:`CatalogUnavailable`, and the caller reads the
layouts directly. This module only reads the layouts.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import platformdirs

from .agentuse_reader import (
    OUR_VERSION_PREFIX,
    SESSION_FILE,
    CorruptFileError,
    read_json_object,
    split_session_dir_name,
)
from .files import make_private_dir, prepare_private_file
from .json_style import dumps_compact, loads
from .ledger import (
    Exchange,
    LedgerConversation,
    LedgerSourceError,
    Message,
    Session,
    read_conversation,
    response_of,
)
from .links import read_links
from .replay_log import find_log_path, log_owner, owner_record_path
from .tables import ARCHIVE_TABLE, COMPACTIONS_TABLE

__all__ = [
    "KINDS",
    "SCHEMA_VERSION",
    "SNIPPET_END",
    "SNIPPET_START",
    "Catalog",
    "CatalogUnavailable",
    "ConversationRow",
    "RefreshSummary",
    "SearchHit",
    "SearchSyntaxError",
    "UsageRow",
    "default_catalog_path",
]

SCHEMA_VERSION = 1
SNIPPET_START, SNIPPET_END = "\x02", "\x03"  # around each match in a snippet
KINDS = ("user", "answer", "reasoning", "tool_args", "tool_output")
GROUPS = ("daily", "monthly", "session", "model", "agent")
# A source changed less than this before the scan started may change again with the same
# mtime (coarse file system clocks): it is recorded as unknown, so the next scan re-reads it.
RACY_NS = 50_000_000
_UNKNOWN = -2
_MISSING = -1

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE conversations (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,      -- user NUL session name; NUL directory for a tree alone
  user TEXT,                     -- NULL: a session AgentUse wrote (no user)
  name TEXT NOT NULL,
  agent TEXT, status TEXT, model TEXT,
  first_ms INTEGER, last_ms INTEGER,              -- of its turns
  store_first_ms INTEGER, store_last_ms INTEGER,  -- of its stored items
  turns INTEGER NOT NULL, items INTEGER NOT NULL,
  agentuse_dir TEXT, log_path TEXT,
  origin TEXT NOT NULL,          -- sessiontape, agentuse, skilled_crew
  read_from TEXT NOT NULL,       -- agentuse, log, store
  problems TEXT NOT NULL);       -- JSON list of what was read around
CREATE TABLE subagent_sessions (
  conversation INTEGER NOT NULL, session_id TEXT, parent_session_id TEXT, call_id TEXT,
  agent TEXT, turn INTEGER);
CREATE TABLE turns (
  conversation INTEGER NOT NULL, number INTEGER NOT NULL, user_text TEXT, final_text TEXT,
  started_ms INTEGER, ended_ms INTEGER, PRIMARY KEY (conversation, number));
CREATE TABLE texts (
  id INTEGER PRIMARY KEY, conversation INTEGER NOT NULL, turn INTEGER, kind TEXT NOT NULL,
  agent TEXT, tool TEXT, at_ms INTEGER, content TEXT NOT NULL);
CREATE VIRTUAL TABLE texts_fts USING fts5(content, content='texts', content_rowid='id');
CREATE TABLE tool_calls (
  conversation INTEGER NOT NULL, turn INTEGER, session_id TEXT, call_id TEXT, tool TEXT,
  status TEXT, started_ms INTEGER, completed_ms INTEGER);
CREATE TABLE model_calls (
  conversation INTEGER NOT NULL, turn INTEGER, agent TEXT, model TEXT,
  input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
  cached_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL,
  cost REAL NOT NULL, at_ms INTEGER);
CREATE TABLE sources (
  conversation INTEGER NOT NULL,  -- 0: the layouts' roots, the store
  path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
  PRIMARY KEY (conversation, path));
CREATE INDEX texts_conversation ON texts (conversation);
CREATE INDEX turns_conversation ON turns (conversation);
CREATE INDEX subagents_conversation ON subagent_sessions (conversation);
CREATE INDEX tool_calls_conversation ON tool_calls (conversation);
CREATE INDEX model_calls_conversation ON model_calls (conversation);
CREATE INDEX model_calls_at ON model_calls (at_ms);
"""
_UPDATE = ", ".join(f"{c} = excluded.{c}" for c in (
    "user", "name", "agent", "status", "model", "first_ms", "last_ms", "store_first_ms",
    "store_last_ms", "turns", "items", "agentuse_dir", "log_path", "origin", "read_from",
    "problems"))
_PER_CONVERSATION = ("subagent_sessions", "turns", "texts", "tool_calls", "model_calls",
                     "sources")

ORIGIN_SESSIONTAPE, ORIGIN_AGENTUSE, ORIGIN_SKILLED_CREW = "sessiontape", "agentuse", \
    "skilled_crew"


class CatalogUnavailable(RuntimeError):
    """The catalog cannot be used now (locked, read-only, of a newer sessiontape): read
    the layouts directly instead."""


class SearchSyntaxError(ValueError):
    """A search query that is not valid FTS5 syntax."""


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


@dataclass(frozen=True)
class UsageRow:
    """Model calls' tokens and cost summed over one group (a day, a month, a session, a
    model, an agent); ``user`` is the session's for the ``session`` group."""

    key: str
    user: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost: float


@dataclass(frozen=True)
class ConversationRow:
    """One conversation as the catalog holds it."""

    user: str | None
    session: str
    agent: str | None
    status: str | None
    model: str | None
    first_ms: int | None
    last_ms: int | None
    turns: int
    items: int
    agentuse_dir: str | None
    log_path: str | None
    origin: str
    read_from: str
    problems: list[str]


@dataclass
class RefreshSummary:
    """What a refresh did: conversations in the catalog, re-read, dropped, and the
    problems met while reading."""

    conversations: int = 0
    reindexed: int = 0
    dropped: int = 0
    rebuilt: bool = False  # the catalog was made afresh (new, corrupt, older schema)
    problems: list[str] = field(default_factory=list)


def default_catalog_path() -> Path:
    """``user_cache_dir("sessiontape")/catalog.sqlite`` (``$XDG_CACHE_HOME`` on Linux)."""
    return Path(platformdirs.user_cache_dir("sessiontape")) / "catalog.sqlite"


def _ms(value: int | datetime | None) -> int | None:
    """A time as Unix ms (a datetime, or ms already)."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return value


# -- sources ------------------------------------------------------------------------------


_Stat = tuple[int, int]  # size, mtime_ns


def _stat(path: str) -> _Stat:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return _MISSING, _MISSING
    return st.st_size, st.st_mtime_ns


def _tree_paths(directory: str) -> Iterator[str]:
    """Every directory of a session tree (not links, not ``.``-names) and its
    ``session.json`` and ``message.json`` files: what changes when anything in it does."""
    stack = [directory]
    yield directory
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
                yield entry.path
            elif entry.name in (SESSION_FILE, "message.json"):
                yield entry.path


def _recorded(paths: Sequence[str], started_ns: int) -> list[tuple[str, int, int]]:
    """``(path, size, mtime_ns)`` of each path, a racy one (changed just before the scan)
    with an unknown size, so that it is looked at again."""
    rows = []
    for path in paths:
        size, mtime = _stat(path)
        rows.append((path, _UNKNOWN if mtime >= started_ns - RACY_NS else size, mtime))
    return rows


def _changed(rows: Sequence[tuple[str, int, int]]) -> bool:
    return any(_stat(path) != (size, mtime) for path, size, mtime in rows)


# -- finding the conversations --------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    """A conversation found in the layouts, before any of its files is read."""

    key: str
    user: str | None
    name: str
    agentuse_dir: str | None
    log_path: str | None
    origin: str
    items: int = 0
    store_first_ms: int | None = None
    store_last_ms: int | None = None


@dataclass(frozen=True)
class _Locations:
    store_file: Path
    logs_root: Path
    agentuse_roots: tuple[Path, ...]

    def global_paths(self) -> list[str]:
        """What says that a conversation came or went: the store (and its WAL), the log
        directories, the AgentUse roots."""
        paths = [str(self.store_file), f"{self.store_file}-wal", str(self.logs_root)]
        with suppress(OSError):
            paths += sorted(e.path for e in os.scandir(self.logs_root)
                            if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
        return paths + [str(root) for root in self.agentuse_roots]

    def describe(self) -> str:
        return dumps_compact([str(self.store_file), str(self.logs_root),
                              [str(r) for r in self.agentuse_roots]]).decode()


def _store_pairs(store_file: Path) -> tuple[dict[tuple[str, str], tuple[int, int, int]],
                                            set[tuple[str, str]]]:
    """Items, first and last ``created_at`` of each pair, and the pairs with compaction
    records (sessiontape's)."""
    if not store_file.is_file():
        return {}, set()
    uri = f"{store_file.resolve().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=30.0)) as conn:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        pairs = {} if "session_items" not in tables else {
            (user, name): (count, first, last) for user, name, count, first, last in
            conn.execute("SELECT user_id, session_name, COUNT(*), MIN(created_at), "
                         "MAX(created_at) FROM session_items GROUP BY user_id, session_name")}
        compacted = {(user, name) for table in (ARCHIVE_TABLE, COMPACTIONS_TABLE)
                     if table in tables for user, name in conn.execute(
                         f"SELECT DISTINCT user_id, session_name FROM {table}")}
    return pairs, compacted


def _logs(logs_root: Path) -> Iterator[tuple[str, str, Path]]:
    """Every log with the pair it belongs to: its owner record's, else its file's names."""
    try:
        users = sorted((e for e in os.scandir(logs_root)
                        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)),
                       key=lambda e: e.name)
    except OSError:
        return
    for user_dir in users:
        for path in sorted(Path(user_dir.path).glob("[!.]*.jsonl")):
            owner = log_owner(path) or {}
            user, name = owner.get("user_id"), owner.get("session_name")
            if isinstance(user, str) and isinstance(name, str):
                yield user, name, path
            else:
                yield user_dir.name, path.stem, path


def _tree_sessions(root: Path) -> Iterator[tuple[str, Path]]:
    """``(ULID, directory)`` of each top-level session of ``root`` with a ``session.json``."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        split = split_session_dir_name(entry.name)
        if split and entry.is_dir(follow_symlinks=False) \
                and os.path.lexists(os.path.join(entry.path, SESSION_FILE)):
            yield split[0], Path(entry.path)


def _tree_origin(directory: Path) -> str:
    try:
        version = read_json_object(directory / SESSION_FILE).get("version", "")
    except CorruptFileError:
        return ORIGIN_AGENTUSE
    return ORIGIN_SESSIONTAPE if str(version).startswith(OUR_VERSION_PREFIX) \
        else ORIGIN_AGENTUSE


def _discover(where: _Locations) -> list[_Found]:
    """Every conversation of the store, the logs and the AgentUse roots (the rules of
    ``sessions list``: docs/cli.md)."""
    pairs, compacted = _store_pairs(where.store_file)
    links = {(user, name): directory for user, name, directory in read_links(where.store_file)}
    logs = {pair: find_log_path(*pair, where.logs_root) for pair in {*pairs, *links}}
    known = {path for path in logs.values() if path is not None}
    for user, name, path in _logs(where.logs_root):
        if path not in known and (user, name) not in logs:
            logs[(user, name)] = path
    trees = {ulid: d for root in where.agentuse_roots for ulid, d in _tree_sessions(root)}
    found = []
    for (user, name), log in logs.items():
        directory = links.get((user, name))
        if directory is not None:
            ulid = (split_session_dir_name(directory.name) or ("",))[0]
            directory = directory if directory.is_dir() else trees.get(ulid, directory)
            trees.pop(ulid, None)
        mine = directory is not None or (user, name) in compacted or \
            (log is not None and os.path.lexists(owner_record_path(log)))
        items, first, last = pairs.get((user, name), (0, None, None))
        found.append(_Found(f"{user}\0{name}", user, name, _str(directory), _str(log),
                            ORIGIN_SESSIONTAPE if mine else ORIGIN_SKILLED_CREW,
                            items, first, last))
    found += [_Found(f"\0{directory}", None, directory.name, str(directory), None,
                     _tree_origin(directory)) for directory in trees.values()]
    return found


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)


# -- reading one conversation into rows -----------------------------------------------------


@dataclass
class _Rows:
    """The rows of one conversation, made from what the ledger's readers read."""

    turns: list[tuple[Any, ...]] = field(default_factory=list)
    texts: list[tuple[Any, ...]] = field(default_factory=list)
    tool_calls: list[tuple[Any, ...]] = field(default_factory=list)
    model_calls: list[tuple[Any, ...]] = field(default_factory=list)
    subagents: list[tuple[Any, ...]] = field(default_factory=list)


def _texts(message: Message, agent: str | None, turn: int,
           top: bool) -> Iterator[tuple[Any, ...]]:
    """``(turn, kind, agent, tool, at, content)`` of what a message says; a subagent's
    prompt is left out (it is its call's arguments)."""
    agent = message.metadata.get("agent") or agent
    call = message.call
    if call is not None:
        for kind, content in (("tool_args", call.params), ("tool_output", call.result)):
            if content:
                yield turn, kind, agent, call.name, message.timestamp, content
        return
    kinds: dict[str, str | None] = {"prompt": "user" if top else None, "text": "answer",
                                    "reasoning": "reasoning"}
    label = kinds.get(str(message.kind))
    if label is not None and message.content:
        yield turn, label, agent, None, message.timestamp, message.content


def _exchange_times(exchange: Exchange) -> tuple[int | None, int | None]:
    times = [m.timestamp for m in exchange.messages if m.timestamp is not None]
    return min(times, default=None), exchange.completed or max(times, default=None)


def _model_calls(exchange: Exchange, agent: str | None, turn: int) -> Iterator[tuple[Any, ...]]:
    """The exchange's model calls; without any listed (AgentUse's own trees), one for the
    exchange's totals when it has them."""
    calls = [(c.agent, c.model, c.tokens, c.cost, c.at) for c in exchange.model_calls]
    if not calls and exchange.usage is not None:
        calls = [(agent, exchange.model, exchange.usage, exchange.usage["cost"],
                  _exchange_times(exchange)[1])]
    for who, model, tokens, cost, at in calls:
        yield (turn, who or agent, model, *(int(tokens.get(key) or 0) for key in (
            "inputTokens", "outputTokens", "cachedTokens", "reasoningTokens")),
               float(cost), at or _exchange_times(exchange)[1])


def _spawn_turn(parent: Session, child: Session, turns: dict[int, int], fallback: int) -> int:
    """The turn of the call that ran ``child``; without one, the parent's last exchange that
    started before it."""
    if child.spawn is not None and id(child.spawn) in turns:
        return turns[id(child.spawn)]
    started = [(number, _exchange_times(e)[0]) for number, e in enumerate(parent.exchanges, 1)]
    before = [n for n, at in started if at is not None and at <= (child.created_at or 0)]
    return before[-1] if before else fallback


def _session_rows(session: Session, rows: _Rows, turn: int | None) -> None:
    """Rows of ``session`` (numbering its exchanges as turns when ``turn`` is None, a
    subagent's all in the turn that ran it) and of its subagents."""
    turns: dict[int, int] = {}
    for number, exchange in enumerate(session.exchanges, 1):
        here = turn or number
        for message in exchange.messages:
            turns[id(message)] = here
            rows.texts += _texts(message, session.agent, here, turn is None)
            call = message.call
            if call is not None:
                rows.tool_calls.append((here, session.preferred, call.call_id, call.name,
                                        call.status, call.started, call.completed))
        rows.model_calls += _model_calls(exchange, session.agent, here)
        if turn is None:
            prompts = [m.content for m in exchange.messages if m.role == "user"]
            answer = response_of(exchange)
            rows.turns.append((number, prompts[0] if prompts else None,
                               answer.content if answer else None, *_exchange_times(exchange)))
    for child in session.subagents:
        child_turn = _spawn_turn(session, child, turns, turn or 1)
        call = child.spawn.call if child.spawn is not None else None
        rows.subagents.append((child.preferred, session.preferred,
                               call.call_id if call else None, child.agent, child_turn))
        _session_rows(child, rows, child_turn)


# -- the catalog ----------------------------------------------------------------------------


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
    process's write before raising :class:`CatalogUnavailable`. Use it as a context
    manager, or :meth:`close` it.
    """

    def __init__(self, path: Path | None = None, *, busy_timeout: float = 5.0) -> None:
        self.path = Path(path) if path is not None else default_catalog_path()
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._rebuilt = False

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
        make_private_dir(self.path.parent)
        prepare_private_file(self.path)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
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
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA}; COMMIT;")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                         (str(SCHEMA_VERSION),))
            self._rebuilt = True
            return True
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            if "meta" in tables else None
        version = int(row[0]) if row and str(row[0]).isdigit() else 0
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
        """The connection; sqlite errors as CatalogUnavailable."""
        conn = self._connection()
        try:
            yield conn
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None

    # -- refresh ----------------------------------------------------------------------

    def refresh(self, store_file: Path, logs_root: Path, agentuse_roots: Sequence[Path],
                progress: Callable[[int, int], None] | None = None) -> RefreshSummary:
        """Bring the catalog in line with the layouts; re-read only the conversations
        whose sources changed (a corrupt catalog is rebuilt from scratch). ``progress``
        is called with (conversations re-read, conversations to re-read) after each."""
        where = _Locations(Path(store_file), Path(logs_root),
                           tuple(Path(r) for r in agentuse_roots))
        try:
            return self._refresh(where, progress)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise self._unavailable(exc) from None
            self.close()
            self._remove()
            return self._refresh(where, progress)

    def _refresh(self, where: _Locations,
                 progress: Callable[[int, int], None] | None) -> RefreshSummary:
        conn = self._connection()
        summary = RefreshSummary(rebuilt=self._rebuilt)
        started = time.time_ns()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._unavailable(exc) from None
        try:
            self._reconcile(conn, where, started, summary, progress)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._rebuilt = False
        summary.conversations = conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
        return summary

    def _sources(self, conn: sqlite3.Connection) -> dict[int, list[tuple[str, int, int]]]:
        by_conversation: dict[int, list[tuple[str, int, int]]] = {}
        for conversation, path, size, mtime in conn.execute(
                "SELECT conversation, path, size, mtime_ns FROM sources"):
            by_conversation.setdefault(conversation, []).append((path, size, mtime))
        return by_conversation

    def _reconcile(self, conn: sqlite3.Connection, where: _Locations, started: int,
                   summary: RefreshSummary,
                   progress: Callable[[int, int], None] | None) -> None:
        sources = self._sources(conn)
        roots = sources.pop(0, [])
        same_place = conn.execute("SELECT value FROM meta WHERE key = 'locations'"
                                  ).fetchone() == (where.describe(),)
        stored = {row[1]: row for row in conn.execute(
            "SELECT id, key, user, name, agentuse_dir, log_path, origin, items, "
            "store_first_ms, store_last_ms FROM conversations")}
        if same_place and roots and not _changed(roots) \
                and [r[0] for r in roots] == where.global_paths():
            found = [_Found(*row[1:]) for row in stored.values()]
        else:
            found = self._found_again(conn, where, stored, started, summary)
        changed = [item for item in found
                   if item.key not in stored or _changed(sources.get(stored[item.key][0], []))]
        for done, item in enumerate(changed, start=1):
            self._index(conn, item, started, summary)
            if progress is not None:
                progress(done, len(changed))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('locations', ?)", (where.describe(),))

    def _found_again(self, conn: sqlite3.Connection, where: _Locations,
                     stored: dict[str, tuple[Any, ...]], started: int,
                     summary: RefreshSummary) -> list[_Found]:
        """The conversations as the layouts list them now: the gone ones dropped, the
        moved ones (another tree, log or origin) re-read, the store's counts updated."""
        roots = _recorded(where.global_paths(), started)  # before listing: a later change shows
        found = _discover(where)
        keys = {item.key for item in found}
        for key, gone in stored.items():
            if key not in keys:
                self._drop(conn, gone[0])
                summary.dropped += 1
        again = []
        for item in found:
            row = stored.get(item.key)
            if row is not None and tuple(row[4:7]) != (item.agentuse_dir, item.log_path,
                                                       item.origin):
                self._drop(conn, row[0])
                del stored[item.key]
            elif row is not None:
                conn.execute("UPDATE conversations SET items = ?, store_first_ms = ?, "
                             "store_last_ms = ? WHERE id = ?",
                             (item.items, item.store_first_ms, item.store_last_ms, row[0]))
            again.append(item)
        conn.execute("DELETE FROM sources WHERE conversation = 0")
        conn.executemany("INSERT INTO sources VALUES (0, ?, ?, ?)", roots)
        return again

    def _drop(self, conn: sqlite3.Connection, conversation: int) -> None:
        self._clear(conn, conversation)
        conn.execute("DELETE FROM conversations WHERE id = ?", (conversation,))

    def _index(self, conn: sqlite3.Connection, item: _Found, started: int,
               summary: RefreshSummary) -> None:
        """(Re-)read one conversation: its sources stated first, so that a change made
        while it is read shows at the next refresh."""
        paths = list(_tree_paths(item.agentuse_dir)) if item.agentuse_dir else []
        paths += [item.log_path] if item.log_path else []
        recorded = _recorded(paths, started)
        problems: list[str] = []
        source = LedgerConversation(item.user, item.name,
                                    Path(item.agentuse_dir) if item.agentuse_dir else None,
                                    Path(item.log_path) if item.log_path else None, item.origin)
        rows = _Rows()
        session: Session | None = None
        try:
            session, read_from = read_conversation(source, problems)
            _session_rows(session, rows, None)
        except LedgerSourceError as exc:
            read_from = "store"
            if item.agentuse_dir or item.log_path:
                problems.append(str(exc))
        summary.problems += problems
        summary.reindexed += 1
        starts = [r[3] for r in rows.turns if r[3] is not None]
        ends = [r[4] for r in rows.turns if r[4] is not None]
        conversation = conn.execute(
            "INSERT INTO conversations (key, user, name, agent, status, model, first_ms, "
            "last_ms, store_first_ms, store_last_ms, turns, items, agentuse_dir, log_path, "
            "origin, read_from, problems) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
            f"ON CONFLICT (key) DO UPDATE SET {_UPDATE} RETURNING id",
            (item.key, item.user, item.name, session.agent if session else None,
             session.status if session else None, session.model if session else None,
             min(starts, default=None), max(ends, default=None), item.store_first_ms,
             item.store_last_ms, len(rows.turns), item.items, item.agentuse_dir,
             item.log_path, item.origin, read_from, dumps_compact(problems).decode()),
        ).fetchone()[0]
        self._clear(conn, conversation)
        self._insert(conn, conversation, rows, recorded)

    def _clear(self, conn: sqlite3.Connection, conversation: int) -> None:
        conn.execute("INSERT INTO texts_fts (texts_fts, rowid, content) "
                     "SELECT 'delete', id, content FROM texts WHERE conversation = ?",
                     (conversation,))
        for table in _PER_CONVERSATION:
            conn.execute(f"DELETE FROM {table} WHERE conversation = ?", (conversation,))

    def _insert(self, conn: sqlite3.Connection, conversation: int, rows: _Rows,
                recorded: list[tuple[str, int, int]]) -> None:
        def many(table: str, values: list[tuple[Any, ...]]) -> None:
            if values:
                marks = ",".join("?" * (len(values[0]) + 1))
                conn.executemany(f"INSERT INTO {table} VALUES ({marks})",
                                 [(conversation, *v) for v in values])

        many("turns", rows.turns)
        many("subagent_sessions", rows.subagents)
        many("tool_calls", rows.tool_calls)
        many("model_calls", rows.model_calls)
        many("sources", recorded)
        for text in rows.texts:
            rowid = conn.execute("INSERT INTO texts (conversation, turn, kind, agent, tool, "
                                 "at_ms, content) VALUES (?,?,?,?,?,?,?)",
                                 (conversation, *text)).lastrowid
            conn.execute("INSERT INTO texts_fts (rowid, content) VALUES (?, ?)",
                         (rowid, text[-1]))

    # -- queries ----------------------------------------------------------------------

    def search(self, query: str, *, user: str | None = None, agent: str | None = None,
               tool: str | None = None, kind: str | None = None,
               since: int | datetime | None = None, limit: int = 50) -> list[SearchHit]:
        """The texts matching ``query`` (FTS5 syntax: words, ``"phrases"``, ``prefix*``,
        ``AND``/``OR``/``NOT``), best first, filtered by the conversation's user, the
        agent, the tool, the kind and the time (``since``: Unix ms or a datetime).
        Raises :class:`SearchSyntaxError` for a malformed query."""
        where, params = ["texts_fts MATCH ?"], [query]  # type: list[str], list[Any]
        for column, value in (("c.user", user), ("t.agent", agent), ("t.tool", tool),
                              ("t.kind", kind)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
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
                    raise SearchSyntaxError(f"invalid search query {query!r}: {exc}") from None
                raise
        return [SearchHit(*row) for row in rows]

    def usage(self, group: str, *, since: int | datetime | None = None,
              until: int | datetime | None = None) -> list[UsageRow]:
        """Tokens and cost of the model calls, summed per ``group`` (:data:`GROUPS`:
        ``daily`` and ``monthly`` in UTC, ``session``, ``model``, ``agent``), from
        ``since`` (included) to ``until`` (excluded)."""
        keys = {"daily": "strftime('%Y-%m-%d', m.at_ms / 1000, 'unixepoch')",
                "monthly": "strftime('%Y-%m', m.at_ms / 1000, 'unixepoch')",
                "session": "c.name", "model": "m.model", "agent": "m.agent"}
        if group not in keys:
            raise ValueError(f"unknown usage group {group!r}; one of {', '.join(GROUPS)}")
        user = "c.user" if group == "session" else "NULL"
        where, params = ["1"], []  # type: list[str], list[Any]
        for op, value in ((">=", since), ("<", until)):
            if value is not None:
                where.append(f"m.at_ms {op} ?")
                params.append(_ms(value))
        sql = (f"SELECT COALESCE({keys[group]}, ''), {user}, COUNT(*), SUM(m.input_tokens), "
               "SUM(m.output_tokens), SUM(m.cached_tokens), SUM(m.reasoning_tokens), "
               "SUM(m.cost) FROM model_calls m JOIN conversations c ON c.id = m.conversation "
               f"WHERE {' AND '.join(where)} GROUP BY 1, 2 ORDER BY 1, 2")
        with self._reading() as conn:
            return [UsageRow(*row) for row in conn.execute(sql, params)]

    def conversations(self, user: str | None = None) -> list[ConversationRow]:
        """Every conversation (of ``user``), newest activity first."""
        where, params = ("WHERE user = ?", [user]) if user is not None else ("", [])
        sql = ("SELECT user, name, agent, status, model, "
               "MIN(COALESCE(first_ms, store_first_ms), COALESCE(store_first_ms, first_ms)), "
               "MAX(COALESCE(last_ms, store_last_ms), COALESCE(store_last_ms, last_ms)) last, "
               "turns, items, agentuse_dir, log_path, origin, read_from, problems "
               f"FROM conversations {where} ORDER BY last IS NULL, last DESC, user, name")
        with self._reading() as conn:
            rows = [list(row) for row in conn.execute(sql, params)]
        return [ConversationRow(*[*row[:-1], loads(row[-1])]) for row in rows]
