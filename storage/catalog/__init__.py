"""The read model: every conversation of the layouts, as the CLI and the exports see it.

Owns ``sessions`` (list, show, clear, rename, prune: joining store, log and tree),
``selection`` (list's filters), ``timeline`` (a tree's exchanges aligned with a log's
turns), ``conversation`` (one conversation read into sessions, messages and calls: what
the index and every export read), ``index`` and ``rows`` (the catalog cache: search,
usage), ``search_query``,
``fork`` and ``doctor`` (what is wrong in the layouts, and the safe repairs).

May import: the shared ground, ``agentuse``, ``skillet``. (It reads both layouts.) Never
the exports: they read this package, not the other way round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {"index": ["Catalog", "CatalogUnavailable", "SearchSyntaxError"]}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .index import Catalog as Catalog
    from .index import CatalogUnavailable as CatalogUnavailable
    from .index import SearchSyntaxError as SearchSyntaxError
