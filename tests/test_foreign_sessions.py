"""``sessiontape sessions`` on sessions sessiontape did not write: AgentUse's and skilled_crew's.

A copy of AgentUse 0.15's own XDG_DATA_HOME (four sessions of the project ``/home/dev/proj``)
and of skilled_crew 1.0.11's own state directory (three conversations in the SQLite store,
two of them with a JSONL log), with one conversation recorded by the Recorder beside them
(into the same store, and into the same project's AgentUse tree). Then the real executable
lists, shows and locates them, and each figure is checked against the fixture files read
here independently (plain ``json`` and ``sqlite3``).

The project is passed with ``--project /home/dev/proj``: that directory does not exist
here, so its hash is that of the path itself, which is the fixture's project folder
(``sha256("/home/dev/proj")[:16]``, see storage/paths.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from harness import EXECUTABLE, isolated_environ, run, run_many, snapshot
from scripted import call, final, model, run_agent, tools_step, usage

from sessiontape import Recorder
from sessiontape.storage.names import reported_model
from sessiontape.storage.paths import project_hash

PROJECT = "/home/dev/proj"
ANN = "ann@example.com"
JOHN = "john@example.com"
LOG_DIR = Path(".agent_session_logs") / "john_example_com"


@function_tool
def square(n: int) -> int:
    """Square a number."""
    return n * n


# -- the fixture files, read independently ----------------------------------------------


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass
class TreeSession:
    """One top-level AgentUse session of the fixture tree, as its files say."""

    directory: Path
    info: dict[str, Any]
    messages: list[dict[str, Any]]           # its own message.json files
    all_messages: list[dict[str, Any]]       # with its subagents'
    parts: dict[str, list[dict[str, Any]]]   # by message id, in file name order

    @property
    def id(self) -> str:
        return str(self.info["id"])


def tree_sessions(root: Path) -> dict[str, TreeSession]:
    """The top-level sessions under a project's ``session/`` folder, by agent suffix."""
    found = {}
    for directory in sorted(root.iterdir()):
        own = [read_json(p) for p in sorted(directory.glob("*/message.json"))]
        everything = [read_json(p) for p in sorted(directory.rglob("message.json"))]
        parts = {m.parent.name: [read_json(p) for p in sorted(m.parent.glob("part/*.json"))]
                 for m in directory.rglob("message.json")}
        found[directory.name[27:]] = TreeSession(directory, read_json(directory / "session.json"),
                                                 own, everything, parts)
    return found


def totals(messages: list[dict[str, Any]]) -> tuple[int, int, float]:
    """(input, output, cost) over message.json files."""
    return (sum(m["assistant"]["tokens"]["input"] for m in messages),
            sum(m["assistant"]["tokens"]["output"] for m in messages),
            sum(m["assistant"]["cost"] for m in messages))


def store_rows(store: Path) -> dict[tuple[str, str], list[tuple[int, dict[str, Any]]]]:
    """The rows of ``session_items`` by pair: ``(created_at, item)`` in order."""
    with closing(sqlite3.connect(store)) as conn:
        rows = conn.execute("SELECT user_id, session_name, created_at, item_json FROM "
                            "session_items ORDER BY created_at, id").fetchall()
    by_pair: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
    for user, name, created, text in rows:
        by_pair.setdefault((user, name), []).append((created, json.loads(text)))
    return by_pair


def unix_ms(timestamp: str) -> int:
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- one world for the whole file -------------------------------------------------------


@dataclass
class World:
    env: dict[str, str]
    base: Path
    tree_root: Path
    tree: dict[str, TreeSession]
    store: Path
    state: Path
    skillet_rows: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]]
    ours_dir: Path
    ours_log: Path
    results: dict[str, subprocess.CompletedProcess[str]]
    before: dict[str, Any]
    after: dict[str, Any]

    def ok(self, key: str) -> str:
        done = self.results[key]
        assert done.returncode == 0, (key, done.stderr)
        return done.stdout

    def json(self, key: str) -> Any:
        return json.loads(self.ok(key))


def record_ours() -> tuple[Path, Path]:
    """ann/trip: one turn with a tool call and a subagent, in the fixture's project."""
    async def main() -> tuple[Path, Path]:
        rec = Recorder(ANN, "trip", project_root=PROJECT)
        helper = Agent(name="Helper", model=model(final("helped", usage(3, 1))))
        agent = Agent(name="Planner", tools=[square, helper.as_tool("helper", "Ask.")],
                      model=model(tools_step(call("square", {"n": 2}),
                                             call("helper", {"input": "q"}), u=usage(10, 2)),
                                  final("trip answer", usage(20, 4))))
        await run_agent(rec, agent, "trip prompt", streamed=False)
        await rec.flush()
        await rec.store.close()
        assert rec.errors == 0 and rec.session_dir is not None
        return rec.session_dir, rec.log_path

    return asyncio.run(main())


