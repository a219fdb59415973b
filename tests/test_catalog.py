"""The catalog (``storage/catalog/index.py``): one SQLite index of every conversation.

The module's world records conversations in-process with the real SDK Runner on scripted
models (parallel tool calls, an ``Agent.as_tool`` subagent, a failing tool, a handoff, a
streamed second turn), leaves one with its log alone, adds AgentUse's own tree and
skilled_crew's own logs, and indexes them all; the tests read the catalog against the files.
Tests that change files record their own conversations.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from conftest import AGENTUSE_FIXTURE, SKILLET_FIXTURE
from harness import isolated
from scripted import call, fail, final, model, reasoning, run_agent, square, tools_step, usage

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import LoadedSession, load_session
from sessiontape.storage.catalog.index import (
    SCHEMA_VERSION,
    SNIPPET_END,
    SNIPPET_START,
    Catalog,
    CatalogUnavailable,
    SearchSyntaxError,
    default_catalog_path,
)
from sessiontape.storage.catalog.sessions import (
    UnknownSessionError,
    find_session,
    list_sessions,
    store_growth,
)
from sessiontape.storage.file_writes import atomic_write
from sessiontape.storage.ids import new_ulid
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.paths import Locations, SkilletPaths
from sessiontape.storage.skillet import log_entries
from sessiontape.storage.skillet.item_store import SCHEMA as ITEM_SCHEMA
from sessiontape.storage.skillet.log_reader import SessionLogReader
from sessiontape.storage.tables import ARCHIVE_TABLE

ANN, BOB = "ann@example.com", "bob@example.com"


async def plan_trip(rec: Recorder, word: str) -> None:
    """Two turns, prompts ``<word> prompt N``: reasoning, three parallel calls (a tool, a
    subagent with a tool of its own, a failing tool) and a handoff to Closer; then,
    streamed, the tool and the subagent, and the answer."""
    for turn in range(2):
        helper = Agent(name="Helper", instructions="Help.", tools=[square], model=model(
            tools_step(call("square", {"n": 9})), final(f"helped {word} {turn}", usage(3, 1))))
        closer = Agent(name="Closer", model=model(final(f"closed {word} {turn}", usage(4, 2))))
        calls = [call("square", {"n": turn + 2}), call("helper", {"input": f"q{turn}"})]
        calls += [call("fail", {"city": "Atlantis"})] if turn == 0 else []
        answer = tools_step(call("transfer_to_closer", {}), u=usage(6, 1)) if turn == 0 \
            else final(f"{word} answer 1", usage(20, 4, reasoning=3, cached=5))
        planner = Agent(name="Planner", instructions="Plan trips.",
                        tools=[square, fail, helper.as_tool("helper", "Ask the helper.")],
                        handoffs=[closer], model=model(
                            tools_step(*calls, u=usage(10, 2),
                                       extra=[reasoning(f"think about {word}")]), answer))
        await run_agent(rec, planner, f"{word} prompt {turn}", streamed=turn == 1)


async def squares(rec: Recorder, prompt: str, answer: str) -> None:
    """One turn with two parallel calls of one tool."""
    agent = Agent(name="Counter", tools=[square], model=model(
        tools_step(call("square", {"n": 2}), call("square", {"n": 3})),
        final(answer, usage(5, 5))))
    await run_agent(rec, agent, prompt, streamed=False)


def record(*runs: tuple[str, str, Any]) -> dict[str, Recorder]:
    """Record each ``(user, session, scenario)`` under the current environment."""
    async def main() -> dict[str, Recorder]:
        recorders = {}
        for user, name, scenario in runs:
            rec = Recorder(user, name)
            await scenario(rec)
            await rec.aclose()
            assert rec.errors == 0
            recorders[name] = rec
        return recorders

    return asyncio.run(main())


def settle() -> None:
    """Wait past the catalog's racy window, so that the files just written count as
    settled (a file changed within it is looked at again by the next refresh)."""
    time.sleep(0.1)


@dataclass
class Where:
    """The three layouts' locations (the AgentUse root of the recordings' project)."""

    store: Path
    logs: Path
    root: Path

    def refresh(self, catalog: Catalog, *, full: bool = False) -> Any:
        return catalog.refresh(self.locations, full=full)

    @property
    def locations(self) -> Locations:
        return Locations(self.store, self.logs, self.root)


def where_of(rec: Recorder) -> Where:
    skillet = SkilletPaths.resolve()
    assert rec.session_dir is not None
    return Where(skillet.store_file, skillet.logs_root, rec.session_dir.parent)


@dataclass
class World:
    where: Where
    catalog: Catalog
    trip_dir: Path
    squares_dir: Path
    logonly_log: Path
    foreign: bool  # AgentUse's and skilled_crew's own files were added


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("catalog")
    with isolated(base):
        recs = record((ANN, "trip", lambda r: plan_trip(r, "zanzibar")),
                      (ANN, "logonly", lambda r: plan_trip(r, "quokka")),
                      (BOB, "squares", lambda r: squares(r, "square 2 and 3", "squared")))
        where = where_of(recs["trip"])
        logonly = recs["logonly"]
        assert logonly.session_dir is not None
        shutil.rmtree(logonly.session_dir)  # its log alone is left
        foreign = AGENTUSE_FIXTURE.is_dir() and SKILLET_FIXTURE.is_dir()
        if foreign:
            for session in AGENTUSE_FIXTURE.glob("agentuse/project/*/session/*"):
                shutil.copytree(session, where.root / session.name)
            shutil.copytree(SKILLET_FIXTURE / ".agent_session_logs" / "john_example_com",
                            where.logs / "john_example_com")
        settle()
        catalog = Catalog()
        summary = where.refresh(catalog)
        assert summary.rebuilt and summary.problems == []
        trip, bob = recs["trip"].session_dir, recs["squares"].session_dir
        assert trip is not None and bob is not None
        yield World(where, catalog, trip, bob, logonly.log_path, foreign)
        catalog.close()


def sessions(hits: list[Any]) -> set[str]:
    return {hit.session for hit in hits}


def all_sessions(session: LoadedSession) -> Iterator[LoadedSession]:
    yield session
    for sub in session.subagents:
        yield from all_sessions(sub)


# -- search ---------------------------------------------------------------------------------


def test_a_phrase_finds_exactly_the_conversations_holding_it(world: World) -> None:
    hits = world.catalog.search('"zanzibar prompt"')
    assert sessions(hits) == {"trip"}
    assert sorted((h.turn, h.kind, h.user) for h in hits) == [(1, "user", ANN), (2, "user", ANN)]
    assert sessions(world.catalog.search('"quokka prompt"')) == {"logonly"}
    assert sessions(world.catalog.search('"square 2 and 3"')) == {"squares"}
    assert world.catalog.search('"zanzibar quokka"') == []
    (hit,) = world.catalog.search('"zanzibar prompt 1"')
    assert hit.snippet == f"{SNIPPET_START}zanzibar prompt 1{SNIPPET_END}"


def test_turn_numbers_and_kinds_are_the_conversations(world: World) -> None:
    for word in ("zanzibar", "quokka"):
        (closed,) = world.catalog.search(f'"closed {word} 0"')
        assert (closed.turn, closed.kind, closed.agent) == (1, "answer", "Closer")
        (last,) = world.catalog.search(f'"{word} answer 1"')
        assert (last.turn, last.kind, last.agent) == (2, "answer", "Planner")
        helped = world.catalog.search(f'"helped {word} 1"', kind="answer")
        assert [(h.turn, h.agent) for h in helped] == [(2, "Helper")]
        thought = world.catalog.search(f'"think about {word}"')
        assert {(h.turn, h.kind) for h in thought} == {(1, "reasoning"), (2, "reasoning")}
    failed = world.catalog.search("Atlantis", kind="tool_output")
    assert {(h.session, h.turn, h.tool) for h in failed} == {("trip", 1, "fail"),
                                                              ("logonly", 1, "fail")}


def test_prefix_not_and_or(world: World) -> None:
    assert sessions(world.catalog.search("zanzi*")) == {"trip"}
    assert sessions(world.catalog.search("prompt NOT zanzibar", kind="user")) == {"logonly"}
    assert sessions(world.catalog.search("zanzibar OR squared")) == {"trip", "squares"}
    assert sessions(world.catalog.search("zanzibar AND quokka")) == set()


def test_filters(world: World) -> None:
    catalog = world.catalog
    assert sessions(catalog.search("squared OR zanzibar", user=BOB)) == {"squares"}
    by_tool = catalog.search("9", tool="square")
    assert by_tool and {h.tool for h in by_tool} == {"square"}
    assert {h.kind for h in by_tool} <= {"tool_args", "tool_output"}
    assert {h.agent for h in catalog.search("helped*", agent="Helper")} == {"Helper"}
    assert catalog.search("helped*", agent="Closer") == []
    assert catalog.search("zanzibar", since=4_000_000_000_000) == []
    assert sessions(catalog.search("zanzibar", since=0)) == {"trip"}
    assert len(catalog.search("prompt", limit=1)) == 1


@pytest.mark.parametrize("query", ['"unclosed', "AND", "zanzibar NOT", "col:umn", "(a"])
def test_a_malformed_raw_query_is_a_clear_error(world: World, query: str) -> None:
    """FTS5's own syntax (``raw``) can be malformed; a plain query cannot
    (tests/test_search_query.py)."""
    with pytest.raises(SearchSyntaxError, match="invalid search query") as raised:
        world.catalog.search(query, raw=True)
    assert isinstance(raised.value, ValueError)
    world.catalog.search(query)  # the same text, searched as written: no error


# -- usage and conversations ------------------------------------------------------------------


def step_finishes(directory: Path) -> list[dict[str, Any]]:
    return [part for s in all_sessions(load_session(directory)) for m in s.messages
            for part in m.parts if part["type"] == "step-finish"]


def test_usage_totals_equal_the_step_finish_parts_and_model_call_lines(world: World) -> None:
    parts = step_finishes(world.trip_dir) + step_finishes(world.squares_dir)
    lines = [e.data for e in SessionLogReader(world.logonly_log).entries()
             if e.kind == "model_call"]
    cost = sum(p["cost"] for p in parts) + sum(line["cost"] for line in lines)
    inputs = sum(p["tokens"]["input"] for p in parts) + \
        sum(line["usage"]["inputTokens"] for line in lines)
    reasoning_tokens = sum(p["tokens"]["reasoning"] for p in parts) + \
        sum(line["usage"]["reasoningTokens"] for line in lines)
    assert cost > 0 and reasoning_tokens > 0
    for group in ("daily", "monthly", "session", "model", "agent"):
        rows = world.catalog.usage(group)
        # AgentUse's own exchanges (no step-finish parts) are counted from message.json: cost 0
        assert sum(r.cost for r in rows) == pytest.approx(cost), group
        ours = [r for r in rows if group != "session" or r.user is not None]
        assert sum(r.calls for r in ours) >= len(parts) + len(lines)
    by_session = {(r.user, r.key): r for r in world.catalog.usage("session")}
    assert sum(r.input_tokens for (user, _), r in by_session.items()
               if user in (ANN, BOB)) == inputs
    trip = step_finishes(world.trip_dir)
    assert by_session[(ANN, "trip")].cost == pytest.approx(sum(p["cost"] for p in trip))
    assert by_session[(ANN, "trip")].calls == len(trip)
    assert by_session[(ANN, "trip")].cached_tokens == sum(p["tokens"]["cache"]["read"]
                                                          for p in trip) > 0
    agents = {r.key for r in world.catalog.usage("agent")}
    assert {"Planner", "Helper", "Closer", "Counter"} <= agents
    assert world.catalog.usage("model", since=4_000_000_000_000) == []
    with pytest.raises(ValueError, match="unknown usage group"):
        world.catalog.usage("hourly")


def test_conversations_are_what_sessions_list_reads_from_the_files(world: World) -> None:
    """The catalog's listing is ``list_sessions``'s, field for field (the same rules, the
    same order), for all users and for one."""
    listed = world.catalog.conversations()
    assert [i.to_json() for i in listed] == \
        [i.to_json() for i in list_sessions(locations=world.where.locations)]
    assert [i.to_json() for i in world.catalog.conversations(user=BOB)] == \
        [i.to_json() for i in list_sessions(BOB, locations=world.where.locations)]
    rows = {(r.user_id, r.session_name): r for r in listed}
    trip = rows[(ANN, "trip")]
    assert (trip.turns, trip.origin, trip.agent, trip.status) == \
        (2, "sessiontape", "Planner", "completed")
    assert "agentuse" in trip.sources and trip.items > 0 and trip.agentuse_dir == world.trip_dir
    logonly = rows[(ANN, "logonly")]
    assert (logonly.turns, logonly.log_path, "agentuse" in logonly.sources) == \
        (2, world.logonly_log, False)  # its tree is gone, its link is left
    if world.foreign:
        foreign = [r for r in listed if r.user_id is None]
        assert {r.origin for r in foreign} == {"agentuse"} and len(foreign) == 4
        crew = [r for r in listed if r.user_id == "john_example_com"]
        assert {r.origin for r in crew} == {"skilled_crew"} and len(crew) == 2
        assert sessions(world.catalog.search('"README says hello"')) == \
            {r.session_name for r in foreign if r.session_name.endswith("-tools")}


def test_find_is_what_find_session_finds(world: World) -> None:
    """By name, by AgentUse id prefix (of a tree no pair links), with --user, and the
    same errors for an unknown name."""
    where = world.where.locations
    for query, user in (("trip", None), ("squares", BOB), ("logonly", ANN)):
        assert world.catalog.find(query, user).to_json() == \
            find_session(query, user, locations=where).to_json()
    if world.foreign:
        tree = next(r for r in world.catalog.conversations() if r.user_id is None)
        assert tree.agentuse_id is not None
        prefix = tree.agentuse_id[:20].lower()
        assert world.catalog.find(prefix).session_name == tree.session_name
    with pytest.raises(UnknownSessionError, match="no session named 'nobody'"):
        world.catalog.find("nobody")
    with pytest.raises(UnknownSessionError):
        world.catalog.find("trip", BOB)


def test_a_no_change_refresh_re_reads_nothing(world: World) -> None:
    summary = world.where.refresh(world.catalog)
    assert (summary.reindexed, summary.dropped, summary.rebuilt) == (0, 0, False)
    assert summary.conversations == len(world.catalog.conversations())


# -- refresh ----------------------------------------------------------------------------------


def test_an_atomic_rename_changes_the_directory_mtime(tmp_path: Path) -> None:
    """What refresh relies on: a file replaced by rename, or added, changes its directory's
    mtime, without any other file of the directory being touched."""
    directory = tmp_path / "part"
    directory.mkdir()
    atomic_write(directory / "a.json", b"{}")
    for change in (lambda: atomic_write(directory / "a.json", b'{"x": 1}'),
                   lambda: atomic_write(directory / "b.json", b"{}"),
                   lambda: os.unlink(directory / "b.json")):
        before = os.stat(directory).st_mtime_ns
        time.sleep(0.02)
        change()
        assert os.stat(directory).st_mtime_ns != before


def forget(rec: Recorder) -> None:
    """Remove every trace of a conversation: store rows, link, log, owner record, tree."""
    with closing(sqlite3.connect(SkilletPaths.resolve().store_file)) as conn, conn:
        for table in ("session_items", "sessiontape_links"):
            conn.execute(f"DELETE FROM {table} WHERE user_id = ? AND session_name = ?",
                         (rec.user_id, rec.session_name))
    rec.log_path.unlink()
    rec.log_path.with_name(f".{rec.session_name}.owner.json").unlink()
    assert rec.session_dir is not None
    shutil.rmtree(rec.session_dir)


def text_part(directory: Path, text: str) -> Path:
    return next(p for p in directory.glob("*/part/*.json")
                if json.loads(p.read_text()).get("text") == text)


def test_refresh_follows_a_new_turn_an_edit_and_a_deletion() -> None:
    recs = record((ANN, "alpha", lambda r: squares(r, "alpha first", "alpha done")),
                  (ANN, "beta", lambda r: squares(r, "beta first", "beta done")))
    where = where_of(recs["alpha"])
    settle()
    with Catalog() as catalog:
        assert where.refresh(catalog).reindexed == 2
        assert where.refresh(catalog).reindexed == 0

        record((ANN, "alpha", lambda r: squares(r, "alpha second", "alpha again")))
        settle()
        summary = where.refresh(catalog)
        assert (summary.reindexed, summary.dropped, summary.conversations) == (1, 0, 2)
        assert [(h.session, h.turn) for h in catalog.search('"alpha second"')] == [("alpha", 2)]
        assert {(r.session_name, r.turns) for r in catalog.conversations()} == {("alpha", 2),
                                                                               ("beta", 1)}

        beta_dir = recs["beta"].session_dir
        assert beta_dir is not None
        part = text_part(beta_dir, "beta done")
        atomic_write(part, part.read_bytes().replace(b"beta done", b"beta edited"))
        settle()
        assert where.refresh(catalog).reindexed == 1
        assert sessions(catalog.search('"beta edited"')) == {"beta"}
        assert catalog.search('"beta done"') == []

        forget(recs["beta"])
        settle()
        summary = where.refresh(catalog)
        assert (summary.reindexed, summary.dropped, summary.conversations) == (0, 1, 1)
        assert catalog.search("beta") == []
        assert [r.session_name for r in catalog.conversations()] == ["alpha"]
        assert {r.key for r in catalog.usage("session")} == {"alpha"}


def test_a_deleted_tree_is_read_from_its_log_and_deleting_the_catalog_loses_nothing() -> None:
    recs = record((ANN, "gamma", lambda r: squares(r, "gamma first", "gamma done")))
    where = where_of(recs["gamma"])
    settle()
    path = default_catalog_path()
    with Catalog() as catalog:
        where.refresh(catalog)
        before = catalog.search("gamma")
        assert "agentuse" in catalog.conversations()[0].sources
    path.unlink()
    with Catalog() as catalog:
        summary = where.refresh(catalog)
        assert summary.rebuilt and summary.reindexed == 1
        assert catalog.search("gamma") == before
        assert recs["gamma"].session_dir is not None
        shutil.rmtree(recs["gamma"].session_dir)
        settle()
        assert where.refresh(catalog).reindexed == 1
        (row,) = catalog.conversations()
        assert ("agentuse" in row.sources, row.turns) == (False, 1)
        assert sessions(catalog.search('"gamma done"')) == {"gamma"}


def age(*paths: Path, days: float = 2) -> None:
    """Set back the mtimes of ``paths`` and of everything under them: an old, settled
    conversation (only a recent one has its whole tree stated by every refresh)."""
    when = time.time() - days * 86400
    for path in paths:
        for each in [path, *(path.rglob("*") if path.is_dir() else ())]:
            os.utime(each, (when, when), follow_symlinks=False)


def edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Rewrite ``path`` in place (no rename: its directory's mtime stays), keeping it old."""
    before = path.stat()
    with open(path, "r+b") as file:
        data = file.read().replace(old, new)
        file.seek(0)
        file.write(data)
        file.truncate()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))


