"""Writing the skillet JSONL replay log: bytes, paths, name collisions, crashes, concurrency."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
import shutil
import stat
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessiontape.storage import times
from sessiontape.storage.skillet import log_entries as le
from sessiontape.storage.skillet import replay_log
from sessiontape.storage.skillet.log_owners import (
    find_log_path,
    log_owner,
    owned_log_path,
    owner_record_path,
)
from sessiontape.storage.skillet.log_reader import SessionLogReader
from sessiontape.storage.skillet.replay_log import ReplayLog, log_path_for

TS = "2026-05-27T20:11:02.482Z"
USER = "john@example.com"
LOGS_SUBDIR = Path("state") / ".agent_session_logs"
FIXTURE_FILES = ["fixture_session_1.jsonl", "fixture_session_stream.jsonl"]


def fixture_logs(skillet_state: Path) -> Path:
    return skillet_state / ".agent_session_logs" / "john_example_com"


def file_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def text_step(chunk: str) -> dict[str, Any]:
    return le.step(le.text(chunk), TS)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --------------------------------------------------------------------------- golden bytes

GOLDEN = [
    pytest.param(
        le.user_message("Héllo — 日本語 \"quoted\"\nnext", TS),
        '{"kind":"user_message","userInput":"Héllo — 日本語 \\"quoted\\"\\nnext",'
        '"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="user_message-string",
    ),
    pytest.param(
        le.user_message([{"role": "user", "content": [{"type": "input_text", "text": "hi ü"}]},
                         {"type": "function_call_output", "call_id": "c1", "output": "3"}], TS),
        '{"kind":"user_message","userInput":[{"role":"user","content":[{"type":"input_text",'
        '"text":"hi ü"}]},{"type":"function_call_output","call_id":"c1","output":"3"}],'
        '"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="user_message-items",
    ),
    pytest.param(
        le.step(le.agent_start("fixture_agent"), TS),
        '{"kind":"step","stepResult":{"type":"agent_start","agentName":"fixture_agent"},'
        '"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="agent_start",
    ),
    pytest.param(
        le.step(le.agent_end("fixture_agent"), TS),
        '{"kind":"step","stepResult":{"type":"agent_end","agentName":"fixture_agent"},'
        '"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="agent_end",
    ),
    pytest.param(
        le.step(le.agent_tool_start("count-files", "run_command_line",
                                    '{"reason":"count","commandLine":"sh ./count.sh"}'), TS),
        '{"kind":"step","stepResult":{"type":"agent_tool_start","agentName":"count-files",'
        '"toolName":"run_command_line",'
        '"toolArgumentsStr":"{\\"reason\\":\\"count\\",\\"commandLine\\":\\"sh ./count.sh\\"}"},'
        '"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="agent_tool_start",
    ),
    pytest.param(
        le.step(le.agent_tool_end("count-files", "run_command_line",
                                  '{"exitCode":0,"stdout":"3 é\\n"}'), TS),
        '{"kind":"step","stepResult":{"type":"agent_tool_end","agentName":"count-files",'
        '"toolName":"run_command_line","result":"{\\"exitCode\\":0,\\"stdout\\":\\"3 é\\\\n\\"}"},'
        '"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="agent_tool_end",
    ),
    pytest.param(
        le.step(le.handoff("fixture_agent", "count-files"), TS),
        '{"kind":"step","stepResult":{"type":"handoff","agentName":"fixture_agent",'
        '"toAgentName":"count-files"},"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="handoff",
    ),
    pytest.param(
        le.step(le.text("Grüße\t😀"), TS),
        '{"kind":"step","stepResult":{"type":"text","text":"Grüße\\t😀"},'
        '"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="text",
    ),
    pytest.param(
        le.final_result("Done ✓", model="openai/gpt-4.1-nano", timestamp=TS),
        '{"kind":"final_result","finalResult":{"text":"Done ✓"},'
        '"timestamp":"2026-05-27T20:11:02.482Z","model":"openai/gpt-4.1-nano"}\n',
        id="final_result-model",
    ),
    pytest.param(
        le.final_result("Done", timestamp=TS),
        '{"kind":"final_result","finalResult":{"text":"Done"},'
        '"timestamp":"2026-05-27T20:11:02.482Z"}\n',
        id="final_result-no-model",
    ),
    pytest.param(
        le.final_result("Queued", model="openai/gpt-4.1-nano", job_ids=["job-1", "job-2"],
                        timestamp=TS),
        '{"kind":"final_result","finalResult":{"text":"Queued","jobIds":["job-1","job-2"]},'
        '"timestamp":"2026-05-27T20:11:02.482Z","model":"openai/gpt-4.1-nano"}\n',
        id="final_result-jobIds",
    ),
]


@pytest.mark.parametrize(("entry", "expected"), GOLDEN)
def test_line_bytes(tmp_path: Path, entry: dict[str, Any], expected: str) -> None:
    with ReplayLog(USER, "golden", tmp_path / "logs") as log:
        log.append(entry)
    assert log.path.read_bytes() == expected.encode("utf-8")


STEP_ARGS = {
    "agent_start": (le.agent_start, ("agentName",)),
    "agent_end": (le.agent_end, ("agentName",)),
    "agent_tool_start": (le.agent_tool_start, ("agentName", "toolName", "toolArgumentsStr")),
    "agent_tool_end": (le.agent_tool_end, ("agentName", "toolName", "result")),
    "handoff": (le.handoff, ("agentName", "toAgentName")),
    "text": (le.text, ("text",)),
}


def rebuild(data: dict[str, Any]) -> dict[str, Any]:
    """The entry the builders make from the values of a parsed line."""
    if data["kind"] == "user_message":
        return le.user_message(data["userInput"], data["timestamp"])
    if data["kind"] == "final_result":
        final = data["finalResult"]
        return le.final_result(final["text"], model=data.get("model"),
                               job_ids=final.get("jobIds"), timestamp=data["timestamp"])
    result = data["stepResult"]
    builder, keys = STEP_ARGS[result["type"]]
    return le.step(builder(*(result[k] for k in keys)), data["timestamp"])


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_rebuilt_fixture_is_byte_identical(tmp_path: Path, skillet_fixture: Path,
                                           name: str) -> None:
    original = file_lines(fixture_logs(skillet_fixture) / name)
    with ReplayLog(USER, "rebuilt", tmp_path / "logs") as log:
        for raw in original:
            log.append(rebuild(orjson.loads(raw)))
    assert file_lines(log.path) == original


# --------------------------------------------------------------------------- iso_ms

UTC = timezone.utc


@pytest.mark.parametrize(("moment", "expected"), [
    (datetime(2026, 5, 27, 20, 11, 2, 482000, tzinfo=UTC), "2026-05-27T20:11:02.482Z"),
    (datetime(2026, 5, 27, 20, 11, 2, 5000, tzinfo=UTC), "2026-05-27T20:11:02.005Z"),
    (datetime(2026, 5, 27, 20, 11, 2, 0, tzinfo=UTC), "2026-05-27T20:11:02.000Z"),
    (datetime(2026, 5, 27, 20, 11, 2, 999999, tzinfo=UTC), "2026-05-27T20:11:02.999Z"),
    (datetime(2026, 1, 1, 1, 30, 0, 70000, tzinfo=timezone(timedelta(hours=5))),
     "2025-12-31T20:30:00.070Z"),
    (datetime(2026, 5, 27, 16, 11, 2, 482000, tzinfo=timezone(timedelta(hours=-4))),
     "2026-05-27T20:11:02.482Z"),
    (datetime(999, 3, 4, 5, 6, 7, 8000, tzinfo=UTC), "0999-03-04T05:06:07.008Z"),
], ids=["plain", "pad-2", "zero", "truncated", "east-prev-day", "west", "year-pad"])
def test_iso_ms(moment: datetime, expected: str) -> None:
    assert times.iso_ms(moment) == expected


def test_iso_ms_now_and_default_timestamps() -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    stamps = [times.iso_ms(), le.user_message("x")["timestamp"],
              le.step(le.text("x"))["timestamp"], le.final_result("x")["timestamp"]]
    after = datetime.now(UTC) + timedelta(seconds=1)
    for stamp in stamps:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp), stamp
        assert before <= datetime.fromisoformat(stamp.replace("Z", "+00:00")) <= after


# --------------------------------------------------------------------------- paths

def test_default_path_is_under_skillet_home(isolated_env: Path) -> None:
    log = ReplayLog(USER, "fixture_session_1")
    expected = (isolated_env / "skillet" / LOGS_SUBDIR / "john_example_com"
                / "fixture_session_1.jsonl")
    assert log.path == expected
    assert not expected.exists()  # the log itself is created by the first append
    log.append(text_step("x"))
    log.close()
    assert file_lines(expected) == [orjson.dumps(text_step("x")) + b"\n"]


@pytest.mark.parametrize(("user", "session", "relative"), [
    ("john@example.com", "s", "john_example_com/s.jsonl"),
    ("  Ann Lee  ", "my session: #1!", "Ann_Lee/my_session_1.jsonl"),
    ("__x__", "--a..b--", "x/--a_b--.jsonl"),
    ("ü@ä", "session_2026-11-22T10-09-32Z_ab12", None),
], ids=["email", "spaces-punct", "strip-underscores", "all-unsafe"])
def test_path_sanitization(tmp_path: Path, user: str, session: str, relative: str | None) -> None:
    path = log_path_for(user, session, tmp_path)
    if relative is None:  # nothing safe left: a hashed, never empty, name
        assert re.fullmatch(r"_[0-9a-f]{12}", path.parent.name)
        assert path.name == f"{session}.jsonl"
    else:
        assert path.relative_to(tmp_path).as_posix() == relative
    assert path.parent.parent == tmp_path


@pytest.mark.parametrize("length", [230, 249])
def test_a_name_at_the_file_name_limit_is_used_uncut_and_its_twin_gets_a_name_that_fits(
        tmp_path: Path, length: int) -> None:
    """skilled_crew names a log ``{sanitizeForPath(session)}.jsonl`` uncut
    (SessionLogWriter.filePathFor, packages/_skillet_agent/src/session/session_log_writer.ts):
    up to 255 bytes, so is ours. Its owner record (made through a temporary file), whose
    plain name is too long beyond 243 characters, and the name of a second pair that
    sanitizes alike fit in the file system's limit too."""
    name = "a" * length
    path = log_path_for(USER, name, tmp_path)
    assert path == tmp_path / "john_example_com" / f"{name}.jsonl"
    owner = owner_record_path(path)
    assert owner.exists() and len(owner.name) <= 255 and owner.name.startswith(".")
    assert (owner.name == f".{name}.owner.json") == (length == 230)
    assert sorted(p.name for p in path.parent.iterdir()) == [owner.name]  # no temporary left
    assert log_owner(path) == {"user_id": USER, "session_name": name}
    twin = log_path_for(USER, name + "!", tmp_path)  # sanitizes to the same name
    assert twin.parent == path.parent and twin != path and len(twin.name) <= 255
    for session, expected in ((name, path), (name + "!", twin)):
        with ReplayLog(USER, session, tmp_path) as log:
            assert log.path == expected
            log.append(text_step(session))
        assert find_log_path(USER, session, tmp_path) == expected
        assert owned_log_path(USER, session, tmp_path) == expected
        assert [e.data for e in SessionLogReader(expected).entries()] == [text_step(session)]


