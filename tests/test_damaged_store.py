"""Every verb on an item store that is damaged or cannot be written.

Each world holds two conversations recorded with the real SDK Runner (their store rows,
replay logs and AgentUse trees); then its store is damaged one way: its header garbled,
the file cut short, a file that is not SQLite at all, the store read-only, or its
directory read-only. The real executable then runs every verb on it.

- A damaged store: the reading verbs exit 0 and answer from the logs and the trees,
  saying once (one line on stderr) that the store is damaged, naming it and how to repair
  it; ``sessions clear`` and ``fork`` refuse (exit 1), and ``run`` and ``demo`` run
  nothing (exit 1), each in one line naming the store.
- A store that cannot be written: the reading verbs answer exactly as before the fault,
  saying nothing; ``clear`` and ``fork`` refuse (exit 1) naming the store; ``run`` and
  ``demo`` run, their model given the stored history, and say in one line per place that
  the store could not be written (exit 1: the recording is not whole).
- Always: no traceback, the store's bytes unchanged and nothing made beside it (no
  ``-wal``, ``-shm`` or ``-journal``), and nothing at all changed by a verb that refused.

We run as root, for whom file modes stop nothing: the verbs of the read-only worlds run
without the capabilities that override them (``setpriv``), as any other user would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import EXECUTABLE, isolated, isolated_environ, run_many, snapshot
from scripted import final, model, usage

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import load_session
from sessiontape.storage.db import DamagedDatabase
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.log_reader import SessionLogReader

pytestmark = pytest.mark.slow

CONVERSATIONS = {("ann", "porto"): "take the tram", ("bob", "oslo"): "take the ferry"}

# An agent whose model answers with the user messages it was given: what reached it.
ECHO_AGENT = '''
from agents import Agent
from agents.testing import ModelStep, ScriptedModel, assistant_message


class Echo(ScriptedModel):
    async def get_response(self, system_instructions, input, *args, **kwargs):
        said = [item["content"] for item in input
                if isinstance(item, dict) and item.get("role") == "user"]
        self.enqueue(ModelStep(output=[assistant_message("saw: " + " | ".join(map(str, said)),
                                                         item_id="msg_echo")],
                               response_id="resp_echo"))
        return await super().get_response(system_instructions, input, *args, **kwargs)


def agent():
    return Agent(name="Echo", model=Echo([]))
'''


def _garble(store: Path) -> None:
    store.write_bytes(b"not the header!!" + store.read_bytes()[16:])


def _cut_short(store: Path) -> None:
    store.write_bytes(store.read_bytes()[: store.stat().st_size // 2])


def _replace(store: Path) -> None:
    store.write_text("user,session\nann,porto\n" * 64)


def _read_only(store: Path) -> None:
    store.chmod(0o400)


def _read_only_directory(store: Path) -> None:
    store.parent.chmod(0o500)


DAMAGED = {"garbled header": _garble, "cut short": _cut_short, "not sqlite": _replace}
UNWRITABLE = {"read-only store": _read_only, "read-only directory": _read_only_directory}
FAULTS: dict[str, Callable[[Path], None]] = {**DAMAGED, **UNWRITABLE}
# A new catalog reads the store; one kept from before the damage is brought in line.
NEW_CATALOG = {"not sqlite", *UNWRITABLE}
SIDECARS = ("-wal", "-shm", "-journal")


def ledger(base: Path) -> Path:
    """Where the world's export goes (beside it: the world's files are compared whole)."""
    return base.with_name(f"{base.name}.ledger.sqlite")


def readers(base: Path) -> dict[str, list[str]]:
    """The verbs that only read, as ``sessiontape`` arguments."""
    return {
        "refresh": ["catalog", "refresh", "--json"],
        "list": ["sessions", "list", "--json"],
        "show": ["sessions", "show", "porto", "--user", "ann", "--json"],
        "show-full": ["sessions", "show", "oslo", "--full", "--json"],
        "path": ["sessions", "path", "porto", "--json"],
        "search": ["search", "tram", "--json"],
        "usage": ["usage", "session", "--json"],
        "export": ["export", "--format", "ledger", "--out", str(ledger(base)), "--force",
                   "--json"],
        "log": ["log", "stream", "--no-follow"],
    }


def writers() -> dict[str, list[str]]:
    """The verbs that would write the store, and refuse."""
    return {"clear": ["sessions", "clear", "porto", "--user", "ann", "--yes"],
            "fork": ["sessions", "fork", "porto", "--user", "ann", "--at-turn", "1",
                     "--as", "porto-b"]}


def runners(base: Path) -> dict[str, list[str]]:
    """The verbs that run an agent: porto's next turn, and the demo's first."""
    return {"run": ["run", "--user-email", "ann", "--session-name", "porto",
                    "--agent", f"{base / 'echo_agent.py'}:agent", "and then?"],
            "demo": ["demo", "--user-email", "ann"]}


def commands(argvs: dict[str, list[str]], as_user: bool) -> dict[str, list[str | Path]]:
    """``sessiontape ARGS`` for each, without the capabilities that override file modes
    when ``as_user`` and we are root."""
    prefix: list[str | Path] = []
    if as_user and os.geteuid() == 0:
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    return {key: [*prefix, EXECUTABLE, *argv] for key, argv in argvs.items()}


def record(base: Path) -> None:
    """The world's conversations, recorded with the SDK Runner under ``base``."""
    async def main() -> None:
        for (user, name), answer in CONVERSATIONS.items():
            async with Recorder(user_id=user, session_name=name) as rec:
                agent = Agent(name="Guide", model=model(final(answer, usage(12, 3))))
                await rec.run(agent, f"a question for {name}")

    with isolated(base):
        asyncio.run(main())


