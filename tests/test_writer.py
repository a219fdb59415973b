"""The writer thread: order, isolation of failing sinks, flush at interpreter exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from sessiontape.writer import EventWriter
from sessiontape.storage.events import Event

REPO = Path(__file__).resolve().parent.parent


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
    assert writer.flush(timeout=30)
    assert a.seen == [n for n in range(1000) if n != 3]
    assert b.seen == list(range(1000))
    assert [e.errno for e in a.errors] == [28]  # type: ignore[attr-defined]


def test_sinks_flush_once_per_batch_and_before_a_flush_returns() -> None:
    writer, sink, idle = EventWriter(), Collect(), Collect()
    writer.submit(idle, Event("s", -1))
    assert writer.flush(timeout=30) and idle.flushed_at == [1]
    for n in range(500):
        writer.submit(sink, Event("s", n))
    assert writer.flush(timeout=30)
    assert sink.flushed_at[-1] == 500  # everything written before flush() returned
    assert len(sink.flushed_at) <= 3  # 500 quick events: a batch or a few, not 500 flushes
    assert idle.flushed_at == [1]  # only sinks with events in a batch are flushed


def test_an_event_is_written_soon_without_a_flush() -> None:
    writer, sink = EventWriter(), Collect()
    writer.submit(sink, Event("s", 1))
    deadline = time.monotonic() + 5
    while not sink.flushed_at and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sink.flushed_at == [1]


def test_submit_does_not_wait_for_a_slow_sink() -> None:
    class Slow(Collect):
        def handle(self, event: Event) -> None:
            time.sleep(0.05)
            super().handle(event)

    writer, slow = EventWriter(), Slow()
    start = time.perf_counter()
    for n in range(20):
        writer.submit(slow, Event("s", n))
    assert time.perf_counter() - start < 0.05  # 20 events would take 1 s to write
    assert writer.flush(timeout=30) and slow.seen == list(range(20))


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
