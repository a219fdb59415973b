"""An export's file: written beside its target, then put in place whole or not at all."""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..file_writes import FILE_MODE

__all__ = ["refuse_existing", "written_beside"]


def refuse_existing(out: Path) -> None:
    """FileExistsError when something is at ``out`` (a link too)."""
    if os.path.lexists(out):
        raise FileExistsError(errno.EEXIST, "already exists (force replaces it)", str(out))


@contextmanager
def written_beside(out: Path, *, force: bool) -> Iterator[Path]:
    """A new empty file beside ``out`` (mode 0600) for the block to write; when the block
    ends, it is fsync'ed and becomes ``out``: replacing what is there with ``force``, else
    only if nothing appeared there meanwhile (FileExistsError). On any error it is
    removed, and what was at ``out`` is unchanged."""
    if not force:
        refuse_existing(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE))
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if force:
            os.replace(tmp, out)
        else:
            os.link(tmp, out)  # fails if a file appeared at ``out`` meanwhile
            os.unlink(tmp)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