def _old_cut(name: str) -> str:
    """The name sessiontape 0.2 and 0.3 gave a log name over 120 characters (their
    storage/names.py): its first 120, ``_`` and 12 hex of the raw name's SHA-256."""
    return f"{name[:120]}_{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def _pair_hash(user: str, session: str) -> str:
    """What a second pair whose names sanitize alike has added to its log's name."""
    return hashlib.sha256(f"{user}\0{session}".encode()).hexdigest()[:12]


LONG = "s" * 200


@pytest.mark.parametrize(("user", "session", "old_user", "old_stem"), [
    (USER, LONG, "john_example_com", _old_cut(LONG)),
    ("u" * 200, "trip", _old_cut("u" * 200), "trip"),
    ("john.example.com", LONG, "john_example_com",
     f"{_old_cut(LONG)}_{_pair_hash('john.example.com', LONG)}"),
], ids=["long-session", "long-user", "second-pair"])
def test_a_log_under_sessiontape_0_3s_cut_name_is_found_and_continued(
        tmp_path: Path, user: str, session: str, old_user: str, old_stem: str) -> None:
    """A log sessiontape 0.2-0.3 wrote for a name of 121-249 characters (cut and hashed,
    with its owner record; a second pair whose names sanitize alike had its pair's hash
    added) is still the pair's log: found by readers, continued by writers, no new file."""
    old = tmp_path / old_user / f"{old_stem}.jsonl"
    old.parent.mkdir()
    logs = {old}
    if user != USER and old_user == "john_example_com":  # the first pair took the plain name
        first = old.with_name(f"{_old_cut(LONG)}.jsonl")
        first.write_bytes(orjson.dumps(text_step("john's")) + b"\n")
        logs.add(first)
        owner_record_path(first).write_bytes(orjson.dumps({"user_id": USER,
                                                           "session_name": LONG}))
    old.write_bytes(orjson.dumps(text_step("before")) + b"\n")
    owner_record_path(old).write_bytes(orjson.dumps({"user_id": user, "session_name": session}))
    assert find_log_path(user, session, tmp_path) == old
    assert owned_log_path(user, session, tmp_path) == old
    with ReplayLog(user, session, tmp_path) as log:
        assert log.path == old
        log.append(text_step("after"))
    assert [e.data for e in SessionLogReader(old).entries()] == \
        [text_step("before"), text_step("after")]
    assert set(tmp_path.rglob("*.jsonl")) == logs


