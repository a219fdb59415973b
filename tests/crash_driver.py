"""The child program of ``test_crash_loop.py``: long recorded runs, killed at random moments.

``python tests/crash_driver.py run INDEX`` records run ``INDEX`` of the shared
conversation in this process and exits (0: the run completed with no
recording error).

``python tests/crash_driver.py serve`` is a fork server: it imports the SDK
and the recorder once, then for each ``run INDEX DELAY_MS`` line on stdin
forks a child that records run ``INDEX``, sends it ``SIGKILL`` after
``DELAY_MS`` milliseconds unless it ended first (a negative delay: never),
reaps it and prints ``end INDEX killed MS`` or ``end INDEX exit=CODE MS`` (how
long the child lived). The
server has no threads when it forks, and it only ever kills its own
unreaped children, so a pid is never reused under it. Each child is a real
recording process with its own store connection, writer thread and files.

Every run prints ``seen INDEX N`` at its first model call, where ``N`` is
the number of input items the model received (the stored history plus the
new prompt). Paths come from the environment (``SKILLET_HOME``,
``XDG_DATA_HOME``), so every run shares one store, logs root and AgentUse
root, and one conversation (``USER``, ``SESSION``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
import threading
import time
from typing import Any

import scripted
from agents import Agent, function_tool
from agents.testing import ModelStep
from agents.testing.model import ModelCall
from scripted import (
    call,
    chunked_message,
    final,
    model,
    reasoning,
    run_agent,
    tools_step,
    usage,
)

from sessiontape import Recorder
from sessiontape.writer import BATCH_WINDOW

USER = "crash@example.com"
SESSION = "crash-loop"
PARALLEL_CALLS = 3  # tool calls per model step
TOOL_STEPS = 4  # model steps that call tools, besides the subagent's


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key} " + "x" * 200


@function_tool
async def fetch(key: str) -> str:
    """Fetches a key (as long as the writer's batch window: a run's lines and files reach
    the disk in several batches, so kills land between batches, not only before all)."""
    await asyncio.sleep(BATCH_WINDOW)
    return f"fetched {key}"


def build_agent(index: int) -> Agent[Any]:
    """Run ``index``'s agent: reasoning, parallel tool calls, a subagent, a chunked answer."""
    helper = Agent(name="Helper", tools=[lookup], model=model(
        tools_step(call("lookup", {"key": f"h{index}"})),
        final(f"helper answer {index}", usage(5, 2))))

    def first(seen: ModelCall) -> ModelStep:
        # one write(2) of the whole line: a kill never leaves half of it (with
        # PYTHONUNBUFFERED, print() writes the text and the newline separately)
        os.write(sys.stdout.fileno(), f"seen {index} {len(seen.input)}\n".encode())
        return tools_step(*(call("lookup", {"key": f"{index}.0.{n}"})
                            for n in range(PARALLEL_CALLS)),
                          u=usage(100, 10), extra=[reasoning(f"planning run {index}")])

    steps: list[Any] = [ModelStep(responder=first)]
    steps.append(tools_step(call("helper", {"input": f"help with {index}"}),
                            call("fetch", {"key": f"{index}.sub"}), u=usage(120, 12)))
    for step in range(1, TOOL_STEPS):
        steps.append(tools_step(*(call("fetch" if n % 2 else "lookup",
                                       {"key": f"{index}.{step}.{n}"})
                                  for n in range(PARALLEL_CALLS)), u=usage(140, 14)))
    chunks = [f"answer {index} part {n}. " for n in range(6)]
    steps.append(ModelStep(output=[chunked_message(*chunks)], usage=usage(160, 16),
                           response_id=f"resp_final_{index}"))
    return Agent(name="Crasher", instructions="Record everything.",
                 tools=[lookup, fetch, helper.as_tool("helper", "Ask the helper.")],
                 model=model(*steps))


def final_text(index: int) -> str:
    """What run ``index`` answers when it completes."""
    return "".join(f"answer {index} part {n}. " for n in range(6))


def record_run(index: int) -> int:
    """Record run ``index`` (streamed when odd); the exit code: 0 when all went well."""
    # Forked children would all continue the server's id counter, and the SDK drops
    # input items whose ids repeat: give each run ids of its own.
    scripted._ids = itertools.count(index * 1_000_000)
    async def main() -> int:
        rec = Recorder(USER, SESSION)
        output = await run_agent(rec, build_agent(index), f"prompt {index}",
                                 streamed=index % 2 == 1)
        if output != final_text(index):
            print(f"wrong output {output!r}", file=sys.stderr, flush=True)
            return 2
        return 3 if rec.errors else 0

    return asyncio.run(main())


def _wait_or_kill(pid: int, delay_ms: float) -> str:
    """Reap child ``pid``; SIGKILL it first if it is still running after ``delay_ms``."""
    deadline = time.monotonic() + delay_ms / 1000 if delay_ms >= 0 else float("inf")
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return f"exit={os.waitstatus_to_exitcode(status)}"
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)  # still ours: a child is only reaped by us
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            return "killed" if code == -signal.SIGKILL else f"exit={code}"
        time.sleep(0.0002)


def serve() -> None:
    """The fork server loop (see the module docstring)."""
    print("ready", flush=True)
    for line in sys.stdin:
        command, index, delay = line.split()
        assert command == "run"
        if threading.active_count() != 1:
            raise SystemExit("the fork server must not have threads")
        pid = os.fork()
        if pid == 0:  # the child: one recording process
            code = 1
            try:
                code = record_run(int(index))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        started = time.monotonic()
        outcome = _wait_or_kill(pid, float(delay))
        print(f"end {index} {outcome} {(time.monotonic() - started) * 1000:.1f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        sys.exit(record_run(int(sys.argv[2])))
