"""Compaction: the plan, the compacting session, the summarizers, nothing lost, crash safety."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ModelStep, ScriptedModel, assistant_message
from harness import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseCompactionItem

from sessiontape.storage.skillet.compaction import (
    ARCHIVE_TABLE,
    COMPACTIONS_TABLE,
    AutoCompactingSession,
    CompactingSession,
    CompactionInfo,
    archived_items,
    is_candidate,
    plan_compaction,
)
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.items import from_protocol, is_protocol_item
from sessiontape.storage.skillet.summarizers import (
    SUMMARY_HEADER,
    DeterministicSummarizer,
    ModelSummarizer,
    OpenAICompactSummarizer,
    is_summary,
    summary_message,
    transcript,
)

USER, NAME = "user@example.com", "chat"

# -- items ---------------------------------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str, item_id: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": item_id, "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def reasoning(item_id: str, text: str = "thinking") -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id,
            "summary": [{"type": "summary_text", "text": text}]}


def fcall(call_id: str, name: str = "lookup", args: Any = None) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name,
            "arguments": json.dumps(args if args is not None else {"id": call_id}),
            "id": f"fc_{call_id}", "status": "completed"}


def fout(call_id: str, output: str | None = None) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id,
            "output": output if output is not None else f"result of {call_id}"}


def ccall(call_id: str) -> dict[str, Any]:
    return {"type": "custom_tool_call", "call_id": call_id, "name": "patch",
            "input": f"patch {call_id}", "id": f"ct_{call_id}"}


def cout(call_id: str) -> dict[str, Any]:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": f"patched {call_id}"}


COMPACTION_ITEM = {"type": "compaction", "encrypted_content": "opaque"}


def build(spec: str) -> list[dict[str, Any]]:
    """Items from a short spec: u user, a assistant, r reasoning, cX/oX a function call X
    and its output, xX/yX a custom tool call X and its output, s summary, k compaction."""
    def one(n: int, head: str, rest: str) -> dict[str, Any]:
        makers = {"c": fcall, "o": fout, "x": ccall, "y": cout}
        if head in makers:
            return makers[head](rest)
        return {"u": user(f"question {n}"), "a": assistant(f"answer {n}", f"msg_{n}"),
                "r": reasoning(f"rs_{n}"), "s": summary_message("earlier things"),
                "k": dict(COMPACTION_ITEM)}[head]

    return [one(n, token[0], token[1:]) for n, token in enumerate(spec.split())]


def turn(i: int, *, calls: int = 1, parallel: bool = False, think: bool = True,
         tag: str = "") -> list[dict[str, Any]]:
    """One user turn: question, (reasoning), tool calls and outputs, the answer."""
    items: list[dict[str, Any]] = [user(f"question {tag}{i}: what is {i} squared?")]
    if think:
        items.append(reasoning(f"rs_{tag}{i}", f"reasoning {tag}{i}"))
    ids = [f"call_{tag}{i}_{k}" for k in range(calls)]
    if parallel:
        items += [fcall(c, "square", {"n": i, "k": k}) for k, c in enumerate(ids)]
        items += [fout(c, f"square result {tag}{i}.{k}") for k, c in enumerate(ids)]
    else:
        for k, c in enumerate(ids):
            items += [fcall(c, "square", {"n": i, "k": k}), fout(c, f"square result {tag}{i}.{k}")]
    items.append(assistant(f"conclusion {tag}{i}: it is {i * i}", f"msg_{tag}{i}"))
    return items


# -- store helpers -------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / ".agent_sessions.sqlite"


@contextlib.asynccontextmanager
async def opened(path: Path, **kwargs: Any) -> AsyncIterator[CompactingSession]:
    store = ItemStore(path)
    try:
        yield AutoCompactingSession(store.session(USER, NAME), **kwargs)
    finally:
        await store.close()


def query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql, params).fetchall()


def table_exists(path: Path, name: str) -> bool:
    return bool(query(path, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)))


def compaction_rows(path: Path) -> list[dict[str, Any]]:
    if not table_exists(path, COMPACTIONS_TABLE):
        return []
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(
            f"SELECT * FROM {COMPACTIONS_TABLE} ORDER BY created_at, id")]


def archive_rows(path: Path) -> list[tuple[Any, ...]]:
    if not table_exists(path, ARCHIVE_TABLE):
        return []
    return query(path, f"SELECT id, compaction_id, item_json FROM {ARCHIVE_TABLE} "
                       "ORDER BY created_at, id")


def integrity_ok(path: Path) -> bool:
    return query(path, "PRAGMA integrity_check") == [("ok",)]


def expected_after(items: list[Any], keep: int, summary: list[Any]) -> list[Any]:
    plan = plan_compaction(items, keep)
    return summary + [items[i] for i in plan.kept]


SESSION_ITEMS_COLUMNS = [
    (0, "id", "INTEGER", 0, None, 1),
    (1, "user_id", "TEXT", 1, None, 0),
    (2, "session_name", "TEXT", 1, None, 0),
    (3, "created_at", "INTEGER", 1, None, 0),
    (4, "item_json", "TEXT", 1, None, 0),
]

# -- plan_compaction -----------------------------------------------------------------------

PLANS = [
    # (spec, keep, kept indices)
    pytest.param("u a u a u a u a", 2, [4, 5, 6, 7], id="at-most-keep"),
    pytest.param("u a a a a a", 3, [0, 3, 4, 5], id="at-most-keep-one-turn"),
    pytest.param("u a u c1 o1 a", 2, [2, 3, 4, 5], id="pair-not-split"),
    pytest.param("u a u a c1 o1 a", 2, [2, 4, 5, 6], id="pair-kept-user-moved"),
    pytest.param("u a u c1 c2 c3 o1 o2 o3 a", 3, list(range(2, 10)), id="parallel-calls"),
    pytest.param("u a u a c1 c2 c3 o1 o2 o3", 2, [2, 4, 5, 6, 7, 8, 9], id="parallel-no-answer"),
    pytest.param("u a u c1 o1 c2 o2 a", 2, [2, 5, 6, 7], id="interleaved-user-moved"),
    pytest.param("u a u c1 o1 c2 o2 a", 4, [2, 3, 4, 5, 6, 7], id="interleaved-pull-back"),
    pytest.param("u a u a x1 y1 a", 2, [2, 4, 5, 6], id="custom-tool-pair"),
    pytest.param("u r a u r a", 1, [3, 4, 5], id="reasoning-with-message"),
    pytest.param("u a u a r c1 o1 a", 3, [2, 4, 5, 6, 7], id="reasoning-with-call"),
    pytest.param("u c1 o1 a u a a", 3, [4, 5, 6], id="kept-starts-at-user"),
    pytest.param("u a a u a a u a", 2, [6, 7], id="kept-starts-at-later-user"),
    pytest.param("u a a u a a u a", 3, [3, 4, 5, 6, 7], id="kept-starts-at-user-whole-turns"),
    pytest.param("s u a a u a", 1, [4, 5], id="summary-is-older"),
]


@pytest.mark.parametrize(("spec", "keep", "kept"), PLANS)
def test_plan_compaction_table(spec: str, keep: int, kept: list[int]) -> None:
    items = build(spec)
    plan = plan_compaction(items, keep)
    assert plan.kept == kept
    assert plan.older == [i for i in range(len(items)) if i not in kept]
    users = [i for i, item in enumerate(items) if item.get("role") == "user"]
    assert users[-1] in plan.kept
    assert plan.kept == sorted(plan.kept)  # a moved user message still comes first


@pytest.mark.parametrize(("spec", "keep"), [
    ("u a u a", 5), ("u a u a", 2), ("", 3), ("u", 1), ("s u a", 1), ("u c1 o1", 1),
    ("s k u a a", 2), ("u c1 c2 o1 o2", 1), ("s u c1 c2 o1 o2", 1), ("s u c1 c2 o1 o2", 2),
    ("u u u a", 1), ("u u r a", 1), ("s u r a", 1),
])
def test_plan_nothing_to_compact(spec: str, keep: int) -> None:
    items = build(spec)
    plan = plan_compaction(items, keep)
    assert plan.older == []
    assert plan.kept == list(range(len(items)))


def test_plan_keeps_at_most_keep_candidates_without_pairs() -> None:
    items = build(" ".join(["u a a"] * 10))
    for keep in range(25):
        plan = plan_compaction(items, keep)
        kept_candidates = sum(is_candidate(items[i]) for i in plan.kept)
        assert kept_candidates <= keep
        # and the kept part is as large as whole turns allow: the next turn would exceed keep
        assert kept_candidates >= keep - 1 or kept_candidates == 20


# -- property: random turns ----------------------------------------------------------------

TURN = st.tuples(st.booleans(),                       # reasoning first
                 st.integers(0, 3),                   # tool calls
                 st.booleans(),                       # calls then outputs (parallel)
                 st.sampled_from(["function", "custom"]),
                 st.booleans())                       # an answer at the end


def random_history(turns: list[tuple[bool, int, bool, str, bool]],
                   lead: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = build(lead)
    for t, (think, k, parallel, family, answer) in enumerate(turns):
        items.append(user(f"q{t}"))
        if think:
            items.append(reasoning(f"rs{t}"))
        ids = [f"t{t}c{j}" for j in range(k)]
        make_call, make_out = (fcall, fout) if family == "function" else (ccall, cout)
        if parallel:
            items += [make_call(c) for c in ids] + [make_out(c) for c in ids]
        else:
            for c in ids:
                items += [make_call(c), make_out(c)]
        if answer or not ids:  # a reasoning item is always followed by something
            items.append(assistant(f"a{t}", f"m{t}"))
    return items


OUTPUT_OF = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(TURN, min_size=0, max_size=8), keep=st.integers(0, 14),
       lead=st.sampled_from(["", "s", "s k", "a"]))
def test_plan_property(turns: list[Any], keep: int, lead: str) -> None:
    items = random_history(turns, lead)
    plan = plan_compaction(items, keep)
    older, kept = plan.older, plan.kept
    assert sorted(older + kept) == list(range(len(items)))
    assert not set(older) & set(kept)
    assert older == sorted(older)
    users = [i for i, item in enumerate(items) if item.get("role") == "user"]
    assert kept == sorted(kept)  # a moved latest user message precedes the rest anyway
    if users:
        assert users[-1] in kept
    # no output in the kept part whose call is in the older part
    origin = {(item["type"], item["call_id"]): i for i, item in enumerate(items)
              if item.get("type") in ("function_call", "custom_tool_call")}
    for i in kept:
        kind = items[i].get("type")
        if kind in OUTPUT_OF:
            assert origin[(OUTPUT_OF[kind], items[i]["call_id"])] in kept
    # a reasoning item stays with the item after it
    for i in kept:
        if i > 0 and items[i - 1].get("type") == "reasoning":
            assert i - 1 in kept
    # an older part is only made when it holds something to summarize
    if older:
        assert any(is_candidate(items[i]) for i in older)
    # at most keep candidates; more only inside the latest turn, whose tool calls and
    # reasoning must stay with what follows them
    kept_candidates = [i for i in kept if is_candidate(items[i])]
    if len(kept_candidates) > keep:
        latest = users[-1] if users else -1
        assert all(i > latest for i in kept_candidates)


# -- the compacting session ----------------------------------------------------------------


def test_threshold_triggers_only_above(db: Path) -> None:
    infos: list[CompactionInfo] = []

    async def main() -> None:
        async with opened(db, threshold=6, keep=3, on_compaction=infos.append) as session:
            await session.add_items(turn(0))               # 4 candidates
            await session.run_compaction()
            await session.add_items([user("and?"), assistant("more", "m1"),
                                     assistant("more", "m2")])  # 6 == threshold
            assert await session.candidates() == 6
            await session.run_compaction({"response_id": "resp_1"})
            assert infos == [] and len(await session.get_items()) == 8
            await session.add_items([assistant("even more", "m3")])  # 7 > threshold
            before = await session.get_items()
            await session.run_compaction({"response_id": "resp_2"})
            assert len(infos) == 1 and infos[0].reason == "threshold"
            after = await session.get_items()
            assert after == expected_after(before, 3, after[:1])
            assert await session.candidates() <= 3
            await session.run_compaction()               # below the threshold again
            assert len(infos) == 1

    asyncio.run(main())


def test_threshold_none_never_compacts_automatically(db: Path) -> None:
    async def main() -> None:
        async with opened(db, threshold=None, keep=4) as session:
            for i in range(15):
                await session.add_items(turn(i, calls=2))
            before = await session.get_items()
            await session.run_compaction({"response_id": "r"})
            assert await session.compact() is None
            assert await session.get_items() == before
            await session.run_compaction({"force": True})
            after = await session.get_items()
            assert after == expected_after(before, 4, after[:1])
            assert is_summary(after[0]) and len(after) < len(before)
        assert [r["reason"] for r in compaction_rows(db)] == ["manual"]

    asyncio.run(main())


def test_threshold_must_be_positive(db: Path) -> None:
    store = ItemStore(db)
    with pytest.raises(ValueError):
        AutoCompactingSession(store.session(USER, NAME), threshold=0)


@pytest.mark.parametrize("moved", [False, True], ids=["whole-turns", "latest-user-moved"])
def test_history_after_compaction(db: Path, moved: bool) -> None:
    async def main() -> None:
        async with opened(db, threshold=10, keep=4) as session:
            for i in range(3):
                await session.add_items(turn(i))
            if moved:  # the latest turn alone has more candidates than keep
                await session.add_items(turn(3, calls=4, parallel=False))  # 11 items
            else:
                await session.add_items([user("last question"), assistant("last answer", "mx")])
            before = await session.get_items()
            plan = plan_compaction(before, 4)
            info = await session.compact()
            assert info is not None
            after = await session.get_items()
            summary = after[0]
            assert summary["role"] == "assistant"
            assert summary["content"].startswith(SUMMARY_HEADER + "\n")
            assert is_summary(summary) and not is_candidate(summary)
            if moved:
                assert after[1] == before[-11] == user("question 3: what is 3 squared?")
                assert plan.kept[1] > plan.kept[0] + 1  # really moved over archived items
                assert after[1:] == [before[-11], *before[plan.kept[1]:]]
                assert after[2]["type"] == "function_call"
            else:
                assert after[1:] == before[-2:]
            assert after == [summary] + [before[i] for i in plan.kept]
            assert (info.items_before, info.items_after, info.archived) == \
                (len(before), len(after), len(plan.older))
            assert info.tokens_after < info.tokens_before

    asyncio.run(main())


@pytest.mark.parametrize("moved", [False, True], ids=["whole-turns", "latest-user-moved"])
def test_compacted_history_is_accepted_by_the_runner(db: Path, moved: bool) -> None:
    async def main() -> None:
        async with opened(db, threshold=12, keep=5) as session:
            for i in range(4):
                await session.add_items(turn(i, calls=1 + i % 2, parallel=bool(i % 2)))
            # the last turn fits in keep, or (moved) has more candidates than keep alone
            await session.add_items(turn(9, calls=4, think=False) if moved else turn(9))
            plan = plan_compaction(await session.get_items(), 5)
            assert moved == (plan.kept[1] != plan.kept[0] + 1)
            assert await session.compact() is not None
            history = await session.get_items()
            assert is_summary(history[0]) and history[1] == user("question 9: what is 9 squared?")
            assert history[2]["type"] == ("function_call" if moved else "reasoning")
            answer = assistant_message("all clear", item_id="m_new")
            model = ScriptedModel([ModelStep(output=[answer],
                                             response_id="resp_new")])
            agent = Agent(name="Compacted", instructions="Be brief.", model=model)
            result = await Runner.run(agent, "one more question", session=session)
            assert result.final_output == "all clear"
            assert len(model.calls) == 1
            assert model.calls[0].input == [*history, user("one more question")]
            stored = await session.get_items()
            assert stored[:len(history) + 1] == [*history, user("one more question")]
            assert stored[-1]["content"][0]["text"] == "all clear"

    asyncio.run(main())


# -- nothing lost --------------------------------------------------------------------------


def rows_by_original_id(path: Path) -> list[Any]:
    """Live and archived items, summaries left out, in the order their rows were added (the
    rows hold the JS SDK's protocol items: read back as the Python SDK's)."""
    rows = query(path, f"SELECT id, item_json FROM session_items UNION ALL "
                       f"SELECT id, item_json FROM {ARCHIVE_TABLE} ORDER BY id")
    items = [json.loads(text) for _, text in rows]
    assert all(is_protocol_item(item) for item in items)
    return [from_protocol(item) for item in items if not is_summary(item)]


def test_nothing_lost_over_several_compactions(db: Path) -> None:
    infos: list[CompactionInfo] = []
    counts: list[tuple[int, int]] = []
    added: list[Any] = []

    async def main() -> list[Any]:
        async with opened(db, threshold=8, keep=4, on_compaction=infos.append) as session:

            async def add(items: list[Any]) -> None:
                await session.add_items(items[:1])   # as the runner does: the input first
                await session.add_items(items[1:])
                added.extend(items)

            async def compact(args: Any) -> None:
                live, done = len(await session.get_items()), len(infos)
                await session.run_compaction(args)
                if len(infos) > done:
                    counts.append((live, len(await session.get_items())))
                    # nothing lost at any point (a latest user message may sit live
                    # before archived rows of its own turn: compare by original row id)
                    assert rows_by_original_id(db) == added

            await add([user("hello"), assistant("hi", "m_hi")])
            schema = query(db, "SELECT sql FROM sqlite_master WHERE name='session_items'")
            for i in range(12):
                await add(turn(i, calls=1 + i % 3, parallel=i % 2 == 1, think=i % 3 != 0))
                await compact({"response_id": f"resp_{i}"})
            await add([user("bye"), assistant("bye", "m_bye")])
            await compact({"force": True})
            archived = await archived_items(db, USER, NAME)
            live_items = await session.get_items()
            assert query(db, "SELECT sql FROM sqlite_master WHERE name='session_items'") == schema
        assert len(infos) >= 5
        assert live_items[1:] == [user("bye"), assistant("bye", "m_bye")]
        originals = [item for _, item in archived if not is_summary(item)]
        assert originals + [i for i in live_items if not is_summary(i)] == added
        assert sum(map(is_summary, live_items)) == 1 and is_summary(live_items[0])
        # every summary but the latest was archived by the next compaction
        summaries = [cid for cid, item in archived if is_summary(item)]
        assert summaries == [info.id for info in infos[1:]]
        return archived

    archived = asyncio.run(main())
    rows = compaction_rows(db)
    assert [r["id"] for r in rows] == [info.id for info in infos]
    assert sorted({cid for cid, _ in archived}) == sorted(info.id for info in infos)
    assert [r["reason"] for r in rows] == ["threshold"] * (len(rows) - 1) + ["manual"]
    for row, info, (live_before, live_after) in zip(rows, infos, counts, strict=True):
        assert row["summarizer"] == "deterministic"
        assert (row["user_id"], row["session_name"]) == (USER, NAME)
        assert row["archived"] == info.archived == sum(cid == row["id"] for cid, _ in archived)
        assert (row["items_before"], row["items_after"]) == (live_before, live_after)
        assert row["items_after"] == row["items_before"] - row["archived"] + 1
        assert row["tokens_after"] < row["tokens_before"]
        assert row["created_at"] == info.at
    assert query(db, "PRAGMA table_info(session_items)") == SESSION_ITEMS_COLUMNS
    assert integrity_ok(db)
    # the archive keeps the original rows' ids, none of which is live any more
    live_ids = {r[0] for r in query(db, "SELECT id FROM session_items")}
    assert not live_ids & {r[0] for r in archive_rows(db)}


def test_other_sessions_are_untouched(db: Path) -> None:
    async def main() -> None:
        store = ItemStore(db)
        try:
            other = store.session(USER, "other")
            await other.add_items(turn(0) + turn(1))
            session = AutoCompactingSession(store.session(USER, NAME), threshold=3, keep=2)
            for i in range(4):
                await session.add_items(turn(i))
            assert await session.compact() is not None
            assert await other.get_items() == turn(0) + turn(1)
            assert await archived_items(db, USER, "other") == []
        finally:
            await store.close()

    asyncio.run(main())


# -- concurrent changes --------------------------------------------------------------------


class Meddling(DeterministicSummarizer):
    """Changes the session between planning and applying, as another writer would."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action = action
        self.session: CompactingSession | None = None

    async def summarize(self, items: list[Any]) -> list[Any]:
        assert self.session is not None
        if self.action == "pop":
            await self.session.pop_item()
        elif self.action == "clear":
            await self.session.clear_session()
        elif self.action == "add":
            await self.session.add_items([user("meanwhile")])
        return await super().summarize(items)


