"""PostgreSQL store: against the SDK's SQLAlchemySession, under a fleet of recorders, and live.

Everything runs in one go against one server (``--url``, default the local test
database), each part in a fresh schema of its own (``search_path``), dropped at the end:

1. Session calls, side by side: sessiontape's ``PostgresStore(url).session(...)``
   (psycopg 3 and its pool, on the store's own event loop thread) against the SDK's
   ``SQLAlchemySession`` with the asyncpg driver and with the psycopg one (one engine
   each, ``create_tables=True``). Each ``add_items`` call is one turn's items as the SDK
   makes them (a user message, a function_call, its output, an assistant message:
   bench/item_store.py's turn without the reasoning item), into a conversation that
   grows to 300 turns; each ``get_items()`` reads a conversation of 50, 200 or 1000
   items (and ``limit=40`` of the 1000). Every call is timed on its own; the figure is
   the median over all calls of 3 rounds (``Sizes``; the sides alternate, fresh
   conversations each round, a warm-up first). ratio = SQLAlchemy time / ours (target: >= 2).
2. A fleet: FLEET (20) processes (spawned, as a fleet of workers would be), each with a
   ``Recorder`` of its own conversation on the store's URL, run turns for ``--seconds``
   with the real SDK ``Runner`` and a scripted model (a turn: a tool call, its output and
   the final answer; every prompt, call id and answer names the conversation and turn).
   Then the database is checked: for each conversation, the turns its recorder completed
   = the user messages in ``session_items``; its rows are exactly its turns' four items,
   in turn order (a row of another conversation or turn, or out of place, counts as
   interleaved; a completed turn without its user message as lost); its
   ``sessiontape_log`` lines have seq 1..N with no gap, in the order of their row ids,
   and hold exactly its turns in order (a user_message opening, a final_result closing
   each, no text of another turn). Shown: turns/s of the whole fleet, each turn's wall
   time, the recorders' ``errors``.
3. Live log latency: a ``StoreLogStream`` (storage/backends/postgres_log.py) follows the
   store in a thread, noting ``time.monotonic()`` as each final_result line reaches
   ``on_entries``, while a recorder in the same process runs FOLLOW_TURNS turns (50 ms
   apart). Latency = seen - the moment ``rec.run`` returned (it returns after the
   recorder's flush, so the line is already committed: a line seen before that counts
   as <= 0), and seen - the line's own timestamp (when the recorder made it, ms). Target:
   within 1 s.

Measured on this machine (2 CPUs, PostgreSQL 15.20 on localhost, 2026-11-27; full run,
60 s fleet), after reads keep a snapshot of each conversation (as the file store does):

    session call (median ms/op)             sessiontape  SA asyncpg  ratio  SA psycopg  ratio
    add_items, 4 items (x900)                      0.71        1.85   2.6x        1.95   2.8x
    get_items() of 50 items (x600)                 0.37        0.86   2.3x        0.94   2.5x
    get_items() of 200 items (x300)                0.45        1.28   2.8x        1.36   3.0x
    get_items() of 1000 items (x120)               0.98        3.56   3.6x        3.55   3.6x
    get_items() of 1000, first read (x120)         3.12        3.52   1.1x        3.54   1.1x
    get_items(limit=40) of 1000 (x300)             0.42        0.88   2.1x        1.15   2.7x

    fleet: 20 processes x 60 s: 2,656 turns, 43.2 turns/s (per turn: median 396 ms,
    p95 964 ms; per process 120-154 turns)
    lost 0, interleaved 0
    log: gaps 0, out of order 0, bad turns 0
    recorder errors 0, failed runs 0

    live log (100 turns): after rec.run returned: median 0.1 ms, max 0.2 ms (31 of 100
    seen before it returned); after the line was made: median 6 ms, max 46 ms

The 2x target holds for every call a recorder makes in a conversation: ``add_items``, and
``get_items`` of a conversation this process has read before (only the rows added since
are converted; the count of rows up to the last one read catches a row another host
committed out of id order, or removed). The first read of a long conversation in a process
is at par (1.1x at 1000 items): every row is converted from the JS SDK's protocol shape
(what skilled_crew reads), which SQLAlchemySession, storing the Python shape, never does.
Before the snapshot (the first version, three runs): 1.0-1.2x at 1000 items, 1.5-2.3x at
50-200. The fleet's 20 processes share the 2 CPUs with the server.

    python bench/postgres.py [--url URL] [--seconds 60] [--quick] [--only calls|fleet|live]
                             [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import multiprocessing
import os
import re
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import psycopg
from agents import Agent, Usage, function_tool
from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from agents.memory import SessionABC
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from item_store import turn_items
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from timing import median

from sessiontape import Recorder
from sessiontape.storage.backends.postgres import PostgresStore
from sessiontape.storage.backends.postgres_log import StoreLogSource, StoreLogStream

URL = "postgresql://postgres@127.0.0.1:5432/test"
FLEET = 20
HISTORIES = (50, 200, 1000)
FOLLOW_TURNS = 100
FOLLOW_GAP_S = 0.05
TURN_TEXT = re.compile(r"conv (\d+) turn (\d+)")
PRICED_MODEL = "gpt-4.1"  # the name the scripted model reports: one the price table knows


@dataclass(frozen=True)
class Sizes:
    """How much work part 1 does: rounds, add_items calls and get_items calls per round."""

    rounds: int = 3
    adds: int = 300
    reads: dict[int, int] = field(default_factory=lambda: {50: 200, 200: 100, 1000: 40})
    limited: int = 100


QUICK = Sizes(rounds=1, adds=100, reads={50: 50, 200: 30, 1000: 10}, limited=30)


# -- schemas --------------------------------------------------------------------------


def in_schema(url: str, schema: str) -> str:
    """``url`` whose connections use ``schema`` (libpq's ``options``)."""
    options = quote(f"-csearch_path={schema}", safe="")
    return f"{url}{'&' if '?' in url else '?'}options={options}"


def make_schema(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')


def drop_schemas(url: str, schemas: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- 1. session calls -----------------------------------------------------------------


def sdk_turn(turn: int) -> list[dict[str, Any]]:
    """One turn's items as the SDK makes them: user, function_call, its output, answer."""
    return [item for item in turn_items(turn) if item.get("type") != "reasoning"]


ITEMS_PER_TURN = len(sdk_turn(0))


class Sides:
    """The stores compared, each making a fresh SDK session by id."""

    def __init__(self, url: str, schemas: dict[str, str]) -> None:
        self.ours = PostgresStore(in_schema(url, schemas["ours"]))
        host = url.split("://", 1)[1].split("?", 1)[0]
        self.engines: dict[str, AsyncEngine] = {
            "asyncpg": create_async_engine(
                f"postgresql+asyncpg://{host}",
                connect_args={"server_settings": {"search_path": schemas["asyncpg"]}}),
            "psycopg": create_async_engine(
                f"postgresql+psycopg://{host}",
                connect_args={"options": f"-csearch_path={schemas['psycopg']}"}),
        }

    def names(self) -> list[str]:
        return ["sessiontape", *self.engines]

    def session(self, side: str, name: str) -> SessionABC:
        if side == "sessiontape":
            return self.ours.session("bench@example.com", name)
        return SQLAlchemySession(f"bench@example.com:{name}", engine=self.engines[side],
                                 create_tables=True)

    async def close(self) -> None:
        await self.ours.close()
        for engine in self.engines.values():
            await engine.dispose()


async def per_call(call: Callable[[], Awaitable[Any]], repeat: int,
                   before: Callable[[], None] | None = None) -> list[float]:
    """Seconds of each of ``repeat`` awaits of ``call()`` (``before()``, untimed, first)."""
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return times


async def fill(session: SessionABC, items: int) -> None:
    """Add whole turns (untimed) until the conversation holds exactly ``items`` items."""
    turn = 0
    while items > 0:
        batch = sdk_turn(turn)[:items]
        await session.add_items(batch)  # type: ignore[arg-type]
        items -= len(batch)
        turn += 1


async def measure_side(sides: Sides, side: str, tag: str, sizes: Sizes) -> dict[str, list[float]]:
    """Every call's seconds, by operation, for one side in one round."""
    times: dict[str, list[float]] = {}
    adding = sides.session(side, f"{tag}-add")
    batches = iter([sdk_turn(t) for t in range(sizes.adds)])
    gc.collect()
    times["add"] = await per_call(lambda: adding.add_items(next(batches)),  # type: ignore[arg-type]
                                  sizes.adds)
    for size in HISTORIES:
        reading = sides.session(side, f"{tag}-read{size}")
        await fill(reading, size)
        items = await reading.get_items()
        assert len(items) == size, (side, size, len(items))
        gc.collect()
        times[f"get{size}"] = await per_call(reading.get_items, sizes.reads[size])
        if size == max(HISTORIES):
            # The first read of a conversation (no snapshot of it: another host's, or a
            # new process): everything converted. SQLAlchemySession reads so every time.
            times["cold"] = await per_call(reading.get_items, sizes.reads[size],
                                           before=sides.ours.snapshots.by_pair.clear)
            latest = await reading.get_items(limit=40)
            assert len(latest) == 40 and latest == items[-40:], side
            times["limit40"] = await per_call(partial(reading.get_items, limit=40),
                                              sizes.limited)
    return times


async def measure_calls(url: str, schemas: dict[str, str], sizes: Sizes,
                        ) -> tuple[list[str], dict[str, dict[str, float]], dict[str, int]]:
    """Median seconds per call by side and operation (all rounds' calls), and call counts."""
    sides = Sides(url, schemas)
    names = sides.names()
    samples: dict[str, dict[str, list[float]]] = {side: {} for side in names}
    try:
        for side in names:  # warm-up: pools open, tables made, statements prepared
            await measure_side(sides, side, "warm", QUICK)
        for round_no in range(sizes.rounds):
            order = names[round_no % len(names):] + names[:round_no % len(names)]
            for side in order:
                figures = await measure_side(sides, side, f"r{round_no}", sizes)
                for op, values in figures.items():
                    samples[side].setdefault(op, []).extend(values)
    finally:
        await sides.close()
    medians = {side: {op: median(values) for op, values in ops.items()}
               for side, ops in samples.items()}
    counts = {op: len(values) for op, values in samples[names[0]].items()}
    return names, medians, counts


def calls_table(names: list[str], medians: dict[str, dict[str, float]],
                counts: dict[str, int]) -> list[list[str]]:
    labels = {"add": f"add_items, {ITEMS_PER_TURN} items",
              **{f"get{size}": f"get_items() of {size} items" for size in HISTORIES},
              "cold": f"get_items() of {max(HISTORIES)}, first read",
              "limit40": f"get_items(limit=40) of {max(HISTORIES)}"}
    header = ["session call (median ms/op)", names[0]]
    for side in names[1:]:
        header += [f"SA {side}", "ratio"]
    rows = [header]
    for op, label in labels.items():
        ours = medians[names[0]][op]
        row = [f"{label} (x{counts[op]})", f"{ours * 1e3:.2f}"]
        for side in names[1:]:
            theirs = medians[side][op]
            row += [f"{theirs * 1e3:.2f}", f"{theirs / ours:.1f}x"]
        rows.append(row)
    return rows


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:],
                                                                           strict=True)]
        print("  ".join(cells))


