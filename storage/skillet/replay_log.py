"""The append-only JSONL replay log of one ``(user, session)`` pair.

``<logs root>/{sanitized user}/{sanitized session}.jsonl``: skilled_crew's own file
name, uncut wherever the file system takes it (a log sessiontape 0.2-0.3 wrote
under the shorter name they cut goes on there). Each entry is one
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
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..file_writes import FileWorker, LogFiles, append_lines, write_all
from ..files import FILE_MODE, make_private_dir, open_private_append
from ..json_style import dumps_compact
from ..names import not_a_link, safe_join, sanitize_log_name
from ..paths import SkilletPaths
from .log_owners import candidates, old_log_path, owned_by, owner_record_path

__all__ = ["ReplayLog", "log_path_for"]


def _claim(log_path: Path, record: dict[str, str]) -> bool:
    """Whether ``log_path`` belongs to ``record`` (claiming it if nobody owns it)."""
    owner = owner_record_path(log_path)
    if os.path.lexists(owner):  # claimed before: read, and the directory is left alone
        return owned_by(log_path, record)
    # not named after the record, which may be as long as a file name may be
    tmp = owner.with_name(f".owner.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        try:
            write_all(fd, dumps_compact(record))  # a short write must not publish half a record
        finally:
            os.close(fd)
        os.link(tmp, owner)  # creates the record whole, or fails if one exists
        return True
    except FileExistsError:
        return owned_by(log_path, record)
    finally:
        with contextlib.suppress(OSError):  # a failed unlink must not hide the real outcome
            os.unlink(tmp)


def log_path_for(user_id: str, session_name: str, logs_root: Path | None = None) -> Path:
    """The log file of ``(user_id, session_name)``, claimed for that raw pair: the one
    sessiontape 0.2-0.3 wrote for it under a name they cut, if any, else the first
    candidate that is the pair's or nobody's (skilled_crew's name first).

    Creates the user directory (0700) and the owner record; not the log.
    """
    root = logs_root if logs_root is not None else SkilletPaths.resolve().logs_root
    old = old_log_path(user_id, session_name, root)
    user_dir = old.parent if old is not None else safe_join(root, sanitize_log_name(user_id))
    make_private_dir(not_a_link(user_dir))
    if old is not None:
        return old
    record = {"user_id": user_id, "session_name": session_name}
    for path in candidates(user_id, session_name, root):
        if _claim(path, record):
            return path
    raise RuntimeError(f"no free log file name for {user_id!r}/{session_name!r} under {root}")


class ReplayLog:
    """Appends entries to one pair's log (see :mod:`sessiontape.storage.skillet.log_entries`).

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
