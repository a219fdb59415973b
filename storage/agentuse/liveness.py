"""Whether the recording of a ``running`` AgentUse session is still alive.

A recorder holds a shared ``flock`` on the session's directory for as long as a
run is recorded in it (:class:`RecordingLock`), and writes who it is in
session.json's ``recorder`` (``pid``, ``host``, ``started``). The kernel drops
the lock when the process ends, however it ends (a ``kill -9`` included), so
a reader that can take the lock exclusively knows that nobody records there:
a session still ``running`` on disk then is reported as ``crashed``
(:func:`reported_status`). ``crashed`` is never written to disk (AgentUse
lists an unknown status as running); the next run of the conversation closes
the dead exchange instead (:func:`close_interrupted`: its open parts end as
interrupted, in its subagents too).

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
from typing import TYPE_CHECKING, Any

from .reader import SUBAGENT_DIR, CorruptFileError, read_json_object

if TYPE_CHECKING:
    from .writer import AgentUseMessage, AgentUseSession

__all__ = ["CRASHED", "INTERRUPTED", "RecordingLock", "close_interrupted", "recorder_alive",
           "reported_status"]

CRASHED = "crashed"
# What a run's open parts say when a later run finds that its recorder is gone.
INTERRUPTED = "interrupted: the recording process ended before the run did"


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


def _close_exchange(message: AgentUseMessage, at: int) -> None:
    """An exchange a dead recorder left open ends as interrupted at ``at``: its pending or
    running tool parts fail, its open text parts end, it gets an error and an ``error``
    part (``INTERRUPTED``)."""
    for part in message.open_parts("tool"):
        state = part.fields.get("state")
        if isinstance(state, dict) and state.get("status") in ("pending", "running"):
            start = (state.get("time") or {}).get("start", at)
            part.update(state={"status": "error", "input": state.get("input"),
                               "error": INTERRUPTED, "time": {"start": start, "end": at}})
    for part in message.open_parts("text"):
        times = part.fields.get("time")
        if isinstance(times, dict) and "end" not in times:
            part.update(time={**times, "end": at})
    message.fail(INTERRUPTED, "Interrupted")
    message.add_error(INTERRUPTED, code="INTERRUPTED", at=at)


def close_interrupted(session: AgentUseSession, at: int) -> None:
    """Close what a recorder that is gone left open in ``session`` (left ``running``), at
    ``at``, when a later run found it, at every depth. AgentUse stops a session tree the
    same way (``stopSessionTree``, src/session/manager.ts:804-858: every session of the
    tree still running becomes ``error``, and its pending or running tool parts ``error``
    with the reason and ``time.end``). The session's last exchange, if it had not ended,
    ends as interrupted (:func:`_close_exchange`), and so does that of each subagent
    session still ``running``, which becomes ``error`` (code ``INTERRUPTED``), its own
    subagents first. The files go through ``session.writes``."""
    from .writer import AgentUseMessage, AgentUseSession  # only a writer needs them

    message = AgentUseMessage.open_last(session)
    if message is not None and "completed" not in message.info.get("time", {}) \
            and not message.info.get("assistant", {}).get("error"):
        _close_exchange(message, at)
    subagents = session.directory / SUBAGENT_DIR
    for directory in sorted(subagents.iterdir()) if subagents.is_dir() else []:
        if (directory / "session.json").is_file():
            child = AgentUseSession.open(directory, session.writes)
            if child.info.get("status") == "running":
                close_interrupted(child, at)
                child.set_status("error", at=at,
                                 error={"code": "INTERRUPTED", "message": INTERRUPTED})
