"""Whole-file atomic writes, in this thread or in a helper process.

:func:`atomic_write` writes one file so that a reader sees the old or the new
content, never half. :class:`FileWorker` writes a batch of such files in a
helper process: the recorder's writer thread hands it each batch of the
AgentUse tree (a few files per tool call) in one message and waits for the
answer, so the batch is on disk when :meth:`FileWorker.write` returns, as it
would be written here.

Why a process: on ext4 creating a file costs 0.2-0.6 ms of kernel time, and
every system call of a Python thread gives up the GIL and must win it back
from the event-loop thread, which a busy run holds almost all the time. In
the writer thread the ~13 calls per tool call cost the run its 5-7% of
recording overhead; in the helper they cost it nothing (docs/performance.md,
"Recording overhead"). When the helper cannot start or dies, the batch is
written here instead (nothing is lost; a warning says so once).

Run as a script, this module is the helper: it reads batches on stdin and
answers each on stdout. It imports nothing but the standard library, so that
it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["FILE_MODE", "WORKER", "FileWorker", "atomic_write", "write_all", "write_here"]

FILE_MODE = 0o600
_HEADER = 8  # bytes of a frame's big-endian length
_MAX_STARTS = 3  # helpers started per process before writing here for good

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
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{id(data):x}.tmp")
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


def _write_each(files: Sequence[tuple[Any, bytes]]) -> list[_Failure]:
    """Write every file; the failures (a failure skips that file only)."""
    failures: list[_Failure] = []
    for index, (path, data) in enumerate(files):
        try:
            atomic_write(path, data)
        except OSError as exc:
            failures.append((index, exc.errno, exc.strerror or str(exc)))
        except Exception as exc:  # reported like the others, never stops the batch
            failures.append((index, None, f"{type(exc).__name__}: {exc}"))
    return failures


def _raise_first(files: Sequence[tuple[Any, bytes]], failures: list[_Failure]) -> None:
    if failures:
        index, number, message = failures[0]
        path = os.fspath(files[index][0])
        if number is None:
            raise OSError(f"{message}: {path}")
        raise OSError(number, message, path)


def write_here(files: Sequence[tuple[str | os.PathLike[str], bytes]]) -> None:
    """Write every file with :func:`atomic_write`, in order, in this thread. A failure skips
    that file only; the first is raised once the others are written."""
    _raise_first(files, _write_each(files))


class FileWorker:
    """A helper process that writes batches of files (started on first use).

    Used by one thread at a time (the recorder's writer thread); :meth:`close`
    ends the helper, and a later :meth:`write` starts a new one. After a fork
    the child starts its own helper.
    """

    def __init__(self) -> None:
        self.in_process = False  # True: always write here (tests that fake the file system)
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
        if not files:
            return
        with self._lock:
            process = None if self.in_process else self._helper()
            if process is not None:
                try:
                    failures = self._send(process, files)
                except (OSError, EOFError, pickle.UnpicklingError, ValueError) as exc:
                    self._lost(process, exc)
                else:
                    _raise_first(files, failures)
                    return
        write_here(files)  # every file again: a rewrite with the same bytes is harmless

    def close(self, timeout: float = 5.0) -> None:
        """End the helper (it writes the batch it holds first) and reap it."""
        with self._lock:
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
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        except OSError as exc:
            logger.warning("sessiontape: could not start the file-writing helper (%s); "
                           "the writer thread writes the files itself", exc)
            self._starts = _MAX_STARTS
            return None
        self._pid = os.getpid()
        return self._process

    @staticmethod
    def _send(process: subprocess.Popen[bytes],
              files: Sequence[tuple[str | os.PathLike[str], bytes]]) -> list[_Failure]:
        assert process.stdin is not None and process.stdout is not None
        _put_frame(process.stdin.fileno(), [(os.fspath(path), data) for path, data in files])
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
    """The helper's loop on two file descriptors: a batch ``[(path, bytes), ...]`` in, its
    failures out, until the parent closes the pipe (or dies: a batch not received whole is
    not written)."""
    while True:
        try:
            files = _get_frame(requests)
        except EOFError:
            return
        _put_frame(replies, _write_each(files))


WORKER = FileWorker()

if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for the parent, which closes us
    serve(sys.stdin.fileno(), sys.stdout.fileno())
