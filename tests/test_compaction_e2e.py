"""Compaction end to end: long conversations through the real ``agents.Runner``.

A scripted 30-turn conversation (each turn: one model step with five parallel
calls of a cheap tool, then a final answer) is recorded with the default
threshold, and checked from every side: what the model was sent, the
summary, the store and its archive (nothing lost), the JSONL log (never
rewritten, compactions marked) and the AgentUse tree (one exchange per turn,
``compaction`` parts). Then the edge cases: no threshold (manual compaction
only), a model with no response id, and a summarizer that fails.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import pytest
from agents import Agent, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message
from scripted import (
    call,
    model,
    parts,
    read_session,
    read_turns,
    run_agent,
    steps_of,
    usage,
)

from sessiontape import Recorder
from sessiontape.storage.skillet.compaction import (
    ARCHIVE_TABLE,
    COMPACTIONS_TABLE,
    DEFAULT_THRESHOLD,
    archived_items,
    estimate_tokens,
    is_candidate,
)
from sessiontape.storage.skillet.log_entries import STEP_TYPES
from sessiontape.storage.skillet.summarizers import (
    DeterministicSummarizer,
    is_summary,
    summary_text,
)

USER = "ann@example.com"
TURNS = 30
CALLS = 5  # parallel tool calls per turn
ITEMS_PER_TURN = 1 + 2 * CALLS + 1  # user, calls, outputs, answer


@function_tool
def lookup(key: str) -> str:
    """Look up one fact."""
    return f"fact-{key}"


def prompt(turn: int) -> str:
    return f"question {turn}: what are facts {turn}.0 to {turn}.{CALLS - 1}?"


def answer(turn: int) -> str:
    return f"answer {turn}: all five facts found"


def key(turn: int, i: int) -> str:
    return f"t{turn}k{i}"


def turn_model(turn: int, *, response_ids: bool = True) -> ScriptedModel:
    """One turn's model: five parallel ``lookup`` calls, then the answer (stable ids, so
    that two conversations store the very same items)."""
    def rid(step: str) -> str | None:
        return f"resp_{turn}_{step}" if response_ids else None

    calls = [call("lookup", {"key": key(turn, i)}, f"call_{turn}_{i}") for i in range(CALLS)]
    return model(
        ModelStep(output=calls, usage=usage(100, 10), response_id=rid("tools")),
        ModelStep(output=[assistant_message(answer(turn), item_id=f"msg_{turn}")],
                  usage=usage(120, 8), response_id=rid("final")))


@dataclass
class Conversation:
    rec: Recorder  # the last recorder used
    recorders: list[Recorder] = field(default_factory=list)
    models: list[ScriptedModel] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    compacted_in: list[list[str]] = field(default_factory=list)  # compaction ids per turn


def connect(rec: Recorder) -> sqlite3.Connection:
    """The store, read-only (it exists once a run has saved something)."""
    return sqlite3.connect(f"{rec.store.path.resolve().as_uri()}?mode=ro", uri=True)


def compaction_rows(rec: Recorder) -> dict[str, dict[str, Any]]:
    """The pair's ``sessiontape_compactions`` rows by id, oldest first."""
    if not rec.store.path.exists():
        return {}
    with closing(connect(rec)) as conn:
        conn.row_factory = sqlite3.Row
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                        (COMPACTIONS_TABLE,)).fetchone() is None:
            return {}
        rows = conn.execute(f"SELECT * FROM {COMPACTIONS_TABLE} WHERE user_id = ? AND "
                            "session_name = ? ORDER BY created_at, id",
                            (rec.user_id, rec.session_name)).fetchall()
    return {row["id"]: dict(row) for row in rows}


def archive_count(rec: Recorder) -> int:
    with closing(connect(rec)) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                        (ARCHIVE_TABLE,)).fetchone() is None:
            return 0
        return conn.execute(f"SELECT COUNT(*) FROM {ARCHIVE_TABLE} WHERE user_id = ? AND "
                            "session_name = ?", (rec.user_id, rec.session_name)).fetchone()[0]


