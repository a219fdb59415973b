"""What is wrong with the recorded layouts, and the repairs that are safe (``sessiontape doctor``).

:func:`diagnose` reads only. It checks the item store (its header and size,
:func:`~.db.damage`, then SQLite's ``PRAGMA quick_check``; whether it can be written), each
link of a conversation to its AgentUse tree (moved: found at its place under today's roots;
dangling: found nowhere), each top-level session of the project's AgentUse root and of the
links (a ``session.json`` or another file that does not parse, a ``running`` session whose
recorder is gone, a tree sessiontape wrote that no link names), each replay log (a torn last
line, malformed lines) and the catalog (damaged, or of an older schema). Each
:class:`Finding` says what is wrong and how to repair it.

:func:`repair` does what is safe, as the next run would: relinks a moved tree (or a tree
whose ``session.json`` names a conversation with no link, or a dangling one), rebuilds the
catalog (a cache), closes a dead exchange and rebuilds a damaged ``session.json``
(:meth:`~.agentuse_writer.AgentUseSession.recover`, the damaged bytes kept aside), each
under the session's :class:`~.liveness.RecordingLock` taken alone (never while a recorder
records there), and ends a torn last log line with its newline under the log's ``flock``
(:func:`~.file_writes.append_lines`, as the log's next writer does). It never deletes or
rewrites a log line or a row of the item store's tables (only a link is written), and never
touches a damaged store: its finding says how to recover it (``sqlite3 ... .recover``).
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agentuse.liveness import INTERRUPTED, RecordingLock, recorder_alive
from ..agentuse.reader import (
    OUR_VERSION_PREFIX,
    SESSION_FILE,
    SUBAGENT_DIR,
    CorruptFileError,
    DamagedFileError,
    is_real_dir,
    load_session,
    read_json_object,
    scan_sessions,
    split_session_dir_name,
)
from ..db import DamagedDatabase, connect, connect_readonly, damage, immediate, unwritable
from ..paths import AgentUseRoots, Locations
from ..skillet.links import SCHEMA as LINKS_SCHEMA
from ..skillet.links import find_linked_dir, link_rows
from ..skillet.log_owners import find_log_path, owner_pair
from ..skillet.log_reader import SessionLogReader, open_log
from ..tables import LINKS_TABLE
from ..times import now_ms
from .index import SCHEMA_VERSION, Catalog, default_catalog_path, stored_schema

if TYPE_CHECKING:
    from ..agentuse.writer import AgentUseSession

__all__ = ["ERROR", "FIX", "NOTE", "Finding", "Repaired", "diagnose", "repair"]

FIX = "sessiontape doctor --fix"  # the repair command of what repair() repairs
ERROR = "error"  # something to repair (or that only its owner can)
NOTE = "note"  # damage of the past: lost, nothing left to repair (readers skip it)
_Pair = tuple[str, str]


@dataclass(frozen=True)
class Finding:
    """One thing wrong: its ``kind``, the ``path`` concerned, ``problem`` (what is wrong),
    ``repair`` (the command or step that repairs it; None: nothing to repair),
    ``fixable`` (whether :func:`repair` does it) and ``severity`` (:data:`ERROR` or
    :data:`NOTE`). ``pair`` is the conversation concerned, and ``target`` the tree a link
    is to name (the relinks)."""

    kind: str
    path: Path
    problem: str
    repair: str | None
    fixable: bool = False
    severity: str = ERROR
    pair: _Pair | None = None
    target: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path), "problem": self.problem,
                "repair": self.repair, "fixable": self.fixable, "severity": self.severity,
                "user_id": self.pair[0] if self.pair else None,
                "session_name": self.pair[1] if self.pair else None,
                "target": str(self.target) if self.target is not None else None}


@dataclass(frozen=True)
class Repaired:
    """What :func:`repair` did about ``finding`` (``done``), or why it did not."""

    finding: Finding
    done: bool
    how: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.finding.kind, "path": str(self.finding.path), "done": self.done,
                "how": self.how}


# -- diagnose ---------------------------------------------------------------------------


def _sqlite_damage(path: Path) -> DamagedDatabase | None:
    """What is wrong with the SQLite file at ``path``: its header and size
    (:func:`~.db.damage`), else SQLite's ``quick_check`` on a read-only connection."""
    damaged = damage(path)
    if damaged is not None:
        return damaged
    try:
        conn = connect_readonly(path)
        if conn is None:
            return None
        with closing(conn):
            rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
    except sqlite3.OperationalError:
        return None  # locked, or not readable here: not damage
    except sqlite3.DatabaseError as exc:
        return DamagedDatabase(path, str(exc))
    return None if rows == ["ok"] else DamagedDatabase(path, "; ".join(rows[:3]))


