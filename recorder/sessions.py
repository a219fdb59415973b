"""Recorded conversations as a whole: list, show, clear and locate them.

A conversation is a ``(user_id, session_name)`` pair. Its pieces live in three
places, and this module joins them:

* the skillet item store (``session_items``: the canonical list; also the
  compaction archive, the compaction log and the ``sessiontape_links`` table
  that names its AgentUse directory);
* its JSONL replay log (turn count, transcript);
* its AgentUse session tree (tokens and cost of each exchange).

Every reader here only reads: no store table, log owner record or directory
is ever created (the log path is *found* the way :func:`sessiontape.storage.replay_log.
log_path_for` would choose it, without claiming it). Only
:func:`clear_session` changes anything.

Listing rules (also in ``sessiontape sessions list --help``):

* every pair with rows in ``session_items``, or a link, is listed;
* a log that belongs to no such pair (its store rows were cleared by another
  tool, or skilled_crew wrote it) is listed too, with ``items`` 0 and
  ``sources`` ``["log"]``; without an owner record its names are the
  sanitized ones of its file path;
* tokens and cost are summed over the ``message.json`` files of the session
  **including its subagents** (each subagent's file holds only its own calls,
  so nothing is counted twice); ``usage_main`` has the main agent's alone.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sessiontape.storage.agentuse_reader import (
    CorruptFileError,
    LoadedMessage,
    LoadedSession,
    load_session,
    split_session_dir_name,
)
from sessiontape.storage.links import read_links
from sessiontape.storage.log_reader import SessionLogReader, Turn
from sessiontape.storage.paths import SkilletPaths, agentuse_sessions_root
from sessiontape.storage.replay_log import find_log_path, log_owner, owner_record_path
from sessiontape.storage.tables import (
    ARCHIVE_TABLE,
    COMPACTIONS_TABLE,
    LINKS_TABLE,
    StoredSession,
    list_sessions_sql,
)

__all__ = [
    "AmbiguousSessionError",
    "ClearResult",
    "Locations",
    "SessionInfo",
    "SessionLookupError",
    "SessionView",
    "TurnView",
    "UnknownSessionError",
    "Usage",
    "clear_session",
    "find_session",
    "list_sessions",
    "session_locations",
    "show_session",
]

_PAIR = "user_id = ? AND session_name = ?"
_PairCounts = dict[tuple[str, str], int]  # rows of a store table per (user_id, session_name)


# -- where things are -------------------------------------------------------------------


@dataclass(frozen=True)
class Locations:
    """The store file and logs root to read (default: as the environment resolves them)."""

    store_file: Path
    logs_root: Path

    @classmethod
    def resolve(cls, store_file: Path | None = None, logs_root: Path | None = None) -> Locations:
        skillet = SkilletPaths.resolve()
        return cls(store_file or skillet.store_file, logs_root or skillet.logs_root)


# -- usage ------------------------------------------------------------------------------


def _json_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


@dataclass
class Usage:
    """Tokens and cost, as AgentUse's ``message.json`` ``assistant`` block holds them."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input + self.output

    def add(self, other: Usage) -> Usage:
        self.input += other.input
        self.output += other.output
        self.reasoning += other.reasoning
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.cost += other.cost
        return self

    @classmethod
    def of_message(cls, message: LoadedMessage) -> Usage:
        assistant = message.info.get("assistant")
        if not isinstance(assistant, dict):
            return cls()
        tokens = _json_object(assistant.get("tokens"))
        cache = _json_object(tokens.get("cache"))

        def num(value: Any) -> int:
            return int(value) if isinstance(value, (int, float)) else 0

        cost = assistant.get("cost")
        return cls(num(tokens.get("input")), num(tokens.get("output")),
                   num(tokens.get("reasoning")), num(cache.get("read")), num(cache.get("write")),
                   float(cost) if isinstance(cost, (int, float)) else 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output, "reasoning": self.reasoning,
                "cache_read": self.cache_read, "cache_write": self.cache_write,
                "tokens": self.tokens, "cost": self.cost}


def _session_usage(session: LoadedSession, *, subagents: bool) -> Usage:
    total = Usage()
    for message in session.messages:
        total.add(Usage.of_message(message))
    if subagents:
        for sub in session.subagents:
            total.add(_session_usage(sub, subagents=True))
    return total


