"""The agent ``bench/replay.py`` records and replays, loadable with
``sessiontape replay NAME --agent bench/replay_agent.py:agent``.

One tool, ``work(ms)``: it sleeps ``ms`` milliseconds (real work of a known duration) and
says so. Every call's duration (``time.perf_counter`` around the sleep) is kept in
:data:`DURATIONS`; in a process where BENCH_REPLAY_TOOL_TIMES names a file, their sum in
seconds and their count are written there at exit (for the whole-process replay).
"""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path
from typing import Any

from agents import Agent, function_tool

DURATIONS: list[float] = []


@function_tool
def work(ms: int) -> str:
    """Do ms milliseconds of work."""
    start = time.perf_counter()
    time.sleep(ms / 1000)
    DURATIONS.append(time.perf_counter() - start)
    return f"worked {ms} ms"


def agent(model: Any = None) -> Agent[Any]:
    """The agent (its model: a scripted one when recording; a replay answers from the
    recording, so ``None`` is fine then)."""
    return Agent(name="Worker", instructions="Do the work asked; say when done.",
                 tools=[work], model=model)


def _write_durations() -> None:
    target = os.environ.get("BENCH_REPLAY_TOOL_TIMES")
    if target:
        Path(target).write_text(f"{sum(DURATIONS)} {len(DURATIONS)}\n")


atexit.register(_write_durations)
