"""Hostile user ids, session names and agent names, through every writer and the Recorder.

Every name lands inside its root, two different raw names never share a log
file (owner records), the item store keeps raw names apart, and a second
``Recorder`` with the same hostile pair continues the same conversation.
Unicode normalisation twins (NFC and NFD of one name) are different names
everywhere: no layout normalises, so neither may share the other's file.
"""

from __future__ import annotations

import asyncio
import json
import os
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import EXECUTABLE, cli_environ, isolated, run, run_many
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted import (
    call,
    final,
    model,
    read_session,
    read_turns,
    run_agent,
    store_items,
    tools_step,
)

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import load_session, scan_sessions
from sessiontape.storage.agentuse.writer import AgentUseSession
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.log_owners import log_owner
from sessiontape.storage.skillet.log_reader import SessionLogReader
from sessiontape.storage.skillet.replay_log import ReplayLog

CAFE_NFC = unicodedata.normalize("NFC", "Café")
CAFE_NFD = unicodedata.normalize("NFD", "Café")
assert CAFE_NFC != CAFE_NFD

HOSTILE = {
    "empty": "",
    "space": " ",
    "dots": "...",
    "dots-spaces": ". . .",
    "dotdot": "..",
    "traversal": "../../etc/passwd",
    "slash": "/",
    "separator": "a/b",
    "nul": "a\0b",
    "controls": "\x01\x1b[2J\x7f\t\n\r",
    "long": "x" * 10_000,
    "long-twin": "x" * 9_999 + "y",
    "nfc": CAFE_NFC,
    "nfd": CAFE_NFD,
    "bidi": "\u202eevil\u202c",
    "emoji": "🎉",
    "backslashes": "..\\..\\win",
}
NAMES = pytest.mark.parametrize("raw", list(HOSTILE.values()), ids=list(HOSTILE))


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, with every link resolved, is under ``root``."""
    return path.resolve().is_relative_to(root.resolve())


def every_file(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*")]


# -- the replay log writer ---------------------------------------------------------------


def test_every_hostile_pair_gets_its_own_log_inside_the_root(tmp_path: Path) -> None:
    """All 17 x 17 raw pairs: one file each, under the root, holding only its own lines;
    opening the pair again finds the same file."""
    root = tmp_path / "logs"
    paths: dict[tuple[str, str], Path] = {}
    for user in HOSTILE.values():
        for session in HOSTILE.values():
            with ReplayLog(user, session, root) as log:
                log.append({"kind": "user_message", "userInput": [user, session]})
            paths[(user, session)] = log.path
    assert len(set(paths.values())) == len(paths)
    for (user, session), path in paths.items():
        assert inside(path, root) and path.parent.parent == root
        assert log_owner(path) == {"user_id": user, "session_name": session}
        assert [e.data["userInput"] for e in SessionLogReader(path).entries()] == [[user, session]]
        assert ReplayLog(user, session, root).path == path
    assert all(inside(p, root) for p in every_file(root))


# Few characters, so that different raw names often sanitize to the same file name.
COLLIDING = st.text(alphabet=["a", "/", ".", " ", "_", "@", "\0", "é", "e", "\u0301", "\n"],
                    max_size=5)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(COLLIDING | st.text(max_size=40), COLLIDING), min_size=1,
                max_size=6, unique=True))
def test_distinct_pairs_never_share_a_log(tmp_path_factory: pytest.TempPathFactory,
                                          pairs: list[tuple[str, str]]) -> None:
    root = tmp_path_factory.mktemp("logs")
    first = {pair: ReplayLog(*pair, root).path for pair in pairs}
    assert len(set(first.values())) == len(pairs)
    for pair, path in first.items():
        assert inside(path, root) and path.parent.parent == root
        assert ReplayLog(*pair, root).path == path  # found again, in any order


# -- the AgentUse writer -----------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(), max_size=300))
def test_any_agent_name_makes_one_session_inside_the_root(
        tmp_path_factory: pytest.TempPathFactory, name: str) -> None:
    """Lone surrogates included: the raw name is written and read back exactly."""
    root = tmp_path_factory.mktemp("agentuse")
    session = AgentUseSession.create(root, name, model="openai:gpt-4.1", project_root="/p",
                                     cwd="/p")
    session.add_message("task", system=[name]).add_part("text", text=name)
    assert session.directory.parent == root
    assert len(session.directory.name.encode()) < 200
    loaded = load_session(session.directory)
    assert loaded.info["agent"]["name"] == name
    assert loaded.messages[0].parts[0]["text"] == name
    assert [s.directory for s in scan_sessions(root).sessions] == [session.directory]


# -- the item store ----------------------------------------------------------------------


def test_item_store_keeps_every_hostile_raw_pair_apart(tmp_path: Path) -> None:
    pairs = [(u, s) for u in HOSTILE.values() for s in (CAFE_NFC, CAFE_NFD, "", "a\0b", "a/b")]

    async def main() -> dict[tuple[str, str], list[Any]]:
        async with ItemStore(tmp_path / "store.sqlite") as store:
            for user, session in pairs:
                await store.session(user, session).add_items(
                    [{"role": "user", "content": f"{user!r}/{session!r}"}])
            return {pair: await store.session(*pair).get_items() for pair in pairs}

    stored = asyncio.run(main())
    for (user, session), items in stored.items():
        assert items == [{"role": "user", "content": f"{user!r}/{session!r}"}]


# -- the Recorder, end to end ------------------------------------------------------------


def record_twice(user: str, session: str, agent_name: str) -> tuple[Recorder, Recorder, Any]:
    """Two turns of one conversation, each by a new Recorder; the second model's input."""
    second = model(final("second answer"))

    async def main() -> tuple[Recorder, Recorder]:
        first_rec = Recorder(user, session)
        await run_agent(first_rec, Agent(name=agent_name, model=model(final("first answer"))),
                        "first prompt", streamed=False)
        again = Recorder(user, session)
        await run_agent(again, Agent(name=agent_name, model=second), "second prompt",
                        streamed=True)
        for rec in (first_rec, again):
            await rec.flush()
            await rec.store.close()
        return first_rec, again

    first_rec, again = asyncio.run(main())
    return first_rec, again, second