def record_old(count: int) -> dict[str, Recorder]:
    """Conversations ``old0``... of one turn each (``old N first``, ``old N done``), their
    trees and logs dated two days back."""
    recs = record(*((ANN, f"old{i}", lambda r, i=i: squares(r, f"old {i} first", f"old {i} done"))
                    for i in range(count)))
    for rec in recs.values():
        assert rec.session_dir is not None
        age(rec.session_dir, rec.log_path)
    return recs


def test_an_old_trees_edit_no_head_shows_is_seen_in_turn_and_at_once_with_full() -> None:
    """Of old conversations every refresh states the heads (their logs) and one
    ``deep_slice`` of trees: a part edited in place (no directory changes, the log
    untouched) is seen within conversations / deep_slice refreshes, or at once with full."""
    recs = record_old(3)
    where = where_of(recs["old0"])
    with Catalog(deep_slice=1) as catalog:
        assert where.refresh(catalog).reindexed == 3
        assert where.refresh(catalog).reindexed == 0
        tree = recs["old1"].session_dir
        assert tree is not None
        edit_in_place(text_part(tree, "old 1 done"), b"old 1 done", b"old 1 edit")
        assert [where.refresh(catalog).reindexed for _ in range(3)].count(1) == 1
        assert sessions(catalog.search('"old 1 edit"')) == {"old1"}
        assert catalog.search('"old 1 done"') == []

        edit_in_place(text_part(tree, "old 1 edit"), b"old 1 edit", b"old 1 full")
        assert where.refresh(catalog, full=True).reindexed == 1
        assert sessions(catalog.search('"old 1 full"')) == {"old1"}


