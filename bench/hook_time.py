"""Hook time: how long the recorder's hooks hold the event loop in a real recorded run.

The run is the recording-overhead bench's turn of CALLS sequential tool calls
(600 by default) on the real SDK ``Runner`` with a deterministic scripted
model, with two additions so that every hook and the streamed-text path are
exercised: the run starts on a ``triage`` agent that hands off to the
``ledger`` agent (``on_handoff``, a second ``on_agent_start``), and each model
step writes a short sentence before its tool call, which the streamed run's
model sends word by word (one ``response.output_text.delta`` per word, as a
real model streams). Two recorded runs, ``Recorder.run`` and
``Recorder.run_streamed`` (consumed to the end), on fresh files.

What is timed, with ``time.perf_counter_ns`` in this process only (the
recorder's code is wrapped here, never edited):

* every ``RunHooks`` coroutine of ``RecorderHooks`` (``on_agent_start``,
  ``on_llm_start``, ``on_llm_end``, ``on_tool_start``, ``on_tool_end``,
  ``on_handoff``, ``on_agent_end``), from its call to its return: the hooks
  never await, so that is the time each one holds the event loop;
* the streamed-text path, per stream event: the recorder's check of the event
  (``output_text_delta``) and, for a text delta, ``RunScope.text_delta``
  (building the event and queueing it); and, from outside, the whole time an
  event spends in the recorder's stream wrapper, from the SDK's generator
  yielding it to the consumer receiving it.

Beside them, the same runs not recorded (sessiontape's item store as the
session, no recorder) with a no-op ``RunHooks`` wrapped by the same timer: the
floor of the measurement (a coroutine called and awaited, two clock reads).
The recorded runs' calls are then replayed, one kind after another, out of
the run ("warm": the same work with hot CPU caches, events put on a queue
nobody reads). A third recorded run (not streamed) times the parts of each
hook: every function of ``sessiontape.hooks`` and method of ``RunScope`` a hook
calls, and ``_emit`` (parts nest: ``_emit`` holds ``now_ms`` and
``scope.submit``); each part's timer adds its own cost, so those figures say
where the time goes, not whether the target holds. An untimed warm-up of
every kind comes first.

Target: the median time a hook holds the event loop is <= 20 us per event
(every hook call and every streamed text delta, pooled). All files go to a
temporary directory (``SKILLET_HOME`` and the XDG directories point into it).
About 2-3 minutes with the defaults.

    python bench/hook_time.py [--calls 600] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import inspect
import os
import queue
import re
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from agents import Agent, RunHooks, Runner
from agents.lifecycle import RunHooksBase
from agents.result import RunResultStreaming
from agents.testing import ModelStep, function_call
from openai.types.responses import ResponseTextDeltaEvent
from recording_overhead import (
    FINAL_TEXT,
    PRICES,
    USER_ID,
    LeanScriptedModel,
    lookup,
    point_env_at,
    usage,
)
from recording_overhead import script as overhead_script

import sessiontape.hooks
import sessiontape.runner
from sessiontape import Recorder
from sessiontape.describe import output_text_delta
from sessiontape.hooks import RecorderHooks
from sessiontape.scope import RunScope
from sessiontape.storage.events import Event
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.item_store import ItemStore

TARGET_US = 20.0
WARM_UP_CALLS = 20
PROMPT = "Look up every record, one call at a time, then say how many there were."
HOOK_NAMES = [name for name in vars(RunHooksBase) if name.startswith("on_")]
TEXT_DELTA = "text delta (check + text_delta)"
OTHER_EVENT = "other stream event (check)"
PASS_TEXT = "text delta, SDK -> consumer"
PASS_OTHER = "other event, SDK -> consumer"
STREAM = "stream event"  # the captured stream events, replayed through the text path
WARM = " (warm replay)"


# -- the run --------------------------------------------------------------------------------


def script(calls: int) -> list[ModelStep]:
    """A handoff to ``ledger``, then ``calls`` steps of a sentence and one tool call, then
    the answer; every id unique."""
    return [ModelStep(output=[function_call("transfer_to_ledger", {}, call_id="call_handoff",
                                            item_id="fc_handoff")],
                      usage=usage(0), response_id="resp_handoff"),
            *overhead_script(calls, say=True)]


class WordStreamModel(LeanScriptedModel):
    """The scripted model, streaming each text one word at a time (one delta per word)."""

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for event in super().stream_response(*args, **kwargs):
            if isinstance(event, ResponseTextDeltaEvent):
                for word in re.findall(r"\S+\s*", event.delta):
                    yield event.model_copy(update={"delta": word})
            else:
                yield event


def make_agent(calls: int) -> Agent[Any]:
    model = WordStreamModel(script(calls))  # one script: triage's step, then ledger's
    ledger = Agent(name="ledger", instructions="Use the lookup tool for each record.",
                   model=model, tools=[lookup])
    return Agent(name="triage", instructions="Hand off to the ledger agent.", model=model,
                 handoffs=[ledger])


def check_result(result: Any, calls: int) -> None:
    assert result.final_output == FINAL_TEXT, result.final_output
    outputs = [i for i in result.new_items if i.type == "tool_call_output_item"]
    assert len(outputs) == calls, len(outputs)


# -- timing -----------------------------------------------------------------------------


class Samples:
    """Durations in ns by kind; ``current`` names the hook running (for the parts)."""

    def __init__(self, capture: bool = False) -> None:
        self.by_kind: dict[str, list[int]] = {}
        self.current = ""
        self.stamp = 0  # when the SDK's stream generator last yielded an event
        self.capture = capture  # keep each call's arguments, to replay them warm
        self.calls: dict[str, list[tuple[Any, ...]]] = {}
        self.scope: RunScope | None = None  # the streamed run's scope

    def add(self, kind: str, ns: int) -> None:
        self.by_kind.setdefault(kind, []).append(ns)


def timed_hook(kind: str, method: Callable[..., Any], samples: Samples) -> Callable[..., Any]:
    """``method`` (an async hook) timed from its call to its return."""
    clock = time.perf_counter_ns

    async def hook(self: Any, *args: Any, **kwargs: Any) -> None:
        if samples.capture:
            # Not the model input (on_llm_start's list, read only to settle calls a resumed
            # run left waiting for approval: none here): 600 of them would weigh on the run.
            kept = tuple([] if isinstance(arg, list) else arg for arg in args)
            samples.calls.setdefault(kind, []).append((self, kept, kwargs))
        samples.current = kind
        start = clock()
        try:
            await method(self, *args, **kwargs)
        finally:
            samples.add(kind, clock() - start)
            samples.current = ""

    return hook


class NoopHooks(RunHooks[Any]):
    """The SDK's no-op ``RunHooks``, to be wrapped by the same timer: the floor."""