@pytest.mark.parametrize("action", ["pop", "clear"])
def test_rows_changed_meanwhile_change_nothing(db: Path, action: str) -> None:
    calls: list[CompactionInfo] = []

    async def main() -> None:
        meddler = Meddling(action)
        async with opened(db, threshold=3, keep=2, summarizer=meddler,
                          on_compaction=calls.append) as session:
            meddler.session = session
            for i in range(4):
                await session.add_items(turn(i))
            before = await session.get_items()
            assert await session.compact() is None
            after = await session.get_items()
            assert after == (before[:-1] if action == "pop" else [])
            assert await archived_items(db, USER, NAME) == []

    asyncio.run(main())
    assert calls == [] and compaction_rows(db) == []
    assert integrity_ok(db)


def test_rows_added_meanwhile_stay_after_the_kept_part(db: Path) -> None:
    async def main() -> None:
        meddler = Meddling("add")
        async with opened(db, threshold=3, keep=2, summarizer=meddler) as session:
            meddler.session = session
            for i in range(4):
                await session.add_items(turn(i))
            before = await session.get_items()
            info = await session.compact()
            assert info is not None
            after = await session.get_items()
            assert after == [*expected_after(before, 2, after[:1]), user("meanwhile")]

    asyncio.run(main())


# -- summarizers ---------------------------------------------------------------------------


