"""``sessiontape log stream``, run as the real executable in subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest
from harness import EXECUTABLE, WAIT, Lines, cli_environ, on_terminal, run_cli, wait_for

from sessiontape.storage.skillet import log_entries as e
from sessiontape.storage.skillet.log_reader import SessionLogReader
from sessiontape.storage.skillet.replay_log import ReplayLog
from sessiontape.storage.times import iso_ms

# -- helpers ---------------------------------------------------------------------------

def line(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def turn(question: str, answer: str, *, when: datetime | None = None,
         model: str = "openai/gpt-4.1-nano") -> str:
    stamp = iso_ms(when)
    return "".join([
        line(e.user_message(question, stamp)),
        line(e.step(e.agent_start("Planner"), stamp)),
        line(e.step(e.agent_tool_start("Planner", "get_weather", '{"city":"Paris"}'), stamp)),
        line(e.step(e.agent_tool_end("Planner", "get_weather", "sunny and warm " * 30), stamp)),
        line(e.step(e.handoff("Planner", "Booker"), stamp)),
        line(e.compaction({"compactionId": "c1", "reason": "threshold",
                           "summarizer": "local", "itemsBefore": 52, "itemsAfter": 9,
                           "archived": 43}, stamp)),
        line(e.step(e.text(answer), stamp)),
        line(e.final_result(answer, model=model, timestamp=stamp)),
    ])


def write(path: Path, text: str, *, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def append_elsewhere(path: Path, text: str) -> None:
    """Append from another process, as a recorder would."""
    code = "import sys; open(sys.argv[1], 'a', encoding='utf-8').write(sys.argv[2])"
    subprocess.run([sys.executable, "-c", code, str(path), text], check=True, timeout=30)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("log", "stream", *args)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The logs root as SkilletPaths resolves it (SKILLET_HOME is set by conftest)."""
    return Path(os.environ["SKILLET_HOME"]) / "state" / ".agent_session_logs"


Follower = Callable[..., Lines]


@pytest.fixture
def follower() -> Iterator[Follower]:
    """Starts ``log stream ARGS...`` processes; kills those still running at the end."""
    started: list[Lines] = []

    def start(*args: str) -> Lines:
        started.append(Lines([EXECUTABLE, "log", "stream", *args]))
        return started[-1]

    yield start
    for f in started:
        f.stop()


MODES = [pytest.param([], id="notify"), pytest.param(["--poll"], id="poll")]


# -- catching up ---------------------------------------------------------------------

def test_catch_up_prints_headers_and_turns_oldest_file_first(root: Path) -> None:
    now = time.time()
    write(root / "bob" / "newer.jsonl", turn("second?", "two"), mtime=now - 10)
    write(root / "john_example_com" / "older.jsonl", turn("first?", "one"), mtime=now - 100)
    done = run("--no-follow")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "── john_example_com/older ──"
    assert lines[1].endswith("] user> first?") and lines[1].startswith("[20")
    assert lines[2].endswith("] agent> (openai/gpt-4.1-nano) one")
    assert lines[3] == "── bob/newer ──"
    assert lines[4].endswith("user> second?")
    assert lines[5].endswith("agent> (openai/gpt-4.1-nano) two")
    assert len(lines) == 6  # no steps without --steps
    assert "\x1b[" not in done.stdout  # not a terminal: no colour


def test_steps_adds_agent_starts_tools_handoffs_and_compactions(root: Path) -> None:
    write(root / "u" / "s.jsonl", turn("weather?", "sunny"))
    done = run("--no-follow", "--steps")
    assert done.returncode == 0, done.stderr
    body = [text.split("] ", 1)[1] for text in done.stdout.splitlines()[1:]]
    assert body[0] == "user> weather?"
    assert body[1] == "  · agent Planner starts"
    assert body[2] == '  · Planner calls get_weather({"city":"Paris"})'
    assert body[3].startswith("  · get_weather → sunny and warm") and body[3].endswith("…")
    assert len(body[3]) < 140  # abbreviated
    assert body[4] == "  · handoff Planner → Booker"
    assert body[5] == "  · compaction: 52 → 9 items (threshold, local)"
    assert body[6] == "agent> (openai/gpt-4.1-nano) sunny"


def test_steps_show_a_failed_tool_call_with_its_exception(root: Path) -> None:
    stamp = iso_ms()
    seen = "An error occurred while running the tool. Please try again."
    write(root / "u" / "s.jsonl", "".join([
        line(e.user_message("weather?", stamp)),
        line(e.step(e.agent_tool_start("Planner", "get_weather", '{"city":"Atlantis"}'), stamp)),
        line(e.step(e.agent_tool_end("Planner", "get_weather", seen,
                                     error="LookupError: no such city " + "x" * 200), stamp)),
        # a failed step with no exception of its own (as `sessions show` makes them from
        # an AgentUse tool part): its result says what failed
        line(e.step({**e.agent_tool_end("Planner", "get_weather", "TimeoutError: slow"),
                     "status": "error"}, stamp)),
        line(e.step(e.agent_tool_end("Planner", "get_weather", "sunny"), stamp)),
        line(e.final_result("no idea", model="m", timestamp=stamp)),
    ]))
    done = run("--no-follow", "--steps")
    assert done.returncode == 0, done.stderr
    body = [text.split("] ", 1)[1] for text in done.stdout.splitlines()[1:]]
    assert body[1] == '  · Planner calls get_weather({"city":"Atlantis"})'
    assert body[2].startswith("  · get_weather ✗ LookupError: no such city xxx")
    assert body[2].endswith("…") and len(body[2]) < 140  # abbreviated like a result
    assert body[3] == "  · get_weather ✗ TimeoutError: slow"
    assert body[4] == "  · get_weather → sunny"
    assert body[5] == "agent> (m) no idea"


