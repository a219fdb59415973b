"""The sessiontape executable, run in real subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from agents import Agent
from harness import EXECUTABLE, REPO, WAIT, cli_environ, on_terminal
from harness import run as run_process
from harness import run_cli as run
from scripted import final, model, run_agent

from sessiontape import Recorder
from sessiontape.cli import VERBS
from sessiontape.cli.conversation import describe_compaction
from sessiontape.storage.catalog.index import default_catalog_path
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.paths import SkilletPaths, agentuse_sessions_root
from sessiontape.storage.skillet import log_entries
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.version import __version__


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"sessiontape {__version__}"


def test_paths_json_follows_the_environment(tmp_path: Path) -> None:
    done = run("paths", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["agentuse_root"] == str(agentuse_sessions_root(tmp_path))
    assert found["skillet_state"] == str(Path(os.environ["SKILLET_HOME"]) / "state")
    assert found["skillet_source"] == "SKILLET_HOME"


def test_paths_text_and_module_entry_point_agree(tmp_path: Path) -> None:
    text = run("paths", "--project", str(tmp_path)).stdout
    module = run_process([sys.executable, "-m", "sessiontape", "paths", "--project", str(tmp_path)])
    assert module.returncode == 0 and module.stdout == text
    rows = dict(line.split(None, 1) for line in text.splitlines())
    assert rows["agentuse_root"] == str(agentuse_sessions_root(tmp_path))


@pytest.mark.parametrize("args", [[], ["no-such-verb"]])
def test_usage_errors_exit_2_on_stderr(args: list[str]) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert done.stdout == "" and "usage: sessiontape" in done.stderr


@pytest.mark.parametrize("args", [["--help"], ["paths", "--help"], ["sessions", "--help"],
                                  ["log", "stream", "--help"], ["run", "--help"]])
def test_help_everywhere(args: list[str]) -> None:
    done = run(*args)
    assert done.returncode == 0 and done.stderr == ""
    verb = " ".join(a for a in args if a != "--help")
    assert done.stdout.startswith(f"usage: sessiontape {verb}".rstrip())


def test_a_reader_gone_before_the_output_is_quiet() -> None:
    """stdout is a pipe whose reader has already closed it: no traceback, exit 0."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([str(EXECUTABLE), "paths"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=WAIT, env=cli_environ())
    finally:
        os.close(write_end)
    assert done.returncode == 0
    assert done.stderr == ""


IMPORTED_BY = textwrap.dedent("""
    import contextlib, io, json, sys
    from sessiontape.cli import main
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()), \\
            contextlib.redirect_stderr(io.StringIO()):
        main(sys.argv[1:])
    print(json.dumps(sorted(name for name in sys.modules
                            if name.startswith(("sessiontape", "agents", "asyncio")))))
""")


def imported_by(*args: str) -> list[str]:
    """The sessiontape, Agents SDK and asyncio modules a command line imports, run in a
    fresh process."""
    done = run_process([sys.executable, "-c", IMPORTED_BY, *args], cwd=REPO)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_show_and_search_load_no_sdk_no_writer_no_asyncio() -> None:
    """``sessions show`` and ``search`` load neither the Agents SDK, nor the file-writing
    machinery, nor ``asyncio``, nor the log follow engine, once the catalog exists (making
    it is a write): what keeps them near 100 ms (docs/performance.md, "Catalog")."""
    logs = SkilletPaths.resolve().logs_root / "ann"
    logs.mkdir(parents=True)
    with open(logs / "trip.jsonl", "wb") as log:
        for entry in (log_entries.user_message("plan a rainy day"),
                      log_entries.final_result("see the museums")):
            log.write(dumps_compact(entry) + b"\n")
    heavy = {"agents", "asyncio", "sessiontape.storage.file_writes",
             "sessiontape.storage.events", "sessiontape.storage.skillet.log_follow"}
    assert "sessiontape.storage.file_writes" in imported_by("catalog", "refresh")
    for _ in range(2):
        shown = set(imported_by("sessions", "show", "trip", "--json"))
        assert "sessiontape.cli.show" in shown and not heavy & shown, heavy & shown
        found = set(imported_by("search", "rainy", "--json"))
        assert "sessiontape.storage.catalog.index" in found and not heavy & found, heavy & found
    hits = json.loads(run("search", "rainy", "--json").stdout)
    assert [(hit["session"], hit["turn"]) for hit in hits] == [("trip", 1)]


def test_version_and_help_import_no_verb() -> None:
    """``--version`` and ``--help`` load no verb module (what keeps their start-up fast);
    a verb loads its own module and not the others'."""
    for args in (["--version"], ["--help"]):
        assert imported_by(*args) == ["sessiontape", "sessiontape.cli",
                                      "sessiontape.storage", "sessiontape.storage.lazy",
                                      "sessiontape.storage.version"], args
    no_verb = imported_by()  # the help, and the exit code's module (cli.console)
    verb_modules = {f"sessiontape.cli.{verb.module}" for verb in VERBS.values()}
    assert not verb_modules & set(no_verb) and "agents" not in no_verb
    verb = imported_by("paths", "--json")
    assert "sessiontape.cli.paths" in verb
    assert not {"sessiontape.cli.sessions", "sessiontape.cli.run", "sessiontape.cli.logs",
                "sessiontape.cli.export", "agents"} & set(verb)


def test_a_count_of_one_is_singular() -> None:
    """One stored item, one turn: ``1 turn``, ``1 item``, ``1 stored item`` (never ``1 turns``)
    in sessions show's header, clear's question and chat's /compact answer."""
    async def store_one() -> None:
        async with ItemStore(SkilletPaths.resolve().store_file) as store:
            await store.session("ann", "one").add_items([{"role": "user", "content": "hi"}])

    asyncio.run(store_one())
    shown = run("sessions", "show", "one")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("one  user ann  1 turn  1 item  origin skilled_crew\n")
    code, _, asked = on_terminal([EXECUTABLE, "sessions", "clear", "one"], stdin=b"n\n")
    assert code == 1
    assert "  1 stored item, 0 archived items, 0 compactions and its link in " in asked
    refreshed = run("catalog", "refresh")
    assert refreshed.stdout.startswith(f"refreshed {default_catalog_path()}: 1 conversation, ")
    assert describe_compaction(None, 1) == "nothing to compact (1 item stored)"


def test_an_export_of_one_turn_says_1_turn(tmp_path: Path) -> None:
    rec = Recorder("ann", "once")
    asyncio.run(run_agent(rec, Agent(name="A", model=model(final("hi"))), "hello",
                          streamed=False))
    out = tmp_path / "ledger.sqlite"
    done = run("export", "--format", "ledger", "--out", str(out), "--session", "once")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"exported 1 conversation to {out}: 1 session (0 subagents), "
                           "2 messages, 1 turn, 0 tool calls\n")
