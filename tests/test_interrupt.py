"""Ctrl-C on a recording process: the session is marked failed and the turn closed; the
command line stops at once, even while a synchronous tool blocks its thread."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from harness import EXECUTABLE, REPO, Terminal, cli_environ, sigint_default, wait_for

from sessiontape.storage.agentuse.reader import load_session
from sessiontape.storage.names import DEFAULT_USER_ID
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.log_reader import SessionLogReader
from sessiontape.storage.skillet.replay_log import ReplayLog

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


@pytest.mark.slow
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


@pytest.mark.slow
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


# -- Ctrl-C while a synchronous tool blocks its thread: `sessiontape run` and `chat` ----------

BLOCKING_TOOLS = textwrap.dedent('''
    import asyncio
    import itertools
    import os
    import time
    from pathlib import Path

    from agents import Agent, AgentHooks, function_tool
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call


    @function_tool
    def stuck() -> str:
        """Blocks the thread the SDK runs it in (it says when, in the current directory)."""
        Path("stuck.started").touch()
        time.sleep(600)
        return "late"


    def stuck_agent():
        return Agent(name="Stuck", tools=[stuck], model=ScriptedModel([
            ModelStep(output=[function_call("stuck", {}, call_id="c_stuck", item_id="fc_stuck")],
                      response_id="r_stuck"),
            ModelStep(output=[assistant_message("done at last", item_id="m_done")],
                      response_id="r_done"),
        ]))


    # as many as the threads of asyncio's default executor (ThreadPoolExecutor's default)
    CROWD = min(32, (getattr(os, "process_cpu_count", os.cpu_count)() or 1) + 4)


    @function_tool
    def stuck_n(n: int) -> str:
        """Blocks its thread, as stuck does (stuck.<n> says when)."""
        Path(f"stuck.{n}").touch()
        time.sleep(600)
        return "late"


    def crowd_agent():
        """Calls stuck_n CROWD times at once: every thread of the default executor blocks."""
        calls = [function_call("stuck_n", {"n": n}, call_id="c_stuck" if n == 0 else
                               f"c_stuck_{n}", item_id=f"fc_{n}") for n in range(CROWD)]
        return Agent(name="Stuck", tools=[stuck_n], model=ScriptedModel([
            ModelStep(output=calls, response_id="r_crowd")]))


    class Stubborn(AgentHooks):
        """Before quick runs: waits, and ignores every cancellation (counted in files)."""

        async def on_tool_start(self, context, agent, tool):
            if tool.name != "quick":
                return
            Path("hook.started").touch()
            for n in itertools.count(1):
                try:
                    await asyncio.sleep(600)
                except asyncio.CancelledError:
                    Path(f"hook.cancelled.{n}").touch()


    @function_tool
    def quick() -> str:
        """Returns at once (if it is ever called)."""
        return "quick"


    def stubborn_agent():
        """Calls stuck and quick at once: a blocked thread and a hook that will not stop."""
        return Agent(name="Stuck", tools=[stuck, quick], hooks=Stubborn(),
                     model=ScriptedModel([ModelStep(output=[
                         function_call("stuck", {}, call_id="c_stuck", item_id="fc_stuck"),
                         function_call("quick", {}, call_id="c_quick", item_id="fc_quick"),
                     ], response_id="r_both")]))
''')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory holding the agents module (the tools touch their files here)."""
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "blocking_tools.py").write_text(BLOCKING_TOOLS)
    return directory


@pytest.fixture
def terminals() -> Iterator[Callable[..., Terminal]]:
    opened: list[Terminal] = []

    def start(*args: str, cwd: Path) -> Terminal:
        terminal = Terminal([EXECUTABLE, *args], cli_environ(TERM="dumb"), cwd=cwd)
        opened.append(terminal)
        return terminal

    yield start
    for terminal in opened:
        terminal.close()  # kills a process a failed test left running


def assert_recorded_as_stopped(session_name: str, later: Sequence[str] = (),
                               calls: int = 1) -> None:
    """The first turn of ``session_name`` is recorded as stopped by Ctrl-C in the log, the
    tree (its ``calls`` tool calls, or more, failed) and the store; the turns after it
    answered ``later``."""
    log = ReplayLog(DEFAULT_USER_ID, session_name,
                    Path(os.environ["SKILLET_HOME"]) / "state/.agent_session_logs").path
    prompts = ["wait for it", *(f"prompt {n}" for n in range(len(later)))]
    turns = SessionLogReader(log).turns()
    assert [t.user_input for t in turns] == prompts
    assert turns[0].complete and turns[0].text.startswith("[run failed] CancelledError")
    assert [t.text for t in turns[1:]] == list(later)
    [session_json] = Path(os.environ["XDG_DATA_HOME"]).rglob("*-stuck/session.json")
    session = load_session(session_json.parent)
    first = session.messages[0]
    assert "completed" not in first.info["time"]
    tools = {p["callID"]: p["state"] for p in first.parts if p["type"] == "tool"}
    assert "c_stuck" in tools and len(tools) >= calls
    for state in tools.values():
        assert state["status"] == "error"
        assert state["error"] == "CancelledError: the run was cancelled"
    if not later:
        assert session.info["status"] == "error"
        assert session.info["error"]["code"] == "USER_STOPPED"

    async def stored() -> list[Any]:
        store = ItemStore(Path(os.environ["SKILLET_HOME"]) / "state/.agent_sessions.sqlite")
        try:
            return await store.session(DEFAULT_USER_ID, session_name).get_items()
        finally:
            await store.close()

    items = asyncio.run(stored())
    assert [i["content"] for i in items if i.get("role") == "user"] == prompts


