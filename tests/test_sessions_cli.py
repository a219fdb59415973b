"""``sessiontape sessions``: list, show, clear and path, run as the real executable.

Each test records three conversations in-process with the Recorder and
scripted models (one with tools and a subagent, one compacted, one with the
same name for another user), then runs the CLI in subprocesses and checks
its output against the SQLite store, the logs and the AgentUse files.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from agents import Agent, function_tool
from harness import (
    EXECUTABLE,
    CliResults,
    isolated,
    isolated_environ,
    next_millisecond,
    on_terminal,
    run_many,
)
from scripted import call, final, model, run_agent, tools_step, usage

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import LoadedSession, load_session
from sessiontape.storage.paths import SkilletPaths

ANN, BOB = "ann@example.com", "bob@example.com"
TABLES = ("session_items", "session_items_archive", "sessiontape_compactions",
          "sessiontape_links")


@function_tool
def square(n: int) -> int:
    """Square a number."""
    return n * n


@dataclass
class Recorded:
    """Where each recorded conversation went, by (user, session)."""

    dirs: dict[tuple[str, str], Path]
    logs: dict[tuple[str, str], Path]
    store: Path


def record_all() -> Recorded:
    """Record the three conversations under the current environment's paths."""
    async def main() -> Recorded:
        recorders = []
        # ann/trip: two turns, each with a tool call and a subagent call
        trip = Recorder(ANN, "trip")
        for turn in range(2):
            helper = Agent(name="Helper", model=model(final(f"helped {turn}", usage(3, 1))))
            agent = Agent(name="Planner", tools=[square, helper.as_tool("helper", "Ask.")],
                          model=model(tools_step(call("square", {"n": turn + 2}),
                                                 call("helper", {"input": f"q{turn}"}),
                                                 u=usage(10, 2)),
                                      final(f"trip answer {turn}", usage(20, 4))))
            await run_agent(trip, agent, f"trip prompt {turn}", streamed=turn == 1)
        recorders.append(trip)
        # bob/compacted: three turns with a tiny threshold, then a forced compaction
        compacted = Recorder(BOB, "compacted", compaction_threshold=3)
        for turn in range(3):
            agent = Agent(name="Counter", tools=[square], model=model(
                tools_step(call("square", {"n": turn})), final(f"counted {turn}", usage(7, 3))))
            await run_agent(compacted, agent, f"count {turn}", streamed=False)
        await compacted.session.compact(force=True)
        recorders.append(compacted)
        next_millisecond()  # strictly newer than the others
        # bob/trip: the same name as ann's, one plain turn (the newest session)
        other = Recorder(BOB, "trip")
        await run_agent(other, Agent(name="Solo", model=model(final("bob here", usage(5, 5)))),
                        "bob prompt", streamed=False)
        recorders.append(other)
        for rec in recorders:
            await rec.flush()
            await rec.store.close()
            assert rec.errors == 0
        return Recorded({(r.user_id, r.session_name): r.session_dir for r in recorders},
                        {(r.user_id, r.session_name): r.log_path for r in recorders},
                        SkilletPaths.resolve().store_file)

    return asyncio.run(main())


def command(*args: str) -> list[str]:
    return [str(EXECUTABLE), "sessions", *args]


def row_counts(store: Path, user: str, name: str) -> dict[str, int]:
    with closing(sqlite3.connect(store)) as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE user_id = ? AND session_name = ?",
                                (user, name)).fetchone()[0] for t in TABLES}


def tree_files(env: dict[str, str]) -> set[Path]:
    """Every file under the home and skillet dirs (SQLite's -wal/-shm aside)."""
    roots = [Path(env["SKILLET_HOME"]), Path(env["XDG_DATA_HOME"])]
    return {p for root in roots if root.exists() for p in root.rglob("*")
            if not p.name.endswith(("-wal", "-shm"))}


def agentuse_totals(session: LoadedSession, subagents: bool = True) -> tuple[int, int, float]:
    """(input, output, cost) summed over message.json files, independently of the CLI."""
    tokens_in = tokens_out = 0
    cost = 0.0
    for msg in session.messages:
        tokens_in += msg.info["assistant"]["tokens"]["input"]
        tokens_out += msg.info["assistant"]["tokens"]["output"]
        cost += msg.info["assistant"]["cost"]
    if subagents:
        for sub in session.subagents:
            i, o, c = agentuse_totals(sub)
            tokens_in, tokens_out, cost = tokens_in + i, tokens_out + o, cost + c
    return tokens_in, tokens_out, cost


