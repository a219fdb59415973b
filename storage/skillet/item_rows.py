"""The rows of ``session_items``, whatever holds them: the table's schema, an item's JSON,
a row read back as the Python SDK's item, and what a store keeps between reads.

Shared by the SQLite store (:mod:`~sessiontape.storage.skillet.item_store`) and a server's
(:mod:`sessiontape.storage.backends.postgres`); imports nothing of the Agents SDK, so that a
verb that only moves or reads rows starts without it.

A row that is not an item (not JSON, not a JSON object) is skipped, and one of a type
neither SDK knows is passed on unchanged; both are reported once per store object with
their row id (:func:`decode_rows`), and neither ever fails a read.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import orjson

from ..db import META_SCHEMA
from ..json_style import dumps_compact
from .items import read_item

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["FORMAT", "MAX_SNAPSHOTS", "SCHEMA", "Shared", "Snapshot", "Snapshots", "call_names",
           "decode_rows", "item_json", "loads_item", "read_joined"]

log = logging.getLogger("sessiontape")
K = TypeVar("K")
S = TypeVar("S")

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS session_items (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  item_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_session ON session_items (user_id, session_name, created_at);
{META_SCHEMA};
INSERT OR IGNORE INTO sessiontape_meta (key, value) VALUES ('format', 'sessiontape-store/1');
"""
# The store's format is in sessiontape_meta (key ``format``): what a reader dispatches on.
# skilled_crew reads only session_items (docs/formats.md, "Format versions").
FORMAT = "sessiontape-store/1"
MAX_SNAPSHOTS = 64  # pairs whose converted items a store keeps (see Snapshot)


def _parse(joined: bytes) -> list[TResponseInputItem]:
    """A JSON array of items (made of :func:`_encoded` items)."""
    try:
        items: list[TResponseInputItem] = orjson.loads(joined)
    except orjson.JSONDecodeError:  # what only the careful decoder reads (a lone surrogate)
        items = json.loads(joined, parse_constant=_refuse_constant)
    return items


def _encoded(item: Any) -> bytes:
    try:
        return orjson.dumps(item)
    except (TypeError, orjson.JSONEncodeError):
        return dumps_compact(item)


