"""``sessions list`` and ``sessions show`` answered from the catalog, and ``catalog``.

Whole processes on conversations recorded with the real SDK Runner and scripted models.
The catalog's answer is the one read from the files directly (``list_sessions``,
``find_session``); a catalog that cannot be used is said in one line on stderr, and the
answer is still right (read from the files).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import EXECUTABLE, cli_environ, run_cli, run_many
from scripted import final, model, usage

from sessiontape import Recorder
from sessiontape.storage.catalog.index import SCHEMA_VERSION, default_catalog_path
from sessiontape.storage.catalog.sessions import find_session, list_sessions
from sessiontape.storage.paths import Locations


def record(user: str, name: str, answer: str) -> None:
    async def main() -> None:
        async with Recorder(user_id=user, session_name=name) as rec:
            agent = Agent(name="Guide", model=model(final(answer, usage(12, 3))))
            await rec.run(agent, f"a question for {name}")

    asyncio.run(main())


def listed(*args: str, env: dict[str, str] | None = None) -> tuple[list[Any], str]:
    """``sessions list --json ARGS``: the list and stderr."""
    done = run_cli("sessions", "list", "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def direct(user: str | None = None) -> list[Any]:
    """What ``list_sessions`` reads from the files."""
    return [info.to_json() for info in list_sessions(user, locations=Locations.resolve())]


@pytest.fixture
def two() -> None:
    record("ann", "porto", "take the tram")
    record("bob", "oslo", "take the ferry")


def test_list_and_show_answer_what_the_files_say_and_see_a_new_turn(two: None) -> None:
    first, stderr = listed()
    assert first == direct() and stderr == ""
    assert [s["session_name"] for s in first] == ["oslo", "porto"]  # newest first
    assert listed("--user", "ann")[0] == direct("ann")
    shown = run_cli("sessions", "show", "porto", "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["session"] == find_session("porto").to_json()
    assert [t["final"]["text"] for t in view["turns"]] == ["take the tram"]

    record("ann", "porto", "or walk uphill")  # a second turn, after the catalog was made
    again, _ = listed()
    assert again == direct()
    assert {s["session_name"]: s["turns"] for s in again} == {"porto": 2, "oslo": 1}
    view = json.loads(run_cli("sessions", "show", "porto", "--json").stdout)
    assert [t["final"]["text"] for t in view["turns"]] == ["take the tram", "or walk uphill"]


def test_show_of_an_unknown_or_ambiguous_name_is_the_same_error(two: None) -> None:
    record("bob", "porto", "a second porto")
    unknown = run_cli("sessions", "show", "lima")
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert "no session named 'lima'" in unknown.stderr
    ambiguous = run_cli("sessions", "show", "porto")
    assert ambiguous.returncode == 2
    assert "2 users have a session named 'porto'" in ambiguous.stderr
    assert "user ann" in ambiguous.stderr and "user bob" in ambiguous.stderr
    assert json.loads(run_cli("sessions", "show", "porto", "--user", "bob", "--json").stdout
                      )["turns"][0]["final"]["text"] == "a second porto"


QUESTIONS = [("search", "ferry"), ("usage", "session")]


def newer_schema() -> None:
    with closing(sqlite3.connect(default_catalog_path())) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     (str(SCHEMA_VERSION + 1),))


def corrupt() -> None:
    default_catalog_path().write_bytes(b"not a database " * 512)


@pytest.mark.parametrize("damage, said", [
    (newer_schema, "newer than this sessiontape"),
    (corrupt, None),  # rebuilt: nothing to say
])
@pytest.mark.slow
def test_a_catalog_that_cannot_be_used_is_said_once_and_the_answer_stays_right(
        two: None, damage: Any, said: str | None) -> None:
    before, _ = listed()
    answers = {args: json.loads(run_cli(*args, "--json").stdout) for args in QUESTIONS}
    damage()
    after, stderr = listed()
    assert after == before == direct()
    if said is None:
        assert stderr == ""
    else:
        assert stderr.count("\n") == 1 and said in stderr
        assert "reading the sessions directly" in stderr
    shown = run_cli("sessions", "show", "oslo", "--json")
    assert shown.returncode == 0
    assert json.loads(shown.stdout)["session"] == find_session("oslo").to_json()
    assert shown.stderr == stderr
    for args, answer in answers.items():  # from a catalog built in memory, when it can't be used
        done = run_cli(*args, "--json")
        assert (done.returncode, json.loads(done.stdout)) == (0, answer), args
        assert done.stderr == stderr.replace("sessions:", args[0] + ":"), args


def test_a_catalog_that_cannot_be_created_is_bypassed(two: None, tmp_path: Path) -> None:
    """The cache directory under a file: the catalog can't be made; the listing is read
    from the files, search and usage from a catalog in memory, each said in one line."""
    answers = {args: json.loads(run_cli(*args, "--json").stdout) for args in QUESTIONS}
    (tmp_path / "a-file").write_text("")
    env = cli_environ(XDG_CACHE_HOME=str(tmp_path / "a-file" / "cache"))
    found, stderr = listed(env=env)
    assert found == direct()
    assert stderr.count("\n") == 1 and "cannot be used" in stderr
    for args, answer in answers.items():
        done = run_cli(*args, "--json", env=env)
        assert (done.returncode, json.loads(done.stdout)) == (0, answer), args
        assert done.stderr.count("\n") == 1 and "cannot be used" in done.stderr


def test_catalog_refresh_and_path(two: None) -> None:
    done = run_cli("catalog", "refresh", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["rebuilt"], summary["conversations"], summary["reindexed"]) == (True, 2, 2)
    assert summary["path"] == str(default_catalog_path())
    again = json.loads(run_cli("catalog", "refresh", "--full", "--json").stdout)
    assert (again["rebuilt"], again["reindexed"], again["dropped"]) == (False, 0, 0)
    text = run_cli("catalog", "refresh")
    assert text.stdout == f"refreshed {default_catalog_path()}: 2 conversations, 0 read, " \
                          "0 dropped\n"
    path = run_cli("catalog", "path")
    assert path.stdout == f"{default_catalog_path()}\n"


def test_catalog_path_as_json_and_its_own_help(two: None) -> None:
    """``catalog path --json`` says where the catalog is, whether it exists, its size and
    schema; ``catalog path --help`` is path's help, not refresh's."""
    catalog = default_catalog_path()
    before = run_cli("catalog", "path", "--json")
    assert (before.returncode, before.stderr) == (0, "")
    assert json.loads(before.stdout) == {"path": str(catalog), "exists": False, "size": None,
                                         "schema_version": None}
    assert run_cli("catalog", "refresh").returncode == 0
    after = json.loads(run_cli("catalog", "path", "--json").stdout)
    assert after == {"path": str(catalog), "exists": True, "size": catalog.stat().st_size,
                     "schema_version": SCHEMA_VERSION}
    assert after["size"] > 0
    helped = run_cli("catalog", "path", "--help")
    assert helped.returncode == 0 and helped.stderr == ""
    assert helped.stdout.startswith("usage: sessiontape catalog path [-h] [--json]\n")
    assert "Where the catalog is" in helped.stdout and "--full" not in helped.stdout
    refresh = run_cli("catalog", "refresh", "--help").stdout
    assert refresh.startswith("usage: sessiontape catalog refresh [-h] [--full] [--project DIR]")
    assert "Bring the catalog up to date" in refresh
    group = run_cli("catalog", "--help").stdout
    assert group.startswith("usage: sessiontape catalog [-h] SUBCOMMAND ...\n")
    assert "    refresh   bring the catalog up to date" in group
    assert "    path      where the catalog is" in group


@pytest.mark.slow
def test_processes_building_a_new_catalog_at_once_all_use_it(two: None) -> None:
    """Many commands started at once on a machine with no catalog yet each find the file
    empty; one makes the schema, the others wait for it and use it, none saying that the
    catalog "cannot be used (table meta already exists)" (two makers of one schema)."""
    results = run_many({f"list{n}": [EXECUTABLE, "sessions", "list", "--json"]
                        for n in range(16)}, cli_environ(), parallel=16)
    for key, done in results.items():
        assert done.returncode == 0 and done.stderr == "", (key, done.stderr)
        assert {s["session_name"] for s in json.loads(done.stdout)} == {"porto", "oslo"}, key
    assert default_catalog_path().is_file()
