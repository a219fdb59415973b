"""``sessions list``: its columns (STATUS, ORIGIN), its filters (--limit, --since, --user,
--status), its width on a terminal, its times (UTC) and costs (one precision); and
``--user`` as people type it, the same in every verb that takes one (recorder/cli/finding.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest
from agents import Agent
from agents.exceptions import MaxTurnsExceeded
from harness import EXECUTABLE, CliResults, isolated, next_millisecond, on_terminal, run_many
from scripted import call, final, model, square, tools_step, usage

from sessiontape import Recorder
from sessiontape.storage.times import ms_to_iso

CAROL, GUS_A, GUS_B = "carol@example.com", "gus@a.org", "gus@b.org"
# newest first: gus@b.org's crashed trip, gus@a.org's failed trip, carol's completed kites
ORDER = [(GUS_B, "trip"), (GUS_A, "trip"), (CAROL, "kites")]
TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _record() -> None:
    """carol's kites completes; gus@a.org's trip fails (too many turns); gus@b.org's trip
    is left as a killed recorder leaves it: running, its recorder gone."""
    async def main() -> None:
        async with Recorder(CAROL, "kites") as rec:
            await rec.run(Agent(name="Kiter", model=model(final("fly", usage(1000, 200)))),
                          "Fly a kite")
        next_millisecond()
        async with Recorder(GUS_A, "trip") as rec:
            looping = Agent(name="Looper", tools=[square], model=model(
                tools_step(call("square", {"n": 2})), tools_step(call("square", {"n": 3}))))
            with pytest.raises(MaxTurnsExceeded):
                await rec.run(looping, "square forever", max_turns=1)
        next_millisecond()
        async with Recorder(GUS_B, "trip") as rec:
            await rec.run(Agent(name="Planner", model=model(final("go"))), "Plan a trip")
            crashed = rec.session_dir
        assert crashed is not None
        info = json.loads((crashed / "session.json").read_bytes())
        info.update(status="running", recorder={"pid": 1, "host": "gone", "started": 1})
        (crashed / "session.json").write_text(json.dumps(info))

    asyncio.run(main())


def command(*args: str) -> list[str]:
    return [str(EXECUTABLE), *args]


@dataclass
class World(CliResults):
    results: dict[str, subprocess.CompletedProcess[str]]
    env: dict[str, str]
    last_ms: dict[tuple[str, str], int]
    tty: tuple[int, str, str]  # exit code, what the terminal showed, stderr
    tty_no_color: tuple[int, str, str]

    def shown(self, run: tuple[int, str, str]) -> str:
        """What the terminal showed, the run asserted to have exited 0."""
        code, shown, err = run
        assert code == 0, err
        return shown


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    base = tmp_path_factory.mktemp("listing")
    with isolated(base, NO_COLOR="1") as env:
        _record()
        from sessiontape.storage.catalog.sessions import list_sessions

        last_ms = {(i.user_id or "", i.session_name): i.last_ms or 0 for i in list_sessions()}
    failed_at = ms_to_iso(last_ms[(GUS_A, "trip")]) or ""
    (base / "a-file").write_text("")
    runs = {
        "text": ["sessions", "list"],
        "paths": ["sessions", "list", "--paths"],
        "json": ["sessions", "list", "--json"],
        "carol": ["sessions", "list", "--user", "carol"],
        "carol_json": ["sessions", "list", "--user", "Carol@Example.COM", "--json"],
        "gus": ["sessions", "list", "--user", "gus"],
        "gus_b": ["sessions", "list", "--user", "gus_b_org", "--json"],
        "failed": ["sessions", "list", "--status", "failed", "--json"],
        "error": ["sessions", "list", "--status", "error", "--json"],
        "crashed_or_done": ["sessions", "list", "--status", "crashed", "--status", "completed",
                            "--json"],
        "bad_status": ["sessions", "list", "--status", "broken"],
        "limit": ["sessions", "list", "-n", "2", "--json"],
        "limit_zero": ["sessions", "list", "--limit", "0"],
        "since": ["sessions", "list", "--since", failed_at, "--json"],
        "since_limit": ["sessions", "list", "--since", "1d", "--limit", "1"],
        "since_bad": ["sessions", "list", "--since", "yesterday"],
        "since_none": ["sessions", "list", "--since", "2999-01-01", "--json"],
        "none_left": ["sessions", "list", "--since", "2999-01-01T00:00:00Z", "--status",
                      "failed", "--status", "suspended", "--user", "carol"],
        "show_gus": ["sessions", "show", "trip", "--user", "gus"],
        "show_gus_b": ["sessions", "show", "trip", "--user", "GUS@B.ORG", "--json"],
        "path_carol": ["sessions", "path", "kites", "--user", "carol", "--json"],
        "clear_gus": ["sessions", "clear", "trip", "--user", "gus", "--yes"],
        "fork_gus": ["sessions", "fork", "trip", "--user", "gus", "--at-turn", "1", "--as", "x"],
        "export_gus": ["export", "--format", "ledger", "--out", str(base / "l.sqlite"),
                       "--user", "gus"],
        "usage": ["usage", "session"],
        "help": ["sessions", "list", "--help"],
        "help_show": ["sessions", "show", "--help"],
        "show": ["sessions", "show", "kites", "--user", "carol"],
        "prune": ["sessions", "prune", "--older-than", "2999-01-01T00:00:00Z", "--dry-run"],
    }
    results = run_many({key: command(*args) for key, args in runs.items()}, env)
    no_catalog = {**env, "XDG_CACHE_HOME": str(base / "a-file" / "cache")}
    results.update(run_many({
        "direct_carol": command("sessions", "list", "--user", "carol", "--json"),
        "direct_gus": command("sessions", "list", "--user", "gus"),
        "direct_show_gus_a": command("sessions", "show", "trip", "--user", "gus@A.org",
                                     "--json"),
        "direct_show_gus": command("sessions", "show", "trip", "--user", "gus"),
    }, no_catalog))
    colour = {k: v for k, v in env.items() if k != "NO_COLOR"}
    tty = on_terminal(command("sessions", "list", "--paths"), {**colour, "COLUMNS": "110"})
    tty_no_color = on_terminal(command("sessions", "list"), {**env, "COLUMNS": "200"})
    return World(results, env, last_ms, tty, tty_no_color)


def names(listed: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(s["user_id"], s["session_name"]) for s in listed]


def rows(text: str) -> dict[tuple[str, str], str]:
    """The table's rows by (user, name); the header under ``("USER", "NAME")``."""
    return {(line.split()[1], line.split()[0]): line for line in text.splitlines()}