# -- 2. a fleet of recorders ----------------------------------------------------------


@function_tool
def square(n: int) -> int:
    """Square a number."""
    return n * n


def usage() -> Usage:
    return Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)


def prompt(conv: int, turn: int) -> str:
    return f"conv {conv} turn {turn} prompt"


def answer(conv: int, turn: int) -> str:
    return f"conv {conv} turn {turn} answer"


def call_id(conv: int, turn: int) -> str:
    return f"call_c{conv}_t{turn}"


def turn_agent(conv: int, turn: int) -> Agent[Any]:
    """An agent whose scripted model calls ``square`` once, then answers (ids unique)."""
    name = f"c{conv}_t{turn}"
    steps = [
        ModelStep(output=[function_call("square", {"n": turn}, call_id=call_id(conv, turn),
                                        item_id=f"fc_{name}")],
                  usage=usage(), response_id=f"resp_{name}_1"),
        ModelStep(output=[assistant_message(answer(conv, turn), item_id=f"msg_{name}")],
                  usage=usage(), response_id=f"resp_{name}_2"),
    ]
    scripted = ScriptedModel(steps)
    scripted.model = PRICED_MODEL  # type: ignore[attr-defined]
    return Agent(name="Fleet agent", tools=[square], model=scripted)


def conversation(conv: int) -> str:
    return f"conv-{conv:02d}"


