"""Long session names: one conversation, one log, whoever wrote it (issue 23, item 9).

skilled_crew 1.0.11 puts a conversation's replay log at
``{logs}/{sanitizeForPath(user)}/{sanitizeForPath(session)}.jsonl``
(``SessionLogWriter.filePathFor``, packages/_skillet_agent/src/session/session_log_writer.ts),
where ``sanitizeForPath`` trims, turns every run outside ``[a-zA-Z0-9_-]`` into ``_`` and
strips leading and trailing ``_`` (``SessionLogTypes``, session_log_types.ts), and never cuts
the name: its ``appendFile`` fails with ``ENAMETOOLONG`` past the file system's 255 bytes.
sessiontape 0.2-0.3 cut names over 120 characters, so skilled_crew started a second log of
the same conversation. Here the Recorder and skilled_crew share one file, a log 0.3 wrote
under its cut name is continued, and ``sessions list`` shows one conversation each time.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from harness import run_cli
from scripted import final, model, run_agent

from sessiontape import Recorder
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.items import content_text
from sessiontape.storage.skillet.log_owners import log_owner, owner_record_path
from sessiontape.storage.skillet.log_reader import SessionLogReader

JOHN = "john@example.com"
# 200 characters; sanitized, 192: over sessiontape 0.3's 120, within skilled_crew's 249.
LONG = ("Plan: a slow week along the Douro valley, Porto to Pinhao by train, "
        "with tastings, walks & a boat day / budget ") + "x" * 89
STAMP = "2026-11-22T10:09:43.093Z"


def crew_log_path(user: str, session: str) -> Path:
    """Where skilled_crew 1.0.11 writes the pair's log (the rule in the module doc)."""
    def slug(name: str) -> str:
        return re.sub(r"[^a-zA-Z0-9_-]+", "_", name.strip()).strip("_")

    return SkilletPaths.resolve().logs_root / slug(user) / f"{slug(session)}.jsonl"


def old_cut(name: str) -> str:
    """sessiontape 0.2-0.3's name for a log name over 120 characters (its names.py)."""
    slug = re.sub(r"[^a-zA-Z0-9_-]+", "_", name.strip()).strip("_")
    return f"{slug[:120]}_{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def write_crew_turn(user: str, session: str, prompt: str, answer: str) -> Path:
    """One turn as skilled_crew writes it: its two ``session_items`` rows (the JS SDK's
    protocol items, one ``created_at``) and its log lines (``JSON.stringify``, no owner
    record), as in skilled_crew's own files (tests/fixtures/skilled_crew-v1.0.11)."""
    paths = SkilletPaths.resolve()
    paths.store_file.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"type": "message", "role": "user", "content": prompt},
            {"id": "msg_crew_1", "type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": answer,
                          "providerData": {"annotations": []}}],
             "status": "completed", "providerData": {}}]
    with contextlib.closing(sqlite3.connect(paths.store_file)) as conn, conn:
        conn.execute("CREATE TABLE session_items (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                     "user_id TEXT NOT NULL, session_name TEXT NOT NULL, "
                     "created_at INTEGER NOT NULL, item_json TEXT NOT NULL)")
        conn.executemany("INSERT INTO session_items (user_id, session_name, created_at, "
                         "item_json) VALUES (?, ?, 1795342183162, ?)",
                         [(user, session, json.dumps(row, separators=(",", ":")))
                          for row in rows])
    path = crew_log_path(user, session)
    path.parent.mkdir(parents=True)
    lines = [{"kind": "user_message", "userInput": prompt, "timestamp": STAMP},
             {"kind": "step", "stepResult": {"type": "agent_start", "agentName": "crew"},
              "timestamp": STAMP},
             {"kind": "step", "stepResult": {"type": "agent_end", "agentName": "crew"},
              "timestamp": STAMP},
             {"kind": "step", "stepResult": {"type": "text", "text": answer},
              "timestamp": STAMP},
             {"kind": "final_result", "finalResult": {"text": answer}, "timestamp": STAMP,
              "model": "openai/gpt-4.1-nano"}]
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path


def record_turn(user: str, session: str, prompt: str, answer: str) -> tuple[Path, Any]:
    """One recorded turn; the recorder's log path and what the model was given."""
    async def main() -> tuple[Path, Any]:
        async with Recorder(user, session) as rec:
            scripted = model(final(answer))
            assert await run_agent(rec, Agent(name="Planner", model=scripted), prompt,
                                   streamed=False) == answer
        assert rec.errors == 0
        return rec.log_path, scripted.calls[0].input

    return asyncio.run(main())