@NAMES
def test_recorder_with_hostile_names_records_and_continues(isolated_env: Path, raw: str) -> None:
    """The name as user id, session name and agent name at once."""
    # An empty user or session name is refused (test_an_empty_*_is_refused): "" stands for
    # the agent's name only.
    user, session, agent_name = raw or "ann", raw or "session", raw
    first_rec, again, second_model = record_twice(user, session, agent_name)
    assert first_rec.errors == again.errors == 0
    # one conversation: the same log, the same AgentUse session, the whole history
    assert again.log_path == first_rec.log_path and again.session_dir == first_rec.session_dir
    assert [t.user_input for t in read_turns(again)] == ["first prompt", "second prompt"]
    loaded = read_session(again)
    assert loaded.info["agent"]["name"] == agent_name
    assert [m.info["user"]["prompt"]["task"] for m in loaded.messages] == [
        "first prompt", "second prompt"]
    assert len(asyncio.run(store_items(again))) == 4
    assert "first answer" in str(second_model.calls[0].input)  # the model saw the history
    # everything written is inside the roots
    skillet = SkilletPaths.resolve()
    data_root = Path(os.environ["XDG_DATA_HOME"])
    assert inside(again.log_path, skillet.logs_root)
    assert again.session_dir is not None and inside(again.session_dir, data_root)
    assert all(inside(p, isolated_env) for p in every_file(skillet.state, data_root))


def test_normalisation_twins_are_three_conversations(isolated_env: Path) -> None:
    """NFC ``Café``, NFD ``Café`` and ``Cafe`` sanitize to colliding log names but stay apart."""
    names = [CAFE_NFC, CAFE_NFD, "Cafe"]

    async def main() -> list[Recorder]:
        recorders = []
        for name in names:
            rec = Recorder(name, name)
            await run_agent(rec, Agent(name=name, model=model(final(f"answer {name}"))),
                            f"prompt {name}", streamed=False)
            await rec.flush()
            recorders.append(rec)
        return recorders

    recorders = asyncio.run(main())
    assert len({r.log_path for r in recorders}) == 3
    assert len({r.session_dir for r in recorders}) == 3
    for name, rec in zip(names, recorders, strict=True):
        assert rec.errors == 0
        assert [t.text for t in read_turns(rec)] == [f"answer {name}"]
        assert read_session(rec).info["agent"]["name"] == name
        assert asyncio.run(store_items(rec))[0] == {"role": "user", "content": f"prompt {name}"}


