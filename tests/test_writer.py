"""The writer thread: order, isolation of failing sinks, back-pressure, flush and join at
interpreter exit."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from harness import REPO, WAIT

from sessiontape.storage.events import Event
from sessiontape.writer import EventWriter


class Collect:
    def __init__(self, fail_on: int | None = None) -> None:
        self.sinks = [self]
        self.seen: list[int] = []
        self.errors: list[BaseException] = []
        self.fail_on = fail_on
        self.flushed_at: list[int] = []  # how many events had been seen at each flush

    def handle(self, event: Event) -> None:
        if event.at == self.fail_on:
            raise OSError(28, "No space left on device")
        self.seen.append(event.at)

    def flush(self) -> None:
        self.flushed_at.append(len(self.seen))

    def prepare(self, event: Event) -> Event:
        return event

    def report(self, error: BaseException) -> None:
        self.errors.append(error)


def test_events_arrive_in_order_and_a_failure_stops_nothing() -> None:
    writer = EventWriter()
    a, b = Collect(fail_on=3), Collect()
    for n in range(1000):
        writer.submit(a, Event("s", n))
        writer.submit(b, Event("s", n))
    assert writer.flush(timeout=WAIT)
    assert a.seen == [n for n in range(1000) if n != 3]
    assert b.seen == list(range(1000))
    assert [e.errno for e in a.errors] == [28]  # type: ignore[attr-defined]


class Gate(Collect):
    """A sink whose ``handle`` holds the writer thread until :meth:`open` is called."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.released = threading.Event()

    def handle(self, event: Event) -> None:
        self.entered.set()
        assert self.released.wait(WAIT), "the gate was never opened"
        super().handle(event)

    def open(self) -> None:
        self.released.set()


def test_sinks_flush_once_per_batch_and_before_a_flush_returns() -> None:
    writer, gate, sink, idle = EventWriter(), Gate(), Collect(), Collect()
    writer.submit(idle, Event("s", -1))
    assert writer.flush(timeout=WAIT) and idle.flushed_at == [1]
    writer.submit(gate, Event("s", 0))
    assert gate.entered.wait(WAIT)  # the writer is busy: what comes now waits in the queue
    for n in range(500):
        writer.submit(sink, Event("s", n))
    gate.open()
    assert writer.flush(timeout=WAIT)
    assert sink.seen == list(range(500))
    assert sink.flushed_at == [500]  # 500 queued events: one batch, one flush, before flush()
    assert gate.flushed_at == [1]
    assert idle.flushed_at == [1]  # only sinks with events in a batch are flushed


def test_an_event_is_written_soon_without_a_flush() -> None:
    class Signals(Collect):
        def __init__(self) -> None:
            super().__init__()
            self.flushed = threading.Event()

        def flush(self) -> None:
            super().flush()
            self.flushed.set()

    writer, sink = EventWriter(), Signals()
    writer.submit(sink, Event("s", 1))
    assert sink.flushed.wait(WAIT)  # nobody called flush(): the batch window ended by itself
    assert sink.flushed_at == [1]


def test_submit_does_not_wait_for_a_slow_sink() -> None:
    writer, gate = EventWriter(), Gate()
    for n in range(20):
        writer.submit(gate, Event("s", n))  # returns although the sink holds the writer
    assert gate.entered.wait(WAIT)
    assert gate.seen == []  # every submit returned while the first event was still held
    gate.open()
    assert writer.flush(timeout=WAIT) and gate.seen == list(range(20))


def test_queued_events_are_written_at_interpreter_exit(tmp_path: Path) -> None:
    out = tmp_path / "written.txt"
    script = textwrap.dedent(f"""
        import time
        from sessiontape.writer import WRITER
        from sessiontape.storage.events import Event

        class Slow:
            def __init__(self):
                self.sinks = [self]
            def handle(self, event):
                time.sleep(0.2)
                with open({str(out)!r}, "a") as f:
                    f.write(f"{{event.at}}\\n")
            def flush(self):
                pass
            def prepare(self, event):
                return event
            def report(self, error):
                raise error

        target = Slow()
        for n in range(5):
            WRITER.submit(target, Event("s", n))
        # exit at once: nothing waits for the writer but its atexit flush
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.read_text().split() == ["0", "1", "2", "3", "4"]


def test_a_writer_far_behind_holds_the_hooks_back_and_drops_nothing() -> None:
    """Back-pressure, not drops: past ``high_water`` queued events, ``room()`` waits on the
    event loop (other tasks still run) until the writer is down to ``low_water``."""
    writer = EventWriter()
    writer.high_water, writer.low_water = 50, 10
    gate = Gate()

    async def main() -> tuple[bool, int, list[str]]:
        for n in range(60):
            writer.submit(gate, Event("s", n))
        assert gate.entered.wait(WAIT)  # the writer holds the first batch
        ticks: list[str] = []

        async def ticker() -> None:
            while True:
                ticks.append("tick")
                await asyncio.sleep(0.01)

        other = asyncio.ensure_future(ticker())
        waiting = asyncio.ensure_future(writer.room())
        await asyncio.sleep(0.1)
        held = not waiting.done()
        gate.released.set()  # the disk catches up
        await asyncio.wait_for(waiting, WAIT)
        other.cancel()
        return held, writer.pending, ticks

    held, pending, ticks = asyncio.run(main())
    assert held and len(ticks) >= 2  # it waited, and the loop ran other tasks meanwhile
    assert pending <= 10
    assert writer.flush(timeout=WAIT)
    assert gate.seen == list(range(60)) and writer.pending == 0


def test_close_writes_everything_and_joins_the_thread() -> None:
    writer = EventWriter()
    sink = Collect()
    for n in range(100):
        writer.submit(sink, Event("s", n))
    thread = writer._thread
    writer.close(timeout=WAIT)
    assert sink.seen == list(range(100))
    assert thread is not None and not thread.is_alive()
    writer.submit(sink, Event("s", 100))  # a later event starts a new thread
    assert writer.flush(timeout=WAIT) and sink.seen[-1] == 100
    writer.close(timeout=WAIT)

