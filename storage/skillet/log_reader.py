"""Reading skillet JSONL replay logs: whole files and live ones.

* :class:`SessionLogReader` reads a file once: its entries, and its turns,
  where a turn whose ``final_result`` never came gets a synthetic one.
* :class:`SessionLogTailer` follows one file as it grows.

Both skip a malformed line and report it (file and line number) in
``problems``; a UTF-8 BOM and CRLF line ends are accepted.

Both read only regular files and never follow a symbolic link: a path that
is a link, a directory, a FIFO or a device raises :class:`OSError`
(``ELOOP``, ``EISDIR``, ``EINVAL``) naming it, without blocking. Those, and
the reader's ``FileNotFoundError``, are the only errors they raise.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..json_style import loads
from .log_entries import step_of

__all__ = [
    "INCOMPLETE_TURN",
    "LogEntry",
    "LogProblem",
    "SessionLogReader",
    "SessionLogTailer",
    "Turn",
    "group_turns",
    "open_log",
]

INCOMPLETE_TURN = "[incomplete turn]"
_BOM = b"\xef\xbb\xbf"
# Blocks of 64 KiB: what is made of one block (its lines, their objects, the text printed)
# then stays below glibc's mmap threshold (128 KiB) and reuses warm memory; 1 MiB blocks
# made `log stream --json` 2.5x slower, paying page faults for fresh memory every block.
_READ_CHUNK = 1 << 16
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_log(path: Path) -> int:
    """A read-only descriptor of the regular file at ``path`` (never through a link).

    Raises FileNotFoundError, or OSError with ``ELOOP`` (a symbolic link),
    ``EISDIR`` (a directory) or ``EINVAL`` (a FIFO, socket or device).
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "is a symbolic link (not followed)", str(path)) from None
        raise
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a log file", str(path))
    raise OSError(errno.EINVAL, "not a regular file", str(path))


@dataclass(frozen=True)
class LogEntry:
    """One line of a log: ``kind`` and the whole object, with its line number."""

    kind: str
    data: dict[str, Any]
    line: int

    @property
    def timestamp(self) -> str:
        return str(self.data.get("timestamp", ""))


