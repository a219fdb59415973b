"""Ctrl-C on a recording process: the session is marked failed and the turn closed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from harness import REPO, sigint_default

from sessiontape.storage.agentuse_reader import load_session
from sessiontape.storage.log_reader import SessionLogReader

SCRIPT = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, "tests")
    from scripted import blocking_agent
    from sessiontape import Recorder

    async def main():
        agent, started = blocking_agent("c_int")
        rec = Recorder(session_name="interrupted")
        task = asyncio.ensure_future(rec.run(agent, "wait for me"))
        await started.wait()
        print(rec.session_dir, rec.log_path, flush=True)
        await task

    asyncio.run(main())
""")


def test_ctrl_c_marks_the_session_failed_and_closes_the_turn() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
                            preexec_fn=sigint_default)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    session_dir, log_path = (Path(p) for p in line.split())  # printed once the tool runs
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err  # the user's program stops

    session = load_session(session_dir)
    assert session.info["status"] == "error"
    assert session.info["error"]["code"] in ("USER_STOPPED", "USER_INTERRUPT")
    assert "completed" not in session.messages[0].info["time"]
    tool = next(p for p in session.messages[0].parts if p["type"] == "tool")
    assert tool["state"]["status"] == "error"
    turns = SessionLogReader(log_path).turns()
    assert turns[-1].complete and turns[-1].text.startswith("[run failed]")


CRASH = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, "tests")
    from agents import Agent
    from agents.testing import ModelStep
    from scripted import model
    from sessiontape import Recorder

    async def main():
        rec = Recorder(session_name="crashed")
        agent = Agent(name="A", model=model(ModelStep(error=RuntimeError("provider down"))))
        print(rec.log_path, flush=True)
        await rec.run(agent, "hello")   # raises; nothing catches it

    asyncio.run(main())
""")


def test_an_unhandled_exception_leaves_everything_written_and_marked() -> None:
    done = subprocess.run([sys.executable, "-c", CRASH], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env=os.environ.copy())
    assert done.returncode == 1 and "provider down" in done.stderr
    log_path = Path(done.stdout.split()[0])
    turns = SessionLogReader(log_path).turns()
    assert turns[-1].complete and "provider down" in turns[-1].text
    session_dir = next(Path(os.environ["XDG_DATA_HOME"]).rglob("*-a/session.json")).parent
    session = load_session(session_dir)
    assert session.info["status"] == "error"
    assert session.info["error"]["message"] == "provider down"
