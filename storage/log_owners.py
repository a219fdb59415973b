"""Which ``(user, session)`` pair a replay log belongs to, read without writing anything.

A log's owner record (``.{name}.owner.json`` beside it) names the raw pair that claimed it
(:mod:`sessiontape.storage.replay_log` writes it); a log without one (skilled_crew's)
belongs to the pair its file name sanitizes from. A pair's file is the first of its
candidate names that it owns or that nobody owns: :func:`find_log_path` finds it as
:func:`~sessiontape.storage.replay_log.log_path_for` claims it, creating nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .json_style import loads
from .names import safe_join, sanitize_log_name
from .paths import SkilletPaths

__all__ = ["MAX_CANDIDATES", "candidates", "find_log_path", "log_owner", "owned_by",
           "owned_log_path", "owner_record_name", "owner_record_path"]

MAX_CANDIDATES = 100

_OWNER_KEYS = ("user_id", "session_name")


def owner_record_name(log_name: str) -> str:
    """The file name of the owner record of the log named ``log_name`` (``x.jsonl``)."""
    return f".{log_name.removesuffix('.jsonl')}.owner.json"


def owner_record_path(log_path: Path) -> Path:
    """Where a log's owner record is kept: ``.{stem}.owner.json`` beside it."""
    return log_path.with_name(owner_record_name(log_path.name))


def _read_owner(owner: Path) -> dict[str, Any] | None:
    try:
        data = loads(owner.read_bytes())  # raw names may hold lone surrogates
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def candidates(user_id: str, session_name: str, root: Path) -> Iterator[Path]:
    """The file names the pair may own, in the order they are tried."""
    user_dir = safe_join(root, sanitize_log_name(user_id))
    base = sanitize_log_name(session_name)
    digest = hashlib.sha256(f"{user_id}\0{session_name}".encode("utf-8", "surrogatepass"))
    for attempt in range(MAX_CANDIDATES):
        stem = base if attempt == 0 else f"{base}_{digest.hexdigest()[:12]}"
        stem += f"_{attempt}" if attempt > 1 else ""
        yield safe_join(user_dir, f"{stem}.jsonl")


def owned_by(path: Path, record: dict[str, str]) -> bool:
    """Whether the owner record of the log at ``path`` names ``record``'s pair."""
    existing = _read_owner(owner_record_path(path))
    return existing is not None and all(existing.get(k) == record[k] for k in _OWNER_KEYS)


def find_log_path(user_id: str, session_name: str, logs_root: Path | None = None) -> Path | None:
    """The pair's existing log file, found without claiming anything (creates nothing).

    The same search as :func:`~sessiontape.storage.replay_log.log_path_for`: the first
    candidate whose owner
    record names this pair, or that has none (a skilled_crew log). None when
    that file does not exist.
    """
    root = logs_root if logs_root is not None else SkilletPaths.resolve().logs_root
    record = {"user_id": user_id, "session_name": session_name}
    for path in candidates(user_id, session_name, root):
        if not owner_record_path(path).exists() or owned_by(path, record):
            return path if path.exists() else None
    return None


def owned_log_path(user_id: str, session_name: str, logs_root: Path) -> Path | None:
    """The pair's existing log whose owner record names it (the one sessiontape claimed
    for it), or None; every candidate is looked at (the file before it may be gone)."""
    record = {"user_id": user_id, "session_name": session_name}
    return next((path for path in candidates(user_id, session_name, logs_root)
                 if owned_by(path, record) and path.exists()), None)


def log_owner(log_path: Path) -> dict[str, Any] | None:
    """The owner record of a log (``user_id``, ``session_name``), or None if it has none."""
    return _read_owner(owner_record_path(log_path))