@dataclass(frozen=True)
class LogProblem:
    """A line that was skipped, and why."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class Turn:
    """One user message, the steps after it and its final result.

    ``complete`` is False when the log has no ``final_result`` for the turn;
    ``final`` then holds a synthetic one (the turn's text steps joined, or
    ``[incomplete turn]``). ``session_id`` is the AgentUse session its ``user_message``
    names (sessiontape's turns; None for skilled_crew's); ``model_calls`` are its
    ``model_call`` lines (its subagents' too).
    """

    user_input: Any
    steps: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    complete: bool = False
    started: str = ""
    ended: str = ""
    session_id: str | None = None
    model_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return str(self.final.get("text", ""))


def parse_line(raw: bytes) -> dict[str, Any]:
    """One log line as a dict with a string ``kind``; ValueError if it is not one."""
    try:
        data = loads(raw)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise ValueError("not a log entry (a JSON object with a string 'kind')")
    return data


def _close(turn: Turn) -> Turn:
    if not turn.complete:
        chunks = [s.get("text", "") for s in turn.steps if s.get("type") == "text"]
        turn.final = {"text": "".join(map(str, chunks)) or INCOMPLETE_TURN}
    return turn


def group_turns(entries: Iterable[LogEntry]) -> list[Turn]:
    """Group entries into turns (entries of unknown kinds are ignored)."""
    turns: list[Turn] = []
    current: Turn | None = None
    for entry in entries:
        if entry.kind == "user_message":
            if current is not None:
                turns.append(_close(current))
            named = entry.data.get("sessionId")
            current = Turn(entry.data.get("userInput"), started=entry.timestamp,
                           session_id=named if isinstance(named, str) else None)
        elif entry.kind == "model_call":
            if current is not None:
                current.model_calls.append(entry.data)
        elif entry.kind in ("step", "final_result", "compaction", "suspended"):
            if current is None:  # a log that starts mid-turn
                current = Turn(None, started=entry.timestamp)
            step = step_of(entry.kind, entry.data)
            if step is not None:
                current.steps.append(step)
            elif entry.kind == "final_result":
                final = entry.data.get("finalResult")
                current.final = final if isinstance(final, dict) else {"text": str(final or "")}
                current.model = entry.data.get("model")
                current.complete, current.ended = True, entry.timestamp
                turns.append(current)
                current = None
    if current is not None:
        turns.append(_close(current))
    return turns


class _LineParser:
    """Turns raw lines into entries, numbering lines and collecting problems."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.line = 0
        self.problems: list[LogProblem] = []

    def reset(self) -> None:
        self.line = 0

    def feed(self, raw: bytes) -> LogEntry | None:
        self.line += 1
        data = self._parse(raw, self.line)
        return None if data is None else LogEntry(data["kind"], data, self.line)

    def _parse(self, raw: bytes, number: int) -> dict[str, Any] | None:
        """Line ``number``'s object; None for a blank line or a malformed one (a problem)."""
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            return None
        try:
            return parse_line(raw)
        except ValueError as exc:
            self.problems.append(LogProblem(self.path, number, str(exc)))
            return None

    def objects(self, lines: list[bytes]) -> list[dict[str, Any]]:
        """The objects of the next ``lines``, as :meth:`feed` reads them, without making
        entries: the fast path for many lines."""
        found: list[dict[str, Any]] = []
        keep = found.append
        first = self.line + 1
        self.line += len(lines)
        for number, raw in enumerate(lines, first):
            # One orjson.loads for the usual line. An object with a string kind read from the
            # raw line is what _parse reads too: a CRLF's \r is JSON white space, and a BOM,
            # a blank line and what only the fallback parser reads all fail here.
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                data = None
            if not (isinstance(data, dict) and isinstance(data.get("kind"), str)):
                data = self._parse(raw, number)  # the careful way, its problem reported
            if data is not None:
                keep(data)
        return found


class SessionLogReader:
    """Reads one JSONL replay log."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._parser = _LineParser(self.path)
        self._entries: list[LogEntry] | None = None

    @property
    def problems(self) -> list[LogProblem]:
        """Lines skipped by :meth:`entries` (read the entries first)."""
        return self._parser.problems

    def entries(self) -> list[LogEntry]:
        """Every well-formed entry, in file order."""
        if self._entries is None:
            fd = open_log(self.path)
            with os.fdopen(fd, "rb") as file:
                data = file.read()
            lines = data.split(b"\n")
            self._entries = [e for e in map(self._parser.feed, lines) if e is not None]
        return self._entries

    def turns(self) -> list[Turn]:
        """The entries grouped into turns."""
        return group_turns(self.entries())


class SessionLogTailer:
    """Follows one log file as it grows.

    :meth:`poll` returns the entries completed since the last call. It holds
    back a partial last line until its newline arrives, starts over when the
    file is truncated, switches to the new file when the path is replaced
    (after reading what was left in the old one), and waits for a file that
    does not exist yet. A rewrite that leaves the file at least as long as
    before cannot be told from an append and is read as one.
    """

    def __init__(self, path: Path | str, *, from_end: bool = False) -> None:
        self.path = Path(path)
        self._parser = _LineParser(self.path)
        self._fd: int | None = None
        self._offset = 0
        self._partial = b""
        # The end is taken now: a file that appears later is read from its start.
        self._from_end = from_end
        if from_end:
            self._open()
            self._from_end = False

    @property
    def problems(self) -> list[LogProblem]:
        return self._parser.problems

    def _open(self) -> int | None:
        """Open the file afresh: its descriptor, or None while there is no file."""
        try:
            fd = self._fd = open_log(self.path)
        except FileNotFoundError:
            return None
        self._offset = 0
        self._partial = b""
        self._parser.reset()
        if self._from_end:
            self._skip_existing(fd)
        return fd

    def _skip_existing(self, fd: int) -> None:
        """Start after the last complete line, counting the lines skipped.

        A line still being written is read once complete, and problems keep
        the file's own line numbers.
        """
        position = 0
        while chunk := os.pread(fd, _READ_CHUNK, position):
            position += len(chunk)
            newlines = chunk.count(b"\n")
            if newlines:
                self._parser.line += newlines
                self._offset = position - len(chunk) + chunk.rfind(b"\n") + 1

    def _read_new(self, fd: int) -> Iterator[list[bytes]]:
        """The lines completed in the file since the last read, a block read at a time."""
        if os.fstat(fd).st_size < self._offset:  # truncated: start over
            self._offset, self._partial = 0, b""
            self._parser.reset()
        # A block at least as long as the partial line held: a long line takes O(log n)
        # growing reads and O(n) copying, not a copy of all of it per 64 KiB read.
        while chunk := os.pread(fd, max(_READ_CHUNK, len(self._partial)), self._offset):
            self._offset += len(chunk)
            lines = (self._partial + chunk).split(b"\n")
            self._partial = lines.pop()
            if lines:
                yield lines

    def _replaced(self, fd: int) -> bool:
        try:
            return not os.path.samestat(os.stat(self.path), os.fstat(fd))
        except FileNotFoundError:
            return False  # deleted: keep reading what we have until a new file appears

    def _new_lines(self) -> Iterator[list[bytes]]:
        """The lines completed since the last poll, a block read at a time: what a poll reads."""
        fd = self._fd if self._fd is not None else self._open()
        if fd is None:
            return
        yield from self._read_new(fd)
        if self._replaced(fd):
            if self._partial:  # the old file's last line, without its newline (torn: reported)
                yield [self._partial]
            os.close(fd)
            self._fd = None
            try:
                fd = self._open()
            except OSError:
                return  # the next poll raises why the new file cannot be read
            if fd is not None:
                yield from self._read_new(fd)

    def poll(self) -> list[LogEntry]:
        """Entries completed since the last poll (possibly none)."""
        feed = self._parser.feed
        return [entry for lines in self._new_lines() for entry in map(feed, lines)
                if entry is not None]

    def poll_objects(self) -> Iterator[list[dict[str, Any]]]:
        """What :meth:`poll` reads, as the entries' objects (no line numbers), one list per
        block read: quicker for many lines. Problems are in :attr:`problems` as each list
        is made."""
        objects = self._parser.objects
        for lines in self._new_lines():
            yield objects(lines)

    def follow(self, interval: float = 0.1,
               stop: Callable[[], bool] | None = None) -> Iterator[LogEntry]:
        """Yield entries as they arrive, polling every ``interval`` seconds until ``stop()``."""
        while not (stop and stop()):
            entries = self.poll()
            yield from entries
            if not entries:
                time.sleep(interval)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
