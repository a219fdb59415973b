"""What tests need to drive the real executable: paths, environments, processes, terminals.

One home for the scaffolding every CLI and process test shares:

- ``REPO``, ``EXECUTABLE``: the checkout and the installed ``sessiontape`` script;
- ``isolated_environ(base)``: an environment whose every data root lies under ``base``;
- ``run`` / ``run_cli`` / ``run_many``: finished subprocesses (``run_many`` starts a few at
  once: each start of the executable imports the Agents SDK);
- ``Lines``: a running process whose stdout and stderr lines are waited for;
- ``sigint_default``: SIGINT's default action for a child that a test will interrupt;
- ``Terminal`` and ``on_terminal``: the executable on a pseudo-terminal;
- ``wait_for`` and ``next_millisecond``: waiting on a state, never sleeping to order things;
- ``snapshot``: every entry under a directory, to prove that readers change nothing;
- ``as_doubles``: parsed JSON with JavaScript's big integral doubles as doubles.

Every wait has a generous timeout that only a stuck test reaches.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import stat
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parent.parent
EXECUTABLE = Path(sys.executable).with_name("sessiontape")
WAIT = 30.0  # seconds a test waits for anything before it is called stuck

T = TypeVar("T")


def sigint_default() -> None:
    """Give SIGINT its default action (in a child, before it executes its program).

    A shell starts a background job (``cmd &`` without job control) with SIGINT ignored,
    its children inherit that, and a Python program that starts with SIGINT ignored never
    raises KeyboardInterrupt: the tests that type Ctrl-C would hang. Every process such a
    test signals is started through this."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def isolated_environ(base: Path, **extra: str) -> dict[str, str]:
    """This process's environment with HOME, every XDG root and SKILLET_HOME under ``base``,
    tracing off and no API key (no network, no real home touched)."""
    home = base / "home"
    environ = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
               "XDG_STATE_HOME": str(home / "state"), "XDG_CACHE_HOME": str(home / "cache"),
               "XDG_CONFIG_HOME": str(home / "config"), "SKILLET_HOME": str(base / "skillet"),
               "OPENAI_AGENTS_DISABLE_TRACING": "1", **extra}
    environ.pop("OPENAI_API_KEY", None)
    if "SESSIONTAPE_STORE" not in extra:  # the default store: the isolated skillet file
        environ.pop("SESSIONTAPE_STORE", None)
    return environ


@contextlib.contextmanager
def isolated(base: Path, **extra: str) -> Iterator[dict[str, str]]:
    """This process's environment isolated under ``base`` (:func:`isolated_environ`, no API
    key) while the block runs: for a module's fixture, which runs before conftest's
    per-test isolation. Yields that environment; restores the old one after."""
    environ = isolated_environ(base, **extra)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in environ.items():
            patch.setenv(key, value)
        patch.delenv("OPENAI_API_KEY", raising=False)
        if "SESSIONTAPE_STORE" not in environ:
            patch.delenv("SESSIONTAPE_STORE", raising=False)
        yield environ


def cli_environ(**extra: str) -> dict[str, str]:
    """The current (test-isolated) environment without colour, plus ``extra``."""
    return {**os.environ, "NO_COLOR": "1", **extra}