def _subagents_by_id(session: LoadedSession) -> dict[str, LoadedSession]:
    found: dict[str, LoadedSession] = {}
    for sub in session.subagents:
        found[sub.id] = sub
        found.update(_subagents_by_id(sub))
    return found


# -- one conversation -------------------------------------------------------------------


@dataclass
class SessionInfo:
    """One conversation with what each store knows of it."""

    user_id: str
    session_name: str
    items: int = 0
    archived: int = 0
    compactions: int = 0
    first_ms: int | None = None
    last_ms: int | None = None
    turns: int = 0
    log_path: Path | None = None
    agentuse_dir: Path | None = None
    usage: Usage | None = None         # the whole session, subagents included
    usage_main: Usage | None = None    # the main agent's exchanges alone
    sources: list[str] = field(default_factory=list)  # "store", "link", "log", "agentuse"
    problems: list[str] = field(default_factory=list)

    @property
    def agentuse_id(self) -> str | None:
        """The AgentUse session id (the ULID of the linked directory's name)."""
        if self.agentuse_dir is None:
            return None
        split = split_session_dir_name(self.agentuse_dir.name)
        return split[0] if split else None

    @property
    def last_activity(self) -> str | None:
        return _iso(self.last_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "session_name": self.session_name,
            "user_id": self.user_id,
            "turns": self.turns,
            "items": self.items,
            "archived_items": self.archived,
            "compactions": self.compactions,
            "tokens": self.usage.tokens if self.usage else None,
            "cost": self.usage.cost if self.usage else None,
            "usage": self.usage.to_json() if self.usage else None,
            "usage_main": self.usage_main.to_json() if self.usage_main else None,
            "first_ms": self.first_ms,
            "last_ms": self.last_ms,
            "last_activity": self.last_activity,
            "log_path": str(self.log_path) if self.log_path else None,
            "agentuse_dir": str(self.agentuse_dir) if self.agentuse_dir else None,
            "agentuse_id": self.agentuse_id,
            "sources": self.sources,
            "problems": self.problems,
        }


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def _parse_ms(timestamp: str) -> int | None:
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


class SessionLookupError(LookupError):
    """A name or prefix that names no single conversation."""


class UnknownSessionError(SessionLookupError):
    """No conversation has that name (or AgentUse id prefix)."""


class AmbiguousSessionError(SessionLookupError):
    """Several conversations match; ``candidates`` lists them."""

    def __init__(self, message: str, candidates: Sequence[SessionInfo]) -> None:
        super().__init__(message)
        self.candidates = list(candidates)


# -- reading the store ------------------------------------------------------------------


