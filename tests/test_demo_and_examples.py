"""`sessiontape demo` and the examples, run as real subprocesses."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontape.storage.agentuse_reader import load_session
from sessiontape.storage.item_store import ItemStore
from sessiontape.storage.log_reader import SessionLogReader

REPO = Path(__file__).resolve().parent.parent
EXECUTABLE = Path(sys.executable).with_name("sessiontape")


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, **env})


def test_demo_twice_continues_one_conversation(tmp_path: Path) -> None:
    first = run(str(EXECUTABLE), "demo")
    assert first.returncode == 0, first.stderr
    second = run(str(EXECUTABLE), "demo")
    assert second.returncode == 0, second.stderr
    assert "Turn 1: the model's first call got 1 input items" in first.stdout
    assert "Turn 2: the model's first call got 10 input items (9 from earlier turns" in second.stdout
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


def test_demo_transcript_is_printed_after_the_answer() -> None:
    done = run(str(EXECUTABLE), "demo", "--session-name", "transcript_check")
    transcript = done.stdout.split("Transcript", 1)[1]
    assert "user> Plan a day in Lisbon for me." in transcript
    assert "Researcher calls search_notes" in transcript
    assert "agent> (demo/scripted-demo) A day in Lisbon" in transcript


def test_demo_store_holds_the_items(tmp_path: Path) -> None:
    assert run(str(EXECUTABLE), "demo", "--session-name", "items_check").returncode == 0
    import asyncio

    async def count() -> int:
        store = ItemStore(Path(os.environ["SKILLET_HOME"]) / "state/.agent_sessions.sqlite")
        items = await store.session("john@example.com", "items_check").get_items()
        await store.close()
        return len(items)

    assert asyncio.run(count()) == 9


def test_demo_with_a_real_model_needs_a_key() -> None:
    done = run(str(EXECUTABLE), "demo", "--model", "gpt-4.1-mini")
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr and done.stdout == ""


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "examples").glob("*.py")))
def test_examples_run_offline(script: str) -> None:
    done = run(sys.executable, str(REPO / "examples" / script))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.strip()


def test_everything_recorded_is_private_whatever_the_umask(isolated_env: Path) -> None:
    """Directories 0700, files 0600 (the store's -wal/-shm too), even under umask 000."""
    for _ in range(2):  # the second run continues: reopened files keep their modes
        done = run("sh", "-c", f"umask 000 && exec {EXECUTABLE} demo --session-name private")
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