def _store(where: Locations) -> list[Finding]:
    damaged = _sqlite_damage(where.store_file)
    if damaged is None:
        reason = unwritable(where.store_file)
        if reason is None:
            return []
        blocked = where.store_file if reason == "it is read-only" else where.store_file.parent
        return [Finding("store-unwritable", where.store_file,
                        f"the item store cannot be written ({reason}): runs store nothing "
                        "in it, and no link can be repaired",
                        f"chmod u+w {shlex.quote(str(blocked))}")]
    return [Finding("store-damaged", where.store_file,
                    f"the item store is damaged ({damaged.reason}): nothing is run or stored "
                    "until it is repaired, and each conversation's log and AgentUse tree are "
                    "listed apart (the links between them are kept in it)", damaged.repair)]


class _Trees:
    """The links and top-level sessions of one diagnosis."""

    def __init__(self, where: Locations, writable: bool) -> None:
        self.where = where
        self.writable = writable  # the store can be written: links can be repaired
        self.links: dict[_Pair, str] = {}  # every link, as stored
        self.found: dict[_Pair, Path] = {}  # the linked trees found today
        self.findings: list[Finding] = []
        self.dangling: dict[_Pair, Finding] = {}
        self.linked = False  # the links were read (the store is not damaged)

    def check_links(self) -> None:
        self.linked = True
        roots = AgentUseRoots.today(self.where.agentuse_root)
        for user, name, linked in link_rows(self.where.store_file):
            pair = (user, name)
            self.links[pair] = linked
            today = find_linked_dir(linked, roots)
            if today is None or not is_real_dir(Path(today)):
                self.dangling[pair] = Finding(
                    "link-dangling", Path(linked),
                    f"{user}/{name}: its AgentUse tree is gone, found nowhere today",
                    "none: the tree's files are lost; its turns are kept in its log and "
                    "the item store, and its next run begins a new AgentUse session",
                    pair=pair)
                continue
            self.found[pair] = Path(today)
            if today != linked:
                self.findings.append(Finding(
                    "link-moved", Path(linked),
                    f"{user}/{name}: its AgentUse tree moved to {today}", *self._relink(),
                    pair=pair, target=Path(today)))

    def check_sessions(self) -> None:
        linked_to = {str(path): pair for pair, path in self.found.items()}
        directories: dict[str, Path] = {str(p): p for p in self.found.values()}
        if self.where.agentuse_root is not None:
            scan = scan_sessions(self.where.agentuse_root)
            for summary in scan.sessions:
                if summary.parent_id is None:
                    directories.setdefault(str(summary.directory), summary.directory)
            for problem in scan.problems:
                if problem.path.name == SESSION_FILE and problem.path.parent.parent.name \
                        != SUBAGENT_DIR:
                    directories.setdefault(str(problem.path.parent), problem.path.parent)
        for text, directory in sorted(directories.items()):
            self._check_session(directory, linked_to.get(text))

    def _check_session(self, directory: Path, pair: _Pair | None) -> None:
        try:
            info = read_json_object(directory / SESSION_FILE)
        except DamagedFileError as exc:
            self.findings.append(Finding(
                "session-json-damaged", exc.path, exc.reason,
                FIX if pair else "the next run of its conversation rebuilds it",
                pair is not None, pair=pair))
            return
        except CorruptFileError as exc:
            self.findings.append(Finding("tree-unreadable", exc.path, exc.reason, None,
                                         severity=NOTE, pair=pair))
            return
        try:
            load_session(directory)
        except CorruptFileError as exc:
            self.findings.append(Finding(
                "tree-unreadable", exc.path, f"{exc.reason} (readers show the rest of the "
                "session; this file's content is lost)", None, severity=NOTE, pair=pair))
        if info.get("status") == "running" and recorder_alive(directory, info) is False:
            self.findings.append(Finding(
                "exchange-dead", directory / SESSION_FILE,
                "running, but its recorder is gone (killed): its last exchange was left open",
                FIX, True, pair=pair))
        if pair is None and self.linked:
            self._unlinked(directory, info)

    def _unlinked(self, directory: Path, info: dict[str, Any]) -> None:
        """A tree sessiontape wrote that no link names: relinked when its conversation
        has no link, or a dangling one."""
        conversation = info.get("conversation")
        if not str(info.get("version", "")).startswith(OUR_VERSION_PREFIX) \
                or not isinstance(conversation, dict):
            return
        user, name = conversation.get("user"), conversation.get("name")
        if not isinstance(user, str) or not isinstance(name, str):
            return
        pair = (user, name)
        if pair in self.found:
            return  # the conversation went on in another tree (this one was begun again)
        what = (f"{user}/{name}: its link names {self.links[pair]}, which is gone"
                if pair in self.links else f"{user}/{name}: no link names this tree")
        self.dangling.pop(pair, None)
        self.findings.append(Finding(
            "link-dangling" if pair in self.links else "tree-unlinked", directory, what,
            *self._relink(), pair=pair, target=directory))

    def _relink(self) -> tuple[str, bool]:
        """A relink's repair, and whether :func:`repair` can do it (the store written)."""
        if self.writable:
            return FIX, True
        return "make the item store writable, then " + FIX, False

    def all(self) -> list[Finding]:
        return [*self.dangling.values(), *self.findings]


