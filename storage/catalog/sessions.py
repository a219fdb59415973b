"""Recorded conversations as a whole: list, show, clear and locate them.

A conversation lives in up to three places, and this module joins them:

* the skillet item store (``session_items``: the canonical list; also the
  compaction archive, the compaction log and the ``sessiontape_links`` table
  that names its AgentUse directory), where it is a ``(user_id, session_name)``
  pair;
* its JSONL replay log (turn count, transcript);
* its AgentUse session tree (tokens and cost of each exchange; for a session
  AgentUse wrote itself, the transcript too).

Every reader here only reads: no store table, log owner record or directory
is ever created (the log path is *found* the way :func:`sessiontape.storage.skillet.replay_log.
log_path_for` would choose it, without claiming it). Only
:func:`clear_session`, :func:`rename_session` and :func:`prune_sessions` change
anything.

Listing rules (also in ``sessiontape sessions list --help`` and docs/cli.md):

* every pair with rows in ``session_items``, or a link, is listed;
* a log that belongs to no such pair (its store rows were cleared by another
  tool, or skilled_crew wrote it) is listed too, with ``items`` 0 and
  ``sources`` ``["log"]``; without an owner record its names are the
  sanitized ones of its file path;
* every top-level session directory of the project's AgentUse tree
  (``<ULID>-<agent>`` with a ``session.json``) that no link points to is
  listed on its own: no user, its directory name as its name (not with
  ``user_id`` given: it has no user). A linked session is listed once, with
  its pair; the two are matched by the session's ULID. Subagent sessions
  belong to their parent and are not listed apart;
* ``origin`` says who wrote the conversation (:data:`ORIGINS`): ``sessiontape``
  when it carries sessiontape's own records (a link, a log owner record,
  compaction records, or a ``session.json`` whose ``version`` is
  ``sessiontape/...``), ``agentuse`` for a tree session without them,
  ``skilled_crew`` for store rows and logs without them;
* turns come from the log, each with the AgentUse exchange it names, and the
  exchanges no log turn names (a turn whose log lines were lost) are turns of their
  own (:mod:`sessiontape.storage.catalog.timeline`); without a log, the AgentUse exchanges
  are the turns; without either, the user messages among the stored items;
* a turn's tokens and cost are its exchange's ``message.json`` totals with those of
  the subagent sessions it ran (each subagent's file holds only its own calls, so
  nothing is counted twice), else its log's ``model_call`` lines; a conversation's
  are its turns' (``usage_main``: the main agent's alone). ``sessions show``, the
  catalog's search and usage and the exports follow the same rule.

Stored items are read in both shapes they come in: the Python Agents SDK's
(``call_id``, ``function_call_output``) and the JavaScript SDK's that
skilled_crew writes (``callId``, ``function_call_result`` with an
``{"type": "text", "text": ...}`` output).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from ..agentuse.liveness import INTERRUPTED, reported_status
from ..agentuse.reader import (
    OUR_VERSION_PREFIX,
    CorruptFileError,
    LoadedMessage,
    LoadedSession,
    load_session,
    read_json_object,
    split_session_dir_name,
)
from ..db import IN_PAIRS, PAIR, connect, connect_readonly, immediate, tables, writing_problem
from ..json_style import dumps_compact, dumps_pretty, loads
from ..names import reported_model
from ..paths import AgentUseRoots, Locations, SkilletPaths, agentuse_sessions_root
from ..skillet.items import content_text, input_text, output_text
from ..skillet.links import find_linked_dir, link_rows
from ..skillet.log_owners import (
    find_log_path,
    log_owner,
    owned_log_path,
    owner_pair,
    owner_record_name,
    owner_record_path,
)
from ..skillet.log_reader import INCOMPLETE_TURN, SessionLogReader, Turn
from ..tables import (
    ARCHIVE_TABLE,
    COMPACTIONS_TABLE,
    PAIR_TABLES,
    StoredSession,
    list_sessions_sql,
)
from ..times import iso_to_ms, ms_to_iso
from .timeline import ExchangeKey, TurnKey, align

__all__ = [
    "ORIGINS",
    "ORIGIN_AGENTUSE",
    "ORIGIN_SESSIONTAPE",
    "ORIGIN_SKILLED_CREW",
    "AmbiguousSessionError",
    "ClearResult",
    "NoSuchTurnError",
    "PruneResult",
    "Pruned",
    "RenameError",
    "RenameResult",
    "SessionBusyError",
    "SessionInfo",
    "SessionLookupError",
    "SessionView",
    "SubagentView",
    "TurnView",
    "UnknownSessionError",
    "Usage",
    "clear_session",
    "conversation_turns",
    "export_key",
    "fill_session",
    "find_session",
    "gather_sessions",
    "list_sessions",
    "listing_key",
    "match_session",
    "prune_sessions",
    "recheck_status",
    "rename_session",
    "session_locations",
    "show_session",
    "store_facts",
]

ORIGIN_SESSIONTAPE = "sessiontape"
ORIGIN_AGENTUSE = "agentuse"
ORIGIN_SKILLED_CREW = "skilled_crew"
ORIGINS = (ORIGIN_SESSIONTAPE, ORIGIN_AGENTUSE, ORIGIN_SKILLED_CREW)

_PairCounts = dict[tuple[str, str], int]  # rows of a store table per (user_id, session_name)


# -- usage ------------------------------------------------------------------------------


def _json_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _ms(value: Any) -> int | None:
    """A Unix-ms time field as an int (None when missing or of the wrong type)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return None