def test_a_pair_with_a_lone_surrogate_finds_its_own_log_again(tmp_path: Path) -> None:
    first = ReplayLog("ann\ud800", "s", tmp_path).path
    assert ReplayLog("ann\ud800", "s", tmp_path).path == first


@pytest.mark.parametrize("names", [("ann\ud800", "s"), ("ann", "s\udcff")])
def test_names_that_are_not_utf8_are_refused_up_front(names: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="UTF-8"):
        Recorder(*names)


def test_an_empty_session_name_is_refused() -> None:
    """"" is a mistake (an unset variable), not a name: None asks for a fresh default one."""
    with pytest.raises(ValueError, match="empty"):
        Recorder("ann", "")
    assert Recorder("ann").session_name.startswith("session_")


def test_an_empty_user_id_is_refused() -> None:
    """No user is no one to file a conversation under (skilled_crew keys it by the user)."""
    with pytest.raises(ValueError, match="user_id is empty"):
        Recorder("", "trip")


# -- the command line --------------------------------------------------------------------

# A user, a conversation, an agent, a tool and a model whose names hold a newline, a tab
# and an escape sequence: each is one cell of one line in every table, escaped.
CLI_USER, CLI_SESSION = "ann\tx\x1b[31m", "a\nb\tc\x1b[31md"
CLI_AGENT, CLI_TOOL, CLI_MODEL = "Helper\n\x1b[31m", "look\tup\x1b[2J", "m\n\x1b[31mx"
HOSTILE_AGENT = f'''
import os

from agents import Agent, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

_ID = os.getpid()


class Model(ScriptedModel):
    model = {CLI_MODEL!r}


@function_tool(name_override={CLI_TOOL!r})
def look_up() -> str:
    return "found it"


def agent():
    return Agent(name={CLI_AGENT!r}, tools=[look_up], model=Model([
        ModelStep(output=[function_call({CLI_TOOL!r}, {{}}, call_id=f"c_{{_ID}}",
                                        item_id=f"fc_{{_ID}}")], response_id=f"r1_{{_ID}}"),
        ModelStep(output=[assistant_message("the answer", item_id=f"m_{{_ID}}")],
                  response_id=f"r2_{{_ID}}"),
    ]))
'''


def escaped(name: str) -> str:
    """How text output shows a name: every control character as a ``\\x..`` escape."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 else c for c in name)


@pytest.fixture(scope="module")
def hostile_cli(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs and a chat turn of the hostile conversation, then every reader's output."""
    base = tmp_path_factory.mktemp("hostile-cli")
    (base / "hostile_agent.py").write_text(HOSTILE_AGENT)
    names = ["--user-email", CLI_USER, "--session-name", CLI_SESSION,
             "--agent", "hostile_agent:agent"]
    with isolated(base, NO_COLOR="1") as env:
        done = {"new": run([EXECUTABLE, "run", *names, "first"], env=env, cwd=base),
                "continued": run([EXECUTABLE, "run", *names, "second"], env=env, cwd=base),
                "chat": run([EXECUTABLE, "chat", *names], env=env, cwd=base, stdin="third\n")}
        readers = {
            "list": ["sessions", "list"], "list-json": ["sessions", "list", "--json"],
            "show": ["sessions", "show", CLI_SESSION],
            "search": ["search", "found"], "search-json": ["search", "found", "--json"],
            "usage-session": ["usage", "session"], "usage-agent": ["usage", "agent"],
            "usage-model": ["usage", "model"], "usage-json": ["usage", "session", "--json"],
            "stream": ["log", "stream", "--no-follow", "--steps"],
        }
        done.update(run_many({key: [EXECUTABLE, *args] for key, args in readers.items()}, env))
    for key, process in done.items():
        assert process.returncode == 0, (key, process.stderr)
    return done