@dataclass
class WorkerResult:
    conv: int
    turns: int = 0
    failed: int = 0
    errors: int = 0
    elapsed: float = 0.0
    turn_times: list[float] = field(default_factory=list)
    problem: str = ""


async def record_turns(conv: int, url: str, seconds: float, barrier: Any) -> WorkerResult:
    result = WorkerResult(conv)
    rec = Recorder("fleet@example.com", conversation(conv), store=url,
                   compaction_threshold=None)
    try:
        barrier.wait(120)
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            turn = result.turns + result.failed
            began = time.monotonic()
            try:
                run = await rec.run(turn_agent(conv, turn), prompt(conv, turn))
            except Exception as exc:
                result.failed += 1
                result.problem = result.problem or repr(exc)
                continue
            result.turn_times.append(time.monotonic() - began)
            if run.final_output == answer(conv, turn):
                result.turns += 1
            else:
                result.failed += 1
        result.elapsed = time.monotonic() - start
    finally:
        await rec.aclose()
    result.errors = rec.errors
    return result


def fleet_worker(conv: int, url: str, seconds: float, barrier: Any, results: Any) -> None:
    """One process of the fleet (a ``spawn`` target): its result goes to ``results``."""
    try:
        results.put(asyncio.run(record_turns(conv, url, seconds, barrier)))
    except BaseException as exc:
        results.put(WorkerResult(conv, problem=repr(exc)))
        raise


