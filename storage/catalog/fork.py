"""Forking a conversation: a new one that holds turns 1..N of another, in every layout.

:func:`fork_session` copies turns 1..N of ``(user, name)`` to a new pair ``(user, new)``
and leaves the original as it is, byte for byte:

* **store**: the ``session_items`` rows of turns 1..N (a turn starts at a user message,
  so a tool call is never split from its output), with their ``created_at`` and
  ``item_json`` as they are, in one transaction that also links the new AgentUse session.
  A compacted conversation counts its turns as the log and the tree do: every user
  message ever added, archived or live. When turn N is live (none of its rows
  archived), the new pair gets the current summary and the live rows of turns up to N
  (what the model was given from then on); when turn N lies in the compacted part, it
  gets the original rows of turns 1..N from ``session_items_archive`` (and the live
  table), without a summary.
* **log**: the lines of turns 1..N, verbatim (``model_call``, ``compaction`` and
  ``suspended`` lines go with their turn), in a log claimed for the new pair.
* **AgentUse tree**: a new session directory (new ULID, the same agent suffix) beside the
  original, with exchanges 1..N, their parts and the subagent sessions they ran. Every id
  in it is new (session, message, part and subagent ids, issued in the order of the old
  ones, so parts sort as before) and every reference follows (``sessionID``,
  ``messageID``, ``parentSessionID``, a subagent call's ``state.metadata``).
  ``session.json`` names the new conversation and adds ``forkedFrom: {sessionId,
  messageId}`` (the original session and its exchange N). The fork's sessions are
  created (``time.created`` and ``updated``) when it is made, the time of their new ids;
  the exchanges keep their times.

The layouts that exist are forked and must agree on the number of turns. Nothing is
written when the new name is taken (store rows, archive, compaction records, a link or a
log) or N is out of range; a failure half-way removes what was made (the tree is built
under a hidden name and renamed into place)."""

from __future__ import annotations

import bisect
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..agentuse.reader import (
    SUBAGENT_DIR,
    CorruptFileError,
    LoadedMessage,
    LoadedSession,
    load_session,
    split_session_dir_name,
)
from ..agentuse.writer import drop_none
from ..db import PAIR, connect, connect_readonly, immediate, tables, writing_problem
from ..files import atomic_write, make_private_dir, prepare_private_file
from ..ids import new_ulid, ulid_ms
from ..json_style import dumps_compact, dumps_pretty, loads
from ..names import safe_join, sanitize_log_name
from ..skillet.links import SCHEMA as LINKS_SCHEMA
from ..skillet.log_owners import find_log_path, owner_record_path
from ..skillet.log_reader import LogEntry, SessionLogReader, group_turns, open_log
from ..skillet.replay_log import log_path_for
from ..tables import ARCHIVE_TABLE, LINKS_TABLE, PAIR_TABLES

__all__ = ["ForkError", "ForkResult", "NameTakenError", "TurnRangeError", "fork_session"]

STORE, LOG, AGENTUSE = "store", "log", "agentuse"
_ID_KEYS = frozenset(("id", "sessionID", "messageID", "parentSessionID"))


class ForkError(Exception):
    """The conversation cannot be forked as asked; nothing was written."""


class NameTakenError(ForkError):
    """The new name already names a conversation of that user."""


class TurnRangeError(ForkError):
    """The turn to fork at is not one of the conversation's turns."""


@dataclass(frozen=True)
class ForkResult:
    """What :func:`fork_session` made: the new pair, and what each layout got.

    ``forked`` lists the layouts copied, ``missing`` those the original does not have;
    ``from_archive`` says the store rows came from the compaction archive (turn N lies in
    the compacted part)."""

    user_id: str
    session_name: str
    source_name: str
    at_turn: int
    source_turns: int
    rows: int = 0
    from_archive: bool = False
    log_path: Path | None = None
    agentuse_dir: Path | None = None
    forked: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "session_name": self.session_name,
                "forked_from": self.source_name, "at_turn": self.at_turn,
                "source_turns": self.source_turns, "rows": self.rows,
                "from_archive": self.from_archive,
                "log_path": str(self.log_path) if self.log_path else None,
                "agentuse_dir": str(self.agentuse_dir) if self.agentuse_dir else None,
                "forked": list(self.forked), "missing": list(self.missing)}


