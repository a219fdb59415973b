"""What the web viewer's tests share: recorded conversations and a real ``serve`` process.

:func:`record_world` records, with the SDK's ``Runner`` and scripted models: ann/porto (a
subagent and a failed tool, from ``test_session_events``), eve/hostile (markup, a closing
``</script>`` and terminal escapes in the prompt and the output, from
``test_markdown_export``), and carol with a name that is markup and a 10 MB output.
:class:`Server` runs ``sessiontape serve --port 0`` as a whole process in that
environment, and reads the address it prints.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

from agents import Agent, function_tool
from harness import EXECUTABLE, wait_for
from scripted import call, final, model, tools_step, usage
from test_markdown_export import record_hostile
from test_session_events import record

from sessiontape import Recorder

HUGE_CHARS = 10 * 2**20
ODD_NAME = "../<b>odd</b> & name"


@function_tool
def fetch_everything(what: str) -> str:
    """Return a very long text."""
    return "line of output " * (HUGE_CHARS // 15) + "THE END"


def record_huge() -> None:
    """carol/ODD_NAME: one call whose output is 10 MB."""
    agent = Agent(name="Hoarder", tools=[fetch_everything], model=model(
        tools_step(call("fetch_everything", {"what": "all"}), u=usage(7, 2)),
        final("that was a lot", usage(8, 2))))

    async def main() -> None:
        async with Recorder(user_id="carol", session_name=ODD_NAME) as rec:
            await rec.run(agent, "fetch everything")

    asyncio.run(main())


def record_world() -> None:
    """ann/porto, eve/hostile and carol/ODD_NAME, in the current (isolated) environment."""
    record()
    record_hostile()
    record_huge()


def add_turn(user: str, session: str, text: str) -> None:
    """One more turn of ``user``/``session``: a prompt answered with ``text``."""
    async def main() -> None:
        async with Recorder(user_id=user, session_name=session) as rec:
            await rec.run(Agent(name="Guide", model=model(final(text, usage(4, 1)))),
                          f"and then? ({text})")

    asyncio.run(main())


class Server:
    """``sessiontape serve --port 0`` in ``env`` until :meth:`stop`; ``url`` is where it
    listens, ``stderr`` what it said there so far."""

    def __init__(self, env: Mapping[str, str], *extra: str, cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            [str(EXECUTABLE), "serve", "--port", "0", *extra], env=dict(env), cwd=cwd,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.stderr: list[str] = []
        for stream, into in ((self.process.stdout, self.lines),
                             (self.process.stderr, self.stderr)):
            threading.Thread(target=self._read, args=(stream, into), daemon=True).start()
        found = wait_for(lambda: self._url() or self.process.poll() is not None,
                         "serve to say where it listens")
        if found is True:
            raise AssertionError(f"serve exited {self.process.returncode}: {self.stderr}")
        self.url: str = found

    @staticmethod
    def _read(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line)

    def _url(self) -> str | None:
        for line in self.lines:
            match = re.search(r"at (http://\S+/) ", line)
            if match:
                return match[1]
        return None

    def stop(self) -> int:
        """Ctrl-C, as a person stops it; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def tree_of(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and mtime (what a read-only server keeps)."""
    return {os.path.relpath(os.path.join(top, name), root):
            (os.stat(os.path.join(top, name)).st_size,
             os.stat(os.path.join(top, name)).st_mtime_ns)
            for top, _, names in os.walk(root) for name in names}
