"""The AgentUse tree's files written by a helper process (storage/file_writes.py).

The recorder's writer thread hands each batch of whole files to a helper process and
waits for its answer. What must hold: the files are on disk, private and whole when the
call returns; a file that cannot be written is reported with its path and does not stop
the others; a helper that dies (killed, or never started) costs nothing already recorded,
because the batch is written by the thread instead; and the helper never outlives its
parent.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import stat
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from harness import REPO, run, wait_for
from scripted import call, final, model, read_session, tool_parts, tools_step

from sessiontape import Recorder
from sessiontape.storage import file_writes
from sessiontape.storage.file_writes import FileWorker


@pytest.fixture
def worker() -> Any:
    helper = FileWorker()
    yield helper
    helper.close()


def test_a_batch_is_written_by_a_helper_process_whole_and_private(
        tmp_path: Path, worker: FileWorker) -> None:
    files = [(tmp_path / f"part{n}.json", f'{{"n": {n}}}\n'.encode() * (n + 1))
             for n in range(5)]
    files.append((tmp_path / "big.json", b"x" * 3_000_000))  # bigger than a pipe holds
    worker.write(files)
    helper = worker.pid
    assert helper is not None and helper != os.getpid()
    for path, data in files:
        assert path.read_bytes() == data
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    worker.write([(tmp_path / "part0.json", b"again")])  # a rewrite, by the same helper
    assert (tmp_path / "part0.json").read_bytes() == b"again" and worker.pid == helper
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p, _ in files)


def test_a_ctrl_c_at_the_terminal_never_reaches_the_helper(tmp_path: Path,
                                                           worker: FileWorker) -> None:
    """A terminal sends Ctrl-C's SIGINT to its foreground process group: the helper is in
    a session (and group) of its own from its start, so a Ctrl-C typed while it starts,
    before it ignores SIGINT itself, is the parent's alone (it had killed the helper)."""
    worker.write([(tmp_path / "x.json", b"x")])
    assert worker.pid is not None
    assert os.getpgid(worker.pid) != os.getpgid(0)
    assert os.getsid(worker.pid) == worker.pid != os.getsid(0)


def test_a_file_the_helper_cannot_write_is_reported_and_the_others_are_written(
        tmp_path: Path, worker: FileWorker) -> None:
    (tmp_path / "a-directory").mkdir()
    files = [(tmp_path / "first.json", b"1"),
             (tmp_path / "missing" / "dir" / "x.json", b"2"),  # no such directory
             (tmp_path / "a-directory", b"3"),  # a directory cannot be replaced by a file
             (tmp_path / "last.json", b"4")]
    with pytest.raises(OSError) as raised:
        worker.write(files)
    assert raised.value.errno == errno.ENOENT
    assert raised.value.filename == str(tmp_path / "missing" / "dir" / "x.json")
    assert worker.pid is not None  # a failed file is not a failed helper
    assert (tmp_path / "first.json").read_bytes() == b"1"
    assert (tmp_path / "last.json").read_bytes() == b"4"
    assert (tmp_path / "a-directory").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory", "first.json", "last.json"]


def test_a_killed_helper_costs_no_file_and_is_replaced(
        tmp_path: Path, worker: FileWorker, caplog: pytest.LogCaptureFixture) -> None:
    worker.write([(tmp_path / "before.json", b"before")])
    first = worker.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: worker.pid is None, "the helper to die")
    with caplog.at_level(logging.WARNING, logger="sessiontape"):
        worker.write([(tmp_path / "during.json", b"during")])  # written by this thread
    assert (tmp_path / "during.json").read_bytes() == b"during"
    assert "file-writing helper stopped" in caplog.text
    worker.write([(tmp_path / "after.json", b"after")])
    assert worker.pid not in (None, first)  # a new helper
    assert (tmp_path / "after.json").read_bytes() == b"after"


def test_a_helper_that_keeps_dying_leaves_the_writing_to_this_thread(
        tmp_path: Path, worker: FileWorker) -> None:
    for number in range(5):
        worker.write([(tmp_path / f"f{number}.json", str(number).encode())])
        helper = worker.pid
        if helper is not None:
            os.kill(helper, signal.SIGKILL)
            wait_for(lambda: worker.pid is None, "the helper to die")
    worker.write([(tmp_path / "last.json", b"last")])
    assert worker.pid is None  # three helpers were started; then no more
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        sorted([f"f{n}.json" for n in range(5)] + ["last.json"])


def test_a_helper_that_cannot_start_leaves_the_writing_to_this_thread(
        tmp_path: Path, worker: FileWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_writes.sys, "executable", str(tmp_path / "no-such-python"))
    worker.write([(tmp_path / "a.json", b"a"), (tmp_path / "b.json", b"b")])
    assert worker.pid is None
    assert (tmp_path / "a.json").read_bytes() == b"a" and (tmp_path / "b.json").read_bytes() == b"b"