def append_log(log_path: Path, *entries: dict[str, Any]) -> None:
    """``entries`` appended to a replay log as skilled_crew appends them, the log kept old."""
    with open(log_path, "ab") as log:
        log.writelines(json.dumps(entry).encode() + b"\n" for entry in entries)
    age(log_path)


def read_from_its_log(rec: Recorder) -> None:
    """Leave ``rec``'s conversation without its tree and the store's link to it (as
    skilled_crew records one: items and a log): the catalog reads it from its log."""
    assert rec.session_dir is not None
    shutil.rmtree(rec.session_dir)
    with closing(sqlite3.connect(where_of(rec).store)) as conn, conn:
        conn.execute("DELETE FROM sessiontape_links WHERE session_name = ?",
                     (rec.session_name,))


def test_a_head_no_store_pair_watches_is_seen_at_once_however_old() -> None:
    """No tree stated (deep_slice 0), no quiet head (head_slice 0): an old log with no pair
    in the store (skilled_crew's, its store elsewhere) appended to, and an old AgentUse tree
    whose session.json is replaced (a writer's rename), are both re-read by the next
    refresh: their heads are stated by every refresh."""
    recs = record((ANN, "logged", lambda r: squares(r, "logged first", "logged done")),
                  (ANN, "treed", lambda r: squares(r, "treed first", "treed done")))
    where = where_of(recs["logged"])
    logged, treed = recs["logged"], recs["treed"]
    assert treed.session_dir is not None
    read_from_its_log(logged)
    treed.log_path.unlink()  # a tree no log or link names: an AgentUse session, head = its dir
    treed.log_path.with_name(f".{treed.session_name}.owner.json").unlink()
    with closing(sqlite3.connect(where.store)) as conn, conn:
        conn.execute("DELETE FROM sessiontape_links")
        conn.execute("DELETE FROM session_items")
    age(logged.log_path, treed.session_dir)
    with Catalog(deep_slice=0, head_slice=0) as catalog:
        assert where.refresh(catalog).reindexed == 2
        assert where.refresh(catalog).reindexed == 0
        append_log(logged.log_path, log_entries.user_message("logged second"),
                   log_entries.final_result("a kiwi answer"))
        session_json = treed.session_dir / "session.json"
        info = json.loads(session_json.read_bytes())
        atomic_write(session_json, json.dumps({**info, "status": "error"}).encode())
        age(session_json)
        summary = where.refresh(catalog)
        assert (summary.reindexed, summary.conversations) == (2, 2)
        assert [(h.session, h.turn) for h in catalog.search("kiwi")] == [("logged", 2)]
        statuses = {r.session_name: r.status for r in catalog.conversations()}
        assert statuses[treed.session_dir.name] == "error"


