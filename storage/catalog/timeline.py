"""A conversation's turns, when both its replay log and its AgentUse tree hold some of them.

The log is the conversation's list of turns: sessiontape and skilled_crew both append every
turn they run to it. The tree adds detail (parts, tokens, subagents) to the turns sessiontape
recorded (and AgentUse, continuing the session with ``--session-id``, adds its own to the
session's first exchange), and may hold an exchange no log turn names (a turn whose log
lines were lost). :func:`align` pairs them by one rule, used by every reader (``sessions
list`` and ``show``, the catalog's search and usage, the exports):

* a log turn is paired only with an exchange it names: its ``user_message`` carries the
  tree's session id (``sessionId``, which sessiontape writes since format 1); a turn that
  names no session (skilled_crew's) has no exchange. A log with no ``sessionId`` at all
  (sessiontape before format 1) lets every turn be paired;
* among the exchanges after the last one paired, a turn takes the first with the same
  prompt, else (a prompt the two layouts spell differently: input items, redaction) the
  first created within :data:`NEAR_MS` of the turn's start;
* an exchange no turn takes is a turn of its own, placed by its creation time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NEAR_MS", "ExchangeKey", "TurnKey", "align"]

NEAR_MS = 60_000


@dataclass(frozen=True)
class TurnKey:
    """What :func:`align` reads of a log turn: the session it names, its prompt, its start."""

    session_id: str | None
    prompt: str
    at: int | None


@dataclass(frozen=True)
class ExchangeKey:
    """What :func:`align` reads of a tree exchange: its prompt and its creation time."""

    prompt: str
    at: int | None


def _near(turn: TurnKey, exchange: ExchangeKey) -> bool:
    return turn.at is not None and exchange.at is not None \
        and abs(exchange.at - turn.at) <= NEAR_MS


def align(turns: Sequence[TurnKey], exchanges: Sequence[ExchangeKey], tree_id: str | None
          ) -> list[tuple[int | None, int | None]]:
    """The conversation's turns in order, as ``(log turn index, exchange index)`` pairs
    (either may be None): every log turn once, in log order, with the exchange it names
    (module docstring), and every other exchange placed by its creation time."""
    legacy = not any(turn.session_id for turn in turns)
    paired: list[int | None] = []
    start = 0
    for turn in turns:
        found = None
        if exchanges and (legacy or (tree_id is not None and turn.session_id == tree_id)):
            rest = range(start, len(exchanges))
            found = next((j for j in rest if exchanges[j].prompt == turn.prompt), None)
            if found is None:
                found = next((j for j in rest if _near(turn, exchanges[j])), None)
        if found is not None:
            start = found + 1
        paired.append(found)
    slots: list[tuple[int | None, int | None]] = list(enumerate(paired))
    taken = {j for j in paired if j is not None}
    for j, exchange in enumerate(exchanges):
        if j in taken:
            continue
        slots.insert(_place(slots, j, exchange, turns, exchanges), (None, j))
    return slots


def _place(slots: list[tuple[int | None, int | None]], j: int, exchange: ExchangeKey,
           turns: Sequence[TurnKey], exchanges: Sequence[ExchangeKey]) -> int:
    """Where an exchange no turn took goes: after the last slot that began before it (and
    after any earlier exchange of the tree)."""
    at = exchange.at if exchange.at is not None else 0
    place = 0
    for index, (t, e) in enumerate(slots):
        began = exchanges[e].at if e is not None else turns[t].at if t is not None else None
        if (e is not None and e < j) or (began is not None and began <= at):
            place = index + 1
    return place
