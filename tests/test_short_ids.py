"""Every id we write is told apart from the others by its first 12 characters.

AgentUse shows a session by the first 12 characters of its id (the ID column of
``sessions list``, the subagents of ``sessions show``) and ``sessions show <prefix>``
finds it by a case-insensitive ``startsWith`` over every session of the project, nested
subagents included, answering "Multiple sessions match" when two start with it
(AgentUse 0.15, src/cli/sessions.ts:733 and 844, resolveSessionByScope at 1141-1156,
walkSessionDirs at 108). Subagents started together (parallel ``Agent.as_tool`` calls)
are made in the same millisecond; their ids, and those of every part and exchange, must
still differ within 12 characters and sort in the order they were made.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import run_cli
from scripted import call, final, model, read_session, tool_parts, tools_step

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import LoadedSession, load_session

HELPERS = 5


def agentuse_matches(root: Path, typed: str) -> list[str]:
    """The ids ``agentuse sessions show <typed>`` finds among the sessions under the
    project's session root: every directory holding a session.json, at any depth, whose
    id starts with ``typed`` in any case (src/cli/sessions.ts:108-121, 1146-1148)."""
    found = (json.loads(path.read_bytes())["id"] for path in root.rglob("session.json"))
    return sorted(i for i in found if i.lower().startswith(typed.lower()))


def every_id(session: LoadedSession) -> list[str]:
    """The ids of the tree: its sessions', exchanges' and parts'."""
    ids = [session.id]
    for message in session.messages:
        ids += [message.info["id"], *(part["id"] for part in message.parts)]
    for sub in session.subagents:
        ids += every_id(sub)
    return ids


def record_parallel(name: str) -> LoadedSession:
    """A run whose one model response calls ``HELPERS`` subagents (``Agent.as_tool``), run
    in parallel by the SDK."""
    helpers = [Agent(name=f"Helper {n}", model=model(final(f"helped {n}")))
               for n in range(HELPERS)]
    agent = Agent(name="Main", tools=[h.as_tool(f"ask_{n}", "Ask.") for n, h in enumerate(helpers)],
                  model=model(tools_step(*(call(f"ask_{n}", {"input": f"q{n}"}, f"c{n}")
                                           for n in range(HELPERS))),
                              final("all helped")))
    rec = Recorder(session_name=name)
    result: Any = asyncio.run(rec.run(agent, "ask them all"))
    assert result.final_output == "all helped" and rec.errors == 0
    return read_session(rec)


def test_parallel_subagents_get_ids_that_differ_within_12_characters() -> None:
    session = record_parallel("parallel")
    root = session.directory.parent

    subagents = [sub.id for sub in session.subagents]
    assert len(subagents) == HELPERS
    calls = tool_parts(session.messages[0])
    # each call's subagent, in the order the calls started: the order of their ids
    started = [calls[f"c{n}"]["state"]["metadata"]["sessionID"] for n in range(HELPERS)]
    assert started == subagents == sorted(subagents)
    assert [sub.info["agent"]["name"] for sub in session.subagents] == \
        [f"Helper {n}" for n in range(HELPERS)]
    for sub in [session.id, *subagents]:
        assert agentuse_matches(root, sub[:12]) == [sub]  # not "Multiple sessions match"
    ids = every_id(session)
    assert len({i[:12] for i in ids}) == len(ids)


def test_a_forks_ids_differ_within_12_characters() -> None:
    """A fork issues every id of its tree at once (storage/catalog/fork.py), in the order of the
    original's."""
    original = record_parallel("parallel")
    done = run_cli("sessions", "fork", "parallel", "--at-turn", "1", "--as", "parallel-b",
                   "--json")
    assert done.returncode == 0, done.stderr
    fork = load_session(Path(json.loads(done.stdout)["agentuse_dir"]))
    assert [sub.info["agent"]["name"] for sub in fork.subagents] == \
        [sub.info["agent"]["name"] for sub in original.subagents]
    root = original.directory.parent
    for sub in [fork.id, *(sub.id for sub in fork.subagents)]:
        assert agentuse_matches(root, sub[:12]) == [sub]
    ids = every_id(fork) + every_id(original)
    assert len(ids) == 2 * len(every_id(original))
    assert len({i[:12] for i in ids}) == len(ids)


def test_a_new_conversation_takes_no_short_id_of_another_recorders_session(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's session begun in the same millisecond may share its first 12
    characters with this one's next id (ids of one process always differ there): a new
    conversation's directory skips such an id (storage/skillet/links.py)."""
    from sessiontape.storage.paths import project_key, sessions_root_for_key
    from sessiontape.storage.skillet import links

    root = sessions_root_for_key(project_key())
    root.mkdir(parents=True)
    other = "01M8DCF9XQF8" + "A" * 14  # another recorder's session, just begun
    (root / f"{other}-planner").mkdir()
    (root / f"{other}-planner" / "session.json").write_text(json.dumps({"id": other}))
    issued = iter([other[:12] + "B" * 14, "01M8DCF9XQF9" + "C" * 14])
    monkeypatch.setattr(links, "new_ulid", lambda: next(issued))
    rec = Recorder("ann@example.com", "mine")
    asyncio.run(rec.run(Agent(name="Planner", model=model(final("ok"))), "hi"))
    assert rec.session_dir is not None
    assert rec.session_dir.name == "01M8DCF9XQF9" + "C" * 14 + "-planner"
    assert agentuse_matches(root, "01M8DCF9XQF8") == [other]