@contextlib.contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def instrumented(samples: Samples, parts: bool = False) -> Iterator[None]:
    """Time the recorder's hooks, its streamed-text path and the stream wrapper's
    pass-through into ``samples``; with ``parts``, also the parts of each hook."""
    clock = time.perf_counter_ns
    check, text_delta = output_text_delta, RunScope.text_delta
    pending = [0]  # the check's time of the text delta being recorded

    def timed_check(event: Any) -> Any:
        if samples.capture:
            samples.calls.setdefault(STREAM, []).append((event,))
        start = clock()
        delta = check(event)
        took = clock() - start
        if delta is None:
            samples.add(OTHER_EVENT, took)
        else:
            pending[0] = took
        return delta

    def timed_text_delta(self: RunScope, item_id: str, text: str) -> None:
        if samples.capture:
            samples.scope = self
        start = clock()
        text_delta(self, item_id, text)
        samples.add(TEXT_DELTA, clock() - start + pending[0])

    with contextlib.ExitStack() as stack:
        for name in HOOK_NAMES:
            stack.enter_context(patched(RecorderHooks, name, timed_hook(
                name, RecorderHooks.__dict__[name], samples)))
        stack.enter_context(patched(sessiontape.runner, "output_text_delta", timed_check))
        stack.enter_context(patched(RunScope, "text_delta", timed_text_delta))
        if parts:  # every function of sessiontape.hooks and method of RunScope a hook calls
            for name, value in vars(sessiontape.hooks).items():
                if inspect.isfunction(value) and value.__module__.startswith("sessiontape") \
                        and name != "_guarded":
                    stack.enter_context(patched(sessiontape.hooks, name,
                                                timed_part(name, value, samples)))
            for name, value in vars(RunScope).items():
                if inspect.isfunction(value) and not name.startswith("__") \
                        and name != "text_delta":
                    stack.enter_context(patched(RunScope, name,
                                                timed_part(f"scope.{name}", value, samples)))
            stack.enter_context(patched(RecorderHooks, "_emit", timed_part(
                "_emit (event built, scope.submit)", RecorderHooks.__dict__["_emit"], samples)))
        yield


def timed_part(part: str, function: Callable[..., Any], samples: Samples) -> Callable[..., Any]:
    """``function`` timed as a part of the hook running (``samples.current``)."""
    clock = time.perf_counter_ns

    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return function(*args, **kwargs)
        finally:
            samples.add(f"{samples.current}: {part}", clock() - start)

    return timed


