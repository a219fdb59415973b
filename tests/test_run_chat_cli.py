"""`sessiontape run` and `sessiontape chat`: the real executable, in subprocesses and a pty."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import EXECUTABLE, Terminal, cli_environ, isolated_environ, run, wait_for

from sessiontape.cli.agent_loader import AgentLoadError, load_agent
from sessiontape.storage.names import DEFAULT_USER_ID
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.log_reader import SessionLogReader, Turn
from sessiontape.storage.skillet.replay_log import ReplayLog

LISBON = ("A day in Lisbon: it is sunny and 21°C, so start in the old town early and end at "
          "a viewpoint for the sunset. The currency conversion failed (XYZ is not supported), "
          "so budget about 80 EUR.")
DEMO_TAIL = "so budget about 80 EUR."

AGENTS = textwrap.dedent('''
    import asyncio
    import itertools
    from pathlib import Path

    from agents import Agent, function_tool
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    _ids = itertools.count()


    def _answer(text):
        n = next(_ids)
        return ScriptedModel([ModelStep(output=[assistant_message(text, item_id=f"msg_{n}")],
                                        response_id=f"resp_{n}")])


    agent = Agent(name="Module agent", model=_answer("the module agent answers"))


    def make_agent():
        return Agent(name="Factory agent", model=_answer("the factory agent answers"))


    not_an_agent = 42


    def failing_agent():
        return Agent(name="Failing", model=ScriptedModel([ModelStep(
            error=RuntimeError("the model exploded"))]))


    @function_tool
    async def slow() -> str:
        """Takes its time (it says when it has started, in the current directory)."""
        Path("slow.started").touch()
        await asyncio.sleep(60)
        return "late"


    @function_tool
    async def hold() -> str:
        """Holds the answer until the test says go (a file "go" in the current directory)."""
        while not Path("go").exists():
            await asyncio.sleep(0.01)
        return "went"


    def holding_agent():
        return Agent(name="Holding", tools=[hold], model=ScriptedModel([
            ModelStep(output=[assistant_message("part one", item_id="m_one"),
                              function_call("hold", {}, call_id="c_hold", item_id="fc_hold")],
                      response_id="r_one"),
            ModelStep(output=[assistant_message("part two", item_id="m_two")],
                      response_id="r_two"),
        ]))


    def slow_agent():
        return Agent(name="Slow", tools=[slow], model=ScriptedModel([
            ModelStep(output=[function_call("slow", {}, call_id="c_slow", item_id="fc_slow")],
                      response_id="r_slow"),
            ModelStep(output=[assistant_message("done at last", item_id="m_done")],
                      response_id="r_done"),
        ]))
''')


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "my_agents.py").write_text(AGENTS)
    return directory


def turns(session: str, skillet_home: Path | None = None) -> list[Turn]:
    home = skillet_home or Path(os.environ["SKILLET_HOME"])
    return SessionLogReader(ReplayLog(DEFAULT_USER_ID, session,
                                      home / "state/.agent_session_logs").path).turns()


def store_items(session: str, skillet_home: Path | None = None) -> list[Any]:
    home = skillet_home or Path(os.environ["SKILLET_HOME"])

    async def read() -> list[Any]:
        store = ItemStore(home / "state/.agent_sessions.sqlite")
        try:
            return await store.session(DEFAULT_USER_ID, session).get_items()
        finally:
            await store.close()

    return asyncio.run(read())


def user_messages(items: list[Any]) -> list[str]:
    return [i["content"] for i in items if i.get("role") == "user"]


# -- run: the processes start together (each in its own home), the tests check them ----------

RUNS: dict[str, list[list[str]]] = {
    "module": [["--agent", "my_agents:agent", "--session-name", "mine", "hello"]],
    "factory": [["--agent", "my_agents.py:make_agent", "--session-name", "mine", "hello"]],
    "bad": [["--agent", "my_agents:not_an_agent", "hello"]],
    "model": [["--model", "gpt-4.1-mini", "hello"]],
    "failed": [["--agent", "my_agents:failing_agent", "--session-name", "boom", "hello"]],
}
# the demo agent's whole answers, for the tests marked slow (their own fixture: the default
# run starts none of them)
DEMO_RUNS: dict[str, list[list[str]]] = {
    "defaults": [["Plan", "a day in Lisbon"]],
    "twice": [["--session-name", "trip", "Plan a day in Lisbon"],
              ["--session-name", "trip", "Now Porto please"]],
    "stream": [["--stream", "--session-name", "streamed", "Plan a day in Madeira"]],
}


@dataclass
class Done:
    """The processes of one entry of RUNS, and the skillet home they wrote to."""

    processes: list[subprocess.CompletedProcess[str]]
    skillet: Path

    @property
    def last(self) -> subprocess.CompletedProcess[str]:
        return self.processes[-1]


def _run_job(root: Path, agents: Path, commands: list[list[str]]) -> Done:
    job_env = isolated_environ(root, NO_COLOR="1")
    done = [run([EXECUTABLE, "run", *(a.format(dir=agents) for a in args)], cwd=agents,
                env=job_env) for args in commands]
    return Done(done, root / "skillet")


def _start_jobs(base: Path, jobs: dict[str, list[list[str]]]) -> Any:
    """Every entry of jobs, started at once (the SDK's import takes seconds per process)."""
    agents = base / "project"
    agents.mkdir()
    (agents / "my_agents.py").write_text(AGENTS)
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(_run_job, base / name, agents, commands)
                   for name, commands in jobs.items()}
        yield {name: future.result for name, future in futures.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from _start_jobs(tmp_path_factory.mktemp("runs"), RUNS)


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from _start_jobs(tmp_path_factory.mktemp("demo_runs"), DEMO_RUNS)


@pytest.mark.slow
def test_run_with_defaults_prints_the_answer_and_the_new_session_name(demo_runs: Any) -> None:
    job = demo_runs["defaults"]()
    done = job.last
    assert done.returncode == 0, done.stderr
    assert done.stdout == LISBON + "\n"
    name = re.search(r"new conversation (session_\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ_[0-9a-f]{8}) "
                     r"of john@example\.com", done.stderr)
    assert name, done.stderr
    assert f"--session-name {name[1]}" in done.stderr
    recorded = turns(name[1], job.skillet)
    assert [t.user_input for t in recorded] == ["Plan a day in Lisbon"]
    assert recorded[0].complete and recorded[0].text == LISBON
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_run_again_replays_the_earlier_turn_before_the_new_answer(demo_runs: Any) -> None:
    job = demo_runs["twice"]()
    first, second = job.processes
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert first.stdout == LISBON + "\n"
    assert "continuing trip" in second.stderr and "(1 earlier turn;" in second.stderr
    out = second.stdout
    order = [out.index("user> Plan a day in Lisbon"),
             out.index("Trip planner calls get_weather"),
             out.index("agent> (demo/scripted-demo) A day in Lisbon"),
             out.index("user> Now Porto please"),
             out.index("agent> A day in Porto")]
    assert order == sorted(order), out
    assert out.endswith(DEMO_TAIL + "\n")
    assert "\x1b[" not in out
    items = store_items("trip", job.skillet)
    assert len(items) == 18  # nine per demo turn: the model's history holds both
    assert user_messages(items) == ["Plan a day in Lisbon", "Now Porto please"]
    assert [t.complete for t in turns("trip", job.skillet)] == [True, True]


@pytest.mark.slow
def test_run_stream_prints_the_final_text(demo_runs: Any) -> None:
    job = demo_runs["stream"]()
    done = job.last
    assert done.returncode == 0, done.stderr
    (turn,) = turns("streamed", job.skillet)
    assert turn.text.startswith("A day in Madeira")
    assert done.stdout == turn.text + "\n"


@pytest.mark.parametrize("job, answer", [
    ("module", "the module agent answers"),  # module:attr, imported from the cwd
    ("factory", "the factory agent answers"),  # file.py:function returning an Agent
])
def test_run_loads_your_agent(runs: Any, job: str, answer: str) -> None:
    result = runs[job]()
    done = result.last
    assert done.returncode == 0, done.stderr
    assert done.stdout == answer + "\n"
    (turn,) = turns("mine", result.skillet)
    assert turn.complete and turn.text == answer
    assert user_messages(store_items("mine", result.skillet)) == ["hello"]


def test_a_bad_agent_is_a_usage_error(runs: Any) -> None:
    done = runs["bad"]().last
    assert done.returncode == 2
    assert ("sessiontape run: --agent my_agents:not_an_agent: my_agents:not_an_agent is a int, "
            "not an agents.Agent") in done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr


def test_model_without_a_key_is_a_usage_error(runs: Any) -> None:
    done = runs["model"]().last
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr and done.stdout == ""


def test_a_failed_run_exits_1_and_is_recorded(runs: Any) -> None:
    job = runs["failed"]()
    done = job.last
    assert done.returncode == 1
    assert "the run failed: RuntimeError: the model exploded" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    (turn,) = turns("boom", job.skillet)
    assert turn.user_input == "hello"
    assert turn.text == "[run failed] RuntimeError: the model exploded"


# -- the agent loader, in process -------------------------------------------------------------


@pytest.mark.parametrize("spec, name", [
    ("my_agents:agent", "Module agent"),
    ("my_agents", "Module agent"),  # the attribute defaults to `agent`
    ("{dir}/my_agents.py:make_agent", "Factory agent"),
    ("my_agents.py:make_agent", "Factory agent"),
])
def test_load_agent_forms(agents_dir: Path, monkeypatch: pytest.MonkeyPatch, spec: str,
                          name: str) -> None:
    monkeypatch.chdir(agents_dir)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "my_agents", raising=False)
    assert load_agent(spec.format(dir=agents_dir)).name == name


