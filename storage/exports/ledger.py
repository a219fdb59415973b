"""Recorded conversations exported as an Agents Ledger: Mnemonic's four ``agent_*`` tables.

:func:`export_ledger` writes a new SQLite file with ``agent_sessions``, ``agent_messages``,
``agent_turns`` and ``agent_tool_calls``, with the ledger's own columns (docs/formats.md,
"Agents Ledger export", maps our layouts onto them), and two tables of ours:
``sessiontape_meta`` (its format) and ``sessiontape_conversations`` (the user and session
name of each top-level session).

Each conversation is read by :func:`sessiontape.storage.catalog.conversation.read_conversation`.
Rows keep the layouts' ids (session ULIDs, part and exchange ids, call ids); a row without
one, or whose id an earlier row of the export already took, gets a uuid5 of its file and
position, so exporting the same conversations again gives the same ids.

The file is written as a temporary file beside ``out`` (0600) and renamed into place, so
a failed export leaves nothing behind, and an existing file is only replaced with
``force``.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog.conversation import (
    LedgerConversation,
    Message,
    Session,
    response_of,
    task_text,
    without_empty,
)
from ..db import META_SCHEMA
from ..json_style import dumps_compact
from .output import written_beside
from .summary import ExportSummary, read_each

__all__ = ["LEDGER_FORMAT", "LedgerSummary", "export_ledger"]

LEDGER_FORMAT = "sessiontape-ledger/1"

_SCHEMA = f"""
CREATE TABLE agent_sessions (
  id TEXT PRIMARY KEY,
  source TEXT,
  model TEXT,
  project TEXT,
  created_at INTEGER,
  message_count INTEGER,
  parent_session_id TEXT,
  parent_message_id TEXT,
  tool_call_id TEXT,
  task_description TEXT,
  task_status TEXT,
  is_subagent INTEGER,
  context_token_limit INTEGER,
  context_tokens_used INTEGER,
  is_agentic INTEGER,
  force_mode TEXT,
  workspace_path TEXT);
CREATE TABLE agent_messages (
  id TEXT PRIMARY KEY,
  session_id TEXT REFERENCES agent_sessions (id),
  role TEXT,
  content TEXT,
  sequence INTEGER,
  timestamp INTEGER,
  checkpoint_id TEXT,
  is_agentic INTEGER,
  is_plan_execution INTEGER,
  context_json TEXT,
  cursor_rules_json TEXT,
  metadata_json TEXT);
CREATE TABLE agent_turns (
  id TEXT PRIMARY KEY,
  session_id TEXT REFERENCES agent_sessions (id),
  parent_turn_id TEXT,
  query_message_ids TEXT,
  response_message_id TEXT,
  model TEXT,
  token_count INTEGER,
  timestamp INTEGER,
  has_children INTEGER,
  tool_call_count INTEGER);
CREATE TABLE agent_tool_calls (
  id TEXT PRIMARY KEY,
  message_id TEXT REFERENCES agent_messages (id),
  session_id TEXT REFERENCES agent_sessions (id),
  tool_name TEXT,
  tool_number INTEGER,
  params_json TEXT,
  result_json TEXT,
  status TEXT,
  child_session_id TEXT,
  started_at INTEGER,
  completed_at INTEGER);
CREATE INDEX idx_agent_sessions_parent ON agent_sessions (parent_session_id);
CREATE INDEX idx_agent_messages_session ON agent_messages (session_id, sequence);
CREATE INDEX idx_agent_turns_session ON agent_turns (session_id);
CREATE INDEX idx_agent_tool_calls_session ON agent_tool_calls (session_id);
{META_SCHEMA};
CREATE TABLE sessiontape_conversations (
  session_id TEXT PRIMARY KEY REFERENCES agent_sessions (id),
  user_id TEXT,
  session_name TEXT NOT NULL,
  agentuse_dir TEXT,
  log_path TEXT,
  read_from TEXT NOT NULL);