# -- the store ---------------------------------------------------------------------------


class _Row(NamedTuple):
    id: int
    created_at: int
    item_json: str


def _pair_rows(conn: sqlite3.Connection, table: str, pair: tuple[str, str]) -> list[_Row]:
    rows = conn.execute(f"SELECT id, created_at, item_json FROM {table} WHERE {PAIR} "
                        "ORDER BY created_at, id", pair).fetchall()
    return [_Row(*row) for row in rows]


def _is_user_message(item_json: str) -> bool:
    """Whether a row holds a user message, in either SDK's shape: where a turn starts.
    (``compaction.is_user_message`` reads parsed items and imports the Agents SDK, which
    this module, used by the CLI, does without.)"""
    try:
        item = loads(item_json)
    except ValueError:
        return False
    return isinstance(item, dict) and item.get("role") == "user" \
        and item.get("type") in (None, "message")


def _put_in_by_compaction(rows: list[_Row]) -> set[int]:
    """The ids of the rows a compaction put in (its summary, or what another summarizer
    returned): inserted after the rows they sort before (docs/compaction.md: a newer id
    with a ``created_at`` just before the first kept row), where every row that was added
    has a higher id than the rows before it."""
    found: set[int] = set()
    lowest: int | None = None
    for row in sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True):
        if lowest is not None and row.id > lowest:
            found.add(row.id)
        lowest = row.id if lowest is None else min(lowest, row.id)
    return found


@dataclass(frozen=True)
class _History:
    """A pair's rows: every row that was added (live or archived) in the order added, the
    ids of those archived, the current summary (the live rows compaction put in), and
    where each turn starts (an index in ``added``: a user message)."""

    added: list[_Row]
    archived: frozenset[int]
    summary: list[_Row]
    starts: list[int]

    @property
    def turns(self) -> int:
        return len(self.starts)

    def rows_of_turns(self, at_turn: int) -> tuple[list[_Row], bool]:
        """The rows that give the model turns 1..``at_turn``, and whether they come from
        the archive: when turn ``at_turn`` is live (no row of it or after it archived), the
        summary and the live rows of those turns, what the model was given from then on;
        else every row of those turns as it was added, archived or live."""
        end = self.starts[at_turn] if at_turn < self.turns else len(self.added)
        rows = self.added[:end]
        if not any(row.id in self.archived for row in self.added[self.starts[at_turn - 1]:]):
            return self.summary + [row for row in rows if row.id not in self.archived], False
        return rows, True


def _read_history(store_file: Path, user_id: str, session_name: str) -> _History | None:
    """The pair's history, or None when it has no rows (live or archived)."""
    conn = connect_readonly(store_file)
    if conn is None:
        return None
    pair = (user_id, session_name)
    with closing(conn):
        present = tables(conn)
        live = _pair_rows(conn, "session_items", pair) if "session_items" in present else []
        archived = _pair_rows(conn, ARCHIVE_TABLE, pair) if ARCHIVE_TABLE in present else []
    if not live and not archived:
        return None
    put_in = _put_in_by_compaction(live + archived) if archived else set()
    added = sorted((row for row in live + archived if row.id not in put_in), key=lambda r: r.id)
    return _History(added, frozenset(row.id for row in archived if row.id not in put_in),
                    [row for row in live if row.id in put_in],
                    [i for i, row in enumerate(added) if _is_user_message(row.item_json)])


def _store_has(store_file: Path, user_id: str, session_name: str) -> str | None:
    """The first store table holding the pair (rows, archive, compactions or a link)."""
    conn = connect_readonly(store_file)
    if conn is None:
        return None
    with closing(conn):
        return _table_with(conn, (user_id, session_name))


def _table_with(conn: sqlite3.Connection, pair: tuple[str, str]) -> str | None:
    present = tables(conn)
    for table in PAIR_TABLES:
        if table in present and conn.execute(f"SELECT 1 FROM {table} WHERE {PAIR} LIMIT 1",
                                            pair).fetchone():
            return table
    return None