async def converse(name: str, turns: int, *, mode: str = "run", threshold: int | None
                   = DEFAULT_THRESHOLD, summarizer: Any = None, response_ids: bool = True,
                   first: int = 0, rec: Recorder | None = None) -> Conversation:
    """``turns`` recorded runs. ``mode``: ``run`` (one Recorder), ``new-recorder`` (a new
    Recorder per turn, same pair), ``streamed`` (every other turn through run_streamed)."""
    def recorder() -> Recorder:
        return Recorder(USER, name, compaction_threshold=threshold, summarizer=summarizer)

    conv = Conversation(rec or recorder())
    conv.recorders.append(conv.rec)
    seen = set(compaction_rows(conv.rec))
    for turn in range(first, first + turns):
        if mode == "new-recorder" and turn > first:
            conv.rec = recorder()
            conv.recorders.append(conv.rec)
        scripted = turn_model(turn, response_ids=response_ids)
        agent = Agent(name="Fact Finder", instructions="Find the facts.", tools=[lookup],
                      model=scripted)
        streamed = mode == "streamed" and turn % 2 == 1
        conv.outputs.append(await run_agent(conv.rec, agent, prompt(turn), streamed))
        scripted.assert_complete()
        conv.models.append(scripted)
        rows = compaction_rows(conv.rec)
        conv.compacted_in.append([cid for cid in rows if cid not in seen])
        seen.update(rows)
    await conv.rec.flush()
    return conv


def history(model_input: list[Any], turn: int) -> list[Any]:
    """What the call re-sent from the store: the items before this run's user message."""
    [index] = [i for i, item in enumerate(model_input)
               if isinstance(item, dict) and item.get("role") == "user"
               and item.get("content") == prompt(turn)]
    return model_input[:index]


def facts_of(turn: int) -> list[str]:
    return [f"fact-{key(turn, i)}" for i in range(CALLS)]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- 30 turns, five tool calls each ------------------------------------------------------