def test_an_old_pairs_log_is_watched_through_the_store() -> None:
    """The log of a store pair found unchanged HOT_NS after its last change is quiet: a
    refresh states only ``head_slice`` of those, in turn. A turn recorded into one (the store
    given its items) is re-read at once however old its files look; its log appended to
    with no item stored (a turn that failed before storing any) within conversations /
    head_slice refreshes, and at once with ``full``."""
    recs = record_old(3)
    where = where_of(recs["old0"])
    read_from_its_log(recs["old1"])
    settle()  # the roots too: one changed within the racy window is a change next time
    with Catalog(deep_slice=0, head_slice=1) as catalog:
        assert where.refresh(catalog).reindexed == 3
        assert where.refresh(catalog).reindexed == 0  # the three heads found quiet

        record((ANN, "old2", lambda r: squares(r, "old 2 again", "a fig answer")))
        assert recs["old2"].session_dir is not None
        age(recs["old2"].log_path, recs["old2"].session_dir)
        summary = where.refresh(catalog)
        assert (summary.reindexed, summary.listed) == (1, False)
        assert [(h.session, h.turn) for h in catalog.search("fig")] == [("old2", 2)]

        append_log(recs["old1"].log_path, log_entries.user_message("old 1 again"),
                   log_entries.final_result("a kiwi answer"))
        assert [where.refresh(catalog).reindexed for _ in range(3)].count(1) == 1
        assert [(h.session, h.turn) for h in catalog.search("kiwi")] == [("old1", 2)]

        append_log(recs["old1"].log_path, log_entries.user_message("old 1 once more"),
                   log_entries.final_result("a lime answer"))
        assert where.refresh(catalog, full=True).reindexed == 1
        assert [(h.session, h.turn) for h in catalog.search("lime")] == [("old1", 3)]