@pytest.mark.parametrize("spec, reason", [
    ("my_agents:missing", "my_agents has no attribute 'missing'"),
    ("my_agents:not_an_agent", "my_agents:not_an_agent is a int, not an agents.Agent"),
    ("my_agents:failing_agent.model", "has no attribute 'failing_agent.model'"),
    ("no_such_module:agent", "no module named 'no_such_module'"),
    ("elsewhere/nothing.py:agent", "no such file: elsewhere/nothing.py"),
    ("broken.py:agent", "importing broken.py failed: ZeroDivisionError"),
    ("my_agents:_answer", "calling my_agents:_answer() failed: TypeError"),
    ("", "empty agent spec"),
])
def test_load_agent_errors_say_why(agents_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                   spec: str, reason: str) -> None:
    (agents_dir / "broken.py").write_text("1 / 0\n")
    monkeypatch.chdir(agents_dir)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "my_agents", raising=False)
    with pytest.raises(AgentLoadError, match=re.escape(reason)):
        load_agent(spec)


# -- chat in a pseudo-terminal ----------------------------------------------------------------


@pytest.fixture
def terminals() -> Any:
    opened: list[Terminal] = []

    def start(*args: str, cwd: Path | None = None) -> Terminal:
        terminal = Terminal([EXECUTABLE, *args], cli_environ(TERM="dumb"), cwd=cwd)
        opened.append(terminal)
        return terminal

    yield start
    for terminal in opened:
        terminal.close()


