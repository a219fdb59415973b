"""Two processes recording the SAME conversation at once (and a third beside them).

``test_recorder_concurrency.py`` has two processes on two conversations of one
store; here two ``Recorder``s with the same user and session name run in two
processes at the same time, while a third records another conversation into
the same store and logs root. What is promised:

* the JSONL log: every line whole and parsable, none lost; each process's
  lines are all there, in its own order (its turns read back whole when its
  lines are taken alone). Turns of the two processes interleave in the file,
  so reading the file's turns mixes them: one recorder per conversation at a
  time is the supported use, this is what two get;
* the item store: every row of both, each process's items in its own order;
* the AgentUse tree: one session (the link in the store is made once, by the
  first process), in which each process adds its own exchanges and subagent
  sessions; ``session.json`` is rewritten by both, atomically (the last
  write wins).
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections import Counter
from itertools import pairwise

import orjson
import pytest
from scripted import record_conversation

from sessiontape.storage.agentuse.reader import load_session, scan_sessions
from sessiontape.storage.paths import SkilletPaths, agentuse_sessions_root
from sessiontape.storage.skillet.compaction import ARCHIVE_TABLE
from sessiontape.storage.skillet.links import read_links
from sessiontape.storage.skillet.log_owners import find_log_path
from sessiontape.storage.skillet.log_reader import LogEntry, SessionLogReader, group_turns
from sessiontape.storage.skillet.summarizers import is_summary

USER = "proc@example.com"  # record_conversation's user
TURNS = 5
WRITERS = {"A": "shared", "B": "shared", "C": "solo"}  # tag -> session name
ROWS_PER_TURN = 6  # user, two function calls, their outputs, the answer


def owner(entry: LogEntry) -> str:
    """Which process wrote a log line: its tag, from a prompt, the helper's name or a text.

    The main agent has the same name in both processes (``Agent {session}``):
    its lines give the session name; a compaction line gives "".
    """
    data = entry.data
    if entry.kind == "user_message":
        return str(data["userInput"]).split()[0]
    if entry.kind == "final_result":
        return str(data["finalResult"]["text"]).split()[0]
    if entry.kind == "compaction":  # the store's history was compacted by either process
        return ""
    if entry.kind == "model_call":
        return str(data["agentName"]).split()[-1]
    step = data["stepResult"]
    return step["agentName"].split()[-1] if "agentName" in step else step["text"].split()[0]


@pytest.mark.slow
def test_two_processes_record_one_session_at_once() -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(WRITERS))
    processes = [context.Process(target=record_conversation, args=(name, TURNS, barrier, tag))
                 for tag, name in WRITERS.items()]
    for process in processes:
        process.start()
    for process in processes:
        process.join(90)
    assert [p.exitcode for p in processes] == [0] * len(WRITERS)

    # -- the log: every line whole, each process's lines all there, in order -----------------
    for name, tags in (("shared", "AB"), ("solo", "C")):
        path = find_log_path(USER, name)
        assert path is not None
        reader = SessionLogReader(path)
        entries = reader.entries()
        assert reader.problems == []
        assert len(entries) == path.read_bytes().count(b"\n")
        for tag in tags:
            mine = [e for e in entries if owner(e) == tag]
            turns = group_turns(mine)
            assert [t.user_input for t in turns] == [f"{tag} prompt {n}" for n in range(TURNS)]
            assert [t.text for t in turns] == [f"{tag} turn {n}" for n in range(TURNS)]
            assert all(t.complete for t in turns)
            for turn in turns:  # the helper's start and end, the agent's answer
                assert [s["type"] for s in turn.steps] == ["agent_start", "agent_end", "text"]
        # the main agent's lines, which both processes write alike: all there
        agent_lines = Counter(e.data["stepResult"]["type"] for e in entries
                              if e.kind == "step" and owner(e) == name)
        per_turn = {"agent_start": 1, "agent_end": 1, "agent_tool_start": 2, "agent_tool_end": 2}
        assert agent_lines == {kind: n * TURNS * len(tags) for kind, n in per_turn.items()}
        assert all(owner(e) in (*tags, name, "") for e in entries)
    shared = SessionLogReader(find_log_path(USER, "shared")).entries()
    switches = sum(owner(a) != owner(b) for a, b in pairwise(shared))
    assert switches >= 2  # the two really wrote at the same time

    # -- the store: every row of every process, live or archived by a compaction -------------
    with sqlite3.connect(SkilletPaths.resolve().store_file) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = conn.execute(f"SELECT id, session_name, item_json FROM session_items UNION ALL "
                            f"SELECT id, session_name, item_json FROM {ARCHIVE_TABLE} "
                            "ORDER BY id").fetchall()
    items = [(name, orjson.loads(text)) for _, name, text in rows]
    items = [(name, item) for name, item in items if not is_summary(item)]
    for tag, name in WRITERS.items():
        prompts = [item["content"] for n, item in items if n == name and item.get("role") == "user"
                   and item["content"].startswith(f"{tag} ")]
        assert prompts == [f"{tag} prompt {n}" for n in range(TURNS)]
    counts = {name: sum(1 for n, _ in items if n == name) for name in set(WRITERS.values())}
    assert counts == {"shared": 2 * TURNS * ROWS_PER_TURN, "solo": TURNS * ROWS_PER_TURN}

    # -- the AgentUse tree: one session for the shared conversation, both processes in it ------
    links = {name: directory for _, name, directory in read_links(
        SkilletPaths.resolve().store_file)}
    assert set(links) == {"shared", "solo"}
    scan = scan_sessions(agentuse_sessions_root())
    assert scan.problems == []
    assert sorted(s.directory for s in scan.sessions if s.parent_id is None) == sorted(
        links.values())
    for name, tags in (("shared", "AB"), ("solo", "C")):
        session = load_session(links[name])
        assert session.info["status"] == "completed"
        tasks = sorted(m.info["user"]["prompt"]["task"] for m in session.messages)
        assert tasks == sorted(f"{tag} prompt {n}" for tag in tags for n in range(TURNS))
        assert all("completed" in m.info["time"] for m in session.messages)
        assert session.directory.name.endswith(f"-agent-{name}")
        helpers = sorted(s.info["agent"]["name"] for s in session.subagents)
        assert helpers == sorted(f"Helper {tag}" for tag in tags for _ in range(TURNS))
        for message in session.messages:
            tag = message.info["user"]["prompt"]["task"].split()[0]
            texts = [p["text"] for p in message.parts if p["type"] == "text"]
            assert texts[-1].startswith(f"{tag} turn ")
            tools = [p for p in message.parts if p["type"] == "tool"]
            assert [t["state"]["status"] for t in tools] == ["completed", "completed"]