def test_json_prints_every_entry_with_user_session_and_file(root: Path) -> None:
    path = write(root / "john_example_com" / "s1.jsonl", turn("hi", "hello"))
    done = run("--no-follow", "--json")
    assert done.returncode == 0, done.stderr
    objects = [json.loads(text) for text in done.stdout.splitlines()]
    assert len(objects) == 8
    assert [o["kind"] for o in objects][0::7] == ["user_message", "final_result"]
    for o in objects:
        assert (o["user"], o["session"], o["file"]) == ("john_example_com", "s1", str(path))
    assert objects[0]["userInput"] == "hi" and objects[-1]["model"] == "openai/gpt-4.1-nano"


def test_a_log_is_named_by_its_owner_record_and_its_path(root: Path) -> None:
    """A log sessiontape wrote has an owner record with the raw user id and session name:
    the header names both (raw first), --json adds them as user_id and session_name, as
    sessions list --json names the conversation; a log without one (skilled_crew's) is
    named by its path alone (user_id and session_name null)."""
    with ReplayLog("bob@example.com", "trip plan", root) as log:
        log.append_many([e.user_message("hi"), e.final_result("hello", model="m")])
    os.utime(log.path, (time.time(), time.time()))
    write(root / "crew" / "s.jsonl", turn("a?", "A"), mtime=time.time() - 100)
    text = run("--no-follow").stdout.splitlines()
    assert [line for line in text if line.startswith("──")] == [
        "── crew/s ──", "── bob@example.com/trip plan (bob_example_com/trip_plan) ──"]
    objects = [json.loads(line) for line in run("--no-follow", "--json").stdout.splitlines()]
    names = {(o["user"], o["session"], o["user_id"], o["session_name"]) for o in objects}
    assert names == {("crew", "s", None, None),
                     ("bob_example_com", "trip_plan", "bob@example.com", "trip plan")}
    listed = json.loads(run_cli("sessions", "list", "--json").stdout)
    assert ("bob@example.com", "trip plan") in {(s["user_id"], s["session_name"])
                                                for s in listed}


def test_user_and_session_filters_take_raw_or_sanitized_names(root: Path) -> None:
    write(root / "john_example_com" / "trip_plan.jsonl", turn("a?", "A"))
    write(root / "john_example_com" / "other.jsonl", turn("b?", "B"))
    write(root / "mary" / "trip_plan.jsonl", turn("c?", "C"))
    by_user = run("--no-follow", "--user", "john@example.com").stdout
    assert "user> a?" in by_user and "user> b?" in by_user and "user> c?" not in by_user
    both = run("--no-follow", "--user", "john_example_com", "--session", "trip plan").stdout
    assert both.splitlines()[0] == "── john_example_com/trip_plan ──"
    assert "user> a?" in both and "user> b?" not in both and "user> c?" not in both


def test_session_filter_finds_long_names_as_each_writer_names_their_file(root: Path) -> None:
    """A session name of 252 characters is a 252-character file name to skilled_crew
    (``SessionLogTypes.sanitizeForPath`` never cuts) but too long with ``.jsonl`` (255
    bytes): sessiontape cuts and hashes it; one of 200 characters, sessiontape 0.2/0.3 cut
    at 120 (storage/names.py ``old_log_name``). ``--session`` finds each by its raw name."""
    from sessiontape.storage.names import old_log_name, sanitize_log_name

    longest, old = "L" * 252, "O" * 200
    write(root / "ann" / f"{sanitize_log_name(longest, '.jsonl')}.jsonl", turn("a?", "A"))
    write(root / "ann" / f"{old_log_name(old)}.jsonl", turn("b?", "B"))
    write(root / "ann" / "other.jsonl", turn("c?", "C"))
    for name, question in ((longest, "a?"), (old, "b?")):
        shown = run("--no-follow", "--session", name).stdout
        assert f"user> {question}" in shown and "user> c?" not in shown, name


