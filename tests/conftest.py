"""Shared test set-up: an isolated environment and the original tools' fixtures.

The scaffolding for driving the executable (processes, terminals, waits, snapshots) is in
``harness.py``; scripted models and readers of what a Recorder wrote are in ``scripted.py``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import isolated_environ
from playwright.sync_api import Browser, sync_playwright

# Real files written by AgentUse 0.15.0 and skilled_crew 1.0.11 themselves, kept in the
# repository (a copy of the team's shared fixtures; tests/fixtures/README.md says how they
# were made), so that a fresh clone runs the compatibility tests too.
FIXTURES = Path(__file__).parent / "fixtures"
AGENTUSE_FIXTURE = FIXTURES / "agentuse-v0.15.0" / "xdg_data_home"
SKILLET_FIXTURE = FIXTURES / "skilled_crew-v1.0.11" / "state"
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package `chromium` (.ci/run installs it)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes under its own tmp dir, never in the real home or checkout."""
    for key, value in isolated_environ(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("SESSIONTAPE_STORE", raising=False)
    return tmp_path


@pytest.fixture
def agentuse_fixture() -> Path:
    """AgentUse 0.15.0's own XDG_DATA_HOME (read only: tests copy it before writing)."""
    return AGENTUSE_FIXTURE


@pytest.fixture
def skillet_fixture() -> Path:
    """skilled_crew 1.0.11's own state directory (read only: tests copy it first)."""
    return SKILLET_FIXTURE


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, driven by Playwright (no browser download); one per
    module. Its absence fails, it does not skip."""
    assert CHROMIUM.exists() or shutil.which("chromium"), \
        "the browser tests need Debian's chromium: apt-get install chromium"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        launched.close()
