"""Which listed conversations ``sessions list`` keeps: ``--since``, ``--status``, ``--limit``.

A listing (:meth:`~sessiontape.storage.catalog.index.Catalog.listed`, newest first) narrowed the
same way whether the catalog or the files answered it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from .index import Listed

__all__ = ["STATUSES", "selected"]

# What a conversation's status may be (its session.json's, ``crashed`` for a recording whose
# process died; none without an AgentUse tree), and ``failed``, which means ``error``.
STATUSES = ("running", "completed", "error", "failed", "crashed", "suspended")
_MEANS = {"failed": "error"}


def selected(listed: Iterable[Listed], *, since: datetime | None = None,
             statuses: Collection[str] | None = None, limit: int | None = None
             ) -> list[Listed]:
    """The conversations of ``listed`` (in its order) last active at ``since`` or later,
    whose status is one of ``statuses`` (:data:`STATUSES`; ``failed`` is ``error``), at most
    the first ``limit``."""
    wanted = {_MEANS.get(status, status) for status in statuses} if statuses else None
    since_ms = int(since.timestamp() * 1000) if since is not None else None
    kept: list[Listed] = []
    for each in listed:
        if limit is not None and len(kept) >= limit:
            break
        if since_ms is not None or wanted is not None:
            data = each.data()
            if since_ms is not None and (data.get("last_ms") or 0) < since_ms:
                continue
            if wanted is not None and data.get("status") not in wanted:
                continue
        kept.append(each)
    return kept