def _read_terminal(args: list[str], env: dict[str, str]) -> str:
    """stdout of a run whose stdout is a pseudo-terminal."""
    code, shown, err = on_terminal(command(*args), env)
    assert code == 0, err
    return shown


@dataclass
class World(CliResults):
    """One recording, every read-only command run on it, and the files before and after."""

    env: dict[str, str]
    recorded: Recorded
    results: dict[str, subprocess.CompletedProcess[str]]
    files_before: set[Path]
    files_after: set[Path]
    tty_show: str
    tty_list_no_color: str
    cwd: Path



READ_ONLY = {
    "list_json": ["list", "--json"],
    "list_bob_json": ["list", "--user", BOB, "--json"],
    "list_text": ["list"],
    "show_ann": ["show", "trip", "--user", ANN],
    "show_prefix": ["show", "<prefix>"],
    "show_ambiguous": ["show", "trip"],
    "show_compacted_full": ["show", "compacted", "--full"],
    "show_ann_json": ["show", "trip", "--user", ANN, "--json"],
    "show_compacted_full_json": ["show", "compacted", "--full", "--json"],
    "path_ann": ["path", "trip", "--user", ANN],
    "path_json": ["path", "--json"],
    "unknown_show": ["show", "nope"],
    "unknown_clear": ["clear", "nope", "--yes"],
    "clear_no_tty": ["clear", "trip", "--user", ANN],
    "help_list": ["list", "--help"],
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    base = tmp_path_factory.mktemp("sessions")
    with isolated(base, NO_COLOR="1") as env:
        recorded = record_all()
    # a log that belongs to no stored session (as if its rows were cleared elsewhere)
    stray = recorded.logs[(ANN, "trip")].parent.parent / "carol" / "notes.jsonl"
    stray.parent.mkdir()
    stray.write_bytes(recorded.logs[(ANN, "trip")].read_bytes())
    before = tree_files(env)
    prefix = recorded.dirs[(ANN, "trip")].name[:20].lower()
    commands = {key: command(*(prefix if a == "<prefix>" else a for a in args))
                for key, args in READ_ONLY.items()}
    commands["closed_pipe"] = ["bash", "-o", "pipefail", "-c",
                               (f"'{EXECUTABLE}' sessions show trip --user {ANN} --full "
                                "| head -c 1 >/dev/null")]
    results = run_many(commands, env)
    no_color = {k: v for k, v in env.items() if k != "NO_COLOR"}
    tty_show = _read_terminal(["show", "trip", "--user", ANN], no_color)
    tty_list = _read_terminal(["list"], {**no_color, "NO_COLOR": "1"})
    return World(env, recorded, results, before, tree_files(env), tty_show, tty_list,
                 Path.cwd())


# -- list -------------------------------------------------------------------------------


def test_list_json_joins_store_logs_and_agentuse(world: World) -> None:
    rec = world.recorded
    found = world.json("list_json")
    assert [(s["user_id"], s["session_name"]) for s in found] == [
        (BOB, "trip"), (BOB, "compacted"), (ANN, "trip"), ("carol", "notes")]  # newest first
    stored = [s for s in found if s["items"]]
    assert [s["last_ms"] for s in stored] == sorted((s["last_ms"] for s in stored), reverse=True)
    by_pair = {(s["user_id"], s["session_name"]): s for s in found}
    assert [by_pair[(ANN, "trip")]["turns"], by_pair[(BOB, "compacted")]["turns"],
            by_pair[(BOB, "trip")]["turns"]] == [2, 3, 1]
    for pair in rec.dirs:
        entry = by_pair[pair]
        counts = row_counts(rec.store, *pair)
        assert entry["items"] == counts["session_items"] > 0
        assert entry["archived_items"] == counts["session_items_archive"]
        assert entry["compactions"] == counts["sessiontape_compactions"]
        session = load_session(rec.dirs[pair])
        tokens_in, tokens_out, cost = agentuse_totals(session)
        assert entry["tokens"] == tokens_in + tokens_out
        assert entry["cost"] == pytest.approx(cost) and cost > 0
        assert entry["usage"]["input"] == tokens_in and entry["usage"]["output"] == tokens_out
        main_in, main_out, _ = agentuse_totals(session, subagents=False)
        assert entry["usage_main"]["tokens"] == main_in + main_out
        assert entry["agentuse_dir"] == str(rec.dirs[pair])
        assert entry["agentuse_id"] == rec.dirs[pair].name[:26]
        assert entry["log_path"] == str(rec.logs[pair])
        assert entry["sources"] == ["store", "link", "log", "agentuse"]
    # subagents are counted: 2 x (10+2 + 20+4) for the planner, 2 x (3+1) for the helper
    assert by_pair[(ANN, "trip")]["tokens"] == 80
    assert by_pair[(ANN, "trip")]["usage_main"]["tokens"] == 72
    assert by_pair[(BOB, "compacted")]["archived_items"] > 0
    assert by_pair[(BOB, "compacted")]["compactions"] >= 1
    # the stray log: listed from the log alone
    notes = by_pair[("carol", "notes")]
    assert notes["sources"] == ["log"] and notes["turns"] == 2 and notes["items"] == 0
    assert notes["agentuse_dir"] is None
    # A copy of ann/trip's log: with no tree, its turns' usage is its model_call lines'.
    trip = by_pair[(ANN, "trip")]["usage"]
    assert {**notes["usage"], "cost": pytest.approx(trip["cost"])} == trip


def test_list_filters_by_user(world: World) -> None:
    assert [(s["user_id"], s["session_name"]) for s in world.json("list_bob_json")] == [
        (BOB, "trip"), (BOB, "compacted")]


def test_list_text_is_an_aligned_table(world: World) -> None:
    done = world.ok("list_text")
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NAME", "USER", "TURNS", "ITEMS", "TOKENS", "COST", "LAST",
                                "ACTIVITY", "STATUS", "ORIGIN"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["trip", BOB], ["compacted", BOB], ["trip", ANN], ["notes", "carol"]]
    user_column = lines[0].index("USER")
    assert all(line[user_column:].startswith(("USER", BOB, ANN, "carol")) for line in lines)
    tokens_end = lines[0].index("TOKENS") + len("TOKENS")  # numbers are right-aligned
    assert lines[3][:tokens_end].endswith(" 80")
    assert lines[3].split()[2:4] == ["2", str(row_counts(world.recorded.store, ANN, "trip")
                                              ["session_items"])]
    assert lines[3].endswith("  completed  sessiontape")
    assert lines[4].endswith("  -          skilled_crew")  # a stray log: no tree, no owner
    assert "\x1b" not in done.stdout  # not a terminal: no colour