def test_deterministic_summary_says_what_happened() -> None:
    items = turn(0) + turn(1, calls=2, parallel=True)
    text = DeterministicSummarizer().text(items)
    for fact in ["question 0: what is 0 squared?", "question 1: what is 1 squared?",
                 'square({"n": 0, "k": 0}) -> square result 0.0',
                 'square({"n": 1, "k": 1}) -> square result 1.1',
                 "conclusion 0: it is 0", "conclusion 1: it is 1"]:
        assert fact in text
    assert text.startswith(f"{len(items)} earlier items were compacted.")
    assert text.index("The user asked") < text.index("Tools that ran") < \
        text.index("The assistant concluded")
    [item] = asyncio.run(DeterministicSummarizer().summarize(items))
    assert item == summary_message(text)


def test_deterministic_summary_is_stable() -> None:
    items = turn(0) + turn(1, calls=3) + [summary_message("old facts")]
    first = DeterministicSummarizer().text(items)
    assert DeterministicSummarizer().text(json.loads(json.dumps(items))) == first
    assert asyncio.run(DeterministicSummarizer().summarize(items)) == \
        asyncio.run(DeterministicSummarizer().summarize(items))


def test_deterministic_summary_is_bounded() -> None:
    long = "word " * 800
    items: list[Any] = [summary_message("an earlier summary " + long)]
    for i in range(2500):
        items += [user(f"ask {i} {long}"), fcall(f"c{i}", "search", {"q": long}),
                  fout(f"c{i}", f"found {i} {long}"), assistant(f"concluded {i} {long}", f"m{i}")]
    assert len(items) == 10_001
    summarizer = DeterministicSummarizer()
    [item] = asyncio.run(summarizer.summarize(items))
    text = item["content"]
    assert len(text) <= summarizer.max_chars + len(SUMMARY_HEADER) + 1
    # the latest of each kind survives the bound
    for fact in ["ask 2499", "search(", "found 2499", "concluded 2499"]:
        assert fact in text
    small = DeterministicSummarizer(max_chars=500)
    assert len(small.text(items)) <= 500
    assert "concluded 2499" in small.text(items)
    assert len(DeterministicSummarizer(max_chars=60).text(items)) <= 60  # titles alone exceed it