def _logs(logs_root: Path) -> list[Finding]:
    """Each log's torn last line and malformed lines (a link, a FIFO: not read)."""
    findings = []
    for path in sorted(logs_root.glob("*/*.jsonl")):
        try:
            fd = open_log(path)
            try:
                size = os.fstat(fd).st_size
                torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
            finally:
                os.close(fd)
            reader = SessionLogReader(path)
            entries = reader.entries()
        except OSError:
            continue
        pair = owner_pair(path)
        lines = [p.line for p in reader.problems]
        if torn:
            findings.append(Finding(
                "log-torn", path, "its last line has no newline (a writer was killed while "
                "writing it); the log's next writer ends it", FIX, True, pair=pair))
            if lines and (not entries or lines[-1] > entries[-1].line):
                lines.pop()  # the torn line itself
        if lines:
            findings.append(Finding(
                "log-lines-malformed", path,
                "not log entries, skipped by readers (the log is never rewritten): "
                f"{'lines' if len(lines) > 1 else 'line'} {', '.join(map(str, lines))}",
                None, severity=NOTE, pair=pair))
    return findings


def _catalog(path: Path) -> list[Finding]:
    if not os.path.lexists(path):
        return []
    damaged = _sqlite_damage(path)
    version = stored_schema(path) if damaged is None else None
    if version is not None and version > SCHEMA_VERSION:
        return [Finding("catalog-newer", path, f"schema version {version}, a newer "
                        "sessiontape's: this one reads the layouts directly", None,
                        severity=NOTE)]
    if version == SCHEMA_VERSION:
        return []
    problem = (f"damaged ({damaged.reason})" if damaged is not None else
               "not a catalog" if version is None else f"of an older schema ({version})")
    return [Finding("catalog-damaged", path, f"the catalog is {problem}: a cache, rebuilt "
                    "from the layouts", FIX, True)]


def diagnose(where: Locations | None = None, catalog: Path | None = None) -> list[Finding]:
    """Everything wrong in the layouts of ``where`` (default: as the environment resolves
    them) and the catalog at ``catalog`` (default: :func:`~.catalog.default_catalog_path`).
    Reads only."""
    where = where or Locations.resolve()
    findings = _store(where)
    trees = _Trees(where, writable=not findings)
    if not any(finding.kind == "store-damaged" for finding in findings):
        trees.check_links()
    trees.check_sessions()
    return [*findings, *trees.all(), *_logs(where.logs_root),
            *_catalog(catalog or default_catalog_path())]


# -- repair -----------------------------------------------------------------------------


def _link(store_file: Path, pair: _Pair, target: Path) -> str:
    """Link ``pair`` to ``target`` (its link row made, or set from what it named)."""
    with closing(connect(store_file)) as conn, immediate(conn):
        conn.execute(LINKS_SCHEMA)
        conn.execute(f"INSERT INTO {LINKS_TABLE} VALUES (?, ?, ?) ON CONFLICT "
                     "(user_id, session_name) DO UPDATE SET agentuse_dir = excluded.agentuse_dir",
                     (*pair, str(target)))
    return f"{pair[0]}/{pair[1]} linked to {target}"


def _close_dead(session: AgentUseSession, at: int) -> None:
    """Close the exchange a dead recorder left open, and the session as ``error``, as the
    conversation's next run would (:func:`~.liveness.close_interrupted`)."""
    from ..agentuse.liveness import close_interrupted

    close_interrupted(session, at)
    session.set_status("error", at=at, error={"code": "INTERRUPTED", "message": INTERRUPTED})


