"""Every verb on damaged AgentUse and log files: never a traceback.

Each world holds two conversations recorded with the real SDK Runner (store rows, replay
logs, AgentUse trees; one with a subagent); then one of ann's files is damaged: its
``session.json``, a ``message.json`` or a part cut short, its log given a torn last line or
a garbled line in the middle, its tree deleted, its log or tree directory made read-only.
The real executable then runs every verb. Whatever a verb says, it says it in lines of its
own, exits 0, 1 or 2, and never prints a traceback; bob's untouched conversation is still
listed and shown. (The item store's damages: ``test_damaged_store.py``.)
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from agents import Agent
from harness import EXECUTABLE, isolated, isolated_environ, run_many
from scripted import call, final, model, tools_step, usage

from sessiontape import Recorder

pytestmark = pytest.mark.slow


def record(base: Path) -> dict[str, Path]:
    """ann/porto (a subagent) and bob/oslo; ann's tree and log."""
    async def main() -> dict[str, Path]:
        helper = Agent(name="Helper", model=model(final("helped", usage(3, 1))))
        agent = Agent(name="Guide", tools=[helper.as_tool("helper", "Ask.")], model=model(
            tools_step(call("helper", {"input": "q"}), u=usage(10, 2)),
            final("take the tram", usage(12, 3))))
        async with Recorder(user_id="ann", session_name="porto") as rec:
            await rec.run(agent, "a question for porto")
        async with Recorder(user_id="bob", session_name="oslo") as other:
            await other.run(Agent(name="Guide", model=model(final("take the ferry"))),
                            "a question for oslo")
        assert rec.session_dir is not None
        return {"tree": rec.session_dir, "log": rec.log_path}

    with isolated(base):
        return asyncio.run(main())


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:25])


def _first(tree: Path, pattern: str) -> Path:
    return sorted(tree.glob(pattern))[0]


DAMAGES: dict[str, Callable[[dict[str, Path]], None]] = {
    "session.json cut short": lambda f: _cut(f["tree"] / "session.json"),
    "message.json cut short": lambda f: _cut(_first(f["tree"], "*/message.json")),
    "a part cut short": lambda f: _cut(_first(f["tree"], "*/part/*.json")),
    "a subagent's session.json cut short": lambda f: _cut(
        _first(f["tree"], "subagent/*/session.json")),
    "a torn last log line": lambda f: f["log"].write_bytes(
        f["log"].read_bytes() + b'{"kind":"user_message","userIn'),
    "a garbled log line": lambda f: f["log"].write_bytes(
        f["log"].read_bytes().replace(b"\n", b"\n\x00garbage\n", 1)),
    "the tree deleted": lambda f: shutil.rmtree(f["tree"]),
    "the log deleted": lambda f: f["log"].unlink(),
    "the log directory read-only": lambda f: f["log"].parent.chmod(0o500),
    "the tree read-only": lambda f: f["tree"].chmod(0o500),
}

VERBS = {
    "list": ["sessions", "list"], "list json": ["sessions", "list", "--json"],
    "show": ["sessions", "show", "porto"], "show json": ["sessions", "show", "porto", "--json"],
    "show bob": ["sessions", "show", "oslo", "--json"],
    "path": ["sessions", "path", "porto", "--json"],
    "search": ["search", "tram"], "usage": ["usage", "session", "--json"],
    "stream": ["log", "stream", "--no-follow"], "refresh": ["catalog", "refresh"],
    "doctor": ["doctor", "--json"],
    "fork": ["sessions", "fork", "porto", "--at-turn", "1", "--as", "porto-b"],
    "rename": ["sessions", "rename", "porto", "lisbon"],
    "prune": ["sessions", "prune", "--older-than", "1d", "--dry-run"],
    "run": ["run", "--user-email", "ann", "--session-name", "porto", "and then?"],
    "clear": ["sessions", "clear", "porto", "--yes"],  # last: it removes what it can
}


def exercise(base: Path, damage: str, files: dict[str, Path]
             ) -> dict[str, subprocess.CompletedProcess[str]]:
    DAMAGES[damage](files)
    # as any user but root, for whom file modes stop nothing
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] \
        if os.geteuid() == 0 else []
    env = isolated_environ(base, NO_COLOR="1")
    verbs = {**VERBS, "export": ["export", "--format", "ledger", "--out",
                                 str(base / "ledger.sqlite")]}
    verbs["clear"] = verbs.pop("clear")  # last
    results = run_many({verb: [*prefix, str(EXECUTABLE), *argv]
                        for verb, argv in verbs.items()}, env, parallel=1)
    for path in (files["log"].parent, files["tree"]):
        if path.exists():
            path.chmod(0o700)
    return results


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory
           ) -> dict[str, dict[str, subprocess.CompletedProcess[str]]]:
    base = tmp_path_factory.mktemp("damaged")
    made = []
    for damage in DAMAGES:  # recorded one after the other (one event loop at a time)
        world = base / damage.replace(" ", "-").replace("'", "")
        world.mkdir()
        made.append((world, damage, record(world)))
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(lambda args: exercise(*args), made)
        return dict(zip(DAMAGES, done, strict=True))


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_no_verb_prints_a_traceback_and_the_rest_is_still_read(
        worlds: dict[str, dict[str, subprocess.CompletedProcess[str]]], damage: str) -> None:
    results = worlds[damage]
    for verb, done in results.items():
        assert "Traceback" not in done.stderr + done.stdout, (damage, verb, done.stderr)
        assert done.returncode in (0, 1, 2), (damage, verb, done.returncode, done.stderr)
    listed = {s["session_name"]: s for s in json.loads(results["list json"].stdout)}
    assert "oslo" in listed, (damage, results["list json"].stderr)
    bob = json.loads(results["show bob"].stdout)
    assert [t["text"] for t in bob["turns"]] == ["take the ferry"], damage


def test_a_rename_of_a_session_whose_session_json_is_damaged_says_how_to_repair_it(
        worlds: dict[str, dict[str, subprocess.CompletedProcess[str]]]) -> None:
    done = worlds["session.json cut short"]["rename"]
    assert done.returncode == 2 and done.stdout == ""
    assert "not renaming 'porto'" in done.stderr and "cannot be read" in done.stderr
    assert "sessiontape doctor --fix" in done.stderr


def test_a_fork_that_cannot_write_its_log_writes_nothing_and_says_so(
        worlds: dict[str, dict[str, subprocess.CompletedProcess[str]]]) -> None:
    done = worlds["the log directory read-only"]["fork"]
    assert done.returncode == 1 and done.stdout == ""
    assert "forking 'porto' failed, nothing was written" in done.stderr
    assert "Permission denied" in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_conversation_whose_tree_is_gone_is_still_shown_from_its_log(
        worlds: dict[str, dict[str, subprocess.CompletedProcess[str]]]) -> None:
    shown = json.loads(worlds["the tree deleted"]["show json"].stdout)
    assert [(t["user_input"], t["text"]) for t in shown["turns"]] == [
        ("a question for porto", "take the tram")]


@pytest.mark.parametrize("damage", ["the log directory read-only", "the tree read-only"])
def test_a_clear_that_cannot_remove_a_file_says_what_it_left(
        worlds: dict[str, dict[str, subprocess.CompletedProcess[str]]], damage: str) -> None:
    done = worlds[damage]["clear"]
    assert done.returncode == 1
    assert "cannot be removed (Permission denied); what could be was" in done.stderr
    assert done.stdout.startswith("cleared 'porto' of 'ann': ")