def test_summary_carries_the_previous_one_forward(db: Path) -> None:
    async def main() -> None:
        async with opened(db, threshold=4, keep=2) as session:
            await session.add_items(turn(0, tag="alpha"))
            await session.add_items(turn(1, tag="beta"))
            assert await session.compact() is not None
            first = (await session.get_items())[0]["content"]
            assert "question alpha0" in first and "question beta1" not in first
            await session.add_items(turn(2, tag="gamma"))
            await session.add_items(turn(3, tag="delta"))
            assert await session.compact() is not None
            second = (await session.get_items())[0]["content"]
            assert second.count(SUMMARY_HEADER) == 1
            for fact in ["question alpha0", "square result alpha0.0", "conclusion alpha0",
                         "question gamma2", "conclusion gamma2"]:
                assert fact in second
            assert second.index("gamma2") < second.index("Before that") < second.index("alpha0")

    asyncio.run(main())


def test_model_summarizer_uses_the_model(db: Path) -> None:
    model = ScriptedModel([ModelStep(output=[assistant_message("The user squares numbers.",
                                                               item_id="m_sum")],
                                     response_id="resp_sum")])
    summarizer = ModelSummarizer(model)

    async def main() -> None:
        async with opened(db, threshold=4, keep=2, summarizer=summarizer) as session:
            for i in range(3):
                await session.add_items(turn(i))
            before = await session.get_items()
            plan = plan_compaction(before, 2)
            info = await session.compact()
            assert info is not None and info.summarizer == "model"
            after = await session.get_items()
            assert after[0] == summary_message("The user squares numbers.")
            assert after == expected_after(before, 2, after[:1])
            [call] = model.calls
            assert call.system_instructions == ModelSummarizer.INSTRUCTIONS
            assert call.input == [user(transcript([before[i] for i in plan.older]))]
            prompt = call.input[0]["content"]
            assert "tool result: square result 0.0" in prompt
            assert "square(" in prompt and "question 0" in prompt
            assert call.tools == [] and call.previous_response_id is None

    asyncio.run(main())
    assert compaction_rows(db)[0]["summarizer"] == "model"