ORPHAN = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from sessiontape.storage.file_writes import WORKER
    WORKER.write([(Path(sys.argv[1]) / "x.json", b"x")])
    print(WORKER.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_the_helper_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    done = run([sys.executable, "-c", ORPHAN, str(tmp_path)], cwd=REPO)
    assert done.returncode == -signal.SIGKILL
    helper = int(done.stdout.split()[0])
    assert (tmp_path / "x.json").read_bytes() == b"x"

    def gone() -> bool:
        try:
            return Path(f"/proc/{helper}/stat").read_text().split()[2] == "Z"  # a zombie
        except FileNotFoundError:
            return True
    wait_for(gone, "the orphaned helper to exit")


FORKED = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from sessiontape.storage.file_writes import WORKER
    root = Path(sys.argv[1])
    WORKER.write([(root / "parent-before.json", b"p")])
    parent_helper = WORKER.pid
    child = os.fork()
    if child == 0:
        WORKER.write([(root / "child.json", b"c")])
        os._exit(0 if WORKER.pid not in (None, parent_helper) else 3)
    _, status = os.waitpid(child, 0)
    WORKER.write([(root / "parent-after.json", b"q")])
    print(os.waitstatus_to_exitcode(status), WORKER.pid == parent_helper, flush=True)
    WORKER.close()
""")


def test_a_forked_child_writes_through_a_helper_of_its_own(tmp_path: Path) -> None:
    done = run([sys.executable, "-c", FORKED, str(tmp_path)], cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True"]
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        ["child.json", "parent-after.json", "parent-before.json"]


def test_a_recording_whose_helper_is_killed_mid_run_loses_nothing() -> None:
    """The helper is killed after the first tool call: the run's result is unchanged, no
    recording error, and every part of every call is in the tree."""
    calls = 12
    killed: list[int] = []

    @function_tool
    def kill_the_helper(n: int) -> str:
        """Looks a record up, and kills the file-writing helper the first time."""
        if not killed and file_writes.WORKER.pid is not None:
            killed.append(file_writes.WORKER.pid)
            os.kill(killed[0], signal.SIGKILL)
        return f"record {n}"

    steps = [tools_step(call("kill_the_helper", {"n": n}, f"c{n}")) for n in range(calls)]
    agent = Agent(name="Looker", tools=[kill_the_helper], model=model(*steps, final("done")))

    async def main() -> tuple[Any, Recorder]:
        async with Recorder(session_name="helper-killed") as rec:
            result = await rec.run(agent, "look them up", max_turns=calls + 1)
        return result, rec

    result, rec = asyncio.run(main())
    assert result.final_output == "done" and rec.errors == 0
    assert killed, "the helper was running during the run"
    session = read_session(rec)
    assert session.info["status"] == "completed"
    [message] = session.messages
    tools = tool_parts(message)
    assert list(tools) == [f"c{n}" for n in range(calls)]
    assert [part["state"]["status"] for part in tools.values()] == ["completed"] * calls
    assert [part["state"]["output"] for part in tools.values()] == \
        [f"record {n}" for n in range(calls)]
    kinds = [part["type"] for part in message.parts]
    assert kinds.count("step-start") == kinds.count("step-finish") == calls + 1
    assert message.info["time"]["completed"] >= message.info["time"]["created"]


def test_lines_appended_by_the_helper_stay_whole_and_follow_a_replaced_log(
        tmp_path: Path, worker: FileWorker) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(b'{"kind":"user_message","userInp')  # torn by a killed writer
    worker.append(log, b'{"n":1}\n{"n":2}\n')
    assert log.read_bytes() == b'{"kind":"user_message","userInp\n{"n":1}\n{"n":2}\n'
    log.rename(tmp_path / "s.jsonl.1")  # rotated: the helper opens the new file
    worker.append(log, b'{"n":3}\n', sync=True)
    assert log.read_bytes() == b'{"n":3}\n' and stat.S_IMODE(log.stat().st_mode) == 0o600
    assert (tmp_path / "s.jsonl.1").read_bytes().endswith(b'{"n":2}\n')
    (tmp_path / "link.jsonl").symlink_to(log)
    with pytest.raises(OSError) as raised:
        worker.append(tmp_path / "link.jsonl", b'{"n":4}\n')
    assert raised.value.errno == errno.ELOOP and log.read_bytes() == b'{"n":3}\n'


def test_lines_the_killed_helper_appended_are_not_appended_twice(
        tmp_path: Path, worker: FileWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper appended a batch and died before it answered: the thread sees the lines
    at the log's end and does not write them again; other lines it does write."""
    log = tmp_path / "s.jsonl"
    worker.append(log, b'{"n":1}\n')
    real_send = FileWorker._send

    def appended_then_died(process: Any, ops: list[Any]) -> Any:
        real_send(process, ops)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        raise EOFError("the other end closed the pipe")
    monkeypatch.setattr(FileWorker, "_send", staticmethod(appended_then_died))
    worker.append(log, b'{"n":2}\n')
    monkeypatch.setattr(FileWorker, "_send", staticmethod(real_send))
    assert log.read_bytes() == b'{"n":1}\n{"n":2}\n'
    worker.append(log, b'{"n":3}\n')
    assert log.read_bytes() == b'{"n":1}\n{"n":2}\n{"n":3}\n'
