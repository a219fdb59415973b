"""Reading skillet JSONL replay logs: whole files, turns, bad lines, and following live files."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessiontape.storage.skillet import log_entries as le
from sessiontape.storage.skillet.log_reader import (
    INCOMPLETE_TURN,
    LogEntry,
    SessionLogReader,
    SessionLogTailer,
)
from sessiontape.storage.skillet.replay_log import ReplayLog

TS = "2026-11-22T10:09:32.893Z"
MODEL = "openai/gpt-4.1-nano"


def fixture_log(skillet_state: Path, name: str) -> Path:
    return skillet_state / ".agent_session_logs" / "john_example_com" / name


def line(entry: dict[str, Any]) -> bytes:
    return orjson.dumps(entry) + b"\n"


def text_line(chunk: str) -> bytes:
    return line(le.step(le.text(chunk), TS))


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def texts(entries: list[LogEntry]) -> list[str]:
    return [e.data["stepResult"]["text"] for e in entries]


def read_with_reader(path: Path) -> tuple[list[LogEntry], list[Any]]:
    reader = SessionLogReader(path)
    return reader.entries(), reader.problems


def read_with_tailer(path: Path) -> tuple[list[LogEntry], list[Any]]:
    tailer = SessionLogTailer(path)
    entries = tailer.poll()
    tailer.close()
    return entries, tailer.problems


READERS = pytest.mark.parametrize("read", [read_with_reader, read_with_tailer],
                                  ids=["reader", "tailer"])


# --------------------------------------------------------------------------- the real fixtures

def test_fixture_session_1(skillet_fixture: Path) -> None:
    reader = SessionLogReader(fixture_log(skillet_fixture, "fixture_session_1.jsonl"))
    turns = reader.turns()
    assert reader.problems == []
    assert [t.user_input for t in turns] == [
        "How many lines are in the fixture data file?",
        "FIXTURE_DIRECT just say hello",
        "FIXTURE_BLOCKED read the hostname file",
    ]
    assert [t.text for t in turns] == [
        "The fixture data file has 3 lines.",
        "Hello! This answer came straight from the orchestrator, no skill needed.",
        "The skill could not read that file: the command was rejected by the sandbox.",
    ]
    assert all(t.complete and t.model == MODEL for t in turns)
    assert [s["type"] for s in turns[0].steps] == [
        "agent_start", "handoff", "agent_start", "agent_tool_start", "agent_tool_end",
        "handoff", "agent_start", "agent_end", "text",
    ]
    assert [s["type"] for s in turns[1].steps] == ["agent_start", "agent_end", "text"]
    assert turns[0].steps[1] == {"type": "handoff", "agentName": "fixture_agent",
                                 "toAgentName": "count-files"}
    tool_start, tool_end = turns[2].steps[3:5]
    assert orjson.loads(tool_start["toolArgumentsStr"])["commandLine"] == "cat /etc/hostname"
    assert orjson.loads(tool_end["result"])["exitCode"] is None
    assert (turns[0].started, turns[0].ended) == ("2026-11-22T10:09:32.893Z",
                                                  "2026-11-22T10:09:33.061Z")
    assert [e.line for e in reader.entries()] == list(range(1, 28))


def test_fixture_session_stream_is_one_incomplete_turn(skillet_fixture: Path) -> None:
    turns = SessionLogReader(fixture_log(skillet_fixture, "fixture_session_stream.jsonl")).turns()
    assert len(turns) == 1
    turn = turns[0]
    assert turn.user_input == "Stream: how many lines are in the fixture data file?"
    assert turn.steps == [{"type": "agent_start", "agentName": "fixture_agent"}]
    assert (turn.complete, turn.text, turn.model, turn.ended) == (False, INCOMPLETE_TURN, None, "")


# --------------------------------------------------------------------------- turns

@pytest.mark.parametrize("followed_by_turn", [False, True], ids=["at-end", "mid-file"])
def test_unfinished_turn_joins_its_text_chunks(tmp_path: Path, followed_by_turn: bool) -> None:
    path = tmp_path / "log.jsonl"
    data = (line(le.user_message("q", TS)) + text_line("Hel") + line(le.step(le.agent_end("a"), TS))
            + text_line("lo ") + text_line("wörld"))
    if followed_by_turn:
        data += line(le.user_message("next", TS)) + line(le.final_result("done", timestamp=TS))
    path.write_bytes(data)
    turns = SessionLogReader(path).turns()
    assert (turns[0].complete, turns[0].text, turns[0].user_input) == (False, "Hello wörld", "q")
    assert len(turns[0].steps) == 4
    assert [(t.user_input, t.text, t.complete) for t in turns[1:]] == (
        [("next", "done", True)] if followed_by_turn else [])


def test_file_starting_mid_turn(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("tail of a turn") + line(le.final_result("tail", timestamp=TS))
                     + line(le.user_message("q", TS)) + line(le.final_result("a", timestamp=TS)))
    turns = SessionLogReader(path).turns()
    assert [(t.user_input, t.text, t.complete, len(t.steps)) for t in turns] == [
        (None, "tail", True, 1), ("q", "a", True, 0)]


def test_round_trip_through_replay_log(tmp_path: Path) -> None:
    written = [
        le.user_message([{"role": "user", "content": "héllo"}], TS),
        le.step(le.agent_start("a"), TS),
        le.step(le.handoff("a", "b"), TS),
        le.step(le.agent_tool_start("b", "t", '{"x":[1,2]}'), TS),
        le.step(le.agent_tool_end("b", "t", '"ok"'), TS),
        le.step(le.text("日本"), TS),
        le.final_result("日本", model=MODEL, job_ids=["j1"], timestamp=TS),
        le.user_message("second", TS),
        le.final_result("plain", timestamp=TS),
    ]
    with ReplayLog("john@example.com", "round trip", tmp_path) as log:
        for entry in written:
            log.append(entry)
    reader = SessionLogReader(log.path)
    assert [e.data for e in reader.entries()] == written
    turns = reader.turns()
    assert [(t.user_input, t.text, t.model, t.complete) for t in turns] == [
        ([{"role": "user", "content": "héllo"}], "日本", MODEL, True),
        ("second", "plain", None, True)]
    assert turns[0].steps == [e["stepResult"] for e in written[1:6]]
    assert turns[0].final == {"text": "日本", "jobIds": ["j1"]}


# --------------------------------------------------------------------------- bad lines

BAD_LINES = [
    pytest.param(b"garbage", id="garbage"),
    pytest.param(b'{"kind":"step","stepResult":{"type":"te', id="half-object"),
    pytest.param(b'[{"kind":"step"}]', id="array"),
    pytest.param(b'{"stepResult":{"type":"text","text":"x"}}', id="no-kind"),
    pytest.param(b'{"kind":5}', id="kind-not-string"),
    pytest.param(b'{"kind":"step","stepResult":{"type":"text","text":"\xff\xfe"}}',
                 id="invalid-utf8"),
]


@READERS
@pytest.mark.parametrize("bad", BAD_LINES)
def test_bad_line_is_skipped_and_reported(tmp_path: Path, read: Callable, bad: bytes) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("one") + text_line("two") + bad + b"\n" + text_line("four"))
    entries, problems = read(path)
    assert texts(entries) == ["one", "two", "four"]
    assert [e.line for e in entries] == [1, 2, 4]
    assert [(p.path, p.line) for p in problems] == [(path, 3)]
    assert str(problems[0]).startswith(f"{path}:3: ")


@READERS
def test_bom_crlf_blank_lines_and_numbering(tmp_path: Path, read: Callable) -> None:
    path = tmp_path / "log.jsonl"
    crlf = [text_line(t).replace(b"\n", b"\r\n") for t in ("a", "b", "c")]
    path.write_bytes(b"\xef\xbb\xbf" + crlf[0] + b"\r\n\n   \n" + crlf[1] + b"garbage\r\n"
                     + b'{"kind":"x"\n' + crlf[2])
    entries, problems = read(path)
    assert texts(entries) == ["a", "b", "c"]
    assert [e.line for e in entries] == [1, 5, 8]
    assert [p.line for p in problems] == [6, 7]


def test_bom_only_at_file_start(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("a") + b"\xef\xbb\xbf" + text_line("b"))
    reader = SessionLogReader(path)
    assert texts(reader.entries()) == ["a"]
    assert [p.line for p in reader.problems] == [2]


# --------------------------------------------------------------------------- the tailer

def test_tailer_waits_for_the_file(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "log.jsonl"
    tailer = SessionLogTailer(path)
    assert tailer.poll() == [] and tailer.poll() == []
    path.parent.mkdir(parents=True)
    path.write_bytes(text_line("a") + text_line("b"))
    assert texts(tailer.poll()) == ["a", "b"]
    assert tailer.poll() == []
    tailer.close()


def test_tailer_holds_a_partial_line_and_reads_appends(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("a"))
    tailer = SessionLogTailer(path)
    assert texts(tailer.poll()) == ["a"]
    whole = text_line("b")
    append(path, whole[:10])
    assert tailer.poll() == []
    append(path, whole[10:-1])
    assert tailer.poll() == []
    append(path, b"\n" + text_line("c"))
    entries = tailer.poll()
    assert texts(entries) == ["b", "c"] and [e.line for e in entries] == [2, 3]
    append(path, text_line("d"))
    assert texts(tailer.poll()) == ["d"]
    assert tailer.problems == []
    tailer.close()


def test_tailer_starts_over_after_truncation(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("old one") + text_line("old two"))
    tailer = SessionLogTailer(path)
    assert len(tailer.poll()) == 2
    os.truncate(path, 0)
    assert tailer.poll() == []
    append(path, text_line("new"))
    entries = tailer.poll()
    assert texts(entries) == ["new"] and entries[0].line == 1
    tailer.close()


def test_tailer_truncated_and_rewritten_between_polls(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("old one") + text_line("old two"))
    tailer = SessionLogTailer(path)
    assert len(tailer.poll()) == 2
    with open(path, "r+b") as f:  # same inode, shorter content
        f.truncate(0)
        f.write(text_line("n1"))
    entries = tailer.poll()
    assert texts(entries) == ["n1"] and entries[0].line == 1
    tailer.close()


OLD_TAILS = [
    pytest.param(text_line("old tail"), ["old tail"], [], id="whole-line"),
    pytest.param(text_line("old tail")[:-1], ["old tail"], [], id="no-newline"),
    pytest.param(b'{"kind":"st', [], [2], id="torn"),
]


@pytest.mark.parametrize(("tail", "expected_old", "problem_lines"), OLD_TAILS)
def test_tailer_switches_to_a_replacing_file(tmp_path: Path, tail: bytes,
                                             expected_old: list[str],
                                             problem_lines: list[int]) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("old head"))
    tailer = SessionLogTailer(path)
    assert texts(tailer.poll()) == ["old head"]
    append(path, tail)  # written to the old file before it was rotated away
    fresh = tmp_path / "fresh.tmp"
    fresh.write_bytes(text_line("new 1") + text_line("new 2"))
    os.replace(fresh, path)
    entries = tailer.poll()
    assert texts(entries) == [*expected_old, "new 1", "new 2"]
    assert [e.line for e in entries] == [2] * len(expected_old) + [1, 2]
    assert [p.line for p in tailer.problems] == problem_lines
    append(path, text_line("new 3"))
    assert texts(tailer.poll()) == ["new 3"]
    tailer.close()


def test_tailer_after_deletion_and_recreation(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("old"))
    tailer = SessionLogTailer(path)
    assert texts(tailer.poll()) == ["old"]
    path.unlink()
    assert tailer.poll() == []
    path.write_bytes(text_line("reborn 1") + text_line("reborn 2"))
    entries = tailer.poll()
    assert texts(entries) == ["reborn 1", "reborn 2"] and [e.line for e in entries] == [1, 2]
    tailer.close()


FROM_END = [
    pytest.param(text_line("e1") + text_line("e2"), text_line("n3"), ["n3"], [3], id="skips"),
    pytest.param(text_line("e1") + text_line("e2")[:7], text_line("e2")[7:] + text_line("n3"),
                 ["e2", "n3"], [2, 3], id="line-in-progress"),
    pytest.param(b"", text_line("n1"), ["n1"], [1], id="empty"),
    pytest.param(None, text_line("n1") + text_line("n2"), ["n1", "n2"], [1, 2], id="no-file-yet"),
]


@pytest.mark.parametrize(("existing", "appended", "expected", "lines"), FROM_END)
def test_tailer_from_end(tmp_path: Path, existing: bytes | None, appended: bytes,
                         expected: list[str], lines: list[int]) -> None:
    path = tmp_path / "log.jsonl"
    if existing is not None:
        path.write_bytes(existing)
    tailer = SessionLogTailer(path, from_end=True)
    assert tailer.poll() == []
    append(path, appended)
    entries = tailer.poll()
    assert texts(entries) == expected and [e.line for e in entries] == lines
    append(path, b"garbage\n")
    assert tailer.poll() == []
    assert [p.line for p in tailer.problems] == [lines[-1] + 1]
    tailer.close()


def test_follow_yields_appended_entries(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("before"))
    tailer = SessionLogTailer(path, from_end=True)
    got: list[LogEntry] = []
    deadline = time.monotonic() + 10

    def writer() -> None:
        for i in range(3):
            time.sleep(0.02)
            append(path, text_line(f"live {i}"))

    thread = threading.Thread(target=writer)
    thread.start()
    for entry in tailer.follow(interval=0.005,
                               stop=lambda: len(got) >= 3 or time.monotonic() > deadline):
        got.append(entry)
    thread.join()
    tailer.close()
    assert texts(got) == ["live 0", "live 1", "live 2"]


def test_follow_stops_before_polling_when_told(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(text_line("a"))
    tailer = SessionLogTailer(path)
    assert list(tailer.follow(interval=0.001, stop=lambda: True)) == []
    assert texts(tailer.poll()) == ["a"]
    tailer.close()


def test_compaction_lines_read_as_steps_of_their_turn(tmp_path: Path) -> None:
    """A compaction is a line of its own kind (skilled_crew's replay stops at a step type it
    does not know); sessiontape 0.2.0's compaction steps still read the same."""
    fields = {"compactionId": "c1", "reason": "threshold", "summarizer": "local",
              "itemsBefore": 52, "itemsAfter": 9, "archived": 43}
    path = tmp_path / "s.jsonl"
    append(path, line(le.user_message("one", TS)) + line(le.compaction(fields, TS))
           + line(le.final_result("a", model=MODEL, timestamp=TS))
           + line(le.user_message("two", TS)) + line(le.step({"type": "compaction", **fields}, TS))
           + line(le.final_result("b", model=MODEL, timestamp=TS)))
    written = [orjson.loads(text) for text in path.read_bytes().splitlines()]
    assert written[1] == {"kind": "compaction", **fields, "timestamp": TS}
    reader = SessionLogReader(path)
    turns = reader.turns()
    assert reader.problems == []
    assert [turn.steps for turn in turns] == [[{"type": "compaction", **fields}]] * 2
    assert [turn.text for turn in turns] == ["a", "b"]
