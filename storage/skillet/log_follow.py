"""Every skillet JSONL replay log under a root, caught up and then followed.

The library behind ``sessiontape log stream``:

* :class:`LogStream` finds every ``*.jsonl`` under the logs root, reads them
  oldest-modified first (:meth:`LogStream.catch_up`), then follows
  (:meth:`LogStream.follow`): appended lines, new files (in new folders too),
  truncated files (read again from the start), replaced files (a new inode at
  the path: the rest of the old file, then the new one), partial last lines
  (held back until their newline) and malformed lines (reported once, with
  file and line, through ``on_problem``). A root that does not exist yet is
  waited for. Each file is read by a
  :class:`sessiontape.storage.skillet.log_reader.SessionLogTailer`, in blocks of 64 KiB;
  ``on_entries`` gets a block's entries at once (the CLI formats and writes each block
  with one ``write``).
* :class:`StreamFilter` keeps the files of one user/session and the entries
  since a moment (:func:`sessiontape.storage.times.parse_since` reads ``10m``/``2h``/
  ``1d`` or ISO times).
* How entries look as text is not here: ``sessiontape.cli.transcript.EntryFormatter``.

How changes are found, and what that costs
-------------------------------------------
* With file-system notifications (watchfiles' Rust ``notify`` backend, inotify
  on Linux), only the files it reports changed are read; idle files cost
  nothing per tick. A folder reported as added is listed once (files created
  in it before its watch was set up would otherwise be missed). A change is
  seen 1-2 steps after it happened: :data:`BUSY_STEP_MS` while logs are being
  written, :data:`STEP_MS` when they have been quiet for :data:`BUSY_SECONDS`.
* The polling fallback (no watchfiles, ``--poll``, or a watcher that fails,
  e.g. at the inotify watch limit) keeps a small *hot set*: files that changed
  in the last :data:`HOT_SECONDS`, polled every ``poll_interval`` (0.1 s). The
  whole tree is rescanned (one ``stat`` per file) only every
  ``rescan_interval`` (1.5 s), to find new files and idle files that woke up.
  The trade-off: the first line written to a long-idle file, or to a new file,
  can take up to ``rescan_interval`` to show; later lines take up to
  ``poll_interval``. Per fast tick the cost is the hot set, not the tree.
* Open file descriptors are bounded: the least recently active files are
  *parked* (descriptor closed, offset kept) beyond :data:`MAX_OPEN_FILES` and
  reopened when they change. A file replaced while parked is read from the
  start of the new file; lines appended to the old one after it was parked
  are lost (a parked file changes only after a notification or a rescan
  reopened it, so this needs a replace within that window).
"""

from __future__ import annotations

import os
import re
import resource
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from ..names import old_log_name, sanitize_log_name
from ..times import iso_ms
from .log_owners import owner_pair
from .log_reader import LogEntry, SessionLogTailer

__all__ = [
    "HOT_SECONDS",
    "MAX_OPEN_FILES",
    "LogSource",
    "LogStream",
    "StreamFilter",
]

HOT_SECONDS = 10.0
MAX_OPEN_FILES = 2048
SUFFIX = ".jsonl"

# watchfiles: wake every STEP_MS while waiting (a change is returned 1-2 steps
# after it happened), group a burst of changes for at most DEBOUNCE_MS. While logs
# are being written (a change in the last BUSY_SECONDS) the step is BUSY_STEP_MS:
# half the delay, for twice the wake-ups (an idle follower stays at 2 ms: 1 ms would
# double its CPU time, 0.9% -> 1.8% of a core on the team machine).
STEP_MS = 2
BUSY_STEP_MS = 1
BUSY_SECONDS = 10.0
DEBOUNCE_MS = 20
WAIT_MS = 500


# -- what is being read ------------------------------------------------------------------