def test_since_skips_older_entries(root: Path) -> None:
    now = datetime.now(timezone.utc)
    write(root / "u" / "s.jsonl",
          turn("old?", "old", when=now - timedelta(days=3))
          + turn("recent?", "recent", when=now - timedelta(minutes=30)))
    relative = run("--no-follow", "--since", "2h").stdout
    assert "user> recent?" in relative and "user> old?" not in relative
    iso = (now - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert run("--no-follow", "--since", iso).stdout == ""


def test_malformed_line_gives_one_diagnostic_and_the_rest_is_printed(root: Path) -> None:
    text = turn("one?", "1").splitlines(keepends=True)
    path = write(root / "u" / "s.jsonl", "".join(text[:3]) + "{not json\n" + "".join(text[3:])
                 + line(e.user_message("two?")))
    done = run("--no-follow")
    assert done.returncode == 0
    diagnostics = done.stderr.splitlines()
    assert len(diagnostics) == 1 and f"{path}:4:" in diagnostics[0]
    assert "user> one?" in done.stdout and "agent> (openai/gpt-4.1-nano) 1" in done.stdout
    assert "user> two?" in done.stdout


def test_usage_errors_and_help() -> None:
    bad = run("--since", "yesterday-ish")
    assert bad.returncode == 2 and bad.stdout == "" and "--since" in bad.stderr
    helped = run("--help")
    assert helped.returncode == 0 and "--no-follow" in helped.stdout and "--since" in helped.stdout


def test_missing_root_without_follow_says_so(root: Path) -> None:
    done = run("--no-follow")
    assert done.returncode == 0 and done.stdout == ""
    assert "does not exist" in done.stderr


@pytest.mark.parametrize("follow", [[], ["--no-follow"]], ids=["follow", "no-follow"])
@pytest.mark.parametrize("what, said", [("missing", "no such directory"),
                                        ("file", "not a directory")])
def test_a_logs_dir_that_is_not_a_directory_is_a_usage_error(
        tmp_path: Path, follow: list[str], what: str, said: str) -> None:
    """A mistyped --logs-dir is an error, never waited for (only the default root is)."""
    given = tmp_path / what
    if what == "file":
        given.write_text("")
    done = run("--logs-dir", str(given), *follow)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"sessiontape log stream: --logs-dir {given}: {said}\n"


# -- every output path, pinned byte for byte --------------------------------------------

T1, T2 = "2026-11-20T09:00:00.000Z", "2026-11-21T09:00:00.000Z"
SINCE_TIME = "2026-11-21T00:00:00Z"
CORPUS_MTIMES = [1795400000, 1795400100, 1795400200]  # after SINCE_TIME, in this order


def jl(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def corpus(root: Path) -> None:
    """Three logs that reach every line kind, step kind and diagnostic ``log stream`` has."""
    first = [
        b"\xef\xbb\xbf" + jl(e.user_message("Plan a day in Porto", T1))[:-1] + b"\r\n",
        jl(e.step(e.agent_start("Planner"), T1))[:-1] + b"\r\n",
        jl(e.step(e.agent_tool_start("Planner", "search", json.dumps({"q": "x" * 100})), T1)),
        jl(e.step(e.agent_tool_end("Planner", "search", "result  line\n" * 20), T1)),
        jl(e.step(e.agent_tool_end("Planner", "search", "An error occurred",
                                   error="ValueError: bad\nsecond line"), T1)),
        jl(e.step({**e.agent_tool_end("Planner", "search", "TimeoutError: slow"),
                   "status": "error"}, T1)),
        jl(e.step(e.handoff("Planner", "Writer"), T1)),
        jl(e.step(e.text("Stop 1: Ribeira. "), T1)),
        b"\n",
        b"   \t\n",
        b"{not json\n",
        b"[1, 2]\n",
        b'{"kind": 5}\n',
        b'{"kind":"custom","timestamp":"x"}\n',
        jl(e.step({"type": "mystery", "agentName": "Planner"}, T1)),
        jl({"kind": "step", "stepResult": "not an object", "timestamp": T1}),
        jl(e.compaction({"compactionId": "c1", "reason": "threshold", "summarizer": "local",
                         "itemsBefore": 52, "itemsAfter": 9, "archived": 43}, T1)),
        jl(e.compaction({}, T1)),
        jl(e.suspended([{"callId": "c", "toolName": "delete", "arguments": '{"path":"/tmp"}'},
                        "not a call"], T1)),
        jl(e.step(e.agent_end("Writer"), T1)),
        jl(e.final_result("Day planned:\n1. Ribeira\t(walk)", model="openai/gpt-4.1-nano",
                          timestamp=T1)),
        jl(e.user_message([{"role": "user", "content": [
            {"type": "input_text", "text": "look"}, {"type": "input_image"}]}, "plain"], T2)),
        jl({"kind": "user_message", "userInput": "esc \x1b[31m red \x07 é 漢字 🙂 \u2028"}),
        jl({"kind": "final_result", "finalResult": "just a string", "timestamp": 12345}),
        jl({"kind": "final_result", "finalResult": None, "timestamp": T2, "model": ""}),
        b'{ "kind" : "user_message" , "userInput" : null, "timestamp": "2026-11-21T12:00:00+02:00",'
        b' "user": "spoof", "file": "x", "n": 1.50, "big": 1e300, "neg": -0.0, "u": "\\u00e9"}\n',
        jl({"kind": "user_message", "userInput": "old", "timestamp": "2026-11-20T23:00:00+00:00"}),
        jl({"kind": "user_message", "userInput": "odd time", "timestamp": "yesterday"}),
        jl(e.final_result("unterminated end", model="m", timestamp=T2))[:-1],
    ]
    second = [jl(e.user_message("at the root", T2)), jl(e.final_result("yes", timestamp=T2)),
              b'{"kind":"user_mes']
    third = [jl(e.user_message("hi\x1b]0;title\x07", T2)),
             jl(e.step(e.agent_tool_start("Bot\x1b[2J", "t", "{}"), T2)),
             jl(e.final_result("bye", model="m\x1b[1m", timestamp=T2))]
    for (folder, name), lines, mtime in zip(
            [("ann", "s1.jsonl"), ("", "s0.jsonl"), ("bob\x1b[2J", "chat\x07.jsonl")],
            [first, second, third], CORPUS_MTIMES, strict=True):
        path = root / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(lines))
        os.utime(path, (mtime, mtime))


def run_bytes(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``log stream ARGS...`` to its end, its output as bytes."""
    return subprocess.run([str(EXECUTABLE), "log", "stream", *args], capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=120, env=cli_environ(), check=False)


CALL = 'Planner calls search({"q": "' + "x" * 72 + "…)"  # clipped at 80
RESULT = "search → " + " ".join(["result line"] * 10) + "…"  # clipped at 120
PLAIN = [
    "── ann/s1 ──",
    "[2026-11-20T09:00:00.000Z] user> Plan a day in Porto",
    "[2026-11-20T09:00:00.000Z] agent> (openai/gpt-4.1-nano) Day planned:",
    "1. Ribeira\t(walk)",
    "[2026-11-21T09:00:00.000Z] user> look [input_image] plain",
    "[] user> esc \\x1b[31m red \\x07 é 漢字 🙂 \u2028",
    "[12345] agent> just a string",
    "[2026-11-21T09:00:00.000Z] agent> ",
    "[2026-11-21T12:00:00+02:00] user> ",
    "[2026-11-20T23:00:00+00:00] user> old",
    "[yesterday] user> odd time",
    "── s0 ──",
    "[2026-11-21T09:00:00.000Z] user> at the root",
    "[2026-11-21T09:00:00.000Z] agent> yes",
    "── bob\\x1b[2J/chat\\x07 ──",
    "[2026-11-21T09:00:00.000Z] user> hi\\x1b]0;title\\x07",
    "[2026-11-21T09:00:00.000Z] agent> (m\\x1b[1m) bye",
    "── ann/s1 ──",
    "[2026-11-21T09:00:00.000Z] agent> (m) unterminated end",
]
STEPS = [
    "── ann/s1 ──",
    "[2026-11-20T09:00:00.000Z] user> Plan a day in Porto",
    "[2026-11-20T09:00:00.000Z]   · agent Planner starts",
    "[2026-11-20T09:00:00.000Z]   · " + CALL,
    "[2026-11-20T09:00:00.000Z]   · " + RESULT,
    "[2026-11-20T09:00:00.000Z]   · search ✗ ValueError: bad second line",
    "[2026-11-20T09:00:00.000Z]   · search ✗ TimeoutError: slow",
    "[2026-11-20T09:00:00.000Z]   · handoff Planner → Writer",
    "[2026-11-20T09:00:00.000Z]   · compaction: 52 → 9 items (threshold, local)",
    "[2026-11-20T09:00:00.000Z]   · compaction: ? → ? items",
    "[2026-11-20T09:00:00.000Z]   · waiting for approval: delete({\"path\":\"/tmp\"})",
    "[2026-11-20T09:00:00.000Z] agent> (openai/gpt-4.1-nano) Day planned:",
    "1. Ribeira\t(walk)",
    "[2026-11-21T09:00:00.000Z] user> look [input_image] plain",
    "[] user> esc \\x1b[31m red \\x07 é 漢字 🙂 \u2028",
    "[12345] agent> just a string",
    "[2026-11-21T09:00:00.000Z] agent> ",
    "[2026-11-21T12:00:00+02:00] user> ",
    "[2026-11-20T23:00:00+00:00] user> old",
    "[yesterday] user> odd time",
    "── s0 ──",
    "[2026-11-21T09:00:00.000Z] user> at the root",
    "[2026-11-21T09:00:00.000Z] agent> yes",
    "── bob\\x1b[2J/chat\\x07 ──",
    "[2026-11-21T09:00:00.000Z] user> hi\\x1b]0;title\\x07",
    "[2026-11-21T09:00:00.000Z]   · Bot\\x1b[2J calls t({})",
    "[2026-11-21T09:00:00.000Z] agent> (m\\x1b[1m) bye",
    "── ann/s1 ──",
    "[2026-11-21T09:00:00.000Z] agent> (m) unterminated end",
]
SINCE = [
    "── ann/s1 ──",
    "[2026-11-21T09:00:00.000Z] user> look [input_image] plain",
    "[] user> esc \\x1b[31m red \\x07 é 漢字 🙂 \u2028",
    "[12345] agent> just a string",
    "[2026-11-21T09:00:00.000Z] agent> ",
    "[2026-11-21T12:00:00+02:00] user> ",
    "[yesterday] user> odd time",
    "── s0 ──",
    "[2026-11-21T09:00:00.000Z] user> at the root",
    "[2026-11-21T09:00:00.000Z] agent> yes",
    "── bob\\x1b[2J/chat\\x07 ──",
    "[2026-11-21T09:00:00.000Z] user> hi\\x1b]0;title\\x07",
    "[2026-11-21T09:00:00.000Z]   · Bot\\x1b[2J calls t({})",
    "[2026-11-21T09:00:00.000Z] agent> (m\\x1b[1m) bye",
    "── ann/s1 ──",
    "[2026-11-21T09:00:00.000Z] agent> (m) unterminated end",
]
TTY_STEPS = [
    "\x1b[1;36m── ann/s1 ──\x1b[0m",
    "\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[1muser>\x1b[0m Plan a day in Porto",
    "\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[2m  · agent Planner starts\x1b[0m",
    "\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[2m  · " + CALL + "\x1b[0m",
    "\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[2m  · " + RESULT + "\x1b[0m",
    ("\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[31m  · search ✗ ValueError: bad second line"
     "\x1b[0m"),
    "\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[31m  · search ✗ TimeoutError: slow\x1b[0m",
    "\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[2m  · handoff Planner → Writer\x1b[0m",
    ("\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[2m  · compaction: 52 → 9 items (threshold, loc"
     "al)\x1b[0m"),
    "\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[2m  · compaction: ? → ? items\x1b[0m",
    ("\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[2m  · waiting for approval: delete({\"path"
     "\":\"/tmp\"})\x1b[0m"),
    ("\x1b[2m[2026-11-20T09:00:00.000Z]\x1b[0m \x1b[1magent>\x1b[0m (openai/gpt-4.1-nano) Day plan"
     "ned:"),
    "1. Ribeira\t(walk)",
    "\x1b[2m[2026-11-21T09:00:00.000Z]\x1b[0m \x1b[1muser>\x1b[0m look [input_image] plain",
    "\x1b[2m[]\x1b[0m \x1b[1muser>\x1b[0m esc \\x1b[31m red \\x07 é 漢字 🙂 \u2028",
    "\x1b[2m[12345]\x1b[0m \x1b[1magent>\x1b[0m just a string",
    "\x1b[2m[2026-11-21T09:00:00.000Z]\x1b[0m \x1b[1magent>\x1b[0m ",
    "\x1b[2m[2026-11-21T12:00:00+02:00]\x1b[0m \x1b[1muser>\x1b[0m ",
    "\x1b[2m[2026-11-20T23:00:00+00:00]\x1b[0m \x1b[1muser>\x1b[0m old",
    "\x1b[2m[yesterday]\x1b[0m \x1b[1muser>\x1b[0m odd time",
    "\x1b[1;36m── s0 ──\x1b[0m",
    "\x1b[2m[2026-11-21T09:00:00.000Z]\x1b[0m \x1b[1muser>\x1b[0m at the root",
    "\x1b[2m[2026-11-21T09:00:00.000Z]\x1b[0m \x1b[1magent>\x1b[0m yes",
    "\x1b[1;36m── bob\\x1b[2J/chat\\x07 ──\x1b[0m",
    "\x1b[2m[2026-11-21T09:00:00.000Z]\x1b[0m \x1b[1muser>\x1b[0m hi\\x1b]0;title\\x07",
    "\x1b[2m[2026-11-21T09:00:00.000Z]\x1b[0m \x1b[2m  · Bot\\x1b[2J calls t({})\x1b[0m",
    "\x1b[2m[2026-11-21T09:00:00.000Z]\x1b[0m \x1b[1magent>\x1b[0m (m\\x1b[1m) bye",
    "\x1b[1;36m── ann/s1 ──\x1b[0m",
    "\x1b[2m[2026-11-21T09:00:00.000Z]\x1b[0m \x1b[1magent>\x1b[0m (m) unterminated end",
]
PROBLEMS = [  # stderr for all three modes; ROOT is the logs root
    "ROOT/ann/s1.jsonl:11: not JSON (unexpected character, expected a string key: line 1 "
    "column 2 (char 1))",
    "ROOT/ann/s1.jsonl:12: not a log entry (a JSON object with a string 'kind')",
    "ROOT/ann/s1.jsonl:13: not a log entry (a JSON object with a string 'kind')",
    "ROOT/s0.jsonl:3: not JSON (unexpected end of data: line 1 column 18 (char 17)) "
    "(last line, unterminated)",
]


def expected(lines: list[str], root: Path) -> str:
    return "".join(f"{text}\n" for text in lines).replace("ROOT", str(root))


def diagnostics(root: Path, *, follow: bool = False) -> str:
    """The stderr lines for the corpus (following, the unterminated lines are held back)."""
    kept = [p for p in PROBLEMS if not (follow and "unterminated" in p)]
    return expected([f"sessiontape: {p} (line skipped)" for p in kept], root)


@pytest.mark.parametrize(("args", "lines"), [
    pytest.param([], PLAIN, id="plain"),
    pytest.param(["--steps"], STEPS, id="steps"),
    pytest.param(["--steps", "--since", SINCE_TIME], SINCE, id="since")])
def test_text_output_byte_for_byte(root: Path, args: list[str], lines: list[str]) -> None:
    corpus(root)
    done = run_bytes("--no-follow", *args)
    assert done.returncode == 0
    assert done.stdout.decode() == expected(lines, root)
    assert done.stderr.decode() == diagnostics(root)


@pytest.mark.parametrize("steps", [False, True], ids=["plain", "steps"])
def test_colour_output_on_a_terminal_byte_for_byte(root: Path, steps: bool) -> None:
    corpus(root)
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    argv = [EXECUTABLE, "log", "stream", "--no-follow", *(["--steps"] if steps else [])]
    code, shown, err = on_terminal(argv, environment)
    assert code == 0
    lines = TTY_STEPS if steps else [text for text in TTY_STEPS if "  · " not in text]
    assert shown == expected(lines, root)
    assert err == diagnostics(root)


def test_json_output_byte_for_byte(root: Path) -> None:
    """Each entry re-serialized compactly (orjson) with user, session, file, user_id and
    session_name set (no owner records here: null): new keys last, a key the entry already
    has keeps its place."""
    corpus(root)
    done = run_bytes("--no-follow", "--json")
    assert done.returncode == 0
    assert done.stderr.decode() == diagnostics(root)
    printed = done.stdout.decode().split("\n")  # not splitlines(): a text holds U+2028
    assert printed.pop() == ""
    files = [("ann", "s1", root / "ann" / "s1.jsonl"), ("", "s0", root / "s0.jsonl"),
             ("bob\x1b[2J", "chat\x07", root / "bob\x1b[2J" / "chat\x07.jsonl")]
    ann, s0, bob = ([orjson.dumps({**entry.data, "user": user, "session": session,
                                   "file": str(path), "user_id": None,
                                   "session_name": None}).decode()
                     for entry in SessionLogReader(path).entries()]
                    for user, session, path in files)
    # ann/s1's unterminated last line comes at the very end; s0's is malformed
    assert printed == ann[:-1] + s0 + bob + ann[-1:]
    assert printed[20] == (
        '{"kind":"user_message","userInput":null,"timestamp":"2026-11-21T12:00:00+02:00",'
        f'"user":"ann","file":"{root}/ann/s1.jsonl","n":1.5,"big":1e+300,"neg":-0.0,"u":"é",'
        '"session":"s1","user_id":null,"session_name":null}')
    assert printed[17] == ('{"kind":"user_message","userInput":"esc \\u001b[31m red \\u0007 '
                           'é 漢字 🙂 \u2028","user":"ann","session":"s1",'
                           f'"file":"{root}/ann/s1.jsonl","user_id":null,"session_name":null}}')


def test_following_prints_the_same_lines(root: Path, follower: Follower) -> None:
    corpus(root)
    f = follower("--steps")
    f.expect("(m\\x1b[1m) bye")
    append_elsewhere(root / "ann" / "s1.jsonl", "\n")  # the unterminated last line, ended
    f.expect("(m) unterminated end")
    f.proc.send_signal(signal.SIGINT)
    assert f.finish() == 130
    assert expected(f.out, root) == expected(STEPS, root)
    shown = [text for text in f.err if text.strip()]  # Ctrl-C may leave an empty line
    assert expected(shown, root) == diagnostics(root, follow=True)


def test_steps_skipped_unread_are_those_describe_step_leaves_out() -> None:
    from sessiontape.cli.transcript import _UNDESCRIBED_STEPS, describe_step

    for kind in _UNDESCRIBED_STEPS:
        step = {"type": kind, "agentName": "a", "text": "t", "toolName": "t", "result": "r"}
        assert describe_step(step) is None, kind


def test_lines_read_by_the_json_fallback_are_printed(root: Path) -> None:
    """A number beyond 64 bits is refused by orjson and read by the standard parser."""
    big = ('{"kind":"user_message","userInput":"big","n":123456789012345678901234567890,'
           f'"timestamp":"{T1}"}}\n')
    write(root / "u" / "s.jsonl", big + line(e.user_message("next", T1)))
    done = run("--no-follow")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == f"── u/s ──\n[{T1}] user> big\n[{T1}] user> next\n"


@pytest.mark.parametrize("args", [[], ["--json"]], ids=["plain", "json"])
def test_a_log_of_several_read_blocks_keeps_order_and_line_numbers(root: Path,
        args: list[str]) -> None:
    """3 MB of CRLF lines, one malformed in the third MB: lines straddle the reads' blocks."""
    lines = [line(e.user_message(f"n{i} " + "p" * 1000, T1))[:-1] + "\r\n"
             for i in range(3000)]
    lines[2500] = "{broken\r\n"
    path = write(root / "u" / "big.jsonl", "".join(lines))
    done = run("--no-follow", *args)
    assert done.returncode == 0
    assert done.stderr == (f"sessiontape: {path}:2501: not JSON (unexpected character, "
                           "expected a string key: line 1 column 2 (char 1)) (line skipped)\n")
    printed = done.stdout.splitlines()
    if args:
        seen = [json.loads(text)["userInput"].split()[0] for text in printed]
    else:
        assert printed[0] == "── u/big ──"
        seen = [text.split("user> ")[1].split()[0] for text in printed[1:]]
    assert seen == [f"n{i}" for i in range(3000) if i != 2500]


# -- following -------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_lines_appended_by_another_process_appear(root: Path, follower: Follower,
        mode: list[str]) -> None:
    path = write(root / "u" / "s.jsonl", turn("first?", "one"))
    f = follower(*mode)
    f.expect("agent> (openai/gpt-4.1-nano) one")
    append_elsewhere(path, line(e.user_message("second?")))
    lines = f.expect("user> second?")
    assert lines.count("── u/s ──") == 1  # same source: no new header
    append_elsewhere(path, line(e.final_result("two", model="m")))
    f.expect("agent> (m) two")
    assert f.proc.poll() is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_new_files_in_new_folders_appear(root: Path, follower: Follower,
        mode: list[str]) -> None:
    write(root / "u" / "s.jsonl", turn("first?", "one"))
    f = follower(*mode)
    f.expect("agent> (openai/gpt-4.1-nano) one")
    write(root / "newcomer" / "fresh.jsonl", line(e.user_message("hello from a new folder")))
    lines = f.expect("user> hello from a new folder")
    assert "── newcomer/fresh ──" in lines
    deep = root / "a" / "b"
    deep.mkdir(parents=True)
    write(deep / "deeper.jsonl", line(e.user_message("deeper")))
    f.expect("user> deeper")


@pytest.mark.parametrize("mode", MODES)
def test_truncated_file_is_read_again_from_the_start(root: Path, follower: Follower,
        mode: list[str]) -> None:
    path = write(root / "u" / "s.jsonl", turn("before?", "before") * 3)
    f = follower(*mode)
    f.expect("agent> (openai/gpt-4.1-nano) before")
    with open(path, "r+", encoding="utf-8") as handle:
        handle.truncate(0)  # seen or not before the append: the file is now shorter than read
    append_elsewhere(path, line(e.user_message("after truncation?")))
    f.expect("user> after truncation?")


@pytest.mark.parametrize("mode", MODES)
def test_replaced_file_is_read_from_the_new_inode(root: Path, follower: Follower,
        mode: list[str]) -> None:
    path = write(root / "u" / "s.jsonl", turn("old file?", "old") * 3)
    f = follower(*mode)
    f.expect("agent> (openai/gpt-4.1-nano) old")
    tmp = path.with_name("s.tmp")
    tmp.write_text(line(e.user_message("new file?")), encoding="utf-8")
    os.replace(tmp, path)
    f.expect("user> new file?")
    append_elsewhere(path, line(e.final_result("new", model="m")))
    f.expect("agent> (m) new")


def test_partial_line_is_printed_once_complete(root: Path, follower: Follower) -> None:
    path = write(root / "u" / "s.jsonl", turn("first?", "one"))
    f = follower()
    f.expect("agent> (openai/gpt-4.1-nano) one")
    whole = line(e.user_message("split in two"))
    append_elsewhere(path, whole[:20])
    # A line written after the half line, in another file, shows the stream has read on.
    write(root / "u" / "other.jsonl", line(e.user_message("read on")))
    lines = f.expect("user> read on")
    assert not any("split" in text for text in lines)  # the half line stays unprinted
    append_elsewhere(path, whole[20:])
    lines = f.expect("user> split in two")
    assert [text.split("] ", 1)[-1] for text in lines if "split" in text] == ["user> split in two"]
    f.proc.send_signal(signal.SIGINT)
    assert f.finish() == 130
    assert [text for text in f.err if text.strip()] == []  # no diagnostic for the half line


def test_malformed_line_while_following(root: Path, follower: Follower) -> None:
    path = write(root / "u" / "s.jsonl", turn("first?", "one"))
    f = follower()
    f.expect("agent> (openai/gpt-4.1-nano) one")
    append_elsewhere(path, "{oops\n" + line(e.user_message("after the bad line")))
    f.expect("user> after the bad line")
    (diagnostic,) = f.expect_err(f"{path}:9:")
    assert diagnostic.startswith(f"sessiontape: {path}:9: not JSON (")
    assert diagnostic.endswith("(line skipped)")
    f.proc.send_signal(signal.SIGINT)
    assert f.finish() == 130
    assert [text for text in f.err if text.strip()] == [diagnostic]  # one bad line, one


def test_late_logs_root_is_waited_for(root: Path, follower: Follower) -> None:
    assert not root.exists()
    f = follower()
    (notice,) = f.expect_err("waiting for")
    assert str(root) in notice
    write(root / "u" / "s.jsonl", line(e.user_message("the root is here")))
    f.expect("user> the root is here")
    append_elsewhere(root / "u" / "s.jsonl", line(e.final_result("and followed", model="m")))
    f.expect("agent> (m) and followed")  # it waited, then followed


def test_closed_pipe_exits_quietly(root: Path) -> None:
    path = write(root / "u" / "s.jsonl", turn("first?", "one") * 2000)  # more than a pipe holds
    env = cli_environ()
    shell = ["bash", "-c", 'set -o pipefail; "$0" log stream "$@" | head -n 1', str(EXECUTABLE)]
    once = subprocess.run([*shell, "--no-follow"], capture_output=True, text=True, timeout=60,
                          env=env, check=False)
    assert once.returncode == 0, once.stderr
    assert once.stdout == "── u/s ──\n" and once.stderr == ""
    # Following: the next line written after head is gone ends the stream, quietly.
    proc = subprocess.Popen(shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "── u/s ──\n"
    def gone_after_one_more_line() -> bool:
        append_elsewhere(path, line(e.user_message("more")))
        try:
            proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            return False
        return True

    wait_for(gone_after_one_more_line, "the stream to end after head has gone")
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert err == ""


def test_ctrl_c_exits_130_quietly(root: Path, follower: Follower) -> None:
    write(root / "u" / "s.jsonl", turn("first?", "one"))
    f = follower()
    f.expect("agent> (openai/gpt-4.1-nano) one")
    f.proc.send_signal(signal.SIGINT)
    assert f.finish() == 130
    assert all(text.strip() == "" for text in f.err), f.err  # no traceback, no message


def _on_terminal(**env: str) -> str:
    """``--no-follow`` output with stdout on a pseudo-terminal."""
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | env
    code, shown, _ = on_terminal([EXECUTABLE, "log", "stream", "--no-follow"], environment)
    assert code == 0
    return shown


def test_colour_only_on_a_terminal_and_never_with_no_color(root: Path) -> None:
    write(root / "u" / "s.jsonl", turn("hi?", "hello"))
    assert "\x1b[" in _on_terminal()
    plain = _on_terminal(NO_COLOR="1")
    assert "\x1b[" not in plain and "user> hi?" in plain


def test_idle_files_are_parked_and_resumed_in_process(tmp_path: Path) -> None:
    """The library: more files than open descriptors allowed; parked files resume where they
    were."""
    from sessiontape.storage.skillet.log_follow import LogStream

    logs = tmp_path / "logs"
    paths = [write(logs / "u" / f"s{i}.jsonl", line(e.user_message(f"first {i}")))
             for i in range(6)]
    got: list[str] = []
    stream = LogStream(logs, on_entry=lambda source, entry: got.append(
        f"{source.session}:{entry.data.get('userInput')}"), on_problem=got.append,
        on_notice=lambda text: None, notify=False, poll_interval=0.01, rescan_interval=0.05,
        max_open=2)
    stream.catch_up()
    assert sorted(got) == sorted(f"s{i}:first {i}" for i in range(6))
    assert len(stream._open) == 2
    for i, path in enumerate(paths):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line(e.user_message(f"second {i}")))
    replaced = paths[0].with_name("tmp")
    replaced.write_text(line(e.user_message("new s0")), encoding="utf-8")
    os.replace(replaced, paths[0])  # s0 is parked: read from the new file's start
    deadline = time.monotonic() + WAIT
    stream.follow(stop=lambda: len(got) >= 12 or time.monotonic() > deadline)
    stream.close()
    later = got[6:]
    assert sorted(later) == sorted(["s0:new s0"] + [f"s{i}:second {i}" for i in range(1, 6)])


def test_a_stream_takes_one_of_on_entry_and_on_entries(tmp_path: Path) -> None:
    from sessiontape.storage.skillet.log_follow import LogStream

    def quiet(text: str) -> None:
        pass

    with pytest.raises(TypeError):
        LogStream(tmp_path, on_problem=quiet, on_notice=quiet)
    with pytest.raises(TypeError):
        LogStream(tmp_path, on_entry=lambda s, e: None, on_entries=lambda s, o: None,
                  on_problem=quiet, on_notice=quiet)


@pytest.mark.parametrize("options", [{}, {"steps": True}, {"json": True},
                                     {"steps": True, "color": True}],
                         ids=["plain", "steps", "json", "steps-colour"])
def test_formatting_one_entry_or_a_block_gives_the_same_text(tmp_path: Path,
        options: dict[str, bool]) -> None:
    from sessiontape.cli.transcript import EntryFormatter
    from sessiontape.storage.skillet.log_follow import LogSource

    corpus(tmp_path)
    path = tmp_path / "ann" / "s1.jsonl"
    source = LogSource.of(str(tmp_path), str(path))
    entries = SessionLogReader(path).entries()
    one, block = EntryFormatter(**options), EntryFormatter(**options)
    texts = [one.format(source, entry) for entry in entries]
    by_entry = "".join(f"{text}\n" for text in texts if text is not None)
    half = len(entries) // 2
    by_block = "".join(block.format_objects(source, [entry.data for entry in part])
                       for part in (entries[:half], entries[half:]))
    assert by_entry == by_block


def test_polling_objects_reads_what_polling_entries_reads(tmp_path: Path) -> None:
    """The tailer's fast path (poll_objects) against its per-line one (poll): the same
    objects and the same problems, on random mixes of good, odd and broken lines that
    straddle read blocks."""
    import random

    from sessiontape.storage.skillet.log_reader import SessionLogTailer

    good = [orjson.dumps(e.user_message("x" * size, T1)) for size in (0, 10, 5000, 70000)]
    odd = [b"", b"   ", b"\r", b"\xef\xbb\xbf" + good[0], b'{"kind":"a","n":1e999999}',
           b'{"kind":"a","n":123456789012345678901234567890}', b'{"kind":"a","s":"\\ud800"}',
           b"{not json", b"[1]", b'{"kind":1}', b'"kind"', b"\xff\xfe", b'{"kind":"a"} x',
           b'{"kind":"a"}\x0c', b'{"kind":"a"}\t', b'{"kind":"a"}\r\r', b"null"]
    rng = random.Random(14)
    for round_ in range(40):
        pool = rng.choice([good + odd, good * 4 + odd])
        lines = [rng.choice(pool) + rng.choice([b"", b"\r"]) for _ in range(rng.randint(1, 60))]
        if rng.random() < 0.3:
            lines[0] = b"\xef\xbb\xbf" + lines[0]
        data = b"\n".join(lines) + rng.choice([b"\n", b""])
        path = tmp_path / f"r{round_}.jsonl"
        path.write_bytes(data)
        slow, fast = SessionLogTailer(path), SessionLogTailer(path)
        want = [entry.data for entry in slow.poll()]
        got = [data for block in fast.poll_objects() for data in block]
        assert got == want, round_
        assert fast.problems == slow.problems, round_
        slow.close()
        fast.close()


def test_a_lone_surrogate_and_a_huge_integer_are_printed_not_fatal(root: Path) -> None:
    """What our writer can put in a log (a tool output holding a lone surrogate, written as
    the escape ``\\ud800``; an integer beyond 64 bits): every mode prints the whole log and
    exits 0; text shows the surrogate as its escape; JSON keeps both values exact."""
    odd = ('{"kind":"step","stepResult":{"type":"agent_tool_end","agentName":"Planner",'
           '"toolName":"read","result":"bad \\ud800 byte","size":123456789012345678901234},'
           '"timestamp":"2026-11-23T10:00:00.000Z"}\n')
    write(root / "john_example_com" / "odd.jsonl", turn("before", "first") + odd
          + turn("after", "second"))
    for args in (["--no-follow"], ["--no-follow", "--steps"]):
        done = run_bytes(*args)
        assert done.returncode == 0 and done.stderr == b"", done.stderr
        text = done.stdout.decode()
        assert "user> before" in text and "user> after" in text and "second" in text
    steps = run_bytes("--no-follow", "--steps").stdout.decode()
    assert "read → bad \\ud800 byte" in steps
    done = run_bytes("--no-follow", "--json")
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    objects = [json.loads(text) for text in done.stdout.splitlines()]
    assert len(objects) == 17
    [step] = [o for o in objects if o.get("stepResult", {}).get("toolName") == "read"]
    assert step["stepResult"]["result"] == "bad \ud800 byte"
    assert step["stepResult"]["size"] == 123456789012345678901234
    assert objects[-1]["finalResult"]["text"] == "second"
