"""``sessiontape search`` and ``sessiontape usage`` as whole processes, on real recordings.

Three conversations recorded with the real SDK Runner and scripted models (two users, a
tool, a subagent on its own model); the commands answer from the catalog, which they
bring up to date themselves: a turn recorded after a first search is found by the next.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
from collections import defaultdict
from typing import Any

import pytest
from agents import Agent, function_tool
from harness import EXECUTABLE, Terminal, cli_environ, run_cli
from scripted import call, final, model, read_session, tools_step, usage

from sessiontape import Price, Recorder
from sessiontape.storage import times
from sessiontape.storage.agentuse.reader import LoadedSession
from sessiontape.storage.names import reported_model
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet import log_entries

PRICES = {"model-main": Price(2.0, 0.5, 8.0), "model-sub": Price(1.0, 0.25, 4.0)}


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: light drizzle"


def record(user: str, name: str, prompt: str, answer: str, *, tool_city: str | None = None,
           subagent: bool = False) -> Recorder:
    rec = Recorder(user_id=user, session_name=name, prices=PRICES)
    steps: list[Any] = []
    tools: list[Any] = [weather]
    if tool_city:
        steps.append(tools_step(call("weather", {"city": tool_city}), u=usage(30, 6)))
    if subagent:
        helper = Agent(name="Helper", model=model(final("the museum opens at nine",
                                                        usage(7, 3)), name="model-sub"))
        tools.append(helper.as_tool("ask_helper", "Ask the helper."))
        steps.append(tools_step(call("ask_helper", {"input": "museum hours?"}), u=usage(20, 4)))
    steps.append(final(answer, usage(40, 8, reasoning=2)))
    agent = Agent(name="Planner", tools=tools, model=model(*steps, name="model-main"))
    assert asyncio.run(rec.run(agent, prompt)).final_output == answer
    return rec


def search(*args: str) -> list[dict[str, Any]]:
    """``search ARGS --json``'s hits; it exits 0 with hits, 1 without (as grep)."""
    done = run_cli("search", *args, "--json")
    hits = list(json.loads(done.stdout))
    assert done.returncode == (0 if hits else 1), done.stderr
    return hits


def all_sessions(session: LoadedSession) -> list[LoadedSession]:
    return [session, *(s for sub in session.subagents for s in all_sessions(sub))]


@pytest.fixture
def recorded() -> list[Recorder]:
    return [record("ann", "porto", "Plan a rainy day in Porto", "Visit the Serralves museum",
                   tool_city="Porto", subagent=True),
            record("ann", "lisbon", "Plan a sunny day in Lisbon", "Walk along the river"),
            record("bob", "oslo", "Plan a day in Oslo", "Take the ferry to Bygdøy",
                   tool_city="Oslo")]


def test_search_finds_exactly_the_conversations_that_hold_a_phrase(
        recorded: list[Recorder]) -> None:
    assert {hit["session"] for hit in search('"rainy day"')} == {"porto"}
    drizzle = search("drizzle")  # the tool's output, in two conversations
    assert {(h["user"], h["session"]) for h in drizzle} == {("ann", "porto"), ("bob", "oslo")}
    assert {h["kind"] for h in drizzle} == {"tool_output"}
    assert all(h["turn"] == 1 and "drizzle" in h["snippet"] for h in drizzle)
    assert {h["session"] for h in search("Plan NOT Oslo")} == {"porto", "lisbon"}
    assert {h["session"] for h in search("muse*")} == {"porto"}  # a prefix
    assert {h["session"] for h in search("drizzle", "--user", "bob")} == {"oslo"}
    assert {h["session"] for h in search("plan", "--kind", "user")} == {"porto", "lisbon", "oslo"}
    assert search("zeppelin") == []


def test_a_search_with_no_hits_says_so_and_exits_1(recorded: list[Recorder]) -> None:
    """As grep: no hit, exit 1; one line on stderr names the query and the filters;
    ``--json`` still prints an array, empty."""
    text = run_cli("search", "zeppelin", "ride")
    assert (text.returncode, text.stdout) == (1, "")
    assert text.stderr == "sessiontape search: no match for 'zeppelin ride'\n"
    filtered = run_cli("search", "drizzle", "--user", "ann", "--kind", "answer", "--json")
    assert (filtered.returncode, filtered.stdout) == (1, "[]\n")
    assert filtered.stderr == ("sessiontape search: no match for 'drizzle' "
                               "(--user ann, --kind answer)\n")
    assert search("drizzle", "--user", "ann")  # the filter, not the query, left it out
    helped = " ".join(run_cli("search", "--help").stdout.split())
    assert "Exit status (as grep's): 0 when something matched, 1 when nothing did (stderr " \
           "says so; --json prints []), 2 for a usage error" in helped