# -- columns ----------------------------------------------------------------------------


def test_list_shows_status_and_origin_and_no_path(world: World) -> None:
    lines = world.ok("text").stdout.splitlines()
    assert lines[0].split() == ["NAME", "USER", "TURNS", "ITEMS", "TOKENS", "COST", "LAST",
                                "ACTIVITY", "STATUS", "ORIGIN"]
    by_pair = rows(world.results["text"].stdout)
    assert [pair for pair in by_pair if pair != ("USER", "NAME")] == [
        (user, name) for user, name in ORDER]
    assert by_pair[(GUS_B, "trip")].endswith("  ✗ crashed  sessiontape")
    assert by_pair[(GUS_A, "trip")].endswith("  ✗ error    sessiontape")
    assert by_pair[(CAROL, "kites")].endswith("  completed  sessiontape")
    assert all("/" not in line for line in lines)  # no path in any row


def test_paths_adds_the_agentuse_directory_last(world: World) -> None:
    listed = {(s["user_id"], s["session_name"]): s for s in world.json("json")}
    lines = world.ok("paths").stdout.splitlines()
    assert lines[0].endswith("  STATUS     ORIGIN       AGENTUSE DIR")
    for pair, line in rows(world.results["paths"].stdout).items():
        if pair != ("USER", "NAME"):
            assert line.endswith(f"  sessiontape  {listed[pair]['agentuse_dir']}")


def test_times_are_utc_with_the_zone_and_costs_have_one_precision(world: World) -> None:
    listed = {(s["user_id"], s["session_name"]): s for s in world.json("json")}
    for pair, line in rows(world.results["text"].stdout).items():
        if pair == ("USER", "NAME"):
            continue
        iso = listed[pair]["last_activity"]  # UTC, ISO
        assert TIME.findall(line) == [f"{iso[:10]} {iso[11:19]} UTC"]
    kites_at = listed[(CAROL, "kites")]["last_activity"]
    turn = next(line for line in world.ok("show").stdout.splitlines() if line.startswith("Turn"))
    assert turn.startswith("Turn 1 ") and len(TIME.findall(turn)) == 1
    assert TIME.findall(turn)[0] <= f"{kites_at[:10]} {kites_at[11:19]} UTC"
    pruned = world.ok("prune").stdout.splitlines()
    assert pruned[0] == "would remove 3 sessions last active before 2999-01-01 00:00:00 UTC"
    # oldest first (ORDER is newest first, as list shows it); the three may span a second
    assert [(line.split()[0], line.split()[2], TIME.findall(line)) for line in pruned[1:]] == [
        (name, user, [f"{listed[(user, name)]['last_activity'][:10]} "
                      f"{listed[(user, name)]['last_activity'][11:19]} UTC"])
        for user, name in reversed(ORDER)]
    kites = rows(world.results["text"].stdout)[(CAROL, "kites")]
    # gpt-4.1: 1000 in x $2/M + 200 out x $8/M = $0.0036
    assert "  $0.003600  " in kites
    usage_row = next(line for line in world.ok("usage").stdout.splitlines()
                     if line.startswith(f"{CAROL}/kites "))
    assert usage_row.endswith("  $0.003600")