@pytest.mark.parametrize("mode", ["run", "new-recorder", "streamed"])
def test_a_long_conversation_stays_bounded_and_loses_nothing(mode: str) -> None:
    async def main() -> tuple[Conversation, list[Any], list[Any], list[Any]]:
        conv = await converse(f"long-{mode}", TURNS, mode=mode)
        twin = await converse(f"twin-{mode}", TURNS, threshold=None)  # never compacted
        live = await conv.rec.session.get_items()
        archived = await archived_items(conv.rec.store.path, USER, conv.rec.session_name)
        return conv, live, archived, await twin.rec.session.get_items()

    conv, live, archived, everything = run(main())
    rec = conv.rec
    assert len(conv.recorders) == (TURNS if mode == "new-recorder" else 1)
    assert [r.errors for r in conv.recorders] == [0] * len(conv.recorders)
    assert conv.outputs == [answer(t) for t in range(TURNS)]
    rows = compaction_rows(rec)
    # 11 candidates a turn, threshold 40, keep 20: a compaction every third turn from turn 3
    assert [t for t, ids in enumerate(conv.compacted_in) if ids] == list(range(3, TURNS, 3))
    assert all(len(ids) == 1 for ids in conv.compacted_in if ids)
    assert sum(map(len, conv.compacted_in)) == len(rows) == 9
    assert {row["reason"] for row in rows.values()} == {"threshold"}
    assert {row["summarizer"] for row in rows.values()} == {"deterministic"}

    # What the model was sent: at most the threshold's candidates and one summary re-sent.
    sizes: list[tuple[int, int, int]] = []  # per turn, largest input: items, ~tokens, summary's
    max_chars = DeterministicSummarizer().max_chars
    for turn, scripted in enumerate(conv.models):
        assert len(scripted.calls) == 2
        for model_call in scripted.calls:
            past = history(model_call.input, turn)
            assert sum(map(is_candidate, past)) <= DEFAULT_THRESHOLD, (turn, len(past))
            assert sum(map(is_summary, past)) == (1 if turn > 3 else 0)
            if turn > 3:  # a compaction happened: the summary comes first, bounded in size
                assert is_summary(past[0]) and len(summary_text(past[0]) or "") <= max_chars
        largest = max(scripted.calls, key=lambda c: len(c.input)).input
        sizes.append((len(largest), estimate_tokens(largest),
                      estimate_tokens([i for i in largest if is_summary(i)])))
    print("\nlargest model input per turn (items, ~tokens, ~summary tokens):", sizes)
    # Flat after the first compactions: the same three-turn cycle of item counts, and tokens
    # outside the summary no more than before the first compaction (turn 3: 47 items).
    assert [s[0] for s in sizes[6:18]] == [s[0] for s in sizes[18:30]]
    assert max(s[0] for s in sizes) <= sizes[3][0] + 1
    assert max(s[1] - s[2] for s in sizes) <= sizes[3][1] * 1.1
    # the summary grows until it reaches its bound, then stays there
    assert abs(sizes[27][2] - sizes[24][2]) <= 5 and sizes[29][2] <= sizes[24][2] + 5
    assert max(s[1] for s in sizes) < estimate_tokens(everything) / 3

    # The summary: one, first, and it tells what the compacted turns found.
    summaries = [item for item in live if is_summary(item)]
    assert len(summaries) == 1 and live[0] is summaries[0]
    latest = summary_text(live[0])
    live_text = str([item for item in live if not is_summary(item)])
    assert "fact-t26k0" not in live_text and prompt(26) not in live_text  # turn 26 was compacted
    for turn in (24, 25, 26):
        assert all(fact in latest for fact in facts_of(turn))
        assert prompt(turn) in latest and answer(turn) in latest
    assert len(latest) <= max_chars
    # every fact of every compacted turn is in some summary (the older ones are archived)
    archived_summaries = " ".join(summary_text(item) or "" for _, item in archived
                                  if is_summary(item))
    for turn in range(27):
        assert all(fact in latest + archived_summaries for fact in facts_of(turn)), turn

    # Archive + live rows, summaries aside, are every item ever added, in order.
    assert len(everything) == TURNS * ITEMS_PER_TURN
    assert {cid for cid, _ in archived} == set(rows)
    assert len(archived) == sum(row["archived"] for row in rows.values()) == archive_count(rec)
    restored = [item for _, item in archived if not is_summary(item)] + \
        [item for item in live if not is_summary(item)]
    assert restored == everything
    assert live[-ITEMS_PER_TURN:] == everything[-ITEMS_PER_TURN:]  # the last turn is verbatim
    assert sum(map(is_candidate, live)) <= DEFAULT_THRESHOLD

    # The JSONL log: all 30 turns, never rewritten, with the compactions marked.
    turns = read_turns(rec)
    assert [t.user_input for t in turns] == [prompt(t) for t in range(TURNS)]
    assert [t.text for t in turns] == [answer(t) for t in range(TURNS)]
    assert all(t.complete for t in turns)
    for number, turn in enumerate(turns):
        tools = steps_of(turn, "agent_tool_end")
        # The turn's calls run at once (the SDK runs a sync tool in a worker thread): the
        # log has them in the order they ended, which a busy host can change (seen in CI).
        assert sorted(s["result"] for s in tools) == sorted(facts_of(number))
        marks = steps_of(turn, "compaction")
        assert [m["compactionId"] for m in marks] == conv.compacted_in[number]
        for mark in marks:
            row = rows[mark["compactionId"]]
            assert (mark["reason"], mark["summarizer"], mark["itemsBefore"], mark["itemsAfter"],
                    mark["archived"]) == (row["reason"], row["summarizer"], row["items_before"],
                                          row["items_after"], row["archived"])
    assert sum(len(steps_of(t, "compaction")) for t in turns) == len(rows)
    # skilled_crew's run and chat replay this log before a prompt and stop at a step of a
    # type they do not know: the marks are lines of their own kind, which it skips.
    lines = [json.loads(text) for text in rec.log_path.read_text("utf-8").splitlines()]
    assert {line["stepResult"]["type"] for line in lines if line["kind"] == "step"} \
        <= STEP_TYPES
    assert [line["compactionId"] for line in lines if line["kind"] == "compaction"] == \
        [cid for ids in conv.compacted_in for cid in ids]

    # AgentUse: one exchange per turn, a compaction part where one happened.
    session = read_session(rec)
    assert session.info["status"] == "completed"
    assert [m.info["user"]["prompt"]["task"] for m in session.messages] == \
        [prompt(t) for t in range(TURNS)]
    for number, msg in enumerate(session.messages):
        assert [p["state"]["output"] for p in parts(msg, "tool")] == facts_of(number)
        found = parts(msg, "compaction")
        expected = [rows[cid] for cid in conv.compacted_in[number]]
        assert [(p["reason"], p["tokensBefore"], p["tokensAfter"], p["messagesBefore"],
                 p["messagesAfter"], p["time"]) for p in found] == \
            [(row["reason"], row["tokens_before"], row["tokens_after"], row["items_before"],
              row["items_after"], {"start": row["created_at"]}) for row in expected]
        for p in found:
            assert p["tokensAfter"] < p["tokensBefore"]
            assert p["messagesAfter"] < p["messagesBefore"]
        if found:  # marked before the exchange's end
            assert [p["type"] for p in msg.parts][-1] == "compaction"
            assert msg.info["time"]["completed"] >= found[-1]["time"]["start"]


# -- no threshold: only on demand --------------------------------------------------------


