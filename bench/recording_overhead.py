"""Recording overhead: a recorded run against the same run not recorded, and the SDK's own store.

The work is one turn of CALLS sequential tool calls (600 by default: the size
the Agents Ledger doc reports), driven by a deterministic scripted model: each
model step calls one cheap function tool once, and a last step answers. The
three sides run the same script with a file database for the conversation:

* sdk: ``Runner.run(agent, prompt, session=SQLiteSession(...))``, the SDK alone;
* plain: ``Runner.run(agent, prompt, session=ItemStore(path).session(...))``,
  sessiontape's item store with no hooks: the same store as the recorded run,
  nothing recorded;
* recorded: ``Recorder.run(agent, prompt)``, whose session is that item store
  (compaction checked at the end of the run) and which also writes the
  AgentUse tree and the JSONL log. Its wall time includes the wait for the
  writer thread at the end of the run, also shown on its own ("flush at end").

recorded / plain is the cost of recording (target <= 1.05x); recorded / sdk is
what a user of the SDK's ``SQLiteSession`` sees (target <= 1.00x). After an
untimed warm-up of each side, the rounds run the three sides on fresh files in
new directories, in an order that changes every round (six rounds go through
every order once); the figures are medians over the rounds, and the per-round
ratios' medians are shown beside them. The SDK sends the whole history to the
model on every turn, so a run is quadratic in CALLS on every side alike: about
20-30 s per run at 600 calls on a 2-CPU machine, 6-10 minutes in all with the
defaults (``--rounds 1`` for a quick look). All files go to a temporary
directory (``SKILLET_HOME`` and the XDG directories point into it), never to
the home directory or the repo.

    python bench/recording_overhead.py [--calls 600] [--rounds 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents import Agent, Runner, Usage, function_tool
from agents.memory import SQLiteSession
from agents.testing import (
    ModelCall,
    ModelStep,
    ScriptedModel,
    assistant_message,
    function_call,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from timing import median

from sessiontape import Price, Recorder
from sessiontape.storage.file_writes import WORKER as FILE_WORKER
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.compaction import archived_items
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.summarizers import is_summary
from sessiontape.writer import WRITER

TARGET_VS_PLAIN = 1.05  # recorded / the same store not recorded
TARGET_VS_SDK = 1.00  # recorded / the SDK with SQLiteSession
WARM_UP_CALLS = 20
USER_ID = "john@example.com"
PROMPT = "Look up every record, one call at a time, then say how many there were."
FINAL_TEXT = "Done: all records looked up."
# The scripted model is "scripted:default"; a price makes the recorder compute costs.
PRICES = {"default": Price(2.00, 0.50, 8.00)}


@function_tool
def lookup(record: int) -> str:
    """Look up one record by number."""
    return f"record {record}: ok"


def usage(step: int) -> Usage:
    """One model call's usage (the input grows with the history, as it would)."""
    input_tokens = 120 + 40 * step
    return Usage(requests=1, input_tokens=input_tokens, output_tokens=18,
                 total_tokens=input_tokens + 18,
                 input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                 output_tokens_details=OutputTokensDetails(reasoning_tokens=0))


def script(calls: int, say: bool = False) -> list[ModelStep]:
    """``calls`` steps that call the tool once each (``say``: after a sentence), then the
    answer; every id unique."""
    steps = [ModelStep(output=[
        *([assistant_message(f"Looking up record {n} of {calls} now.", item_id=f"msg_{n:05d}")]
          if say else []),
        function_call("lookup", {"record": n}, call_id=f"call_{n:05d}", item_id=f"fc_{n:05d}")],
        usage=usage(n), response_id=f"resp_{n:05d}") for n in range(calls)]
    steps.append(ModelStep(output=[assistant_message(FINAL_TEXT, item_id="msg_final")],
                           usage=usage(calls), response_id="resp_final"))
    return steps


class LeanScriptedModel(ScriptedModel):
    """``ScriptedModel`` without its record of the calls.

    ``ScriptedModel`` deep-copies every call's input twice and keeps one copy:
    quadratic work and memory (a quarter of the run at 600 calls) that belong
    to neither side and would dilute the ratio. Steps and responses are the same.
    """

    def _record_call(self, **call: Any) -> ModelCall:
        return ModelCall(**call)


def make_agent(calls: int) -> Agent[Any]:
    return Agent(name="ledger", instructions="Use the lookup tool for each record.",
                 model=LeanScriptedModel(script(calls)), tools=[lookup])


def point_env_at(directory: Path) -> None:
    """Every location sessiontape (or anything else) would write to, inside ``directory``."""
    for name, sub in (("SKILLET_HOME", "skillet"), ("XDG_DATA_HOME", "xdg-data"),
                      ("XDG_STATE_HOME", "xdg-state"), ("XDG_CACHE_HOME", "xdg-cache"),
                      ("XDG_CONFIG_HOME", "xdg-config")):
        os.environ[name] = str(directory / sub)


