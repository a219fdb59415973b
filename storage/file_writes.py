"""Whole-file atomic writes and whole-line appends, in this thread or in a helper process.

:func:`atomic_write` writes one file so that a reader sees the old or the new
content, never half; :func:`append_lines` appends whole lines to a log under an
exclusive ``flock``. :class:`FileWorker` does both in a helper process: the
recorder's writer thread hands it each batch of the AgentUse tree (a few files
per tool call) and of the replay log in one message each and waits for the
answer, so the batch is on disk when :meth:`FileWorker.write` or
:meth:`FileWorker.append` returns, as it would be written here.

Why a process: on ext4 creating a file costs 0.2-0.6 ms of kernel time, and
every system call of a Python thread gives up the GIL and must win it back
from the event-loop thread, which a busy run holds almost all the time. In
the writer thread the ~13 calls per tool call for the tree and ~8 per batch
for the log cost the run its 5-7% of recording overhead; in the helper they
cost it next to nothing (docs/performance.md, "Recording overhead"). When the
helper cannot start or dies, the batch is written here instead (nothing is
lost; a warning says so once).

Run as a script, this module is the helper: it reads batches on stdin and
answers each on stdout. It imports nothing but the standard library, so that
it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import pickle
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["FILE_MODE", "WORKER", "FileWorker", "LogFiles", "append_lines", "atomic_write",
           "open_log", "write_all", "write_here"]

FILE_MODE = 0o600
_HEADER = 8  # bytes of a frame's big-endian length
_MAX_STARTS = 3  # helpers started per process before writing here for good
MAX_OPEN_LOGS = 64  # log files a helper (or this thread, without one) keeps open

logger = logging.getLogger("sessiontape")

# One failure of a batch: the file's index in the batch, errno (None for an error that
# is not an OSError), the message.
_Failure = tuple[int, "int | None", str]


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``.

    ``os.write`` may write only part (a disk filling up writes what fits, and
    the next call fails): this loops until all is written or an error is raised.
    """
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so a reader sees the old or the new file, never half.

    The bytes go to a temporary file in the same directory (mode 0600), which
    is then renamed over ``path``. The file is not fsync'ed: a rename is
    atomic with respect to other processes and to a crash of this one, which
    is the promise made here (see docs/reliability.md for power loss). On any
    error (a full or read-only disk) ``path`` keeps its old content, the
    temporary file is removed, and the error is raised as it was.
    """
    directory, name = os.path.split(os.fspath(path))
    # The name is cut so that the temporary one fits where ``path``'s does (255 bytes).
    tmp = os.path.join(directory, f".{name[:100]}.{os.getpid()}.{id(data):x}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_TRUNC, FILE_MODE)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # never hide the error that matters
            os.unlink(tmp)
        raise


def open_log(path: str | os.PathLike[str]) -> int:
    """Open a log for appending and reading its end (created 0600); a symbolic link is
    refused (``ELOOP``), never written through."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return os.open(path, flags, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "is a symbolic link; not writing through it",
                          os.fspath(path)) from None
        raise


