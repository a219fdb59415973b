"""Compaction: get_items time and model-input size, compacted against uncompacted.

For each size N (100, 1 000 and 10 000 recorded items by default) two stores
get the same history, N/5 turns of five realistic items (user, reasoning,
function_call, output, assistant), added turn by turn on fresh files:

* uncompacted: a plain ``ItemStoreSession``; every item stays live;
* compacted: a ``CompactingSession`` (threshold 40, the deterministic
  summarizer) whose ``compact()`` is called after each turn, as the
  recorder does at the end of each run: N/5 compaction checks.

Then, per side: the median ``get_items()`` time, and the size of what a run
would send the model (``get_items()``: items and estimated tokens, via
``sessiontape.storage.skillet.compaction.estimate_tokens``). Adding is timed per turn on both
sides; on the compacted side the time in ``compact()`` is also split
into the checks that found nothing to do and the ones that compacted. The
compacted figures should stay flat as N grows. Each size also checks that
nothing was lost (archive + live items, summaries aside, are the N items).

    python bench/compaction.py [--sizes 100 1000 10000] [--rounds 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

from timing import median, timed

from sessiontape.storage.skillet.compaction import (
    DEFAULT_THRESHOLD,
    CompactingSession,
    CompactionInfo,
    archived_items,
    estimate_tokens,
)
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.summarizers import is_summary

ITEMS_PER_TURN = 5
READS = 21
USER_ID = "john@example.com"


def turn_items(turn: int) -> list[dict[str, Any]]:
    """Five realistic Responses-API items: user, reasoning, call, output, answer."""
    call = f"call_{turn}"
    return [
        {"role": "user", "content": f"Question number {turn}: how many files are in dir{turn}?"},
        {"type": "reasoning", "id": f"rs_{turn}", "summary": [
            {"type": "summary_text", "text": f"List dir{turn}, then count."}]},
        {"type": "function_call", "call_id": call, "name": "run_command_line",
         "arguments": f'{{"commandLine": "ls -1 dir{turn} | wc -l"}}', "id": f"fc_{turn}",
         "status": "completed"},
        {"type": "function_call_output", "call_id": call, "output": f'{{"stdout": "{turn}\\n"}}'},
        {"type": "message", "role": "assistant", "id": f"msg_{turn}", "status": "completed",
         "content": [{"type": "output_text", "text": f"There are {turn} files in dir{turn}.",
                      "annotations": []}]},
    ]


async def measure(store: ItemStore, name: str, batches: list[list[Any]],
                  compacting: bool) -> dict[str, float]:
    """Add ``batches`` turn by turn (compaction check after each turn when ``compacting``),
    then read back; the figures of one side."""
    inner = store.session(USER_ID, name)
    compactions: list[CompactionInfo] = []
    session: Any = CompactingSession(inner, threshold=DEFAULT_THRESHOLD,
                                     on_compaction=compactions.append) if compacting else inner
    checks: list[float] = []  # seconds per compact() that found nothing to do
    compacts: list[float] = []  # ... and per one that compacted
    gc.collect()
    start = time.perf_counter()
    for batch in batches:
        await session.add_items(batch)
        if compacting:
            before = len(compactions)
            began = time.perf_counter()
            await session.compact()
            (compacts if len(compactions) > before else checks).append(
                time.perf_counter() - began)
    add = (time.perf_counter() - start) / len(batches)
    gc.collect()
    read, items = await timed(session.get_items, READS)
    everything = [item for batch in batches for item in batch]
    if compacting:  # nothing lost: archive + live, summaries aside, are every item added
        archive = [item for _, item in await archived_items(store.path, USER_ID, name)]
        kept = [i for i in archive + items if not is_summary(i)]
        assert kept == everything, "compaction lost or reordered items"
    else:
        assert items == everything
    return {"add": add, "read": read, "items": len(items), "tokens": estimate_tokens(items),
            "compactions": len(compactions), "check": median(checks),
            "compact": sum(compacts) / len(compacts) if compacts else 0.0,
            "compaction_share": (sum(checks) + sum(compacts)) / (add * len(batches))}


async def run(sizes: list[int], rounds: int, directory: Path) -> dict[int, dict[str, Any]]:
    """Both sides for each size, alternating, ``rounds`` times on fresh files; medians."""
    figures: dict[int, dict[str, Any]] = {}
    for size in sizes:
        batches = [turn_items(t) for t in range(size // ITEMS_PER_TURN)]
        runs: dict[str, list[dict[str, float]]] = {"uncompacted": [], "compacted": []}
        for round_no in range(rounds):
            store = ItemStore(directory / f"items-{size}-{round_no}.sqlite")
            await store.execute("SELECT 1")  # open the file before anything is timed
            try:
                for side in (("uncompacted", "compacted") if round_no % 2 == 0
                             else ("compacted", "uncompacted")):
                    runs[side].append(await measure(store, side, batches, side == "compacted"))
            finally:
                await store.close()
        figures[size] = {side: {key: median([r[key] for r in results]) for key in results[0]}
                         for side, results in runs.items()}
    return figures


def report(figures: dict[int, dict[str, Any]]) -> list[tuple[str, ...]]:
    """Rows of the table, one per size and side."""
    rows = []
    for size, sides in figures.items():
        for side in ("uncompacted", "compacted"):
            f = sides[side]
            checks = (f"{f['compactions']:.0f} compactions; check {f['check'] * 1e3:.2f} ms, "
                      f"compact {f['compact'] * 1e3:.1f} ms; {f['compaction_share']:.0%} of add"
                      if side == "compacted" else "")
            rows.append((f"{size:,}", side, f"{f['read'] * 1e3:.2f} ms", f"{f['items']:,.0f}",
                         f"{f['tokens']:,.0f}", f"{f['add'] * 1e3:.2f} ms", checks))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000],
                        help="recorded items (multiples of 5)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds on fresh files (median)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the databases go (default: a temp dir on this disk)")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.dir or Path.cwd(), prefix=".bench-") as tmp:
        figures = asyncio.run(run(args.sizes, args.rounds, Path(tmp)))
    rows: list[tuple[str, ...]] = [("items", "store", "get_items()", "model input",
                                    "~tokens", "add per turn", "compaction (per check)")]
    rows += report(figures)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())
    print(f"(threshold {DEFAULT_THRESHOLD}, {ITEMS_PER_TURN} items per turn, medians of "
          f"{args.rounds} rounds; {time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()