@contextlib.contextmanager
def stamped_stream(samples: Samples) -> Iterator[None]:
    """Stamp each event as the SDK's ``stream_events`` yields it (the recorder's stream
    wrapper, if any, sits between this and the consumer)."""
    stream_events = RunResultStreaming.stream_events
    clock = time.perf_counter_ns

    async def stamped(self: RunResultStreaming) -> AsyncIterator[Any]:
        async for event in stream_events(self):
            samples.stamp = clock()
            yield event

    with patched(RunResultStreaming, "stream_events", stamped):
        yield


async def consume(result: RunResultStreaming, samples: Samples) -> None:
    clock = time.perf_counter_ns
    async for event in result.stream_events():
        took = clock() - samples.stamp
        samples.add(PASS_TEXT if isinstance(getattr(event, "data", None), ResponseTextDeltaEvent)
                    else PASS_OTHER, took)


NOOP = Samples()  # what NoopHooks's timers write into
for _name in HOOK_NAMES:
    setattr(NoopHooks, _name, timed_hook(_name, getattr(RunHooks, _name), NOOP))


async def replay(samples: Samples) -> None:
    """Call each captured hook (and the streamed-text path for each captured stream
    event) again, one kind after another, out of the run: the same work warm, with
    events queued on a queue nobody reads (the writer thread left out)."""
    clock = time.perf_counter_ns
    queued: queue.SimpleQueue[Event] = queue.SimpleQueue()

    def submit(self: RunScope, event: Event) -> None:
        queued.put(event)

    with patched(RunScope, "submit", submit):
        for name in HOOK_NAMES:
            method = RecorderHooks.__dict__[name]
            for hooks, args, kwargs in samples.calls.get(name, []):
                start = clock()
                await method(hooks, *args, **kwargs)
                samples.add(name + WARM, clock() - start)
        for (event,) in samples.calls.get(STREAM, []):
            start = clock()
            delta = output_text_delta(event)
            if delta is None:
                samples.add(OTHER_EVENT + WARM, clock() - start)
                continue
            assert samples.scope is not None
            samples.scope.text_delta(delta.item_id, delta.delta)
            samples.add(TEXT_DELTA + WARM, clock() - start)
    samples.calls.clear()


# -- the runs -----------------------------------------------------------------------------


async def recorded(directory: Path, calls: int, streamed: bool, samples: Samples,
                   parts: bool = False) -> None:
    """One recorded run on fresh files, its hooks timed into ``samples``."""
    point_env_at(directory)
    agent = make_agent(calls)
    rec = Recorder(user_id=USER_ID, session_name="hooks", project_root=directory,
                   prices=PRICES)
    try:
        await rec.flush()  # starts the writer thread, if need be
        gc.collect()
        with instrumented(samples, parts), stamped_stream(samples):
            if streamed:
                result: Any = rec.run_streamed(agent, PROMPT, max_turns=calls + 10)
                await consume(result, samples)
            else:
                result = await rec.run(agent, PROMPT, max_turns=calls + 10)
        check_result(result, calls)
        await replay(samples)
        assert rec.errors == 0, f"{rec.errors} recording errors"
    finally:
        await rec.aclose()


async def not_recorded(directory: Path, calls: int, streamed: bool, samples: Samples) -> None:
    """The same run with the item store as its session, no recorder, ``NoopHooks``."""
    point_env_at(directory)
    agent = make_agent(calls)
    store = ItemStore(SkilletPaths.resolve().store_file)
    session = store.session(USER_ID, "noop")
    NOOP.by_kind.clear()
    try:
        gc.collect()
        with stamped_stream(samples):
            if streamed:
                result: Any = Runner.run_streamed(agent, PROMPT, hooks=NoopHooks(),
                                                  session=session, max_turns=calls + 10)
                await consume(result, samples)
            else:
                result = await Runner.run(agent, PROMPT, hooks=NoopHooks(), session=session,
                                          max_turns=calls + 10)
        check_result(result, calls)
    finally:
        await store.close()
    for kind, values in NOOP.by_kind.items():
        samples.by_kind.setdefault(kind, []).extend(values)


async def run(calls: int, directory: Path) -> dict[str, Samples]:
    """Warm-up, then the runs; the samples of each, by run."""
    for streamed in (False, True):
        mode = "streamed" if streamed else "plain"
        for name, side in (("recorded", recorded), ("not_recorded", not_recorded)):
            (directory / f"warm-up-{name}-{mode}").mkdir()
            await side(directory / f"warm-up-{name}-{mode}", WARM_UP_CALLS, streamed, Samples())
    runs: dict[str, Samples] = {}
    for key, side, streamed in (("noop plain", not_recorded, False),
                                ("plain", recorded, False),
                                ("noop streamed", not_recorded, True),
                                ("streamed", recorded, True)):
        (directory / key.replace(" ", "-")).mkdir()
        started = time.perf_counter()
        runs[key] = Samples(capture=side is recorded)
        await side(directory / key.replace(" ", "-"), calls, streamed, runs[key])
        print(f"{key} run: {time.perf_counter() - started:.1f} s", flush=True)
    (directory / "parts").mkdir()
    runs["parts"] = Samples()
    started = time.perf_counter()
    await recorded(directory / "parts", calls, False, runs["parts"], parts=True)
    print(f"parts run: {time.perf_counter() - started:.1f} s", flush=True)
    return runs


