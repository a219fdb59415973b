"""The one writer thread: hands events, in order, to their recorder's sinks.

Hooks only put ``(target, event)`` on a queue (about a microsecond); all
file and database work happens here, off the event loop. A sink's failure
is reported to its target and never reaches the agent run.

The thread works in batches: woken by an event, it waits up to
:data:`BATCH_WINDOW` for more (a flush ends the wait at once), hands the
whole batch to the sinks, then asks each sink it touched to :meth:`flush`,
so a file updated by several events of one burst is rewritten once. An
event is on disk about ``BATCH_WINDOW`` after it happened.
"""

from __future__ import annotations

import asyncio
import atexit
import queue
import threading
from typing import Protocol

from sessiontape.storage.events import Event, Sink

__all__ = ["BATCH_WINDOW", "EXIT_FLUSH_TIMEOUT", "MAX_BATCH", "WRITER", "EventWriter", "Target"]

EXIT_FLUSH_TIMEOUT = 30.0
BATCH_WINDOW = 0.05  # seconds the writer waits for more events before writing a batch
MAX_BATCH = 2000  # events handed to the sinks before they flush


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
        self._hurry = threading.Event()  # a flush is waiting: write the batch now

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
            batch = [self._queue.get()]
            if not isinstance(batch[0][1], _Flush):
                self._hurry.wait(BATCH_WINDOW)
            self._hurry.clear()
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list[tuple[Target | None, Event | _Flush]]) -> None:
        touched: dict[Target, None] = {}  # in order of first event
        for target, item in batch:
            if isinstance(item, _Flush):
                self._flush_sinks(touched)
                item.done.set()
                continue
            assert target is not None
            touched[target] = None
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
        self._flush_sinks(touched)

    @staticmethod
    def _flush_sinks(touched: dict[Target, None]) -> None:
        for target in touched:
            for sink in target.sinks:
                try:
                    sink.flush()
                except Exception as exc:
                    target.report(exc)
        touched.clear()

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every event queued before this call is written."""
        return self._put_flush().done.wait(timeout)

    def _put_flush(self) -> _Flush:
        self._ensure_thread()
        marker = _Flush()
        self._queue.put((None, marker))
        self._hurry.set()
        return marker

    async def aflush(self) -> None:
        """:meth:`flush` without blocking the event loop."""
        marker = self._put_flush()
        if not marker.done.is_set():
            await asyncio.get_running_loop().run_in_executor(None, marker.done.wait)


WRITER = EventWriter()
atexit.register(WRITER.flush, EXIT_FLUSH_TIMEOUT)
