"""``sessiontape export`` streams: the conversations come from the catalog one at a time,
oldest first, and each is read and written before the next is taken (issue 26: 1 GB of
sessions in constant memory). The library's exports take any iterable, a list as before.

Conversations are replay logs as skilled_crew writes them (with sessiontape's owner
record, so that their users are exact), their times chosen: some begin in the same
millisecond, and the order is then the user's and the name's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from sessiontape.cli import main
from sessiontape.storage.catalog import index
from sessiontape.storage.catalog.conversation import LedgerConversation
from sessiontape.storage.catalog.index import Catalog, CatalogUnavailable
from sessiontape.storage.catalog.sessions import export_key, list_sessions
from sessiontape.storage.exports import summary as summary_module
from sessiontape.storage.exports.html import export_html
from sessiontape.storage.exports.markdown import export_markdown
from sessiontape.storage.names import sanitize_log_name
from sessiontape.storage.paths import Locations
from sessiontape.storage.times import iso_ms

BASE_MS = 1_790_000_000_000
# (user, name, start offset in ms): three begin in the same millisecond
CONVERSATIONS = [("bob", "zeta", 5_000), ("ann", "beta", 1_000), ("bob", "alpha", 1_000),
                 ("ann", "alpha", 1_000), ("carl", "first", 0), ("ann", "last", 9_000)]


def _at(offset: int) -> str:
    return iso_ms(datetime.fromtimestamp((BASE_MS + offset) / 1000, tz=timezone.utc))


def write_log(user: str, name: str, offset: int) -> Path:
    """A one-turn conversation's replay log (and its owner record) begun at ``offset``."""
    logs = Locations.resolve().logs_root / sanitize_log_name(user)
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    stem = sanitize_log_name(name, ".jsonl")
    lines = [{"kind": "user_message", "userInput": f"{name}?", "timestamp": _at(offset)},
             {"kind": "step", "stepResult": {"type": "text", "text": f"{name}!"},
              "timestamp": _at(offset + 10)},
             {"kind": "final_result", "finalResult": {"text": f"{name}!"},
              "timestamp": _at(offset + 20), "model": "openai/gpt-4.1-nano"}]
    log = logs / f"{stem}.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (logs / f".{stem}.owner.json").write_text(json.dumps({"user_id": user,
                                                          "session_name": name}))
    return log


@pytest.fixture
def recorded(isolated_env: Path) -> list[tuple[str, str]]:
    """The conversations written, as (user, name) in the order the exports take them."""
    for user, name, offset in CONVERSATIONS:
        write_log(user, name, offset)
    return [(user, name) for user, name, _ in
            sorted(CONVERSATIONS, key=lambda c: (c[2], c[0], c[1]))]


def exported_names(path: Path) -> list[tuple[str, str]]:
    """(user, session name) of each ATIF trajectory written, in the file's order."""
    found = []
    for line in path.read_text().splitlines():
        extra = json.loads(line).get("extra") or {}
        found.append((extra.get("user_id"), extra.get("session_name")))
    return found


def test_the_catalog_gives_the_conversations_oldest_first(recorded: list[tuple[str, str]]
                                                          ) -> None:
    where = Locations.resolve()
    with Catalog() as catalog:
        catalog.refresh(where)
        streamed = catalog.oldest_first()
        assert isinstance(streamed, Iterator)
        assert [(i.user_id, i.session_name) for i in streamed] == recorded
        assert [(i.user_id, i.session_name) for i in catalog.oldest_first("ann")] == \
            [pair for pair in recorded if pair[0] == "ann"]
    # the same order as the files read directly
    assert [(i.user_id, i.session_name)
            for i in sorted(list_sessions(locations=where), key=export_key)] == recorded


