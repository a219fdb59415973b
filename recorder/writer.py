"""The one writer thread: hands events, in order, to their recorder's sinks.

Hooks only put ``(target, event)`` on a queue (about a microsecond); all
file and database work happens here, off the event loop (the AgentUse tree's
files by way of a helper process: storage/file_writes.py). A sink's failure
is reported to its target and never reaches the agent run.

The thread works in batches: woken by an event, it waits up to
:data:`BATCH_WINDOW` for more (a flush ends the wait at once), hands the
whole batch to the sinks, then asks each sink it touched to :meth:`flush`,
so a file updated by several events of one burst is rewritten once. An
event is on disk about ``BATCH_WINDOW`` after it happened.

The queue is bounded by back-pressure, never by dropping: a hook that finds
more than :data:`HIGH_WATER` events waiting (a disk far slower than the run)
awaits, without blocking the event loop, until the writer is down to
:data:`LOW_WATER`. At exit the thread writes what is queued and is joined.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import queue
import threading
from typing import Protocol

from sessiontape.storage.events import Event, Sink
from sessiontape.storage.file_writes import WORKER as FILE_WORKER

__all__ = ["BATCH_WINDOW", "EXIT_FLUSH_TIMEOUT", "HIGH_WATER", "LOW_WATER", "MAX_BATCH", "WRITER",
           "EventWriter", "Target"]

EXIT_FLUSH_TIMEOUT = 30.0
BATCH_WINDOW = 0.05  # seconds the writer waits for more events before writing a batch
MAX_BATCH = 2000  # events handed to the sinks before they flush
HIGH_WATER = 20_000  # events waiting beyond which hooks wait for the writer
LOW_WATER = 5_000  # ... until it is down to this many


class Target(Protocol):
    """Where an event goes: the sinks of one recorder, and who hears of their errors."""

    sinks: list[Sink]

    def prepare(self, event: Event) -> Event:
        """The stage before the sinks, on the writer thread (e.g. redaction)."""
        ...

    def report(self, error: BaseException) -> None: ...


class _Flush:
    def __init__(self, waiter: asyncio.Future[None] | None = None) -> None:
        self.done = threading.Event()
        self.waiter = waiter  # an event loop's future, woken too (aflush)

    def set(self) -> None:
        self.done.set()
        if self.waiter is not None:
            with contextlib.suppress(RuntimeError):  # its loop was closed meanwhile
                self.waiter.get_loop().call_soon_threadsafe(_wake, self.waiter)


class _Stop:
    """Ends the writer thread once everything before it is written."""


class EventWriter:
    """A daemon thread draining a FIFO queue of events (started on first use)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Target | None, Event | _Flush | _Stop]] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._hurry = threading.Event()  # a flush is waiting: write the batch now
        self._taken = 0  # items the writer took off the queue and has not written yet
        self.high_water, self.low_water = HIGH_WATER, LOW_WATER
        self._room: list[asyncio.Future[None]] = []  # hooks waiting for the queue to shrink
        self._room_lock = threading.Lock()

    @property
    def pending(self) -> int:
        """Events queued and not yet written (flush markers included): counted without a
        lock, so that :meth:`submit` takes none (a moment's miscount of one is harmless)."""
        return self._queue.qsize() + self._taken

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

    async def room(self) -> None:
        """Wait (on the event loop) while more than :attr:`high_water` events are queued
        (:data:`HIGH_WATER`), until the writer is down to :attr:`low_water`."""
        if self.pending <= self.high_water:
            return
        waiter = asyncio.get_running_loop().create_future()
        with self._room_lock:
            if self.pending <= self.low_water:
                return
            self._room.append(waiter)
        self._hurry.set()
        await waiter

    def _written(self, count: int) -> None:
        """``count`` items were written: wake the hooks waiting for room, if there is."""
        with self._room_lock:
            self._taken -= count
            if self.pending > self.low_water or not self._room:
                return
            waiters, self._room = self._room, []
        for waiter in waiters:
            with contextlib.suppress(RuntimeError):  # its loop was closed meanwhile
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    def _drain(self) -> None:
        while True:
            batch = [self._queue.get()]
            self._taken += 1
            if not isinstance(batch[0][1], (_Flush, _Stop)):
                self._hurry.wait(BATCH_WINDOW)
            self._hurry.clear()
            while len(batch) < MAX_BATCH and not isinstance(batch[-1][1], _Stop):
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
                self._taken += 1
            self._write(batch)
            if isinstance(batch[-1][1], _Stop):
                return

    def _write(self, batch: list[tuple[Target | None, Event | _Flush | _Stop]]) -> None:
        touched: dict[Target, None] = {}  # in order of first event
        items = 0
        for target, item in batch:
            items += 1
            if isinstance(item, _Flush):
                self._flush_sinks(touched)
                self._written(items)
                items = 0
                item.set()
                continue
            if isinstance(item, _Stop):
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
        self._written(items)

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

    def _put_flush(self, waiter: asyncio.Future[None] | None = None) -> _Flush:
        self._ensure_thread()
        marker = _Flush(waiter)
        self._queue.put((None, marker))
        self._hurry.set()
        return marker

    def close(self, timeout: float | None = None) -> None:
        """Write everything queued, then end the thread and join it, and the file-writing
        helper process it used (a later event starts new ones)."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        self._queue.put((None, _Stop()))
        self._hurry.set()
        thread.join(timeout)
        if not thread.is_alive():
            FILE_WORKER.close()

    async def aflush(self) -> None:
        """:meth:`flush` without blocking the event loop, and without taking a thread of
        its executor: a cancelled run's synchronous tools may still hold them all."""
        waiter = asyncio.get_running_loop().create_future()
        self._put_flush(waiter)
        await waiter


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


WRITER = EventWriter()
atexit.register(WRITER.close, EXIT_FLUSH_TIMEOUT)
