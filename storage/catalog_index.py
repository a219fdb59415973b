"""Finding the conversations of the layouts and reading one into catalog rows.

The reading half of :mod:`sessiontape.storage.catalog`, imported only when a refresh has
something to list or read, so that a question answered from an up-to-date catalog does not
load the layouts' readers. :func:`discover` lists the conversations (``sessions list``'s
rules, docs/cli.md); :func:`read` reads one as the ledger export reads it
(:func:`sessiontape.storage.ledger.read_conversation`) into rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .agentuse_reader import (
    OUR_VERSION_PREFIX,
    SESSION_FILE,
    CorruptFileError,
    read_json_object,
    split_session_dir_name,
)
from .db import connect_readonly, tables
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
from .replay_log import find_log_path, log_owner, owner_record_name, owner_record_path
from .sessions import ORIGIN_AGENTUSE, ORIGIN_SESSIONTAPE, ORIGIN_SKILLED_CREW
from .tables import ARCHIVE_TABLE, COMPACTIONS_TABLE

if TYPE_CHECKING:
    from .catalog import Roots

__all__ = ["Found", "Reading", "Rows", "discover", "read"]


@dataclass(frozen=True)
class Found:
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


def _store_pairs(store_file: Path) -> tuple[dict[tuple[str, str], tuple[int, int, int]],
                                            set[tuple[str, str]]]:
    """Items, first and last ``created_at`` of each pair, and the pairs with compaction
    records (sessiontape's)."""
    conn = connect_readonly(store_file) if store_file.is_file() else None
    if conn is None:
        return {}, set()
    with closing(conn):
        names = tables(conn)
        pairs = {} if "session_items" not in names else {
            (user, name): (count, first, last) for user, name, count, first, last in
            conn.execute("SELECT user_id, session_name, COUNT(*), MIN(created_at), "
                         "MAX(created_at) FROM session_items GROUP BY user_id, session_name")}
        compacted = {(user, name) for table in (ARCHIVE_TABLE, COMPACTIONS_TABLE)
                     if table in names for user, name in conn.execute(
                         f"SELECT DISTINCT user_id, session_name FROM {table}")}
    return pairs, compacted


@dataclass(frozen=True)
class _Log:
    """A replay log found in a user directory, with the pair it belongs to."""

    user: str
    name: str
    path: str
    owned: bool  # it has an owner record (sessiontape's); else the names are its file's


def _owner_pair(log_path: str) -> tuple[str, str] | None:
    owner = log_owner(Path(log_path)) or {}
    user, name = owner.get("user_id"), owner.get("session_name")
    return (user, name) if isinstance(user, str) and isinstance(name, str) else None


def _logs(logs_root: Path, known: dict[str, tuple[str, str]]) -> list[_Log]:
    """Every log of every user directory with its pair: its owner record's (``known``
    holds those already read, by log path), else its directory's and file's names."""
    try:
        users = sorted((e for e in os.scandir(logs_root)
                        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)),
                       key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for user_dir in users:
        try:
            names = {entry.name for entry in os.scandir(user_dir.path)}
        except OSError:
            continue
        for file in sorted(n for n in names if n.endswith(".jsonl") and not n.startswith(".")):
            path = os.path.join(user_dir.path, file)
            owned = owner_record_name(file) in names
            pair = (known.get(path) or _owner_pair(path)) if owned else None
            found.append(_Log(*(pair or (user_dir.name, file.removesuffix(".jsonl"))), path,
                              owned))
    return found


def _tree_sessions(root: Path, known: set[str]) -> Iterator[tuple[str, str]]:
    """``(ULID, directory)`` of each top-level session of ``root`` with a ``session.json``
    (not looked for again in the ``known`` directories)."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        split = split_session_dir_name(entry.name)
        if split and entry.is_dir(follow_symlinks=False) and (
                entry.path in known or os.path.lexists(os.path.join(entry.path, SESSION_FILE))):
            yield split[0], entry.path


def _tree_origin(directory: str) -> str:
    try:
        version = read_json_object(Path(directory) / SESSION_FILE).get("version", "")
    except CorruptFileError:
        return ORIGIN_AGENTUSE
    return ORIGIN_SESSIONTAPE if str(version).startswith(OUR_VERSION_PREFIX) \
        else ORIGIN_AGENTUSE


def discover(where: Roots, known: dict[str, Found]) -> list[Found]:
    """Every conversation of the store, the logs and the AgentUse roots (the rules of
    ``sessions list``: docs/cli.md). ``known`` (the catalog's conversations, by key) saves
    reading again what cannot have changed: a log's owner record, a tree's origin."""
    pairs, compacted = _store_pairs(where.store_file)
    links = {(user, name): str(directory)
             for user, name, directory in read_links(where.store_file)}
    listed = _logs(where.logs_root, {item.log_path: (item.user, item.name)
                                     for item in known.values()
                                     if item.log_path is not None and item.user is not None})
    by_path = {log.path: log for log in listed}
    owned = {(log.user, log.name): log for log in listed if log.owned}
    logs: dict[tuple[str, str], _Log | None] = {}
    for pair in sorted({*pairs, *links}):
        logs[pair] = owned.get(pair)
        if logs[pair] is None:
            path = find_log_path(*pair, where.logs_root)
            logs[pair] = None if path is None else by_path.get(str(path)) or \
                _Log(*pair, str(path), os.path.lexists(owner_record_path(path)))
    taken = {log.path for log in logs.values() if log is not None}
    for other in listed:
        if other.path not in taken and (other.user, other.name) not in logs:
            logs[(other.user, other.name)] = other
    tree_dirs = {item.agentuse_dir for item in known.values() if item.agentuse_dir}
    trees = {ulid: d for root in where.agentuse_roots for ulid, d in _tree_sessions(root,
                                                                                   tree_dirs)}
    found = []
    for (user, name), log in logs.items():
        directory = links.get((user, name))
        if directory is not None:
            ulid = (split_session_dir_name(os.path.basename(directory)) or ("",))[0]
            if trees.get(ulid) != directory and not os.path.isdir(directory):
                directory = trees.get(ulid, directory)
            trees.pop(ulid, None)
        mine = directory is not None or (user, name) in compacted or \
            (log is not None and log.owned)
        items, first, last = pairs.get((user, name), (0, None, None))
        found.append(Found(f"{user}\0{name}", user, name, directory,
                            log.path if log is not None else None,
                            ORIGIN_SESSIONTAPE if mine else ORIGIN_SKILLED_CREW,
                            items, first, last))
    for directory in trees.values():
        key = f"\0{directory}"
        origin = known[key].origin if key in known else _tree_origin(directory)
        found.append(Found(key, None, os.path.basename(directory), directory, None, origin))
    return found


# -- reading one conversation into rows -----------------------------------------------------


@dataclass
class Rows:
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


def session_rows(session: Session, rows: Rows, turn: int | None) -> None:
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
        session_rows(child, rows, child_turn)




@dataclass
class Reading:
    """What one conversation's files say: its (top) session, its rows, what it was read
    from (``agentuse``, ``log``; ``store`` when neither could be read) and the problems
    read around."""

    session: Session | None
    rows: Rows
    read_from: str
    problems: list[str]


def read(item: Found) -> Reading:
    """Read one conversation into rows (its tree when it has one, else its log)."""
    problems: list[str] = []
    source = LedgerConversation(item.user, item.name,
                                Path(item.agentuse_dir) if item.agentuse_dir else None,
                                Path(item.log_path) if item.log_path else None, item.origin)
    rows = Rows()
    try:
        session, read_from = read_conversation(source, problems)
    except LedgerSourceError as exc:
        if item.agentuse_dir or item.log_path:
            problems.append(str(exc))
        return Reading(None, rows, "store", problems)
    session_rows(session, rows, None)
    return Reading(session, rows, read_from, problems)
