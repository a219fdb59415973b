"""A compacted store against the real JavaScript Agents SDK that skilled_crew 1.0.11 runs on
(tests/js/check_items.mjs, as in test_js_conformance.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path

from test_compaction import NAME, USER, opened, turn
from test_js_conformance import check_items, js_sdk  # noqa: F401 (its autouse fixture)

from sessiontape.storage.skillet.summarizers import SUMMARY_HEADER


def test_a_compacted_store_passes_and_sends_its_summary_once(tmp_path: Path) -> None:
    """Every row of a compacted conversation passes the JS SDK's ``protocol.ModelItem``, and
    its request builder (``getMessageItem``, @openai/agents-openai
    dist/openaiResponsesModel.mjs, which drops an assistant message's
    ``providerData.content``) sends the summary as an assistant message holding its text
    once, before the kept turn."""
    db = tmp_path / ".agent_sessions.sqlite"

    async def compact() -> None:
        async with opened(db, threshold=4, keep=2) as session:
            for i in range(3):
                await session.add_items(turn(i, calls=2))
            assert await session.compact() is not None

    asyncio.run(compact())
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = [json.loads(text) for (text,) in conn.execute(
            "SELECT item_json FROM session_items WHERE user_id = ? AND session_name = ? "
            "ORDER BY created_at, id", (USER, NAME))]
    report = check_items(rows)
    assert report["schema_errors"] == [] and report["request_error"] is None
    summary, question = report["request_input"][:2]
    text = summary["content"][0]["text"]
    assert text.startswith(SUMMARY_HEADER + "\n") and "question 0" in text
    assert summary == {"type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]}
    assert json.dumps(summary).count(SUMMARY_HEADER) == 1
    assert question == {"role": "user", "content": "question 2: what is 2 squared?"}