def listed() -> list[dict[str, Any]]:
    done = run_cli("sessions", "list", "--json")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def prompts(path: Path) -> list[Any]:
    reader = SessionLogReader(path)
    turns = reader.turns()
    assert reader.problems == [] and all(turn.complete for turn in turns)
    return [turn.user_input for turn in turns]


def test_a_long_name_is_skilled_crews_file_and_its_log_is_continued() -> None:
    """skilled_crew's turn, then the Recorder's: the Recorder writes into skilled_crew's
    file (not a cut name beside it), its model is given skilled_crew's turn, and the
    conversation is listed once, with both turns."""
    crew = write_crew_turn(JOHN, LONG, "Where do we start?", "In Porto.")
    assert len(crew.name) == 198  # 192 + ".jsonl": more than 0.3's cut, a legal name
    log, sent = record_turn(JOHN, LONG, "And then?", "The train to Pinhao.")
    assert log == crew
    assert [content_text(item["content"]) for item in sent] == \
        ["Where do we start?", "In Porto.", "And then?"]
    assert prompts(crew) == ["Where do we start?", "And then?"]
    assert sorted(p.name for p in crew.parent.iterdir()) == \
        sorted([crew.name, owner_record_path(crew).name])
    [conversation] = listed()
    assert (conversation["user_id"], conversation["session_name"]) == (JOHN, LONG)
    assert (conversation["turns"], conversation["items"]) == (2, 4)


@pytest.mark.parametrize("name", [LONG, "Porto-" + "x" * 243], ids=["200", "255-bytes"])
def test_a_long_name_the_recorder_begins_is_where_skilled_crew_looks(name: str) -> None:
    """A conversation the Recorder begins under a long name is in the file skilled_crew
    computes for it (up to a file name of 255 bytes, whose owner record gets a shorter
    name): skilled_crew continues it there, not in a log of its own."""
    log, _ = record_turn(JOHN, name, "Where do we start?", "In Porto.")
    assert log == crew_log_path(JOHN, name) and len(log.name) <= 255
    assert prompts(log) == ["Where do we start?"]
    [conversation] = listed()
    assert (conversation["session_name"], conversation["turns"]) == (name, 1)
    assert log_owner(log) == {"user_id": JOHN, "session_name": name}


def test_a_log_sessiontape_0_3_cut_is_continued_and_listed_once() -> None:
    """A conversation sessiontape 0.3 recorded under its cut name (its log and owner record
    moved there, as 0.3 named them) goes on in that file: no second log is begun."""
    first, _ = record_turn(JOHN, LONG, "Where do we start?", "In Porto.")
    old = first.with_name(f"{old_cut(LONG)}.jsonl")
    owner_record_path(first).rename(owner_record_path(old))
    first.rename(old)
    log, sent = record_turn(JOHN, LONG, "And then?", "The train to Pinhao.")
    assert log == old and not first.exists()
    assert [content_text(item["content"]) for item in sent][:2] == \
        ["Where do we start?", "In Porto."]
    assert prompts(old) == ["Where do we start?", "And then?"]
    [conversation] = listed()
    assert (conversation["session_name"], conversation["turns"]) == (LONG, 2)


def test_a_name_too_long_for_skilled_crew_is_cut_and_continued() -> None:
    """300 characters: skilled_crew cannot write ``{name}.jsonl`` at all (ENAMETOOLONG); we
    cut the name and hash it, and the next run continues the same file."""
    name = "Porto " * 50
    target = crew_log_path(JOHN, name)
    target.parent.mkdir(parents=True)
    try:
        os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
        raise AssertionError("the file system took a name of more than 255 bytes")
    except OSError as exc:
        assert exc.errno == errno.ENAMETOOLONG
    first, _ = record_turn(JOHN, name, "Where do we start?", "In Porto.")
    log, _ = record_turn(JOHN, name, "And then?", "The train to Pinhao.")
    assert first == log == target.with_name(f"{old_cut(name)}.jsonl")
    assert prompts(log) == ["Where do we start?", "And then?"]
    [conversation] = listed()
    assert (conversation["session_name"], conversation["turns"]) == (name, 2)