def history_file() -> Path:
    return Path(os.environ["SKILLET_HOME"]) / "state" / ".sessiontape_chat_history"


def test_chat_answers_prompts_helps_compacts_and_exits(terminals: Any) -> None:
    chat = terminals("chat", "--session-name", "talk")
    chat.expect("user> ")
    shown = chat.line("/help")
    assert "/compact" in shown and "/exit" in shown
    shown = chat.line("Plan a day in Porto")
    assert "agent> A day in Porto" in shown and DEMO_TAIL in shown
    shown = chat.line("/compact")
    assert "nothing to compact (9 items stored)" in shown
    # a second prompt gets fresh scripted models: the demo agent never runs dry
    shown = chat.line("And Madeira?")
    assert "agent> A day in Madeira" in shown and DEMO_TAIL in shown
    shown = chat.line("/nonsense")
    assert "unknown command /nonsense" in shown
    chat.send("/exit\n")
    assert chat.wait() == 0
    assert [t.user_input for t in turns("talk")] == ["Plan a day in Porto", "And Madeira?"]
    assert len(store_items("talk")) == 18
    history = history_file().read_text()
    assert "Plan a day in Porto" in history and "/compact" in history


@pytest.mark.parametrize("typed", ["/exit\n", "/help\n", ""], ids=["exit", "help", "eof"])
@pytest.mark.slow
def test_a_chat_left_before_its_first_turn_leaves_nothing(isolated_env: Path,
                                                         typed: str) -> None:
    """A chat that ran no turn wrote nothing: no log, no owner record, no folders."""
    done = run([EXECUTABLE, "chat", "--session-name", "x"], stdin=typed)
    assert done.returncode == 0, done.stderr
    assert "sessiontape: new conversation x of john@example.com" in done.stderr
    assert list(isolated_env.rglob("*")) == []


