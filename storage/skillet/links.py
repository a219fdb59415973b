"""Which AgentUse session directory belongs to a skillet ``(user, session)`` pair.

Kept in a table of its own in the item store's SQLite file (skilled_crew
ignores it; ``session_items`` is untouched), so a later run of the same
conversation, in any process, finds its AgentUse session again.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from ..agentuse.reader import is_real_dir, split_session_dir_name
from ..db import IN_PAIRS, PAIR, connect, connect_readonly, tables
from ..ids import new_ulid
from ..names import safe_join, sanitize_agent_name
from ..paths import AgentUseRoots
from ..tables import LINKS_TABLE

__all__ = [
    "LINKS_TABLE",
    "SCHEMA",
    "agentuse_dir_for",
    "find_agentuse_dir",
    "find_linked_dir",
    "link_rows",
    "new_session_dir",
    "read_links",
]

log = logging.getLogger("sessiontape")

SCHEMA = f"""CREATE TABLE IF NOT EXISTS {LINKS_TABLE} (
  user_id TEXT NOT NULL,
  session_name TEXT NOT NULL,
  agentuse_dir TEXT NOT NULL,
  PRIMARY KEY (user_id, session_name))"""
_SELECT = f"SELECT agentuse_dir FROM {LINKS_TABLE} WHERE {PAIR}"
_RELINK = f"UPDATE {LINKS_TABLE} SET agentuse_dir = ? WHERE {PAIR} AND agentuse_dir = ?"


def _connect(store_file: Path) -> sqlite3.Connection:
    from ..files import prepare_private_file  # the file writer's machinery: not for readers

    prepare_private_file(store_file)
    conn = connect(store_file)
    conn.execute(SCHEMA)
    return conn


def _connect_readonly(store_file: Path) -> sqlite3.Connection | None:
    """A read-only connection, or None when there is no store or no links table yet."""
    conn = connect_readonly(store_file)
    if conn is None:
        return None
    try:
        linked = LINKS_TABLE in tables(conn)
    except BaseException:
        conn.close()
        raise
    if not linked:
        conn.close()
        return None
    return conn


def find_agentuse_dir(store_file: Path, user_id: str, session_name: str,
                      sessions_root: Path | None = None) -> Path | None:
    """The linked directory where it is today (:func:`find_linked_dir`; as linked when it
    is found nowhere today), or None when the pair has none (or there is no store yet).

    Reads only: works on a store that cannot be written (a full or read-only disk).
    """
    conn = _connect_readonly(store_file)
    if conn is None:
        return None
    with closing(conn):
        row = conn.execute(_SELECT, (user_id, session_name)).fetchone()
    if row is None:
        return None
    return Path(find_linked_dir(row[0], AgentUseRoots.today(sessions_root)) or row[0])


def read_links(store_file: Path) -> list[tuple[str, str, Path]]:
    """Every ``(user_id, session_name, agentuse_dir)`` link; reads only, never creates.

    ``[]`` when there is no store, or a store without the table (not yet linked).
    """
    return [(user, name, Path(directory)) for user, name, directory in link_rows(store_file)]


def link_rows(store_file: Path, pairs: str | None = None) -> list[tuple[str, str, str]]:
    """:func:`read_links` with the directories as text (for 10 000 links, the ``Path``
    objects cost ~0.1 s); ``pairs``: only those (JSON, :data:`~.db.IN_PAIRS`)."""
    conn = _connect_readonly(store_file)
    if conn is None:
        return []
    where, params = (f"WHERE {IN_PAIRS} ", (pairs,)) if pairs is not None else ("", ())
    with closing(conn):
        return conn.execute(f"SELECT user_id, session_name, agentuse_dir FROM {LINKS_TABLE} "
                            f"{where}ORDER BY user_id, session_name", params).fetchall()


def find_linked_dir(linked: str, roots: AgentUseRoots) -> str | None:
    """Where the linked session directory ``linked`` is today: itself when it is in today's
    ``roots`` (:meth:`~.paths.AgentUseRoots.holds`), whether or not it exists; else (its
    data directory moved, or ``XDG_DATA_HOME`` changed) the real directory of its name
    found at its place in today's data root (``project/{its hash}/session/``), else in
    today's sessions root; None when it is in neither. No file system call for a link in
    today's roots."""
    if roots.holds(linked):
        return linked
    old = Path(linked)
    places = [roots.sessions_root] if roots.sessions_root is not None else []
    if old.parent.name == "session" and old.parent.parent.parent.name == "project":
        places.insert(0, roots.projects / old.parent.parent.name / "session")
    for place in places:
        candidate = place / old.name
        if is_real_dir(candidate):
            return str(candidate)
    return None


def agentuse_dir_for(store_file: Path, user_id: str, session_name: str,
                     sessions_root: Path, agent_name: str) -> Path:
    """The pair's directory; a new ``{ULID}-{agent}`` under ``sessions_root`` on first use.

    A link is resolved against today's roots (:func:`find_linked_dir`): a tree found at
    its new place is relinked there; one found nowhere today is not written where it was
    (outside today's roots) but begun again as a new directory under ``sessions_root``,
    with its agent's name, which is said once (a ``sessiontape`` warning).
    Safe when two processes ask at once: the first insert (or relink) wins and both get it.
    """
    pair = (user_id, session_name)
    with closing(_connect(store_file)) as conn:
        linked = conn.execute(_SELECT, pair).fetchone()
        if linked is None:
            new = new_session_dir(sessions_root, sanitize_agent_name(agent_name))
            conn.execute(f"INSERT OR IGNORE INTO {LINKS_TABLE} VALUES (?, ?, ?)", (*pair, new))
            return Path(conn.execute(_SELECT, pair).fetchone()[0])
        today = find_linked_dir(linked[0], AgentUseRoots.today(sessions_root))
        if today == linked[0]:
            return Path(linked[0])
        if today is None:
            split = split_session_dir_name(Path(linked[0]).name)
            target = new_session_dir(sessions_root,
                                      split[1] if split else sanitize_agent_name(agent_name))
        else:
            target = today
        if conn.execute(_RELINK, (target, *pair, linked[0])).rowcount and today is None:
            log.warning("sessiontape: %s/%s: its AgentUse session %s is not in today's "
                        "AgentUse root %s, nor found there: its turns from now on are "
                        "recorded in a new session %s (the earlier ones stay in its log)",
                        user_id, session_name, linked[0], sessions_root, target)
        return Path(conn.execute(_SELECT, pair).fetchone()[0])


def new_session_dir(sessions_root: Path, agent: str) -> str:
    """A new top-level session directory under ``sessions_root``, as text (not made)."""
    return str(safe_join(sessions_root, f"{_short_id_unused(sessions_root)}-{agent}"))


def _short_id_unused(sessions_root: Path) -> str:
    """A new session id whose first 12 characters no session of the root starts with.

    AgentUse shows and finds sessions by those 12 characters (``sessions list``, ``show``'s
    prefix match: src/cli/sessions.ts:733, 1141-1156). This process's ids always differ
    there (storage/ids.py); another recorder's session begun in the same millisecond may
    not, so the root is looked at once, when a conversation gets its directory."""
    try:
        taken = {name[:12] for name in os.listdir(sessions_root)}
    except OSError:  # no root yet: nothing to differ from
        taken = set()
    while True:
        session_id = new_ulid()
        if session_id[:12] not in taken:
            return session_id