def sessions(*args: str) -> list[str]:
    return [str(EXECUTABLE), "sessions", *args]


def with_project(*args: str) -> list[str]:
    return sessions(*args, "--project", PROJECT)


_BUILT: dict[str, World] = {}


@pytest.fixture
def world(agentuse_fixture: Path, skillet_fixture: Path,
          tmp_path_factory: pytest.TempPathFactory) -> World:
    """Built once for this file (its tests run together), from copies of the fixtures."""
    if "world" in _BUILT:
        return _BUILT["world"]
    base = tmp_path_factory.mktemp("foreign")
    env = isolated_environ(base, NO_COLOR="1")
    shutil.copytree(agentuse_fixture, env["XDG_DATA_HOME"])
    state = Path(env["SKILLET_HOME"]) / "state"
    shutil.copytree(skillet_fixture, state)
    store = state / ".agent_sessions.sqlite"
    skillet_rows = store_rows(store)  # before ours joins them
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        ours_dir, ours_log = record_ours()
    tree_root = Path(env["XDG_DATA_HOME"]) / "agentuse" / "project" / \
        hashlib.sha256(PROJECT.encode()).hexdigest()[:16] / "session"
    assert project_hash(PROJECT) == tree_root.parent.name  # the fixture's folder
    assert ours_dir.parent == tree_root  # recorded beside AgentUse's own sessions
    tree = tree_sessions(tree_root)
    tree_only = {k: v for k, v in tree.items() if v.directory != ours_dir}
    tools, manager = tree_only["tools"], tree_only["manager"]
    commands = {
        "list_json": with_project("list", "--json"),
        "list_text": with_project("list", "--paths"),
        "list_john": with_project("list", "--user", JOHN, "--json"),
        "list_cwd": sessions("list", "--json"),  # this checkout's project: no fixture tree
        "show_tools": with_project("show", tools.id[:12].lower()),
        "show_tools_json": with_project("show", tools.id[:12], "--json"),
        "show_manager": with_project("show", manager.id),
        "show_manager_json": with_project("show", manager.id, "--json"),
        "show_failing": with_project("show", tree_only["failing"].directory.name),
        "show_failing_json": with_project("show", tree_only["failing"].directory.name,
                                          "--json"),
        "show_hello": with_project("show", tree_only["hello"].id[:10]),
        "show_prefix_of_three": with_project("show", "01M81BB"),
        "show_fixture_1": with_project("show", "fixture_session_1"),
        "show_fixture_1_json": with_project("show", "fixture_session_1", "--json"),
        "show_stream": with_project("show", "fixture_session_stream"),
        "show_stream_ok": with_project("show", "fixture_session_stream_ok"),
        "show_stream_ok_json": with_project("show", "fixture_session_stream_ok", "--json"),
        "show_stream_ok_full": with_project("show", "fixture_session_stream_ok", "--full"),
        "show_ours": with_project("show", "trip"),
        "show_ours_by_id": with_project("show", ours_dir.name[:26]),
        "path_tools": with_project("path", tools.id[:12]),
        "path_tools_json": with_project("path", tools.id[:12], "--json"),
        "path_fixture_1_json": with_project("path", "fixture_session_1", "--json"),
        "path_stream_ok_json": with_project("path", "fixture_session_stream_ok", "--json"),
        "path_ours_json": with_project("path", "trip", "--json"),
        "path_roots_json": with_project("path", "--json"),
        "clear_without_tty": with_project("clear", tree_only["hello"].directory.name),
        "clear_by_prefix": with_project("clear", tree_only["hello"].id[:10], "--yes"),
    }
    before = snapshot(base)
    results = run_many(commands, env)
    _BUILT["world"] = World(env, base, tree_root, tree, store, state, skillet_rows, ours_dir,
                            ours_log, results, before, snapshot(base))
    return _BUILT["world"]


def tree_only(world: World) -> dict[str, TreeSession]:
    return {k: v for k, v in world.tree.items() if v.directory != world.ours_dir}