def _ro_connect(store_file: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{store_file.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _count_by_pair(conn: sqlite3.Connection, table: str) -> _PairCounts:
    rows = conn.execute(f"SELECT user_id, session_name, COUNT(*) FROM {table} "
                        "GROUP BY user_id, session_name").fetchall()
    return {(user, name): count for user, name, count in rows}


def _read_store(store_file: Path,
                user_id: str | None) -> tuple[list[Any], _PairCounts, _PairCounts]:
    """``list_sessions`` rows, archived counts and compaction counts per pair."""
    if not store_file.exists():
        return [], {}, {}
    with closing(_ro_connect(store_file)) as conn:
        tables = _tables(conn)
        archived = _count_by_pair(conn, ARCHIVE_TABLE) if ARCHIVE_TABLE in tables else {}
        compactions = (_count_by_pair(conn, COMPACTIONS_TABLE)
                       if COMPACTIONS_TABLE in tables else {})
        stored = []
        if "session_items" in tables:  # plain sqlite3: listing needs no Agents SDK
            params = (user_id,) if user_id is not None else ()
            stored = [StoredSession(*row) for row in
                      conn.execute(list_sessions_sql(user_id is not None), params)]
    return stored, archived, compactions


def _log_only(logs_root: Path, known: set[Path]) -> Iterable[tuple[str, str, Path]]:
    """Logs that belong to no known pair: ``(user, session, path)``."""
    if not logs_root.is_dir():
        return
    for user_dir in sorted(logs_root.iterdir()):
        if user_dir.name.startswith(".") or not user_dir.is_dir() or user_dir.is_symlink():
            continue
        for path in sorted(user_dir.glob("[!.]*.jsonl")):
            if path in known or not path.is_file():
                continue
            owner = log_owner(path)
            if owner and isinstance(owner.get("user_id"), str) \
                    and isinstance(owner.get("session_name"), str):
                yield owner["user_id"], owner["session_name"], path
            else:
                yield user_dir.name, path.stem, path


def _fill_from_log(info: SessionInfo) -> None:
    """The turn count, times and problems of ``info``'s log."""
    if info.log_path is None:
        return
    reader = SessionLogReader(info.log_path)
    try:
        turns = reader.turns()
    except OSError as exc:
        info.problems.append(f"{info.log_path}: cannot read: {exc.strerror or exc}")
        return
    info.problems.extend(str(p) for p in reader.problems)
    info.turns = len(turns)
    stamps = [ms for t in turns for ms in (_parse_ms(t.ended or t.started),) if ms is not None]
    if stamps:
        info.first_ms = min([info.first_ms or stamps[0], *stamps])
        info.last_ms = max([info.last_ms or 0, *stamps])


def _fill_from_agentuse(info: SessionInfo, *, parts: bool = True) -> LoadedSession | None:
    if info.agentuse_dir is None or not info.agentuse_dir.is_dir():
        return None
    try:
        session = load_session(info.agentuse_dir, parts=parts)
    except CorruptFileError as exc:
        info.problems.append(str(exc))
        return None
    except OSError as exc:
        info.problems.append(f"{info.agentuse_dir}: cannot read: {exc.strerror or exc}")
        return None
    info.sources.append("agentuse")
    info.usage = _session_usage(session, subagents=True)
    info.usage_main = _session_usage(session, subagents=False)
    return session


def _gather(user_id: str | None, where: Locations) -> list[SessionInfo]:
    """Every conversation with where its data is, before any log or tree is read."""
    stored, archived, compactions = _read_store(where.store_file, user_id)
    found: dict[tuple[str, str], SessionInfo] = {}
    for row in stored:
        found[(row.user_id, row.session_name)] = SessionInfo(
            row.user_id, row.session_name, items=row.items, first_ms=row.first_ms,
            last_ms=row.last_ms, sources=["store"])
    for user, name, directory in read_links(where.store_file):
        if user_id is not None and user != user_id:
            continue
        info = found.setdefault((user, name), SessionInfo(user, name))
        info.agentuse_dir = directory
        info.sources.append("link")
    for (user, name), info in found.items():
        info.archived = archived.get((user, name), 0)
        info.compactions = compactions.get((user, name), 0)
        info.log_path = find_log_path(user, name, where.logs_root)
    known = {info.log_path for info in found.values() if info.log_path is not None}
    for user, name, path in _log_only(where.logs_root, known):
        if user_id is not None and user != user_id:
            continue
        if (user, name) not in found:  # else a stray duplicate of a known pair's log
            found[(user, name)] = SessionInfo(user, name, log_path=path, sources=[])
    for info in found.values():
        if info.log_path is not None:
            info.sources.append("log")
    return list(found.values())


def _filled(info: SessionInfo, *, with_usage: bool = True) -> SessionInfo:
    """``info`` with its turns and times from the log and, if asked, usage from the tree."""
    _fill_from_log(info)
    if with_usage:
        _fill_from_agentuse(info, parts=False)  # totals are in message.json
    return info


def list_sessions(user_id: str | None = None, *, locations: Locations | None = None,
                  with_usage: bool = True) -> list[SessionInfo]:
    """Every conversation (of ``user_id``, default all users), newest first. Reads only."""
    sessions = [_filled(info, with_usage=with_usage)
                for info in _gather(user_id, locations or Locations.resolve())]
    return sorted(sessions, key=lambda i: (-(i.last_ms or 0), i.user_id, i.session_name))


def find_session(query: str, user_id: str | None = None, *, by_id: bool = True,
                 locations: Locations | None = None) -> SessionInfo:
    """The conversation named ``query`` (exactly), else whose AgentUse id starts with it.

    Raises :class:`UnknownSessionError` or :class:`AmbiguousSessionError`
    (the same name for several users, or a prefix of several ids). Only the
    conversations that match are read.
    """
    sessions = _gather(user_id, locations or Locations.resolve())
    named = [s for s in sessions if s.session_name == query]
    if len(named) == 1:
        return _filled(named[0])
    if len(named) > 1:
        raise AmbiguousSessionError(
            f"{len(named)} users have a session named {query!r}; choose one with --user",
            [_filled(s) for s in named])
    if by_id and query:
        prefix = query.upper()
        matched = [s for s in sessions if s.agentuse_dir is not None and s.agentuse_id
                   and (s.agentuse_id.startswith(prefix)
                        or s.agentuse_dir.name.startswith(query))]
        if len(matched) == 1:
            return _filled(matched[0])
        if len(matched) > 1:
            raise AmbiguousSessionError(
                f"{len(matched)} sessions have an AgentUse id starting with {query!r}",
                [_filled(s) for s in matched])
    whose = f" of user {user_id!r}" if user_id is not None else ""
    how = " (nor an AgentUse session id starting with it)" if by_id else ""
    raise UnknownSessionError(f"no session named {query!r}{whose}{how}")


# -- show -------------------------------------------------------------------------------


@dataclass
class TurnView:
    """One turn of the log with the usage of its AgentUse exchange (None if not found)."""

    turn: Turn
    usage: Usage | None = None        # the exchange with its subagents
    usage_main: Usage | None = None   # the main agent's own calls
    message_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "user_input": self.turn.user_input,
            "steps": self.turn.steps,
            "final": self.turn.final,
            "text": self.turn.text,
            "model": self.turn.model,
            "complete": self.turn.complete,
            "started": self.turn.started,
            "ended": self.turn.ended,
            "agentuse_message_id": self.message_id,
            "usage": self.usage.to_json() if self.usage else None,
            "usage_main": self.usage_main.to_json() if self.usage_main else None,
        }


@dataclass
class SessionView:
    """Everything ``sessions show`` prints."""

    info: SessionInfo
    turns: list[TurnView]
    archived: list[tuple[str, Any]] | None = None  # (compaction id, item) with full=True

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "session": self.info.to_json(),
            "turns": [t.to_json() for t in self.turns],
            "usage": self.info.usage.to_json() if self.info.usage else None,
        }
        if self.archived is not None:
            data["archived"] = [{"compaction_id": cid, "item": item}
                                for cid, item in self.archived]
        return data