def test_agentuse_writing_an_old_logged_conversations_tree_is_seen_in_turn() -> None:
    """AgentUse continuing a conversation sessiontape logged writes its tree alone (not the
    store, not the log), replacing files by renaming: the tree's directory changes. A quiet
    conversation's directory is stated with its log, in turn: seen within conversations /
    head_slice refreshes, though no tree is stated (deep_slice 0)."""
    recs = record_old(3)
    where = where_of(recs["old0"])
    tree = recs["old1"].session_dir
    assert tree is not None
    with Catalog(deep_slice=0, head_slice=1) as catalog:
        assert where.refresh(catalog).reindexed == 3
        assert where.refresh(catalog).reindexed == 0  # quiet
        session_json = tree / "session.json"
        info = json.loads(session_json.read_bytes())
        atomic_write(session_json, json.dumps({**info, "status": "error"}).encode())
        age(session_json)
        settle()
        assert [where.refresh(catalog).reindexed for _ in range(3)].count(1) == 1
        statuses = {r.session_name: r.status for r in catalog.conversations()}
        assert statuses == {"old0": "completed", "old1": "error", "old2": "completed"}


def test_a_log_written_after_its_items_is_seen_however_late() -> None:
    """A refresh that re-reads a conversation because its store grew may come before the
    rest of that turn reaches its log. The log is stated by every refresh until one finds it
    unchanged HOT_NS after its last change (head_slice 0: never in turn), so the rest is
    seen by the next refresh, however much later it comes and however old the log looks."""
    recs = record_old(1)
    where = where_of(recs["old0"])
    log = recs["old0"].log_path
    read_from_its_log(recs["old0"])
    with Catalog(deep_slice=0, head_slice=0) as catalog:
        assert where.refresh(catalog).reindexed == 1
        assert where.refresh(catalog).reindexed == 0  # quiet
        append_log(log, log_entries.user_message("old 0 again"))
        add_item(where.store, ANN, "old0")
        assert where.refresh(catalog).reindexed == 1  # through the store
        assert catalog.search("kiwi") == []
        append_log(log, log_entries.final_result("a kiwi answer"))  # logged after its items
        assert where.refresh(catalog).reindexed == 1
        assert [(h.session, h.turn) for h in catalog.search("kiwi")] == [("old0", 2)]
        assert where.refresh(catalog).reindexed == 0


def test_a_log_whose_pair_is_gone_is_watched_by_its_head_again() -> None:
    """A quiet log whose items are deleted from the store (its pair gone, the log left: a
    conversation of the logs alone) is read again, and from then on stated by every
    refresh (head_slice 0): no store shows its turns now."""
    recs = record_old(1)
    where = where_of(recs["old0"])
    read_from_its_log(recs["old0"])
    with Catalog(deep_slice=0, head_slice=0) as catalog:
        assert where.refresh(catalog).reindexed == 1
        assert where.refresh(catalog).reindexed == 0  # quiet
        with closing(sqlite3.connect(where.store)) as conn, conn:
            conn.execute("DELETE FROM session_items")
        assert where.refresh(catalog).reindexed == 1  # no items now
        assert where.refresh(catalog).reindexed == 0
        append_log(recs["old0"].log_path, log_entries.user_message("old 0 again"),
                   log_entries.final_result("a kiwi answer"))
        assert where.refresh(catalog).reindexed == 1
        assert [(h.session, h.turn) for h in catalog.search("kiwi")] == [("old0", 2)]


def test_a_recent_trees_edit_is_seen_by_the_next_refresh() -> None:
    """A conversation with a file changed in the last HOT_NS has its whole tree stated by
    every refresh, deep_slice 0 or not."""
    recs = record((ANN, "fresh", lambda r: squares(r, "fresh first", "fresh done")))
    where = where_of(recs["fresh"])
    tree = recs["fresh"].session_dir
    assert tree is not None
    settle()
    with Catalog(deep_slice=0) as catalog:
        where.refresh(catalog)
        part = text_part(tree, "fresh done")
        edit_in_place(part, b"fresh done", b"fresh edit")
        os.utime(part)  # now: recent
        settle()
        assert where.refresh(catalog).reindexed == 1
        assert sessions(catalog.search('"fresh edit"')) == {"fresh"}


def test_find_brings_in_line_the_conversations_it_names_and_no_other() -> None:
    """``find(where=...)`` (what ``sessions show`` asks) re-reads the conversation it is
    asked for, however it changed (here a part edited in place that no head shows and no
    refresh with deep_slice 0 sees), and finds one added since; another conversation's
    change, even to its head, is left to the next whole refresh."""
    recs = record_old(2)
    where = where_of(recs["old0"])
    with Catalog(deep_slice=0) as catalog:
        assert where.refresh(catalog).reindexed == 2
        for name in ("old0", "old1"):
            tree = recs[name].session_dir
            assert tree is not None
            done = f"old {name[-1]} done".encode()
            edit_in_place(text_part(tree, done.decode()), done, done.replace(b"done", b"edit"))
        with open(recs["old1"].log_path, "ab") as log:  # and old1's head
            log.write(json.dumps(log_entries.user_message("old 1 again")).encode() + b"\n")
        age(recs["old1"].log_path, days=1)

        assert catalog.find("old0", where=where.locations).session_name == "old0"
        assert sessions(catalog.search('"old 0 edit"')) == {"old0"}
        assert catalog.search('"old 1 edit"') == []  # not named: not read

        added = record((ANN, "added", lambda r: squares(r, "added first", "added done")))
        settle()
        assert catalog.find("added", where=where.locations).log_path == \
            added["added"].log_path
        summary = where.refresh(catalog)
        assert (summary.reindexed, summary.conversations) == (1, 3)  # old1 only
        assert sessions(catalog.search('"old 1 edit"')) == {"old1"}


def test_names_and_texts_that_are_not_utf8_are_catalogued() -> None:
    """A skilled_crew log whose file name is not UTF-8 (the byte 0xE9, read as a lone
    surrogate) and whose lines hold lone surrogates (JSON's \\udXXX): listed exactly as
    sessions list lists it, found by search (the odd characters shown as U+FFFD), and not
    read again by the next refresh."""
    logs = SkilletPaths.resolve().logs_root / "bob"
    logs.mkdir(parents=True)
    with open(os.fsencode(logs) + b"/caf\xe9.jsonl", "wb") as log:
        for entry in (log_entries.user_message("kites \ud800 over the bay"),
                      log_entries.final_result("kites \udce9 fly")):
            log.write(dumps_compact(entry) + b"\n")
    where = Locations.resolve()
    settle()
    with Catalog() as catalog:
        assert catalog.refresh(where).reindexed == 1
        assert [i.to_json() for i in catalog.conversations()] == \
            [i.to_json() for i in list_sessions(locations=where)]
        (row,) = catalog.conversations()
        assert (row.session_name, row.turns) == ("caf\udce9", 1)
        assert {(h.session, h.kind) for h in catalog.search("kites")} == \
            {("caf\ufffd", "user"), ("caf\ufffd", "answer")}
        assert catalog.find("caf\udce9").log_path == row.log_path
        assert catalog.refresh(where).reindexed == 0


