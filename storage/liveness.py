"""Whether the recording of a ``running`` AgentUse session is still alive.

A recorder holds a shared ``flock`` on the session's directory for as long as a
run is recorded in it (:class:`RecordingLock`), and writes who it is in
session.json's ``recorder`` (``pid``, ``host``, ``started``). The kernel drops
the lock when the process ends, however it ends (a ``kill -9`` included), so
a reader that can take the lock exclusively knows that nobody records there:
a session still ``running`` on disk then is reported as ``crashed``
(:func:`reported_status`). ``crashed`` is never written to disk (AgentUse
lists an unknown status as running); the next run of the conversation closes
the dead exchange instead (its open parts end as interrupted).

Sessions without a ``recorder`` key (AgentUse's own, or sessiontape's before
format 1) keep the status they have: nothing tells a live one from a dead one.
Where ``flock`` is not available (some network file systems), a recorder on
this host is judged by its pid.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from typing import Any

from .agentuse_reader import SUBAGENT_DIR, CorruptFileError, read_json_object

__all__ = ["CRASHED", "RecordingLock", "recorder_alive", "reported_status"]

CRASHED = "crashed"


def _open_directory(directory: Path) -> int:
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


class RecordingLock:
    """The shared lock a recorder holds on a session directory while it records a run."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> bool:
        """Take the lock (shared: two processes may record one conversation at once).
        Returns whether no other recorder held it a moment before: only then may the
        caller treat a ``running`` exchange on disk as dead."""
        if self._fd is not None:
            return False
        fd = _open_directory(self.directory)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alone = True
            except BlockingIOError:
                alone = False
            fcntl.flock(fd, fcntl.LOCK_SH)  # from exclusive, or waiting for a reader's check
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return alone

    def release(self) -> None:
        """Let the lock go (closing the descriptor drops it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user's
    return True


def recorder_alive(directory: Path, info: dict[str, Any]) -> bool | None:
    """Whether a recorder is recording in the session ``directory`` (its top-level session's:
    a subagent's is inside it), whose session.json is ``info``. None: unknown (no
    ``recorder`` key, or neither the lock nor the pid can tell)."""
    recorder = info.get("recorder")
    if not isinstance(recorder, dict):
        return None
    try:
        fd = _open_directory(directory)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError as exc:
        if exc.errno not in (errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP):
            raise
        import socket  # rarely: a file system without locks

        pid, host = recorder.get("pid"), recorder.get("host")
        if isinstance(pid, int) and host == socket.gethostname():
            return _pid_alive(pid)
        return None
    else:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def reported_status(info: dict[str, Any], directory: Path) -> str | None:
    """A session's status as readers report it: session.json's (``info``, of the session in
    ``directory``), except ``crashed`` for one ``running`` whose recorder is gone (a
    subagent's recorder is its top-level session's)."""
    status = info.get("status")
    if not isinstance(status, str):
        return None
    if status == "running":
        root, root_info = directory, info
        while root.parent.name == SUBAGENT_DIR:
            root = root.parent.parent
        if root != directory:
            try:
                root_info = read_json_object(root / "session.json")
            except (CorruptFileError, OSError):
                return status
        if recorder_alive(root, root_info) is False:
            return CRASHED
    return status