def _write_store(store_file: Path, pair: tuple[str, str], rows: list[_Row],
                 agentuse_dir: Path | None) -> None:
    """Insert the rows (their ``created_at`` and ``item_json`` as they are) and the link in
    one transaction; NameTakenError if the pair got anything meanwhile."""
    prepare_private_file(store_file)
    with closing(connect(store_file)) as conn, immediate(conn):
        taken = _table_with(conn, pair)
        if taken is not None:
            raise NameTakenError(f"{pair[1]!r} of {pair[0]!r} appeared in {taken} meanwhile")
        conn.executemany("INSERT INTO session_items (user_id, session_name, created_at, "
                         "item_json) VALUES (?, ?, ?, ?)",
                         [(*pair, row.created_at, row.item_json) for row in rows])
        if agentuse_dir is not None:
            conn.execute(LINKS_SCHEMA)
            conn.execute(f"INSERT INTO {LINKS_TABLE} VALUES (?, ?, ?)",
                         (*pair, str(agentuse_dir)))


# -- the log -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Log:
    """A log's entries as its reader groups them, and its lines as read after them."""

    entries: list[LogEntry]
    last_line: int  # the last line the reader read (an entry or a skipped line)
    lines: list[bytes]

    @property
    def turns(self) -> int:
        return len(group_turns(self.entries))

    def head(self, at_turn: int) -> bytes:
        """The lines of turns 1..``at_turn``, verbatim: up to the entry that starts turn
        ``at_turn + 1``, found by bisecting on the reader's own grouping (the number of
        turns of a prefix grows with it), so that the turns are the reader's."""
        entries = self.entries
        start = bisect.bisect_right(range(len(entries)), at_turn,
                                    key=lambda k: len(group_turns(entries[:k + 1])))
        end = entries[start].line - 1 if start < len(entries) else self.last_line
        return b"".join(line + b"\n" for line in self.lines[:end])


def _read_log(path: Path) -> _Log:
    """Read the entries first, then the bytes: a log is only appended to, so the bytes
    hold every line the entries came from (lines appended in between are not taken)."""
    reader = SessionLogReader(path)
    entries = reader.entries()
    last = max([e.line for e in entries] + [p.line for p in reader.problems], default=0)
    with os.fdopen(open_log(path), "rb") as file:
        data = file.read()
    return _Log(entries, last, data.split(b"\n"))


# -- the AgentUse tree -------------------------------------------------------------------


def _session_ids(session: LoadedSession) -> Iterator[str]:
    """The ids a session's documents are known by: its own, its exchanges', their parts'
    (from the documents and from their directory names)."""
    yield session.directory.name[:26]
    for message in session.messages:
        yield message.directory.name
        for document in [message.info, *message.parts]:
            if isinstance(document.get("id"), str):
                yield document["id"]
    if isinstance(session.info.get("id"), str):
        yield session.info["id"]


def _tree_ids(session: LoadedSession) -> Iterator[str]:
    yield from _session_ids(session)
    for sub in session.subagents:
        yield from _tree_ids(sub)


def _new_ids(old: Iterator[str]) -> dict[str, str]:
    """A new ULID for each old id, issued in the order of the old ones (ours increase
    strictly, so what sorted by id before sorts the same)."""
    return {old_id: new_ulid() for old_id in sorted(set(old))}


def _called_in(messages: list[LoadedMessage]) -> dict[str, int]:
    """The exchange (index) of each subagent session a tool part names (ours do)."""
    found: dict[str, int] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            state = part.get("state")
            metadata = state.get("metadata") if isinstance(state, dict) else None
            sub_id = metadata.get("sessionID") if isinstance(metadata, dict) else None
            if part.get("type") == "tool" and isinstance(sub_id, str):
                found.setdefault(sub_id, index)
    return found


def _created(info: dict[str, Any]) -> float:
    times = info.get("time")
    created = times.get("created") if isinstance(times, dict) else None
    return created if isinstance(created, (int, float)) else 0


def _subagents_of(session: LoadedSession, at_turn: int) -> list[LoadedSession]:
    """The subagent sessions run by exchanges 1..``at_turn``: named by one of their tool
    parts, or (AgentUse's own, which no part names) created before exchange
    ``at_turn + 1``."""
    called = _called_in(session.messages)
    cut = _created(session.messages[at_turn].info) if at_turn < len(session.messages) else None
    return [sub for sub in session.subagents
            if (called[sub.id] < at_turn if sub.id in called
                else cut is None or _created(sub.info) < cut)]


