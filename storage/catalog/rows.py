"""Finding the conversations of the layouts and reading one into catalog rows.

The reading half of :mod:`sessiontape.storage.catalog.index`, imported only when a refresh has
something to list or read, so that a question answered from an up-to-date catalog does not
load the layouts' readers. :func:`discover` lists the conversations (``sessions list``'s
rules, docs/cli.md); :func:`read` reads one as the ledger export reads it
(:func:`sessiontape.storage.catalog.conversation.read_conversation`) into rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agentuse.reader import CorruptFileError, load_session
from ..json_style import dumps_compact, loads
from ..paths import Locations
from ..skillet.log_owners import owner_record_name
from .conversation import (
    Exchange,
    LedgerConversation,
    LedgerSourceError,
    Message,
    Session,
    read_conversation,
    response_of,
)
from .sessions import SessionInfo, StoreFact, fill_session, gather_sessions

__all__ = ["Found", "Reading", "Rows", "discover", "read"]


@dataclass(frozen=True)
class Found:
    """A conversation as :func:`sessiontape.storage.catalog.sessions.gather_sessions` finds it,
    before any of its files is read (``info`` is not filled)."""

    info: SessionInfo
    log_owned: bool  # its log has an owner record (the pair it names is the info's)

    @classmethod
    def of(cls, info: SessionInfo) -> Found:
        log = info.log_path
        return cls(info, log is not None and os.path.lexists(
            os.path.join(os.path.dirname(log), owner_record_name(log.name))))

    @classmethod
    def stored(cls, found: str, log_owned: int) -> Found:
        """The Found the catalog stored (:meth:`json`)."""
        return cls(SessionInfo.from_json(loads(found)), bool(log_owned))

    @property
    def key(self) -> str:
        """``[user, session name]`` as JSON; ``[null, directory]`` for a tree no pair
        links (exact, whatever the names hold)."""
        info = self.info
        pair = [info.user_id, info.session_name] if info.user_id is not None \
            else [None, str(info.agentuse_dir)]
        return dumps_compact(pair).decode()

    def fingerprint(self) -> str:
        """What the listing found, as text: another one means the conversation is read
        again (another tree, log or origin; the store's counts)."""
        info = self.info
        return repr((info.user_id, info.session_name, info.items, info.archived,
                     info.compactions, info.first_ms, info.last_ms, str(info.log_path),
                     str(info.agentuse_dir), info.sources, info.origin, self.log_owned))

    def json(self) -> str:
        return dumps_compact(self.info.to_json()).decode()


def discover(where: Locations, owners: dict[str, tuple[str, str]],
             facts: dict[tuple[str, str], StoreFact]) -> list[Found]:
    """Every conversation of the store, the logs and the AgentUse root, by the rules of
    ``sessions list`` (docs/cli.md); ``owners`` (the catalog's owned logs and their pairs)
    saves reading those owner records again, ``facts`` (the store's, read just before)
    reading the store again."""
    return [Found.of(info) for info in gather_sessions(None, where, owners, facts=facts)]


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
                                    "reasoning": "reasoning", "error": "error"}
    label = kinds.get(str(message.kind))
    content = message.content
    if label == "error":  # its code, status and detail are what people search for too
        content = " ".join(str(part) for part in (
            content, *(message.metadata.get(key) for key in ("code", "statusCode", "detail")))
            if part not in (None, ""))
    if label is not None and content:
        yield turn, label, agent, None, message.timestamp, content


def _exchange_times(exchange: Exchange) -> tuple[int | None, int | None]:
    times = [m.timestamp for m in exchange.messages if m.timestamp is not None]
    return min(times, default=None), exchange.completed or max(times, default=None)


_TOKEN_KEYS = ("inputTokens", "outputTokens", "cachedTokens", "reasoningTokens")


def _model_calls(exchange: Exchange, agent: str | None, turn: int) -> Iterator[tuple[Any, ...]]:
    """The exchange's model calls; one more for what its totals (``message.json``) hold
    beyond them: all of it in AgentUse's own trees, which list no calls, and the calls
    AgentUse added when it continued one of ours (``run --session-id`` carries on the
    session's first exchange, its tokens added to the totals, no call listed:
    src/runner/preparation.ts:115-143, src/runner/run.ts:103). So the catalog's usage is
    the totals ``sessions list`` and ``show`` sum."""
    calls = [(c.agent, c.model, c.tokens, c.cost, c.at) for c in exchange.model_calls]
    if exchange.usage is not None:
        rest = {key: (exchange.usage.get(key) or 0) - sum(int(c[2].get(key) or 0)
                                                          for c in calls)
                for key in _TOKEN_KEYS}
        cost = exchange.usage["cost"] - sum(c[3] for c in calls)
        if not calls or any(n > 0 for n in rest.values()) or cost > 1e-12:
            calls.append((agent, exchange.model, {k: max(n, 0) for k, n in rest.items()},
                          max(cost, 0.0), _exchange_times(exchange)[1]))
    for who, model, tokens, cost, at in calls:
        yield (turn, who or agent, model, *(int(tokens.get(key) or 0) for key in _TOKEN_KEYS),
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
    """What one conversation's files say: its session as ``sessions list`` shows it
    (``info``, filled), its (top) ledger session, its rows, and what those were read from
    (``agentuse``, ``log``; ``store`` when neither could be read)."""

    info: SessionInfo
    session: Session | None
    rows: Rows
    read_from: str
    problems: list[str]  # the listing's, then those the rows' reader met besides


def read(item: Found, store_file: Path) -> Reading:
    """Read one conversation: its listing (tree totals, log turns and times, and the
    stored turns of one with neither) and its rows (its tree when it has one, else its
    log)."""
    info = SessionInfo.from_json(item.info.to_json())
    tree = None  # loaded once for both readers; they say what keeps it from loading
    if info.agentuse_dir is not None and info.agentuse_dir.is_dir():
        with suppress(CorruptFileError, OSError):
            tree = load_session(info.agentuse_dir)
    info = fill_session(info, store_file=store_file, tree=tree)
    source = LedgerConversation(info.user_id, info.session_name, info.agentuse_dir,
                                info.log_path, info.origin)
    rows = Rows()
    problems: list[str] = []
    try:
        session, read_from = read_conversation(source, problems, tree)
    except LedgerSourceError as exc:
        if info.agentuse_dir or info.log_path:
            problems.append(str(exc))
        session, read_from = None, "store"
    if session is not None:
        session_rows(session, rows, None)
    return Reading(info, session, rows, read_from,
                   info.problems + [p for p in problems if p not in info.problems])
