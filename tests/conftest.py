"""Shared test set-up: an isolated environment and the original tools' fixtures.

The scaffolding for driving the executable (processes, terminals, waits, snapshots) is in
``harness.py``; scripted models and readers of what a Recorder wrote are in ``scripted.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import REPO, isolated_environ

SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"
AGENTUSE_FIXTURE = SHARED_FIXTURES / "agentuse-v0.15.0" / "xdg_data_home"
SKILLET_FIXTURE = SHARED_FIXTURES / "skilled_crew-v1.0.11" / "state"
MISSING_FIXTURES = "../shared/fixtures is not beside this checkout"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Say once, at the start, that the compatibility suite is skipped and why, so that a
    green run without the original tools' files is not taken for the full one."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if SHARED_FIXTURES.is_dir() or reporter is None or hasattr(session.config, "workerinput"):
        return
    reporter.write_line(f"NOTE: the compatibility tests against AgentUse's and skilled_crew's "
                        f"own files are skipped: {MISSING_FIXTURES} ({SHARED_FIXTURES})",
                        yellow=True, bold=True)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes under its own tmp dir, never in the real home or checkout."""
    for key, value in isolated_environ(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path


@pytest.fixture
def agentuse_fixture() -> Path:
    """AgentUse 0.15.0's own XDG_DATA_HOME (skipped outside this team's checkout)."""
    if not AGENTUSE_FIXTURE.is_dir():
        pytest.skip(MISSING_FIXTURES)
    return AGENTUSE_FIXTURE


@pytest.fixture
def skillet_fixture() -> Path:
    """skilled_crew 1.0.11's own state directory (skipped outside this team's checkout)."""
    if not SKILLET_FIXTURE.is_dir():
        pytest.skip(MISSING_FIXTURES)
    return SKILLET_FIXTURE