def by_name(world: World, key: str = "list_json") -> dict[tuple[str | None, str], Any]:
    return {(s["user_id"], s["session_name"]): s for s in world.json(key)}


# -- list -------------------------------------------------------------------------------


def test_list_has_every_session_of_every_kind_once(world: World) -> None:
    listed = world.json("list_json")
    keys = [(s["user_id"], s["session_name"]) for s in listed]
    expected = {(None, t.directory.name) for t in tree_only(world).values()}
    expected |= set(world.skillet_rows)  # both logs belong to stored pairs
    expected.add((ANN, "trip"))
    assert len(keys) == len(set(keys)) == len(expected) == 8
    assert set(keys) == expected
    # ours is in the tree and linked: one entry, merged
    ours_id = world.ours_dir.name[:26]
    assert [s["session_name"] for s in listed if s["agentuse_id"] == ours_id] == ["trip"]
    assert [s["last_ms"] for s in listed] == sorted((s["last_ms"] for s in listed),
                                                    reverse=True)
    assert keys[0] == (ANN, "trip")  # recorded now: the newest


def test_origin_says_who_wrote_each_session(world: World) -> None:
    listed = by_name(world)
    origins = {key: s["origin"] for key, s in listed.items()}
    assert origins == {**{(None, t.directory.name): "agentuse"
                          for t in tree_only(world).values()},
                       **dict.fromkeys(world.skillet_rows, "skilled_crew"),
                       (ANN, "trip"): "sessiontape"}
    ours = listed[(ANN, "trip")]
    assert ours["sources"] == ["store", "link", "log", "agentuse"]
    assert ours["agentuse_dir"] == str(world.ours_dir)
    assert ours["log_path"] == str(world.ours_log)


def test_agentuse_sessions_have_their_turns_tokens_and_cost(world: World) -> None:
    listed = by_name(world)
    for suffix, tree in tree_only(world).items():
        entry = listed[(None, tree.directory.name)]
        tokens_in, tokens_out, cost = totals(tree.all_messages)
        main_in, main_out, _ = totals(tree.messages)
        assert entry["turns"] == len(tree.messages), suffix
        assert entry["items"] == 0 and entry["log_path"] is None
        assert entry["usage"]["input"] == tokens_in and entry["usage"]["output"] == tokens_out
        assert entry["tokens"] == tokens_in + tokens_out
        assert entry["cost"] == pytest.approx(cost)
        assert entry["usage_main"]["tokens"] == main_in + main_out
        assert entry["agentuse_dir"] == str(tree.directory)
        assert entry["agentuse_id"] == tree.id
        assert entry["agent"] == tree.info["agent"]["name"]
        assert entry["status"] == tree.info["status"]
        assert entry["sources"] == ["agentuse"] and entry["problems"] == []
        times = [tree.info["time"]["created"], tree.info["time"]["updated"],
                 *(t for m in tree.messages for t in m["time"].values())]
        assert (entry["first_ms"], entry["last_ms"]) == (min(times), max(times))
    manager = listed[(None, tree_only(world)["manager"].directory.name)]
    assert manager["tokens"] > manager["usage_main"]["tokens"] > 0  # the helper's counted
    assert listed[(None, tree_only(world)["failing"].directory.name)]["status"] == "error"


def test_skilled_crew_conversations_have_their_turns_and_items(world: World) -> None:
    listed = by_name(world)
    for (user, name), rows in world.skillet_rows.items():
        entry = listed[(user, name)]
        log = world.state / LOG_DIR / f"{name}.jsonl"
        if log.exists():
            lines = log_lines(log)
            turns = sum(line["kind"] == "user_message" for line in lines)
            assert entry["log_path"] == str(log) and entry["sources"] == ["store", "log"]
        else:  # no log: the stored user messages are the turns
            turns = sum(item.get("role") == "user" for _, item in rows)
            lines = []
            assert entry["log_path"] is None and entry["sources"] == ["store"]
        assert entry["turns"] == turns > 0, name
        assert entry["items"] == len(rows)
        assert entry["tokens"] is None and entry["usage"] is None  # skilled_crew has none
        assert entry["agentuse_dir"] is None and entry["problems"] == []
        # times: the store's rows and the log's turns (their starts and ends)
        stamps = [created for created, _ in rows] + [
            unix_ms(line["timestamp"]) for line in lines
            if line["kind"] in ("user_message", "final_result")]
        assert (entry["first_ms"], entry["last_ms"]) == (min(stamps), max(stamps))
    assert listed[(JOHN, "fixture_session_1")]["turns"] == 3