def test_search_matches_users_as_people_type_them() -> None:
    """--user: the exact id, else case ignored, else the part before '@', else the log
    folder's name (as --help says); a short form several users have exits 2 naming them."""
    record("carol@example.com", "kites", "Fly a kite in Porto", "Go to the beach")
    record("gus@a.org", "sails", "Sail a kite boat", "Take the ferry")
    record("gus@b.org", "boats", "Row a kite boat", "Rent one")
    for typed in ("carol@example.com", "Carol@Example.com", "carol", "CAROL",
                  "carol_example_com"):
        assert {(h["user"], h["session"]) for h in search("kite", "--user", typed)} == {
            ("carol@example.com", "kites")}, typed
    assert {h["session"] for h in search("kite", "--user", "gus@b.org")} == {"boats"}
    assert search("kite", "--user", "zed") == []
    both = run_cli("search", "kite", "--user", "gus")
    assert (both.returncode, both.stdout) == (2, "")
    assert both.stderr == ("sessiontape search: 'gus' means several users; give one of them:\n"
                           "  gus@a.org\n  gus@b.org\n")
    helped = " ".join(run_cli("search", "--help").stdout.split())
    assert "else the id whose part before '@' U is (carol: carol@example.com), else the id " \
           "whose log folder U names (carol_example_com)" in helped


def test_search_sees_a_turn_recorded_after_the_last_search(recorded: list[Recorder]) -> None:
    assert search("ferry") and not search("fjord")
    rec = Recorder(user_id="bob", session_name="oslo", prices=PRICES)
    agent = Agent(name="Planner", model=model(final("Then see the fjord"), name="model-main"))
    asyncio.run(rec.run(agent, "And after that?"))
    [hit] = search("fjord")
    assert (hit["session"], hit["turn"], hit["kind"]) == ("oslo", 2, "answer")


def test_search_as_text_marks_matches_on_a_terminal_only(recorded: list[Recorder]) -> None:
    """Through a pipe the line is plain text (no match markers, no escape codes); on a
    terminal the match is bold red and nothing else of the snippet changes."""
    piped = run_cli("search", '"rainy day"', "--kind", "user")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "ann/porto  turn 1  user: Plan a rainy day in Porto\n"
    terminal = Terminal([EXECUTABLE, "search", '"rainy day"', "--kind", "user"],
                        env=cli_environ(NO_COLOR=""))
    try:
        terminal.expect("Plan a \x1b[1m\x1b[31mrainy day\x1b[0m in Porto")
        assert terminal.wait() == 0
    finally:
        terminal.close()


@pytest.fixture
def everyday() -> list[Recorder]:
    return [record("ann", "mail", "Draft the Follow-up e-mail", "Drafted it"),
            record("ann", "models", "Is gpt-4.1 good at C++?", "It is"),
            record("bob", "words", "Salt and pepper, near or far", "Seasoned")]


def test_search_answers_ordinary_text_as_written(everyday: list[Recorder]) -> None:
    """Hyphens, dots, ``+`` and lower-case operator words are searched as written."""
    for query, session, snippet in [
            ("Follow-up", "mail", "Draft the Follow-up e-mail"),
            ("e-mail", "mail", "Draft the Follow-up e-mail"),
            ("gpt-4.1", "models", "Is gpt-4.1 good at C++?"),
            ("C++", "models", "Is gpt-4.1 good at C++?"),
            ("and", "words", "Salt and pepper, near or far"),
            ("near", "words", "Salt and pepper, near or far")]:
        hits = search(query)
        assert [(h["session"], h["kind"], h["snippet"]) for h in hits] == [
            (session, "user", snippet)], query
    piped = run_cli("search", "C++")
    assert piped.stdout == "ann/models  turn 1  user: Is gpt-4.1 good at C++?\n"