def settle(store: Path) -> None:
    """The store as its last writer leaves it: its WAL written back and removed (the readers
    run before the fault leave an empty one)."""
    with closing(sqlite3.connect(store)) as conn:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    assert not any(os.path.lexists(f"{store}{suffix}") for suffix in SIDECARS)


Done = dict[str, subprocess.CompletedProcess[str]]


@dataclass
class World:
    """One world, its store's fault, and what each verb did before and after it."""

    base: Path
    fault: str
    store: Path
    store_bytes: bytes = b""
    healthy: Done = field(default_factory=dict)  # the readers before the fault
    read: Done = field(default_factory=dict)
    refused: Done = field(default_factory=dict)
    ran: Done = field(default_factory=dict)
    # Every file of the world: at fault, after the readers and refusals, after the runs.
    files: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def as_user(self) -> bool:
        return self.fault in UNWRITABLE

    @property
    def env(self) -> dict[str, str]:
        return isolated_environ(self.base, NO_COLOR="1")

    def trees(self) -> list[Path]:
        return sorted((self.base / "home/data/agentuse/project").glob("*/session/*"))

    def run(self, argvs: dict[str, list[str]]) -> Done:
        return run_many(commands(argvs, self.as_user), self.env)

    def run_readers(self, only: set[str] | None = None) -> Done:
        """The reading verbs (``only`` those), ``catalog refresh`` first and alone: it
        makes the catalog, which the others then bring in line."""
        argvs = {key: argv for key, argv in readers(self.base).items()
                 if only is None or key in only}
        return self.run({"refresh": argvs.pop("refresh")}) | self.run(argvs)


def recorded(base: Path, fault: str) -> World:
    """A world under ``base`` with its conversations recorded (not yet at fault)."""
    base.mkdir()
    (base / "echo_agent.py").write_text(ECHO_AGENT)
    record(base)
    with isolated(base):
        return World(base, fault, SkilletPaths.resolve().store_file)


def exercise(world: World) -> World:
    """The verbs on ``world`` before its fault, then at fault (in subprocesses only: worlds
    are exercised side by side)."""
    # The answers before the fault (for a damaged store, only the catalog they leave).
    world.healthy = world.run_readers(None if world.as_user else {"refresh"})
    settle(world.store)
    if world.fault in NEW_CATALOG:
        shutil.rmtree(world.base / "home/cache/sessiontape")
    FAULTS[world.fault](world.store)
    world.store_bytes = world.store.read_bytes()
    world.files["at fault"] = snapshot(world.base, sqlite_sidecars=True)
    world.read = world.run_readers()
    world.refused = world.run(writers())
    world.files["after refusals"] = snapshot(world.base, sqlite_sidecars=True)
    world.ran = world.run(runners(world.base))
    world.files["after runs"] = snapshot(world.base, sqlite_sidecars=True)
    world.store.parent.chmod(0o700)  # for the tmp dir's removal
    return world


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, World]:
    base = tmp_path_factory.mktemp("worlds")
    made = [recorded(base / fault.replace(" ", "-"), fault) for fault in FAULTS]
    with ThreadPoolExecutor(max_workers=len(made)) as pool:
        return {world.fault: world for world in pool.map(exercise, made)}