def run_fleet(url: str, seconds: float) -> list[WorkerResult]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(FLEET)
    results = context.Queue()
    workers = [context.Process(target=fleet_worker, args=(conv, url, seconds, barrier, results))
               for conv in range(FLEET)]
    for worker in workers:
        worker.start()
    done = [results.get(timeout=seconds + 300) for _ in workers]
    for worker in workers:
        worker.join(30)
    return sorted(done, key=lambda r: r.conv)


@dataclass
class FleetCheck:
    lost: int = 0  # turns the recorder completed without a stored user message
    extra: int = 0  # stored user messages beyond the completed turns
    interleaved: int = 0  # rows not where the conversation's own turns put them
    missing_rows: int = 0  # rows fewer (or more) than the completed turns' items
    log_gaps: int = 0  # seq numbers missing from 1..N
    log_disorder: int = 0  # lines whose row ids are not in seq order
    log_bad_turns: int = 0  # turns of the log not exactly the completed ones, in order


def expected_row(conv: int, position: int) -> tuple[str, str]:
    """(type, text that must be in it) of row ``position`` of a conversation."""
    turn, part = divmod(position, ITEMS_PER_TURN)
    return [("message", f'"content":"{prompt(conv, turn)}"'),
            ("function_call", f'"callId":"{call_id(conv, turn)}"'),
            ("function_call_result", f'"callId":"{call_id(conv, turn)}"'),
            ("message", f'"text":"{answer(conv, turn)}"')][part]


def check_items(conv: int, completed: int, rows: list[str], check: FleetCheck) -> None:
    users = sum(1 for row in rows if orjson.loads(row).get("role") == "user")
    check.lost += max(0, completed - users)
    check.extra += max(0, users - completed)
    for position, row in enumerate(rows):
        kind, text = expected_row(conv, position)
        if orjson.loads(row).get("type") != kind or text not in row \
                or any(int(c) != conv for c, _ in TURN_TEXT.findall(row)):
            check.interleaved += 1
    check.missing_rows += abs(completed * ITEMS_PER_TURN - len(rows))