# -- the summary row -----------------------------------------------------------------------


def test_a_summary_row_holds_its_text_once_and_the_next_run_sees_it(db: Path) -> None:
    """Issue 23, item 10: a summary row stored its text twice (its part's ``text`` and
    ``providerData.content``). The JS SDK skilled_crew runs on never reads an assistant
    message's ``providerData.content`` (a reserved key in ``getMessageItem``,
    @openai/agents-openai dist/openaiResponsesModel.mjs), and skilled_crew writes no summary
    of its own (agent_runner_init.ts: ``OpenAIResponsesCompactionSession``), so the text is
    kept in the part alone and ``providerData.content`` is ``true``."""
    async def main() -> None:
        async with opened(db, threshold=4, keep=2) as session:
            for i in range(3):
                await session.add_items(turn(i))
            assert await session.compact() is not None
            [(row,)] = query(db, "SELECT item_json FROM session_items ORDER BY created_at, id "
                                 "LIMIT 1")
            summary = (await session.get_items())[0]
            text = summary["content"]
            assert text.startswith(SUMMARY_HEADER + "\n") and "question 0" in text
            assert row.count(json.dumps(text)[1:-1]) == 1 and row.count(SUMMARY_HEADER) == 1
            stored = json.loads(row)
            assert stored["content"] == [{"type": "output_text", "text": text}]
            assert stored["providerData"]["content"] is True and is_summary(stored)
            model = ScriptedModel([ModelStep(output=[assistant_message("ok", item_id="m_1")],
                                             response_id="resp_1")])
            agent = Agent(name="Continued", model=model)
            await Runner.run(agent, "go on", session=session)
            assert model.calls[0].input[0] == summary_message(text[len(SUMMARY_HEADER):])

    asyncio.run(main())