class CountedWrites:
    """Counts the AgentUse files the writer thread hands to the file-writing helper (each an
    atomic rewrite)."""

    def __init__(self) -> None:
        self.count = 0
        self._write = FILE_WORKER.write

    def __enter__(self) -> CountedWrites:
        FILE_WORKER.write = self._counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        FILE_WORKER.write = self._write  # type: ignore[method-assign]

    def _counted(self, files: Sequence[tuple[Path, bytes]]) -> None:
        self.count += len(files)
        self._write(files)


def cpu_seconds(stat: Path) -> float:
    """User + system CPU seconds in a /proc stat file (Linux; else nan)."""
    try:
        fields = stat.read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def writer_cpu() -> float:
    """CPU seconds used so far by sessiontape's writer thread."""
    tid = getattr(getattr(WRITER, "_thread", None), "native_id", None)
    return cpu_seconds(Path(f"/proc/self/task/{tid}/stat"))


def helper_cpu() -> float:
    """CPU seconds used so far by the file-writing helper process (0 when none runs)."""
    pid = FILE_WORKER.pid
    return 0.0 if pid is None else cpu_seconds(Path(f"/proc/{pid}/stat"))


async def timed(run: Any) -> tuple[dict[str, float], Any]:
    """Wall time, event-loop thread CPU and whole-process CPU of ``await run()``."""
    gc.collect()
    wall, loop_cpu, cpu = time.perf_counter(), time.thread_time(), time.process_time()
    result = await run()
    figures = {"wall": time.perf_counter() - wall, "loop_cpu": time.thread_time() - loop_cpu,
               "cpu": time.process_time() - cpu}
    return figures, result


def check_result(result: Any, calls: int) -> None:
    assert result.final_output == FINAL_TEXT, result.final_output
    outputs = [i for i in result.new_items if i.type == "tool_call_output_item"]
    assert len(outputs) == calls, len(outputs)


async def sdk(directory: Path, calls: int) -> dict[str, float]:
    """The SDK alone: ``Runner.run`` with a ``SQLiteSession`` on a fresh file."""
    point_env_at(directory)
    agent = make_agent(calls)
    database = directory / "sdk.sqlite"
    session = SQLiteSession(f"{USER_ID}:baseline", database)
    try:
        figures, result = await timed(
            lambda: Runner.run(agent, PROMPT, session=session, max_turns=calls + 10))
        check_result(result, calls)
        assert len(await session.get_items()) == 2 * calls + 2
    finally:
        session.close()
    return figures


async def plain(directory: Path, calls: int) -> dict[str, float]:
    """sessiontape's item store with no recording: ``Runner.run`` with
    ``ItemStore(path).session(...)`` (the file the recorder would use), no hooks."""
    point_env_at(directory)
    agent = make_agent(calls)
    store = ItemStore(SkilletPaths.resolve().store_file)
    session = store.session(USER_ID, "plain")
    try:  # opened by the run's first read, as the recorder's store is
        figures, result = await timed(
            lambda: Runner.run(agent, PROMPT, session=session, max_turns=calls + 10))
        check_result(result, calls)
        assert len(await session.get_items()) == 2 * calls + 2
    finally:
        await store.close()
    return figures


async def recorded(directory: Path, calls: int) -> dict[str, float]:
    """``Recorder.run`` on fresh files (item store, AgentUse tree, JSONL log)."""
    point_env_at(directory)
    agent = make_agent(calls)
    rec = Recorder(user_id=USER_ID, session_name="recorded", project_root=directory,
                   prices=PRICES)
    flush: dict[str, float] = {}
    flush_after_run = rec.flush_after_run

    async def timed_flush(*args: Any, **kwargs: Any) -> None:  # the end of rec.run
        flush["backlog"] = WRITER._queue.qsize()
        start = time.perf_counter()
        try:
            await flush_after_run(*args, **kwargs)
        finally:
            flush["flush"] = time.perf_counter() - start

    rec.flush_after_run = timed_flush  # type: ignore[method-assign]
    try:
        await rec.flush()  # starts the writer thread, if need be, before the timed run
        cpu, helper = writer_cpu(), helper_cpu()
        with CountedWrites() as writes:
            figures, result = await timed(lambda: rec.run(agent, PROMPT, max_turns=calls + 10))
        figures["writer_cpu"] = writer_cpu() - cpu
        figures["helper_cpu"] = helper_cpu() - helper
        figures["files_written"] = writes.count
        figures.update(flush)
        check_result(result, calls)
        assert rec.errors == 0, f"{rec.errors} recording errors"
        # Compaction is on, as by default: live + archived items are every item.
        live = [i for i in await rec.session.get_items() if not is_summary(i)]
        archived = await archived_items(rec.store.path, USER_ID, "recorded")
        assert len(live) + len(archived) == 2 * calls + 2, (len(live), len(archived))
    finally:
        await rec.store.close()
    # The recording happened: a tool part per call, and the log's tool steps.
    assert rec.session_dir is not None
    tool_parts = [p for p in rec.session_dir.glob("*/part/*.json") if b'"tool"' in p.read_bytes()]
    assert len(tool_parts) == calls, len(tool_parts)
    assert rec.log_path.read_bytes().count(b"\n") >= 2 * calls + 2
    return figures