def _recover(directory: Path, pair: _Pair | None, at: int, logs_root: Path) -> str:
    """Rebuild a damaged session.json from the files beside it, naming its conversation
    ``pair`` (and its log, in ``logs_root``) as the recorder does; its status:
    ``completed`` when its last exchange ended, else closed as a dead recorder's."""
    from ..agentuse.writer import AgentUseMessage, AgentUseSession

    try:
        read_json_object(directory / SESSION_FILE)
        return "it parses now"
    except DamagedFileError as exc:
        damaged = exc
    last: dict[str, Any] = {}
    messages = sorted(directory.glob("*/message.json"))
    if messages:
        last = read_json_object(messages[-1]).get("assistant") or {}
    split = split_session_dir_name(directory.name)
    place = last.get("path") or {}
    session = AgentUseSession.recover(
        directory, damaged, split[1] if split else "agent", at=at,
        model=str(last.get("modelID") or "unknown"), project_root=str(place.get("root", "")),
        cwd=str(place.get("cwd", "")))
    if pair is not None:
        conversation = {"user": pair[0], "name": pair[1]}
        log = find_log_path(*pair, logs_root)
        if log is not None:
            conversation["log"] = str(log)
        session.info["conversation"] = conversation
    message = AgentUseMessage.open_last(session)
    if message is None or "completed" in message.info.get("time", {}):
        session.set_status("completed", at=at)
    else:
        _close_dead(session, at)
    return f"rebuilt (the damaged file kept as {session.info['recovered']['kept']})"


def _close(directory: Path, at: int) -> str:
    from ..agentuse.writer import AgentUseSession

    session = AgentUseSession.open(directory)
    if session.info.get("status") != "running":
        return "already closed"
    _close_dead(session, at)
    return "its open exchange closed as interrupted, the session as error"


def _locked(finding: Finding, at: int, logs_root: Path) -> Repaired:
    """A repair inside a session directory, under its recording lock taken alone."""
    directory = finding.path.parent
    lock = RecordingLock(directory)
    try:
        if not lock.acquire():
            return Repaired(finding, False, "a recorder is recording there: left as it is")
        if finding.kind == "exchange-dead":
            return Repaired(finding, True, _close(directory, at))
        return Repaired(finding, True, _recover(directory, finding.pair, at, logs_root))
    finally:
        lock.release()


def _end_torn_line(path: Path) -> str:
    from ..file_writes import LogFiles, append_lines

    logs = LogFiles()
    try:
        append_lines(logs, path, b"")  # under the log's flock, as its next writer would
    finally:
        logs.close()
    return "its last line ended with a newline"


def _repair_one(finding: Finding, where: Locations, catalog: Path, at: int) -> Repaired:
    kind = finding.kind
    if kind in ("link-moved", "link-dangling", "tree-unlinked"):
        assert finding.pair is not None and finding.target is not None
        if not is_real_dir(finding.target):
            return Repaired(finding, False, f"{finding.target} is gone: not linked")
        return Repaired(finding, True, _link(where.store_file, finding.pair, finding.target))
    if kind in ("exchange-dead", "session-json-damaged"):
        return _locked(finding, at, where.logs_root)
    if kind == "log-torn":
        return Repaired(finding, True, _end_torn_line(finding.path))
    with Catalog(catalog) as rebuilt:
        summary = rebuilt.refresh(where, full=True)
    return Repaired(finding, True,
                    f"rebuilt from the layouts (conversations: {summary.conversations})")


def repair(findings: Iterable[Finding], where: Locations | None = None,
           catalog: Path | None = None) -> list[Repaired]:
    """Repair the ``fixable`` findings (of :func:`diagnose` with the same ``where`` and
    ``catalog``), the catalog last; what each repair did, or why it did not (an error
    that stops one repair is said and the next is done)."""
    where = where or Locations.resolve()
    catalog = catalog or default_catalog_path()
    at = now_ms()
    ordered = sorted((f for f in findings if f.fixable), key=lambda f: f.kind.startswith("cat"))
    done = []
    for finding in ordered:
        try:
            done.append(_repair_one(finding, where, catalog, at))
        except (OSError, sqlite3.Error, CorruptFileError) as exc:
            done.append(Repaired(finding, False, f"failed: {exc}"))
    return done
