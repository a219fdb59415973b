"""Shared test set-up: an isolated environment and the original tools' fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"
AGENTUSE_FIXTURE = SHARED_FIXTURES / "agentuse-v0.15.0" / "xdg_data_home"
SKILLET_FIXTURE = SHARED_FIXTURES / "skilled_crew-v1.0.11" / "state"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes under its own tmp dir, never in the real home or checkout."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("SKILLET_HOME", str(tmp_path / "skillet"))
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path


@pytest.fixture
def agentuse_fixture() -> Path:
    """AgentUse 0.15.0's own XDG_DATA_HOME (skipped outside this team's checkout)."""
    if not AGENTUSE_FIXTURE.is_dir():
        pytest.skip("../shared/fixtures is not beside this checkout")
    return AGENTUSE_FIXTURE


@pytest.fixture
def skillet_fixture() -> Path:
    """skilled_crew 1.0.11's own state directory (skipped outside this team's checkout)."""
    if not SKILLET_FIXTURE.is_dir():
        pytest.skip("../shared/fixtures is not beside this checkout")
    return SKILLET_FIXTURE