def test_search_operators_as_separate_arguments(recorded: list[Recorder]) -> None:
    """Words given as separate arguments are one query: ``search Oslo OR Lisbon``."""
    assert {h["session"] for h in search("Oslo", "OR", "Lisbon")} == {"oslo", "lisbon"}
    assert {h["session"] for h in search("Plan", "day", "NOT", "Oslo")} == {"porto", "lisbon"}
    assert {h["session"] for h in search("--raw", "NEAR(rainy Porto, 3)")} == {"porto"}
    dashed = run_cli("search", "--", "-ferry")  # a word that starts with '-'
    assert dashed.stdout == "bob/oslo  turn 1  answer: Take the ferry to Bygdøy\n"


def test_a_malformed_raw_query_is_one_line_without_sql(recorded: list[Recorder]) -> None:
    for query, problem in [("Follow-up", "unknown column 'up'"),
                           ("C++", "unexpected '+'"),
                           ('"unclosed phrase', "a quote is not closed")]:
        done = run_cli("search", "--raw", query)
        assert (done.returncode, done.stdout) == (2, ""), query
        assert done.stderr == (f"sessiontape search: invalid search query {query!r}: "
                               f"{problem}\n"), query


def test_usage_totals_equal_the_trees_step_finish_sums(recorded: list[Recorder]) -> None:
    tree: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for rec in recorded:
        for session in all_sessions(read_session(rec)):
            for message in session.messages:
                for part in message.parts:
                    if part["type"] == "step-finish":
                        totals = tree[reported_model(part["model"])]
                        totals[0] += part["tokens"]["input"]
                        totals[1] += part["tokens"]["output"]
                        totals[2] += part["cost"]
    done = run_cli("usage", "model", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {row["model"] for row in rows} == set(tree) == {"scripted/model-main",
                                                            "scripted/model-sub"}
    for row in rows:
        assert [row["input_tokens"], row["output_tokens"]] == tree[row["model"]][:2]
        assert row["cost"] == pytest.approx(tree[row["model"]][2]) and row["cost"] > 0
    by_session = json.loads(run_cli("usage", "session", "--json").stdout)
    assert {(r["user"], r["session"]) for r in by_session} == {
        ("ann", "porto"), ("ann", "lisbon"), ("bob", "oslo")}
    assert sum(r["cost"] for r in by_session) == pytest.approx(sum(r["cost"] for r in rows))
    [day] = json.loads(run_cli("usage", "daily", "--json").stdout)
    assert day["calls"] == sum(r["calls"] for r in rows) == 7  # 4 + 1 + 2 model calls
    table = run_cli("usage", "agent")
    assert table.returncode == 0 and "Planner" in table.stdout and "Helper" in table.stdout
    assert table.stdout.splitlines()[-1].startswith("total")


def test_usage_since_and_until_bound_the_calls(recorded: list[Recorder]) -> None:
    assert json.loads(run_cli("usage", "model", "--since", "1h", "--json").stdout)
    assert json.loads(run_cli("usage", "model", "--until", "1d", "--json").stdout) == []
    bad = run_cli("usage", "model", "--since", "yesterday-ish")
    assert bad.returncode == 2 and "usage:" in bad.stderr


def test_a_first_build_shows_its_progress_on_a_terminal_only() -> None:
    """60 conversations (logs written as skilled_crew would): the first search on a terminal
    draws ``indexing N/60`` and ends at 60/60; through a pipe, or with nothing to re-read,
    stderr says nothing."""
    root = SkilletPaths.resolve().logs_root / "carol"
    root.mkdir(parents=True)
    for number in range(60):
        stamp = times.iso_ms()
        lines = [log_entries.user_message(f"question {number}", stamp),
                 log_entries.final_result(f"answer {number} about kites", timestamp=stamp)]
        (root / f"chat{number}.jsonl").write_bytes(
            b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    terminal = Terminal([EXECUTABLE, "search", "kites", "--json"])
    try:
        terminal.expect("indexing 60/60 conversations")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    again = run_cli("search", "kites", "--json")
    assert again.returncode == 0 and again.stderr == ""
    assert len(json.loads(again.stdout)) == 50  # the default --limit
    (root / "chat0.jsonl").unlink()
    piped = run_cli("search", "kites", "--limit", "100", "--json")
    assert piped.returncode == 0 and piped.stderr == ""
    assert len(json.loads(piped.stdout)) == 59


def csv_rows(*args: str) -> list[dict[str, str]]:
    """``ARGS --csv`` parsed back with :mod:`csv`: a dict per row, by the header's names."""
    done = run_cli(*args, "--csv")
    assert done.returncode == 0, done.stderr
    header, *rows = csv.reader(io.StringIO(done.stdout, newline=""))
    return [dict(zip(header, row, strict=True)) for row in rows]


def as_csv(value: Any) -> str:
    """A JSON value as --csv writes it: raw (a float as Python writes it), null empty."""
    return "" if value is None else str(value)


def call_on(day: str, model_name: str, tokens: int) -> dict[str, Any]:
    """A model_call line (as sessiontape logs one) at noon UTC on ``day``."""
    return log_entries.model_call(
        {"agentName": "Planner", "model": model_name,
         "usage": {"inputTokens": tokens, "outputTokens": 1, "cachedTokens": 0,
                   "reasoningTokens": 0}, "cost": tokens / 1000},
        timestamp=f"{day}T12:00:00.000Z")


def test_usage_weekly_sums_per_iso_week_in_utc() -> None:
    """Monday 2024-12-30 and Sunday 2025-01-05 are ISO week 2025-W01 (the week of the year's
    first Thursday), Monday 2025-01-06 is 2025-W02: three calls, two rows."""
    root = SkilletPaths.resolve().logs_root / "dora"
    root.mkdir(parents=True)
    lines = [log_entries.user_message("plan the new year", "2024-12-30T11:00:00.000Z"),
             call_on("2024-12-30", "openai/gpt-x", 100),
             call_on("2025-01-05", "openai/gpt-x", 20),
             call_on("2025-01-06", "openai/gpt-x", 3),
             log_entries.final_result("done", timestamp="2025-01-06T13:00:00.000Z")]
    (root / "year.jsonl").write_bytes(b"".join(json.dumps(line).encode() + b"\n"
                                               for line in lines))
    done = run_cli("usage", "weekly", "--json")
    assert done.returncode == 0, done.stderr
    assert [(r["week"], r["calls"], r["input_tokens"]) for r in json.loads(done.stdout)] == [
        ("2025-W01", 2, 120), ("2025-W02", 1, 3)]
    assert run_cli("usage", "weekly").stdout.splitlines()[1:] == [
        "2025-W01      2    120       2       0          0    $0.1200",
        "2025-W02      1      3       1       0          0  $0.003000",
        "total         3    123       3       0          0    $0.1230"]


def test_usage_of_a_user_typed_as_people_type_it() -> None:
    """--user as search's: carol means carol@example.com; a short form several users have
    exits 2 naming them."""
    record("carol@example.com", "kites", "Fly a kite", "Go to the beach", tool_city="Faro")
    record("gus@a.org", "sails", "Sail a boat", "Take the ferry")
    record("gus@b.org", "boats", "Row a boat", "Rent one")
    every = json.loads(run_cli("usage", "model", "--json").stdout)
    assert sum(r["calls"] for r in every) == 4
    for typed in ("carol", "Carol@Example.com", "carol_example_com"):
        done = run_cli("usage", "model", "--user", typed, "--json")
        assert done.returncode == 0, done.stderr
        [row] = json.loads(done.stdout)
        assert (row["model"], row["calls"], row["input_tokens"]) == (
            "scripted/model-main", 2, 70), typed
    [mine] = json.loads(run_cli("usage", "session", "--user", "carol", "--json").stdout)
    assert (mine["user"], mine["session"]) == ("carol@example.com", "kites")
    assert json.loads(run_cli("usage", "daily", "--user", "zed", "--json").stdout) == []
    both = run_cli("usage", "model", "--user", "gus")
    assert (both.returncode, both.stdout) == (2, "")
    assert both.stderr == ("sessiontape usage: 'gus' means several users; give one of them:\n"
                           "  gus@a.org\n  gus@b.org\n")


def test_usage_breakdown_gives_each_model_inside_each_group(recorded: list[Recorder]) -> None:
    """daily --breakdown: the day's totals (as without it) and under them each model's;
    the table shows the models indented under their day, then the total line."""
    [plain] = json.loads(run_cli("usage", "daily", "--json").stdout)
    [day] = json.loads(run_cli("usage", "daily", "--breakdown", "--json").stdout)
    models = day.pop("models")
    assert day == plain
    assert [(m["model"], m["calls"]) for m in models] == [("scripted/model-main", 6),
                                                          ("scripted/model-sub", 1)]
    for key in ("calls", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens"):
        assert sum(m[key] for m in models) == day[key], key
    assert sum(m["cost"] for m in models) == pytest.approx(day["cost"])
    by_model = {r["model"]: r for r in json.loads(run_cli("usage", "model", "--json").stdout)}
    assert {m["model"]: m for m in models} == by_model
    sessions = json.loads(run_cli("usage", "session", "--breakdown", "--json").stdout)
    assert {(s["session"], m["model"], m["calls"]) for s in sessions for m in s["models"]} == {
        ("lisbon", "scripted/model-main", 1), ("oslo", "scripted/model-main", 2),
        ("porto", "scripted/model-main", 3), ("porto", "scripted/model-sub", 1)}
    table = run_cli("usage", "daily", "--breakdown").stdout.splitlines()
    assert [line.split()[0] for line in table] == [
        "day", plain["day"], "scripted/model-main", "scripted/model-sub", "total"]
    assert table[2].startswith("  scripted/model-main") and table[2].split()[1] == "6"
    assert table[4].split()[1] == "7"
    refused = run_cli("usage", "model", "--breakdown")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == ("sessiontape usage: a breakdown per model is for the groups "
                              "other than model\n")


ODD = 'Is "Porto, the city" rainy?\nOr sunny?'  # a comma, quotes and a newline


def test_list_csv_holds_what_json_holds(recorded: list[Recorder]) -> None:
    """sessions list --csv: RFC 4180 parsed back by csv.reader, the values of --json's keys
    (raw: costs unrounded, times ISO UTC), a comma and a quote in a name kept."""
    record('o"neil, jo', "odd, one", ODD, "Rainy, mostly")
    listed = json.loads(run_cli("sessions", "list", "--json").stdout)
    rows = csv_rows("sessions", "list")
    assert [row["session_name"] for row in rows] == [s["session_name"] for s in listed]
    for session, row in zip(listed, rows, strict=True):
        assert row == {key: as_csv(session[key]) for key in row}
    assert {"session_name", "user_id", "turns", "cost", "last_activity", "status"} <= set(rows[0])
    assert ('o"neil, jo', "odd, one") in {(r["user_id"], r["session_name"]) for r in rows}
    both = run_cli("sessions", "list", "--json", "--csv")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


@pytest.mark.slow
def test_search_and_usage_csv_hold_what_json_holds(recorded: list[Recorder]) -> None:
    """search --csv and usage --csv: the values of --json's, a newline in a text kept."""
    record("ann", "odd", ODD, "Rainy, mostly")
    hits = search("sunny", "--kind", "user")
    assert csv_rows("search", "sunny", "--kind", "user") == [
        {key: as_csv(value) for key, value in hit.items()} for hit in hits]
    assert ODD in {hit["snippet"] for hit in hits}

    for args in (("daily",), ("session",), ("model", "--user", "ann")):
        usage_json = json.loads(run_cli("usage", *args, "--json").stdout)
        assert csv_rows("usage", *args) == [{key: as_csv(value) for key, value in row.items()}
                                           for row in usage_json], args
    nested = json.loads(run_cli("usage", "daily", "--breakdown", "--json").stdout)
    assert csv_rows("usage", "daily", "--breakdown") == [
        {"day": day["day"], **{key: as_csv(value) for key, value in m.items()}}
        for day in nested for m in day["models"]]
    both = run_cli("usage", "daily", "--json", "--csv")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_csv_writes_a_name_that_is_not_utf8_as_its_escape() -> None:
    """A log whose file name holds a byte that is not UTF-8 (skilled_crew's, from a raw
    name): --csv writes the session's lone surrogate as --json's escape, ``\\udcff``, and
    the rest of the listing with it."""
    logs = SkilletPaths.resolve().logs_root / "ann"
    logs.mkdir(parents=True)
    (logs / os.fsdecode(b"trip\xff.jsonl")).write_bytes(
        json.dumps(log_entries.user_message("hi", "2025-01-01T00:00:00.000Z")).encode() + b"\n")
    [row] = csv_rows("sessions", "list")
    assert (row["session_name"], row["user_id"], row["turns"], row["last_activity"]) == (
        "trip\\udcff", "ann", "1", "2025-01-01T00:00:00.000Z")
    assert row["log_path"] == str(logs / "trip\\udcff.jsonl")