def item_json(item: Any) -> str:
    """One input item as compact JSON (orjson; the careful encoder for odd values)."""
    try:
        return orjson.dumps(item).decode()
    except (TypeError, orjson.JSONEncodeError):
        return dumps_compact(item).decode()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_item(text: str | bytes) -> Any:
    """One stored item; ValueError when the row is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # orjson refuses a lone surrogate escape ("\\ud800"), which JSON.stringify and
        # item_json write for a string holding one; the stdlib parser reads it.
        return json.loads(text, parse_constant=_refuse_constant)


def decode_rows(rows: Iterable[Sequence[Any]], where: str,
                reported: set[int] | None = None) -> list[tuple[int, Any]]:
    """Stored rows ``(id, item_json)`` as ``(id, Python SDK item)``.

    A protocol item is converted, a Python-shaped one kept; a row that is not JSON or
    not a JSON object is skipped, and an object of a type neither SDK knows is kept as
    it is. Both are reported (a warning naming ``where`` and the row id), once per row
    when a ``reported`` set is given.
    """
    items = []
    for row_id, text in rows:
        try:
            item = loads_item(text)
        except ValueError:
            _report(where, row_id, "not JSON, skipped", text, reported)
            continue
        try:
            converted = read_item(item, True)
        except Exception:  # a malformed item of a known type: as one of an unknown type
            converted = None
        if converted is not None:
            items.append((row_id, converted))
        elif isinstance(item, dict):
            _report(where, row_id, "not an item of either Agents SDK, passed on as it is",
                    text, reported)
            items.append((row_id, item))
        else:
            _report(where, row_id, f"not an item (a JSON {type(item).__name__}), skipped",
                    text, reported)
    return items


def call_names(items: list[Any]) -> tuple[dict[str, str], list[str]]:
    """The tool names of the function calls among ``items`` by call id, and the call ids
    of the tool outputs among them whose call is not there."""
    names: dict[str, str] = {}
    outputs = []
    for item in items:
        if isinstance(item, dict):
            kind = item.get("type")
            if kind == "function_call":
                call_id, name = item.get("call_id"), item.get("name")
                if isinstance(call_id, str) and isinstance(name, str):
                    names[call_id] = name
            elif kind == "function_call_output" and isinstance(item.get("call_id"), str):
                outputs.append(item["call_id"])
    return names, [call_id for call_id in outputs if call_id not in names]


def _report(where: str, row_id: int, what: str, text: Any, reported: set[int] | None) -> None:
    if reported is not None:
        if row_id in reported:
            return
        reported.add(row_id)
    log.warning("%s: session_items row %s: %s: %.80r", where, row_id, what, text)


@dataclass
class Snapshot:
    """What the last full read of one pair found, to convert only new rows the next time.

    Rows are only ever added and deleted, never changed in place (by skilled_crew and by
    sessiontape), and AUTOINCREMENT gives a new row a higher id than any before. So while
    the pair's row ``last_id`` is still the last of the first ``count`` rows in order (the
    rows with an id up to it), ``joined`` still holds their items, and the rows after it
    are new. A row added out of order (an older ``created_at``, an explicit lower id) or
    any row deleted makes the next full read start over.
    """

    last_id: int  # the last row in order
    count: int  # rows of the pair whose id is at most last_id
    joined: bytes  # the Python SDK items they read as, one JSON array


def _joined(items: list[Any]) -> bytes:
    """Items as one JSON array (each as :func:`_encoded` writes it)."""
    try:
        return orjson.dumps(items)
    except (TypeError, orjson.JSONEncodeError):
        return b"[" + b",".join(map(_encoded, items)) + b"]"


def _appended(joined: bytes, more: bytes) -> bytes:
    """Two JSON arrays as one."""
    if more == b"[]":
        return joined
    return more if joined == b"[]" else joined[:-1] + b"," + more[1:]


class Snapshots:
    """A store's :class:`Snapshot` of each pair read lately (at most :data:`MAX_SNAPSHOTS`:
    the pair read longest ago goes first). Each store's own SQL finds the rows; what they
    mean is here, once."""

    def __init__(self) -> None:
        self.by_pair: dict[tuple[str, str], Snapshot] = {}

    def get(self, pair: tuple[str, str]) -> Snapshot | None:
        return self.by_pair.get(pair)

    def forget(self, pair: tuple[str, str]) -> None:
        self.by_pair.pop(pair, None)

    def remember(self, pair: tuple[str, str], items: list[Any], count: int, last_id: int,
                 max_id: int) -> None:
        """The pair's ``count`` rows read whole as ``items``; kept only when the last row
        in order is the newest (``last_id == max_id``): a row after it in id but before it
        in order would otherwise count as new."""
        self.by_pair.pop(pair, None)
        if last_id != max_id:
            return
        if len(self.by_pair) >= MAX_SNAPSHOTS:
            del self.by_pair[next(iter(self.by_pair))]
        self.by_pair[pair] = Snapshot(last_id, count, _joined(items))

    def follow(self, snapshot: Snapshot, rows: Sequence[Sequence[Any]], where: str,
               reported: set[int]) -> list[TResponseInputItem] | None:
        """The pair's items, from ``rows``: its snapshot's last row and every row after it
        in order ``(id, item_json, rows with an id up to the snapshot's)``; None when the
        snapshot no longer holds (a row deleted, or added out of order): read it whole."""
        if not rows or rows[0][0] != snapshot.last_id or rows[0][2] != snapshot.count:
            return None
        if len(rows) > 1:
            added = [item for _, item in decode_rows((row[:2] for row in rows[1:]), where,
                                                     reported)]
            snapshot.joined = _appended(snapshot.joined, _joined(added))
            snapshot.last_id = rows[-1][0]
            snapshot.count += len(rows) - 1
        return _parse(snapshot.joined)


class Shared(Generic[K, S]):
    """A process's one store per key (a path, a URL), each with a count of its users:
    :meth:`take` gives the key's store (made on first use) and counts one more user,
    :meth:`give_back` counts one less and says whether that was the last (then the store
    is forgotten: the caller closes it)."""

    def __init__(self) -> None:
        self._stores: dict[K, S] = {}
        self._shares: dict[K, int] = {}
        self._lock = threading.Lock()

    def take(self, key: K, make: Callable[[], S]) -> S:
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                store = self._stores[key] = make()
                self._shares[key] = 0
            self._shares[key] += 1
            return store

    def count(self, key: K, store: S) -> int:
        """How many users share ``store`` now (0 once it is no longer the key's)."""
        with self._lock:
            return self._shares[key] if self._stores.get(key) is store else 0

    def give_back(self, key: K, store: S) -> bool:
        with self._lock:
            if self._stores.get(key) is not store:
                return True  # not (or no longer) shared: its holder closes it
            self._shares[key] -= 1
            if self._shares[key] > 0:
                return False
            del self._stores[key], self._shares[key]
            return True


def read_joined(joined: str | bytes | None, count: int) -> list[TResponseInputItem] | None:
    """The items of ``count`` rows joined into one JSON array, as the Python SDK's; None
    when that cannot be trusted (not JSON, another length: a damaged row such as '1,2'
    can still join into valid JSON; a row that is not an item, to be reported by its id):
    then each row is read on its own."""
    if joined is None:
        return None
    try:
        parsed = orjson.loads(joined)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, list) or len(parsed) != count:
        return None
    try:
        items = [read_item(item, True) for item in parsed]
    except Exception:  # a malformed item of a known type
        return None
    return None if None in items else items
