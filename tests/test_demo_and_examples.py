"""`sessiontape demo` and the examples, run as real subprocesses."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import EXECUTABLE, REPO, cli_environ
from harness import run as run_process

from sessiontape.storage.agentuse.reader import LoadedSession, load_session
from sessiontape.storage.names import DEFAULT_USER_ID
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.log_reader import SessionLogReader, Turn
from sessiontape.storage.skillet.replay_log import ReplayLog


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_process(args, cwd=REPO, env=cli_environ())


def stored_items(session_name: str) -> list[Any]:
    async def read() -> list[Any]:
        store = ItemStore(SkilletPaths.resolve().store_file)
        try:
            return await store.session(DEFAULT_USER_ID, session_name).get_items()
        finally:
            await store.close()

    return asyncio.run(read())


def test_demo_twice_continues_one_conversation(tmp_path: Path) -> None:
    first = run(str(EXECUTABLE), "demo")
    assert first.returncode == 0, first.stderr
    second = run(str(EXECUTABLE), "demo")
    assert second.returncode == 0, second.stderr
    assert "Turn 1: the model's first call got 1 input item (0 from earlier turns" in first.stdout
    assert ("Turn 2: the model's first call got 10 input items (9 from earlier turns"
            in second.stdout)
    assert "\x1b[" not in first.stdout  # no colour when not on a terminal
    assert "Traceback" not in first.stderr + second.stderr

    log = Path(second.stdout.split("JSONL log", 1)[1].split()[0])
    turns = SessionLogReader(log).turns()
    assert [t.user_input for t in turns] == ["Plan a day in Lisbon for me.",
                                             "Plan a day in Porto for me."]
    assert all(t.complete and t.model == "demo/scripted-demo" for t in turns)

    session_dir = Path(second.stdout.split("AgentUse session", 1)[1].split()[0])
    session = load_session(session_dir)
    assert len(session.messages) == 2 and session.info["status"] == "completed"
    tools = {p["tool"]: p["state"]["status"] for p in session.messages[0].parts
             if p["type"] == "tool"}
    assert tools == {"get_weather": "completed", "convert_currency": "error",
                     "ask_researcher": "completed"}
    assert [s.info["agent"]["name"] for s in session.subagents] == ["Researcher", "Researcher"]
    assert session.messages[0].info["assistant"]["cost"] > 0  # priced via the override

    # the transcript replayed from the log follows the answer
    transcript = first.stdout.split("Transcript", 1)[1]
    assert "user> Plan a day in Lisbon for me." in transcript
    assert "Researcher calls search_notes" in transcript
    assert "agent> (demo/scripted-demo) A day in Lisbon" in transcript
    # the store holds both turns: nine items each
    items = stored_items("sessiontape_demo")
    assert len(items) == 18
    assert [item.get("content") for item in items if item.get("role") == "user"] == [
        "Plan a day in Lisbon for me.", "Plan a day in Porto for me."]


def test_demo_with_a_real_model_needs_a_key() -> None:
    done = run(str(EXECUTABLE), "demo", "--model", "gpt-4.1-mini")
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr and done.stdout == ""


def logged_turns(session_name: str) -> list[Turn]:
    return SessionLogReader(ReplayLog(DEFAULT_USER_ID, session_name).path).turns()


def the_only_text(session: LoadedSession) -> str:
    (message,) = session.messages
    return "".join(part["text"] for part in message.parts if part["type"] == "text")


def after(stdout: str, label: str) -> Path:
    """The path an example printed after ``label``."""
    return Path(stdout.split(label, 1)[1].split("\n", 1)[0].strip())


def check_wrap_run(stdout: str) -> None:
    assert stdout.splitlines()[0] == "Hello! How can I help?"
    session = load_session(after(stdout, "AgentUse session:"))
    assert session.info["status"] == "completed" and session.info["agent"]["name"] == "Greeter"
    assert the_only_text(session) == "Hello! How can I help?"
    assert after(stdout, "JSONL log:") == ReplayLog(DEFAULT_USER_ID, "example_wrap_run").path
    (turn,) = logged_turns("example_wrap_run")
    assert (turn.user_input, turn.text, turn.complete) == ("Say hello.", "Hello! How can I help?",
                                                           True)


def check_streaming(stdout: str) -> None:
    answer = "Streaming works: each chunk becomes a text step in the log."
    assert stdout.splitlines()[0] == answer  # printed as the deltas arrived
    assert after(stdout, "JSONL log:") == ReplayLog(DEFAULT_USER_ID, "example_streaming").path
    (turn,) = logged_turns("example_streaming")
    assert (turn.user_input, turn.text, turn.complete) == ("Stream something.", answer, True)


def check_own_runner(stdout: str) -> None:
    lines = stdout.splitlines()
    assert lines[:2] == ["Recorded through my own Runner call.", "items in the store: 2"]
    session = load_session(after(stdout, "AgentUse session:"))
    assert the_only_text(session) == "Recorded through my own Runner call."
    assert [item.get("role") for item in stored_items("example_own_runner")] == [
        "user", "assistant"]
    (turn,) = logged_turns("example_own_runner")
    assert turn.user_input == "Hi!" and turn.complete


def check_subagents(stdout: str) -> None:
    assert stdout.splitlines()[0] == "The helper counted 4 files."
    child = load_session(after(stdout, "subagent session:"))
    assert child.info["agent"]["name"] == "Helper"
    (message,) = child.messages
    (tool,) = [part for part in message.parts if part["type"] == "tool"]
    assert (tool["tool"], tool["state"]["status"], tool["state"]["output"]) == (
        "count_files", "completed", "4")
    (turn,) = logged_turns("example_subagents")
    assert turn.text == "The helper counted 4 files."


def check_past_sessions_mcp(stdout: str) -> None:
    assert stdout.splitlines()[0] == \
        "Last time you asked about Lisbon I said: pack a light jacket."
    (turn,) = logged_turns("example_memory")
    (ended,) = [step for step in turn.steps if step["type"] == "agent_tool_end"]
    assert ended["toolName"] == "search_sessions"
    (content,) = json.loads(ended["result"])  # what `sessiontape mcp` answered, as MCP text
    hits = json.loads(content["text"])
    assert {hit["kind"] for hit in hits["hits"] if hit["session"] == "example_trip"} == {
        "user", "answer"}  # the session it recorded first, found through MCP


def check_replay_test(stdout: str) -> None:
    assert stdout.splitlines()[-1].startswith("2 passed")


EXAMPLES = {"wrap_run.py": check_wrap_run, "streaming.py": check_streaming,
            "own_runner.py": check_own_runner, "subagents.py": check_subagents,
            "past_sessions_mcp.py": check_past_sessions_mcp, "replay_test.py": check_replay_test}


def test_every_example_is_checked() -> None:
    assert sorted(EXAMPLES) == sorted(p.name for p in (REPO / "examples").glob("*.py"))


@pytest.mark.parametrize("script", sorted(EXAMPLES))
@pytest.mark.slow
def test_examples_print_and_record_what_they_say(script: str) -> None:
    done = run(sys.executable, REPO / "examples" / script)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    EXAMPLES[script](done.stdout)


@pytest.mark.slow
def test_everything_recorded_is_private_whatever_the_umask(isolated_env: Path) -> None:
    """Directories 0700, files 0600 (the store's -wal/-shm too), even under umask 000."""
    for _ in range(2):  # the second run continues: reopened files keep their modes
        done = run("sh", "-c", f"umask 000 && exec '{EXECUTABLE}' demo --session-name private")
        assert done.returncode == 0, done.stderr
    roots = [isolated_env / "home", isolated_env / "skillet"]
    found = [p for root in roots for p in [root, *root.rglob("*")]]
    files = [p for p in found if p.is_file()]
    assert any(p.name.endswith(".sqlite-wal") or p.name.endswith(".sqlite") for p in files)
    assert any(p.suffix == ".jsonl" for p in files) and any(p.name == "session.json" for p in files)
    modes = {str(p.relative_to(isolated_env)): stat.S_IMODE(p.stat().st_mode) for p in found}
    wrong = {p: oct(m) for p, m in modes.items()
             if m != (0o600 if (isolated_env / p).is_file() else 0o700)}
    assert wrong == {}