@dataclass(frozen=True)
class LogSource:
    """One log file: its path and the (sanitized) user folder and session file names; the
    raw names its owner record holds (:attr:`owner`, read once when first asked)."""

    path: str
    user: str
    session: str

    @cached_property
    def owner(self) -> tuple[str, str] | None:
        """The raw ``(user_id, session_name)`` of the log's owner record (sessiontape's), as
        ``sessions list`` names the conversation; None for a log without one."""
        return owner_pair(Path(self.path))

    @property
    def label(self) -> str:
        """``user/session`` as on disk, after the raw names when they differ:
        ``bob@example.com/trip plan (bob_example_com/trip_plan)``."""
        on_disk = f"{self.user}/{self.session}" if self.user else self.session
        if self.owner is None or self.owner == (self.user, self.session):
            return on_disk
        return f"{self.owner[0]}/{self.owner[1]} ({on_disk})"

    @classmethod
    def of(cls, root: str, path: str) -> LogSource:
        rel = os.path.relpath(path, root)
        folder, name = os.path.split(rel)
        session = name.removesuffix(SUFFIX)
        return cls(path, folder.replace(os.sep, "/"), session)


_CANONICAL_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@dataclass
class StreamFilter:
    """Which files (user and session folder/file names) and entries (``since``) to show.

    ``user`` and ``session`` are compared with the names on disk, after the
    same sanitizing skillet applies (``john@example.com`` finds ``john_example_com``).
    An entry whose timestamp cannot be read is kept.
    """

    user: str | None = None
    session: str | None = None
    since: datetime | None = None
    _since_text: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        if self.since is not None:
            self._since_text = iso_ms(self.since)

    @staticmethod
    def _name_matches(wanted: str | None, name: str) -> bool:
        """Whether a log's user or session ``name`` (its file's) is ``wanted``: as written,
        as skillet sanitizes it for a directory or a log file, or cut as sessiontape 0.2
        and 0.3 cut a long one (:func:`~sessiontape.storage.names.old_log_name`)."""
        return wanted is None or name in (wanted, sanitize_log_name(wanted),
                                          sanitize_log_name(wanted, ".jsonl"),
                                          old_log_name(wanted))

    def keeps_source(self, source: LogSource) -> bool:
        return (self._name_matches(self.user, source.user)
                and self._name_matches(self.session, source.session))

    def keeps_file_mtime(self, mtime: float) -> bool:
        """False when every entry of a file last written at ``mtime`` is older than ``since``."""
        return self.since is None or mtime >= self.since.timestamp() - 2.0

    def keeps_entry(self, entry: LogEntry) -> bool:
        return self.keeps_object(entry.data)

    def keeps_object(self, data: dict[str, Any]) -> bool:
        """Whether to show the entry whose object is ``data``."""
        if self.since is None:
            return True
        stamp = data.get("timestamp")
        if not isinstance(stamp, str):
            return True
        if _CANONICAL_TS.match(stamp):  # skillet's own format sorts as text
            return stamp >= self._since_text
        try:
            moment = datetime.fromisoformat(stamp)
        except ValueError:
            return True
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment >= self.since


# -- one file ---------------------------------------------------------------------------

class _Tailer(SessionLogTailer):
    """A tailer whose descriptor can be closed while it is idle (*parked*) and reopened.

    Reopening the same file (same device and inode) resumes at the offset
    reached; a different file at the path is read from its start.
    """

    _parked: tuple[int, int] | None = None

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def park(self) -> None:
        if self._fd is None:
            return
        st = os.fstat(self._fd)
        self._parked = (st.st_dev, st.st_ino)
        os.close(self._fd)
        self._fd = None

    def _open(self) -> int | None:
        parked, self._parked = self._parked, None
        if parked is None:
            return super()._open()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != parked:  # replaced while parked: the new file from its start
            os.close(fd)
            return super()._open()
        self._fd = fd  # the same file: go on from the offset reached
        return fd