def _created_ms(message: LoadedMessage) -> float:
    """An exchange's ``time.created`` (0 when missing or of the wrong type)."""
    times = message.info.get("time")
    created = times.get("created") if isinstance(times, dict) else None
    return created if isinstance(created, (int, float)) and not isinstance(created, bool) else 0


def _match_messages(turns: list[Turn], messages: list[LoadedMessage]) -> list[LoadedMessage | None]:
    """The exchange of each turn: by position when the counts agree, else the nearest
    unused exchange created within a minute of the turn's start."""
    if len(turns) == len(messages):
        return list(messages)
    matched: list[LoadedMessage | None] = []
    unused = list(messages)
    for turn in turns:
        start = _parse_ms(turn.started) if turn.started else None
        best = None
        if start is not None and unused:
            best = min(unused, key=lambda m: abs(_created_ms(m) - start))
            if abs(_created_ms(best) - start) > 60_000:
                best = None
        if best is not None:
            unused.remove(best)
        matched.append(best)
    return matched


def _exchange_usage(message: LoadedMessage, subagents: dict[str, LoadedSession]) -> Usage:
    total = Usage().add(Usage.of_message(message))
    for part in message.parts:
        state = part.get("state") if part.get("type") == "tool" else None
        metadata = state.get("metadata") if isinstance(state, dict) else None
        sub_id = metadata.get("sessionID") if isinstance(metadata, dict) else None
        if isinstance(sub_id, str) and sub_id in subagents:
            total.add(_session_usage(subagents[sub_id], subagents=True))
    return total