def test_a_build_cut_short_keeps_what_it_committed() -> None:
    """A first build killed (here: interrupted) after 40 of 60 conversations, committing
    every 25: the next refresh reads only the 35 not committed, and the catalog is whole."""
    logs = SkilletPaths.resolve().logs_root / "carol"
    logs.mkdir(parents=True)
    for number in range(60):
        entries = (log_entries.user_message(f"question {number}"),
                   log_entries.final_result(f"answer {number} about kites"))
        (logs / f"chat{number}.jsonl").write_bytes(
            b"".join(dumps_compact(entry) + b"\n" for entry in entries))
    settle()

    def stop_at_40(done: int, total: int) -> None:
        if done == 40:
            raise KeyboardInterrupt

    where = Locations.resolve()
    with Catalog(commit_every=25) as catalog, pytest.raises(KeyboardInterrupt):
        catalog.refresh(where, progress=stop_at_40)
    with Catalog(commit_every=25) as catalog:
        assert len(catalog.conversations()) == 25
        summary = catalog.refresh(where)
        assert (summary.reindexed, summary.conversations) == (35, 60)
        assert len(catalog.search("kites", limit=100)) == 60
        assert catalog.refresh(where).reindexed == 0


def add_item(store: Path, user: str, name: str) -> None:
    """One user message stored for the pair, as a writer of the item store adds it."""
    with closing(sqlite3.connect(store)) as conn, conn:
        conn.execute("INSERT INTO session_items (user_id, session_name, created_at, "
                     "item_json) VALUES (?, ?, ?, ?)",
                     (user, name, int(time.time() * 1000), '{"role": "user", "content": "hi"}'))


def test_a_store_written_for_known_pairs_is_not_listed_again() -> None:
    """Rows added to a known pair's items (a turn recorded, skilled_crew continuing) re-read
    that conversation alone, found again from the store without listing every log and
    tree; so does a pair new to the store (no log or tree of its own yet). The catalog
    stays what list_sessions reads."""
    recs = record((ANN, "kept", lambda r: squares(r, "kept first", "kept done")),
                  (BOB, "other", lambda r: squares(r, "other first", "other done")))
    where = where_of(recs["kept"]).locations
    settle()
    with Catalog() as catalog:
        assert catalog.refresh(where).listed
        for name, expected in (("other", (False, 1, 1, 2)), ("new", (False, 1, 1, 3))):
            add_item(where.store_file, BOB, name)
            settle()
            summary = catalog.refresh(where)
            assert (summary.listed, summary.store_pairs, summary.reindexed,
                    summary.conversations) == expected
            assert [i.to_json() for i in catalog.conversations()] == \
                [i.to_json() for i in list_sessions(locations=where)]


def test_an_item_popped_or_replaced_is_seen_though_no_item_was_added() -> None:
    """The store's last item popped (the SDK's ``Session.pop_item``), then one popped and
    another added (as many rows as before, a higher id): each is seen by the next refresh,
    though only additions are told apart cheaply (``store_growth``)."""
    recs = record((ANN, "popped", lambda r: squares(r, "popped first", "popped done")),
                  (BOB, "other", lambda r: squares(r, "other first", "other done")))
    where = where_of(recs["popped"]).locations
    settle()

    def pop(name: str) -> None:
        with closing(sqlite3.connect(where.store_file)) as conn, conn:
            conn.execute("DELETE FROM session_items WHERE id = (SELECT MAX(id) FROM "
                         "session_items WHERE session_name = ?)", (name,))

    def items() -> dict[str, int]:
        return {info.session_name: info.items for info in catalog.conversations()}

    with Catalog() as catalog:
        catalog.refresh(where)
        before = items()
        pop("popped")
        settle()
        catalog.refresh(where)
        assert items() == {**before, "popped": before["popped"] - 1}
        pop("other")
        add_item(where.store_file, BOB, "other")
        settle()
        catalog.refresh(where)
        assert [i.to_json() for i in catalog.conversations()] == \
            [i.to_json() for i in list_sessions(locations=where)]
        assert items()["other"] == before["other"]


def test_the_store_marks_tell_items_added_from_anything_else(tmp_path: Path) -> None:
    """``store_growth``: the pairs given items since the marks, and None when anything
    else happened (an item deleted, even with another added; an archive row), or when
    ``session_items`` has no AUTOINCREMENT sequence to go by (ids may be reused)."""
    store = tmp_path / "store.sqlite"
    with closing(sqlite3.connect(store)) as conn:
        conn.executescript(ITEM_SCHEMA)
    assert store_growth(store, None) == (None, None)  # no item yet: no sequence
    add_item(store, ANN, "a")
    marks, grown = store_growth(store, None)
    assert marks is not None and grown is None
    add_item(store, ANN, "a")
    add_item(store, BOB, "b")
    marks, grown = store_growth(store, marks)
    assert grown == {(ANN, "a"), (BOB, "b")}
    assert store_growth(store, marks)[1] == set()
    with closing(sqlite3.connect(store)) as conn, conn:
        conn.execute("DELETE FROM session_items WHERE id = 1")
    add_item(store, ANN, "a")
    marks, grown = store_growth(store, marks)
    assert grown is None
    with closing(sqlite3.connect(store)) as conn, conn:
        conn.execute(f"CREATE TABLE {ARCHIVE_TABLE} (user_id TEXT, session_name TEXT)")
    marks, grown = store_growth(store, marks)
    assert grown is None
    with closing(sqlite3.connect(store)) as conn, conn:
        conn.execute(f"INSERT INTO {ARCHIVE_TABLE} VALUES (?, ?)", (ANN, "a"))
    assert store_growth(store, marks)[1] is None

    reused = tmp_path / "reused.sqlite"
    with closing(sqlite3.connect(reused)) as conn:
        conn.execute("CREATE TABLE session_items (id INTEGER PRIMARY KEY, user_id TEXT, "
                     "session_name TEXT, created_at INTEGER, item_json TEXT)")
    add_item(reused, ANN, "a")
    assert store_growth(reused, None) == (None, None)