"""

_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://sessiontape.invalid/agents-ledger")

@dataclass
class LedgerSummary(ExportSummary):
    """What :func:`export_ledger` wrote (row counts) and what it could not read."""

    FORMAT = LEDGER_FORMAT
    sessions: int = 0
    subagents: int = 0
    messages: int = 0
    turns: int = 0
    tool_calls: int = 0

    def counts(self) -> dict[str, int]:
        return {"sessions": self.sessions, "subagents": self.subagents,
                "messages": self.messages, "turns": self.turns, "tool_calls": self.tool_calls}


# -- writing ----------------------------------------------------------------------------

def _project(workspace: str | None) -> str | None:
    """The project's name: the last folder of its root."""
    return (os.path.basename(workspace.rstrip("/")) or workspace) if workspace else None

class _Ids:
    """Row ids, unique per table: the layout's id when no earlier row took it, else a
    uuid5 of the row's seed (its file and position). The ids given are kept in a temporary
    table of ``conn`` (SQLite's temporary database, a file: its pages cached as any
    other's), not in memory: an export's memory does not grow with the rows it writes."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        conn.execute("CREATE TEMP TABLE sessiontape_ids (tbl TEXT NOT NULL, id TEXT NOT NULL, "
                     "PRIMARY KEY (tbl, id)) WITHOUT ROWID")

    def _take(self, table: str, value: str) -> bool:
        """Mark ``value`` given in ``table``; whether it was free."""
        return self._conn.execute("INSERT OR IGNORE INTO temp.sessiontape_ids VALUES (?, ?)",
                                  (table, value)).rowcount == 1

    def claim(self, table: str, preferred: str | None, seed: str) -> str:
        if preferred and self._take(table, preferred):
            return preferred
        value = str(uuid.uuid5(_NAMESPACE, f"{table}\0{seed}"))
        self._take(table, value)
        return value


def _assign_ids(session: Session, ids: _Ids) -> None:
    """Ids for the session, its rows and (after them) its subagents: a log's subagent
    run is ``task-<call id>``, as the ledger names a subagent without an id of its own."""
    spawn_call = session.spawn.call if session.spawn is not None else None
    preferred = session.preferred or (f"task-{spawn_call.id}" if spawn_call else None)
    session.id = ids.claim("agent_sessions", preferred, session.seed)
    sequence = 0
    for number, exchange in enumerate(session.exchanges):
        exchange.id = ids.claim("agent_turns", exchange.preferred, f"{session.seed}#{number}")
        for message in exchange.messages:
            seed = f"{session.seed}#{number}.{sequence}"
            message.id = ids.claim("agent_messages", message.preferred, seed)
            if message.call is not None:
                message.call.id = ids.claim("agent_tool_calls", message.call.call_id, seed)
            sequence += 1
    for sub in session.subagents:
        _assign_ids(sub, ids)

def _session_row(session: Session) -> tuple[Any, ...]:
    spawn = session.spawn
    call = spawn.call if spawn is not None else None
    return (session.id, session.source, session.model, _project(session.workspace),
            session.created_at, sum(len(e.messages) for e in session.exchanges),
            session.parent.id if session.parent else None, spawn.id if spawn else None,
            call.id if call else None, task_text(call.params) if call else None,
            session.task_status if session.parent else None, int(session.parent is not None),
            session.context_limit, session.context_used, int(session.agentic), None,
            session.workspace)


def _metadata(message: Message, usage: dict[str, Any] | None) -> str:
    """The row's metadata, with its call's ``toolFormerData`` and the ``tokenCount`` of its
    exchange (given for the exchange's response only)."""
    metadata = dict(message.metadata)
    call = message.call
    if call is not None:
        metadata["toolFormerData"] = without_empty({
            "name": call.name, "callId": call.call_id, "status": call.status,
            "params": call.params, "result": call.result, "error": call.error})
    if usage is not None:
        metadata["tokenCount"] = usage
    return dumps_compact(metadata).decode()


def _message_rows(session: Session) -> Iterator[tuple[Any, ...]]:
    sequence = 0
    for exchange in session.exchanges:
        response = response_of(exchange)
        for message in exchange.messages:
            usage = exchange.usage if message is response else None
            yield (message.id, session.id, message.role, message.content, sequence,
                   message.timestamp, None, int(session.agentic), 0, None, None,
                   _metadata(message, usage))
            sequence += 1


def _turn_rows(session: Session) -> Iterator[tuple[Any, ...]]:
    last = len(session.exchanges) - 1
    for number, exchange in enumerate(session.exchanges):
        response = response_of(exchange)
        usage = exchange.usage
        times = [m.timestamp for m in exchange.messages if m.timestamp is not None]
        yield (exchange.id, session.id,
               session.exchanges[number - 1].id if number else None,
               dumps_compact([m.id for m in exchange.messages if m.role == "user"]).decode(),
               response.id if response else None, exchange.model,
               usage["inputTokens"] + usage["outputTokens"] if usage else None,
               exchange.completed or max(times, default=None), int(number < last),
               sum(m.call is not None for m in exchange.messages))


def _tool_call_rows(session: Session) -> Iterator[tuple[Any, ...]]:
    for exchange in session.exchanges:
        calls = [m for m in exchange.messages if m.call is not None]
        for number, message in enumerate(calls):
            call = message.call
            assert call is not None
            yield (call.id, message.id, session.id, call.name, number, call.params, call.result,
                   call.status, call.child.id if call.child else None, call.started,
                   call.completed)


def _rows(conn: sqlite3.Connection, table: str, width: int,
          rows: Iterator[tuple[Any, ...]]) -> int:
    """Insert ``rows`` of ``width`` columns into ``table``; how many."""
    return conn.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * width)})",
                            rows).rowcount