# -- show -------------------------------------------------------------------------------


def test_show_by_name(world: World) -> None:
    lines = world.ok("show_ann").stdout.splitlines()
    assert "user> trip prompt 0" in lines and "user> trip prompt 1" in lines
    assert '  · square({"n":2}) → 4' in lines  # each call with its result
    assert '  · helper({"input":"q0"}) → helped 0' in lines
    assert "agent> (scripted/gpt-4.1) trip answer 0" in lines
    assert not any(line.startswith("Archived") for line in lines)
    # per-turn usage from the matching exchange: 30 in / 6 out + the helper's 3 in / 1 out
    session = load_session(world.recorded.dirs[(ANN, "trip")])
    cost = session.messages[0].info["assistant"]["cost"] + \
        session.subagents[0].messages[0].info["assistant"]["cost"]
    usage_lines = [line for line in lines if line.startswith("  usage:")]
    assert len(usage_lines) == 2
    assert usage_lines[0].startswith("  usage: 33 in / 7 out tokens, $")
    assert "(subagents 3 in / 1 out)" in usage_lines[0]
    assert float(usage_lines[0].split("$")[1].split()[0]) == pytest.approx(cost, abs=1e-6)
    assert "\x1b" not in world.results["show_ann"].stdout


def test_show_by_ulid_prefix(world: World) -> None:
    assert world.ok("show_prefix").stdout == world.ok("show_ann").stdout


def test_a_name_two_users_have_is_ambiguous(world: World) -> None:
    done = world.results["show_ambiguous"]
    assert done.returncode == 2 and done.stdout == ""
    assert ANN in done.stderr and BOB in done.stderr and "--user" in done.stderr


def test_show_full_adds_the_archived_items(world: World) -> None:
    archived = row_counts(world.recorded.store, BOB, "compacted")["session_items_archive"]
    full = world.ok("show_compacted_full").stdout
    assert [line for line in full.splitlines() if line.startswith("user>")] == [
        "user> count 0", "user> count 1", "user> count 2"]
    section = full.split(f"Archived (compacted) items: {archived}\n")[1].splitlines()
    assert len(section) == archived
    assert any(line.endswith("] user: count 0") for line in section)
    assert any("function_call square" in line for line in section)