def test_private_modes(isolated_env: Path) -> None:
    old_umask = os.umask(0)  # modes must not depend on the caller's umask
    try:
        with ReplayLog(USER, "modes") as log:
            log.append(text_step("x"))
    finally:
        os.umask(old_umask)
    assert mode(log.path) == 0o600
    assert mode(log.path.with_name(".modes.owner.json")) == 0o600
    directory = log.path.parent
    while directory != isolated_env:
        assert mode(directory) == 0o700, directory
        directory = directory.parent


# --------------------------------------------------------------------------- name collisions

COLLIDING = [("john@example.com", "s"), ("john.example.com", "s"), ("john!example!com", "s")]


def test_colliding_names_get_separate_files(tmp_path: Path) -> None:
    logs = [ReplayLog(user, session, tmp_path) for user, session in COLLIDING]
    paths = [log.path for log in logs]
    assert len(set(paths)) == len(COLLIDING)
    assert {p.parent for p in paths} == {tmp_path / "john_example_com"}
    assert paths[0].name == "s.jsonl"
    assert all(re.fullmatch(r"s_[0-9a-f]{12}(_\d+)?\.jsonl", p.name) for p in paths[1:])
    for i in range(3):  # interleaved writes
        for log in logs:
            log.append(text_step(f"{log.user_id} {i}"))
    for log in logs:
        log.close()
        texts = [e.data["stepResult"]["text"] for e in SessionLogReader(log.path).entries()]
        assert texts == [f"{log.user_id} {i}" for i in range(3)]
    # a later open of the same raw pair finds the same file, whatever the order
    for user, session in reversed(COLLIDING):
        assert ReplayLog(user, session, tmp_path).path == paths[COLLIDING.index((user, session))]