def test_list_text_shows_every_kind(world: World) -> None:
    lines = world.ok("list_text").splitlines()
    assert lines[0].split()[:3] == ["NAME", "USER", "TURNS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {name for _, name in by_name(world)}
    for tree in tree_only(world).values():
        row = rows[tree.directory.name]
        tokens_in, tokens_out, _ = totals(tree.all_messages)
        assert row[1] == "-" and row[2] == str(len(tree.messages)) and row[3] == "0"
        assert row[4] == str(tokens_in + tokens_out)
        assert row[-2:] == ["agentuse", str(tree.directory)]
    assert rows["fixture_session_1"][1:4] == [JOHN, "3", "18"]
    assert rows["fixture_session_1"][-3:] == ["-", "skilled_crew", "-"]  # no tree, no status
    assert rows["trip"][1] == ANN and rows["trip"][-1] == str(world.ours_dir)


def test_user_filter_and_project_default(world: World) -> None:
    assert sorted(s["session_name"] for s in world.json("list_john")) == sorted(
        name for _, name in world.skillet_rows)
    # without --project: the current directory's project, whose tree has none of AgentUse's
    # fixture sessions; ours (linked) and the store's are still listed
    assert {(s["user_id"], s["session_name"]) for s in world.json("list_cwd")} == {
        *world.skillet_rows, (ANN, "trip")}


# -- show: AgentUse's sessions ----------------------------------------------------------


def _texts(tree: TreeSession, kind: str) -> list[dict[str, Any]]:
    return [p for parts in tree.parts.values() for p in parts if p["type"] == kind]


def test_show_agentuse_session_by_ulid_prefix(world: World) -> None:
    tools = tree_only(world)["tools"]
    out = world.ok("show_tools")
    lines = out.splitlines()
    assert lines[0].startswith(f"{tools.directory.name}  user -  1 turn  ")
    assert "origin agentuse" in lines[0]
    assert tools.messages[0]["user"]["prompt"]["task"] in out  # the prompt, whole
    assert "user> " + tools.messages[0]["user"]["prompt"]["task"].splitlines()[0] in lines
    for text in _texts(tools, "text"):
        assert f"agent> {text['text']}" in lines
    for reasoning in _texts(tools, "reasoning"):
        assert f"  · reasoning: {reasoning['text']}" in lines
    tool_parts = _texts(tools, "tool")
    assert {p["state"]["status"] for p in tool_parts} == {"completed", "error"}
    for part in tool_parts:
        shown = [line for line in lines if line.startswith(f"  · {part['tool']}(")
                 and json.dumps(part["state"]["input"], separators=(",", ":")) in line]
        assert len(shown) == 1 or part["tool"] == "tools__bash", part["callID"]
        if part["state"]["status"] == "error":
            error_line = [line for line in shown if "✗" in line]
            assert len(error_line) == 1
            assert part["state"]["error"].splitlines()[0] in error_line[0]
    assert sum("✗" in line for line in lines) == 1
    tokens = tools.messages[0]["assistant"]["tokens"]
    assert f"  usage: {tokens['input']} in / {tokens['output']} out tokens, $0.0000" in lines
    assert not any('"type": "log"' in line or "Calling model" in line for line in lines)


def test_show_agentuse_session_json(world: World) -> None:
    tools = tree_only(world)["tools"]
    shown = world.json("show_tools_json")
    assert shown["source"] == "agentuse" and shown["session"]["origin"] == "agentuse"
    (turn,) = shown["turns"]
    message = tools.messages[0]
    assert turn["agentuse_message_id"] == message["id"]
    assert {p["id"] for p in turn["parts"]} == {p["id"] for p in tools.parts[message["id"]]}
    assert turn["user_input"] == message["user"]["prompt"]["task"]
    assert turn["model"] == reported_model(message["assistant"]["modelID"]) == \
        "anthropic/claude-haiku-4-5" and turn["complete"] is True
    ends = [s for s in turn["steps"] if s["type"] == "agent_tool_end"]
    assert [s.get("status") for s in ends].count("error") == 1
    assert turn["usage"]["input"] == message["assistant"]["tokens"]["input"]


def test_show_agentuse_session_with_its_subagent(world: World) -> None:
    manager = tree_only(world)["manager"]
    (sub_dir,) = (manager.directory / "subagent").iterdir()
    sub_info = read_json(sub_dir / "session.json")
    (sub_message,) = [read_json(p) for p in sub_dir.glob("*/message.json")]
    out = world.ok("show_manager")
    lines = out.splitlines()
    calling = next(i for i, line in enumerate(lines) if line.startswith("  · subagent__helper("))
    assert lines[calling + 1].strip() == \
        f"↳ subagent {sub_info['agent']['name']} ({sub_info['id']}, {sub_info['status']})"
    sub_texts = [p["text"] for p in _texts(manager, "text")
                 if p["sessionID"] == sub_info["id"]]
    assert sub_texts and all(f"    agent> {t}" in lines for t in sub_texts)
    assert any(line.startswith("      · tools__bash(") for line in lines)  # the helper's call
    assert f"    user> {sub_message['user']['prompt']['task'].splitlines()[0]}" in lines
    main_in, main_out, _ = totals(manager.messages)
    all_in, all_out, _ = totals(manager.all_messages)
    assert f"usage: {all_in} in / {all_out} out tokens, $0.0000 (subagents " \
           f"{all_in - main_in} in / {all_out - main_out} out)" in lines

    shown = world.json("show_manager_json")
    (sub,) = shown["turns"][0]["subagents"]
    tool = next(p for p in _texts(manager, "tool") if p["tool"] == "subagent__helper")
    assert sub["session_id"] == sub_info["id"] and sub["call_id"] == tool["callID"]
    assert sub["turns"][0]["agentuse_message_id"] == sub_message["id"]
    assert shown["turns"][0]["usage"]["tokens"] == all_in + all_out


def test_show_failing_agentuse_session(world: World) -> None:
    failing = tree_only(world)["failing"]
    (error,) = _texts(failing, "error")
    lines = world.ok("show_failing").splitlines()
    assert f"error ({failing.info['error']['code']}): {failing.info['error']['message']}" \
        in lines
    (shown,) = [line for line in lines if line.startswith("  ! error: ")]
    assert error["message"] in shown and error["code"] in shown
    assert f"HTTP {error['statusCode']}" in shown
    assert "[incomplete]" in lines  # its message.json has no time.completed
    data = world.json("show_failing_json")
    assert data["error"] == failing.info["error"]
    assert data["turns"][0]["complete"] is False


def test_show_agentuse_session_text_and_prefix_rules(world: World) -> None:
    hello = tree_only(world)["hello"]
    out = world.ok("show_hello")
    (text,) = _texts(hello, "text")
    assert f"agent> {text['text']}" in out  # several lines, whole
    ambiguous = world.results["show_prefix_of_three"]
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    matching = [t for t in tree_only(world).values() if t.id.startswith("01M81BB")]
    assert len(matching) == 3
    assert all(t.directory.name in ambiguous.stderr for t in matching)
    assert hello.directory.name not in ambiguous.stderr


# -- show: skilled_crew's conversations and ours ----------------------------------------


def test_show_skilled_crew_conversation_from_its_log(world: World) -> None:
    lines = world.ok("show_fixture_1").splitlines()
    assert "origin skilled_crew" in lines[0] and f"user {JOHN}" in lines[0]
    log = log_lines(world.state / LOG_DIR / "fixture_session_1.jsonl")
    prompts = [line["userInput"] for line in log if line["kind"] == "user_message"]
    assert [line for line in lines if line.startswith("user> ")] == \
        [f"user> {p}" for p in prompts] and len(prompts) == 3
    finals = [line for line in log if line["kind"] == "final_result"]
    for entry in finals:
        assert f"agent> ({entry['model']}) {entry['finalResult']['text']}" in lines
    steps = [line["stepResult"] for line in log if line["kind"] == "step"]
    calls = [step for step in steps if step["type"] == "agent_tool_start"]
    ends = [step for step in steps if step["type"] == "agent_tool_end"]
    assert len(calls) == len(ends) == 2 and not any("callId" in step for step in steps)
    for step, end in zip(calls, ends, strict=True):  # paired by tool name, in order
        (line,) = [line for line in lines if line.startswith(
            f"  · {step['toolName']}({step['toolArgumentsStr']}) → ")]
        assert end["result"][:20] in line
    assert [t["text"] for t in world.json("show_fixture_1_json")["turns"]] == \
        [e["finalResult"]["text"] for e in finals]

    stream = world.ok("show_stream").splitlines()
    assert any(line.startswith("agent> [incomplete turn]") for line in stream)


def test_show_skilled_crew_conversation_without_log_from_its_items(world: World) -> None:
    rows = [item for _, item in world.skillet_rows[(JOHN, "fixture_session_stream_ok")]]
    lines = world.ok("show_stream_ok").splitlines()
    assert "(transcript from the stored items)" in lines
    assert f"user> {rows[0]['content']}" in lines
    for item in rows:  # the JS SDK's shapes: callId, function_call_result, text outputs
        if item["type"] == "function_call":
            assert f"  · function_call {item['name']}({item['arguments']})" in lines
        elif item["type"] == "function_call_result":
            assert f"  · function_call_result {item['name']}: {item['output']['text']}" \
                in lines
        elif item["role"] == "assistant":
            assert f"agent> {item['content'][0]['text']}" in lines
    shown = world.json("show_stream_ok_json")
    assert shown["source"] == "store"
    (turn,) = shown["turns"]
    assert turn["items"] == rows and turn["complete"] is True
    assert [s["toolName"] for s in turn["steps"] if s["type"] == "agent_tool_end"] == [
        i["name"] for i in rows if i["type"] == "function_call_result"]
    assert "Archived (compacted) items: 0" in world.ok("show_stream_ok_full")


def test_show_ours_by_name_and_by_id(world: World) -> None:
    lines = world.ok("show_ours").splitlines()
    assert "origin sessiontape" in lines[0]
    assert "user> trip prompt" in lines and "agent> (scripted/gpt-4.1) trip answer" in lines
    assert '  · square({"n":2}) → 4' in lines
    assert world.ok("show_ours_by_id") == world.ok("show_ours")


# -- path, clear, and nothing written ---------------------------------------------------


def test_path_for_each_kind(world: World) -> None:
    tools = tree_only(world)["tools"]
    assert world.json("path_tools_json") == {"store": None, "log": None, "log_owner": None,
                                             "agentuse_dir": str(tools.directory)}
    rows = dict(line.split(None, 1) for line in world.ok("path_tools").splitlines())
    assert rows == {"store": "-", "log": "-", "log_owner": "-",
                    "agentuse_dir": str(tools.directory)}
    assert world.json("path_fixture_1_json") == {
        "store": str(world.store), "log": str(world.state / LOG_DIR / "fixture_session_1.jsonl"),
        "log_owner": None, "agentuse_dir": None}
    assert world.json("path_stream_ok_json") == {"store": str(world.store), "log": None,
                                                 "log_owner": None, "agentuse_dir": None}
    assert world.json("path_ours_json") == {
        "store": str(world.store), "log": str(world.ours_log),
        "log_owner": str(world.ours_log.with_name(".trip.owner.json")),
        "agentuse_dir": str(world.ours_dir)}
    assert world.json("path_roots_json")["agentuse_root"] == str(world.tree_root)


def test_readers_change_nothing(world: World) -> None:
    # every command of the batch: lists, shows, paths, a refused and an unknown clear
    assert world.after == world.before
    refused = world.results["clear_without_tty"]
    assert refused.returncode == 2 and "--yes" in refused.stderr
    by_prefix = world.results["clear_by_prefix"]  # clear takes exact names only
    assert by_prefix.returncode == 1 and "no session named" in by_prefix.stderr


def test_clear_an_agentuse_session_removes_its_tree_only(
        agentuse_fixture: Path, skillet_fixture: Path, tmp_path: Path) -> None:
    env = isolated_environ(tmp_path / "clear", NO_COLOR="1")
    shutil.copytree(agentuse_fixture, env["XDG_DATA_HOME"])
    shutil.copytree(skillet_fixture, Path(env["SKILLET_HOME"]) / "state")
    root = Path(env["XDG_DATA_HOME"]) / "agentuse" / "project" / project_hash(PROJECT) / \
        "session"
    hello = next(root.glob("*-hello"))
    others = {p: snapshot(p) for p in root.iterdir() if p != hello}
    skillet = snapshot(Path(env["SKILLET_HOME"]))
    cleared = run(with_project("clear", hello.name, "--yes", "--json"), env=env)
    assert cleared.returncode == 0, cleared.stderr
    result = json.loads(cleared.stdout)
    assert result["user_id"] is None and result["origin"] == "agentuse"
    assert result["rows"] == {} and result["removed_paths"] == [str(hello)]
    assert not hello.exists()
    assert {p: snapshot(p) for p in root.iterdir()} == others
    assert snapshot(Path(env["SKILLET_HOME"])) == skillet
    listed = run(with_project("list", "--json"), env=env)
    assert hello.name not in {s["session_name"] for s in json.loads(listed.stdout)}
