"""Finding conversations for the verbs: from the catalog, else from the layouts.

Every verb that names or lists conversations asks the catalog
(:mod:`sessiontape.storage.catalog.index`), brought up to date first (with a progress line on a
terminal while it reads many); a verb that names one brings in line only what its name
selects (:meth:`~sessiontape.storage.catalog.index.Catalog.find` with ``where``). When the
catalog cannot be used (locked, read-only, of a newer sessiontape) one line on stderr says
so and the layouts are read directly, with the same answer, only slower. A damaged item
store is read as none (``db.connect_readonly``): one line says so, with how to repair it
(:func:`say_store_damage`), and the logs and AgentUse trees answer.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import suppress
from datetime import datetime
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING

from sessiontape.storage.backends import store_location
from sessiontape.storage.catalog.index import Catalog, CatalogUnavailable, Listed
from sessiontape.storage.db import damage
from sessiontape.storage.names import AmbiguousUserError, match_user
from sessiontape.storage.paths import Locations, SkilletPaths
from sessiontape.storage.times import shown_time

from .console import EXIT_FAILURE, EXIT_USAGE, eprint, printable

if TYPE_CHECKING:
    from sessiontape.storage.catalog.sessions import SessionInfo


class Progress:
    """``indexing N/M conversations`` on one line of a terminal's stderr, redrawn at most
    every 0.1 s, while the catalog re-reads many conversations (a first build)."""

    SHOWN_FROM = 50  # fewer conversations to re-read: no progress line

    def __init__(self) -> None:
        self.drawn = 0.0

    def __call__(self, done: int, total: int) -> None:
        if total < self.SHOWN_FROM:
            return
        now = time.monotonic()
        if done == total or now - self.drawn >= 0.1:
            self.drawn = now
            end = "\n" if done == total else ""
            print(f"\rsessiontape: indexing {done}/{total} conversations", end=end,
                  file=sys.stderr, flush=True)


def store_problem(prog: str, what: str, problem: Exception | None) -> bool:
    """Say in one line on stderr what is done (or not) about the item store's ``problem``
    (:func:`sessiontape.storage.db.writing_problem`): ``prog: what: item store PATH is
    damaged (...). To repair it, ...``; whether there was one."""
    if problem is None:
        return False
    eprint(printable(f"{prog}: {what}: item store {problem}", one_line=True))
    return True


_said: set[Path] = set()  # damaged stores said so by this process


def say_store_damage(prog: str, where: Locations) -> None:
    """When the item store is damaged, say once (per process) that the conversations are
    read from their logs and AgentUse trees alone, and how to repair it."""
    if where.store_file not in _said and store_problem(
            prog, "reading the conversations from their logs and AgentUse trees alone",
            damage(where.store_file)):
        _said.add(where.store_file)


_HELD: list[int] = []  # the mirror locks this process reads under (see read_from_store)


def read_from_store(prog: str, store: str | None) -> int | None:
    """Point this process's reading at a PostgreSQL store (``--store URL``, else
    ``$SESSIONTAPE_STORE``): bring this host's mirror of it up to date (every host's
    conversations, :func:`sessiontape.materialize.refresh_mirror`) and make it the layouts
    the verb reads (the skillet home, the AgentUse data and the catalog's cache). None to
    go on (a SQLite store: read where it is), else the exit code of a failure, said."""
    location = store_location(store)
    if not isinstance(location, str):
        if store is None:
            return None
        eprint(printable(f"{prog}: --store {store}: reading verbs take a postgresql:// URL; "
                         "the SQLite store they read is skillet's (SKILLET_HOME)"))
        return EXIT_USAGE
    import asyncio
    import fcntl
    import os

    from sessiontape.materialize import lock_mirror, mirror_dir, refresh_mirror

    mirror = mirror_dir(location)
    os.environ.update(SKILLET_HOME=str(mirror / "skillet"), XDG_DATA_HOME=str(mirror / "data"),
                      XDG_CACHE_HOME=str(mirror / "cache"))
    held = lock_mirror(mirror)  # one process at a time refreshes it; none while others read
    try:
        asyncio.run(refresh_mirror(location, mirror))
    except (OSError, sqlite3.Error, ValueError) as exc:
        refreshed = SkilletPaths.resolve().store_file
        if not isinstance(exc, OSError) or not refreshed.exists():
            eprint(printable(f"{prog}: {exc}"))
            return EXIT_FAILURE
        # The store is out of reach: what this host read of it last is still answered.
        eprint(printable(f"{prog}: warning: {exc}; answering from this host's mirror of it "
                         f"as of {shown_time(int(refreshed.stat().st_mtime * 1000))}"))
    finally:
        fcntl.flock(held, fcntl.LOCK_SH)  # kept (shared) until this process ends
    _HELD.append(held)
    return None


def store_refuses_run(prog: str, store: str | None = None) -> bool:
    """Whether the item store (a file: ``store``, else the default one) is damaged: then
    nothing is run (the model would not get the conversation's history, kept there, and
    nothing could be stored), said in one line. A server's store answers for itself."""
    where = store_location(store)
    if isinstance(where, str):
        return False
    return store_problem(prog, "nothing was run (the conversation's history is kept there)",
                         damage(where))


def _progress() -> Progress | None:
    return Progress() if sys.stderr.isatty() else None


def open_catalog(project: Path | None, *, full: bool = False) -> Catalog:
    """The catalog, brought up to date with the layouts of ``project``'s environment (a
    progress line when stderr is a terminal; ``full``: every tree stated). Raises
    CatalogUnavailable."""
    catalog = Catalog()
    try:
        catalog.refresh(Locations.resolve(project_root=project), full=full,
                        progress=_progress())
    except BaseException:
        catalog.close()
        raise
    return catalog


def answering_catalog(prog: str, project: Path | None) -> Catalog:
    """:func:`open_catalog`; when it cannot be used, one line on stderr and a catalog built
    in memory from the layouts instead (the same answers, only slower)."""
    say_store_damage(prog, Locations.resolve(project_root=project))
    try:
        return open_catalog(project)
    except CatalogUnavailable as exc:
        eprint(f"{prog}: {exc}")
    catalog = Catalog.in_memory()
    try:
        catalog.refresh(Locations.resolve(project_root=project), progress=_progress())
    except BaseException:
        catalog.close()
        raise
    return catalog


def ambiguous_user(prog: str, exc: AmbiguousUserError) -> int:
    """Say that what was typed for a user means several (one line, then each of them on
    its own); the exit code, 2."""
    eprint(f"{prog}: {printable(str(exc), one_line=True)}:")
    for user in exc.users:
        eprint(f"  {printable(user, one_line=True)}")
    return EXIT_USAGE


def _file_user(typed: str | None, users: Iterable[str | None]) -> str | None:
    """The user id ``typed`` means among ``users`` (those of the files, read without a
    catalog): :func:`~sessiontape.storage.names.match_user`."""
    if typed is None:
        return None
    return match_user(typed, {user for user in users if user is not None})


def conversations(prog: str, project: Path | None, user: str | None, *,
                  since: datetime | None = None, statuses: Collection[str] | None = None,
                  limit: int | None = None) -> list[Listed] | int:
    """Every conversation (of the user ``user`` means, as people type one:
    :meth:`Catalog.user <sessiontape.storage.catalog.index.Catalog.user>`), as ``sessions list
    --json`` shows them, narrowed by :func:`~sessiontape.storage.catalog.selection.selected`; or
    the exit code after saying that ``user`` means several users."""
    from sessiontape.storage.catalog.selection import selected
    from sessiontape.storage.catalog.sessions import list_sessions  # the read model: not for search
    from sessiontape.storage.json_style import dumps_compact

    where = Locations.resolve(project_root=project)
    say_store_damage(prog, where)
    try:
        try:
            with open_catalog(project) as catalog:
                listed = catalog.listed(catalog.user(user) if user is not None else None)
        except CatalogUnavailable as exc:
            eprint(f"{prog}: {exc}")
            infos = list_sessions(locations=where)
            meant = _file_user(user, (info.user_id for info in infos))
            listed = [Listed(dumps_compact(info.to_json()).decode(), info.problems)
                      for info in infos if user is None or info.user_id == meant]
    except AmbiguousUserError as exc:
        return ambiguous_user(prog, exc)
    return selected(listed, since=since, statuses=statuses, limit=limit)


def oldest_first(prog: str, project: Path | None, user: str | None
                 ) -> Iterator[SessionInfo] | int:
    """Every conversation :func:`conversations` lists (of the user ``user`` means), oldest
    first (:func:`~sessiontape.storage.catalog.sessions.export_key`), streamed from the
    catalog one at a time (:meth:`Catalog.oldest_first
    <sessiontape.storage.catalog.index.Catalog.oldest_first>`; the catalog is closed when the
    iterator ends or is closed); when the catalog cannot be used, read from the files (all
    at once). Or the exit code after saying that ``user`` means several users."""
    from sessiontape.storage.catalog.sessions import export_key, list_sessions

    where = Locations.resolve(project_root=project)
    say_store_damage(prog, where)
    try:
        try:
            catalog = open_catalog(project)
            try:
                meant = catalog.user(user) if user is not None else None
                rows = catalog.oldest_first(meant)
                first = list(islice(rows, 1))  # the query runs now: its failure falls back
            except BaseException:
                catalog.close()
                raise
            return _closed_after(catalog, chain(first, rows))
        except CatalogUnavailable as exc:
            eprint(f"{prog}: {exc}")
        infos = list_sessions(locations=where)
        file_user = _file_user(user, (info.user_id for info in infos))
        return iter(sorted((info for info in infos if user is None or info.user_id == file_user),
                           key=export_key))
    except AmbiguousUserError as exc:
        return ambiguous_user(prog, exc)


def _closed_after(catalog: Catalog, rows: Iterator[SessionInfo]) -> Iterator[SessionInfo]:
    """``rows``, then ``catalog`` closed (also when the caller stops early)."""
    with catalog:
        yield from rows


def lookup(prog: str, query: str, user: str | None, where: Locations, *,
           by_id: bool = True) -> SessionInfo | int:
    """The conversation ``query`` names (its name, else a prefix of its AgentUse id) of the
    user ``user`` means as people type one (:func:`conversations`), in ``where``; or the
    exit code after saying why there is none: 1 unknown, 2 ambiguous (the name, or the
    user)."""
    from sessiontape.storage.catalog.sessions import (
        AmbiguousSessionError,
        SessionLookupError,
        find_session,
        list_sessions,
    )

    say_store_damage(prog, where)
    try:
        try:
            with Catalog() as catalog:  # brings in line only what the answer depends on
                if user is None:
                    return catalog.find(query, by_id=by_id, progress=_progress(), where=where)
                # first brings in line the conversations added and those named query
                with suppress(SessionLookupError):
                    catalog.find(query, by_id=by_id, progress=_progress(), where=where)
                return catalog.find(query, catalog.user(user), by_id=by_id)
        except CatalogUnavailable as exc:
            eprint(f"{prog}: {exc}")
        meant = _file_user(user, (info.user_id for info in
                                  list_sessions(locations=where, with_usage=False)))
        return find_session(query, meant, by_id=by_id, locations=where)
    except AmbiguousUserError as exc:
        return ambiguous_user(prog, exc)
    except AmbiguousSessionError as exc:
        eprint(f"{prog}: {exc}:")
        for info in exc.candidates:
            eprint(printable(f"  {info.session_name}  user {info.user_id or '-'}"
                             f"  agentuse {info.agentuse_id or '-'}  origin {info.origin}",
                             one_line=True))
        return EXIT_USAGE
    except SessionLookupError as exc:
        eprint(f"{prog}: {exc}")
        return EXIT_FAILURE