def test_each_conversation_is_taken_when_the_one_before_is_written(
        recorded: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """The export takes a conversation from the catalog, reads and writes it, then takes the
    next: never the whole listing first (Catalog.listed is not called at all)."""
    events: list[tuple[str, str]] = []
    streamed = Catalog.oldest_first

    def oldest_first(self: Catalog, user: str | None = None) -> Iterator[Any]:
        for info in streamed(self, user):
            events.append(("taken", info.session_name))
            yield info

    read = summary_module.read_conversation

    def read_conversation(conversation: LedgerConversation, problems: list[str]) -> Any:
        events.append(("read", conversation.session_name))
        return read(conversation, problems)

    def listed(*_: object, **__: object) -> Any:
        raise AssertionError("the export listed every conversation first")

    monkeypatch.setattr(Catalog, "oldest_first", oldest_first)
    monkeypatch.setattr(Catalog, "listed", listed)
    monkeypatch.setattr(summary_module, "read_conversation", read_conversation)
    out = tmp_path / "all.jsonl"
    assert main(["export", "--format", "atif", "--out", str(out)]) == 0
    # the first is taken before the export begins (so a failing catalog falls back)
    names = [name for _, name in recorded]
    assert events[:2] == [("taken", names[0]), ("read", names[0])]
    assert events == [(step, name) for name in names for step in ("taken", "read")]
    assert exported_names(out) == recorded


def test_without_the_catalog_the_files_give_the_same_export(
        recorded: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--format", "atif", "--out", str(tmp_path / "catalog.jsonl")]) == 0

    def unavailable(*_: object, **__: object) -> Any:
        raise CatalogUnavailable("catalog X cannot be used (locked); reading the sessions "
                                 "directly")

    monkeypatch.setattr(Catalog, "refresh", unavailable)
    capsys.readouterr()
    assert main(["export", "--format", "atif", "--out", str(tmp_path / "files.jsonl")]) == 0
    assert "reading the sessions directly" in capsys.readouterr().err
    assert (tmp_path / "files.jsonl").read_bytes() == (tmp_path / "catalog.jsonl").read_bytes()
    assert main(["export", "--format", "atif", "--user", "ann",
                 "--out", str(tmp_path / "ann.jsonl")]) == 0
    assert exported_names(tmp_path / "ann.jsonl") == [p for p in recorded if p[0] == "ann"]


def test_a_catalog_failing_midway_writes_nothing(
        recorded: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    streamed = Catalog.oldest_first

    def failing(self: Catalog, user: str | None = None) -> Iterator[Any]:
        for count, info in enumerate(streamed(self, user)):
            if count == 2:
                raise CatalogUnavailable("catalog X cannot be used (disk I/O error); "
                                         "reading the sessions directly")
            yield info

    monkeypatch.setattr(Catalog, "oldest_first", failing)
    out = tmp_path / "half.jsonl"
    assert main(["export", "--format", "markdown", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "disk I/O error" in err and "nothing written" in err
    assert not out.exists() and list(tmp_path.glob(".half.jsonl*")) == []


def test_user_and_session_keep_their_meaning(recorded: list[tuple[str, str]],
                                             tmp_path: Path) -> None:
    out = tmp_path / "bob.jsonl"
    assert main(["export", "--format", "atif", "--user", "bob", "--out", str(out)]) == 0
    assert exported_names(out) == [p for p in recorded if p[0] == "bob"]
    named = tmp_path / "named.jsonl"
    assert main(["export", "--format", "atif", "--session", "last", "--session", "first",
                 "--session", "last", "--out", str(named)]) == 0
    assert exported_names(named) == [("carl", "first"), ("ann", "last")]
    # alpha is bob's and ann's: ambiguous without --user; unknown: 1
    assert main(["export", "--format", "atif", "--session", "alpha",
                 "--out", str(tmp_path / "x.jsonl")]) == 2
    assert main(["export", "--format", "atif", "--session", "nobody",
                 "--out", str(tmp_path / "x.jsonl")]) == 1
    assert main(["export", "--format", "atif", "--user", "dora",
                 "--out", str(tmp_path / "dora.jsonl")]) == 0
    assert exported_names(tmp_path / "dora.jsonl") == []


def conversation(user: str, name: str) -> LedgerConversation:
    log = Locations.resolve().logs_root / sanitize_log_name(user) / \
        f"{sanitize_log_name(name, '.jsonl')}.jsonl"
    return LedgerConversation(user, name, None, log, "skilled_crew")


def test_the_library_takes_a_list_or_any_iterable(recorded: list[tuple[str, str]],
                                                 tmp_path: Path) -> None:
    given = [conversation(*pair) for pair in recorded]
    export_markdown(tmp_path / "list.md", given)
    export_markdown(tmp_path / "generator.md", (c for c in given))
    assert (tmp_path / "list.md").read_bytes() == (tmp_path / "generator.md").read_bytes()
    # one conversation, from a generator too: the page is titled by it
    export_html(tmp_path / "one.html", iter(given[:1]))
    assert f"<title>{given[0].session_name}</title>" in (tmp_path / "one.html").read_text()
    export_html(tmp_path / "two.html", iter(given[:2]))
    assert "<title>sessiontape</title>" in (tmp_path / "two.html").read_text()


def test_the_catalog_is_closed_when_the_export_ends(recorded: list[tuple[str, str]],
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    closed: list[bool] = []
    close = index.Catalog.close

    def closing(self: Catalog) -> None:
        closed.append(self._conn is not None)
        close(self)

    monkeypatch.setattr(index.Catalog, "close", closing)
    assert main(["export", "--format", "atif", "--out", str(tmp_path / "a.jsonl")]) == 0
    assert True in closed