@pytest.mark.parametrize("stream", ["--no-stream", "--stream"])
@pytest.mark.slow
def test_run_ctrl_c_during_a_blocking_tool_leaves_at_once_recorded_as_stopped(
        terminals: Callable[..., Terminal], project: Path, stream: str) -> None:
    run = terminals("run", stream, "--agent", "blocking_tools:stuck_agent", "--session-name",
                    "stuck", "wait for it", cwd=project)
    wait_for((project / "stuck.started").exists, "the blocking tool to start")
    run.send("\x03")
    # The tool sleeps 600 s, far beyond wait()'s timeout: ending at all is not waiting for it.
    assert run.wait() == 130
    assert "sessiontape run: cancelled (recorded as stopped)" in run.seen
    assert "Traceback" not in run.seen and "Exception ignored" not in run.seen
    assert_recorded_as_stopped("stuck")


@pytest.mark.slow
def test_run_ctrl_c_while_blocking_tools_hold_every_executor_thread_stops_at_once(
        terminals: Callable[..., Terminal], project: Path) -> None:
    sys.path.insert(0, str(project))
    try:
        from blocking_tools import CROWD
    finally:
        sys.path.remove(str(project))
    run = terminals("run", "--agent", "blocking_tools:crowd_agent", "--session-name",
                    "stuck", "wait for it", cwd=project)
    wait_for(lambda: all((project / f"stuck.{n}").exists() for n in range(CROWD)),
             f"{CROWD} blocking tools to start")
    run.send("\x03")  # one Ctrl-C: writing the recording needs none of those threads
    assert run.wait() == 130
    assert_recorded_as_stopped("stuck", calls=CROWD)


@pytest.mark.slow
def test_run_a_second_ctrl_c_while_the_run_stops_leaves_at_once(
        terminals: Callable[..., Terminal], project: Path) -> None:
    run = terminals("run", "--agent", "blocking_tools:stubborn_agent", "--session-name",
                    "stuck", "wait for it", cwd=project)
    wait_for((project / "stuck.started").exists, "the blocking tool to start")
    wait_for((project / "hook.started").exists, "the stubborn hook to start")
    run.send("\x03")
    run.expect("sessiontape run: cancelled (recorded as stopped)")
    # the hook ignored the run's cancellation, then the one of what the run left behind:
    # the command is stopping, and would wait for ever
    wait_for((project / "hook.cancelled.2").exists, "the hook to ignore two cancellations")
    run.send("\x03")
    assert run.wait() == 130  # waiting neither for the hook nor for the 600 s tool
    assert not (project / "hook.cancelled.3").exists()
    assert "Traceback" not in run.seen and "Exception ignored" not in run.seen
    assert_recorded_as_stopped("stuck")


@pytest.mark.parametrize("leave", ["ctrl-d", "/exit", "ctrl-c"])
@pytest.mark.slow
def test_chat_ctrl_c_during_a_blocking_tool_returns_to_the_prompt_and_leaves_at_once(
        terminals: Callable[..., Terminal], project: Path, leave: str) -> None:
    chat = terminals("chat", "--agent", "blocking_tools:stuck_agent", "--session-name",
                     "stuck", cwd=project)
    chat.expect("user> ")
    chat.send("wait for it\n")
    wait_for((project / "stuck.started").exists, "the blocking tool to start")
    chat.send("\x03")
    assert "cancelled (recorded as stopped)" in chat.expect("user> ")
    # the tool's thread still sleeps: the conversation goes on beside it
    assert "agent> done at last" in chat.line("prompt 0")
    if leave == "ctrl-c":
        assert chat.interrupt_at_prompt() == 130
    else:
        chat.send("\x04" if leave == "ctrl-d" else "/exit\n")
        assert chat.wait() == 0  # not waiting for the 600 s tool
    assert "Traceback" not in chat.seen and "Exception ignored" not in chat.seen
    assert_recorded_as_stopped("stuck", later=["done at last"])