def run(argv: Sequence[str | Path], *, env: Mapping[str, str] | None = None,
        cwd: Path | None = None, timeout: float = 120,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end; its output as text (stdin closed unless given)."""
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, input=stdin if stdin is not None else "",
                          env=dict(env) if env is not None else cli_environ(), check=False)


def run_cli(*args: str | Path, **options: Any) -> subprocess.CompletedProcess[str]:
    """``sessiontape ARGS...`` to its end (see :func:`run`)."""
    return run([EXECUTABLE, *args], **options)


class CliResults:
    """Finished command lines by key, as a module's fixture ran them (``results``)."""

    results: dict[str, subprocess.CompletedProcess[str]]

    def ok(self, key: str) -> subprocess.CompletedProcess[str]:
        """The run ``key``, asserted to have exited 0."""
        done = self.results[key]
        assert done.returncode == 0, done.stderr
        return done

    def json(self, key: str) -> Any:
        """The JSON the run ``key`` printed (asserted to have exited 0)."""
        return json.loads(self.ok(key).stdout)


def run_many(commands: Mapping[str, Sequence[str | Path]], env: Mapping[str, str] | None = None,
             parallel: int = 4) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run independent commands ``parallel`` at a time; their results by key."""
    results: dict[str, subprocess.CompletedProcess[str]] = {}
    pending = list(commands.items())
    while pending:
        batch, pending = pending[:parallel], pending[parallel:]
        started = {key: subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=dict(env or cli_environ()))
                   for key, argv in batch}
        for key, proc in started.items():
            out, err = proc.communicate(timeout=180)
            results[key] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return results


def wait_for(predicate: Callable[[], T], what: str, timeout: float = WAIT) -> T:
    """``predicate()``'s first true value, checked until ``timeout``; else a failure
    naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def next_millisecond() -> int:
    """Wait until the wall clock shows a later millisecond than now; return it (for records
    that must be strictly newer than those before)."""
    start = now_ms()
    return wait_for(lambda: (later := now_ms()) > start and later, "the next millisecond")


def as_doubles(value: Any) -> Any:
    """``value`` as a Python JSON parser read it, with integers beyond 2**53 as doubles:
    JavaScript writes an integral double beyond 2**53 as its shortest digits padded with
    zeros, which a Python parser reads as an integer (orjson: a float beyond 64 bits)."""
    if isinstance(value, list):
        return [as_doubles(item) for item in value]
    if isinstance(value, dict):
        return {key: as_doubles(item) for key, item in value.items()}
    if type(value) is int and abs(value) > 2**53:
        return float(value)
    return value


def snapshot(root: Path, *, mtimes: bool = False, sqlite_sidecars: bool = False
             ) -> dict[str, Any]:
    """Every entry under ``root``, links not followed: a file's bytes (with its mtime in ns
    when ``mtimes``), ``"dir"``, a link's target or ``"special"``. SQLite's -wal and -shm
    files are left out (readers may touch them) unless ``sqlite_sidecars``, and so is an
    isolated home's cache directory (``home/cache``: the catalog, which readers write)."""
    found: dict[str, Any] = {}
    for top, dirs, files in os.walk(root):
        if Path(top).name == "home":
            dirs[:] = [d for d in dirs if d != "cache"]
        kept = [f for f in files if sqlite_sidecars or not f.endswith(("-wal", "-shm"))]
        for name in dirs + kept:
            path = Path(top, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[str(path)] = "dir"
            elif stat.S_ISREG(info.st_mode):
                content = path.read_bytes()
                found[str(path)] = (content, info.st_mtime_ns) if mtimes else content
            else:
                found[str(path)] = "special"
    return found


class Lines:
    """A running process whose stdout and stderr lines are collected by two threads."""

    def __init__(self, argv: Sequence[str | Path], env: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(env or cli_environ()), cwd=cwd,
                                     preexec_fn=sigint_default)
        self.out: list[str] = []
        self.err: list[str] = []
        self._changed = threading.Condition()
        self._pumps = [threading.Thread(target=self._pump, args=(stream, into), daemon=True)
                       for stream, into in ((self.proc.stdout, self.out),
                                            (self.proc.stderr, self.err))]
        for pump in self._pumps:
            pump.start()

    def _pump(self, stream: IO[str], into: list[str]) -> None:
        for text in stream:
            with self._changed:
                into.append(text.rstrip("\n"))
                self._changed.notify_all()

    def _expect(self, into: list[str], want: str, timeout: float) -> list[str]:
        with self._changed:
            if not self._changed.wait_for(lambda: any(want in s for s in into), timeout):
                raise AssertionError(f"{want!r} did not appear; stdout {self.out!r}, "
                                     f"stderr {self.err!r}")
            return list(into)

    def expect(self, want: str, timeout: float = WAIT) -> list[str]:
        """Wait until a stdout line contains ``want``; every stdout line so far."""
        return self._expect(self.out, want, timeout)

    def expect_err(self, want: str, timeout: float = WAIT) -> list[str]:
        """Wait until a stderr line contains ``want``; every stderr line so far."""
        return self._expect(self.err, want, timeout)

    def finish(self, timeout: float = WAIT) -> int:
        """Wait for the process to end and for its last lines to be read; its exit code."""
        code = self.proc.wait(timeout=timeout)
        for pump in self._pumps:
            pump.join(timeout)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=WAIT)


class Terminal:
    """A program on a pseudo-terminal that is its controlling terminal (so typing Ctrl-C
    sends a real SIGINT), read and typed at like a person would."""

    def __init__(self, argv: Sequence[str | Path], env: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        program = [str(a) for a in argv]
        environment = dict(env if env is not None else cli_environ(TERM="dumb"))
        pid, fd = pty.fork()
        if pid == 0:  # the child: become the program
            try:
                sigint_default()
                if cwd is not None:
                    os.chdir(cwd)
                os.execve(program[0], program, environment)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.pending = ""
        self.seen = ""
        self.status: int | None = None

    def _read(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; False once the program's side is closed."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the program has gone
            data = b""
        self.pending += data.decode(errors="replace").replace("\r\n", "\n")
        return bool(data)

    def expect(self, text: str, timeout: float = WAIT) -> str:
        """Everything up to and including ``text`` (consumed)."""
        deadline = time.monotonic() + timeout
        while text not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"no {text!r} on the terminal; it shows:\n"
                                     f"{self.seen + self.pending}")
        end = self.pending.index(text) + len(text)
        chunk, self.pending = self.pending[:end], self.pending[end:]
        self.seen += chunk
        return chunk

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def line(self, text: str) -> str:
        """Type ``text`` and Enter at the prompt; what it printed up to the next prompt."""
        self.send(text + "\n")
        return self.expect("user> ")

    def reading_keys(self) -> bool:
        """Whether the program has switched the terminal to key-at-a-time input (what
        readline does once it waits for a key): canonical mode off."""
        return not termios.tcgetattr(self.fd)[3] & termios.ICANON

    def interrupt_at_prompt(self, timeout: float = WAIT) -> int:
        """Type Ctrl-C once readline waits for a key and return the exit code. A SIGINT that
        lands in the instant between readline's terminal set-up and its wait is only acted on
        at the next one (CPython's readline), so Ctrl-C is typed again if the program is
        still there after a while."""
        wait_for(self.reading_keys, "readline to wait for a key")
        for _ in range(3):
            self.send("\x03")
            try:
                return self.wait(timeout / 3)
            except AssertionError:
                continue
        return self.wait(timeout)

    def wait(self, timeout: float = WAIT) -> int:
        """The exit code, once the program has ended and its output is read."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                while self._read(0.05) and self.pending:
                    self.seen, self.pending = self.seen + self.pending, ""
                self.seen, self.pending = self.seen + self.pending, ""
                return self.status
            self._read(0.05)
        raise AssertionError(f"still running; the terminal shows:\n{self.seen + self.pending}")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


def on_terminal(argv: Sequence[str | Path], env: Mapping[str, str] | None = None,
                stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run ``argv`` with stdout on a pseudo-terminal (stdin too when ``stdin`` is given: it is
    typed there); (exit code, what the terminal showed, stderr)."""
    main_fd, child_fd = pty.openpty()
    try:
        proc = subprocess.Popen([str(a) for a in argv],
                                stdin=child_fd if stdin is not None else subprocess.DEVNULL,
                                stdout=child_fd, stderr=subprocess.PIPE,
                                env=dict(env or cli_environ()))
    finally:
        os.close(child_fd)
    if stdin is not None:
        os.write(main_fd, stdin)
    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    reader.start()
    chunks = []
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # EIO once the program's side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main_fd)
    code = proc.wait(timeout=WAIT)
    reader.join(WAIT)
    shown = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return code, shown, b"".join(errors).decode(errors="replace")