def test_a_pair_whose_log_is_its_second_candidate_keeps_it_when_its_items_grow() -> None:
    """Two users whose names sanitize alike (``ann@example.com``, ``ann.example.com``) log
    to one name and, the second, to its hashed one; the first's owner record lost, its log
    reads as unowned. A turn stored for the second is found from the store (not by
    listing everything) with the log its owner record names, as listing everything gives
    it, not the first candidate that nobody owns."""
    recs = record((ANN, "trip", lambda r: squares(r, "ann q", "ann a")),
                  ("ann.example.com", "trip", lambda r: squares(r, "dot q", "dot a")))
    first, second = recs["trip"].log_path.with_name("trip.jsonl"), None  # first candidate
    where = where_of(recs["trip"]).locations
    owners = sorted(first.parent.glob(".trip*.owner.json"))
    assert len(owners) == 2
    for owner in owners:
        if json.loads(owner.read_bytes())["user_id"] == ANN:
            owner.unlink()
        else:
            second = owner.with_name(owner.name[1:].replace(".owner.json", ".jsonl"))
    assert second is not None and second != first and second.exists()
    settle()
    with Catalog() as catalog:
        catalog.refresh(where)
        listed_as_files_say(catalog, where)
        add_item(where.store_file, "ann.example.com", "trip")
        settle()
        assert not catalog.refresh(where).listed
        listed_as_files_say(catalog, where)
        logs = {info.user_id: info.log_path for info in catalog.conversations()}
        assert logs["ann.example.com"] == second


def listed_as_files_say(catalog: Catalog, where: Locations) -> None:
    assert [i.to_json() for i in catalog.conversations()] == \
        [i.to_json() for i in list_sessions(locations=where)]


def test_a_conversation_begun_is_found_without_listing_everything() -> None:
    """A conversation the Recorder begins (a new pair, link, owned log and tree: the store,
    a user directory and the AgentUse root change), or skilled_crew (a log with no owner
    record, the pair's items), is found from the store's new pair, and one AgentUse begins
    (a directory no pair links) from its root, without listing every log and tree again;
    the catalog stays what list_sessions reads."""
    recs = record((ANN, "first", lambda r: squares(r, "first q", "first a")))
    where = where_of(recs["first"]).locations
    settle()
    with Catalog() as catalog:
        assert catalog.refresh(where).listed
        record((ANN, "second", lambda r: squares(r, "second q", "second a")))
        settle()
        summary = catalog.refresh(where)
        assert (summary.listed, summary.store_pairs, summary.reindexed,
                summary.conversations) == (False, 1, 1, 2)
        listed_as_files_say(catalog, where)
        assert sessions(catalog.search('"second a"')) == {"second"}

        # skilled_crew begins one: a log without an owner record, the pair's items stored
        write_log(recs["first"].log_path.with_name("crewnew.jsonl"), "crew q", "crew a")
        add_item(where.store_file, ANN, "crewnew")
        settle()
        summary = catalog.refresh(where)
        assert (summary.listed, summary.reindexed, summary.conversations) == (False, 1, 3)
        listed_as_files_say(catalog, where)
        assert sessions(catalog.search('"crew a"')) == {"crewnew"}

        # AgentUse begins one: a session directory in its root that no pair links
        tree = recs["first"].session_dir
        assert tree is not None
        shutil.copytree(tree, tree.with_name(f"{new_ulid()}-Counter"))
        settle()
        summary = catalog.refresh(where)
        assert (summary.listed, summary.reindexed, summary.conversations) == (False, 1, 4)
        listed_as_files_say(catalog, where)

        # a new user's first conversation: a user directory begun in the logs root
        record((BOB, "bobs", lambda r: squares(r, "bobs q", "bobs a")))
        settle()
        summary = catalog.refresh(where)
        assert (summary.listed, summary.reindexed, summary.conversations) == (False, 1, 5)
        listed_as_files_say(catalog, where)
        assert sessions(catalog.search('"bobs a"')) == {"bobs"}

        # ... and skilled_crew's: a log in a new directory, the pair's items stored
        carol_logs = recs["first"].log_path.parent.with_name("carol_example_com")
        carol_logs.mkdir(mode=0o700)
        write_log(carol_logs / "crewcarol.jsonl", "carol q", "carol a")
        add_item(where.store_file, "carol@example.com", "crewcarol")
        settle()
        summary = catalog.refresh(where)
        assert (summary.listed, summary.reindexed, summary.conversations) == (False, 1, 6)
        listed_as_files_say(catalog, where)
        assert sessions(catalog.search('"carol a"')) == {"crewcarol"}


def test_a_session_agentuse_begins_is_found_when_links_spell_the_root_otherwise() -> None:
    """The store's links may lead to the AgentUse root through a symbolic link (the root
    moved, a link left at its old place): the catalog's trees are then spelled otherwise
    than the root. A session AgentUse begins there is still found from the root alone,
    without listing everything, and one whose ULID a known tree has lists everything."""
    recs = record((ANN, "first", lambda r: squares(r, "first q", "first a")),
                  (ANN, "second", lambda r: squares(r, "second q", "second a")))
    where = where_of(recs["first"]).locations
    assert where.agentuse_root is not None
    moved = where.agentuse_root.with_name("moved")
    where.agentuse_root.rename(moved)
    where.agentuse_root.symlink_to(moved)  # the old place: the links' spelling
    where = Locations(where.store_file, where.logs_root, moved)
    tree = recs["first"].session_dir
    assert tree is not None
    settle()
    with Catalog() as catalog:
        assert catalog.refresh(where).conversations == 2
        assert {str(i.agentuse_dir.parent) for i in catalog.conversations()
                if i.agentuse_dir} == {str(tree.parent)}  # not the moved root's spelling
        shutil.copytree(moved / tree.name, moved / f"{new_ulid()}-Counter")
        settle()
        summary = catalog.refresh(where)
        assert (summary.listed, summary.reindexed, summary.conversations) == (False, 1, 3)
        listed_as_files_say(catalog, where)

        shutil.copytree(moved / tree.name, moved / f"{tree.name[:26]}-Again")  # its ULID
        settle()
        assert catalog.refresh(where).listed
        listed_as_files_say(catalog, where)