def _insert(conn: sqlite3.Connection, session: Session, summary: LedgerSummary) -> None:
    """The rows of ``session`` and of its subagents."""
    _rows(conn, "agent_sessions", 17, iter([_session_row(session)]))
    summary.messages += _rows(conn, "agent_messages", 12, _message_rows(session))
    summary.turns += _rows(conn, "agent_turns", 10, _turn_rows(session))
    summary.tool_calls += _rows(conn, "agent_tool_calls", 11, _tool_call_rows(session))
    summary.sessions += 1
    summary.subagents += session.parent is not None
    for sub in session.subagents:
        _insert(conn, sub, summary)

def _write(conn: sqlite3.Connection, conversations: Iterable[LedgerConversation],
           summary: LedgerSummary, strict: bool) -> None:
    conn.execute("INSERT INTO sessiontape_meta VALUES ('format', ?)", (LEDGER_FORMAT,))
    ids = _Ids(conn)
    for conversation, session, read_from in read_each(conversations, summary, strict):
        _assign_ids(session, ids)
        _insert(conn, session, summary)
        conn.execute("INSERT INTO sessiontape_conversations VALUES (?,?,?,?,?,?)", (
            session.id, conversation.user_id, conversation.session_name,
            str(conversation.agentuse_dir) if read_from == "agentuse" else None,
            str(conversation.log_path) if conversation.log_path else None, read_from))


def export_ledger(out: Path, conversations: Iterable[LedgerConversation], *,
                  force: bool = False, strict: bool = False) -> LedgerSummary:
    """Write ``conversations`` as a new Agents Ledger SQLite file at ``out`` (mode 0600).

    Raises FileExistsError if ``out`` exists, unless ``force``. A conversation with nothing
    to read (no tree and no log, or neither readable) is listed in the summary's
    ``skipped``, or with ``strict`` raises :class:`LedgerSourceError`. On any error nothing
    is left at ``out`` (nor beside it) and an existing file is unchanged. When two
    conversations share a layout id, the first given keeps it.
    """
    out = Path(out)
    summary = LedgerSummary(out)
    with written_beside(out, force=force) as tmp, \
            closing(sqlite3.connect(tmp, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = OFF")  # a failure discards the whole file
        conn.executescript(_SCHEMA)
        conn.execute("BEGIN")
        _write(conn, conversations, summary, strict)
        conn.execute("COMMIT")
    return summary
