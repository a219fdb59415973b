"""Redaction: secrets never reach the disk when asked, in any of the three layouts."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from agents import Agent, RunConfig, function_tool
from scripted import call, final, model, tools_step

from sessiontape import Recorder
from sessiontape.storage.redaction import DEFAULT_PATTERNS, Redactor

OPENAI_KEY = "sk-proj-" + "A1b2C3d4" * 5
AWS_KEY = "AKIA" + "ABCDEFGHIJKLMNOP"


@pytest.mark.parametrize(("secret", "name"), [
    (OPENAI_KEY, "openai_key"),
    ("sk-ant-api03-" + "x" * 30, "anthropic_key"),
    (AWS_KEY, "aws_access_key"),
    ("ghp_" + "a" * 36, "github_token"),
    ("github_pat_" + "b" * 30, "github_token"),
    ("xoxb-1234567890-abcdef", "slack_token"),
    ("AIza" + "c" * 35, "google_api_key"),
    ("sk_live_" + "d" * 24, "stripe_key"),
    ("Bearer " + "e" * 40, "bearer_token"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----",
     "private_key"),
])
def test_default_patterns(secret: str, name: str) -> None:
    assert name in DEFAULT_PATTERNS
    assert Redactor().text(f"before {secret} after") == f"before [REDACTED:{name}] after"


@pytest.mark.parametrize("text", ["sk-short", "task-force", "AKIA123", "a normal sentence",
                                  "bearer of good news"])
def test_ordinary_text_is_kept(text: str) -> None:
    assert Redactor().text(text) == text


def test_structures_are_copied_not_changed() -> None:
    original = {"a": [OPENAI_KEY, ("x", AWS_KEY)], "n": 3}
    redacted = Redactor().value(original)
    assert redacted == {"a": ["[REDACTED:openai_key]", ("x", "[REDACTED:aws_access_key]")],
                        "n": 3}
    assert original["a"][0] == OPENAI_KEY


@function_tool
def read_config() -> str:
    """Read the service configuration."""
    return f"api_key={OPENAI_KEY}"


def _record(redact: object) -> Recorder:
    agent = Agent(name="Ops", tools=[read_config], model=model(
        tools_step(call("read_config", {})), final(f"Your AWS key {AWS_KEY} looks fine.")))
    rec = Recorder(session_name="secrets", redact=redact)  # type: ignore[arg-type]
    asyncio.run(rec.run(agent, f"check my key {AWS_KEY}",
                        run_config=RunConfig(tracing_disabled=True)))
    assert rec.errors == 0
    return rec


def _everything_written(tmp_path: Path) -> bytes:
    roots = [Path(os.environ["SKILLET_HOME"]), Path(os.environ["XDG_DATA_HOME"])]
    return b"".join(p.read_bytes() for root in roots for p in root.rglob("*") if p.is_file())


def test_without_redaction_the_secrets_are_on_disk(tmp_path: Path) -> None:
    _record(None)
    written = _everything_written(tmp_path)
    assert OPENAI_KEY.encode() in written and AWS_KEY.encode() in written


def test_with_redaction_no_layout_holds_a_secret(tmp_path: Path) -> None:
    rec = _record(True)
    written = _everything_written(tmp_path)
    assert OPENAI_KEY.encode() not in written and AWS_KEY.encode() not in written
    log = rec.log_path.read_text()
    assert "[REDACTED:aws_access_key]" in log and "[REDACTED:openai_key]" in log
    items = asyncio.run(rec.session.get_items())
    assert items[0]["content"] == "check my key [REDACTED:aws_access_key]"
    tool_part = next(p for p in (rec.session_dir).rglob("part/*.json")
                     if b'"tool"' in p.read_bytes())
    assert b"[REDACTED:openai_key]" in tool_part.read_bytes()


def test_a_function_of_your_own(tmp_path: Path) -> None:
    rec = _record(lambda text: text.replace("key", "k**"))
    assert "check my k** [REDACTED" not in rec.log_path.read_text()
    assert "check my k** AKIA" in rec.log_path.read_text()


def test_nothing_is_sent_over_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording, compacting, listing and replaying open no connection (the model here is
    scripted; a real model's own calls are the SDK's, not ours)."""
    import socket

    from sessiontape.storage.catalog.sessions import find_session, list_sessions, show_session

    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("the network is off in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    rec = _record(True)
    asyncio.run(rec.session.compact(force=True))
    assert [s.session_name for s in list_sessions()] == ["secrets"]
    assert len(show_session(find_session("secrets")).turns) == 1
    assert attempts == [] and rec.errors == 0
