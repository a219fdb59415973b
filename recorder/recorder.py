"""``Recorder``: one conversation, recorded into both layouts as it runs."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, RunHooks, Runner, RunResult, RunResultStreaming
from agents.items import TResponseInputItem
from agents.memory import SessionSettings

from sessiontape.storage.agentuse.sink import AgentUseSink
from sessiontape.storage.backends import Store, open_store
from sessiontape.storage.db import ReadOnlyDatabase
from sessiontape.storage.events import Compacted, Event, Sink
from sessiontape.storage.file_writes import WORKER as FILE_WORKER
from sessiontape.storage.names import DEFAULT_USER_ID, UnsafePathError, default_session_name
from sessiontape.storage.paths import SkilletPaths, project_key, sessions_root_for_key
from sessiontape.storage.redaction import Redactor, as_redactor
from sessiontape.storage.skillet.compaction import (
    DEFAULT_THRESHOLD,
    CompactingSession,
    CompactionInfo,
)
from sessiontape.storage.skillet.replay_log import ReplayLog
from sessiontape.storage.skillet.sink import SkilletLogSink
from sessiontape.storage.skillet.summarizers import Summarizer

from .hooks import ModelResponded, RecorderHooks, model_call_finished
from .pricing import Price, PriceTable
from .runner import chain_hooks, install
from .scope import RunScope
from .writer import EXIT_FLUSH_TIMEOUT, WRITER

__all__ = ["Recorder", "RecorderBusyError", "RecorderClosedError", "RecorderError",
           "check_names"]

log = logging.getLogger("sessiontape")
MAX_KEPT_FAILURES = 20  # recording errors kept for strict mode; the rest are only counted


class RecorderError(RuntimeError):
    """Raised after a run by ``Recorder(strict=True)`` when recording failed."""


class RecorderClosedError(RuntimeError):
    """A ``Recorder`` was used after :meth:`Recorder.aclose`."""


class RecorderBusyError(RuntimeError):
    """A streamed run was started while another run of the same ``Recorder`` was going on
    (``run_streamed`` returns at once, so it cannot wait its turn)."""


class _Turns:
    """One run at a time: the others wait, first come first served.

    The turn is handed straight to the next waiter, so none can jump the queue. Thread
    safe, and a waiter's own event loop is woken (``run_sync`` runs a loop of its own).
    """

    def __init__(self) -> None:
        self.busy = False
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._lock = threading.Lock()

    def take_now(self) -> bool:
        """Take the turn if it is free."""
        with self._lock:
            if self.busy:
                return False
            self.busy = True
            return True

    async def take(self) -> None:
        """Wait for the turn."""
        with self._lock:
            if not self.busy:
                self.busy = True
                return
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
        try:
            await waiter
        except BaseException:
            with self._lock:
                given = waiter.done() and not waiter.cancelled()
                if not given:
                    self._waiting.remove(waiter)
            if given:  # handed the turn just as it was cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        """Hand the turn to the next waiter, or free it."""
        with self._lock:
            while self._waiting:
                waiter = self._waiting.popleft()
                if waiter.done():
                    continue
                try:
                    waiter.get_loop().call_soon_threadsafe(self._hand, waiter)
                except RuntimeError:  # its event loop is closed: nobody waits there
                    continue
                return
            self.busy = False

    def _hand(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():  # cancelled before it could be woken
            self.release()
        else:
            waiter.set_result(None)


class _RecorderSession(CompactingSession):
    """The recorder's :class:`CompactingSession`.

    The SDK's runner calls :meth:`add_items` inside the run (after each
    step), so an exception there (a full disk, a locked or read-only
    database) would fail the run: it is reported as a recording error instead
    (raised after the run in strict mode), and that batch of items is not
    stored. Batches are whole turns (a
    tool call with its output), so the stored history stays consistent, only
    shorter. :meth:`get_items` raises when there is a history it cannot read
    (running without it would silently forget the conversation), but a store
    that does not exist yet and cannot be created holds no history: that is
    reported, and the run starts from nothing. :meth:`compact`,
    :meth:`pop_item` and :meth:`clear_session` still raise, for callers who
    asked for them.
    """

    def __init__(self, recorder: Recorder, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recorder = recorder
        self._report = recorder.report

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        self._recorder.check_open()
        try:
            return await super().get_items(limit)
        except (OSError, sqlite3.Error) as exc:
            if self.inner.store.holds_data():
                raise
            self._report(exc)
            return []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        self._recorder.check_open()
        try:
            await super().add_items(items)
        except (OSError, sqlite3.Error) as exc:
            self._report(exc)


def check_names(user_id: str, session_name: str) -> None:
    """Refuse what no layout can key a conversation by: an empty user or session name, or
    a name that is not text (lone surrogates, e.g. from undecodable command-line bytes)."""
    if not user_id:
        raise ValueError("user_id is empty")
    if not session_name:
        raise ValueError("session_name is empty (None means a new default-named session)")
    for what, name in (("user_id", user_id), ("session_name", session_name)):
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} {name!r} is not valid UTF-8 text") from None


class Recorder:
    """Records the runs of one conversation ``(user_id, session_name)``.

    The first run creates the AgentUse session; every run adds one exchange
    to it, one turn to the JSONL log, and its items to the SQLite store (the
    model's memory: the next run sees the history). :attr:`session` compacts
    the stored history beyond ``compaction_threshold`` items (``None``: only
    on demand) with ``summarizer`` (default: offline and deterministic).
    ``redact=True`` removes common API keys and tokens from everything written
    (see :mod:`sessiontape.storage.redaction`). A new ``Recorder`` with
    the same pair continues the conversation, in this process or another.

    Recording never changes or fails the run: the recorder's own errors are
    logged (``logging.getLogger("sessiontape")``, once per kind and place) and
    counted in :attr:`errors`; with ``strict=True`` they are raised after the run.

    Runs take turns: a second run while one is going on waits for it to end (a
    streamed one raises :class:`RecorderBusyError`). ``async with Recorder(...) as
    rec:`` or :meth:`aclose` releases what the recorder holds (``with`` and
    :meth:`close` without an event loop); recorders of one store file share one
    connection to it.

    ``store``: where the item store is: a SQLite file's path, a ``postgresql://`` URL
    (a store many hosts share: the replay log's lines go there too, beside the JSONL
    file; docs/postgres.md), an open store, or None: ``SESSIONTAPE_STORE`` when set,
    else the skillet file.
    """

    def __init__(
        self,
        user_id: str = DEFAULT_USER_ID,
        session_name: str | None = None,
        project_root: str | os.PathLike[str] | None = None,
        *,
        store: Store | str | os.PathLike[str] | None = None,
        logs_root: Path | None = None,
        agentuse_root: Path | None = None,
        prices: Mapping[str, Price] | None = None,
        session_settings: SessionSettings | None = None,
        compaction_threshold: int | None = DEFAULT_THRESHOLD,
        summarizer: Summarizer | None = None,
        redact: bool | Redactor | Callable[[str], str] | None = None,
        strict: bool = False,
    ) -> None:
        install()
        self.user_id = user_id
        self.session_name = default_session_name() if session_name is None else session_name
        check_names(user_id, self.session_name)
        self._project_root_given = project_root
        self._project_root: str | None = None
        self.cwd = os.getcwd()
        self._agentuse_root = agentuse_root
        skillet = SkilletPaths.resolve()
        if store is None or isinstance(store, (str, os.PathLike)):
            self._owns_store = True
            self.store: Store = open_store(store)
        else:
            self._owns_store = False
            self.store = store
        self._logs_root = logs_root if logs_root is not None else skillet.logs_root
        self.prices = PriceTable(prices)
        self.strict = strict
        self.redactor = as_redactor(redact)
        self.session: CompactingSession = _RecorderSession(
            self, self.store.session(user_id, self.session_name, session_settings,
                                     self.redactor),
            threshold=compaction_threshold, summarizer=summarizer,
            on_compaction=self._compacted)
        self._active: RunScope | None = None  # the root scope of the run going on
        self.hooks = RecorderHooks(RunScope(self, parent=None, streamed=False, run_config=None))
        self.sinks: list[Sink] = []
        self._agentuse_sink: AgentUseSink | None = None
        self._log_sink: SkilletLogSink | None = None
        self._sinks_tried = False  # this run tried to set up the sinks it lacks
        self.errors = 0
        self._failures: list[BaseException] = []
        self._logged: set[tuple[str, Any]] = set()  # (kind, place) of errors logged
        self._lock = threading.Lock()
        self._session_dir: Path | None = None
        self._log: ReplayLog | None = None
        self._turns = _Turns()
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> Recorder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        """Raise :class:`RecorderClosedError` if this recorder was closed."""
        if self._closed:
            raise RecorderClosedError(f"Recorder({self.user_id!r}, {self.session_name!r}) "
                                      "is closed; make a new one to continue the conversation")

    async def aclose(self) -> None:
        """Wait for a run going on to end, write everything recorded, and release what
        this recorder holds (its log file, its share of the store's connection). Using
        it afterwards raises :class:`RecorderClosedError`; closing again does nothing."""
        if self._closed:
            return
        await self._turns.take()
        try:
            if not self.closed:  # (not closed by another aclose while this one waited)
                self._closed = True
                await self.flush()
                if self._log is not None:
                    self._log.close()
                if self._owns_store:
                    await self.store.release()
        finally:
            self._turns.release()

    def close(self) -> None:
        """:meth:`aclose` for code without a running event loop (after ``run_sync``)."""
        asyncio.run(self.aclose())

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """This conversation's turn for one run: a run going on ends first."""
        self.check_open()
        await self._turns.take()
        try:
            self.check_open()  # closed while it waited
            yield
        finally:
            self._turns.release()

    def take_turn_now(self) -> None:
        """Take the turn for a streamed run, which cannot wait: RecorderBusyError if a run
        is going on. :meth:`end_turn` gives it back."""
        self.check_open()
        if not self._turns.take_now():
            raise RecorderBusyError(
                f"Recorder({self.user_id!r}, {self.session_name!r}) is already running a "
                "run; a streamed run cannot wait for it: finish that run first")

    def end_turn(self) -> None:
        self._turns.release()

    # -- where this conversation lives -------------------------------------------------

    @property
    def project_root(self) -> str:
        """The project the AgentUse session belongs to: the git top level of
        ``project_root`` (default: the working directory), else its absolute path.
        Worked out on first use (it may run ``git``), on the writer thread for a run."""
        with self._lock:
            if self._project_root is None:
                self._project_root = project_key(self._project_root_given)
            return self._project_root

    @property
    def session_dir(self) -> Path | None:
        """This conversation's AgentUse session directory (None before its first run).

        During a run it waits for the writer to have set it up (the writer thread makes
        it with the run's first event)."""
        if self._session_dir is None and self._active is not None:
            WRITER.flush(EXIT_FLUSH_TIMEOUT)
        if self._session_dir is None:
            self._session_dir = self.store.find_agentuse_dir(self.user_id, self.session_name,
                                                             self._sessions_root())
        return self._session_dir

    def _sessions_root(self) -> Path:
        """The AgentUse root this conversation's session belongs in, today."""
        return self._agentuse_root or sessions_root_for_key(self.project_root)

    @property
    def log_path(self) -> Path:
        """This conversation's JSONL replay log."""
        return self._replay_log().path

    def _replay_log(self) -> ReplayLog:
        if self._log is None:
            self._log = ReplayLog(self.user_id, self.session_name, self._logs_root,
                                  FILE_WORKER)
        return self._log

    # -- running -----------------------------------------------------------------------

    def hooks_with(self, hooks: RunHooks[Any] | None) -> RunHooks[Any]:
        """Your own ``RunHooks`` together with :attr:`hooks` (yours are called first)."""
        return chain_hooks(hooks, self.hooks)

    async def run(self, agent: Agent[Any], input: Any, **runner_kwargs: Any) -> RunResult:
        """``Runner.run`` with this conversation's hooks and session, recorded.

        ``hooks=`` of your own are kept (called before the recorder's).
        """
        self.check_open()
        runner_kwargs.setdefault("session", self.session)
        hooks = self.hooks_with(runner_kwargs.pop("hooks", None))
        return await Runner.run(agent, input, hooks=hooks, **runner_kwargs)

    def run_sync(self, agent: Agent[Any], input: Any, **runner_kwargs: Any) -> RunResult:
        """``Runner.run_sync``, recorded (no event loop may be running in this thread)."""
        self.check_open()
        runner_kwargs.setdefault("session", self.session)
        hooks = self.hooks_with(runner_kwargs.pop("hooks", None))
        return Runner.run_sync(agent, input, hooks=hooks, **runner_kwargs)

    def run_streamed(self, agent: Agent[Any], input: Any,
                     **runner_kwargs: Any) -> RunResultStreaming:
        """``Runner.run_streamed``, recorded as its events are consumed.

        The run holds this conversation's turn until its stream is consumed to the end
        (or closed); RecorderBusyError if another run is going on.
        """
        self.check_open()
        runner_kwargs.setdefault("session", self.session)
        hooks = self.hooks_with(runner_kwargs.pop("hooks", None))
        return Runner.run_streamed(agent, input, hooks=hooks, **runner_kwargs)

    def begin_run(self, streamed: bool, run_config: RunConfig | None) -> RunScope:
        """A new root scope for one run (called by the SDK runner wrapper)."""
        self._failures.clear()
        self._sinks_tried = False  # a layout that could not be set up is tried again
        self._active = RunScope(self, parent=None, streamed=streamed, run_config=run_config)
        return self._active

    async def end_run(self, session: Any) -> None:
        """Before a run's end is recorded: compact the stored history if it is over the
        threshold. A failure (a summarizer that is down) is only reported: the history
        stays as it was."""
        if session is self.session:
            try:
                await self.session.compact()
            except Exception as exc:
                self.report(exc)

    def _compacted(self, info: CompactionInfo) -> None:
        scope = self._active
        if scope is None or scope.ended:  # a manual compaction between runs: store only
            return
        self.submit(Compacted(scope.id, info.at, info.id, info.reason, info.summarizer,
                              info.items_before, info.items_after, info.tokens_before,
                              info.tokens_after, info.archived))

    def _ensure_sinks(self, agent_name: str) -> None:
        """Set up the sinks this recorder lacks, once per run, each on its own.

        A layout that cannot be set up (its directory is read-only, the disk is
        full, the store that links the AgentUse session cannot be written) is
        reported and left out of this run; the other one still records, and
        the next run tries again.
        """
        self._sinks_tried = True
        if self._agentuse_sink is None:
            try:
                self._session_dir = self.store.agentuse_dir_for(
                    self.user_id, self.session_name, self._sessions_root(), agent_name)
            except ReadOnlyDatabase as exc:  # a conversation linked before still records
                self._session_dir = self.store.find_agentuse_dir(
                    self.user_id, self.session_name, self._sessions_root())
                if self._session_dir is None:
                    self.report(exc)
            except (OSError, UnsafePathError, sqlite3.Error) as exc:
                self.report(exc)
        if self._log_sink is None:
            # Each layout names the other: the log's turns the tree's session, the tree the log.
            where = {"cwd": self.cwd, "projectRoot": self.project_root}
            if self._session_dir is not None:
                where.update(sessionId=self._session_dir.name.partition("-")[0],
                             sessionDir=str(self._session_dir))
            copy = self.store.log_copy(self.user_id, self.session_name)
            try:
                self._log_sink = SkilletLogSink(self._replay_log(), where,
                                                [copy] if copy is not None else [])
            except (OSError, UnsafePathError) as exc:
                self.report(exc)
        if self._agentuse_sink is None and self._session_dir is not None:
            conversation = {"user": self.user_id, "name": self.session_name}
            if self._log_sink is not None:
                conversation["log"] = str(self._log_sink.log.path)
            self._agentuse_sink = AgentUseSink(self._session_dir, self.project_root, self.cwd,
                                               conversation)
        self.sinks = [s for s in (self._agentuse_sink, self._log_sink) if s is not None]

    def submit(self, event: Event) -> None:
        """Queue an event for this conversation's sinks (called from hooks; the sinks are
        set up on the writer thread, see :meth:`prepare`)."""
        WRITER.submit(self, event)

    async def flush(self) -> None:
        """Wait until everything recorded so far is written."""
        await WRITER.aflush()

    async def flush_after_run(self, run_failed: bool = False) -> None:
        """End of a run: flush, and in strict mode raise what went wrong.

        After a run that raised, its own exception goes on to the caller
        unchanged (a RecorderError raised here would replace it, even a
        CancelledError); the recording errors are still counted and logged.
        """
        # Cancelled: the writer thread still writes everything; we stop waiting, and the
        # cancellation goes on to the caller (after a run that failed, its own error does).
        try:
            await asyncio.shield(self.flush())
        except asyncio.CancelledError:
            if not run_failed:
                raise
        if self.strict and self._failures and not run_failed:
            failures, self._failures = list(self._failures), []
            raise RecorderError(f"recording failed: {failures[0]!r}") from failures[0]

    def prepare(self, event: Event) -> Event:
        """The writer's stage before the sinks: set up the sinks a run lacks (their
        files, the store's link and ``git`` stay off the event loop), read a model call's
        response (its texts, tokens and cost: off the loop too), then redaction, when
        asked for."""
        if not self._sinks_tried:
            agent = getattr(event, "agent", None)
            self._ensure_sinks(agent.name if agent is not None else "agent")
        if isinstance(event, ModelResponded):
            event = model_call_finished(event, self.prices)
        return self.redactor.value(event) if self.redactor is not None else event

    def report(self, error: BaseException, *, in_hook: bool = False) -> None:
        """Count a recording error and log it, once per kind and place it was raised;
        re-raise in a hook in strict mode."""
        key = (type(error).__name__, _raised_at(error))
        with self._lock:
            self.errors += 1
            new = key not in self._logged
            self._logged.add(key)
            if len(self._failures) < MAX_KEPT_FAILURES:
                self._failures.append(error)
        if new:
            log.warning("sessiontape: recording error in %s/%s (an error of this kind from "
                        "this place is logged once): %r", self.user_id, self.session_name,
                        error, exc_info=error)
        if self.strict and in_hook:
            raise error


def _raised_at(error: BaseException) -> tuple[str, int] | None:
    """Where ``error`` was raised: the innermost frame of its traceback."""
    trace = error.__traceback__
    if trace is None:
        return None
    while trace.tb_next is not None:
        trace = trace.tb_next
    return trace.tb_frame.f_code.co_filename, trace.tb_lineno