def check_log(conv: int, completed: int, rows: list[tuple[int, int, str]],
              check: FleetCheck) -> None:
    """``rows``: (id, seq, entry) in seq order."""
    seqs = [seq for _, seq, _ in rows]
    check.log_gaps += (max(seqs) - len(set(seqs))) if seqs else 0
    ids = [row_id for row_id, _, _ in rows]
    check.log_disorder += sum(1 for a, b in itertools.pairwise(ids) if b < a)
    turns: list[list[dict[str, Any]]] = []
    for _, _, entry in rows:
        line = orjson.loads(entry)
        if line.get("kind") == "user_message" or not turns:
            turns.append([])
        turns[-1].append(line)
    for turn in range(max(completed, len(turns))):
        lines = turns[turn] if turn < len(turns) else []
        whole = turn < completed and bool(lines) \
            and lines[0].get("userInput") == prompt(conv, turn) \
            and lines[-1].get("kind") == "final_result" \
            and lines[-1]["finalResult"].get("text") == answer(conv, turn) \
            and all((int(c), int(t)) == (conv, turn)
                    for line in lines for c, t in TURN_TEXT.findall(orjson.dumps(line).decode()))
        check.log_bad_turns += not whole


def check_fleet(url: str, results: list[WorkerResult]) -> FleetCheck:
    check = FleetCheck()
    with psycopg.connect(url, autocommit=True) as conn:
        for result in results:
            pair = ("fleet@example.com", conversation(result.conv))
            items = conn.execute("SELECT item_json FROM session_items WHERE user_id = %s AND "
                                 "session_name = %s ORDER BY created_at, id", pair).fetchall()
            check_items(result.conv, result.turns, [row[0] for row in items], check)
            lines = conn.execute("SELECT id, seq, entry FROM sessiontape_log WHERE user_id = %s "
                                 "AND session_name = %s ORDER BY seq", pair).fetchall()
            check_log(result.conv, result.turns, lines, check)
    return check


def fleet_report(results: list[WorkerResult], check: FleetCheck, seconds: float) -> list[str]:
    turns = sum(r.turns for r in results)
    wall = max(r.elapsed for r in results) or seconds
    times = sorted(t for r in results for t in r.turn_times)
    p95 = times[int(len(times) * 0.95)] if times else 0.0
    lines = [
        f"fleet: {FLEET} processes x {seconds:g} s: {turns:,} turns, {turns / wall:.1f} turns/s "
        f"(per turn: median {median(times) * 1e3:.0f} ms, p95 {p95 * 1e3:.0f} ms; "
        f"per process {min(r.turns for r in results)}-{max(r.turns for r in results)} turns)",
        f"lost {check.lost}, interleaved {check.interleaved}"
        + (f", extra user messages {check.extra}" if check.extra else "")
        + (f", rows missing or extra {check.missing_rows}" if check.missing_rows else ""),
        f"log: gaps {check.log_gaps}, out of order {check.log_disorder}, "
        f"bad turns {check.log_bad_turns}",
        f"recorder errors {sum(r.errors for r in results)}, failed runs "
        f"{sum(r.failed for r in results)}",
    ]
    lines += [f"  conv {r.conv}: {r.problem}" for r in results if r.problem]
    return lines


# -- 3. the live log --------------------------------------------------------------------