# -- filters ----------------------------------------------------------------------------


def test_status_filter_takes_failed_for_error(world: World) -> None:
    assert names(world.json("failed")) == names(world.json("error")) == [(GUS_A, "trip")]
    assert names(world.json("crashed_or_done")) == [(GUS_B, "trip"), (CAROL, "kites")]
    bad = world.results["bad_status"]
    assert bad.returncode == 2 and "invalid choice: 'broken'" in bad.stderr
    assert "failed" in bad.stderr and bad.stdout == ""


def test_limit_keeps_the_newest(world: World) -> None:
    assert names(world.json("limit")) == ORDER[:2]
    zero = world.results["limit_zero"]
    assert zero.returncode == 2 and "--limit" in zero.stderr and "at least 1" in zero.stderr


def test_since_takes_what_search_takes(world: World) -> None:
    assert names(world.json("since")) == ORDER[:2]
    assert world.json("since_none") == []
    one = world.ok("since_limit").stdout.splitlines()
    assert len(one) == 2 and one[1].startswith(f"trip  {GUS_B}  ")
    nothing = world.ok("none_left")
    assert nothing.stdout == "" and nothing.stderr == (
        "sessiontape sessions: no recorded sessions (--user carol, --since 2999-01-01 00:00:00 "
        "UTC, --status failed, --status suspended)\n")
    bad = world.results["since_bad"]
    assert bad.returncode == 2 and "not a duration like 10m, 2h, 1d or an ISO time" in bad.stderr


# -- --user as people type it, in every verb ---------------------------------------------


def test_list_user_as_people_type_it(world: World) -> None:
    carol = world.ok("carol").stdout.splitlines()
    assert len(carol) == 2 and carol[1].startswith(f"kites  {CAROL}  ")
    assert names(world.json("carol_json")) == [(CAROL, "kites")]
    assert names(world.json("gus_b")) == [(GUS_B, "trip")]


@pytest.mark.parametrize("key", ["gus", "show_gus", "clear_gus", "fork_gus", "export_gus",
                                 "direct_gus", "direct_show_gus"])
def test_a_user_that_means_several_exits_2_naming_them(world: World, key: str) -> None:
    done = world.results[key]
    assert done.returncode == 2 and done.stdout == "", done.stderr
    said = [line for line in done.stderr.splitlines() if "cannot be used" not in line]
    assert said[-3:] == [f"{said[-3].split(':')[0]}: 'gus' means several users; give one of "
                         "them:", f"  {GUS_A}", f"  {GUS_B}"]


def test_help_says_how_a_user_is_matched_and_what_a_status_may_be(world: World) -> None:
    for key in ("help", "help_show"):
        helped = " ".join(world.ok(key).stdout.split())
        assert "else the id whose part before '@' U is (carol: carol@example.com)" in helped
    helped = " ".join(world.ok("help").stdout.split())
    assert "error (or failed: the run ended with an error), crashed (its recorder died)" \
        in helped
    assert "--paths add each session's AgentUse directory" in helped


def test_show_and_path_take_the_user_as_typed(world: World) -> None:
    shown = world.json("show_gus_b")["session"]
    assert (shown["user_id"], shown["status"]) == (GUS_B, "crashed")
    assert world.json("path_carol")["log"].endswith("/carol_example_com/kites.jsonl")


def test_without_a_catalog_the_users_of_the_files_are_matched(world: World) -> None:
    assert names(world.json("direct_carol")) == [(CAROL, "kites")]
    shown = world.json("direct_show_gus_a")["session"]
    assert (shown["user_id"], shown["status"]) == (GUS_A, "error")


# -- a terminal -------------------------------------------------------------------------


def test_on_a_terminal_the_table_fits_and_failures_are_red(world: World) -> None:
    lines = world.shown(world.tty).splitlines()
    plain = [ANSI.sub("", line) for line in lines]
    assert len(plain) == 4 and all(len(line) <= 110 for line in plain), plain
    assert plain[0].startswith("NAME") and "ORIGIN       AGENTUSE" in plain[0]
    red = [line for line in lines if line.startswith("\x1b[31m")]
    assert len(red) == 2 and all("✗" in line for line in red)
    assert [ANSI.sub("", line).split()[0] for line in red] == ["trip", "trip"]
    listed = {(s["user_id"], s["session_name"]): s for s in world.json("json")}
    for line, pair in zip(plain[1:], ORDER, strict=True):  # a path keeps its end
        path = line.rsplit("  ", 1)[1]
        assert path.startswith("…") and listed[pair]["agentuse_dir"].endswith(path[1:])


def test_no_color_keeps_the_markers(world: World) -> None:
    shown = world.shown(world.tty_no_color)
    assert "\x1b" not in shown and shown.count("✗ ") == 2
    assert "…" not in shown  # 200 columns: nothing shortened
