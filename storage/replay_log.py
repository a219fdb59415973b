"""The append-only JSONL replay log of one ``(user, session)`` pair.

``<logs root>/{sanitized user}/{sanitized session}.jsonl``. Each entry is one
``write`` of one line, under an exclusive ``flock`` so that writers in
several processes never interleave; the file is fsync'ed after every
``final_result`` (the end of a turn).

Two raw names can sanitize to the same file (``john@example.com`` and
``john.example.com``). skilled_crew then mixes both conversations in one
log; we keep an owner record beside each log (``.{name}.owner.json``, the
raw user and session) and give a second pair its own file,
``{name}_{hash of the raw pair}.jsonl``. A log that exists without an owner
record (written by skilled_crew) is adopted by the first pair that opens it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .file_writes import FileWorker, LogFiles, append_lines, write_all
from .files import FILE_MODE, make_private_dir, open_private_append
from .json_style import dumps_compact, loads
from .names import not_a_link, safe_join, sanitize_log_name
from .paths import SkilletPaths

__all__ = ["ReplayLog", "find_log_path", "log_owner", "log_path_for", "owner_record_name",
           "owner_record_path"]

MAX_CANDIDATES = 100

_OWNER_KEYS = ("user_id", "session_name")


def owner_record_name(log_name: str) -> str:
    """The file name of the owner record of the log named ``log_name`` (``x.jsonl``)."""
    return f".{log_name.removesuffix('.jsonl')}.owner.json"


def _owner_path(log_path: Path) -> Path:
    return log_path.with_name(owner_record_name(log_path.name))


def _read_owner(owner: Path) -> dict[str, Any] | None:
    try:
        data = loads(owner.read_bytes())  # raw names may hold lone surrogates
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _claim(log_path: Path, record: dict[str, str]) -> bool:
    """Whether ``log_path`` belongs to ``record`` (claiming it if nobody owns it)."""
    owner = _owner_path(log_path)
    if os.path.lexists(owner):  # claimed before: read, and the directory is left alone
        return _owned_by(log_path, record)
    tmp = owner.with_name(f"{owner.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        try:
            write_all(fd, dumps_compact(record))  # a short write must not publish half a record
        finally:
            os.close(fd)
        os.link(tmp, owner)  # creates the record whole, or fails if one exists
        return True
    except FileExistsError:
        return _owned_by(log_path, record)
    finally:
        with contextlib.suppress(OSError):  # a failed unlink must not hide the real outcome
            os.unlink(tmp)


def _candidates(user_id: str, session_name: str, root: Path) -> Iterator[Path]:
    """The file names the pair may own, in the order they are tried."""
    user_dir = safe_join(root, sanitize_log_name(user_id))
    base = sanitize_log_name(session_name)
    digest = hashlib.sha256(f"{user_id}\0{session_name}".encode("utf-8", "surrogatepass"))
    for attempt in range(MAX_CANDIDATES):
        stem = base if attempt == 0 else f"{base}_{digest.hexdigest()[:12]}"
        stem += f"_{attempt}" if attempt > 1 else ""
        yield safe_join(user_dir, f"{stem}.jsonl")


def _owned_by(path: Path, record: dict[str, str]) -> bool:
    existing = _read_owner(_owner_path(path))
    return existing is not None and all(existing.get(k) == record[k] for k in _OWNER_KEYS)


def log_path_for(user_id: str, session_name: str, logs_root: Path | None = None) -> Path:
    """The log file of ``(user_id, session_name)``, claimed for that raw pair.

    Creates the user directory (0700) and the owner record; not the log.
    """
    root = logs_root if logs_root is not None else SkilletPaths.resolve().logs_root
    make_private_dir(not_a_link(safe_join(root, sanitize_log_name(user_id))))
    record = {"user_id": user_id, "session_name": session_name}
    for path in _candidates(user_id, session_name, root):
        if _claim(path, record):
            return path
    raise RuntimeError(f"no free log file name for {user_id!r}/{session_name!r} under {root}")


def find_log_path(user_id: str, session_name: str, logs_root: Path | None = None) -> Path | None:
    """The pair's existing log file, found without claiming anything (creates nothing).

    The same search as :func:`log_path_for`: the first candidate whose owner
    record names this pair, or that has none (a skilled_crew log). None when
    that file does not exist.
    """
    root = logs_root if logs_root is not None else SkilletPaths.resolve().logs_root
    record = {"user_id": user_id, "session_name": session_name}
    for path in _candidates(user_id, session_name, root):
        if not _owner_path(path).exists() or _owned_by(path, record):
            return path if path.exists() else None
    return None


def log_owner(log_path: Path) -> dict[str, Any] | None:
    """The owner record of a log (``user_id``, ``session_name``), or None if it has none."""
    return _read_owner(_owner_path(log_path))


def owner_record_path(log_path: Path) -> Path:
    """Where a log's owner record is kept: ``.{stem}.owner.json`` beside it."""
    return _owner_path(log_path)


class ReplayLog:
    """Appends entries to one pair's log (see :mod:`sessiontape.storage.log_entries`).

    Thread-safe. Each :meth:`append` (or :meth:`append_many`) checks that the file is
    still the one it has open (a rotated or deleted log is reopened) and that the last line
    ends in a newline (a line torn by a killed writer is closed first, so the
    new line stays whole). An append that fails (a full disk) raises, and
    first cuts off whatever part of its line was written: the file is left
    as it was.
    """

    def __init__(self, user_id: str, session_name: str, logs_root: Path | None = None,
                 worker: FileWorker | None = None) -> None:
        self.user_id = user_id
        self.session_name = session_name
        self.path = log_path_for(user_id, session_name, logs_root)
        # With a worker, its helper process appends (the recorder's writer thread);
        # otherwise this object, through its own descriptor.
        self.worker = worker
        self._lock = threading.Lock()
        self._logs = LogFiles(opener=lambda path: open_private_append(Path(path)), limit=1)

    def append(self, entry: dict[str, Any]) -> None:
        """Write ``entry`` as one line; fsync after a ``final_result``."""
        self.append_many([entry])

    def append_many(self, entries: Sequence[dict[str, Any]]) -> None:
        """Write ``entries`` as whole lines, in one ``write`` under the lock; fsync if one
        of them is a ``final_result`` (:func:`~sessiontape.storage.file_writes.append_lines`)."""
        if not entries:
            return
        lines = b"".join([dumps_compact(entry) + b"\n" for entry in entries])
        sync = any(entry.get("kind") == "final_result" for entry in entries)
        if self.worker is not None:
            self.worker.append(self.path, lines, sync)
            return
        with self._lock:
            append_lines(self._logs, self.path, lines, sync)

    def close(self) -> None:
        """Close the file (a later append opens it again)."""
        with self._lock:
            self._logs.close()

    def __del__(self) -> None:  # a log dropped without close() gives its descriptor back
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> ReplayLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