async def follow_latency(url: str, turns: int) -> tuple[list[float], list[float], int]:
    """(return -> seen, made -> seen) seconds of each turn's final_result line, and how
    many lines the follower never saw."""
    seen: dict[str, tuple[float, float]] = {}  # answer -> (monotonic, wall) when seen
    all_seen = threading.Event()
    made: dict[str, float] = {}  # answer -> wall time the recorder stamped on the line

    def on_entries(source: StoreLogSource, entries: list[dict[str, Any]]) -> None:
        now, wall = time.monotonic(), time.time()
        for entry in entries:
            if entry.get("kind") == "final_result":
                text = entry["finalResult"]["text"]
                seen[text] = (now, wall)
                if len(seen) == turns:
                    all_seen.set()
                made[text] = datetime.fromisoformat(
                    entry["timestamp"].replace("Z", "+00:00")).timestamp()

    store = PostgresStore(url)  # its tables made first: the follower reads, never makes them
    await store.list_sessions()
    await store.close()
    stop = threading.Event()
    stream = StoreLogStream(url, on_entries=on_entries)
    stream.open()  # listening before the first turn (run() would open it in the thread)
    stream.catch_up()
    follower = threading.Thread(target=stream.follow, args=(stop.is_set,), daemon=True)
    follower.start()
    returned: dict[str, float] = {}
    try:
        async with Recorder("live@example.com", "followed", store=url,
                            compaction_threshold=None) as rec:
            for turn in range(turns):
                await rec.run(turn_agent(0, turn), prompt(0, turn))
                returned[answer(0, turn)] = time.monotonic()
                await asyncio.sleep(FOLLOW_GAP_S)
            await asyncio.to_thread(all_seen.wait, 5)
            if rec.errors:
                print(f"live log: recorder errors {rec.errors}")
    finally:
        stop.set()
        follower.join(5)
        stream.close()
    after_return = [seen[text][0] - at for text, at in returned.items() if text in seen]
    after_made = [seen[text][1] - made[text] for text in returned if text in seen]
    return after_return, after_made, turns - len(after_return)


def live_report(after_return: list[float], after_made: list[float], missed: int,
                turns: int) -> str:
    early = sum(1 for t in after_return if t <= 0)
    return (f"live log ({turns} turns): after rec.run returned: median "
            f"{median(after_return) * 1e3:.1f} ms, max {max(after_return) * 1e3:.1f} ms "
            f"({early} of {len(after_return)} seen before it returned); after the line was "
            f"made: median {median(after_made) * 1e3:.0f} ms, max {max(after_made) * 1e3:.0f} ms"
            + (f"; never seen: {missed}" if missed else ""))


# -- main -------------------------------------------------------------------------------


def point_env_at(directory: Path) -> None:
    """The recorders' files (AgentUse tree, JSONL logs) inside ``directory``; no tracing."""
    for name, sub in (("SKILLET_HOME", "skillet"), ("XDG_DATA_HOME", "xdg-data"),
                      ("XDG_STATE_HOME", "xdg-state"), ("XDG_CACHE_HOME", "xdg-cache"),
                      ("XDG_CONFIG_HOME", "xdg-config")):
        os.environ[name] = str(directory / sub)
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=URL, help="the server's database (schemas are made "
                        "and dropped in it)")
    parser.add_argument("--seconds", type=float, default=60.0, help="the fleet's run")
    parser.add_argument("--quick", action="store_true", help="less of everything (5 s fleet)")
    parser.add_argument("--only", choices=("calls", "fleet", "live"), default=None)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the recorders' files go (default: a temporary directory)")
    args = parser.parse_args()
    seconds = 5.0 if args.quick else args.seconds
    prefix = f"bench_pg_{os.getpid()}"
    schemas = {part: f"{prefix}_{part}"
               for part in ("ours", "asyncpg", "psycopg", "fleet", "live")}
    with tempfile.TemporaryDirectory(prefix="sessiontape-bench-", dir=args.dir) as tmp:
        point_env_at(Path(tmp))
        try:
            for schema in schemas.values():
                make_schema(args.url, schema)
            if args.only in (None, "calls"):
                names, medians, counts = asyncio.run(
                    measure_calls(args.url, schemas, QUICK if args.quick else Sizes()))
                print_table(calls_table(names, medians, counts))
                print()
            if args.only in (None, "fleet"):
                url = in_schema(args.url, schemas["fleet"])
                results = run_fleet(url, seconds)
                for line in fleet_report(results, check_fleet(url, results), seconds):
                    print(line)
                print()
            if args.only in (None, "live"):
                turns = 20 if args.quick else FOLLOW_TURNS
                figures = asyncio.run(follow_latency(in_schema(args.url, schemas["live"]),
                                                     turns))
                print(live_report(*figures, turns))
        finally:
            with suppress(psycopg.Error):
                drop_schemas(args.url, list(schemas.values()))


if __name__ == "__main__":
    main()
