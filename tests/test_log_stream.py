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

import pytest
from harness import EXECUTABLE, WAIT, Lines, cli_environ, on_terminal, run_cli, wait_for

from sessiontape.storage import log_entries as e
from sessiontape.storage.log_entries import iso_ms

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


def test_user_and_session_filters_take_raw_or_sanitized_names(root: Path) -> None:
    write(root / "john_example_com" / "trip_plan.jsonl", turn("a?", "A"))
    write(root / "john_example_com" / "other.jsonl", turn("b?", "B"))
    write(root / "mary" / "trip_plan.jsonl", turn("c?", "C"))
    by_user = run("--no-follow", "--user", "john@example.com").stdout
    assert "user> a?" in by_user and "user> b?" in by_user and "user> c?" not in by_user
    both = run("--no-follow", "--user", "john_example_com", "--session", "trip plan").stdout
    assert both.splitlines()[0] == "── john_example_com/trip_plan ──"
    assert "user> a?" in both and "user> b?" not in both and "user> c?" not in both


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
    from sessiontape.logstream import LogStream

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