def test_without_a_threshold_only_a_manual_compaction_compacts() -> None:
    async def main() -> tuple[Conversation, list[Any], list[Any], Conversation, list[Any]]:
        conv = await converse("manual", 6, threshold=None)
        before = await conv.rec.session.get_items()
        assert compaction_rows(conv.rec) == {}  # 66 candidates, threshold off
        await conv.rec.session.compact(force=True)  # between runs
        after = await conv.rec.session.get_items()
        later = await converse("manual", 5, threshold=None, first=6, rec=conv.rec)
        return conv, before, after, later, await conv.rec.session.get_items()

    conv, before, after, later, final_items = run(main())
    rec = conv.rec
    assert rec.errors == 0
    assert len(before) == 6 * ITEMS_PER_TURN and not any(map(is_summary, before))
    # every run re-sent the whole history
    assert [len(history(m.calls[0].input, t)) for t, m in enumerate(conv.models)] == \
        [t * ITEMS_PER_TURN for t in range(6)]

    [row] = compaction_rows(rec).values()
    assert row["reason"] == "manual" and row["items_before"] == len(before)
    assert is_summary(after[0]) and len(after) == row["items_after"]
    assert after[1:] == before[-(len(after) - 1):]
    assert sum(map(is_candidate, after)) <= DEFAULT_THRESHOLD // 2
    assert "fact-t0k0" in summary_text(after[0])

    # The next run starts from the compacted history; no more compactions without a threshold
    # (5 more turns: 55 more candidates).
    assert history(later.models[0].calls[0].input, 6) == after
    assert compaction_rows(rec).keys() == {row["id"]}
    assert len(final_items) == len(after) + 5 * ITEMS_PER_TURN

    # Store only: no run was going on, so neither the AgentUse session nor the log mark it.
    session = read_session(rec)
    assert len(session.messages) == 11
    assert all(parts(m, "compaction") == [] for m in session.messages)
    turns = read_turns(rec)
    assert len(turns) == 11 and all(steps_of(t, "compaction") == [] for t in turns)


# -- a model that gives no response id -----------------------------------------------------


def test_a_model_with_no_response_id_is_still_compacted() -> None:
    # The SDK's runner only asks a session to compact after a step with a response id;
    # the recorder asks after every run.
    conv = run(converse("no-response-id", 7, response_ids=False))
    rec = conv.rec
    assert rec.errors == 0
    assert conv.outputs == [answer(t) for t in range(7)]
    assert all(c.previous_response_id is None for m in conv.models for c in m.calls)
    rows = compaction_rows(rec)
    assert [t for t, ids in enumerate(conv.compacted_in) if ids] == [3, 6]
    for turn, scripted in enumerate(conv.models):
        past = history(scripted.calls[0].input, turn)
        assert sum(map(is_candidate, past)) <= DEFAULT_THRESHOLD
    assert is_summary(history(conv.models[4].calls[0].input, 4)[0])
    session = read_session(rec)
    assert [len(parts(m, "compaction")) for m in session.messages] == [0, 0, 0, 1, 0, 0, 1]
    assert [len(steps_of(t, "compaction")) for t in read_turns(rec)] == [0, 0, 0, 1, 0, 0, 1]
    assert len(rows) == 2


# -- a summarizer that fails ---------------------------------------------------------------


class BrokenSummarizer:
    name = "broken"

    def __init__(self) -> None:
        self.calls = 0

    async def summarize(self, items: list[Any]) -> list[Any]:
        self.calls += 1
        raise RuntimeError("the summarizer is down")


@pytest.mark.parametrize("mode", ["run", "streamed"])
def test_a_failing_summarizer_fails_no_run(mode: str) -> None:
    broken = BrokenSummarizer()

    async def main() -> tuple[Conversation, list[Any]]:
        conv = await converse(f"broken-{mode}", 6, mode=mode, summarizer=broken)
        return conv, await conv.rec.session.get_items()

    conv, items = run(main())
    rec = conv.rec
    assert conv.outputs == [answer(t) for t in range(6)]
    assert broken.calls > 0 and rec.errors >= broken.calls
    # the history is intact: nothing archived, no summary, and every run saw all of it
    assert compaction_rows(rec) == {} and archive_count(rec) == 0
    assert len(items) == 6 * ITEMS_PER_TURN and not any(map(is_summary, items))
    assert history(conv.models[5].calls[0].input, 5) == items[:5 * ITEMS_PER_TURN]
    session = read_session(rec)
    assert session.info["status"] == "completed"
    assert [m.info["user"]["prompt"]["task"] for m in session.messages] == \
        [prompt(t) for t in range(6)]
    assert all(parts(m, "compaction") == [] and "error" not in m.info["assistant"]
               for m in session.messages)
    assert [t.text for t in read_turns(rec)] == [answer(t) for t in range(6)]

    # Outside a run, compact() raises the error for the caller who asked for it (and
    # it is not a recording error).
    errors = rec.errors

    async def manual() -> None:
        with pytest.raises(RuntimeError, match="the summarizer is down"):
            await rec.session.compact(force=True)
        assert rec.errors == errors

    run(manual())
