"""Private, atomic file system writes: directories 0700, files 0600."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from .file_writes import FILE_MODE, atomic_write, open_log, write_all
from .names import UnsafePathError

__all__ = ["DIR_MODE", "FILE_MODE", "atomic_write", "make_private_dir", "open_private_append",
           "prepare_private_file", "write_all"]

DIR_MODE = 0o700


def make_private_dir(path: Path) -> Path:
    """Create ``path`` and missing parents with mode 0700; return it.

    Directories that already exist keep their mode: they may be shared
    parents such as ``~/.local/share`` that are not ours to change.
    """
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue  # another writer made it first
        os.chmod(directory, DIR_MODE)  # the umask may have removed bits we asked for
    return path


def open_private_append(path: Path) -> int:
    """Open ``path`` for appending (created 0600 if missing); return the fd.

    Read-write, not write-only, so that the caller can ``pread`` what is
    already there (the replay log checks its last byte). A symbolic link is
    refused (:class:`~sessiontape.storage.names.UnsafePathError`), never written through.
    """
    try:
        return open_log(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{path} is a symbolic link; not writing through it") from None
        raise


def prepare_private_file(path: Path) -> Path:
    """Make sure ``path`` exists (created 0600, parents 0700) before another library opens it.

    An existing file is not opened at all: closing any descriptor of a SQLite
    file drops every POSIX lock this process holds on it, which would let
    another process write under a connection of ours (a known way to corrupt
    a SQLite database).
    """
    make_private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, FILE_MODE))
    return path