def test_an_old_summary_row_with_its_text_twice_is_still_read(db: Path) -> None:
    """A summary row as sessiontape 0.1-0.3 wrote it (its text in ``providerData.content``
    too) reads back as the summary, stays out of the candidates, and is carried into the
    next summary."""
    old = {"type": "message", "role": "assistant",
           "content": [{"type": "output_text", "text": f"{SUMMARY_HEADER}\nold facts"}],
           "status": "completed", "providerData": {
               "content": f"{SUMMARY_HEADER}\nold facts", "type": None, "status": None}}

    async def main() -> None:
        async with opened(db, threshold=4, keep=2) as session:
            for i in range(3):
                await session.add_items(turn(i))
            with contextlib.closing(sqlite3.connect(db)) as conn, conn:
                conn.execute("INSERT INTO session_items (user_id, session_name, created_at, "
                             "item_json) VALUES (?, ?, 0, ?)", (USER, NAME, json.dumps(old)))
            items = await session.get_items()
            assert items[0] == summary_message("old facts") and is_summary(old)
            assert await session.candidates() == sum(map(is_candidate, items[1:]))
            assert await session.compact() is not None
            text = (await session.get_items())[0]["content"]
            assert text.count(SUMMARY_HEADER) == 1 and text.endswith("Before that:\nold facts")

    asyncio.run(main())


@pytest.mark.parametrize("output", [[], [assistant_message("", item_id="m_empty")]],
                         ids=["no-output", "empty-text"])
def test_model_summarizer_falls_back_when_empty(output: list[Any]) -> None:
    model = ScriptedModel([ModelStep(output=output, response_id="resp_empty")])
    items = turn(0) + turn(1)
    replaced = asyncio.run(ModelSummarizer(model).summarize(items))
    assert replaced == asyncio.run(DeterministicSummarizer().summarize(items))
    assert len(model.calls) == 1


class StandInResponses:
    def __init__(self, output: list[Any]) -> None:
        self.output = output
        self.calls: list[dict[str, Any]] = []

    async def compact(self, **kwargs: Any) -> Any:
        self.calls.append(json.loads(json.dumps(kwargs)))
        return SimpleNamespace(output=self.output,
                               usage=SimpleNamespace(input_tokens=100, output_tokens=10))


def test_openai_compact_summarizer_with_a_stand_in_client(db: Path) -> None:
    compacted = ResponseCompactionItem(id="cmp_1", type="compaction", encrypted_content="enc-1")
    responses = StandInResponses([
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "question 0: what is 0 squared?"}]},
        compacted])
    summarizer = OpenAICompactSummarizer(SimpleNamespace(responses=responses), model="gpt-test")
    infos: list[CompactionInfo] = []

    async def main() -> None:
        async with opened(db, threshold=4, keep=2, summarizer=summarizer,
                          on_compaction=infos.append) as session:
            for i in range(3):
                await session.add_items(turn(i))
            before = await session.get_items()
            plan = plan_compaction(before, 2)
            await session.run_compaction({"response_id": "resp_x"})
            assert len(infos) == 1 and infos[0].summarizer == "openai-compact"
            assert responses.calls == [{"model": "gpt-test",
                                        "input": [before[i] for i in plan.older]}]
            after = await session.get_items()
            replacement = [responses.output[0],
                           {"id": "cmp_1", "type": "compaction", "encrypted_content": "enc-1"}]
            assert after == replacement + [before[i] for i in plan.kept]
            # the compaction item and the user message do not count toward the threshold
            kept_candidates = sum(is_candidate(before[i]) for i in plan.kept)
            assert await session.candidates() == kept_candidates == 4  # == threshold
            await session.run_compaction({"response_id": "resp_y"})
            assert len(infos) == 1 and len(responses.calls) == 1
            await session.add_items([assistant("one more", "mx1")])  # 5 > threshold
            await session.run_compaction({"response_id": "resp_z"})
            assert len(infos) == 2 and len(responses.calls) == 2
            assert responses.calls[1]["input"][:2] == replacement

    asyncio.run(main())


