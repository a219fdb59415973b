"""Compaction: the item store stays bounded, and nothing is lost.

:class:`CompactingSession` wraps an
:class:`~sessiontape.storage.skillet.item_store.ItemStoreSession`.
When :meth:`~CompactingSession.compact` is called (by the recorder at the
end of every run; by the SDK's runner after each saved step for an
:class:`AutoCompactingSession`), if more than ``threshold`` *candidates* are stored (items other
than user messages, ``compaction`` items and our summaries), the older part of
the history is replaced by what a :class:`~sessiontape.storage.skillet.summarizers.Summarizer`
makes of it, and the most recent items are kept verbatim:

* a ``function_call`` is never split from its output, nor a reasoning item from
  the item after it, and the kept part starts at a turn where it can;
* the latest user message is always kept;
* at most ``keep`` candidates stay (default: half the threshold), so that the
  history re-sent at the start of a run never exceeds the threshold.

The replaced rows move, in the same SQLite transaction, to
``session_items_archive`` (tagged with the compaction's id), and the
compaction is recorded in ``sessiontape_compactions``: a crash leaves the old
history or the new one, and archive + live rows are every item ever added.
``session_items`` keeps its exact schema. The JSONL log is never rewritten.

Rows are read as the Python SDK's items (protocol rows converted, see
storage/skillet/items.py) and the summary is written as a protocol item, its text once
(:func:`~sessiontape.storage.skillet.items.text_once`); the archived and kept rows are moved
or left byte for byte. A row that is not an item (not JSON, not an object) is never
part of a compaction: it stays where it is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.items import TResponseInputItem
from agents.memory import SessionABC
from agents.memory.session import OpenAIResponsesCompactionArgs

from ..ids import new_ulid
from ..tables import ARCHIVE_TABLE, COMPACTIONS_TABLE, CompactionInfo
from .archive import archived_rows
from .item_store import ItemStoreSession, decode_rows, item_json
from .items import call_id_of, text_once, to_protocol_items
from .summarizers import DeterministicSummarizer, Summarizer, is_summary

__all__ = [
    "ARCHIVE_TABLE",
    "COMPACTIONS_TABLE",
    "AutoCompactingSession",
    "CompactingSession",
    "CompactionInfo",
    "CompactionPlan",
    "archived_items",
    "decode_archived",
    "estimate_tokens",
    "is_candidate",
    "plan_compaction",
]

DEFAULT_THRESHOLD = 40
# Every tool-call item type whose output must follow it in the input (the SDK's own
# call-to-output map): an output without its call is refused by the Responses API. The
# JS SDK's names of the outputs are there too, so that either shape is planned alike.
_CALL_OF_OUTPUT = {
    "function_call_output": "function_call",
    "function_call_result": "function_call",
    "computer_call_result": "computer_call",
    "custom_tool_call_output": "custom_tool_call",
    "computer_call_output": "computer_call",
    "local_shell_call_output": "local_shell_call",
    "shell_call_output": "shell_call",
    "apply_patch_call_output": "apply_patch_call",
    "tool_search_output": "tool_search_call",
}


def _role(item: Any) -> Any:
    return item.get("role") if isinstance(item, dict) else None


def _type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else None


def is_user_message(item: Any) -> bool:
    return _role(item) == "user" and _type(item) in (None, "message")


def is_candidate(item: Any) -> bool:
    """Whether an item counts toward the threshold (not a user message, compaction or summary)."""
    return not (is_user_message(item) or _type(item) == "compaction" or is_summary(item))


def estimate_tokens(items: Sequence[Any]) -> int:
    """A cheap estimate: four characters of JSON per token."""
    return sum(len(item_json(item)) for item in items) // 4


@dataclass(frozen=True)
class CompactionPlan:
    """Which items (by index) are summarized, and which stay as they are."""

    older: list[int]
    kept: list[int]


def plan_compaction(items: Sequence[Any], keep: int) -> CompactionPlan:
    """Split ``items`` into an older part to summarize and a recent part to keep.

    The recent part holds at most ``keep`` candidates (more only where a
    tool call and its output, or a reasoning item and what follows it, must
    stay together), and the latest user message is always kept.
    """
    boundary = len(items)
    candidates = 0
    for index in range(len(items) - 1, -1, -1):
        if is_candidate(items[index]):
            if candidates == keep:
                break
            candidates += 1
        boundary = index
    call_types = set(_CALL_OF_OUTPUT.values())
    call_index = {(_type(item), call_id_of(item)): i for i, item in enumerate(items)
                  if _type(item) in call_types}
    moved = True
    while moved:  # pull in what the kept part depends on
        moved = False
        for item in items[boundary:]:
            if _type(item) in _CALL_OF_OUTPUT:
                origin = call_index.get((_CALL_OF_OUTPUT[_type(item)], call_id_of(item)))
                if origin is not None and origin < boundary:
                    boundary, moved = origin, True
        if 0 < boundary < len(items) and _type(items[boundary - 1]) == "reasoning":
            boundary, moved = boundary - 1, True
    users = [i for i, item in enumerate(items) if is_user_message(item)]
    # Start the kept part at a turn (a user message) where one follows, so the summary
    # is followed by whole turns.
    boundary = next((i for i in users if i >= boundary), boundary)
    latest_user = users[-1] if users else None
    older = [i for i in range(boundary) if i != latest_user]
    if not any(is_candidate(items[i]) for i in older):
        # Only summaries, compaction items or user messages: summarizing them again
        # would gain nothing and nest the summary in itself at every call.
        return CompactionPlan([], list(range(len(items))))
    kept = ([latest_user] if latest_user is not None and latest_user < boundary else []) + \
        list(range(boundary, len(items)))
    return CompactionPlan(older, kept)


def decode_archived(rows: list[tuple[int, str, str]],
                    where: str) -> list[tuple[str, TResponseInputItem]]:
    """Archived rows as ``(compaction id, Python SDK item)`` (see :func:`archived_items`)."""
    compactions = {row_id: cid for row_id, cid, _ in rows}
    items = decode_rows([(row_id, text) for row_id, _, text in rows], where)
    return [(compactions[row_id], item) for row_id, item in items]


async def archived_items(store_path: Path, user_id: str,
                         session_name: str) -> list[tuple[str, TResponseInputItem]]:
    """Every archived item of a pair, in order, with the id of the compaction that archived it.

    Reads only (a store that was never compacted has no archive: ``[]``). Items are
    the Python SDK's (protocol rows converted); a row that is not an item is skipped
    and reported, as by :meth:`ItemStoreSession.get_items`. To rebuild the whole
    history in the order it was added, merge these with the live rows by their
    original row id.
    """
    rows = await asyncio.to_thread(archived_rows, store_path, user_id, session_name)
    return decode_archived(rows, f"{store_path} ({ARCHIVE_TABLE})")


class CompactingSession(SessionABC):
    """An SDK ``Session`` over the item store that compacts when :meth:`compact` is
    called (see the module doc); the recorder calls it at the end of every run.

    ``threshold=None`` turns threshold compaction off; ``compact(force=True)``
    still compacts on demand. ``on_compaction`` is called with a
    :class:`CompactionInfo` after each compaction. It has no ``run_compaction``,
    so the SDK's runner does no compaction bookkeeping for it (see
    :class:`AutoCompactingSession`).
    """

    def __init__(self, inner: ItemStoreSession, *, threshold: int | None = DEFAULT_THRESHOLD,
                 keep: int | None = None, summarizer: Summarizer | None = None,
                 on_compaction: Callable[[CompactionInfo], None] | None = None) -> None:
        if threshold is not None and threshold < 1:
            raise ValueError("threshold must be at least 1 (or None to disable)")
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings = inner.session_settings
        self.threshold = threshold
        self.keep = keep if keep is not None else max(1, (threshold or DEFAULT_THRESHOLD) // 2)
        self.summarizer = summarizer or DeterministicSummarizer()
        self.on_compaction = on_compaction
        self._lock = asyncio.Lock()

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await self.inner.get_items(limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await self.inner.add_items(items)

    async def pop_item(self) -> TResponseInputItem | None:
        return await self.inner.pop_item()

    async def clear_session(self) -> None:
        await self.inner.clear_session()

    async def _rows(self) -> list[tuple[int, Any]]:
        """The live rows ``(id, Python SDK item)``; a row that is not an item stays where it
        is, out of every plan (it is never sent either)."""
        rows = await self.inner.store.pair_rows(self.inner.user_id, self.inner.session_name)
        return decode_rows(rows, self.session_id, self.inner.store.reported)

    async def candidates(self) -> int:
        """How many stored items count toward the threshold now."""
        return sum(is_candidate(item) for _, item in await self._rows())

    async def compact(self, *, force: bool = False) -> CompactionInfo | None:
        """Compact now if needed (or forced); return what was done, or None."""
        if self.threshold is None and not force:
            return None
        async with self._lock:
            rows = await self._rows()
            items = [item for _, item in rows]
            if not force and sum(map(is_candidate, items)) <= (self.threshold or 0):
                return None
            plan = plan_compaction(items, self.keep)
            if not plan.older:
                return None
            older = [items[i] for i in plan.older]
            replacement = await self.summarizer.summarize(older)
            after = replacement + [items[i] for i in plan.kept]
            info = CompactionInfo(
                id=new_ulid(), user_id=self.inner.user_id, session_name=self.inner.session_name,
                reason="manual" if force else "threshold", summarizer=self.summarizer.name,
                items_before=len(items), items_after=len(after),
                tokens_before=estimate_tokens(items), tokens_after=estimate_tokens(after),
                archived=len(older), at=time.time_ns() // 1_000_000)
            done = await self.inner.store.replace_rows(
                info, [rows[i][0] for i in plan.older],
                [item_json(text_once(row)) for row in to_protocol_items(replacement)],
                [row_id for row_id, _ in rows])
        if not done:
            return None
        if self.on_compaction is not None:
            self.on_compaction(info)
        return info


class AutoCompactingSession(CompactingSession):
    """A :class:`CompactingSession` the SDK's runner compacts by itself: it calls
    :meth:`run_compaction` after each saved step of a model response with an id.

    For a session used without the recorder. The price: the runner then
    digests the whole model input before every model call (its bookkeeping
    for compaction-aware sessions), quadratic in a run's length: 9% of a run
    of 600 sequential tool calls (docs/performance.md).
    """

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """Compact if over the threshold (or always with ``{"force": True}``)."""
        await self.compact(force=bool(args and args.get("force")))
