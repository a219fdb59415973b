"""Reads AgentUse trees, ours and the ones AgentUse itself wrote.

* :func:`scan_sessions` finds every session under a root at any depth; a
  corrupt ``session.json`` is skipped and reported in ``problems``.
* :func:`load_session` loads one session with its messages, parts and nested
  subagent sessions, and raises :class:`CorruptFileError` naming the file
  when any of them does not parse.

A subagent directory with no ``session.json`` and no file below it but temp
files (a crash between its ``mkdir`` and its first write) is ignored, as is an
empty exchange directory. Symbolic links are never followed out of a session: a linked file
(``session.json``, ``tools.json``, ``message.json``, a part) is a
:class:`CorruptFileError`; a linked directory (the session directory given to
:func:`load_session`, an exchange, ``part/``, ``subagent/``, a subagent) is
not entered (for the session directory itself: a :class:`CorruptFileError`).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ids import is_ulid, ulid_ms
from ..json_style import loads

__all__ = [
    "CorruptFileError",
    "DamagedFileError",
    "LoadedMessage",
    "LoadedSession",
    "ReadProblem",
    "SessionScan",
    "SessionSummary",
    "is_real_dir",
    "load_session",
    "read_json_object",
    "scan_sessions",
]

SESSION_FILE = "session.json"
SUBAGENT_DIR = "subagent"  # a session's subagent sessions are in this directory of it
OUR_VERSION_PREFIX = "sessiontape/"


class CorruptFileError(ValueError):
    """A file of the tree is missing, unreadable or not a JSON object."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class DamagedFileError(CorruptFileError):
    """A regular file of the tree, read whole, whose ``content`` is not a JSON object
    (empty, truncated, garbage): what a writer may rebuild, keeping those bytes aside."""

    def __init__(self, path: Path, reason: str, content: bytes) -> None:
        super().__init__(path, reason)
        self.content = content


@dataclass(frozen=True)
class ReadProblem:
    """A file a bulk reader skipped, and why."""

    path: Path
    reason: str


_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
LINK_REASON = "is a symbolic link (not followed)"
_READ_MORE = 65536  # bytes a read asks for beyond what a file's size said


def _read_regular_file(path: Path | str) -> bytes:
    """The bytes of ``path``; CorruptFileError for a link, a directory, a FIFO or a device
    (opened without following a link, and without blocking on a FIFO)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise CorruptFileError(Path(path), "file is missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptFileError(Path(path), LINK_REASON) from None
        raise CorruptFileError(Path(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CorruptFileError(Path(path), "not a regular file")
        # One read for the usual file (its size and one byte more, to see its end); one
        # that grew meanwhile, or gave less than its size, is read on to its end.
        data = os.read(fd, info.st_size + 1)
        if len(data) == info.st_size:
            return data
        chunks = [data]
        while chunk := os.read(fd, max(_READ_MORE, info.st_size)):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise CorruptFileError(Path(path), f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_json_object(path: Path | str) -> dict[str, Any]:
    """Parse ``path`` as a JSON object or raise :class:`CorruptFileError`
    (:class:`DamagedFileError` for a readable file that is not one)."""
    raw = _read_regular_file(path)
    try:
        data = loads(raw)
    except ValueError as exc:
        if not raw.strip():
            raise DamagedFileError(Path(path), "file is empty", raw) from None
        raise DamagedFileError(Path(path), f"invalid JSON: {exc}", raw) from None
    if not isinstance(data, dict):
        raise DamagedFileError(Path(path),
                               f"expected a JSON object, found {type(data).__name__}", raw)
    return data


def split_session_dir_name(name: str) -> tuple[str, str] | None:
    """``(sessionID, agentName)`` for a ``<ULID>-<rest>`` directory name, else None."""
    if len(name) > 27 and name[26] == "-" and is_ulid(name[:26]):
        return name[:26], name[27:]
    return None


@dataclass(frozen=True)
class SessionSummary:
    """A session found by :func:`scan_sessions`: its directory and ``session.json``."""

    directory: Path
    info: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.info.get("id") or self.directory.name[:26])

    @property
    def agent_name(self) -> str:
        """The agent name of the directory (``<ULID>-<agentName>``)."""
        return self.directory.name[27:]

    @property
    def parent_id(self) -> str | None:
        return self.info.get("parentSessionID")

    @property
    def status(self) -> str | None:
        return self.info.get("status")


@dataclass
class SessionScan:
    """What :func:`scan_sessions` found: sessions, and files it had to skip."""

    sessions: list[SessionSummary] = field(default_factory=list)
    problems: list[ReadProblem] = field(default_factory=list)


def _exists(path: Path | str) -> bool:
    """Whether anything is at ``path``, a dangling link included."""
    return os.path.lexists(path)


def is_real_dir(path: Path | str) -> bool:
    """A directory that is not a symbolic link."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _walk(top: Path, scan: SessionScan) -> None:
    """Depth-first, in name order, without recursion (any depth of folders)."""
    stack = [top]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            scan.problems.append(ReadProblem(directory, f"cannot list: {exc.strerror or exc}"))
            continue
        below = []
        for entry in entries:
            if entry.name.startswith(".") or is_ulid(entry.name) or entry.is_symlink():
                continue  # temp files, message directories, links out of the tree
            if not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path)
            if split_session_dir_name(entry.name) and _exists(path / SESSION_FILE):
                try:
                    scan.sessions.append(SessionSummary(path,
                                                        read_json_object(path / SESSION_FILE)))
                except CorruptFileError as exc:
                    scan.problems.append(ReadProblem(exc.path, exc.reason))
            below.append(path)
        stack.extend(reversed(below))