def test_on_compaction_receives_the_info(db: Path) -> None:
    seen: list[Any] = []

    async def main() -> CompactionInfo:
        async with opened(db, threshold=4, keep=2, on_compaction=seen.append) as session:
            for i in range(3):
                await session.add_items(turn(i))
            info = await session.compact(force=True)
            assert info is not None
            return info

    info = asyncio.run(main())
    assert seen == [info] and isinstance(seen[0], CompactionInfo)
    assert (info.user_id, info.session_name, info.reason) == (USER, NAME, "manual")
    [row] = compaction_rows(db)
    assert row == {"id": info.id, "user_id": USER, "session_name": NAME, "created_at": info.at,
                   "reason": "manual", "summarizer": "deterministic",
                   "items_before": info.items_before, "items_after": info.items_after,
                   "tokens_before": info.tokens_before, "tokens_after": info.tokens_after,
                   "archived": info.archived}


# -- crash safety --------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import asyncio, json, os, signal, sqlite3, sys
    from pathlib import Path

    import sessiontape.storage.skillet.archive as archive
    from sessiontape.storage.skillet.compaction import CompactingSession
    from sessiontape.storage.skillet.item_store import ItemStore
    from sessiontape.storage.skillet.summarizers import DeterministicSummarizer

    mode, path, keep = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    last_turn = json.loads(sys.argv[4])

    def die():
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    class Dying(DeterministicSummarizer):
        async def summarize(self, items):
            die()

    def wal_size():
        wal = Path(str(path) + "-wal")
        return wal.stat().st_size if wal.exists() else 0

    class Killing(sqlite3.Connection):
        def execute(self, sql, *args):
            if sql == "BEGIN IMMEDIATE":
                super().execute("PRAGMA cache_size=4")   # spill uncommitted pages into the WAL
                print("wal-at-begin", wal_size(), flush=True)
            if sql == "COMMIT" and mode == "before-commit":
                print("wal-at-kill", wal_size(), flush=True)
                die()
            cursor = super().execute(sql, *args)
            if sql.startswith("DELETE FROM session_items") and mode == "after-delete":
                print("wal-at-kill", wal_size(), flush=True)
                die()
            if sql == "COMMIT" and mode == "after-commit":
                die()
            return cursor

    archive.connect = lambda path, **k: sqlite3.connect(
        path, timeout=30.0, isolation_level=None, factory=Killing)

    async def main():
        store = ItemStore(path)
        summarizer = Dying() if mode == "summarize" else None
        session = CompactingSession(store.session(%(user)r, %(name)r), threshold=None,
                                keep=keep, summarizer=summarizer)
        await session.add_items(last_turn)   # committed by this process before it dies
        await session.compact(force=True)
        print("survived", flush=True)

    asyncio.run(main())