def test_existing_log_without_owner_is_adopted(tmp_path: Path, skillet_fixture: Path) -> None:
    source = fixture_logs(skillet_fixture) / "fixture_session_1.jsonl"
    target = tmp_path / "john_example_com" / source.name
    target.parent.mkdir()
    shutil.copyfile(source, target)
    with ReplayLog(USER, "fixture_session_1", tmp_path) as log:
        assert log.path == target
        log.append(le.user_message("one more", TS))
        log.append(le.final_result("ok", timestamp=TS))
    assert target.read_bytes().startswith(source.read_bytes())
    turns = SessionLogReader(target).turns()
    assert len(turns) == 4 and turns[-1].user_input == "one more" and turns[-1].text == "ok"
    other = ReplayLog("john.example.com", "fixture_session_1", tmp_path)
    assert other.path != target


# --------------------------------------------------------------------------- crashes and rotation

TORN = [
    pytest.param(b'{"kind":"step","stepResult":{"type":"te', 1, id="half-line"),
    pytest.param(orjson.dumps(text_step("whole")), 0, id="whole-line-no-newline"),
]


@pytest.mark.parametrize(("torn", "problems"), TORN)
@pytest.mark.parametrize("open_before", [True, False], ids=["log-open", "log-new"])
def test_torn_last_line_is_closed(tmp_path: Path, torn: bytes, problems: int,
                                  open_before: bool) -> None:
    log = ReplayLog(USER, "torn", tmp_path)
    if open_before:
        log.append(le.user_message("first", TS))
    else:
        log.path.write_bytes(orjson.dumps(le.user_message("first", TS)) + b"\n")
    with open(log.path, "ab") as killed_writer:
        killed_writer.write(torn)
    final = le.final_result("after the crash", timestamp=TS)
    log.append(final)
    log.close()
    reader = SessionLogReader(log.path)
    entries = reader.entries()
    assert [p.line for p in reader.problems] == [2] * problems
    assert entries[0].data == le.user_message("first", TS)
    assert entries[-1].data == final and entries[-1].line == 3
    assert len(entries) == 3 - problems
    assert log.path.read_bytes().endswith(b"\n" + orjson.dumps(final) + b"\n")