@pytest.mark.slow
def test_chat_replays_an_existing_session_first(terminals: Any) -> None:
    from sessiontape.cli.demo_world import run_demo

    async def demo_turn() -> None:
        done = await run_demo(user_id=DEFAULT_USER_ID, session_name="again")
        await done.recorder.store.close()  # no connection left open beside the chat's

    for _ in range(2):  # Lisbon, then Porto
        asyncio.run(demo_turn())
    history_file().parent.mkdir(parents=True, exist_ok=True)
    history_file().write_text("an old prompt\n")

    chat = terminals("chat", "--session-name", "again")
    before = chat.expect("-- earlier turns above --")
    chat.expect("user> ")  # the prompt comes after the replay
    order = [before.index("user> Plan a day in Lisbon for me."),
             before.index("agent> (demo/scripted-demo) A day in Lisbon"),
             before.index("user> Plan a day in Porto for me."),
             before.index("agent> (demo/scripted-demo) A day in Porto"),
             before.index("-- earlier turns above --")]
    assert order == sorted(order), before
    shown = chat.line("Plan a day in Madeira")
    assert "agent> A day in Madeira" in shown
    shown = chat.line("/compact")
    assert re.search(r"compacted 27 items into \d+ \(\d+ archived", shown), shown
    chat.send("\x04")  # Ctrl-D
    assert chat.wait() == 0
    items = store_items("again")
    assert len(items) < 27 and user_messages(items)[-1] == "Plan a day in Madeira"
    assert len(turns("again")) == 3
    lines = history_file().read_text().splitlines()
    assert lines[0] == "an old prompt" and "Plan a day in Madeira" in lines


@pytest.mark.slow
def test_a_warning_during_an_answer_starts_on_a_line_of_its_own(terminals: Any,
                                                              agents_dir: Path) -> None:
    """The recorder warns (here: a model without a price) while the answer is printed: the
    warning takes a line of its own, the answer goes on after it."""
    chat = terminals("chat", "--agent", "my_agents:holding_agent", "--session-name", "held",
                     cwd=agents_dir)
    chat.expect("user> ")
    chat.send("go on\n")
    shown = chat.expect("its cost is recorded as 0\n")  # said while the answer is held
    (agents_dir / "go").touch()
    shown += chat.expect("user> ")
    assert "agent> " in shown and "part one" in shown and shown.endswith("part two\nuser> ")
    assert "\nsessiontape: no price for model 'scripted:default'; its cost is recorded as 0\n" \
        in shown
    chat.send("/exit\n")
    assert chat.wait() == 0
    assert [t.text for t in turns("held")] == ["part two"]


@pytest.mark.slow
def test_chat_ctrl_c_cancels_the_answer_then_leaves_at_the_prompt(terminals: Any,
                                                                    agents_dir: Path) -> None:
    chat = terminals("chat", "--agent", "my_agents:slow_agent", "--session-name", "slow",
                     cwd=agents_dir)
    chat.expect("user> ")
    chat.send("wait for it\n")
    chat.expect("agent> ")
    wait_for((agents_dir / "slow.started").exists, "the slow tool to start")
    chat.send("\x03")
    shown = chat.expect("user> ")
    assert "cancelled (recorded as stopped)" in shown
    shown = chat.line("and now?")
    assert "agent> done at last" in shown
    assert chat.interrupt_at_prompt() == 130  # Ctrl-C at the prompt leaves
    assert "Traceback" not in chat.seen
    recorded = turns("slow")
    assert [t.user_input for t in recorded] == ["wait for it", "and now?"]
    assert recorded[0].text.startswith("[run failed] CancelledError")
    assert recorded[1].text == "done at last"
