"""Shared test set-up: an isolated environment and the original tools' fixtures.

The scaffolding for driving the executable (processes, terminals, waits, snapshots) is in
``harness.py``; scripted models and readers of what a Recorder wrote are in ``scripted.py``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

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


# -- PostgreSQL ---------------------------------------------------------------------------
# The tests marked `postgres` run against a real server: SESSIONTAPE_TEST_POSTGRES (default
# the local one .ci/run starts). Without one they are not run, and the run says so once;
# with SESSIONTAPE_TEST_POSTGRES_REQUIRED set (CI), a missing server fails the run.
POSTGRES = os.environ.get("SESSIONTAPE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _postgres_missing(config: pytest.Config) -> str | None:
    """Why the server cannot be used (None: it can); asked once per process."""
    if not hasattr(config, "_postgres_missing"):
        try:
            import psycopg

            psycopg.connect(POSTGRES, connect_timeout=3).close()
            config._postgres_missing = None  # type: ignore[attr-defined]
        except Exception as exc:  # ImportError too: the postgres extra is not installed
            config._postgres_missing = f"{type(exc).__name__}: {exc}".splitlines()[0]  # type: ignore[attr-defined]
    missing: str | None = config._postgres_missing  # type: ignore[attr-defined]
    return missing


def pytest_configure(config: pytest.Config) -> None:
    required = os.environ.get("SESSIONTAPE_TEST_POSTGRES_REQUIRED")
    if required and not hasattr(config, "workerinput") and _postgres_missing(config):
        raise pytest.UsageError(f"the PostgreSQL tests need {POSTGRES} "
                                f"(SESSIONTAPE_TEST_POSTGRES_REQUIRED is set): "
                                f"{_postgres_missing(config)}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = [item for item in items if item.get_closest_marker("postgres")]
    if not wanted or os.environ.get("SESSIONTAPE_TEST_POSTGRES_REQUIRED") \
            or _postgres_missing(config) is None:
        return
    config.hook.pytest_deselected(items=wanted)
    items[:] = [item for item in items if not item.get_closest_marker("postgres")]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    wanted = config.getoption("markexpr") != "not postgres"
    if wanted and _postgres_missing(config) is not None:
        terminalreporter.write_line(
            f"sessiontape: the PostgreSQL tests were not run: no server at {POSTGRES} "
            f"({_postgres_missing(config)}); set SESSIONTAPE_TEST_POSTGRES to one")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A store URL of its own: a new schema on the test server, dropped afterwards."""
    import psycopg

    schema = f"st_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in POSTGRES else "?"
    try:
        yield f"{POSTGRES}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