def test_what_no_new_pair_explains_lists_everything() -> None:
    """What a conversation the Recorder begins does not explain lists every conversation
    again, so that the catalog stays what list_sessions reads: beside a new conversation, a
    skilled_crew log with no pair in the store (no owner record), in a known user directory
    or a new one, a log deleted, a known log given an owner record, a linked tree renamed,
    a user directory deleted; and a new pair of the store whose log was known alone (it
    takes that conversation over)."""
    recs = record((ANN, "first", lambda r: squares(r, "first q", "first a")))
    where = where_of(recs["first"]).locations
    assert where.agentuse_root is not None
    ann_logs = recs["first"].log_path.parent
    tree = recs["first"].session_dir
    assert tree is not None

    def crew_log() -> None:
        write_log(ann_logs / "crew.jsonl", "crew q", "crew a")

    def log_deleted() -> None:
        recs["first"].log_path.unlink()

    def crew_log_adopted() -> None:  # as sessiontape's log_path_for claims it
        (ann_logs / ".crew.owner.json").write_bytes(
            dumps_compact({"user_id": ANN, "session_name": "crew"}))

    def tree_renamed() -> None:  # its ULID kept: listing everything links it again
        tree.rename(tree.with_name(f"{tree.name[:26]}-Renamed"))

    def crew_log_of_a_new_user() -> None:
        (ann_logs.parent / "dave_example_com").mkdir(mode=0o700)
        write_log(ann_logs.parent / "dave_example_com" / "crew.jsonl", "dave q", "dave a")

    def user_directory_deleted() -> None:
        shutil.rmtree(ann_logs.parent / "dave_example_com")

    with Catalog() as catalog:
        catalog.refresh(where)
        for number, change in enumerate((crew_log, log_deleted, crew_log_adopted,
                                         tree_renamed, crew_log_of_a_new_user,
                                         user_directory_deleted)):
            change()
            record((ANN, f"new{number}", lambda r: squares(r, "new q", "new a")))
            settle()
            assert catalog.refresh(where).listed, change
            listed_as_files_say(catalog, where)

        write_log(ann_logs / "taken.jsonl", "taken q", "taken a")
        settle()
        assert catalog.refresh(where).listed
        add_item(where.store_file, ANN, "taken")  # the log-only conversation's pair, named
        settle()
        summary = catalog.refresh(where)
        assert summary.listed and summary.dropped == 1, summary
        listed_as_files_say(catalog, where)


RACER = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from agents import Agent
from scripted import final, model, run_agent, usage
from sessiontape import Recorder

async def main() -> None:
    for turn in range(8):  # four conversations begun, then each continued
        rec = Recorder("ann@example.com", f"race{turn % 4}")
        agent = Agent(name="Racer", model=model(final(f"answer {turn}", usage(3, 1))))
        await run_agent(rec, agent, f"prompt {turn}", streamed=False)
        await rec.aclose()

asyncio.run(main())
"""


@pytest.mark.slow
def test_refreshes_racing_a_recording_process_end_where_the_files_are(tmp_path: Path) -> None:
    """Refreshes made while another process begins and continues conversations (the store
    grown, logs, owner records and trees made mid-refresh) leave, once it is done and one
    more refresh is made, the catalog that list_sessions reads and every answer found."""
    project = tmp_path / "project"
    project.mkdir()
    where = Locations.resolve(project_root=project)
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(Path(__file__).parent)],
                             cwd=project, stderr=subprocess.PIPE)
    refreshes = 0
    with Catalog() as catalog:
        while racer.poll() is None:
            catalog.refresh(where)
            refreshes += 1
        assert racer.returncode == 0, racer.stderr.read() if racer.stderr else ""
        settle()
        catalog.refresh(where)
        listed_as_files_say(catalog, where)
        for turn in range(8):
            assert sessions(catalog.search(f'"answer {turn}"')) == {f"race{turn % 4}"}, turn
    assert refreshes >= 1  # ~100 000 on the team machine


def write_log(path: Path, prompt: str, answer: str) -> None:
    """A replay log as skilled_crew writes it: no owner record."""
    with open(path, "wb") as log:
        for entry in (log_entries.user_message(prompt), log_entries.final_result(answer)):
            log.write(dumps_compact(entry) + b"\n")


# -- robustness -------------------------------------------------------------------------------


@pytest.fixture
def small() -> Where:
    recs = record((ANN, "delta", lambda r: squares(r, "delta first", "delta done")))
    settle()
    return where_of(recs["delta"])


def test_the_catalog_is_private_under_the_cache_dir(small: Where) -> None:
    path = default_catalog_path()
    assert path == Path(os.environ["XDG_CACHE_HOME"]) / "sessiontape" / "catalog.sqlite"
    with Catalog() as catalog:
        small.refresh(catalog)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


def test_a_corrupt_catalog_is_rebuilt(small: Where) -> None:
    path = default_catalog_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    with Catalog() as catalog:
        summary = small.refresh(catalog)
        assert summary.rebuilt and summary.conversations == 1
        assert sessions(catalog.search("delta")) == {"delta"}


def test_an_older_catalog_is_rebuilt_and_a_newer_one_is_not_used(small: Where) -> None:
    path = default_catalog_path()
    with Catalog() as catalog:
        small.refresh(catalog)
    for version, rebuilt in ((0, True), (SCHEMA_VERSION + 1, None)):
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
        with Catalog() as catalog:
            if rebuilt is None:
                with pytest.raises(CatalogUnavailable, match="newer than this sessiontape"):
                    catalog.search("delta")
            else:
                assert small.refresh(catalog).rebuilt
                assert sessions(catalog.search("delta")) == {"delta"}


def test_a_locked_catalog_raises_after_the_busy_timeout(small: Where) -> None:
    with Catalog() as catalog:
        small.refresh(catalog)
    with closing(sqlite3.connect(default_catalog_path(), isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")
        with Catalog(busy_timeout=0.1) as catalog:
            with pytest.raises(CatalogUnavailable, match="locked by another process"):
                small.refresh(catalog)
            assert sessions(catalog.search("delta")) == {"delta"}  # readers are not blocked
        other.execute("ROLLBACK")


def test_a_catalog_that_cannot_be_created_raises_catalog_unavailable(small: Where,
                                                                     tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with Catalog(tmp_path / "a-file" / "catalog.sqlite") as catalog, \
            pytest.raises(CatalogUnavailable, match="cannot be used"):
        small.refresh(catalog)