def _count(value: Any) -> int:
    """A token count (0 when missing or of the wrong type)."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


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
        cost = assistant.get("cost")
        return cls(_count(tokens.get("input")), _count(tokens.get("output")),
                   _count(tokens.get("reasoning")), _count(cache.get("read")),
                   _count(cache.get("write")),
                   float(cost) if isinstance(cost, (int, float)) else 0.0)

    @classmethod
    def of_model_calls(cls, calls: Iterable[dict[str, Any]]) -> Usage:
        """The sum of a log's ``model_call`` lines (``usage`` in the log's names)."""
        total = cls()
        for call in calls:
            tokens = _json_object(call.get("usage"))
            cost = call.get("cost")
            total.add(cls(_count(tokens.get("inputTokens")), _count(tokens.get("outputTokens")),
                          _count(tokens.get("reasoningTokens")),
                          _count(tokens.get("cachedTokens")), 0,
                          float(cost) if isinstance(cost, (int, float)) else 0.0))
        return total

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Usage | None:
        """The inverse of :meth:`to_json` (None for None)."""
        if data is None:
            return None
        return cls(data["input"], data["output"], data["reasoning"], data["cache_read"],
                   data["cache_write"], data["cost"])

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


def _agent_name(session: LoadedSession) -> str | None:
    """The agent's display name (``session.json`` ``agent.name``), else its directory's."""
    name = _json_object(session.info.get("agent")).get("name")
    if isinstance(name, str) and name:
        return name
    split = split_session_dir_name(session.directory.name)
    return split[1] if split else None


def _status(session: LoadedSession) -> str | None:
    """The status to report: ``crashed`` for a session left running by a dead recorder."""
    return reported_status(session.info, session.directory)


# -- one conversation -------------------------------------------------------------------


@dataclass
class SessionInfo:
    """One conversation with what each store knows of it.

    ``user_id`` is None for a session found only in the AgentUse tree (AgentUse has no
    users); its ``session_name`` is then its directory name, ``<ULID>-<agent>``.
    """

    user_id: str | None
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
    origin: str = ORIGIN_SKILLED_CREW  # one of ORIGINS
    agent: str | None = None           # the AgentUse session's agent name
    status: str | None = None          # the AgentUse session's status
    in_tree_only: bool = field(default=False, repr=False)  # found by the tree scan, unlinked

    @property
    def agentuse_id(self) -> str | None:
        """The AgentUse session id (the ULID of the linked directory's name)."""
        if self.agentuse_dir is None:
            return None
        split = split_session_dir_name(self.agentuse_dir.name)
        return split[0] if split else None

    @property
    def last_activity(self) -> str | None:
        return ms_to_iso(self.last_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "session_name": self.session_name,
            "user_id": self.user_id,
            "origin": self.origin,
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
            "agent": self.agent,
            "status": self.status,
            "sources": self.sources,
            "problems": self.problems,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionInfo:
        """The inverse of :meth:`to_json`."""
        def path(key: str) -> Path | None:
            return Path(data[key]) if data.get(key) else None

        return cls(data["user_id"], data["session_name"], items=data["items"],
                   archived=data["archived_items"], compactions=data["compactions"],
                   first_ms=data["first_ms"], last_ms=data["last_ms"], turns=data["turns"],
                   log_path=path("log_path"), agentuse_dir=path("agentuse_dir"),
                   usage=Usage.from_json(data["usage"]),
                   usage_main=Usage.from_json(data["usage_main"]),
                   sources=list(data["sources"]), problems=list(data["problems"]),
                   origin=data["origin"], agent=data["agent"], status=data["status"],
                   in_tree_only=data["user_id"] is None)


class SessionLookupError(LookupError):
    """A name or prefix that names no single conversation."""


class UnknownSessionError(SessionLookupError):
    """No conversation has that name (or AgentUse id prefix)."""


class AmbiguousSessionError(SessionLookupError):
    """Several conversations match; ``candidates`` lists them."""

    def __init__(self, message: str, candidates: Sequence[SessionInfo]) -> None:
        super().__init__(message)
        self.candidates = list(candidates)


# -- stored items, in either SDK's shape ------------------------------------------------


def _call_id(item: dict[str, Any]) -> Any:
    return item.get("call_id", item.get("callId"))


def _is_user_message(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user" \
        and item.get("type") in (None, "message")


def _is_assistant_message(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "assistant" \
        and item.get("type") in (None, "message")


_CALL_TYPES = ("function_call", "hosted_tool_call", "computer_call", "shell_call",
               "local_shell_call", "apply_patch_call", "custom_tool_call")
_RESULT_TYPES = ("function_call_output", "function_call_result", "computer_call_output",
                 "computer_call_result", "shell_call_output", "local_shell_call_output",
                 "apply_patch_call_output", "custom_tool_call_output")


def _item_steps(item: Any, names: dict[Any, str]) -> list[dict[str, Any]]:
    """A stored item as replay-log steps (``agent_tool_start``/``agent_tool_end``): how
    ``show`` presents the transcript of a session that has only its stored items."""
    if not isinstance(item, dict):
        return []
    kind = item.get("type")
    if kind in _CALL_TYPES:
        name = str(item.get("name") or kind)
        names[_call_id(item)] = name
        arguments = item.get("arguments", item.get("input", ""))
        return [{"type": "agent_tool_start", "toolName": name,
                 "toolArgumentsStr": arguments if isinstance(arguments, str)
                 else dumps_compact(arguments).decode()}]
    if kind in _RESULT_TYPES:
        name = item.get("name") or names.get(_call_id(item)) or kind
        return [{"type": "agent_tool_end", "toolName": name,
                 "result": output_text(item.get("output"))}]
    return []


def _turns_of_items(rows: Sequence[tuple[int, Any]]) -> list[tuple[Turn, list[Any]]]:
    """Stored items ``(created_at, item)`` grouped into turns, one per user message, each
    with its items."""
    turns: list[tuple[Turn, list[Any]]] = []
    names: dict[Any, str] = {}
    for created, item in rows:
        stamp = ms_to_iso(_ms(created)) or ""
        if _is_user_message(item):
            turns.append((Turn(item.get("content"), started=stamp), [item]))
            continue
        if not turns:  # items before the first user message (a compaction summary)
            turns.append((Turn(None, started=stamp), []))
        turn, items = turns[-1]
        items.append(item)
        turn.steps.extend(_item_steps(item, names))
        if _is_assistant_message(item):
            text = content_text(item.get("content"))
            turn.steps.append({"type": "text", "text": text})
            turn.final = {"text": text}
            turn.complete, turn.ended = True, stamp
    for turn, _ in turns:
        if not turn.complete:
            turn.final = {"text": INCOMPLETE_TURN}
    return turns


def _store_rows(store_file: Path, user_id: str, session_name: str,
                problems: list[str]) -> list[tuple[int, Any]]:
    """A pair's stored items ``(created_at, item)`` in order; malformed rows reported."""
    conn = connect_readonly(store_file)
    if conn is None:
        return []
    with closing(conn):
        if "session_items" not in tables(conn):
            return []
        rows = conn.execute(f"SELECT id, created_at, item_json FROM session_items WHERE {PAIR}"
                            " ORDER BY created_at, id", (user_id, session_name)).fetchall()
    items = []
    for row_id, created, text in rows:
        try:
            items.append((created, loads(text)))
        except ValueError as exc:
            problems.append(f"{store_file}: session_items row {row_id}: not JSON ({exc})")
    return items


def _count_store_turns(store_file: Path, infos: Sequence[SessionInfo]) -> None:
    """Turns of conversations that have neither a log nor a tree: their stored user
    messages (one connection for all of them)."""
    if not infos:
        return
    conn = connect_readonly(store_file)
    if conn is None:
        return
    with closing(conn):
        for info in infos:
            texts = conn.execute(f"SELECT item_json FROM session_items WHERE {PAIR}",
                                 (info.user_id, info.session_name)).fetchall()
            count = 0
            for (text,) in texts:
                with suppress(ValueError):
                    count += _is_user_message(loads(text))
            info.turns = count


# -- reading the store ------------------------------------------------------------------


def _count_by_pair(conn: sqlite3.Connection, table: str, among: tuple[str, ...]) -> _PairCounts:
    where = f"WHERE {IN_PAIRS} " if among else ""
    rows = conn.execute(f"SELECT user_id, session_name, COUNT(*) FROM {table} {where}"
                        "GROUP BY user_id, session_name", among).fetchall()
    return {(user, name): count for user, name, count in rows}


class StoreFact(NamedTuple):
    """What the store says of one pair (:func:`store_facts`)."""

    items: int
    first_ms: int | None
    last_ms: int | None
    archived: int
    compactions: int
    link: str | None  # its linked AgentUse directory


def _pairs_param(pairs: Iterable[tuple[str, str]] | None) -> tuple[str, ...]:
    """The parameter of :data:`~sessiontape.storage.db.IN_PAIRS` (none for every pair)."""
    return () if pairs is None else (dumps_compact([list(pair) for pair in pairs]).decode(),)


def _read_store(store_file: Path, user_id: str | None,
                pairs: set[tuple[str, str]] | None = None
                ) -> tuple[list[Any], _PairCounts, _PairCounts]:
    """``list_sessions`` rows, archived counts and compaction counts per pair (of
    ``pairs`` only, when given)."""
    conn = connect_readonly(store_file)
    if conn is None:
        return [], {}, {}
    among = _pairs_param(pairs)
    with closing(conn):
        present = tables(conn)
        archived = _count_by_pair(conn, ARCHIVE_TABLE, among) \
            if ARCHIVE_TABLE in present else {}
        compactions = (_count_by_pair(conn, COMPACTIONS_TABLE, among)
                       if COMPACTIONS_TABLE in present else {})
        stored = []
        if "session_items" in present:  # plain sqlite3: listing needs no Agents SDK
            params = ((user_id,) if user_id is not None else ()) + among
            sql = list_sessions_sql(user_id is not None, IN_PAIRS if among else None)
            stored = [StoredSession(*row) for row in conn.execute(sql, params)]
    return stored, archived, compactions


def store_growth(store_file: Path, before: Sequence[int] | None
                 ) -> tuple[list[int] | None, set[tuple[str, str]] | None]:
    """The store's marks now, and the pairs given items since the marks ``before`` when
    that is all that happened to the store, beside links added (None: something else
    did, or it cannot be told). The marks: the AUTOINCREMENT sequence of
    ``session_items`` (ids are never reused), its rows, and the rows of the archive,
    compaction and link tables; the store only grew when the archive and compaction
    tables did not change, the link table did not shrink (the caller accounts for the
    links added: the last mark) and the items above the old sequence are all the new
    rows (none was deleted). No marks (None) for a store whose ``session_items`` has no
    AUTOINCREMENT sequence yet."""
    conn = connect_readonly(store_file)
    if conn is None:
        return None, None
    with closing(conn):
        present = tables(conn)
        if not {"session_items", "sqlite_sequence"} <= present:
            return None, None
        conn.execute("BEGIN")  # one snapshot for every count
        try:
            sequence = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = "
                                    "'session_items'").fetchone()
            if sequence is None:
                return None, None
            marks = [sequence[0], *(
                conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                if table in present else -1 for table in PAIR_TABLES)]
            if before is None or len(before) != len(marks) or marks[2:4] != list(before[2:4]) \
                    or marks[0] < before[0] or marks[4] < before[4]:
                return marks, None
            added = conn.execute("SELECT user_id, session_name FROM session_items "
                                 "WHERE id > ?", (before[0],)).fetchall()
        finally:
            conn.execute("ROLLBACK")
    return marks, ({(user, name) for user, name in added}
                   if marks[1] == before[1] + len(added) else None)


@dataclass(frozen=True)
class _Log:
    """A replay log of a user directory and the pair it belongs to."""

    user: str
    name: str
    path: Path
    owned: bool  # it has an owner record (sessiontape's); else the names are its file's


def _listed_logs(logs_root: Path, known: dict[str, tuple[str, str]]) -> list[_Log]:
    """Every log of every user directory (not links, not ``.``-names) with its pair: its
    owner record's (``known`` maps the logs whose record was read before), else its
    directory's and file's names."""
    try:
        users = sorted((e for e in os.scandir(logs_root)
                        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)),
                       key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for user_dir in users:
        try:
            entries = {entry.name: entry for entry in os.scandir(user_dir.path)}
        except OSError:
            continue
        for file in sorted(entries):
            if file.startswith(".") or not file.endswith(".jsonl") or \
                    not entries[file].is_file():
                continue
            path = Path(entries[file].path)
            owned = owner_record_name(file) in entries
            pair = (known.get(entries[file].path) or owner_pair(path)) if owned else None
            found.append(_Log(*(pair or (user_dir.name, file.removesuffix(".jsonl"))), path,
                              owned))
    return found


def session_dir_id(entry: os.DirEntry[str]) -> str | None:
    """The ULID of an entry of an AgentUse root that is a session directory (a
    ``<ULID>-<agent>`` directory, not a link; whether it holds a ``session.json`` is for
    the caller to check), else None."""
    split = split_session_dir_name(entry.name)
    return split[0] if split is not None and entry.is_dir(follow_symlinks=False) else None


def _tree_sessions(root: Path) -> Iterable[tuple[str, str]]:
    """``(ULID, path)`` of every top-level session directory under ``root``, in name order
    (:func:`session_dir_id`)."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:  # no tree for this project (yet), or not readable
        return
    for entry in entries:
        session_id = session_dir_id(entry)
        if session_id is not None:
            yield session_id, entry.path


def _fill_from_log(info: SessionInfo) -> list[Turn]:
    """The turn count, times and problems of ``info``'s log; its turns."""
    if info.log_path is None:
        return []
    reader = SessionLogReader(info.log_path)
    try:
        turns = reader.turns()
    except OSError as exc:
        info.problems.append(f"{info.log_path}: cannot read: {exc.strerror or exc}")
        return []
    info.problems.extend(str(p) for p in reader.problems)
    info.turns = len(turns)
    _widen_span(info, _log_span([stamp for t in turns for stamp in (t.started, t.ended)
                                 if stamp]))
    return turns


def _widen_span(info: SessionInfo, stamps: list[int]) -> None:
    """``info``'s first and last activity, widened to ``stamps`` (Unix ms)."""
    if stamps:
        info.first_ms = min([info.first_ms or stamps[0], *stamps])
        info.last_ms = max([info.last_ms or 0, *stamps])


def _log_span(stamps: list[str]) -> list[int]:
    """The earliest and latest of a log's timestamps, in Unix ms. Ours and skilled_crew's
    all look like ``2026-11-22T10:09:32.893Z`` and sort as text, so only the first and last
    of those are parsed; any other form is parsed on its own."""
    canonical = [s for s in stamps if len(s) == 24 and s[-1] == "Z"]
    others = [s for s in stamps if len(s) != 24 or s[-1] != "Z"]
    ends = [min(canonical), max(canonical)] if canonical else []
    parsed = [ms for s in ends for ms in (iso_to_ms(s),) if ms is not None]
    if len(parsed) < len(ends):  # a malformed one sorted first or last: parse them all
        others = stamps
        parsed = []
    return parsed + [ms for s in others for ms in (iso_to_ms(s),) if ms is not None]


def _fill_from_agentuse(info: SessionInfo, *, parts: bool = True,
                        tree: LoadedSession | None = None) -> LoadedSession | None:
    if info.agentuse_dir is None or not info.agentuse_dir.is_dir():
        return None
    try:
        session = tree if tree is not None else load_session(info.agentuse_dir, parts=parts)
    except CorruptFileError as exc:
        info.problems.append(str(exc))
        return None
    except OSError as exc:
        info.problems.append(f"{info.agentuse_dir}: cannot read: {exc.strerror or exc}")
        return None
    info.sources.append("agentuse")
    info.usage = _session_usage(session, subagents=True)
    info.usage_main = _session_usage(session, subagents=False)
    info.agent, info.status = _agent_name(session), _status(session)
    if info.in_tree_only and str(session.info.get("version", "")).startswith(OUR_VERSION_PREFIX):
        info.origin = ORIGIN_SESSIONTAPE  # written by us, its link gone
    if info.log_path is None:  # no log: the exchanges are the turns
        info.turns = len(session.messages)
        if info.first_ms is None and info.last_ms is None:
            times = _json_object(session.info.get("time"))
            stamps = _exchange_span(session)
            stamps += [ms for ms in (_ms(times.get("created")), _ms(times.get("updated")))
                       if ms is not None]
            if stamps:
                info.first_ms, info.last_ms = min(stamps), max(stamps)
    return session


def _exchange_span(session: LoadedSession) -> list[int]:
    """The creation and completion times of a session's exchanges (Unix ms)."""
    return [ms for m in session.messages for key in ("created", "completed")
            for ms in (_ms(_json_object(m.info.get("time")).get(key)),) if ms is not None]


def _fill_from_timeline(info: SessionInfo, turns: list[Turn],
                        session: LoadedSession | None) -> None:
    """The turns, usage and last activity of a logged conversation: its log's turns and its
    tree's own exchanges (:func:`conversation_turns`), each turn's usage by the one rule
    (the module docstring)."""
    slots = conversation_turns(turns, session)
    info.turns = len(slots)
    exchanges = _exchange_usages(session) if session is not None else []
    total, main = (Usage(), Usage()) if session is not None else (None, None)
    for turn, index in slots:
        usage, own = exchanges[index] if index is not None else _log_usage(turn)
        if usage is not None and own is not None:
            total, main = (total or Usage()).add(usage), (main or Usage()).add(own)
    info.usage, info.usage_main = total, main
    if session is not None:
        _widen_span(info, _exchange_span(session))


def _pair_origin(info: SessionInfo) -> str:
    """sessiontape when the pair has any of sessiontape's own records, else skilled_crew."""
    if "link" in info.sources or info.archived or info.compactions:
        return ORIGIN_SESSIONTAPE
    if info.log_path is not None and os.path.lexists(owner_record_path(info.log_path)):
        return ORIGIN_SESSIONTAPE
    return ORIGIN_SKILLED_CREW


def gather_sessions(user_id: str | None, where: Locations,
                    known_logs: dict[str, tuple[str, str]] | None = None, *,
                    pairs: set[tuple[str, str]] | None = None,
                    facts: dict[tuple[str, str], StoreFact] | None = None
                    ) -> list[SessionInfo]:
    """Every conversation (of ``user_id``) with where its data is, before any log or tree
    is read: the listing rules of ``sessions list`` (docs/cli.md). ``known_logs`` maps
    logs to the pair their owner record names, read before (owner records never change).
    With ``pairs``, only those pairs of the store (their logs found by name, no log
    directory or tree listed). ``facts``: ``store_facts(where.store_file, pairs,
    user_id)``, read before."""
    found: dict[tuple[str, str], SessionInfo] = {}
    if facts is None:
        facts = store_facts(where.store_file, pairs, user_id)
    roots = AgentUseRoots.today(where.agentuse_root)
    for (user, name), (items, first, last, archived, compactions, link) in facts.items():
        info = found[(user, name)] = SessionInfo(
            user, name, items=items, archived=archived, compactions=compactions,
            first_ms=first, last_ms=last, sources=["store"] if items else [])
        if link is not None:  # where it is today (moved with its data directory: found)
            info.agentuse_dir = Path(find_linked_dir(link, roots) or link)
            info.sources.append("link")
    listed = _listed_logs(where.logs_root, known_logs or {}) if pairs is None else []
    owned = {(log.user, log.name): log.path for log in listed if log.owned}
    for (user, name), info in found.items():
        # A log its owner record gives the pair first (listed, or found by its names).
        info.log_path = (owned.get((user, name)) if pairs is None else
                         owned_log_path(user, name, where.logs_root)) or \
            find_log_path(user, name, where.logs_root)
    taken = {info.log_path for info in found.values() if info.log_path is not None}
    for log in listed:
        if log.path in taken or (user_id is not None and log.user != user_id):
            continue
        if (log.user, log.name) not in found:  # else a stray duplicate of a known pair's log
            found[(log.user, log.name)] = SessionInfo(log.user, log.name, log_path=log.path,
                                                      sources=[])
    for info in found.values():
        if info.log_path is not None:
            info.sources.append("log")
        info.origin = _pair_origin(info)
    sessions = list(found.values())
    if user_id is None and pairs is None and where.agentuse_root is not None:
        sessions += _tree_only(sessions, where.agentuse_root)
    return sessions


def store_facts(store_file: Path, pairs: set[tuple[str, str]] | None = None,
                user_id: str | None = None) -> dict[tuple[str, str], StoreFact]:
    """What the store says of each pair (of ``pairs``, of ``user_id``, when given), as
    :func:`gather_sessions` reads it: its items, first and last ``created_at``, archived
    items, compaction records and linked directory; the pairs with items first, newest
    first, then those with a link alone."""
    stored, archived, compactions = _read_store(store_file, user_id, pairs)
    links = {(user, name): directory
             for user, name, directory in link_rows(store_file, *_pairs_param(pairs))
             if user_id is None or user == user_id}
    facts = {(row.user_id, row.session_name): StoreFact(
        row.items, row.first_ms, row.last_ms, archived.get((row.user_id, row.session_name), 0),
        compactions.get((row.user_id, row.session_name), 0),
        links.get((row.user_id, row.session_name))) for row in stored}
    facts.update({pair: StoreFact(0, None, None, archived.get(pair, 0),
                                  compactions.get(pair, 0), link)
                  for pair, link in links.items() if pair not in facts})
    return facts


def _tree_only(known: list[SessionInfo], root: Path) -> list[SessionInfo]:
    """The project tree's sessions that no link points to. A linked one is merged with its
    pair (matched by ULID; a link whose directory is gone gets the one found here)."""
    linked = {info.agentuse_id: info for info in known if info.agentuse_id}
    found = []
    for session_id, path in _tree_sessions(root):
        info = linked.get(session_id)
        if info is not None:
            if info.agentuse_dir is not None and str(info.agentuse_dir) != path \
                    and not info.agentuse_dir.is_dir():
                info.agentuse_dir = Path(path)
            continue
        info = tree_only_session(Path(path))
        if info is not None:
            found.append(info)
    return found


def tree_only_session(directory: Path) -> SessionInfo | None:
    """The session of an AgentUse tree directory that no pair links, or None before its
    ``session.json`` is written (a crash between mkdir and the first write)."""
    if not os.path.lexists(directory / "session.json"):
        return None
    return SessionInfo(None, directory.name, agentuse_dir=directory, origin=ORIGIN_AGENTUSE,
                       in_tree_only=True)


def fill_session(info: SessionInfo, *, with_usage: bool = True,
                 store_file: Path | None = None,
                 tree: LoadedSession | None = None) -> SessionInfo:
    """``info`` with its turns and times from the log and, if asked, usage from the tree
    (always for a session that only the tree has; ``tree``: that tree, loaded already).
    ``store_file``: count the stored user messages of a conversation with neither log nor
    tree."""
    turns = _fill_from_log(info)
    if with_usage or info.in_tree_only:
        session = _fill_from_agentuse(info, parts=False, tree=tree)  # totals: message.json
        if info.log_path is not None:
            _fill_from_timeline(info, turns, session)
    if store_file is not None and _needs_store_turns(info):
        _count_store_turns(store_file, [info])
    return info


def _needs_store_turns(info: SessionInfo) -> bool:
    return info.items > 0 and info.log_path is None and "agentuse" not in info.sources


def list_sessions(user_id: str | None = None, *, locations: Locations | None = None,
                  with_usage: bool = True) -> list[SessionInfo]:
    """Every conversation (of ``user_id``, default all users and the AgentUse-only
    sessions of the project), newest first. Reads only."""
    where = locations or Locations.resolve()
    sessions = [fill_session(info, with_usage=with_usage)
                for info in gather_sessions(user_id, where)]
    _count_store_turns(where.store_file, [s for s in sessions if _needs_store_turns(s)])
    return sorted(sessions, key=lambda i: listing_key(i.last_ms, i.user_id, i.session_name))


def listing_key(last_ms: int | None, user_id: str | None,
                session_name: str) -> tuple[int, str, str]:
    """The order of ``sessions list``: newest activity first, then user and name."""
    return -(last_ms or 0), user_id or "", session_name


def export_key(info: SessionInfo) -> tuple[int, str, str]:
    """The order the exports take conversations in: oldest first (by first activity), then
    user and name (when two conversations repeat a layout's id, the older keeps it)."""
    return info.first_ms or 0, info.user_id or "", info.session_name


def recheck_status(info: SessionInfo) -> SessionInfo:
    """``info`` read earlier, with ``running`` made ``crashed`` if its recorder is gone
    since."""
    if info.status == "running" and info.agentuse_dir is not None:
        with suppress(CorruptFileError, OSError):
            info.status = reported_status(read_json_object(info.agentuse_dir / "session.json"),
                                          info.agentuse_dir)
    return info


def find_session(query: str, user_id: str | None = None, *, by_id: bool = True,
                 locations: Locations | None = None) -> SessionInfo:
    """The conversation named ``query`` (exactly), else whose AgentUse id starts with it.

    An AgentUse-only session is named by its directory name (``<ULID>-<agent>``).
    Raises :class:`UnknownSessionError` or :class:`AmbiguousSessionError`
    (the same name for several users, or a prefix of several ids). Only the
    conversations that match are read.
    """
    where = locations or Locations.resolve()
    return match_session(query, gather_sessions(user_id, where), user_id, by_id=by_id,
                         fill=lambda info: fill_session(info, store_file=where.store_file))


def match_session(query: str, sessions: Sequence[SessionInfo], user_id: str | None = None,
                  *, by_id: bool = True,
                  fill: Callable[[SessionInfo], SessionInfo] = lambda info: info) -> SessionInfo:
    """:func:`find_session`'s choice among ``sessions`` (of ``user_id``), each match
    passed through ``fill``."""
    named = [s for s in sessions if s.session_name == query]
    if len(named) == 1:
        return fill(named[0])
    if len(named) > 1:
        raise AmbiguousSessionError(
            f"{len(named)} users have a session named {query!r}; choose one with --user",
            [fill(s) for s in named])
    if by_id and query:
        prefix = query.upper()
        matched = [s for s in sessions if s.agentuse_dir is not None and s.agentuse_id
                   and (s.agentuse_id.startswith(prefix)
                        or s.agentuse_dir.name.startswith(query))]
        if len(matched) == 1:
            return fill(matched[0])
        if len(matched) > 1:
            raise AmbiguousSessionError(
                f"{len(matched)} sessions have an AgentUse id starting with {query!r}",
                [fill(s) for s in matched])
    whose = f" of user {user_id!r}" if user_id is not None else ""
    how = " (nor an AgentUse session id starting with it)" if by_id else ""
    raise UnknownSessionError(f"no session named {query!r}{whose}{how}")


# -- show -------------------------------------------------------------------------------


@dataclass
class SubagentView:
    """A subagent session of an AgentUse exchange, with its own exchanges as turns."""

    session_id: str
    agent: str | None
    directory: Path
    status: str | None
    error: Any
    call_id: str | None  # the parent's tool part that ran it (None: not found)
    turns: list[TurnView]
    usage: Usage          # its own calls and its subagents'

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "agent": self.agent,
                "directory": str(self.directory), "status": self.status, "error": self.error,
                "call_id": self.call_id, "usage": self.usage.to_json(),
                "turns": [t.to_json() for t in self.turns]}


@dataclass
class TurnView:
    """One turn with the usage of its AgentUse exchange (None if not found).

    ``source`` says where the turn was read: ``log`` (the replay log), ``agentuse`` (an
    exchange of the tree: ``parts`` and ``subagents`` are set) or ``store`` (the stored
    items, for a conversation with neither: ``items`` is set). Turns of the tree and the
    store also get ``steps`` in the replay log's vocabulary (tool starts and ends, texts).
    """

    turn: Turn
    number: int | None = None         # 1-based, among its session's turns as shown
    usage: Usage | None = None        # the exchange with its subagents
    usage_main: Usage | None = None   # the main agent's own calls
    message_id: str | None = None
    source: str = "log"
    parts: list[dict[str, Any]] | None = None
    subagents: list[SubagentView] = field(default_factory=list)
    items: list[Any] | None = None
    continued: list[dict[str, Any]] | None = None  # parts another tool added to its exchange
    halted: str | None = None  # "stopped", or why an incomplete turn ended (:func:`_halted`)

    def to_json(self) -> dict[str, Any]:
        data = {
            "number": self.number,
            "source": self.source,
            "user_input": self.turn.user_input,
            "steps": self.turn.steps,
            "final": self.turn.final,
            "text": self.turn.text,
            "model": self.turn.model,
            "complete": self.turn.complete,
            "halted": self.halted,
            "started": self.turn.started,
            "ended": self.turn.ended,
            "agentuse_message_id": self.message_id,
            "usage": self.usage.to_json() if self.usage else None,
            "usage_main": self.usage_main.to_json() if self.usage_main else None,
        }
        if self.parts is not None:
            data["parts"] = self.parts
            data["subagents"] = [s.to_json() for s in self.subagents]
        if self.items is not None:
            data["items"] = self.items
        if self.continued:
            data["continued"] = self.continued
        return data


@dataclass
class SessionView:
    """Everything ``sessions show`` prints.

    ``source``: where the turns were read (``log``, ``agentuse``, ``store``; None: no
    turns anywhere); ``error``: the AgentUse session's ``error`` object, if any.
    """

    info: SessionInfo
    turns: list[TurnView]
    archived: list[tuple[str, Any]] | None = None  # (compaction id, item) with full=True
    source: str | None = None
    error: Any = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "session": self.info.to_json(),
            "source": self.source,
            "error": self.error,
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


def _turn_key(turn: Turn) -> TurnKey:
    return TurnKey(turn.session_id, input_text(turn.user_input, "\n"),
                   iso_to_ms(turn.started) if turn.started else None)


def _exchange_key(message: LoadedMessage) -> ExchangeKey:
    return ExchangeKey(prompt_text(message),
                       _ms(_json_object(message.info.get("time")).get("created")))


def conversation_turns(turns: list[Turn], session: LoadedSession | None
                       ) -> list[tuple[Turn | None, int | None]]:
    """A conversation's turns in order (:func:`sessiontape.storage.catalog.timeline.align`): each
    log turn with the index of the exchange of ``session`` it names, and each exchange no
    turn names on its own (``(None, index)``)."""
    if session is None or not session.messages:
        return [(turn, None) for turn in turns]
    pairs = align([_turn_key(t) for t in turns], [_exchange_key(m) for m in session.messages],
                  session.id)
    return [(None if t is None else turns[t], e) for t, e in pairs]


_SHOWN_PARTS = ("text", "reasoning", "tool", "error")


def _continued(turn: Turn, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parts of a turn's exchange that began after the turn ended: what another tool
    added to it (AgentUse's ``run --session-id`` carries on a session's first exchange:
    src/runner/preparation.ts:115-143), which the log does not hold."""
    ended = iso_to_ms(turn.ended) if turn.complete and turn.ended else None
    if ended is None:
        return []
    return [part for part in parts if part.get("type") in _SHOWN_PARTS
            and (_part_start(part) or 0) > ended]


def _part_start(part: dict[str, Any]) -> int | None:
    times = _json_object(part.get("time")) or \
        _json_object(_json_object(part.get("state")).get("time"))
    return _ms(times.get("start"))


def _log_usage(turn: Turn | None) -> tuple[Usage | None, Usage | None]:
    """A log turn's usage and its main agent's, from its ``model_call`` lines (None, None
    when it has none: skilled_crew records no usage)."""
    if turn is None or not turn.model_calls:
        return None, None
    return (Usage.of_model_calls(turn.model_calls),
            Usage.of_model_calls(c for c in turn.model_calls if not c.get("parentCallId")))


# -- turns of an AgentUse tree ----------------------------------------------------------

_BASE_FIELDS = ("id", "sessionID", "messageID")
_QUIET_PARTS = ("log", "step-start", "step-finish")


def tool_output_text(output: Any) -> str:
    """A tool part's ``state.output`` as text: AgentUse's ``{"output": text, ...}``, our
    string, or anything else as compact JSON."""
    if isinstance(output, dict) and isinstance(output.get("output"), str):
        return str(output["output"])
    if isinstance(output, str):
        return output
    return "" if output is None else dumps_compact(output).decode()


def _part_steps(part: dict[str, Any], agent: str | None) -> list[dict[str, Any]]:
    """An AgentUse part as replay-log steps (``log`` and step markers give none)."""
    kind = part.get("type")
    if kind == "text":
        return [{"type": "text", "text": part.get("text", "")}]
    if kind == "tool":
        state = _json_object(part.get("state"))
        tool = part.get("tool")
        arguments = state.get("input", {})
        steps: list[dict[str, Any]] = [{
            "type": "agent_tool_start", "agentName": agent, "toolName": tool,
            "toolArgumentsStr": dumps_compact(arguments).decode()}]
        if state.get("status") == "completed":
            steps.append({"type": "agent_tool_end", "agentName": agent, "toolName": tool,
                          "result": tool_output_text(state.get("output"))})
        elif state.get("status") == "error":
            steps.append({"type": "agent_tool_end", "agentName": agent, "toolName": tool,
                          "result": str(state.get("error", "")), "status": "error"})
        return steps
    if kind in _QUIET_PARTS or not isinstance(kind, str):
        return []
    return [{k: v for k, v in part.items() if k not in _BASE_FIELDS}]  # reasoning, error...


def prompt_text(message: LoadedMessage) -> str:
    """An exchange's prompt: ``user.prompt.task``, and ``user.prompt.user`` when given."""
    prompt = _json_object(_json_object(message.info.get("user")).get("prompt"))
    return "\n".join(str(prompt[k]) for k in ("task", "user") if prompt.get(k))


def _exchange_turn(message: LoadedMessage, agent: str | None) -> Turn:
    times = _json_object(message.info.get("time"))
    completed = _ms(times.get("completed"))
    steps = [step for part in message.parts for step in _part_steps(part, agent)]
    text = "".join(str(p.get("text", "")) for p in message.parts if p.get("type") == "text")
    model = _json_object(message.info.get("assistant")).get("modelID")
    return Turn(prompt_text(message), steps,
                {"text": text or (INCOMPLETE_TURN if completed is None else "")},
                reported_model(model) if isinstance(model, str) else None, completed is not None,
                ms_to_iso(_ms(times.get("created"))) or "", ms_to_iso(completed) or "")


def _tool_names(sub: LoadedSession) -> set[str]:
    """What a parent's tool calling ``sub`` may be named after (``subagent__<name>``)."""
    agent = _json_object(sub.info.get("agent"))
    names = {str(agent.get("name", "")), str(agent.get("id", ""))}
    names |= {n.rsplit("/", 1)[-1] for n in list(names)}
    split = split_session_dir_name(sub.directory.name)
    if split:
        names.add(split[1])
    return {n.lower() for n in names if n}


def _place_subagent(sub: LoadedSession, messages: list[LoadedMessage],
                    used: set[int]) -> tuple[int | None, str | None]:
    """The exchange (index) and tool call that ran ``sub``: the tool part naming its
    session id (ours), else a ``subagent__<name>`` tool part of the exchange it was
    created in (AgentUse's), else only that exchange."""
    for index, message in enumerate(messages):
        for part in message.parts:
            metadata = _json_object(_json_object(part.get("state")).get("metadata"))
            if part.get("type") == "tool" and metadata.get("sessionID") == sub.id:
                used.add(id(part))
                return index, str(part.get("callID"))
    if not messages:
        return None, None
    created = _ms(_json_object(sub.info.get("time")).get("created"))
    index = 0
    if created is not None:
        index = max([i for i, m in enumerate(messages) if _created_ms(m) <= created] or [0])
    names = _tool_names(sub)
    for part in messages[index].parts:
        tool = part.get("tool")
        if part.get("type") == "tool" and id(part) not in used and isinstance(tool, str) \
                and tool.split("__", 1)[-1].lower() in names:
            used.add(id(part))
            return index, str(part.get("callID"))
    return index, None


def _placed_subagents(session: LoadedSession
                      ) -> list[list[tuple[LoadedSession, str | None]]]:
    """The subagent sessions each exchange ran, with the call that ran each
    (:func:`_place_subagent`)."""
    placed: list[list[tuple[LoadedSession, str | None]]] = [[] for _ in session.messages]
    used: set[int] = set()
    for sub in session.subagents:
        index, call_id = _place_subagent(sub, session.messages, used)
        if index is not None:
            placed[index].append((sub, call_id))
    return placed


def _exchange_usages(session: LoadedSession) -> list[tuple[Usage, Usage]]:
    """Each exchange's usage with the subagents it ran, and its own."""
    usages = []
    for message, subagents in zip(session.messages, _placed_subagents(session), strict=True):
        own = Usage.of_message(message)
        total = Usage().add(own)
        for sub, _ in subagents:
            total.add(_session_usage(sub, subagents=True))
        usages.append((total, own))
    return usages


def _tree_turns(session: LoadedSession) -> list[TurnView]:
    """Every exchange of an AgentUse session (read with its parts) as a turn, each with the
    subagent sessions it ran."""
    agent = _agent_name(session)
    views = []
    for number, (message, subagents) in enumerate(
            zip(session.messages, _placed_subagents(session), strict=True), 1):
        view = TurnView(_exchange_turn(message, agent), number,
                        usage_main=Usage.of_message(message),
                        message_id=str(message.info.get("id")), source="agentuse",
                        parts=message.parts)
        view.subagents = [SubagentView(
            sub.id, _agent_name(sub), sub.directory, _status(sub), sub.info.get("error"),
            call_id, _tree_turns(sub), _session_usage(sub, subagents=True))
            for sub, call_id in subagents]
        view.usage = Usage().add(view.usage_main or Usage())
        for placed in view.subagents:
            view.usage.add(placed.usage)
        views.append(view)
    return views


def _log_turn_view(turn: Turn, exchange: TurnView | None) -> TurnView:
    """A log turn, with the usage, parts and subagents of the ``exchange`` it names (the
    parts another tool added after the turn ended apart, as ``continued``); without one,
    its usage from its ``model_call`` lines."""
    view = TurnView(turn)
    if exchange is None:
        view.usage, view.usage_main = _log_usage(turn)
        return view
    view.message_id, view.usage, view.usage_main = \
        exchange.message_id, exchange.usage, exchange.usage_main
    view.continued = _continued(turn, exchange.parts or [])
    later = {id(part) for part in view.continued}
    view.parts = [part for part in exchange.parts or [] if id(part) not in later]
    view.subagents = exchange.subagents
    return view


class NoSuchTurnError(LookupError):
    """:func:`show_session` was asked for a turn the conversation does not have."""

    def __init__(self, turn: int, count: int) -> None:
        super().__init__(f"no turn {turn}: the conversation has {count} turn(s)")
        self.turn = turn
        self.count = count  # how many turns it has


def show_session(info: SessionInfo, *, full: bool = False,
                 locations: Locations | None = None, turn: int | None = None,
                 last: int | None = None) -> SessionView:
    """The transcript of a conversation with per-turn usage; ``full`` adds archived items.

    The turns come from the replay log; without one (or with an empty one), from the
    AgentUse exchanges (prompt, parts, subagents); without those, from the stored items.
    Each is numbered from 1; ``turn`` keeps turn N alone (:class:`NoSuchTurnError` if there
    is none), ``last`` the last K (all of them when there are fewer; K >= 1).
    """
    if last is not None and last < 1:
        raise ValueError(f"last must be at least 1, not {last}")
    where = locations or Locations(*_skillet_files())  # no tree to scan: no project needed
    turns: list[Turn] = []
    if info.log_path is not None:
        try:
            turns = SessionLogReader(info.log_path).turns()
        except OSError as exc:
            problem = f"{info.log_path}: cannot read: {exc.strerror or exc}"
            if problem not in info.problems:
                info.problems.append(problem)
    read = SessionInfo(info.user_id, info.session_name, agentuse_dir=info.agentuse_dir)
    session = _fill_from_agentuse(read)  # with parts, which the listing does not read
    info.problems.extend(p for p in read.problems if p not in info.problems)
    source: str | None = None
    views: list[TurnView] = []
    if turns:
        source = "log"
        exchanges = _tree_turns(session) if session is not None else []
        for logged, index in conversation_turns(turns, session):
            if logged is None and index is not None:  # an exchange no log turn names
                views.append(exchanges[index])
            elif logged is not None:
                views.append(_log_turn_view(logged, None if index is None else exchanges[index]))
    elif session is not None and session.messages:
        source, views = "agentuse", _tree_turns(session)
    elif info.user_id is not None and info.items:
        rows = _store_rows(where.store_file, info.user_id, info.session_name, info.problems)
        source = "store"
        views = [TurnView(stored, source="store", items=items)
                 for stored, items in _turns_of_items(rows)]
    _mark_halted(views, info.status in _DEAD_STATUSES)
    views = _chosen_turns(views, turn, last)
    archived: list[tuple[str, Any]] | None = None
    if full:
        archived = []
        if info.user_id is not None:
            import asyncio

            from sessiontape.storage.skillet.compaction import archived_items

            archived = asyncio.run(archived_items(where.store_file, info.user_id,
                                                  info.session_name))
    error = session.info.get("error") if session is not None else None
    return SessionView(info, views, archived, source, error)


_DEAD_STATUSES = ("crashed", "error")  # a session's: an open turn of it will not go on


def _halted(view: TurnView, dead: bool) -> str | None:
    """``stopped`` for a turn stopped by Ctrl-C (its exchange's error ``USER_STOPPED``);
    for an incomplete turn, its exchange's ``INTERRUPTED`` error message, else, when it
    has no error and its session is ``dead`` (crashed, failed), :data:`INTERRUPTED`; else
    None (a run that failed says why in its error part)."""
    errors = [part for part in view.parts or [] if part.get("type") == "error"]
    code = errors[-1].get("code") if errors else None
    if code == "USER_STOPPED":
        return "stopped"
    if view.turn.complete:
        return None
    if code == "INTERRUPTED":
        return str(errors[-1].get("message") or INTERRUPTED)
    return INTERRUPTED if dead and not errors else None


def _mark_halted(views: list[TurnView], dead: bool) -> None:
    """Set each turn's ``halted`` (:func:`_halted`), its subagents' turns' too."""
    for view in views:
        view.halted = _halted(view, dead)
        for sub in view.subagents:
            _mark_halted(sub.turns, dead or sub.status in _DEAD_STATUSES)


def _chosen_turns(views: list[TurnView], turn: int | None, last: int | None
                  ) -> list[TurnView]:
    """``views`` numbered from 1, then turn ``turn`` alone or the last ``last`` of them."""
    for number, view in enumerate(views, 1):
        view.number = number
    if turn is not None:
        if not 1 <= turn <= len(views):
            raise NoSuchTurnError(turn, len(views))
        return [views[turn - 1]]
    return views[-last:] if last is not None else views


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
    transaction, then its log with its owner record, then its AgentUse tree. (An
    AgentUse-only session has no rows and no log: only its tree goes.) A store that is
    damaged or cannot be written raises (``db.DamagedDatabase``, ``db.ReadOnlyDatabase``)
    before anything is removed."""
    where = locations or Locations(*_skillet_files())
    result = ClearResult()
    if info.user_id is not None and where.store_file.exists():
        pair = (info.user_id, info.session_name)
        with closing(connect(where.store_file)) as conn, immediate(conn):
            present = tables(conn)
            for table in PAIR_TABLES:
                if table in present:
                    cursor = conn.execute(f"DELETE FROM {table} WHERE {PAIR}", pair)
                    result.rows[table] = cursor.rowcount
    if info.log_path is not None:
        owner = owner_record_path(info.log_path)
        record = log_owner(info.log_path)
        for path in (info.log_path, owner if record is not None and record.get("user_id")
                     == info.user_id and record.get("session_name") == info.session_name
                     else None):
            if path is not None and path.exists():
                _remove(path, path.unlink, result)
        with suppress(OSError):
            info.log_path.parent.rmdir()  # only if that was the user's last log
    if info.agentuse_dir is not None and info.agentuse_dir.exists():
        directory = info.agentuse_dir
        why = _safe_agentuse_dir(directory)
        if why is None:
            _remove(directory, lambda: shutil.rmtree(directory), result)
        else:
            result.kept.append(f"{directory}: {why}; not removed")
    return result


def _remove(path: Path, removal: Callable[[], None], result: ClearResult) -> None:
    """Remove ``path`` as ``removal`` does, noting it in ``result``: removed, or kept with
    why (a directory that cannot be written: the rest of the clear goes on)."""
    try:
        removal()
    except OSError as exc:
        result.kept.append(f"{path}: cannot be removed ({exc.strerror or exc}); what could "
                           "be was")
    else:
        result.removed_paths.append(path)


# -- rename and prune ---------------------------------------------------------------------


class SessionBusyError(RuntimeError):
    """A recorder is recording a run of the conversation (it holds the recording lock of
    its AgentUse session: :class:`~sessiontape.storage.agentuse.liveness.RecordingLock`)."""


class RenameError(ValueError):
    """The conversation cannot be renamed as asked; nothing was changed."""


@contextmanager
def _unrecorded(directory: Path | None) -> Iterator[None]:
    """Hold the recording lock of the session ``directory`` exclusively while the caller
    changes its conversation: :class:`SessionBusyError` when a recorder holds it; a
    recorder that starts a run meanwhile waits (``RecordingLock.acquire``) until the
    change is done. Nothing to hold for a conversation without a tree."""
    if directory is None or not directory.is_dir():
        yield
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionBusyError(f"{directory}: a recorder is recording a run of it "
                                   "now") from None
        yield
    finally:
        os.close(fd)


@dataclass(frozen=True)
class RenameResult:
    """What :func:`rename_session` moved: the store rows per table, the log, the tree."""

    user_id: str
    old_name: str
    new_name: str
    rows: dict[str, int]
    log_path: Path | None = None      # the log, at its new name
    agentuse_dir: Path | None = None  # its session.json names the new pair

    def to_json(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "old_name": self.old_name,
                "new_name": self.new_name, "rows": self.rows,
                "log_path": str(self.log_path) if self.log_path else None,
                "agentuse_dir": str(self.agentuse_dir) if self.agentuse_dir else None}


def rename_session(info: SessionInfo, new_name: str, *,
                   locations: Locations | None = None) -> RenameResult:
    """Rename the conversation ``info`` to ``new_name`` (the same user) in every layout.

    In this order, each step undone if a later one fails, so that a failure leaves the
    conversation as it was: NEW's log name is claimed and the log moved there
    (:func:`_rename_log`; when the two names sanitize alike, the file stays and its owner
    record names NEW); session.json's ``conversation`` names the new pair (and log); last, one
    transaction moves the pair's rows in every store table (items, archive, compactions,
    link). The store goes last because it is the one step that cannot be taken back by
    putting bytes back: once it commits, the rename is done, and only OLD's owner record
    is left to remove. Nothing inside the log is rewritten: its lines are history (a
    ``user_message`` keeps the ``sessionName`` it was recorded with).

    Raises :class:`RenameError` (an empty name, NEW exists in any layout, an
    AgentUse-only session, a store that is damaged or cannot be written) and
    :class:`SessionBusyError`, having changed nothing. A run of OLD that starts
    meanwhile waits for the rename to end.
    """
    from .fork import ForkError, _check_new_name, _check_new_pair, _Made

    where = locations or Locations(*_skillet_files())
    user_id = info.user_id
    if user_id is None:
        raise RenameError(f"{info.session_name!r} is an AgentUse session without a user: "
                          "its name is its directory's")
    try:
        _check_new_name(new_name)
    except ForkError as exc:
        raise RenameError(str(exc)) from None
    problem = writing_problem(where.store_file)
    if problem is not None:
        raise RenameError(f"item store {problem}")
    with _unrecorded(info.agentuse_dir):
        try:
            _check_new_pair(where.store_file, where.logs_root, user_id, new_name)
        except ForkError as exc:
            raise RenameError(str(exc)) from None
        made, undo = _Made(), list[Callable[[], None]]()
        old_log = info.log_path if info.log_path is not None and info.log_path.exists() \
            else None
        tree = info.agentuse_dir if info.agentuse_dir is not None \
            and (info.agentuse_dir / "session.json").is_file() else None
        try:
            new_log = _rename_log(old_log, (user_id, info.session_name), new_name,
                                  where.logs_root, made, undo) if old_log is not None else None
            if tree is not None:
                _rename_in_tree(tree, user_id, new_name, new_log, undo)
            rows = _rename_rows(where.store_file, (user_id, info.session_name), new_name)
        except BaseException:
            for step in reversed(undo):
                step()
            made.undo()
            raise
    if old_log is not None and owner_pair(old_log) == (user_id, info.session_name):
        with suppress(OSError):
            owner_record_path(old_log).unlink()
    return RenameResult(user_id, info.session_name, new_name, rows, new_log, tree)


def _rename_log(old: Path, pair: tuple[str, str], new_name: str, logs_root: Path, made: Any,
                undo: list[Callable[[], None]]) -> Path:
    """Give the log of ``pair`` at ``old`` the log name of ``(user, new_name)``, noting how
    to undo it: the first of the new pair's candidate names that nobody else owns, ``old``
    counted as free (the name a recorder of the new pair finds once the rename is done).
    When that is ``old`` itself (the two names sanitize alike), the file stays and its
    owner record names the new pair; else that name is claimed and the log moved there (a
    hard link, then ``old`` unlinked: an existing file is never replaced)."""
    from ..files import atomic_write  # a writer's: the readers here never load it
    from ..skillet.log_owners import candidates
    from .fork import _claim_log

    free = next((path for path in candidates(pair[0], new_name, logs_root)
                 if path == old or not os.path.lexists(owner_record_path(path))), None)
    if free == old:
        record = owner_record_path(old)
        before = record.read_bytes() if record.exists() else None
        atomic_write(record, dumps_compact({"user_id": pair[0], "session_name": new_name}))
        undo.append(lambda: atomic_write(record, before) if before is not None
                    else record.unlink())
        return old
    new = _claim_log(pair[0], new_name, logs_root, made)
    os.link(old, new)
    made.files.append(new)
    old.unlink()
    undo.append(lambda: os.link(new, old))
    return new


def _rename_in_tree(tree: Path, user_id: str, new_name: str, new_log: Path | None,
                    undo: list[Callable[[], None]]) -> None:
    """session.json's ``conversation`` naming the new pair (and its log), its old bytes
    kept to put back."""
    from ..files import atomic_write
    path = tree / "session.json"
    old = path.read_bytes()
    try:
        document = loads(old)
    except ValueError as exc:
        document = exc
    if not isinstance(document, dict):
        raise RenameError(f"{path} cannot be read ({document}); the next run of the session, "
                          "or 'sessiontape doctor --fix', rebuilds it")
    conversation = {**_json_object(document.get("conversation")), "user": user_id,
                    "name": new_name}
    if new_log is not None:
        conversation["log"] = str(new_log)
    atomic_write(path, dumps_pretty({**document, "conversation": conversation}))
    undo.append(lambda: atomic_write(path, old))


def _rename_rows(store_file: Path, pair: tuple[str, str], new_name: str) -> dict[str, int]:
    """Move ``pair``'s rows in every store table to ``new_name``, in one transaction
    (RenameError when the new pair got rows meanwhile); the rows moved per table."""
    from .fork import _table_with

    rows: dict[str, int] = {}
    if not store_file.exists():
        return rows
    with closing(connect(store_file)) as conn, immediate(conn):
        taken = _table_with(conn, (pair[0], new_name))
        if taken is not None:
            raise RenameError(f"{new_name!r} of {pair[0]!r} appeared in {taken} meanwhile")
        present = tables(conn)
        for table in PAIR_TABLES:
            if table in present:
                rows[table] = conn.execute(f"UPDATE {table} SET session_name = ? WHERE {PAIR}",
                                           (new_name, *pair)).rowcount
    return rows


@dataclass
class PruneResult:
    """What :func:`prune_sessions` removed (or, on a dry run, would remove), what it could
    not remove and why (each conversation is removed whole or left whole), and the
    cutoff: last activity before it."""

    cutoff_ms: int
    dry_run: bool
    removed: list[Pruned] = field(default_factory=list)
    failed: list[Pruned] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"cutoff": ms_to_iso(self.cutoff_ms), "dry_run": self.dry_run,
                "removed": [each.to_json() for each in self.removed],
                "failed": [each.to_json() for each in self.failed]}


@dataclass
class Pruned:
    """One conversation of a prune: what it was (``bytes``: its log and tree files, read
    before), and what was removed (None on a dry run) or why it could not be."""

    info: SessionInfo
    bytes: int
    removed: ClearResult | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        info = self.info
        done = self.removed.to_json() if self.removed is not None else {}
        error = {"error": self.error} if self.error is not None else {}
        return {"session_name": info.session_name, "user_id": info.user_id,
                "origin": info.origin, "last_ms": info.last_ms,
                "last_activity": info.last_activity, "turns": info.turns,
                "items": info.items, "bytes": self.bytes, **done, **error}


def _files_size(info: SessionInfo) -> int:
    """The bytes of a conversation's log and AgentUse tree files (its store rows aside)."""
    paths = [info.log_path] if info.log_path is not None else []
    if info.agentuse_dir is not None and not info.agentuse_dir.is_symlink():
        paths += info.agentuse_dir.rglob("*")
    total = 0
    for path in paths:
        with suppress(OSError):
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
    return total


def _prunable(cutoff_ms: int, user_id: str | None = None, *,
                    include_agentuse: bool = False,
                    locations: Locations | None = None) -> list[SessionInfo]:
    """The conversations (of ``user_id``) whose last activity is before ``cutoff_ms``,
    oldest first; the AgentUse-only sessions (no user: AgentUse's own history) only with
    ``include_agentuse``; a conversation of unknown age never."""
    where = locations or Locations.resolve()
    found = [info for info in list_sessions(user_id, locations=where)
             if info.last_ms is not None and info.last_ms < cutoff_ms
             and (include_agentuse or info.user_id is not None)]
    return sorted(found, key=lambda i: (i.last_ms or 0, i.user_id or "", i.session_name))


def prune_sessions(cutoff_ms: int, user_id: str | None = None, *, dry_run: bool = False,
                   include_agentuse: bool = False,
                   locations: Locations | None = None) -> PruneResult:
    """Remove every conversation :func:`pruned_sessions` names, each as
    :func:`clear_session` removes one, each whole or not at all: its log and tree are
    moved aside (a hidden ``.pruning`` directory beside each, where no reader lists them)
    before its store rows go in one transaction; a failure before that moves them back,
    and the conversation is reported in ``failed`` while the others go on. One being
    recorded is not removed (``failed``). ``dry_run``: nothing is changed. A store that
    is damaged or cannot be written raises (``db.DamagedDatabase``,
    ``db.ReadOnlyDatabase``) before anything is removed."""
    where = locations or Locations.resolve()
    result = PruneResult(cutoff_ms, dry_run)
    found = _prunable(cutoff_ms, user_id, include_agentuse=include_agentuse,
                            locations=where)
    if dry_run:
        result.removed = [Pruned(info, _files_size(info)) for info in found]
        return result
    problem = writing_problem(where.store_file)
    if problem is not None and any(info.user_id is not None for info in found):
        raise problem
    for info in found:
        pruned = Pruned(info, _files_size(info))
        try:
            pruned.removed = _prune_one(info, where)
            result.removed.append(pruned)
        except (SessionBusyError, OSError, sqlite3.Error) as exc:
            pruned.error = str(exc)
            result.failed.append(pruned)
    return result


def _prune_one(info: SessionInfo, where: Locations) -> ClearResult:
    """Remove one conversation whole (:func:`prune_sessions`), or raise having left it
    whole."""
    with _unrecorded(info.agentuse_dir):
        tree = info.agentuse_dir if info.agentuse_dir is not None \
            and info.agentuse_dir.exists() else None
        why = _safe_agentuse_dir(tree) if tree is not None else None
        if tree is not None and why is not None:
            raise OSError(f"{tree}: {why}; not removed")
        owner = owner_record_path(info.log_path) if info.log_path is not None else None
        moves = [path for path in (
            tree, info.log_path if info.log_path is not None and info.log_path.exists()
            else None, owner if info.log_path is not None
            and owner_pair(info.log_path) == (info.user_id, info.session_name) else None)
            if path is not None]
        moved: list[tuple[Path, Path]] = []
        try:
            for path in moves:
                aside = path.parent / ".pruning" / path.name
                aside.parent.mkdir(mode=0o700, exist_ok=True)
                os.rename(path, aside)
                moved.append((path, aside))
            result = clear_session(replace(info, log_path=None, agentuse_dir=None),
                                   locations=where)
        except BaseException:
            for path, aside in reversed(moved):
                os.rename(aside, path)
                with suppress(OSError):
                    aside.parent.rmdir()
            raise
    for path, aside in moved:
        if aside.is_dir():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            with suppress(OSError):
                aside.unlink()
        with suppress(OSError):
            aside.parent.rmdir()
        if aside.exists():
            result.kept.append(f"{aside}: could not be removed (the conversation is gone)")
        else:
            result.removed_paths.append(path)
    if info.log_path is not None:
        with suppress(OSError):
            info.log_path.parent.rmdir()  # only if that was the user's last log
    return result


def _skillet_files() -> tuple[Path, Path]:
    skillet = SkilletPaths.resolve()
    return skillet.store_file, skillet.logs_root


# -- path -------------------------------------------------------------------------------


def session_locations(info: SessionInfo | None = None, *, locations: Locations | None = None,
                      project_root: Path | str | None = None) -> dict[str, str | None]:
    """Where things are: the store, logs root and AgentUse root of the project
    (``project_root``, else the one ``locations`` names, else the current directory's), or
    one conversation's store, log, owner record and tree (``store`` None for an
    AgentUse-only session, which the store does not hold)."""
    where = locations or Locations(*_skillet_files())
    if info is None:
        root = where.agentuse_root if where.agentuse_root is not None and project_root is None \
            else agentuse_sessions_root(project_root)
        return {"store": str(where.store_file), "logs_root": str(where.logs_root),
                "agentuse_root": str(root)}
    owner = owner_record_path(info.log_path) if info.log_path is not None else None
    return {
        "store": str(where.store_file) if info.user_id is not None else None,
        "log": str(info.log_path) if info.log_path else None,
        "log_owner": str(owner) if owner is not None and owner.exists() else None,
        "agentuse_dir": str(info.agentuse_dir) if info.agentuse_dir else None,
    }