def _replace(path: Path) -> None:
    fresh = path.with_name("fresh.tmp")
    fresh.write_bytes(orjson.dumps(text_step("new file")) + b"\n")
    os.replace(fresh, path)


@pytest.mark.parametrize("rotate", [_replace, Path.unlink], ids=["replaced", "deleted"])
def test_append_follows_the_file_at_the_path(tmp_path: Path, rotate: Any) -> None:
    log = ReplayLog(USER, "rotate", tmp_path)
    log.append(text_step("old"))
    old = log.path.with_name("old.keep")
    os.link(log.path, old)  # keeps the old inode reachable
    rotate(log.path)
    log.append(text_step("after"))
    log.close()
    assert file_lines(old) == [orjson.dumps(text_step("old")) + b"\n"]
    texts = [e.data["stepResult"]["text"] for e in SessionLogReader(log.path).entries()]
    assert texts == (["new file"] if rotate is _replace else []) + ["after"]


# --------------------------------------------------------------------------- concurrency

N = 500
PAD = "x" * 300  # long lines make torn or interleaved writes likelier


def _append_many(root: str, tag: str, count: int, barrier: Any) -> None:
    barrier.wait()
    with ReplayLog(USER, "shared", Path(root)) as log:  # claims race as well
        for i in range(count):
            log.append(text_step(f"{tag} {i} {PAD}"))


