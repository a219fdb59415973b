"""Where a store other than SQLite plugs in, and which store a location names.

The item store, its archive, the links and the replay log's lines are a SQLite file and
JSONL files by default (``sessiontape.storage.db`` owns those connections). A store on a
server is one module here that is a :class:`~sessiontape.storage.skillet.item_store.RowStore`
(the SDK ``Session`` over it is the file's own), chosen by its location:
:mod:`~sessiontape.storage.backends.postgres` for a ``postgresql://`` URL (the ``postgres``
extra), with :mod:`~sessiontape.storage.backends.postgres_log` following its log.
:func:`open_store` reads a location (an argument, else ``SESSIONTAPE_STORE``, else the
skillet file); only a URL imports the driver.

May import: the shared ground, ``skillet``. (The item shapes, and the store it stands in
for.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Union

from ..paths import SkilletPaths

if TYPE_CHECKING:  # (imported where used: the SDK's and the driver's import time)
    from ..skillet.item_store import ItemStore
    from .postgres import PostgresStore

__all__ = ["STORE_ENV", "MissingExtra", "Store", "is_store_url", "open_store", "store_location"]

STORE_ENV = "SESSIONTAPE_STORE"
Store = Union["ItemStore", "PostgresStore"]


class MissingExtra(ImportError):
    """A store URL was given, and the driver it needs is not installed."""


def is_store_url(text: object) -> bool:
    """Whether ``text`` names a PostgreSQL store (``postgresql://`` or ``postgres://``)."""
    return isinstance(text, str) and text.startswith(("postgresql://", "postgres://"))


def store_location(location: str | os.PathLike[str] | None = None) -> str | Path:
    """The store ``location`` names: a URL as it is, a path; None: ``SESSIONTAPE_STORE``
    when set, else the skillet store file (``SkilletPaths``)."""
    if location is None:
        location = os.environ.get(STORE_ENV) or None
    if location is None:
        return SkilletPaths.resolve().store_file
    if is_store_url(location):
        return str(location)
    return Path(location)


def open_store(location: str | os.PathLike[str] | None = None) -> Store:
    """The process's shared store at ``location`` (:func:`store_location`); the caller
    gives its share back with ``release()``."""
    where = store_location(location)
    if isinstance(where, Path):
        from ..skillet.item_store import ItemStore

        return ItemStore.shared(where)
    try:
        from .postgres import PostgresStore
    except ImportError as exc:
        raise MissingExtra("a PostgreSQL store needs the postgres extra: "
                           "pip install 'sessiontape[postgres]'") from exc
    return PostgresStore.shared(where)
