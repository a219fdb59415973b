"""``Recorder``: one conversation, recorded into both layouts as it runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, RunHooks, Runner, RunResult, RunResultStreaming
from agents.items import TResponseInputItem
from agents.memory import SessionSettings

from sessiontape.storage.agentuse_sink import AgentUseSink
from sessiontape.storage.compaction import DEFAULT_THRESHOLD, CompactingSession, CompactionInfo
from sessiontape.storage.events import Compacted, Event, Sink
from sessiontape.storage.item_store import ItemStore
from sessiontape.storage.links import agentuse_dir_for, find_agentuse_dir
from sessiontape.storage.names import DEFAULT_USER_ID, UnsafePathError, default_session_name
from sessiontape.storage.paths import SkilletPaths, project_key, sessions_root_for_key
from sessiontape.storage.redaction import Redactor, as_redactor
from sessiontape.storage.replay_log import ReplayLog
from sessiontape.storage.skillet_sink import SkilletLogSink
from sessiontape.storage.summarizers import Summarizer

from .hooks import RecorderHooks
from .pricing import Price, PriceTable
from .runner import chain_hooks, install
from .scope import RunScope
from .writer import WRITER

__all__ = ["Recorder", "RecorderError"]

log = logging.getLogger("sessiontape")
MAX_KEPT_FAILURES = 20  # recording errors kept for strict mode; the rest are only counted


class RecorderError(RuntimeError):
    """Raised after a run by ``Recorder(strict=True)`` when recording failed."""


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
        self._report = recorder.report

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        try:
            return await super().get_items(limit)
        except (OSError, sqlite3.Error) as exc:
            if _holds_data(self.inner.store.path):
                raise
            self._report(exc)
            return []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        try:
            await super().add_items(items)
        except (OSError, sqlite3.Error) as exc:
            self._report(exc)


def _holds_data(path: Path) -> bool:
    """Whether a store file exists with something in it (an unreadable one counts)."""
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _check_names(user_id: str, session_name: str) -> None:
    """Refuse what no layout can key a conversation by: an empty session name, or a
    name that is not text (lone surrogates, e.g. from undecodable command-line bytes)."""
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
    logged once (``logging.getLogger("sessiontape")``) and counted in
    :attr:`errors`; with ``strict=True`` they are raised after the run.
    """

    def __init__(
        self,
        user_id: str = DEFAULT_USER_ID,
        session_name: str | None = None,
        project_root: str | os.PathLike[str] | None = None,
        *,
        store: ItemStore | None = None,
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
        _check_names(user_id, self.session_name)
        self.project_root = project_key(project_root)
        self.cwd = os.getcwd()
        self._agentuse_root = agentuse_root
        skillet = SkilletPaths.resolve()
        self.store = store if store is not None else ItemStore(skillet.store_file)
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
        self._lock = threading.Lock()
        self._session_dir: Path | None = None
        self._log: ReplayLog | None = None

    # -- where this conversation lives -------------------------------------------------

    @property
    def session_dir(self) -> Path | None:
        """This conversation's AgentUse session directory (None before its first run)."""
        if self._session_dir is None:
            self._session_dir = find_agentuse_dir(self.store.path, self.user_id,
                                                  self.session_name)
        return self._session_dir

    @property
    def log_path(self) -> Path:
        """This conversation's JSONL replay log."""
        return self._replay_log().path

    def _replay_log(self) -> ReplayLog:
        if self._log is None:
            self._log = ReplayLog(self.user_id, self.session_name, self._logs_root)
        return self._log

    # -- running -----------------------------------------------------------------------

    def hooks_with(self, hooks: RunHooks[Any] | None) -> RunHooks[Any]:
        """Your own ``RunHooks`` together with :attr:`hooks` (yours are called first)."""
        return chain_hooks(hooks, self.hooks)

    async def run(self, agent: Agent[Any], input: Any, **runner_kwargs: Any) -> RunResult:
        """``Runner.run`` with this conversation's hooks and session, recorded.

        ``hooks=`` of your own are kept (called before the recorder's).
        """
        runner_kwargs.setdefault("session", self.session)
        hooks = self.hooks_with(runner_kwargs.pop("hooks", None))
        return await Runner.run(agent, input, hooks=hooks, **runner_kwargs)

    def run_streamed(self, agent: Agent[Any], input: Any,
                     **runner_kwargs: Any) -> RunResultStreaming:
        """``Runner.run_streamed``, recorded as its events are consumed."""
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
                sessions_root = self._agentuse_root or sessions_root_for_key(self.project_root)
                self._session_dir = agentuse_dir_for(self.store.path, self.user_id,
                                                     self.session_name, sessions_root, agent_name)
                self._agentuse_sink = AgentUseSink(self._session_dir, self.project_root, self.cwd)
            except (OSError, UnsafePathError, sqlite3.Error) as exc:
                self.report(exc)
        if self._log_sink is None:
            try:
                self._log_sink = SkilletLogSink(self._replay_log())
            except (OSError, UnsafePathError) as exc:
                self.report(exc)
        self.sinks = [s for s in (self._agentuse_sink, self._log_sink) if s is not None]

    def submit(self, event: Event) -> None:
        """Queue an event for this conversation's sinks (called from hooks)."""
        if not self._sinks_tried:
            agent = getattr(event, "agent", None)
            self._ensure_sinks(agent.name if agent is not None else "agent")
        if self.sinks:
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
        # Cancelled: the writer thread still writes everything; we just stop waiting.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self.flush())
        if self.strict and self._failures and not run_failed:
            failures, self._failures = list(self._failures), []
            raise RecorderError(f"recording failed: {failures[0]!r}") from failures[0]

    def prepare(self, event: Event) -> Event:
        """The writer's stage before the sinks: redaction, when asked for."""
        return self.redactor.value(event) if self.redactor is not None else event

    def report(self, error: BaseException, *, in_hook: bool = False) -> None:
        """Count a recording error; log the first; re-raise in a hook in strict mode."""
        with self._lock:
            self.errors += 1
            first = self.errors == 1
            if len(self._failures) < MAX_KEPT_FAILURES:
                self._failures.append(error)
        if first:
            log.warning("sessiontape: recording error (further ones are only counted): %r",
                        error, exc_info=error)
        if self.strict and in_hook:
            raise error
