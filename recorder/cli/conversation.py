"""What ``sessiontape run`` and ``sessiontape chat`` share: one recorded conversation.

:class:`AgentSource` gives the agent for each prompt (the user's, loaded once,
or the bundled demo agent, built afresh per prompt because its scripted models
are used up by one turn). :class:`Conversation` opens ``(user, session)``,
replays its earlier turns from the JSONL log, and runs prompts (streamed or
not) through a :class:`~sessiontape.recorder.Recorder`, printing the answer.
The model sees the history from the item store (the recorder's session).

Ctrl-C (:func:`run_interruptible`) cancels a run; a synchronous tool it was running
goes on blocking its worker thread, which the interpreter's exit would wait for:
:func:`leave` and :func:`exit_now` end the process without it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TextIO, TypeVar

from agents import Agent, RunConfig

from sessiontape.storage.json_style import value_text
from sessiontape.storage.skillet.compaction import CompactionInfo
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.log_owners import find_log_path
from sessiontape.storage.skillet.log_reader import SessionLogReader, Turn

from ..describe import output_text_delta
from ..pricing import Price
from ..recorder import Recorder
from ..writer import EXIT_FLUSH_TIMEOUT, WRITER
from .console import EXIT_INTERRUPTED, Style, plural
from .transcript import render_turns

log = logging.getLogger("sessiontape")

__all__ = ["AgentSource", "Conversation", "Outcome", "Output", "RunInterrupted",
           "describe_compaction", "exit_now", "leave", "leave_on_ctrl_c", "left_behind",
           "run_interruptible"]

T = TypeVar("T")


class Output:
    """stdout for answers: flushed per write, and quiet once its reader has gone.

    On a closed pipe the rest of the output is dropped (stdout is pointed at
    ``/dev/null``, so that the interpreter's last flush is quiet too) while
    the run goes on to its end and is recorded.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.closed = False
        self.line_open = False  # a line is being written (a streamed answer)

    def write(self, text: str) -> None:
        if self.closed or not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
            self.line_open = not text.endswith("\n")
        except BrokenPipeError:
            self.closed = True
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.stream.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass

    def line(self, text: str = "") -> None:
        self.write(text + "\n")

    def fresh_line(self) -> None:
        """Before a diagnostic on stderr: end the line being written, there (what stdout
        gets stays the answer as it is), so that the diagnostic has a line of its own."""
        if self.line_open:
            self.line_open = False
            sys.stderr.write("\n")


class AgentSource:
    """The agent for each prompt of a conversation.

    ``agent=None`` is the bundled demo agent: offline on scripted models built
    afresh for every prompt, or on ``model`` (a real one). A given agent is
    used for every prompt, as a clone on ``model`` if one is given.
    """

    def __init__(self, agent: Agent[Any] | None = None, *, model: str | None = None) -> None:
        self.model = model
        if agent is not None and model is not None:
            agent = agent.clone(model=model)
        self.agent = agent

    @property
    def offline_demo(self) -> bool:
        return self.agent is None and self.model is None

    @property
    def prices(self) -> Mapping[str, Price] | None:
        if self.agent is None:
            from .demo_world import DEMO_PRICES
            return DEMO_PRICES
        return None

    def describe(self) -> str:
        if self.agent is None:
            return f"demo agent on {self.model}" if self.model else "demo agent, offline"
        model = self.agent.model if isinstance(self.agent.model, str) else \
            getattr(self.agent.model, "model", None) or type(self.agent.model).__name__
        return f"agent {self.agent.name!r}" + (f" on {model}" if model else "")

    def agent_for(self, turn: int, prompt: str) -> Agent[Any]:
        """The agent for turn ``turn`` (1-based in the conversation)."""
        if self.agent is not None:
            return self.agent
        from .demo_world import demo_agent
        return demo_agent(turn, prompt, self.model)


@dataclass
class Outcome:
    """One prompt's run: its answer, or the exception that ended it."""

    text: str = ""
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Conversation:
    """One conversation ``(user_id, session_name)``, run prompt by prompt.

    ``prefix`` is written before each answer (chat: ``agent> ``; run: none).
    """

    def __init__(self, source: AgentSource, *, user_id: str, session_name: str,
                 stream: bool = False, out: Output | None = None, color: bool = False,
                 prefix: str = "", store: str | None = None) -> None:
        self.source = source
        self.stream = stream
        self.out = out or Output()
        self.color = color
        self.style = Style(color)
        self.prefix = prefix
        self.recorder = Recorder(user_id=user_id, session_name=session_name,
                                 prices=source.prices, store=store)
        self.earlier = self.prior_turns()
        self.turns = len(self.earlier)  # turns so far, this process's included
        # No trace export without a key (the SDK would only warn about it).
        self.tracing_disabled = source.offline_demo or not os.environ.get("OPENAI_API_KEY")

    @property
    def session_name(self) -> str:
        return self.recorder.session_name

    @property
    def user_id(self) -> str:
        return self.recorder.user_id

    def prior_turns(self) -> list[Turn]:
        """The turns recorded in the JSONL log so far (found without claiming a log: a
        conversation left before its first turn leaves nothing behind). With a server's
        store, every host's: the log here is brought up to date from it first."""
        store = self.recorder.store
        if not isinstance(store, ItemStore):
            from sessiontape.storage.backends.transfer import materialize_logs

            try:
                materialize_logs(store.url, user_id=self.user_id,
                                 session_name=self.session_name)
            except OSError as exc:  # the server is out of reach: the turns recorded here
                log.warning("sessiontape: the earlier turns of other hosts are not shown: %s",
                            exc)
        path = find_log_path(self.user_id, self.session_name)
        return SessionLogReader(path).turns() if path is not None else []

    def replay(self) -> int:
        """Print the earlier turns (``user>``/``agent>``, tool calls dimmed); how many."""
        for line in render_turns(self.earlier, color=self.color):
            self.out.line(line)
        return len(self.earlier)

    async def ask(self, prompt: str) -> Outcome:
        """Run one prompt, recorded, and print its answer.

        A failed run is an :class:`Outcome` with its ``error`` (the recorder has
        recorded the failure); cancelling the task cancels the run and raises.
        """
        self.turns += 1
        agent = self.source.agent_for(self.turns, prompt)
        config = RunConfig(tracing_disabled=self.tracing_disabled)
        if self.stream:
            return await self._ask_streamed(agent, prompt, config)
        try:
            result = await self.recorder.run(agent, prompt, run_config=config)
        except Exception as exc:
            return Outcome(error=exc)
        text = value_text(result.final_output)
        self.out.line(self.prefix + text)
        return Outcome(text)

    async def _ask_streamed(self, agent: Agent[Any], prompt: str, config: RunConfig) -> Outcome:
        result = self.recorder.run_streamed(agent, prompt, run_config=config)
        self.out.write(self.prefix)
        printed = False
        item: str | None = None  # the message whose text is being printed
        try:
            async for event in result.stream_events():
                delta = output_text_delta(event)
                if delta is None:
                    continue
                if printed and delta.item_id != item:
                    self.out.line()  # a new message of the same run: a line of its own
                item = delta.item_id
                self.out.write(delta.delta)
                printed = printed or bool(delta.delta)
        except asyncio.CancelledError:
            result.cancel()
            self.out.line()
            raise
        except Exception as exc:
            self.out.line()
            return Outcome(error=exc)
        text = value_text(result.final_output)
        self.out.line("" if printed else text)
        return Outcome(text)

    async def compact(self) -> CompactionInfo | None:
        """Compact the stored history now (forced); what was done, or None."""
        return await self.recorder.session.compact(force=True)

    async def stored_items(self) -> int:
        return len(await self.recorder.session.get_items())

    async def close(self) -> None:
        """Wait for the recording to be written; close the store."""
        await self.recorder.flush()
        await self.recorder.store.close()


def describe_compaction(info: CompactionInfo | None, stored: int) -> str:
    """One line on what a forced compaction did."""
    if info is None:
        return f"nothing to compact ({plural(stored, 'item')} stored)"
    return (f"compacted {plural(info.items_before, 'item')} into {info.items_after} "
            f"({info.archived} archived, about {info.tokens_before} -> {info.tokens_after} "
            f"tokens, summarizer {info.summarizer})")


class RunInterrupted(Exception):
    """Ctrl-C cancelled the coroutine given to :func:`run_interruptible`."""


def run_interruptible(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on ``loop``; a first Ctrl-C cancels it (:class:`RunInterrupted`),
    a second one raises ``KeyboardInterrupt`` at once.

    SIGINT is only taken over while ``coro`` runs (so that ``input()`` between
    runs still gets its ``KeyboardInterrupt``), and only in the main thread.
    """
    task = loop.create_task(coro)
    presses = 0

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal presses
        presses += 1
        if presses == 1 and not task.done():
            loop.call_soon_threadsafe(task.cancel)
            return
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if main else None
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if presses:
            raise RunInterrupted from None
        raise
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def left_behind() -> list[threading.Thread]:
    """The threads the interpreter's exit would wait for (non-daemon, but the main thread):
    after a cancelled run, the worker threads of the synchronous tools it was running."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def leave(code: int, *, cancelled: bool) -> int:
    """``code``, to exit with; after a run was ``cancelled`` (Ctrl-C), if threads it left
    behind still run (a synchronous tool still blocked), the process ends here instead
    (:func:`exit_now`) rather than wait for them."""
    if cancelled and left_behind():
        exit_now(code)
    return code


def _exit_interrupted(signum: int, frame: Any) -> None:
    os._exit(EXIT_INTERRUPTED)


def _exit_now_interrupted(signum: int, frame: Any) -> None:
    exit_now(EXIT_INTERRUPTED)


def leave_on_ctrl_c() -> None:
    """From now on a Ctrl-C (not taken over by :func:`run_interruptible`) ends the process
    at once through :func:`exit_now` (130), wherever it lands; in the main thread only."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _exit_now_interrupted)


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` without waiting for the threads a cancelled run left
    behind: the recording is written first (the writer thread writes what is queued and
    ends, with its file-writing helper), then the exit handlers run and the standard
    streams are flushed. Only those threads are abandoned, whatever they were doing; a
    Ctrl-C meanwhile ends the process at once (130)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _exit_interrupted)
    try:
        WRITER.close(EXIT_FLUSH_TIMEOUT)
        atexit._run_exitfuncs()  # what exit runs, before it would join the threads
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(code)