def show_session(info: SessionInfo, *, full: bool = False,
                 locations: Locations | None = None) -> SessionView:
    """The transcript of a conversation with per-turn usage; ``full`` adds archived items."""
    where = locations or Locations.resolve()
    turns = SessionLogReader(info.log_path).turns() if info.log_path is not None else []
    read = SessionInfo(info.user_id, info.session_name, agentuse_dir=info.agentuse_dir)
    session = _fill_from_agentuse(read)  # with parts, which the listing does not read
    info.problems.extend(p for p in read.problems if p not in info.problems)
    views = [TurnView(turn) for turn in turns]
    if session is not None:
        subagents = _subagents_by_id(session)
        for view, message in zip(views, _match_messages(turns, session.messages), strict=True):
            if message is not None:
                view.message_id = message.info.get("id")
                view.usage_main = Usage.of_message(message)
                view.usage = _exchange_usage(message, subagents)
    archived = None
    if full:
        from sessiontape.storage.compaction import archived_items

        archived = asyncio.run(archived_items(where.store_file, info.user_id, info.session_name))
    return SessionView(info, views, archived)


# -- clear ------------------------------------------------------------------------------


@dataclass
class ClearResult:
    """What :func:`clear_session` removed (row counts per table, paths) and what it left."""

    rows: dict[str, int] = field(default_factory=dict)
    removed_paths: list[Path] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # things not removed, and why

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "removed_paths": [str(p) for p in self.removed_paths],
                "kept": self.kept}


def _safe_agentuse_dir(directory: Path) -> str | None:
    """Why ``directory`` must not be removed as a session tree, or None if it may."""
    if directory.is_symlink():
        return "is a symbolic link"
    if split_session_dir_name(directory.name) is None:
        return "is not named <ULID>-<agent>"
    if not (directory / "session.json").is_file():
        return "has no session.json"
    return None


def clear_session(info: SessionInfo, *, locations: Locations | None = None) -> ClearResult:
    """Remove the conversation: its store rows (live, archived, compactions, link) in one
    transaction, then its log with its owner record, then its AgentUse tree."""
    where = locations or Locations.resolve()
    result = ClearResult()
    pair = (info.user_id, info.session_name)
    if where.store_file.exists():
        with closing(sqlite3.connect(where.store_file, timeout=30.0,
                                     isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                tables = _tables(conn)
                for table in ("session_items", ARCHIVE_TABLE, COMPACTIONS_TABLE, LINKS_TABLE):
                    if table in tables:
                        cursor = conn.execute(f"DELETE FROM {table} WHERE {_PAIR}", pair)
                        result.rows[table] = cursor.rowcount
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    if info.log_path is not None:
        owner = owner_record_path(info.log_path)
        record = log_owner(info.log_path)
        for path in (info.log_path, owner if record is not None and record.get("user_id")
                     == info.user_id and record.get("session_name") == info.session_name
                     else None):
            if path is not None and path.exists():
                path.unlink()
                result.removed_paths.append(path)
        with suppress(OSError):
            info.log_path.parent.rmdir()  # only if that was the user's last log
    if info.agentuse_dir is not None and info.agentuse_dir.exists():
        why = _safe_agentuse_dir(info.agentuse_dir)
        if why is None:
            shutil.rmtree(info.agentuse_dir)
            result.removed_paths.append(info.agentuse_dir)
        else:
            result.kept.append(f"{info.agentuse_dir}: {why}; not removed")
    return result


# -- path -------------------------------------------------------------------------------


def session_locations(info: SessionInfo | None = None, *, locations: Locations | None = None,
                      project_root: Path | None = None) -> dict[str, str | None]:
    """Where things are: the store and roots, or one conversation's store, log and tree."""
    where = locations or Locations.resolve()
    if info is None:
        return {"store": str(where.store_file), "logs_root": str(where.logs_root),
                "agentuse_root": str(agentuse_sessions_root(project_root))}
    owner = owner_record_path(info.log_path) if info.log_path is not None else None
    return {
        "store": str(where.store_file),
        "log": str(info.log_path) if info.log_path else None,
        "log_owner": str(owner) if owner is not None and owner.exists() else None,
        "agentuse_dir": str(info.agentuse_dir) if info.agentuse_dir else None,
    }

