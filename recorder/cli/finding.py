"""Finding conversations for the verbs: from the catalog, else from the layouts.

Every verb that names or lists conversations asks the catalog
(:mod:`sessiontape.storage.catalog`), brought up to date first (with a progress line on a
terminal while it reads many); a verb that names one brings in line only what its name
selects (:meth:`~sessiontape.storage.catalog.Catalog.find` with ``where``). When the
catalog cannot be used (locked, read-only, of a newer sessiontape) one line on stderr says
so and the layouts are read directly, with the same answer, only slower. A damaged item
store is read as none (``db.connect_readonly``): one line says so, with how to repair it
(:func:`say_store_damage`), and the logs and AgentUse trees answer.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sessiontape.storage.catalog import Catalog, CatalogUnavailable, Listed
from sessiontape.storage.db import damage
from sessiontape.storage.paths import Locations, SkilletPaths

from .console import EXIT_FAILURE, EXIT_USAGE, eprint, printable

if TYPE_CHECKING:
    from sessiontape.storage.sessions import SessionInfo


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


def store_refuses_run(prog: str) -> bool:
    """Whether the item store is damaged: then nothing is run (the model would not get the
    conversation's history, kept there, and nothing could be stored), said in one line."""
    return store_problem(prog, "nothing was run (the conversation's history is kept there)",
                         damage(SkilletPaths.resolve().store_file))


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


def conversations(prog: str, project: Path | None, user: str | None) -> list[Listed]:
    """Every conversation (of ``user``), as ``sessions list --json`` shows them."""
    from sessiontape.storage.json_style import dumps_compact
    from sessiontape.storage.sessions import list_sessions  # the read model: not for search

    say_store_damage(prog, Locations.resolve(project_root=project))
    try:
        with open_catalog(project) as catalog:
            return catalog.listed(user)
    except CatalogUnavailable as exc:
        eprint(f"{prog}: {exc}")
    return [Listed(dumps_compact(info.to_json()).decode(), info.problems)
            for info in list_sessions(user, locations=Locations.resolve(project_root=project))]


def lookup(prog: str, query: str, user: str | None, where: Locations, *,
           by_id: bool = True) -> SessionInfo | int:
    """The conversation ``query`` names (its name, else a prefix of its AgentUse id) in
    ``where``, or the exit code after saying why there is none: 1 unknown, 2 ambiguous."""
    from sessiontape.storage.sessions import (
        AmbiguousSessionError,
        SessionLookupError,
        find_session,
    )

    say_store_damage(prog, where)
    try:
        try:
            with Catalog() as catalog:  # brings in line only what the answer depends on
                return catalog.find(query, user, by_id=by_id, progress=_progress(),
                                    where=where)
        except CatalogUnavailable as exc:
            eprint(f"{prog}: {exc}")
        return find_session(query, user, by_id=by_id, locations=where)
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