def store_line(world: World, done: subprocess.CompletedProcess[str]) -> str:
    """The one line of stderr that names the store (asserted to be the only one)."""
    lines = [line for line in done.stderr.splitlines() if str(world.store) in line]
    assert len(lines) == 1, done.stderr
    return lines[0]


def assert_said_plainly(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr


def assert_damage_said(world: World, line: str, doing: str) -> None:
    """``line`` says what is done, that the store is damaged, and how to repair it."""
    assert f"{doing}: item store {world.store} is damaged (" in line, line
    assert f"mv {world.store} {world.store}.damaged" in line, line
    assert f"sqlite3 {world.store}.damaged .recover | sqlite3 {world.store}" in line, line


# -- the reading verbs ------------------------------------------------------------------------


@pytest.mark.parametrize("fault", list(DAMAGED))
def test_a_damaged_store_is_said_once_and_the_logs_and_trees_answer(
        worlds: dict[str, World], fault: str) -> None:
    world = worlds[fault]
    for verb, done in world.read.items():
        assert_said_plainly(done)
        assert done.returncode == 0, (verb, done.stderr)
        if verb == "log":  # the logs alone: the store is not read
            assert done.stderr == ""
            continue
        assert done.stderr.count("\n") == 1, (verb, done.stderr)
        assert_damage_said(world, store_line(world, done),
                           "reading the conversations from their logs and AgentUse trees alone")
    listed = json.loads(world.read["list"].stdout)
    assert {(s["user_id"], s["session_name"]) for s in listed} >= set(CONVERSATIONS)
    assert {s["agentuse_dir"] for s in listed} >= {str(tree) for tree in world.trees()}
    for pair in CONVERSATIONS:  # from their logs
        [entry] = [s for s in listed if (s["user_id"], s["session_name"]) == pair]
        assert (entry["turns"], entry["items"], entry["sources"]) == (1, 0, ["log"])
    shown = json.loads(world.read["show"].stdout)
    assert [t["final"]["text"] for t in shown["turns"]] == ["take the tram"]
    assert json.loads(world.read["show-full"].stdout)["archived"] == []
    hits = {(hit["session"], hit["user"]) for hit in json.loads(world.read["search"].stdout)}
    assert ("porto", "ann") in hits
    rows = {(row["user"], row["session"]): row for row in json.loads(world.read["usage"].stdout)}
    assert {pair: (rows[pair]["input_tokens"], rows[pair]["output_tokens"])
            for pair in CONVERSATIONS} == dict.fromkeys(CONVERSATIONS, (12, 3))
    assert json.loads(world.read["export"].stdout)["conversations"] >= 2
    with closing(sqlite3.connect(ledger(world.base))) as exported:
        texts = " ".join(str(text) for (text,) in exported.execute(
            "SELECT content FROM agent_messages"))
    assert all(answer in texts for answer in CONVERSATIONS.values())
    assert json.loads(world.read["refresh"].stdout)["conversations"] >= 2
    assert json.loads(world.read["path"].stdout)["log"].endswith("ann/porto.jsonl")
    log = world.read["log"].stdout
    assert "── ann/porto ──" in log and "agent> (scripted/gpt-4.1) take the tram" in log, log
    # nothing changed, nothing made beside the store
    assert world.files["after refusals"] == world.files["at fault"]


@pytest.mark.parametrize("fault", list(UNWRITABLE))
def test_a_store_that_cannot_be_written_is_read_as_before(
        worlds: dict[str, World], fault: str) -> None:
    world = worlds[fault]
    for verb, done in world.read.items():
        assert_said_plainly(done)
        assert (done.returncode, done.stderr) == (0, ""), verb
        before = world.healthy[verb].stdout
        if verb == "refresh":  # a new catalog read everything: the same conversations
            assert json.loads(done.stdout)["conversations"] == json.loads(before)["conversations"]
        else:
            assert done.stdout == before, verb
    assert {s["items"] for s in json.loads(world.read["list"].stdout)} == {2}
    assert world.files["after refusals"] == world.files["at fault"]


# -- the verbs that write the store -----------------------------------------------------------


@pytest.mark.parametrize("fault", list(FAULTS))
def test_clear_and_fork_refuse_and_touch_nothing(worlds: dict[str, World], fault: str) -> None:
    world = worlds[fault]
    for verb, done in world.refused.items():
        assert_said_plainly(done)
        assert (done.returncode, done.stdout) == (1, ""), (verb, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr
        line = store_line(world, done)
        doing = f"not {verb}ing 'porto', nothing was changed"
        if fault in DAMAGED:
            assert_damage_said(world, line, doing)
        else:
            reason = "it is read-only" if fault == "read-only store" else \
                f"its directory {world.store.parent} is read-only"
            assert line.endswith(f"{doing}: item store {world.store} cannot be written "
                                 f"({reason})"), line
    assert world.files["after refusals"] == world.files["at fault"]


@pytest.mark.parametrize("fault", list(DAMAGED))
def test_run_and_demo_on_a_damaged_store_run_nothing(worlds: dict[str, World],
                                                     fault: str) -> None:
    world = worlds[fault]
    for done in world.ran.values():
        assert_said_plainly(done)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr.count("\n") == 1, done.stderr
        assert_damage_said(world, store_line(world, done),
                           "nothing was run (the conversation's history is kept there)")
    assert world.files["after runs"] == world.files["at fault"]  # nothing written anywhere


@pytest.mark.parametrize("fault", list(UNWRITABLE))
def test_run_and_demo_on_a_store_that_cannot_be_written_give_the_model_its_history(
        worlds: dict[str, World], fault: str) -> None:
    world = worlds[fault]
    ran, demo = world.ran["run"], world.ran["demo"]
    for done in (ran, demo):
        assert_said_plainly(done)
        assert done.returncode == 1  # the run is whole, its recording is not
        warnings = [line for line in done.stderr.splitlines() if "recording error in" in line]
        assert warnings and any(str(world.store) in line for line in warnings), done.stderr
        assert "recording error(s); see the warning above" in done.stderr.splitlines()[-1]
    assert ran.stdout.endswith("agent> saw: a question for porto | and then?\n"), ran.stdout
    assert "the model's first call got 1 input item (0 from earlier turns" in demo.stdout
    after = world.files["after runs"]
    assert after[str(world.store)] == world.store_bytes
    assert not [path for path in after if path.startswith(f"{world.store}-")]
    log = world.base / "skillet/state/.agent_session_logs/ann/porto.jsonl"
    assert [(t.user_input, t.text) for t in SessionLogReader(log).turns()] == [
        ("a question for porto", "take the tram"),
        ("and then?", "saw: a question for porto | and then?")]
    # porto's AgentUse session, linked before the store became unwritable, records the turn
    (tree,) = [path.parent for path in (world.base / "home/data").rglob("session.json")
               if json.loads(path.read_bytes()).get("conversation", {}).get("name") == "porto"]
    assert [m.info["user"]["prompt"]["task"] for m in load_session(tree).messages] == [
        "a question for porto", "and then?"]


# -- the library ------------------------------------------------------------------------------


def test_recorder_run_on_a_damaged_store_raises_naming_it_and_leaves_it_as_it_was(
        isolated_env: Path) -> None:
    record(isolated_env)
    store = SkilletPaths.resolve().store_file
    _garble(store)
    damaged = store.read_bytes()

    async def again() -> None:
        async with Recorder(user_id="ann", session_name="porto") as rec:
            await rec.run(Agent(name="Guide", model=model(final("never"))), "and then?")

    with pytest.raises(DamagedDatabase) as raised:
        asyncio.run(again())
    assert str(raised.value).startswith(f"{store} is damaged (not an SQLite database")
    assert f"mv {store} {store}.damaged" in str(raised.value)
    assert store.read_bytes() == damaged
    assert sorted(p.name for p in store.parent.iterdir() if p.name.startswith(store.name)) \
        == [store.name]
