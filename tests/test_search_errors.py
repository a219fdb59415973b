"""Errors are searchable: the ``error`` parts of AgentUse trees with their codes.

AgentUse 0.15 records a failed run as an ``error`` part (``message``, ``code``,
``statusCode``, ``detail``: the fixture's ``-failing`` session, written by AgentUse's own
``SessionManager.addPart``); sessiontape writes the same part when a run fails
(storage/agentuse/sink.py ``_run_failed``). People search for the code or the message they
saw (issue 23 item 12).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from agents.testing import ModelStep
from harness import run_cli
from scripted import model

from sessiontape import Recorder

PROJECT = "/home/dev/proj"


def search(*args: str) -> list[dict[str, Any]]:
    done = run_cli("search", *args, "--project", PROJECT, "--json")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def test_an_agentuse_error_part_is_found_by_its_code_and_message(
        agentuse_fixture: Path, isolated_env: Path) -> None:
    data_home = isolated_env / "home" / "data"
    shutil.copytree(agentuse_fixture, data_home, dirs_exist_ok=True)
    (failing,) = data_home.glob("agentuse/project/*/session/*-failing")
    by_code = search("EXECUTION_ERROR")
    assert [(h["session"], h["kind"]) for h in by_code] == [(failing.name, "error")]
    assert "EXECUTION_ERROR" in by_code[0]["snippet"]
    by_message = search("rejected on purpose", "--kind", "error")
    assert [h["session"] for h in by_message] == [failing.name]
    assert search("invalid_request_error")[0]["kind"] == "error"  # its detail


def test_a_recorded_run_error_is_found_by_its_code() -> None:
    agent = Agent(name="A", model=model(ModelStep(error=RuntimeError("the model is down"))))

    async def main() -> None:
        async with Recorder("ann@example.com", "broken", project_root=PROJECT) as rec:
            with pytest.raises(RuntimeError):
                await rec.run(agent, "hi")

    asyncio.run(main())
    hits = [h for h in search("EXECUTION_ERROR") if h["session"] == "broken"]
    assert [h["kind"] for h in hits] == ["error"]
    assert hits[0]["turn"] == 1 and "model is down" in " ".join(
        h["snippet"] for h in search("model down", "--kind", "error"))