def scan_sessions(root: Path) -> SessionScan:
    """Every session directory under ``root``, at any depth (subagents included).

    ``root`` may be a data root (``.../agentuse``), a project's ``session/``
    directory or a session directory. Symbolic links are not followed.
    """
    scan = SessionScan()
    if split_session_dir_name(root.name) and _exists(root / SESSION_FILE):
        try:
            scan.sessions.append(SessionSummary(root, read_json_object(root / SESSION_FILE)))
        except CorruptFileError as exc:
            scan.problems.append(ReadProblem(exc.path, exc.reason))
    if root.is_dir():
        _walk(root, scan)
    return scan


@dataclass
class LoadedMessage:
    """One exchange: ``message.json`` and its parts, in order."""

    directory: Path
    info: dict[str, Any]
    parts: list[dict[str, Any]]


@dataclass
class LoadedSession:
    """One session with everything under it."""

    directory: Path
    info: dict[str, Any]
    tools: list[dict[str, Any]]
    messages: list[LoadedMessage]
    subagents: list[LoadedSession]

    @property
    def id(self) -> str:
        return str(self.info.get("id"))


def _number(value: Any) -> float:
    """A time field as a number (0 when it is missing or of the wrong type)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _part_start(part: dict[str, Any]) -> float:
    state = part.get("state")
    for holder in (part.get("time"), state.get("time") if isinstance(state, dict) else None):
        if isinstance(holder, dict) and _number(holder.get("start")):
            return _number(holder.get("start"))
    part_id = str(part.get("id", ""))
    return ulid_ms(part_id) if is_ulid(part_id) else 0


def _message_order(message: LoadedMessage) -> tuple[float, str]:
    time = message.info.get("time")
    created = _number(time.get("created")) if isinstance(time, dict) else 0
    return created, str(message.info.get("id", ""))


def _order_parts(parts: list[dict[str, Any]], ours: bool) -> list[dict[str, Any]]:
    """Our part IDs increase strictly; AgentUse's do not, so sort those by start time."""
    if ours:
        return sorted(parts, key=lambda p: str(p.get("id", "")))
    return sorted(parts, key=lambda p: (_part_start(p), str(p.get("id", ""))))


def _part_files(directory: str) -> list[str]:
    """The part files of an exchange (none when ``part/`` is missing or a link)."""
    part_dir = os.path.join(directory, "part")
    if not is_real_dir(part_dir):
        return []
    names = sorted(e.name for e in os.scandir(part_dir)
                   if e.name.endswith(".json") and not e.name.startswith("."))
    return [os.path.join(part_dir, name) for name in names]


def _load_message(directory: str, ours: bool, parts: bool) -> LoadedMessage | None:
    message_file = os.path.join(directory, "message.json")
    try:
        info = read_json_object(message_file)
    except CorruptFileError as exc:
        if not _exists(message_file) and not _part_files(directory):
            return None  # an exchange directory made just before a crash: nothing to lose
        raise exc from None
    if not parts:
        return LoadedMessage(Path(directory), info, [])
    return LoadedMessage(Path(directory), info,
                         _order_parts([read_json_object(p) for p in _part_files(directory)],
                                      ours))


def _crash_leftover(directory: Path) -> bool:
    """A session directory made just before a crash: no ``session.json``, and no file in
    it or below but temp files (``.``-names), only empty folders. Nothing to lose."""
    if _exists(directory / SESSION_FILE):
        return False
    stack = [directory]
    while stack:
        for entry in os.scandir(stack.pop()):
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif not entry.name.startswith("."):
                return False
    return True


def _tools(directory: str) -> list[dict[str, Any]]:
    tools_file = os.path.join(directory, "tools.json")
    try:
        tools = read_json_object(tools_file).get("tools", [])
    except CorruptFileError:
        if not _exists(tools_file):
            return []
        raise
    if not isinstance(tools, list):
        raise CorruptFileError(Path(tools_file),
                               f"'tools' is a {type(tools).__name__}, not a list")
    return tools


def load_session(directory: Path, *, parts: bool = True) -> LoadedSession:
    """Load a session directory; raise :class:`CorruptFileError` for any bad file.

    ``parts=False`` skips the part files (each message's ``parts`` is then
    empty): enough for totals, which ``message.json`` holds, and much faster.
    """
    directory = Path(directory)
    if directory.is_symlink():
        raise CorruptFileError(directory, LINK_REASON)
    top = str(directory)
    info = read_json_object(os.path.join(top, SESSION_FILE))
    ours = str(info.get("version", "")).startswith(OUR_VERSION_PREFIX)
    tools = _tools(top)
    messages = []
    for entry in sorted(os.scandir(top), key=lambda e: e.name):
        if is_ulid(entry.name) and entry.is_dir(follow_symlinks=False):
            message = _load_message(entry.path, ours, parts)
            if message is not None:
                messages.append(message)
    messages.sort(key=_message_order)
    subagents = []
    sub_root = os.path.join(top, SUBAGENT_DIR)
    if is_real_dir(sub_root):
        for entry in sorted(os.scandir(sub_root), key=lambda e: e.name):
            if split_session_dir_name(entry.name) and entry.is_dir(follow_symlinks=False) \
                    and not _crash_leftover(Path(entry.path)):
                subagents.append(load_session(Path(entry.path), parts=parts))
    return LoadedSession(directory, info, tools, messages, subagents)