def _renamed(document: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """``document`` with its ids and references to them new (a subagent call's
    ``state.metadata.sessionID`` and ``path`` too); nothing else changes."""
    renamed = {key: ids.get(value, value) if key in _ID_KEYS and isinstance(value, str)
               else value for key, value in document.items()}
    state = renamed.get("state")
    metadata = state.get("metadata") if isinstance(state, dict) else None
    old = metadata.get("sessionID") if isinstance(metadata, dict) else None
    if isinstance(state, dict) and isinstance(metadata, dict) and isinstance(old, str) \
            and old in ids:
        metadata = {**metadata, "sessionID": ids[old]}
        if isinstance(metadata.get("path"), str):
            metadata["path"] = metadata["path"].replace(old, ids[old])
        renamed["state"] = {**state, "metadata": metadata}
    return renamed


def _exchange_error(message: LoadedMessage, failure: dict[str, Any]) -> dict[str, Any]:
    """The session error of a session whose last exchange failed, as the recorder wrote it
    then (``{code, message, [statusCode], [detail], time}``): from the exchange's last
    ``error`` part (its ``detail`` only for an HTTP error: otherwise it is the exception's
    text, which the session error does not carry), else from the exchange's own error."""
    parts = [part for part in message.parts if part.get("type") == "error"]
    if not parts:
        return drop_none(code="EXECUTION_ERROR", message=failure.get("message"),
                         time=_created(message.info))
    part = parts[-1]
    times = part.get("time")
    at = times.get("start") if isinstance(times, dict) else None
    status = part.get("statusCode")
    return drop_none(code=part.get("code") or "EXECUTION_ERROR", message=part.get("message"),
                     statusCode=status, detail=part.get("detail") if status else None,
                     time=at if at is not None else _created(message.info))


def _outcome(last: LoadedMessage) -> dict[str, Any] | None:
    """The ``status`` and ``error`` of a session whose last exchange is ``last``:
    completed, or failed; None for an exchange that had not ended."""
    times = last.info.get("time")
    if isinstance(times, dict) and times.get("completed") is not None:
        return {"status": "completed"}
    assistant = last.info.get("assistant")
    failure = assistant.get("error") if isinstance(assistant, dict) else None
    if not isinstance(failure, dict):
        return None
    return {"status": "error", "error": _exchange_error(last, failure)}


def _made_now(info: dict[str, Any], session_id: str) -> dict[str, Any]:
    """``info`` of a forked session created and updated when its new id was made (AgentUse
    dates a session when it creates it, src/session/manager.ts:355-368, and lists by that
    date): a fork is created when it is made, not when the original was."""
    made = ulid_ms(session_id)
    times = info.get("time")
    return {**info, "time": {**(times if isinstance(times, dict) else {}),
                             "created": made, "updated": made}}


def _forked_info(session: LoadedSession, last: LoadedMessage, ids: dict[str, str],
                 conversation: dict[str, Any]) -> dict[str, Any]:
    """session.json of the fork: the original's, renamed, created now, with the outcome
    of its last exchange (one that had not ended keeps the original's status, error and
    recorder), ``conversation`` and ``forkedFrom``."""
    info = _made_now(_renamed(session.info, ids), ids[session.directory.name[:26]])
    outcome = _outcome(last)
    if outcome is not None:
        info.pop("recorder", None)
        info.pop("error", None)
        info["status"] = outcome["status"]
        if "error" in outcome:
            info["error"] = outcome["error"]
    info["conversation"] = conversation
    info["forkedFrom"] = {"sessionId": session.id,
                          "messageId": str(last.info.get("id", last.directory.name))}
    return info


def _write_json(path: Path, document: dict[str, Any]) -> None:
    atomic_write(path, dumps_pretty(document))


def _write_session(session: LoadedSession, info: dict[str, Any], messages: list[LoadedMessage],
                   subagents: list[LoadedSession], directory: Path,
                   ids: dict[str, str]) -> None:
    """One session directory of the fork, its exchanges, parts and subagents (whole)."""
    make_private_dir(directory)
    _write_json(directory / "session.json", info)
    atomic_write(directory / "tools.json", dumps_compact({"tools": session.tools}))  # as ours
    for message in messages:
        message_dir = make_private_dir(directory / ids[message.directory.name] / "part").parent
        _write_json(message_dir / "message.json", _renamed(message.info, ids))
        for part in message.parts:
            part_id = part.get("id")
            name = ids[part_id] if isinstance(part_id, str) else new_ulid()
            _write_json(message_dir / "part" / f"{name}.json", _renamed(part, ids))
    for sub in subagents:
        agent = sub.directory.name[27:]
        sub_id = ids[sub.directory.name[:26]]
        _write_session(sub, _made_now(_renamed(sub.info, ids), sub_id), sub.messages,
                       sub.subagents, directory / SUBAGENT_DIR / f"{sub_id}-{agent}", ids)


def _write_tree(session: LoadedSession, at_turn: int, conversation: dict[str, Any]) -> Path:
    """The fork's session directory beside the original's, built under a hidden name and
    renamed into place whole."""
    messages = session.messages[:at_turn]
    subagents = _subagents_of(session, at_turn)
    kept = LoadedSession(session.directory, session.info, session.tools, messages, subagents)
    ids = _new_ids(_tree_ids(kept))
    name = f"{ids[session.directory.name[:26]]}-{session.directory.name[27:]}"
    staging = safe_join(session.directory.parent, f".{name}.fork")
    final = safe_join(session.directory.parent, name)
    try:
        _write_session(session, _forked_info(session, messages[-1], ids, conversation),
                       messages, subagents, staging, ids)
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _read_tree(directory: Path) -> LoadedSession:
    if split_session_dir_name(directory.name) is None:
        raise ForkError(f"{directory}: not an AgentUse session directory (<ULID>-<agent>)")
    try:
        return load_session(directory)
    except CorruptFileError as exc:
        raise ForkError(f"cannot read the AgentUse tree: {exc}") from None


# -- the fork ----------------------------------------------------------------------------


def _check_new_name(new_name: str) -> None:
    if not new_name:
        raise ForkError("the new session name is empty")
    try:
        new_name.encode("utf-8")
    except UnicodeEncodeError:
        raise ForkError(f"the new session name {new_name!r} is not valid UTF-8 text") from None


def _check_turns(counts: dict[str, int], session_name: str, at_turn: int) -> int:
    """The number of turns the layouts agree on; ForkError when none has the conversation
    or they disagree, TurnRangeError when ``at_turn`` is not one of them."""
    if not counts:
        raise ForkError(f"{session_name!r} has no stored rows, replay log or AgentUse tree "
                        "to fork")
    if len(set(counts.values())) > 1:
        found = ", ".join(f"{layout} {count}" for layout, count in counts.items())
        raise ForkError(f"the layouts of {session_name!r} disagree on its turns ({found}); "
                        "not forking")
    turns = next(iter(counts.values()))
    if not 1 <= at_turn <= turns:
        raise TurnRangeError(f"turn {at_turn} is out of range: {session_name!r} has "
                             f"{turns} turn{'s' if turns != 1 else ''} (1..{turns})")
    return turns


def _check_new_pair(store_file: Path, logs_root: Path, user_id: str, new_name: str) -> None:
    table = _store_has(store_file, user_id, new_name)
    log = find_log_path(user_id, new_name, logs_root)
    if table is not None or log is not None:
        where = f"rows in {table}" if table is not None else f"a replay log, {log}"
        raise NameTakenError(f"{new_name!r} of {user_id!r} already exists ({where}); "
                             "choose another name")


class _Made:
    """What a fork has written so far, removed again if it fails half-way."""

    def __init__(self) -> None:
        self.files: list[Path] = []
        self.trees: list[Path] = []
        self.dirs: list[Path] = []  # removed if empty

    def undo(self) -> None:
        for tree in self.trees:
            shutil.rmtree(tree, ignore_errors=True)
        for path in self.files:
            with suppress(FileNotFoundError):
                path.unlink()
        for directory in self.dirs:
            with suppress(OSError):
                directory.rmdir()


def _claim_log(user_id: str, new_name: str, logs_root: Path, made: _Made) -> Path:
    """The new pair's log path (claimed: its owner record is written), noting what the
    claim created."""
    user_dir = safe_join(logs_root, sanitize_log_name(user_id))
    existed = user_dir.is_dir()
    owners = set(user_dir.glob(".*.owner.json")) if existed else set()
    path = log_path_for(user_id, new_name, logs_root)
    if owner_record_path(path) not in owners:
        made.files.append(owner_record_path(path))
    if not existed:
        made.dirs.append(user_dir)
    return path


def _turn_counts(history: _History | None, log: _Log | None,
                 tree: LoadedSession | None) -> dict[str, int]:
    """The number of turns of each layout the conversation has."""
    found = {STORE: history.turns if history else None, LOG: log.turns if log else None,
             AGENTUSE: len(tree.messages) if tree else None}
    return {layout: count for layout, count in found.items() if count is not None}


def _write_files(made: _Made, pair: tuple[str, str], at_turn: int, log: _Log | None,
                 tree: LoadedSession | None, logs_root: Path) -> tuple[Path | None, Path | None]:
    """The fork's log and AgentUse tree (which names the log), noted in ``made``."""
    user_id, new_name = pair
    new_log = _claim_log(user_id, new_name, logs_root, made) if log is not None else None
    new_dir = None
    if tree is not None:
        conversation = drop_none(user=user_id, name=new_name,
                                 log=str(new_log) if new_log else None)
        new_dir = _write_tree(tree, at_turn, conversation)
        made.trees.append(new_dir)
    if log is not None and new_log is not None:
        made.files.append(new_log)
        atomic_write(new_log, _renamed_log(log.head(at_turn), new_name, tree, new_dir))
    return new_log, new_dir


def _renamed_log(lines: bytes, new_name: str, tree: LoadedSession | None,
                 new_dir: Path | None) -> bytes:
    """The copied lines, each ``user_message`` naming the fork instead: its
    ``sessionName``, and, when it names the original's AgentUse session, the fork's
    (``sessionId``, ``sessionDir``), whose exchanges are its copies. Other lines are kept
    byte for byte."""
    renamed = []
    for line in lines.split(b"\n"):
        if b'"user_message"' in line and (b'"sessionName"' in line or b'"sessionId"' in line):
            with suppress(ValueError):
                entry = loads(line)
                if isinstance(entry, dict) and entry.get("kind") == "user_message":
                    if "sessionName" in entry:
                        entry["sessionName"] = new_name
                    if tree is not None and new_dir is not None \
                            and entry.get("sessionId") == tree.id:
                        entry["sessionId"] = new_dir.name[:26]
                        entry["sessionDir"] = str(new_dir)
                    line = dumps_compact(entry)
        renamed.append(line)
    return b"\n".join(renamed)


def fork_session(store_file: Path, user_id: str, session_name: str, new_name: str, *,
                 agentuse_dir: Path | None, log_path: Path | None, logs_root: Path,
                 at_turn: int) -> ForkResult:
    """Copy turns 1..``at_turn`` of ``(user_id, session_name)`` to ``(user_id, new_name)``.

    ``agentuse_dir`` and ``log_path`` are the conversation's tree and log (None: it has
    none); the new log goes under ``logs_root``, the new tree beside ``agentuse_dir``.
    The layouts that exist are forked; they must agree on the number of turns. Raises
    :class:`NameTakenError` (``new_name`` exists in any layout), :class:`TurnRangeError`
    or :class:`ForkError` (also for an item store that is damaged or cannot be written),
    having written nothing; a failure while writing removes what was written. The
    original is never changed.
    """
    _check_new_name(new_name)
    problem = writing_problem(store_file)
    if problem is not None:
        raise ForkError(f"item store {problem}; not forking")
    history = _read_history(store_file, user_id, session_name)
    log = _read_log(log_path) if log_path is not None else None
    tree = _read_tree(agentuse_dir) if agentuse_dir is not None else None
    counts = _turn_counts(history, log, tree)
    turns = _check_turns(counts, session_name, at_turn)
    _check_new_pair(store_file, logs_root, user_id, new_name)
    rows, from_archive = history.rows_of_turns(at_turn) if history else ([], False)
    made = _Made()
    try:
        new_log, new_dir = _write_files(made, (user_id, new_name), at_turn, log, tree,
                                        logs_root)
        if history is not None or new_dir is not None:
            _write_store(store_file, (user_id, new_name), rows, new_dir)
    except BaseException:
        made.undo()
        raise
    return ForkResult(user_id, new_name, session_name, at_turn, turns, len(rows),
                      from_archive, new_log, new_dir, tuple(counts),
                      tuple(layout for layout in (STORE, LOG, AGENTUSE) if layout not in counts))
