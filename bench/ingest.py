"""``sessiontape ingest --format agentrun``: its speed and peak memory, beside a live recording.

A stream of TURNS agentrun turns (a prompt, reasoning, a text, a tool call with a 2 KB
output, the answer and a ``result`` with usage and cost) is ingested by ``sessiontape
ingest`` as a whole process of sessiontape installed from a wheel (``bench/installed.py``),
into fresh data directories (``--dir``). The baseline, measured beside it in the same run:
the same turns recorded live, one ``Recorder`` running the real SDK ``Runner`` on a scripted
model with the same tool call and texts, as a whole process of the same install. Both write
the same three layouts through the same writer thread; the target is an ingest no slower
than the live recording of what it records (ratio <= 1.0). Each is run at TURNS / 4 and at
TURNS: wall seconds, turns/s, the stream's MB/s, and the peak RSS (``ru_maxrss`` of that
one process, through the exports bench's launcher): bounded memory means the peak at TURNS
is that at TURNS / 4 within RSS_SLACK (an ingest outruns the writer, whose queue holds up to
HIGH_WATER events, tool outputs included, before it waits: the queue fills within the
first thousand turns, then the peak stays; 8 000 turns: 122.4 MB, 2 000: 120.6 MB).

Measured on the team machine (2 cores, load 1.3, shared), 2026-11-27: 2 000 turns ingested
in 21.0 s (95 turns/s) against 53.2 s recorded live (38 turns/s): 0.39x; peak RSS 121.6 MB
(116.8 MB at 500 turns; the live recording 112.5 MB). Both are bound by the writer's work
per turn (the AgentUse tree's files through the file worker, the log's durable append).

    python bench/ingest.py [--turns 2000] [--quick] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from exports import run_process
from installed import installed_sessiontape
from sessions_listing import environment

RSS_SLACK = 8 * 2**20  # the writer's queue filling up (see above)
MB = 2**20
OUTPUT = "r" * 2048

LIVE = '''
import asyncio, sys
from agents import Agent, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from sessiontape import Recorder

OUTPUT = "r" * 2048

@function_tool
def lookup(q: int) -> str:
    """Look it up."""
    return OUTPUT

async def main(turns: int) -> None:
    async with Recorder(session_name="live") as rec:
        for i in range(turns):
            model = ScriptedModel([
                ModelStep(output=[assistant_message("Looking it up."),
                                  function_call("lookup", {"q": i}, call_id=f"call_{i}")]),
                ModelStep(output=[assistant_message(f"answer {i}")],
                          usage=Usage(requests=1, input_tokens=100, output_tokens=10,
                                      total_tokens=110))])
            agent = Agent(name="a", model=model, tools=[lookup])
            await rec.run(agent, f"question {i}")

asyncio.run(main(int(sys.argv[1])))
'''


def stream(turns: int) -> bytes:
    """The agentrun lines of ``turns`` turns, as an orchestrator would emit them."""
    lines = [{"type": "init", "resume_id": "ingested",
              "init": {"agent_name": "a", "model": "openai/gpt-4.1"}}]
    for i in range(turns):
        lines += [{"type": "system", "content": f"question {i}"},
                  {"type": "thinking", "content": "I should look it up."},
                  {"type": "text", "content": "Looking it up."},
                  {"type": "tool_use", "tool": {"name": "lookup", "input": {"q": i}}},
                  {"type": "tool_result", "tool": {"name": "lookup", "output": OUTPUT}},
                  {"type": "text", "content": f"answer {i}"},
                  {"type": "result", "stop_reason": "end_turn", "content": f"answer {i}",
                   "usage": {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.0003}}]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


@dataclass(frozen=True)
class Run:
    what: str
    turns: int
    seconds: float
    rss: int
    size: int


def one(what: str, turns: int, script: Path, work: Path) -> Run:
    base = work / f"{what}-{turns}"
    base.mkdir(parents=True)
    env = {**os.environ, **environment(base), "HOME": str(base),
           "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    data = stream(turns)
    if what == "ingest":
        (base / "stream.jsonl").write_bytes(data)
        argv = [str(script), "ingest", "--format", "agentrun", str(base / "stream.jsonl")]
    else:
        (base / "live.py").write_text(LIVE)
        argv = [str(script.parent / "python"), str(base / "live.py"), str(turns)]
    seconds, rss, _ = run_process(argv, env, base)
    return Run(what, turns, seconds, rss, len(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="--turns 400")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    turns = 400 if args.quick else args.turns
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-ingest-", dir=args.dir))
    try:
        script = installed_sessiontape(work / "installed")
        runs = [one(what, size, script, work) for size in (turns // 4, turns)
                for what in ("ingest", "live")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"ingest --format agentrun vs live recording, {turns // 4} and {turns} turns "
          f"(load {Path('/proc/loadavg').read_text().split()[0]})")
    print(f"{'what':<8}{'turns':>7}{'seconds':>10}{'turns/s':>10}{'MB/s':>8}{'peak RSS MB':>13}")
    for run in runs:
        print(f"{run.what:<8}{run.turns:>7}{run.seconds:>10.2f}{run.turns / run.seconds:>10.0f}"
              f"{run.size / MB / run.seconds:>8.2f}{run.rss / MB:>13.1f}")
    by = {(r.what, r.turns): r for r in runs}
    ratio = by["ingest", turns].seconds / by["live", turns].seconds
    growth = by["ingest", turns].rss - by["ingest", turns // 4].rss
    print(f"ingest / live at {turns} turns: {ratio:.2f} (target <= 1.0: "
          f"{'met' if ratio <= 1.0 else 'MISSED'})")
    print(f"ingest peak RSS growth from {turns // 4} to {turns} turns: {growth / MB:.1f} MB "
          f"(bounded: within {RSS_SLACK // MB} MB: "
          f"{'met' if growth <= RSS_SLACK else 'MISSED'})")


if __name__ == "__main__":
    main()