SIDES = {"sdk": sdk, "plain": plain, "recorded": recorded}


def order_of(round_no: int) -> list[str]:
    """The sides' order in a round: rotated every two rounds, reversed every other
    round, so that six rounds run each of the six orders once."""
    names = list(SIDES)
    shift = (round_no // 2) % len(names)
    names = names[shift:] + names[:shift]
    return names[::-1] if round_no % 2 else names


async def run(calls: int, rounds: int, directory: Path) -> dict[str, dict[str, float]]:
    """A warm-up, then ``rounds`` rounds of the three sides in changing order; medians."""
    for side, measure in SIDES.items():
        (directory / f"warm-up-{side}").mkdir()
        await measure(directory / f"warm-up-{side}", WARM_UP_CALLS)
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    for round_no in range(rounds):
        order = order_of(round_no)
        for side in order:
            (directory / f"{round_no}-{side}").mkdir()
            runs[side].append(await SIDES[side](directory / f"{round_no}-{side}", calls))
        wall = {side: runs[side][-1]["wall"] for side in SIDES}
        print(f"round {round_no + 1}/{rounds} ({', '.join(order)}): "
              f"sdk {wall['sdk']:.2f} s, plain {wall['plain']:.2f} s, "
              f"recorded {wall['recorded']:.2f} s; recorded/plain "
              f"{wall['recorded'] / wall['plain']:.3f}x, recorded/sdk "
              f"{wall['recorded'] / wall['sdk']:.3f}x", flush=True)
    figures = {side: {key: median([r[key] for r in results]) for key in results[0]}
               for side, results in runs.items()}
    for base in ("plain", "sdk"):
        pairs = zip(runs[base], runs["recorded"], strict=True)
        figures["recorded"][f"round_ratio_{base}"] = median(
            [ours["wall"] / theirs["wall"] for theirs, ours in pairs])
    return figures


def verdict(ratio: float, target: float) -> str:
    return f"{ratio:.3f}x ({'within' if ratio <= target else 'over'} {target:.2f}x)"


def report(figures: dict[str, dict[str, float]], calls: int) -> list[tuple[str, ...]]:
    """Rows of (what, sdk, plain, recorded, recorded / plain, recorded / sdk) for printing."""
    sdk_, plain_, ours = figures["sdk"], figures["plain"], figures["recorded"]

    def ratios(key: str) -> tuple[str, str]:
        return f"{ours[key] / plain_[key]:.3f}x", f"{ours[key] / sdk_[key]:.3f}x"

    def seconds(key: str) -> tuple[str, str, str]:
        return f"{sdk_[key]:.2f} s", f"{plain_[key]:.2f} s", f"{ours[key]:.2f} s"

    return [
        (f"wall time, 1 turn of {calls} tool calls", *seconds("wall"),
         verdict(ours["wall"] / plain_["wall"], TARGET_VS_PLAIN),
         verdict(ours["wall"] / sdk_["wall"], TARGET_VS_SDK)),
        ("  per-round ratios, median", "", "", "",
         verdict(ours["round_ratio_plain"], TARGET_VS_PLAIN),
         verdict(ours["round_ratio_sdk"], TARGET_VS_SDK)),
        ("wall time per tool call", *(f"{side['wall'] / calls * 1e3:.2f} ms"
                                      for side in (sdk_, plain_, ours)),
         f"{(ours['wall'] - plain_['wall']) / calls * 1e3:+.2f} ms",
         f"{(ours['wall'] - sdk_['wall']) / calls * 1e3:+.2f} ms"),
        ("CPU, event-loop thread", *seconds("loop_cpu"), *ratios("loop_cpu")),
        ("CPU, whole process", *seconds("cpu"), *ratios("cpu")),
        ("  of which writer thread", "-", "-", f"{ours['writer_cpu']:.2f} s", "", ""),
        ("CPU, file-writing helper process", "-", "-", f"{ours['helper_cpu']:.2f} s", "", ""),
        ("AgentUse file writes per tool call", "-", "-", f"{ours['files_written'] / calls:.2f}",
         f"{ours['files_written']:.0f} atomic rewrites", ""),
        ("flush at end (in wall time)", "-", "-", f"{ours['flush'] * 1e3:.1f} ms",
         f"{ours['backlog']:.0f} events were queued", ""),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=600, help="sequential tool calls in the turn")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every side (medians)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the files go (default: a temp dir in the system's temp dir)")
    args = parser.parse_args()
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # read on first use, for every side
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="sessiontape-bench-") as tmp:
        figures = asyncio.run(run(args.calls, args.rounds, Path(tmp)))
    print(f"{os.cpu_count()} CPUs; load average (1 min) {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end")
    rows: list[tuple[str, ...]] = [("recording overhead", "SDK + SQLiteSession",
                                    "ItemStore, not recorded", "recorded",
                                    "recorded / not recorded", "recorded / SDK")]
    rows += report(figures, args.calls)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())


if __name__ == "__main__":
    main()