""") % {"user": USER, "name": NAME}


@pytest.mark.parametrize("mode", ["summarize", "after-delete", "before-commit", "after-commit"])
@pytest.mark.slow
def test_killed_during_compaction_leaves_old_or_new_history(db: Path, mode: str) -> None:
    keep = 6
    big = "x" * 600

    async def build_store() -> list[Any]:
        async with opened(db, threshold=None) as session:
            for i in range(150):
                padding = assistant(f"padding {i} {big}", f"pad{i}")
                await session.add_items([*turn(i, calls=1 + i % 2), padding])
            return await session.get_items()

    items = asyncio.run(build_store())
    last = turn(999, calls=2, parallel=True)
    old = items + last
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(db), str(keep), json.dumps(last)],
                          cwd=REPO, env=os.environ.copy(), capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "survived" not in proc.stdout
    if mode in ("after-delete", "before-commit"):  # uncommitted pages reached the WAL
        sizes = dict(line.split() for line in proc.stdout.splitlines())
        assert int(sizes["wal-at-kill"]) > int(sizes["wal-at-begin"]), proc.stdout
    assert integrity_ok(db)
    summary = asyncio.run(DeterministicSummarizer().summarize(
        [old[i] for i in plan_compaction(old, keep).older]))
    new = expected_after(old, keep, summary)
    assert len(new) < len(old)

    async def check() -> None:
        async with opened(db, threshold=None, keep=keep) as session:
            live = await session.get_items()
            archived = await archived_items(db, USER, NAME)
            if mode == "after-commit":
                assert live == new
                assert [item for _, item in archived] == \
                    [old[i] for i in plan_compaction(old, keep).older]
                assert len(compaction_rows(db)) == 1
                assert compaction_rows(db)[0]["archived"] == len(archived)
                await session.add_items(turn(1000))
                assert await session.compact(force=True) is not None
                archived = await archived_items(db, USER, NAME)
                live = await session.get_items()
                assert [i for _, i in archived if not is_summary(i)] + \
                    [i for i in live if not is_summary(i)] == old + turn(1000)
            else:
                assert live == old
                assert archived == [] and compaction_rows(db) == []
                info = await session.compact(force=True)
                assert info is not None
                assert await session.get_items() == new
                assert [i for _, i in await archived_items(db, USER, NAME)] == \
                    [old[i] for i in plan_compaction(old, keep).older]
                assert len(compaction_rows(db)) == 1

    asyncio.run(check())
    assert integrity_ok(db)
    assert query(db, "PRAGMA table_info(session_items)") == SESSION_ITEMS_COLUMNS


def test_an_item_only_the_careful_decoder_reads_is_compacted_too(db: Path) -> None:
    # A lone surrogate is stored escaped ("\ud800"); orjson refuses it, the store's
    # decoder reads it. Skipping it would leave an output whose call was archived.
    odd = fout("c_odd", "bad \ud800 text")

    async def main() -> tuple[list[Any], list[Any]]:
        async with opened(db, threshold=2, keep=1) as session:
            await session.add_items([user("q0"), fcall("c_odd"), odd, assistant("a0", "m0")])
            await session.add_items([user("q1"), fcall("c1"), fout("c1"), assistant("a1", "m1")])
            assert await session.compact(force=True) is not None
            return await session.get_items(), [i for _, i in await archived_items(
                db, session.inner.user_id, session.inner.session_name)]

    live, archived = asyncio.run(main())
    assert odd in archived and odd not in live
    assert not any(i.get("call_id") == "c_odd" for i in live)


def test_only_the_auto_session_makes_the_runner_do_compaction_bookkeeping(db: Path) -> None:
    """The SDK's runner digests the whole model input before every model call for a
    session with ``run_compaction``: the recorder's session has none (it compacts at the
    end of each run), AutoCompactingSession has it for use without the recorder."""
    from agents.memory import is_openai_responses_compaction_aware_session

    from sessiontape import Recorder

    async def main() -> None:
        store = ItemStore(db)
        try:
            inner = store.session(USER, NAME)
            assert not is_openai_responses_compaction_aware_session(CompactingSession(inner))
            assert is_openai_responses_compaction_aware_session(AutoCompactingSession(inner))
        finally:
            await store.close()
        assert not is_openai_responses_compaction_aware_session(Recorder(USER, NAME).session)

    asyncio.run(main())


# -- rows that are not items -----------------------------------------------------------------


def test_compaction_never_loses_or_rewrites_a_bad_row(
        db: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Rows that are not items (not JSON, not an object) stay live and byte for byte;
    rows of a type neither SDK knows are moved to the archive byte for byte like any
    other; an archive row that is not JSON is reported and skipped by archived_items."""
    caplog.set_level(logging.WARNING, logger="sessiontape")
    bad = ['{"type": "message", "role": "us', "[1, 2]", "7"]
    unknown = '{"type": "from_the_future", "callId": "f1", "payload": [1, 2, 3]}'

    async def main() -> tuple[list[Any], list[Any]]:
        async with opened(db, threshold=6, keep=2) as session:
            for i in range(3):
                await session.add_items(turn(i, calls=2))
                with contextlib.closing(sqlite3.connect(db)) as conn:
                    conn.execute("INSERT INTO session_items (user_id, session_name, created_at,"
                                 " item_json) SELECT ?, ?, MAX(created_at), ? FROM session_items",
                                 (USER, NAME, bad[i]))
                    if i == 0:
                        conn.execute("INSERT INTO session_items (user_id, session_name, "
                                     "created_at, item_json) SELECT ?, ?, MAX(created_at), ? "
                                     "FROM session_items", (USER, NAME, unknown))
                    conn.commit()
            before = await session.get_items()
            info = await session.compact(force=True)
            assert info is not None and info.archived > 0
            return before, await session.get_items()

    before, after = asyncio.run(main())
    assert json.loads(unknown) in before and json.loads(unknown) not in after
    live = [text for (text,) in query(db, "SELECT item_json FROM session_items")]
    archived = [text for _, _, text in archive_rows(db)]
    assert all(live.count(text) == 1 for text in bad)  # never archived, never changed
    assert archived.count(unknown) == 1  # archived as it was
    assert is_summary(after[0]) and after[-1] == turn(2, calls=2)[-1]
    assert all(isinstance(item, dict) for item in after)  # the bad rows are not items
    warned = " ".join(r.getMessage() for r in caplog.records)
    for text in bad:
        (row_id,), = query(db, "SELECT id FROM session_items WHERE item_json = ?", (text,))
        assert f"row {row_id}:" in warned

    # a damaged archive row: reported with its id and skipped, the others read
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute(f"UPDATE {ARCHIVE_TABLE} SET item_json = 'garbage' WHERE id = "
                     f"(SELECT MIN(id) FROM {ARCHIVE_TABLE})")
        conn.commit()
    caplog.clear()
    items = asyncio.run(archived_items(db, USER, NAME))
    assert len(items) == len(archived) - 1
    assert json.loads(unknown) in [item for _, item in items]
    assert any("session_items_archive" in r.getMessage() and "not JSON" in r.getMessage()
               for r in caplog.records)