def test_names_with_controls_are_one_escaped_line_in_every_table(
        hostile_cli: dict[str, Any]) -> None:
    """sessions list, search and usage: one row per conversation, hit or group, whatever
    its names hold; no escape character reaches the terminal; --json keeps the names."""
    user, session = escaped(CLI_USER), escaped(CLI_SESSION)
    for key, process in hostile_cli.items():
        assert "\x1b" not in process.stdout + process.stderr, key
    header, row = hostile_cli["list"].stdout.splitlines()
    assert header.startswith("NAME ")
    assert row.startswith(f"{session}  {user}  ") and " 3  " in row
    hits = hostile_cli["search"].stdout.splitlines()
    assert len(hits) == 3
    assert all(hit.startswith(f"{user}/{session}  turn ") for hit in hits)
    assert all(f"tool_output {escaped(CLI_TOOL)}: " in hit for hit in hits)
    for group, key in (("session", f"{user}/{session}"), ("agent", escaped(CLI_AGENT)),
                       ("model", escaped(f"custom/{CLI_MODEL}"))):
        lines = hostile_cli[f"usage-{group}"].stdout.splitlines()
        assert len(lines) == 3 and lines[1].startswith(f"{key}  "), lines
        assert lines[2].startswith("total ")
    shown = hostile_cli["show"].stdout.splitlines()
    assert shown[0].startswith(f"{session}  user {user}  ")
    agent, tool = escaped(CLI_AGENT), escaped(CLI_TOOL)
    assert f"agent: {agent}  status: completed" in shown
    answer = f"agent> ({escaped(f'custom/{CLI_MODEL}')}) the answer"
    # show: each turn's call with its result, on one line
    assert sum(line.startswith(f"  · {tool}({{}}) → ") for line in shown) == 3
    assert shown.count(answer) == 3
    lines = [line.split("] ", 1)[-1] for line in hostile_cli["stream"].stdout.splitlines()]
    assert lines.count(f"  · agent {agent} starts") == 3
    assert lines.count(f"  · {agent} calls {tool}({{}})") == 3
    assert lines.count(answer) == 3
    (listed,) = json.loads(hostile_cli["list-json"].stdout)
    assert (listed["user_id"], listed["session_name"]) == (CLI_USER, CLI_SESSION)
    found = json.loads(hostile_cli["search-json"].stdout)
    assert {(hit["user"], hit["session"], hit["tool"]) for hit in found} == {
        (CLI_USER, CLI_SESSION, CLI_TOOL)}
    (used,) = json.loads(hostile_cli["usage-json"].stdout)
    assert (used["user"], used["session"], used["calls"]) == (CLI_USER, CLI_SESSION, 6)


def test_run_and_chat_name_the_conversation_on_one_escaped_line(
        hostile_cli: dict[str, Any]) -> None:
    user, session = escaped(CLI_USER), escaped(CLI_SESSION)
    new, continued, chat = (hostile_cli[key] for key in ("new", "continued", "chat"))
    for process in (new, continued, chat):
        assert "\x1b" not in process.stdout + process.stderr
    assert new.stderr.splitlines()[0] == (
        f"sessiontape: new conversation {session} of {user} (agent {CLI_AGENT!r} on "
        f"{escaped(CLI_MODEL)}); continue it with --session-name {session}")
    assert continued.stderr.splitlines()[0].startswith(
        f"sessiontape: continuing {session} of {user} (1 earlier turn; ")
    assert chat.stderr.splitlines()[0].startswith(
        f"sessiontape: continuing {session} of {user} (2 earlier turns; ")
    assert "agent> the answer" in chat.stdout.splitlines()


@pytest.mark.slow
def test_a_recording_warning_names_the_conversation_on_one_escaped_line(
        isolated_env: Path) -> None:
    """The recorder's warning (here: the AgentUse root cannot be made) holds the raw names:
    the CLI prints it escaped, on one line."""
    blocked = isolated_env / "not-a-directory"
    blocked.write_text("")
    done = run([EXECUTABLE, "run", "--user-email", CLI_USER, "--session-name", CLI_SESSION,
                "hello"], env=cli_environ(XDG_DATA_HOME=str(blocked)))
    assert done.returncode == 1, done.stderr  # the answer, and a recording error
    assert "\x1b" not in done.stdout + done.stderr
    warning = f"sessiontape: recording error in {escaped(CLI_USER)}/{escaped(CLI_SESSION)} ("
    assert [line for line in done.stderr.splitlines() if line.startswith(warning)] == [
        f"{warning}an error of this kind from this place is logged once): "
        "NotADirectoryError(20, 'Not a directory')"]