def _raise_open_file_limit() -> int:
    """Raise the soft descriptor limit towards the hard one; return the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 16
    want = min(want, 1 << 16)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 16


def _walk(top: str) -> Iterator[os.DirEntry[str]]:
    """Every ``*.jsonl`` file under ``top`` (symlinked folders are not entered)."""
    stack = [top]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for item in it:
                try:
                    if item.is_dir(follow_symlinks=False):
                        stack.append(item.path)
                    elif item.name.endswith(SUFFIX) and item.is_file():
                        yield item
                except OSError:
                    continue


@dataclass
class _Watched:
    source: LogSource
    tailer: _Tailer
    seen: tuple[int, int, int] = (0, 0, 0)  # (inode, size, mtime_ns) at the last rescan
    active: float = 0.0  # monotonic time of the last change (polling fallback)


# -- the stream -------------------------------------------------------------------------

OnEntry = Callable[[LogSource, LogEntry], None]
OnEntries = Callable[[LogSource, list[dict[str, Any]]], None]
OnText = Callable[[str], None]


class LogStream:
    """Every log under ``root``: :meth:`catch_up`, then :meth:`follow`.

    ``on_entry(source, entry)`` gets each kept entry, or (give one of the two)
    ``on_entries(source, objects)`` the kept entries of each block read, as
    their objects: quicker, without :class:`LogEntry` objects and line numbers.
    ``on_problem(text)`` gets one line per malformed line (``path:line:
    reason``), after the entries read with it; ``on_notice(text)`` the rest
    (waiting for the root, falling back to polling). ``notify=False`` forces
    the polling fallback.
    """

    def __init__(self, root: Path | str, *, on_entry: OnEntry | None = None,
                 on_entries: OnEntries | None = None, on_problem: OnText,
                 on_notice: OnText, filter: StreamFilter | None = None, notify: bool = True,
                 poll_interval: float = 0.1, rescan_interval: float = 1.5,
                 max_open: int | None = None) -> None:
        if (on_entry is None) == (on_entries is None):
            raise TypeError("LogStream needs one of on_entry and on_entries")
        self.root = os.path.abspath(root)
        self.filter = filter or StreamFilter()
        self.on_entry, self.on_entries = on_entry, on_entries
        self.on_problem, self.on_notice = on_problem, on_notice
        self.notify = notify
        self.poll_interval, self.rescan_interval = poll_interval, rescan_interval
        self._files: dict[str, _Watched] = {}
        self._skipped: set[str] = set()  # files the user/session filter leaves out
        self._open: OrderedDict[str, None] = OrderedDict()  # open descriptors, least recent first
        self._hot: dict[str, _Watched] = {}  # polling: files that changed lately, polled each tick
        limit = _raise_open_file_limit()
        self._max_open = max_open or max(16, min(MAX_OPEN_FILES, limit - 128))
        self._watcher: Any = None

    # - reading -

    def _watch(self, path: str, *, from_end: bool = False) -> _Watched | None:
        """The file's state, made on first sight (None if the filter leaves it out)."""
        watched = self._files.get(path)
        if watched is None:
            if path in self._skipped:
                return None
            source = LogSource.of(self.root, path)
            if not self.filter.keeps_source(source):
                self._skipped.add(path)
                return None
            try:
                tailer = _Tailer(path, from_end=from_end)
            except OSError as exc:
                self.on_notice(f"cannot read {path}: {exc.strerror or exc}")
                return None
            watched = self._files[path] = _Watched(source, tailer)
        return watched

    def _read(self, watched: _Watched) -> int:
        """Emit what the file gained; return the number of entries read."""
        if self.on_entry is not None:
            count = self._emit_entries(watched, self.on_entry)
        else:
            assert self.on_entries is not None  # __init__ takes one of the two
            count = self._emit_blocks(watched, self.on_entries)
        path = watched.source.path
        if watched.tailer.is_open:
            self._open[path] = None
            self._open.move_to_end(path)
            while len(self._open) > self._max_open:
                oldest, _ = self._open.popitem(last=False)
                if oldest in self._files:
                    self._files[oldest].tailer.park()
        else:
            self._open.pop(path, None)
        return count

    # Only the reading is guarded below: an error of the callbacks (a closed pipe) goes up.

    def _emit_entries(self, watched: _Watched, emit: OnEntry) -> int:
        """Each kept entry the file gained, then the problems; the number of entries read."""
        try:
            entries = watched.tailer.poll()
        except OSError as exc:
            self._cannot_read(watched, exc)
            return 0
        keeps, source = self.filter.keeps_entry, watched.source
        for entry in entries:
            if keeps(entry):
                emit(source, entry)
        self._report(watched.tailer)
        return len(entries)

    def _emit_blocks(self, watched: _Watched, emit: OnEntries) -> int:
        """The kept entries of each block the file gained, each block then its problems;
        the number of entries read."""
        count = 0
        keeps = self.filter.keeps_object if self.filter.since is not None else None
        blocks = watched.tailer.poll_objects()
        while True:
            try:
                objects = next(blocks)
            except StopIteration:
                break
            except OSError as exc:
                self._cannot_read(watched, exc)
                break
            count += len(objects)
            if keeps is not None:
                objects = [data for data in objects if keeps(data)]
            if objects:
                emit(watched.source, objects)
            self._report(watched.tailer)
        return count

    def _cannot_read(self, watched: _Watched, exc: OSError) -> None:
        self.on_notice(f"cannot read {watched.source.path}: {exc.strerror or exc}")

    def _report(self, tailer: _Tailer) -> None:
        """Pass on the tailer's problems (malformed lines), once."""
        if tailer.problems:
            for problem in tailer.problems:
                self.on_problem(str(problem))
            tailer.problems.clear()

    def _forget(self, path: str) -> None:
        watched = self._files.pop(path, None)
        if watched is not None:
            watched.tailer.close()
        self._open.pop(path, None)
        self._hot.pop(path, None)

    def _heat(self, watched: _Watched, now: float) -> None:
        watched.active = now
        self._hot[watched.source.path] = watched

    # - catching up -

    def wait_for_root(self, stop: Callable[[], bool] | None = None, interval: float = 0.2) -> bool:
        """Wait until the root is a folder (saying so once); False if ``stop()`` first."""
        if os.path.isdir(self.root):
            return True
        self.on_notice(f"waiting for {self.root} to be created")
        while not os.path.isdir(self.root):
            if stop and stop():
                return False
            time.sleep(interval)
        self.on_notice(f"{self.root} appeared")
        return True

    def catch_up(self) -> int:
        """Read every log under the root, oldest-modified first; return the files read."""
        found = []
        for item in _walk(self.root):
            try:
                st = item.stat()
            except OSError:
                continue
            found.append((st.st_mtime_ns, item.path, st))
        found.sort()
        for _, path, st in found:
            old = not self.filter.keeps_file_mtime(st.st_mtime)
            watched = self._watch(path, from_end=old)
            if watched is not None:
                watched.seen = (st.st_ino, st.st_size, st.st_mtime_ns)
                if time.time() - st.st_mtime < HOT_SECONDS:
                    self._heat(watched, time.monotonic())
                self._read(watched)
        return len(found)

    def finish(self) -> None:
        """End of a catch-up without following: a last line without its newline counts if whole."""
        for watched in self._files.values():
            tailer = watched.tailer
            rest = getattr(tailer, "_partial", b"")
            if rest and rest.strip():
                entry = tailer._parser.feed(rest)
                tailer._partial = b""
                if entry is not None and self.filter.keeps_entry(entry):
                    if self.on_entries is not None:
                        self.on_entries(watched.source, [entry.data])
                    elif self.on_entry is not None:
                        self.on_entry(watched.source, entry)
                for problem in tailer.problems:
                    self.on_problem(f"{problem} (last line, unterminated)")
                tailer.problems.clear()

    # - following -

    def start_watcher(self) -> bool:
        """Set up file-system notifications on the root (before :meth:`catch_up`, so that
        nothing written during the catch-up is missed); False if unavailable."""
        if not self.notify:
            return False
        try:
            from watchfiles._rust_notify import RustNotify
        except ImportError:
            self.on_notice("watchfiles is not installed; polling for changes")
            return False
        try:
            self._watcher = RustNotify([self.root], False, False, 0, True, True)
        except Exception as exc:  # e.g. the inotify limits
            self.on_notice(f"file-system notifications unavailable ({exc}); polling for changes")
            return False
        return True

    def follow(self, stop: Callable[[], bool] | None = None) -> None:
        """Follow the root until ``stop()`` (checked about twice a second) or Ctrl-C."""
        if self._watcher is not None:
            try:
                self._follow_notified(stop)
                return
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # the watcher died: keep going by polling
                self.on_notice(f"file-system notifications failed ({exc}); polling for changes")
            finally:
                self.close_watcher()
            self._rescan()
        self._follow_polled(stop)

    def _follow_notified(self, stop: Callable[[], bool] | None) -> None:
        watcher = self._watcher
        # Anything written between the catch-up's read of a file and now is in
        # the watcher's first batch: it was set up before the catch-up.
        busy_until = 0.0
        while not (stop and stop()):
            step = BUSY_STEP_MS if time.monotonic() < busy_until else STEP_MS
            changes = watcher.watch(DEBOUNCE_MS, step, WAIT_MS, None)
            if changes == "signal":
                raise KeyboardInterrupt
            if not isinstance(changes, set):  # "timeout"
                continue
            busy_until = time.monotonic() + BUSY_SECONDS
            for path in sorted({path for _, path in changes}):
                self._changed(path)

    def _changed(self, path: str) -> None:
        """A path the watcher reported added, modified or deleted."""
        if path in self._skipped:
            return
        if path.endswith(SUFFIX) and (path in self._files or os.path.isfile(path)):
            watched = self._watch(path)
            if watched is not None:
                self._read(watched)
                if not os.path.exists(path):  # deleted: its rest was read
                    self._forget(path)
        elif os.path.isdir(path):
            self._scan_new(path)  # a new folder: its files may predate its watch

    def _scan_new(self, top: str) -> None:
        for item in sorted(_walk(top), key=lambda i: i.path):
            if item.path not in self._files:
                watched = self._watch(item.path)
                if watched is not None:
                    self._read(watched)

    def _rescan(self) -> None:
        """One pass over the tree: new files and files whose inode, size or mtime changed."""
        now = time.monotonic()
        present = set()
        for item in _walk(self.root):
            path = item.path
            present.add(path)
            try:
                st = item.stat()
            except OSError:
                continue
            seen = (st.st_ino, st.st_size, st.st_mtime_ns)
            watched = self._files.get(path)
            if watched is None:
                watched = self._watch(path)
                if watched is None:
                    continue
            elif watched.seen == seen:
                continue
            watched.seen = seen
            self._heat(watched, now)
            self._read(watched)
        for path in [p for p in self._files if p not in present]:
            self._read(self._files[path])  # the rest of a deleted file, then forget it
            self._forget(path)

    def _follow_polled(self, stop: Callable[[], bool] | None) -> None:
        next_scan = time.monotonic() + self.rescan_interval
        while not (stop and stop()):
            now = time.monotonic()
            if now >= next_scan:
                self._rescan()
                next_scan = now + self.rescan_interval
            for path, watched in list(self._hot.items()):
                if self._read(watched):
                    watched.active = now
                elif now - watched.active >= HOT_SECONDS:
                    del self._hot[path]  # idle again: left to the rescans
            time.sleep(self.poll_interval)

    def close_watcher(self) -> None:
        if self._watcher is not None:
            try:
                self._watcher.close()
            finally:
                self._watcher = None

    def close(self) -> None:
        self.close_watcher()
        for path in list(self._files):
            self._forget(path)

    # - all of it -

    def run(self, *, follow: bool = True, stop: Callable[[], bool] | None = None) -> None:
        """Catch up, then follow (or, with ``follow=False``, stop after the catch-up)."""
        try:
            if not follow:
                if not os.path.isdir(self.root):
                    self.on_notice(f"{self.root} does not exist (no logs yet)")
                    return
                self.catch_up()
                self.finish()
                return
            if not self.wait_for_root(stop):
                return
            self.start_watcher()
            self.catch_up()
            self.follow(stop)
        finally:
            self.close()
