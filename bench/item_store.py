"""Item store throughput: sessiontape's ItemStore against the SDK's SQLiteSession.

Both get the same work in one run, on file databases in the same directory:
TURNS add_items calls of ITEMS_PER_TURN items each, then full reads and
``limit=40`` reads, in alternating rounds on fresh files. Adds are timed as a
whole; reads per call, as medians, so that an occasional full garbage
collection (which costs both sides alike) does not decide the ratio. The first
full read is also timed on its own (ours converts every row then; the later ones
only rows added since: storage/skillet/item_store.py's Snapshot).

    python bench/item_store.py [--turns 2000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

from agents.memory import SQLiteSession
from timing import median, timed

from sessiontape.storage.skillet.item_store import ItemStore

ITEMS_PER_TURN = 5
FULL_READS = 21
LIMIT_READS = 501


def turn_items(turn: int) -> list[dict[str, Any]]:
    """Five realistic Responses-API items: user, reasoning, call, output, answer."""
    call = f"call_{turn}"
    return [
        {"role": "user", "content": f"Question number {turn}: how many files are there?"},
        {"type": "reasoning", "id": f"rs_{turn}", "summary": [
            {"type": "summary_text", "text": "List the directory, then count."}]},
        {"type": "function_call", "call_id": call, "name": "run_command_line",
         "arguments": '{"commandLine": "ls -1 | wc -l"}', "id": f"fc_{turn}",
         "status": "completed"},
        {"type": "function_call_output", "call_id": call, "output": '{"stdout": "42\\n"}'},
        {"type": "message", "role": "assistant", "id": f"msg_{turn}", "status": "completed",
         "content": [{"type": "output_text", "text": f"There are 42 files ({turn}).",
                      "annotations": []}]},
    ]


async def measure(session: Any, turns: int) -> dict[str, float]:
    """Seconds per add_items call (mean), of the first full read, per later full read and
    per ``limit=40`` read (medians)."""
    batches = [turn_items(t) for t in range(turns)]
    gc.collect()
    start = time.perf_counter()
    for batch in batches:
        await session.add_items(batch)
    add = (time.perf_counter() - start) / turns
    gc.collect()
    first, _ = await timed(session.get_items, 1)
    gc.collect()
    full, items = await timed(session.get_items, FULL_READS)
    assert len(items) == turns * ITEMS_PER_TURN, len(items)
    limited, latest = await timed(lambda: session.get_items(limit=40), LIMIT_READS)
    assert latest == items[-40:]
    return {"add": add, "first": first, "full": full, "limit40": limited}


async def round_trip(store: ItemStore) -> float:
    """Median seconds of one statement that does nothing (``SELECT 1``) through the store's
    worker thread: the floor of every call, set by how fast this machine wakes threads."""
    seconds, _ = await timed(lambda: store.execute("SELECT 1"), LIMIT_READS)
    return seconds


async def run(turns: int, rounds: int, directory: Path) -> dict[str, dict[str, float]]:
    """Both stores, alternating, ``rounds`` times on fresh files; medians per figure."""
    runs: dict[str, list[dict[str, float]]] = {"sdk": [], "sessiontape": []}
    for round_no in range(rounds):
        sdk = SQLiteSession("john@example.com:bench", directory / f"sdk-{round_no}.sqlite")
        store = ItemStore(directory / f"ours-{round_no}.sqlite")
        try:
            runs["sdk"].append(await measure(sdk, turns))
            figures = await measure(store.session("john@example.com", "bench"), turns)
            figures["round_trip"] = await round_trip(store)
            runs["sessiontape"].append(figures)
        finally:
            sdk.close()
            await store.close()
    return {side: {key: median([r[key] for r in results]) for key in results[0]}
            for side, results in runs.items()}


def report(figures: dict[str, dict[str, float]], turns: int) -> list[tuple[str, str, str, str]]:
    """Rows of (what, SDK, sessiontape, speed-up) for printing."""
    sdk, ours = figures["sdk"], figures["sessiontape"]
    items = turns * ITEMS_PER_TURN
    return [
        (f"add_items, {ITEMS_PER_TURN} items (x{turns})", f"{1 / sdk['add']:,.0f} calls/s",
         f"{1 / ours['add']:,.0f} calls/s", f"{sdk['add'] / ours['add']:.1f}x"),
        (f"first get_items() of {items} items", f"{sdk['first'] * 1e3:.1f} ms",
         f"{ours['first'] * 1e3:.1f} ms", f"{sdk['first'] / ours['first']:.1f}x"),
        (f"get_items() of {items} items", f"{sdk['full'] * 1e3:.1f} ms",
         f"{ours['full'] * 1e3:.1f} ms", f"{sdk['full'] / ours['full']:.1f}x"),
        ("get_items(limit=40)", f"{sdk['limit40'] * 1e6:.0f} us",
         f"{ours['limit40'] * 1e6:.0f} us", f"{sdk['limit40'] / ours['limit40']:.1f}x"),
        ("(one round trip: SELECT 1)", "", f"{ours['round_trip'] * 1e6:.0f} us", ""),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (median)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the databases go (default: a temp dir on this disk)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir or Path.cwd(), prefix=".bench-") as tmp:
        figures = asyncio.run(run(args.turns, args.rounds, Path(tmp)))
    rows = [("item store", "SDK SQLiteSession", "sessiontape", "speed-up")]
    rows += report(figures, args.turns)
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