class LogFiles:
    """Open log descriptors by path, the least recently used closed beyond ``limit``."""

    def __init__(self, opener: Callable[[str], int] = open_log,
                 limit: int = MAX_OPEN_LOGS) -> None:
        self.opener = opener
        self.limit = limit
        self._fds: OrderedDict[str, int] = OrderedDict()

    def get(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = self.opener(path)
            while len(self._fds) > self.limit:
                os.close(self._fds.popitem(last=False)[1])
        self._fds.move_to_end(path)
        return fd

    def drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for path in list(self._fds):
            self.drop(path)


def _same_file(path: str, fd: int) -> bool:
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except FileNotFoundError:
        return False


def append_lines(logs: LogFiles, path: str | os.PathLike[str], data: bytes,
                 sync: bool = False) -> None:
    """Append ``data`` (whole lines) to the log at ``path`` in one ``write``, under an
    exclusive ``flock`` so that writers in several processes never interleave.

    The file is the one now at the path (a rotated or deleted log is opened again); a
    last line without its newline (a writer killed mid-line) is closed first, so the new
    lines stay whole; a failed write (a full disk) cuts off what it wrote and raises, the
    file as it was. ``sync``: fsync afterwards (after a turn's ``final_result``)."""
    path = os.fspath(path)
    while True:
        fd = logs.get(path)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _same_file(path, fd):
            break
        fcntl.flock(fd, fcntl.LOCK_UN)  # rotated or deleted, maybe while we waited
        logs.drop(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            write_all(fd, data)
        except OSError:
            with contextlib.suppress(OSError):  # we hold the lock: leave whole lines only
                if os.fstat(fd).st_size > size:
                    os.ftruncate(fd, size)
            raise
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
    if sync:
        os.fsync(fd)


# An operation of a batch: ("write", path, bytes) or ("append", path, bytes, sync).
_Op = tuple[Any, ...]


def _do(op: _Op, logs: LogFiles) -> None:
    if op[0] == "write":
        atomic_write(op[1], op[2])
    else:
        append_lines(logs, op[1], op[2], op[3])


def _do_each(ops: Sequence[_Op], logs: LogFiles) -> list[_Failure]:
    """Do every operation; the failures (a failure skips that operation only)."""
    failures: list[_Failure] = []
    for index, op in enumerate(ops):
        try:
            _do(op, logs)
        except OSError as exc:
            failures.append((index, exc.errno, exc.strerror or str(exc)))
        except Exception as exc:  # reported like the others, never stops the batch
            failures.append((index, None, f"{type(exc).__name__}: {exc}"))
    return failures


def _raise_first(ops: Sequence[_Op], failures: list[_Failure]) -> None:
    if failures:
        index, number, message = failures[0]
        path = os.fspath(ops[index][1])
        if number is None:
            raise OSError(f"{message}: {path}")
        raise OSError(number, message, path)


def _writes(files: Sequence[tuple[str | os.PathLike[str], bytes]]) -> list[_Op]:
    return [("write", path, data) for path, data in files]


def write_here(files: Sequence[tuple[str | os.PathLike[str], bytes]]) -> None:
    """Write every file with :func:`atomic_write`, in order, in this thread. A failure skips
    that file only; the first is raised once the others are written."""
    ops = _writes(files)
    _raise_first(ops, _do_each(ops, LogFiles()))


class FileWorker:
    """A helper process that writes batches of files (started on first use).

    Used by one thread at a time (the recorder's writer thread); :meth:`close`
    ends the helper, and a later :meth:`write` starts a new one. After a fork
    the child starts its own helper.
    """

    def __init__(self) -> None:
        self.in_process = False  # True: always write here (tests that fake the file system)
        self._logs_here = LogFiles()  # the logs appended to here, when the helper cannot
        self._process: subprocess.Popen[bytes] | None = None
        self._pid = 0  # the process that started the helper
        self._starts = 0
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The process id of this process's running helper, or None."""
        process = self._process
        if process is None or self._pid != os.getpid() or process.poll() is not None:
            return None
        return process.pid

    def write(self, files: Sequence[tuple[str | os.PathLike[str], bytes]]) -> None:
        """Write every file atomically, in order; on disk when this returns. A failure
        skips that file only; the first is raised (``OSError``) once the others are written."""
        if files:
            self._run(_writes(files))

    def append(self, path: str | os.PathLike[str], data: bytes, sync: bool = False) -> None:
        """:func:`append_lines` (whole lines, under the log's ``flock``), in the helper."""
        if data:
            self._run([("append", os.fspath(path), data, sync)])

    def _run(self, ops: list[_Op]) -> None:
        with self._lock:
            process = None if self.in_process else self._helper()
            if process is not None:
                try:
                    failures = self._send(process, ops)
                except (OSError, EOFError, pickle.UnpicklingError, ValueError) as exc:
                    self._lost(process, exc)
                    # The helper is gone: whatever it did not confirm is done here. A file
                    # rewritten with the same bytes is harmless; lines it may have appended
                    # before it died are not (a log is only appended to), so those are
                    # written again only if the log does not end with them already.
                    ops = [op for op in ops if op[0] == "write" or not _ends_with(op[1], op[2])]
                else:
                    _raise_first(ops, failures)
                    return
            _raise_first(ops, _do_each(ops, self._logs_here))

    def close(self, timeout: float = 5.0) -> None:
        """End the helper (it writes the batch it holds first) and reap it; close the logs
        opened here."""
        with self._lock:
            self._logs_here.close()
            process, self._process = self._process, None
            if process is None or self._pid != os.getpid():
                return
            _close_pipes(process)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _helper(self) -> subprocess.Popen[bytes] | None:
        if self._process is not None and self._pid == os.getpid():
            return self._process
        self._process = None  # one inherited through a fork is the parent's
        if self._starts >= _MAX_STARTS or not os.path.isfile(__file__) or not sys.executable:
            return None
        self._starts += 1
        try:
            # -I -S: no environment, user site or site-packages; the helper needs none.
            # A session of its own: a Ctrl-C typed at the terminal is the parent's alone,
            # even while the helper starts (before it ignores SIGINT itself).
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0,
                start_new_session=True)
        except OSError as exc:
            logger.warning("sessiontape: could not start the file-writing helper (%s); "
                           "the writer thread writes the files itself", exc)
            self._starts = _MAX_STARTS
            return None
        self._pid = os.getpid()
        return self._process

    @staticmethod
    def _send(process: subprocess.Popen[bytes], ops: list[_Op]) -> list[_Failure]:
        assert process.stdin is not None and process.stdout is not None
        _put_frame(process.stdin.fileno(), ops)
        failures: list[_Failure] = _get_frame(process.stdout.fileno())
        return failures

    def _lost(self, process: subprocess.Popen[bytes], exc: BaseException) -> None:
        if self._starts < _MAX_STARTS:
            logger.warning("sessiontape: the file-writing helper stopped (%s); "
                           "the writer thread wrote its batch and starts a new helper", exc)
        else:
            logger.warning("sessiontape: the file-writing helper stopped (%s); "
                           "the writer thread writes the files itself from now on", exc)
        self._process = None
        _close_pipes(process)
        with contextlib.suppress(OSError):
            process.kill()
        process.wait()


def _ends_with(path: str, data: bytes) -> bool:
    """Whether the file at ``path`` ends with ``data`` (read from its end only)."""
    try:
        with open(path, "rb") as file:
            size = file.seek(0, os.SEEK_END)
            if size < len(data):
                return False
            file.seek(size - len(data))
            return file.read(len(data)) == data
    except OSError:
        return False


def _close_pipes(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _put_frame(fd: int, value: object) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    write_all(fd, len(payload).to_bytes(_HEADER, "big") + payload)


def _read_exactly(fd: int, size: int) -> bytes:
    """``size`` bytes from ``fd`` (a pipe returns what it has: read until all came)."""
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            raise EOFError("the other end closed the pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _get_frame(fd: int) -> Any:
    size = int.from_bytes(_read_exactly(fd, _HEADER), "big")
    return pickle.loads(_read_exactly(fd, size))


def serve(requests: int, replies: int) -> None:
    """The helper's loop on two file descriptors: a batch of operations in, its failures
    out, until the parent closes the pipe (or dies: a batch not received whole is not
    written)."""
    logs = LogFiles()
    while True:
        try:
            ops = _get_frame(requests)
        except EOFError:
            return
        _put_frame(replies, _do_each(ops, logs))


WORKER = FileWorker()

if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for the parent, which closes us
    serve(sys.stdin.fileno(), sys.stdout.fileno())