def test_show_json(world: World) -> None:
    shown = world.json("show_ann_json")
    assert shown["session"]["session_name"] == "trip" and shown["session"]["user_id"] == ANN
    assert "archived" not in shown
    session = load_session(world.recorded.dirs[(ANN, "trip")])
    assert len(shown["turns"]) == 2
    for turn, msg in zip(shown["turns"], session.messages, strict=True):
        assert turn["agentuse_message_id"] == msg.info["id"]
        assert turn["usage_main"]["input"] == msg.info["assistant"]["tokens"]["input"]
        assert turn["usage_main"]["cost"] == pytest.approx(msg.info["assistant"]["cost"])
        assert turn["usage"]["tokens"] == turn["usage_main"]["tokens"] + 4  # the helper
        assert [s["toolName"] for s in turn["steps"] if s["type"] == "agent_tool_start"] == [
            "square", "helper"]
    assert shown["usage"]["tokens"] == 80

    full = world.json("show_compacted_full_json")
    assert len(full["archived"]) == row_counts(world.recorded.store, BOB, "compacted")[
        "session_items_archive"]
    assert full["archived"][0]["item"] == {"role": "user", "content": "count 0"}
    assert all(len(a["compaction_id"]) == 26 for a in full["archived"])


# -- errors, path, colour, pipes ----------------------------------------------------------


@pytest.mark.parametrize("key", ["unknown_show", "unknown_clear"])
def test_an_unknown_session_exits_1(world: World, key: str) -> None:
    done = world.results[key]
    assert done.returncode == 1 and done.stdout == ""
    assert "no session named" in done.stderr and "Traceback" not in done.stderr


def test_clear_without_a_terminal_refuses(world: World) -> None:
    done = world.results["clear_no_tty"]
    assert done.returncode == 2 and done.stdout == ""
    assert "--yes" in done.stderr
    assert row_counts(world.recorded.store, ANN, "trip")["session_items"] > 0


def test_readers_create_nothing(world: World) -> None:
    # every command of the batch ran (list, show, path, refused and unknown clears)
    assert world.files_after == world.files_before
    assert world.recorded.dirs[(ANN, "trip")].is_dir()


def test_show_asks_git_for_the_project_once(world: World, tmp_path: Path) -> None:
    """``show`` finds the conversation and reads its transcript in the same project: one
    ``git rev-parse`` (a process of its own), not one for each."""
    wrapper, calls = tmp_path / "bin" / "git", tmp_path / "git-calls"
    wrapper.parent.mkdir()
    real_git = subprocess.run(["bash", "-c", "command -v git"], capture_output=True, text=True,
                              check=True).stdout.strip()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\nexec "{real_git}" "$@"\n')
    wrapper.chmod(0o700)
    env = {**world.env, "PATH": f"{wrapper.parent}{os.pathsep}{world.env['PATH']}"}
    (done,) = run_many({"show": command("show", "trip", "--user", ANN, "--json")},
                       env).values()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["session"]["session_name"] == "trip"
    assert calls.read_text().splitlines() == ["rev-parse --show-toplevel"]


def test_path(world: World) -> None:
    rows = dict(line.split(None, 1) for line in world.ok("path_ann").stdout.splitlines())
    log = world.recorded.logs[(ANN, "trip")]
    assert rows == {"store": str(world.recorded.store), "log": str(log),
                    "log_owner": str(log.with_name(".trip.owner.json")),
                    "agentuse_dir": str(world.recorded.dirs[(ANN, "trip")])}
    roots = world.json("path_json")
    assert roots["store"] == str(world.recorded.store)
    assert roots["logs_root"] == str(log.parent.parent)
    assert Path(roots["agentuse_root"]).name == "session"
    assert roots["agentuse_root"].startswith(world.env["XDG_DATA_HOME"])


def test_colour_only_on_a_terminal_without_no_color(world: World) -> None:
    assert "\x1b[2m" in world.tty_show and "\x1b[1m" in world.tty_show  # dim tools, bold
    assert "user> trip prompt 0" in world.tty_show
    assert "\x1b" not in world.tty_list_no_color and "NAME" in world.tty_list_no_color


def test_help_and_closed_pipe(world: World) -> None:
    assert "usage: sessiontape sessions list" in world.ok("help_list").stdout
    assert "INCLUDING the subagents it ran" in " ".join(world.ok("help_list").stdout.split())
    piped = world.results["closed_pipe"]
    assert piped.stderr == "", piped.stderr


def test_readers_on_an_empty_state_create_nothing(tmp_path: Path) -> None:
    env = isolated_environ(tmp_path / "empty")
    done = run_many({"list": command("list", "--json")}, env)
    assert done["list"].returncode == 0 and json.loads(done["list"].stdout) == []
    assert not (tmp_path / "empty").exists()


# -- clear ------------------------------------------------------------------------------


