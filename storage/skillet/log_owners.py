"""Which ``(user, session)`` pair a replay log belongs to, read without writing anything.

A log's owner record (``.{name}.owner.json`` beside it) names the raw pair that claimed it
(:mod:`sessiontape.storage.skillet.replay_log` writes it); a log without one (skilled_crew's)
belongs to the pair its file name sanitizes from. A pair's file is the log
sessiontape 0.2-0.3 gave it under a name they cut (:func:`old_log_path`), if there
is one, else the first of its candidate names that it owns or that nobody owns:
:func:`find_log_path` finds it as :func:`~sessiontape.storage.skillet.replay_log.log_path_for`
claims it, creating nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from ..json_style import loads
from ..names import MAX_NAME, NAME_MAX, digest, old_log_name, safe_join, sanitize_log_name
from ..paths import SkilletPaths

__all__ = ["LOG_SUFFIX", "MAX_CANDIDATES", "candidates", "find_log_path", "log_owner",
           "old_candidates", "old_log_path", "owned_by", "owned_log_path",
           "owner_pair", "owner_record_name", "owner_record_path"]

LOG_SUFFIX = ".jsonl"
MAX_CANDIDATES = 100

_OWNER_KEYS = ("user_id", "session_name")


def owner_record_name(log_name: str) -> str:
    """The file name of the owner record of the log named ``log_name`` (``x.jsonl``):
    ``.x.owner.json``, or, where that is longer than a file name may be,
    ``.{x cut}.{hash of x}.owner.json`` (a dot no log name has keeps it apart)."""
    stem = log_name.removesuffix(LOG_SUFFIX)
    name = f".{stem}.owner.json"
    if len(os.fsencode(name)) <= NAME_MAX:
        return name
    return f".{stem[:MAX_NAME]}.{digest(stem)}.owner.json"


def owner_record_path(log_path: Path) -> Path:
    """Where a log's owner record is kept: ``.{stem}.owner.json`` beside it."""
    return log_path.with_name(owner_record_name(log_path.name))


def _read_owner(owner: Path) -> dict[str, Any] | None:
    try:
        data = loads(owner.read_bytes())  # raw names may hold lone surrogates
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _names(user_id: str, session_name: str, user_dir: Path, base: str) -> Iterator[Path]:
    """``base`` (skilled_crew's name), then names with the pair's hash (and a count) for a
    pair whose names sanitize alike: ``base`` cut where they would be too long."""
    pair = digest(f"{user_id}\0{session_name}")
    for attempt in range(MAX_CANDIDATES):
        tail = "" if attempt == 0 else f"_{pair}"
        tail += f"_{attempt}" if attempt > 1 else ""
        room = NAME_MAX - len(tail) - len(LOG_SUFFIX)
        yield safe_join(user_dir, f"{base[:room]}{tail}{LOG_SUFFIX}")


def candidates(user_id: str, session_name: str, root: Path) -> Iterator[Path]:
    """The file names the pair may own, in the order they are tried: first skilled_crew's
    (``{user}/{session}.jsonl``, sanitized as it does and uncut wherever it fits)."""
    return _names(user_id, session_name, safe_join(root, sanitize_log_name(user_id)),
                  sanitize_log_name(session_name, LOG_SUFFIX))


def old_candidates(user_id: str, session_name: str, root: Path) -> Iterator[Path]:
    """The file names sessiontape 0.2-0.3 tried for the pair, where they differ from
    :func:`candidates`' (they cut a name over 120 characters that skilled_crew does not
    cut); none for any other pair."""
    user, base = old_log_name(user_id), old_log_name(session_name)
    if user == sanitize_log_name(user_id) and base == sanitize_log_name(session_name,
                                                                          LOG_SUFFIX):
        return iter(())
    return _names(user_id, session_name, safe_join(root, user), base)


def owned_by(path: Path, record: dict[str, str]) -> bool:
    """Whether the owner record of the log at ``path`` names ``record``'s pair."""
    existing = _read_owner(owner_record_path(path))
    return existing is not None and all(existing.get(k) == record[k] for k in _OWNER_KEYS)


def old_log_path(user_id: str, session_name: str, root: Path) -> Path | None:
    """The pair's log under a name sessiontape 0.2-0.3 gave it, if that file exists: that
    conversation goes on there. Found as they found it: the first of
    :func:`old_candidates` whose owner record names the pair, before any without one."""
    record = {"user_id": user_id, "session_name": session_name}
    for path in old_candidates(user_id, session_name, root):
        if owned_by(path, record):
            return path if path.exists() else None
        if not os.path.lexists(owner_record_path(path)):
            return None
    return None


def find_log_path(user_id: str, session_name: str, logs_root: Path | None = None) -> Path | None:
    """The pair's existing log file, found without claiming anything (creates nothing).

    The same search as :func:`~sessiontape.storage.skillet.replay_log.log_path_for`: its log under
    sessiontape 0.2-0.3's name, else the first candidate whose owner record names this
    pair, or that has none (a skilled_crew log). None when that file does not exist.
    """
    root = logs_root if logs_root is not None else SkilletPaths.resolve().logs_root
    old = old_log_path(user_id, session_name, root)
    if old is not None:
        return old
    record = {"user_id": user_id, "session_name": session_name}
    for path in candidates(user_id, session_name, root):
        if not owner_record_path(path).exists() or owned_by(path, record):
            return path if path.exists() else None
    return None


def owned_log_path(user_id: str, session_name: str, logs_root: Path) -> Path | None:
    """The pair's existing log whose owner record names it (the one sessiontape claimed
    for it), or None; every candidate is looked at (the file before it may be gone),
    sessiontape 0.2-0.3's names first."""
    record = {"user_id": user_id, "session_name": session_name}
    return next((path for path in chain(old_candidates(user_id, session_name, logs_root),
                                        candidates(user_id, session_name, logs_root))
                 if owned_by(path, record) and path.exists()), None)


def log_owner(log_path: Path) -> dict[str, Any] | None:
    """The owner record of a log (``user_id``, ``session_name``), or None if it has none."""
    return _read_owner(owner_record_path(log_path))


def owner_pair(log_path: Path) -> tuple[str, str] | None:
    """The raw ``(user_id, session_name)`` a log's owner record names, or None (no record,
    or one without both names)."""
    owner = log_owner(log_path) or {}
    user, name = owner.get("user_id"), owner.get("session_name")
    return (user, name) if isinstance(user, str) and isinstance(name, str) else None