def test_the_candidates_of_an_ambiguous_name_are_one_line_each(isolated_env: Path) -> None:
    for user in ("ann", CLI_USER):
        asyncio.run(run_agent(Recorder(user, CLI_SESSION), Agent(name="A", model=model(
            final("hi"))), "hello", streamed=False))
    done = run([EXECUTABLE, "sessions", "show", CLI_SESSION])
    assert (done.returncode, done.stdout) == (2, "")
    assert "\x1b" not in done.stderr
    candidates = sorted(line for line in done.stderr.splitlines() if line.startswith("  "))
    assert [line.split("  agentuse ")[0] for line in candidates] == [
        f"  {escaped(CLI_SESSION)}  user {user}" for user in sorted(("ann", escaped(CLI_USER)))]


@pytest.mark.slow
def test_the_demo_names_the_conversation_on_one_escaped_line(isolated_env: Path) -> None:
    done = run([EXECUTABLE, "demo", "--user-email", CLI_USER, "--session-name", CLI_SESSION])
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        f"sessiontape demo: conversation '{escaped(CLI_SESSION)}' of {escaped(CLI_USER)} "
        "(offline, scripted model)")


def test_a_transcript_from_the_agentuse_tree_names_agents_and_tools_on_one_line(
        isolated_env: Path) -> None:
    """sessions show of a conversation read from its AgentUse tree (no log): the subagent,
    its tool call and the agent handed to, each on one escaped line."""
    helper = Agent(name=CLI_AGENT, model=model(final("helped")))
    agent = Agent(name="Main", tools=[helper.as_tool(CLI_TOOL, "Ask.")], model=model(
        tools_step(call(CLI_TOOL, {"input": "x"})), final("done")))
    rec = Recorder("ann", "tree")
    asyncio.run(run_agent(rec, agent, "hello", streamed=False))
    rec.log_path.unlink()
    done = run([EXECUTABLE, "sessions", "show", "tree"])
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert f"· {escaped(CLI_TOOL)}({{\"input\":\"x\"}}) → helped" in lines
    assert any(line.startswith(f"↳ subagent {escaped(CLI_AGENT)} (") for line in lines)
    assert f"· agent {escaped(CLI_AGENT)}" in lines


# -- an empty session name ---------------------------------------------------------------


@pytest.mark.parametrize("verb, name, said", [
    ("run", "", "--session-name is empty (leave it out for a new session)"),
    ("chat", "", "--session-name is empty (leave it out for a new session)"),
    ("run", "\udcff", "session_name '\\udcff' is not valid UTF-8 text"),  # bytes b"\xff"
    ("demo", "", "--session-name is empty (leave it out for the demo's own session)"),
])
@pytest.mark.slow
def test_run_and_chat_refuse_a_session_name_they_cannot_record(
        isolated_env: Path, verb: str, name: str, said: str) -> None:
    """An empty name is a mistake (an unset variable), not a request for a new session: one
    line, exit 2, nothing recorded."""
    done = run([EXECUTABLE, verb, "--session-name", name, *(["hello"] if verb == "run" else [])],
               stdin="hello\n")
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"sessiontape {verb}: {said}\n")
    assert every_file(SkilletPaths.resolve().state, Path(os.environ["XDG_DATA_HOME"])) == []


@pytest.mark.parametrize("verb", ["run", "chat", "demo"])
def test_an_empty_user_email_is_refused_before_anything_runs(isolated_env: Path,
                                                             verb: str) -> None:
    done = run([EXECUTABLE, verb, "--user-email", "", *(["hello"] if verb == "run" else [])],
               stdin="hello\n")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"sessiontape {verb}: --user-email is empty\n"
    assert every_file(SkilletPaths.resolve().state, Path(os.environ["XDG_DATA_HOME"])) == []
