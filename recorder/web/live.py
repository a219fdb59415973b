"""Keeping the catalog current while ``serve`` runs, and telling the open pages what changed.

:class:`CatalogKeeper` is one thread: it watches the layouts' roots (``watchfiles``) and,
after each batch of changes, refreshes the catalog (re-reading only what changed) and
publishes the names of what changed to :class:`Changes`: ``sessions`` when anything did,
``session-ID`` for each conversation whose row changed (ID: its catalog id). A root that
does not exist yet is looked for again every second, and then watched. Requests never
refresh: they read the catalog as the keeper leaves it.

:class:`Changes` hands the names to each subscriber (one per open page's event stream) on
the event loop; a subscriber that has not taken them yet has them merged, so a slow page
never makes the keeper wait and never piles up more than one set of names.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from pathlib import Path

import watchfiles

from sessiontape.storage.catalog.index import Catalog
from sessiontape.storage.paths import Locations

__all__ = ["CatalogKeeper", "Changes", "Subscription"]

log = logging.getLogger("sessiontape.web")

DEBOUNCE_MS = 50  # changes that come within this are one batch
LOOK_AGAIN_MS = 1000  # how often roots that do not exist yet are looked for


class Subscription:
    """What changed since the subscriber last asked, merged."""

    def __init__(self) -> None:
        self.pending: set[str] = set()
        self.ready = asyncio.Event()

    def add(self, names: set[str]) -> None:
        self.pending |= names
        self.ready.set()

    async def next(self) -> set[str]:
        """The names that changed since the last call (waits for at least one)."""
        await self.ready.wait()
        self.ready.clear()
        names, self.pending = self.pending, set()
        return names


class Changes:
    """Subscriptions to what changed, fed from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.subscriptions: set[Subscription] = set()

    def subscribe(self) -> Subscription:
        subscription = Subscription()
        self.subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscriptions.discard(subscription)

    def publish(self, names: set[str]) -> None:
        """Tell every subscriber ``names`` (safe from any thread)."""
        if names and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._publish, set(names))

    def _publish(self, names: set[str]) -> None:
        for subscription in list(self.subscriptions):
            subscription.add(names)


def _roots(where: Locations) -> list[Path]:
    """What a recording changes: the item store's directory, the logs, the AgentUse root."""
    roots = [where.store_file.parent, where.logs_root]
    if where.agentuse_root is not None:
        roots.append(where.agentuse_root)
    return roots


def _recorded(change: watchfiles.Change, path: str) -> bool:
    """Whether a change may be a recording's: not SQLite's shared-memory index (``-shm``),
    which every reader touches, the keeper's own refresh too (it would wake itself)."""
    return not path.endswith("-shm")


class CatalogKeeper(threading.Thread):
    """The thread that keeps the catalog at ``catalog_path`` in line with the layouts of
    ``where`` and publishes what changed to ``changes``; :meth:`stop` ends it."""

    def __init__(self, where: Locations, catalog_path: Path, changes: Changes) -> None:
        super().__init__(name="sessiontape-catalog-keeper", daemon=True)
        self.where = where
        self.catalog_path = catalog_path
        self.changes = changes
        self._stop_event = threading.Event()
        self.refreshes = 0

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        with Catalog(self.catalog_path) as catalog:
            versions = self._versions(catalog)
            while not self._stop_event.is_set():
                watched = [root for root in _roots(self.where) if root.is_dir()]
                missing = len(watched) < len(_roots(self.where))
                for _ in self._batches(watched, missing):
                    versions = self._refresh(catalog, versions)
                    if missing and any(root.is_dir() and root not in watched
                                       for root in _roots(self.where)):
                        break  # a root appeared: watch it too

    def _batches(self, watched: list[Path], missing: bool
                 ) -> Iterable[set[tuple[watchfiles.Change, str]]]:
        """Batches of changes under ``watched``; with ``missing`` roots, also an empty
        batch every :data:`LOOK_AGAIN_MS` to look for them."""
        if not watched:
            while not self._stop_event.wait(LOOK_AGAIN_MS / 1000):
                yield set()
            return
        yield from watchfiles.watch(
            *watched, watch_filter=_recorded, stop_event=self._stop_event,
            debounce=DEBOUNCE_MS, step=10,
            rust_timeout=LOOK_AGAIN_MS if missing else 5000, yield_on_timeout=missing,
            raise_interrupt=False, ignore_permission_denied=True)

    def _versions(self, catalog: Catalog) -> dict[int, tuple[object, ...]]:
        try:
            return catalog.versions()
        except Exception as exc:  # a catalog another process is rebuilding, say
            log.warning("sessiontape serve: cannot read the catalog: %s", exc)
            return {}

    def _refresh(self, catalog: Catalog, before: dict[int, tuple[object, ...]]
                 ) -> dict[int, tuple[object, ...]]:
        try:
            catalog.refresh(self.where)
        except Exception as exc:
            log.warning("sessiontape serve: cannot refresh the catalog: %s", exc)
            return before
        self.refreshes += 1
        after = self._versions(catalog)
        changed = {f"session-{row_id}" for row_id in before.keys() | after.keys()
                   if before.get(row_id) != after.get(row_id)}
        if changed:
            self.changes.publish({"sessions", *changed})
        return after