def assert_lines_whole_and_ordered(path: Path, tags: list[str], count: int) -> None:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == len(tags) * count
    seen: dict[str, list[int]] = {tag: [] for tag in tags}
    for line in lines:
        tag, index, pad = orjson.loads(line)["stepResult"]["text"].split(" ")
        assert pad == PAD
        seen[tag].append(int(index))
    assert seen == {tag: list(range(count)) for tag in tags}


def test_two_processes_append_concurrently(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    workers = [ctx.Process(target=_append_many, args=(str(tmp_path), tag, N, barrier))
               for tag in ("A", "B")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    path = log_path_for(USER, "shared", tmp_path)
    assert sorted(p.name for p in path.parent.glob("*.jsonl")) == ["shared.jsonl"]
    assert_lines_whole_and_ordered(path, ["A", "B"], N)


def test_threads_share_one_log(tmp_path: Path) -> None:
    tags = ["t0", "t1", "t2", "t3"]
    log = ReplayLog(USER, "threads", tmp_path)
    barrier = threading.Barrier(len(tags))

    def run(tag: str) -> None:
        barrier.wait()
        for i in range(200):
            log.append(text_step(f"{tag} {i} {PAD}"))

    threads = [threading.Thread(target=run, args=(tag,)) for tag in tags]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    assert_lines_whole_and_ordered(log.path, tags, 200)


# --------------------------------------------------------------------------- durability

def test_fsync_after_final_result_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[bytes] = []  # the file's last line at each fsync
    log = ReplayLog(USER, "sync", tmp_path)
    monkeypatch.setattr(replay_log.os, "fsync",
                        lambda fd: synced.append(file_lines(log.path)[-1]))
    for entry in [le.user_message("q", TS), le.step(le.agent_start("a"), TS),
                  le.step(le.agent_tool_start("a", "t", "{}"), TS),
                  le.step(le.agent_tool_end("a", "t", "1"), TS), le.step(le.handoff("a", "b"), TS),
                  text_step("x"), le.step(le.agent_end("b"), TS)]:
        log.append(entry)
    assert synced == []
    final = le.final_result("x", model="openai/gpt-4.1-nano", timestamp=TS)
    log.append(final)
    assert synced == [orjson.dumps(final) + b"\n"]
    log.append(le.user_message("next", TS))
    assert len(synced) == 1
    log.close()


def test_append_many_writes_whole_lines_in_one_write(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import sessiontape.storage.file_writes as file_writes

    log = ReplayLog(USER, "batch", tmp_path)
    log.path.write_bytes(b'{"kind":"user_message","userInp')  # torn by a killed writer
    writes: list[bytes] = []
    real_write_all = file_writes.write_all

    def counted(fd: int, data: bytes) -> None:
        writes.append(data)
        real_write_all(fd, data)

    monkeypatch.setattr(file_writes, "write_all", counted)
    batch = [le.user_message("q", TS), le.step(le.agent_start("a"), TS),
             le.final_result("done", timestamp=TS)]
    log.append_many(batch)
    log.append_many([])
    log.close()
    assert len(writes) == 1 and writes[0].startswith(b"\n")  # the torn line closed first
    reader = SessionLogReader(log.path)
    assert [e.data for e in reader.entries()] == batch
    assert [p.line for p in reader.problems] == [1]


def test_opening_an_owned_log_again_writes_nothing_in_its_directory(tmp_path: Path) -> None:
    """The second open of a pair's log (every recorded turn opens it) finds its owner
    record and leaves the user directory as it was: no temporary file made and removed,
    whose mtime change made every reader think a conversation came or went."""
    path = log_path_for("ann@example.com", "trip", tmp_path)
    directory = path.parent
    os.utime(directory, ns=(0, 0))
    assert log_path_for("ann@example.com", "trip", tmp_path) == path
    log = ReplayLog("ann@example.com", "trip", tmp_path)
    log.close()
    assert os.stat(directory).st_mtime_ns == 0
    assert sorted(p.name for p in directory.iterdir()) == [".trip.owner.json"]