def _run_on_terminal(args: list[str], answer: bytes) -> tuple[int, str]:
    """Run on a pseudo-terminal, answer the prompt; (exit code, stderr)."""
    code, _, err = on_terminal(command(*args), stdin=answer)
    return code, err


def test_clear_removes_everything_of_that_session_only() -> None:
    rec = record_all()
    ann_log = rec.logs[(ANN, "trip")]
    owner = ann_log.with_name(".trip.owner.json")
    assert owner.exists() and rec.dirs[(ANN, "trip")].is_dir()
    compacted = row_counts(rec.store, BOB, "compacted")
    assert all(compacted.values())  # live, archived, compaction and link rows
    untouched = row_counts(rec.store, BOB, "trip")
    files = tree_files(dict(os.environ))

    # on a terminal: "n" keeps everything
    code, err = _run_on_terminal(["clear", "trip", "--user", ANN], b"n\n")
    assert code == 1 and "[y/N]" in err and "nothing removed" in err
    assert tree_files(dict(os.environ)) == files

    # --yes, and "y" on a terminal, in parallel: two different sessions
    with_yes = subprocess.Popen(command("clear", "compacted", "--yes"), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    code, err = _run_on_terminal(["clear", "trip", "--user", ANN], b"y\n")
    out, yes_err = with_yes.communicate(timeout=60)
    assert code == 0, err
    assert with_yes.returncode == 0, yes_err
    assert str(rec.dirs[(BOB, "compacted")]) in out

    for pair in [(ANN, "trip"), (BOB, "compacted")]:
        assert row_counts(rec.store, *pair) == dict.fromkeys(TABLES, 0)
        assert not rec.logs[pair].exists()
        assert not rec.logs[pair].with_name(f".{rec.logs[pair].stem}.owner.json").exists()
        assert not rec.dirs[pair].exists()
    assert not ann_log.parent.exists()  # ann's last log: her log directory goes too
    # bob's other session is untouched
    assert row_counts(rec.store, BOB, "trip") == untouched
    assert rec.logs[(BOB, "trip")].exists() and rec.dirs[(BOB, "trip")].is_dir()
    assert rec.logs[(BOB, "trip")].with_name(".trip.owner.json").exists()


# -- show: one turn, the last turns -------------------------------------------------------

PICKED = {
    "turn_2": ["show", "trip", "--user", ANN, "--turn", "2"],
    "last": ["show", "trip", "--user", ANN, "--last"],
    "last_2": ["show", "compacted", "--last", "2"],
    "turn_9": ["show", "trip", "--user", ANN, "--turn", "9"],
    "turn_1_json": ["show", "compacted", "--json", "--turn", "1"],
    "last_2_json": ["show", "compacted", "--json", "--last", "2"],
}


@dataclass
class Picked(CliResults):
    """``sessions show`` of chosen turns, run on the world's recording."""

    results: dict[str, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def picked(world: World) -> Picked:
    return Picked(run_many({key: command(*args) for key, args in PICKED.items()}, world.env))


def _turn_headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("Turn ")]


def test_show_one_turn_or_the_last_turns(world: World, picked: Picked) -> None:
    second = picked.ok("turn_2").stdout
    assert [h.split()[:2] for h in _turn_headings(second)] == [["Turn", "2"]]
    assert "user> trip prompt 1" in second and "trip prompt 0" not in second
    assert "trip answer 1" in second and "trip answer 0" not in second
    # the header is the conversation's, whatever turns are shown
    assert second.splitlines()[0] == world.ok("show_ann").stdout.splitlines()[0]
    assert picked.ok("last").stdout == second
    last_two = picked.ok("last_2").stdout
    assert [h.split()[:2] for h in _turn_headings(last_two)] == [["Turn", "2"], ["Turn", "3"]]
    assert [line for line in last_two.splitlines() if line.startswith("user>")] == [
        "user> count 1", "user> count 2"]


def test_show_a_turn_out_of_range_exits_2_saying_how_many_there_are(
        picked: Picked) -> None:
    done = picked.results["turn_9"]
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "sessiontape sessions show: no turn 9: 'trip' has 2 turns\n"


def test_show_json_of_chosen_turns_numbers_them(picked: Picked) -> None:
    first = picked.json("turn_1_json")
    assert [(t["number"], t["user_input"]) for t in first["turns"]] == [(1, "count 0")]
    assert first["session"]["session_name"] == "compacted" and first["session"]["turns"] == 3
    assert [(t["number"], t["user_input"]) for t in picked.json("last_2_json")["turns"]] == [
        (2, "count 1"), (3, "count 2")]
