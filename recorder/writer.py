"""The one writer thread: hands events, in order, to their recorder's sinks.

Hooks only put ``(target, event)`` on a queue (about a microsecond); all
file and database work happens here, off the event loop. A sink's failure
is reported to its target and never reaches the agent run.
"""

from __future__ import annotations

import asyncio
import atexit
import queue
import threading
from typing import Protocol

from storage.events import Event, Sink

__all__ = ["EXIT_FLUSH_TIMEOUT", "EventWriter", "Target", "WRITER"]

EXIT_FLUSH_TIMEOUT = 30.0


class Target(Protocol):
    """Where an event goes: the sinks of one recorder, and who hears of their errors."""

    sinks: list[Sink]

    def prepare(self, event: Event) -> Event:
        """The stage before the sinks, on the writer thread (e.g. redaction)."""
        ...

    def report(self, error: BaseException) -> None: ...


class _Flush:
    def __init__(self) -> None:
        self.done = threading.Event()


class EventWriter:
    """A daemon thread draining a FIFO queue of events (started on first use)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Target | None, Event | _Flush]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._start_lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._drain, name="sessiontape-writer",
                                                    daemon=True)
                    self._thread.start()

    def submit(self, target: Target, event: Event) -> None:
        """Queue ``event`` for ``target``'s sinks; returns at once."""
        if self._thread is None:
            self._ensure_thread()
        self._queue.put((target, event))

    def _drain(self) -> None:
        while True:
            target, item = self._queue.get()
            if isinstance(item, _Flush):
                item.done.set()
                continue
            assert target is not None
            try:
                event = target.prepare(item)
            except Exception as exc:  # written by no sink rather than written unprepared
                target.report(exc)
                continue
            for sink in target.sinks:
                try:
                    sink.handle(event)
                except Exception as exc:  # a sink must never stop the others
                    target.report(exc)

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every event queued before this call is written."""
        self._ensure_thread()
        marker = _Flush()
        self._queue.put((None, marker))
        return marker.done.wait(timeout)

    async def aflush(self) -> None:
        """:meth:`flush` without blocking the event loop."""
        self._ensure_thread()
        marker = _Flush()
        self._queue.put((None, marker))
        if not marker.done.is_set():
            await asyncio.get_running_loop().run_in_executor(None, marker.done.wait)


WRITER = EventWriter()
atexit.register(WRITER.flush, EXIT_FLUSH_TIMEOUT)
