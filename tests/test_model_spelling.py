"""One model, one name: every report spells a model as the replay log does.

AgentUse's tree spells a model ``provider:model`` (``modelID``, step parts, ``session.json``),
the replay log ``provider/model`` (skilled_crew's ``final_result.model``); both are the
original tools' own and stay so on disk. ``usage``, ``sessions show`` and the Ledger export
report ``provider/model`` whichever layout they read (``names.reported_model``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from agents import Agent, function_tool
from harness import run_cli
from scripted import call, final, model, read_session, tools_step, usage

from sessiontape import Price, Recorder
from sessiontape.storage.names import reported_model


@pytest.mark.parametrize("written, reported", [
    ("scripted:gpt-4.1", "scripted/gpt-4.1"),            # the tree's
    ("scripted/gpt-4.1", "scripted/gpt-4.1"),            # the log's
    ("gpt-4.1", "gpt-4.1"),                              # no provider
    ("meta-llama/llama-3", "meta-llama/llama-3"),        # no provider, a '/' in the name
    ("litellm:openrouter/meta-llama/llama-3", "litellm/openrouter/meta-llama/llama-3"),
    ("litellm/openrouter/meta-llama/llama-3", "litellm/openrouter/meta-llama/llama-3"),
    ("ollama:llama3:8b", "ollama/llama3:8b"),            # a ':' in the name
    ("ollama/llama3:8b", "ollama/llama3:8b"),
    (":odd", ":odd"),                                    # no provider before the ':'
    ("", ""),
    (None, None),
])
def test_both_spellings_are_reported_as_the_logs(written: str | None,
                                                 reported: str | None) -> None:
    assert reported_model(written) == reported


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sun"


def record(name: str) -> Recorder:
    """One turn of two model calls (a tool call, then the answer) on ``scripted:model-x``."""
    rec = Recorder(user_id="ann", session_name=name, prices={"model-x": Price(1.0, 0.5, 4.0)})
    agent = Agent(name="Planner", tools=[weather], model=model(
        tools_step(call("weather", {"city": "Faro"}), u=usage(30, 6)),
        final(f"answer of {name}", usage(40, 8)), name="model-x"))
    asyncio.run(rec.run(agent, f"plan {name}"))
    return rec


def cli_json(*args: str) -> object:
    done = run_cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_model_has_one_name_whether_its_tree_or_its_log_is_gone(tmp_path: Path) -> None:
    """Three conversations on one model: both layouts, the log alone (tree deleted), the
    tree alone (log deleted). ``usage model`` has one row with all six calls; ``show``
    gives each turn that model, read from the log or from the tree; so does the export."""
    both, log_only, tree_only = (record(name) for name in ("both", "log-only", "tree-only"))
    assert read_session(both).info["model"] == "scripted:model-x"  # the tree's own spelling
    shutil.rmtree(log_only.session_dir)
    tree_only.log_path.unlink()
    rows = cli_json("usage", "model")
    assert rows == [{"model": "scripted/model-x", "calls": 6, "input_tokens": 210,
                     "output_tokens": 42, "cached_tokens": 0, "reasoning_tokens": 0,
                     "cost": pytest.approx(3 * (70 * 1.0 + 14 * 4.0) / 1e6)}]
    table = run_cli("usage", "model").stdout.splitlines()
    assert [line.split()[0] for line in table] == ["model", "scripted/model-x", "total"]
    for name, source in (("both", "log"), ("log-only", "log"), ("tree-only", "agentuse")):
        shown = cli_json("sessions", "show", name)
        assert isinstance(shown, dict)
        assert [(t["source"], t["model"]) for t in shown["turns"]] == [
            (source, "scripted/model-x")], name
    ledger = tmp_path / "ledger.sqlite"
    exported = run_cli("export", "--format", "ledger", "--out", ledger)
    assert exported.returncode == 0, exported.stderr
    with closing(sqlite3.connect(ledger)) as conn:
        models = {row for (row,) in conn.execute(
            "SELECT model FROM agent_sessions UNION SELECT model FROM agent_turns UNION "
            "SELECT json_extract(metadata_json, '$.model') FROM agent_messages "
            "WHERE json_extract(metadata_json, '$.model') IS NOT NULL")}
        sessions = conn.execute("SELECT COUNT(*) FROM agent_sessions").fetchone()[0]
    assert models == {"scripted/model-x"} and sessions == 3