# -- the report ---------------------------------------------------------------------------


def quantile(values: list[int], q: float) -> float:
    """The ``q`` quantile (nearest rank) in microseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000


def stats(values: list[int]) -> list[str]:
    """count, median, p90, p99, max (us)."""
    if not values:
        return ["0", "-", "-", "-", "-"]
    return [str(len(values)), *(f"{quantile(values, q):.1f}" for q in (0.5, 0.9, 0.99, 1.0))]


def report(runs: dict[str, Samples]) -> list[list[str]]:
    """Rows of (what, events, median, p90, p99, max, warm replay median, no-op median,
    no-op p99)."""
    rows = []
    pooled: dict[str, list[int]] = {"plain": [], "streamed": []}
    pooled_warm: dict[str, list[int]] = {"plain": [], "streamed": []}
    pooled_noop: dict[str, list[int]] = {"plain": [], "streamed": []}

    def row(label: str, values: list[int], warm: list[int], noop: list[int] | None) -> None:
        floor = stats(noop)[1:4:2] if noop is not None else ["-", "-"]
        rows.append([label, *stats(values), stats(warm)[1], *floor])

    for mode in ("plain", "streamed"):
        ours, floor = runs[mode].by_kind, runs[f"noop {mode}"].by_kind
        kinds = [*HOOK_NAMES, TEXT_DELTA] if mode == "streamed" else HOOK_NAMES
        for kind in kinds:
            values, warm = ours.get(kind, []), ours.get(kind + WARM, [])
            noop = floor.get(kind, []) if kind in HOOK_NAMES else None
            pooled[mode] += values
            pooled_warm[mode] += warm
            pooled_noop[mode] += noop or []
            row(f"{mode}: {kind}", values, warm, noop)
        if mode == "streamed":
            row(f"{mode}: {OTHER_EVENT}", ours.get(OTHER_EVENT, []),
                ours.get(OTHER_EVENT + WARM, []), None)
            for kind in (PASS_TEXT, PASS_OTHER):
                row(f"{mode}: {kind}", ours.get(kind, []), [], floor.get(kind, []))
        row(f"{mode}: all hook events" + (" + text deltas" if mode == "streamed" else ""),
            pooled[mode], pooled_warm[mode], pooled_noop[mode])
    every = pooled["plain"] + pooled["streamed"]
    row("all events, both runs", every, pooled_warm["plain"] + pooled_warm["streamed"],
        pooled_noop["plain"] + pooled_noop["streamed"])
    median = quantile(every, 0.5)
    rows.append(["  median against the target", "", f"{median:.1f}", "", "", "", "",
                 f"{'within' if median <= TARGET_US else 'over'} {TARGET_US:.0f} us", ""])
    return rows


def parts_report(samples: Samples) -> list[list[str]]:
    """Rows of (hook: part, calls, median, p90, p99, max), hooks first."""
    rows = []
    for name in HOOK_NAMES:
        if name in samples.by_kind:
            rows.append([name, *stats(samples.by_kind[name])])
            rows += [[f"  {kind.split(': ', 1)[1]}", *stats(values)]
                     for kind, values in samples.by_kind.items()
                     if kind.startswith(name + ": ")]
    return rows


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (c.ljust(w) for c, w in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=600, help="sequential tool calls in the turn")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the files go (default: a temp dir in the system's temp dir)")
    args = parser.parse_args()
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="sessiontape-bench-") as tmp:
        runs = asyncio.run(run(args.calls, Path(tmp)))
    print(f"{os.cpu_count()} CPUs; load average (1 min) {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end")
    print(f"\nOne turn of {args.calls} tool calls after a handoff; times in us on the event "
          "loop. warm: the same calls replayed\nafter the run, one kind after another; no-op: "
          "the same run not recorded, a no-op RunHooks under the same timer.")
    print_table([["hook time (us)", "events", "median", "p90", "p99", "max", "warm median",
                  "no-op median", "no-op p99"], *report(runs)])
    print("\nWhere the time goes (a third run, not streamed, each part timed on its own; parts "
          "nest:\n_emit holds now_ms and scope.submit, which holds the queue put):")
    print_table([["hook part (us)", "calls", "median", "p90", "p99", "max"],
                 *parts_report(runs["parts"])])


if __name__ == "__main__":
    main()
