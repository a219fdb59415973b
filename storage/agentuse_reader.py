"""Reads AgentUse trees, ours and the ones AgentUse itself wrote.

* :func:`scan_sessions` finds every session under a root at any depth; a
  corrupt ``session.json`` is skipped and reported in ``problems``.
* :func:`load_session` loads one session with its messages, parts and nested
  subagent sessions, and raises :class:`CorruptFileError` naming the file
  when any of them does not parse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .ids import is_ulid, ulid_ms

__all__ = [
    "CorruptFileError",
    "LoadedMessage",
    "LoadedSession",
    "ReadProblem",
    "SessionScan",
    "SessionSummary",
    "load_session",
    "read_json_object",
    "scan_sessions",
]

SESSION_FILE = "session.json"
OUR_VERSION_PREFIX = "sessiontape/"


class CorruptFileError(ValueError):
    """A file of the tree is missing, unreadable or not a JSON object."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class ReadProblem:
    """A file a bulk reader skipped, and why."""

    path: Path
    reason: str


def read_json_object(path: Path) -> dict[str, Any]:
    """Parse ``path`` as a JSON object or raise :class:`CorruptFileError`."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise CorruptFileError(path, "file is missing") from None
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        reason = "file is empty" if path.stat().st_size == 0 else f"invalid JSON: {exc}"
        raise CorruptFileError(path, reason) from None
    if not isinstance(data, dict):
        raise CorruptFileError(path, f"expected a JSON object, found {type(data).__name__}")
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


def _walk(directory: Path, scan: SessionScan) -> None:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        scan.problems.append(ReadProblem(directory, f"cannot list: {exc.strerror or exc}"))
        return
    for entry in entries:
        if entry.name.startswith(".") or is_ulid(entry.name) or entry.is_symlink():
            continue  # temp files, message directories, links out of the tree
        if not entry.is_dir():
            continue
        path = Path(entry.path)
        if split_session_dir_name(entry.name) and (path / SESSION_FILE).exists():
            try:
                scan.sessions.append(SessionSummary(path, read_json_object(path / SESSION_FILE)))
            except CorruptFileError as exc:
                scan.problems.append(ReadProblem(exc.path, exc.reason))
        _walk(path, scan)


def scan_sessions(root: Path) -> SessionScan:
    """Every session directory under ``root``, at any depth (subagents included).

    ``root`` may be a data root (``.../agentuse``), a project's ``session/``
    directory or a session directory. Symbolic links are not followed.
    """
    scan = SessionScan()
    if split_session_dir_name(root.name) and (root / SESSION_FILE).exists():
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


def _part_start(part: dict[str, Any]) -> int:
    for holder in (part.get("time"), (part.get("state") or {}).get("time")):
        if isinstance(holder, dict) and isinstance(holder.get("start"), (int, float)):
            return int(holder["start"])
    part_id = str(part.get("id", ""))
    return ulid_ms(part_id) if is_ulid(part_id) else 0


def _order_parts(parts: list[dict[str, Any]], ours: bool) -> list[dict[str, Any]]:
    """Our part IDs increase strictly; AgentUse's do not, so sort those by start time."""
    if ours:
        return sorted(parts, key=lambda p: str(p.get("id", "")))
    return sorted(parts, key=lambda p: (_part_start(p), str(p.get("id", ""))))


def _load_message(directory: Path, ours: bool, parts: bool) -> LoadedMessage | None:
    if not (directory / "message.json").exists():
        part_dir = directory / "part"
        if not (part_dir.is_dir() and any(part_dir.glob("[!.]*.json"))):
            return None  # an exchange directory made just before a crash: nothing to lose
    info = read_json_object(directory / "message.json")
    if not parts:
        return LoadedMessage(directory, info, [])
    part_dir = directory / "part"
    part_files = sorted(part_dir.glob("[!.]*.json")) if part_dir.is_dir() else []
    return LoadedMessage(directory, info, _order_parts([read_json_object(p) for p in part_files],
                                                       ours))


def load_session(directory: Path, *, parts: bool = True) -> LoadedSession:
    """Load a session directory; raise :class:`CorruptFileError` for any bad file.

    ``parts=False`` skips the part files (each message's ``parts`` is then
    empty): enough for totals, which ``message.json`` holds, and much faster.
    """
    directory = Path(directory)
    info = read_json_object(directory / SESSION_FILE)
    ours = str(info.get("version", "")).startswith(OUR_VERSION_PREFIX)
    tools_file = directory / "tools.json"
    tools = read_json_object(tools_file).get("tools", []) if tools_file.exists() else []
    messages = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if is_ulid(entry.name) and entry.is_dir(follow_symlinks=False):
            message = _load_message(Path(entry.path), ours, parts)
            if message is not None:
                messages.append(message)
    messages.sort(key=lambda m: (m.info.get("time", {}).get("created", 0), m.info.get("id", "")))
    subagents = []
    sub_root = directory / "subagent"
    if sub_root.is_dir():
        for entry in sorted(os.scandir(sub_root), key=lambda e: e.name):
            if split_session_dir_name(entry.name) and entry.is_dir(follow_symlinks=False):
                subagents.append(load_session(Path(entry.path), parts=parts))
    return LoadedSession(directory, info, tools, messages, subagents)
