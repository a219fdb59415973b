"""The sessiontape executable, run in real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontape.storage.paths import agentuse_sessions_root
from sessiontape.storage.version import __version__

EXECUTABLE = Path(sys.executable).with_name("sessiontape")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXECUTABLE), *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env=os.environ.copy())


def test_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"sessiontape {__version__}"


def test_paths_json_follows_the_environment(tmp_path: Path) -> None:
    done = run("paths", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["agentuse_root"] == str(agentuse_sessions_root(tmp_path))
    assert found["skillet_state"] == str(Path(os.environ["SKILLET_HOME"]) / "state")
    assert found["skillet_source"] == "SKILLET_HOME"


def test_paths_text_and_module_entry_point_agree(tmp_path: Path) -> None:
    text = run("paths", "--project", str(tmp_path)).stdout
    module = subprocess.run([sys.executable, "-m", "sessiontape", "paths", "--project", str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert module.returncode == 0 and module.stdout == text
    rows = dict(line.split(None, 1) for line in text.splitlines())
    assert rows["agentuse_root"] == str(agentuse_sessions_root(tmp_path))


@pytest.mark.parametrize("args", [[], ["no-such-verb"]])
def test_usage_errors_exit_2_on_stderr(args: list[str]) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert done.stdout == "" and "usage: sessiontape" in done.stderr


def test_help_everywhere() -> None:
    for args in (["--help"], ["paths", "--help"]):
        done = run(*args)
        assert done.returncode == 0 and "usage:" in done.stdout


def test_closed_pipe_is_quiet() -> None:
    shell = f"'{EXECUTABLE}' paths | head -c 1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True,
                          text=True, timeout=60)
    assert "Traceback" not in done.stderr
