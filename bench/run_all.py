"""Run every benchmark in bench/ and print one summary table, then each one's output.

Each benchmark runs as a subprocess with this Python, one after another (they
time things, so never two at once), all files in one temporary directory
(``--dir`` of each benchmark; SKILLET_HOME and the XDG directories point into
it too). Its printed table is parsed for the headline figures: ours, the
baseline measured beside it in the same run, their ratio, and the target
docs/performance.md sets (``-`` where it sets none). The full output of each
benchmark follows the summary.

``--quick`` runs smaller sizes: recording overhead ``--calls 200 --rounds 1``,
hook time ``--calls 200``, log stream ``--size-mb 20``, sessions listing
``--sessions 1000``, start-up ``--runs 10``, catalog ``--sessions 2000``, exports
``--quick`` (2 000 tiny sessions and 150 typical ones, ~17 MB each; its default is about
1 GB of each), ingest ``--quick`` (400 turns), web ``--quick`` (2 000 sessions, a
500-call session), replay ``--quick`` (20 turns), postgres ``--quick`` (a 5 s fleet; it
needs the PostgreSQL server of docs/testing.md); item store and compaction keep their
defaults (they take seconds).

Exits 1 if a benchmark fails (non-zero exit, or a timeout) or its table cannot
be parsed.

    python bench/run_all.py [--quick] [--only NAME ...] [--dir DIR] [--timeout S]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


@dataclass
class Result:
    """One benchmark's run: its output and the summary rows parsed from it."""

    name: str
    argv: list[str]
    seconds: float = 0.0
    returncode: int | None = None
    output: str = ""
    rows: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    error: str | None = None  # why it failed, or why its table did not parse


# -- parsing ----------------------------------------------------------------------------


def table(output: str, first_header_cell: str) -> list[list[str]]:
    """The rows of a table printed as left-justified cells joined by two spaces.

    Column starts are those of the header's cells (each cell of the header is
    padded to its column's width, like every other cell). Rows run to the first
    blank line or a line starting with ``(``. Returns [] when there is no such
    header.
    """
    lines = output.splitlines()
    for at, line in enumerate(lines):
        if line.startswith(first_header_cell + "  "):
            starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", line)]
            rows = []
            for row in lines[at + 1:]:
                if not row.strip() or row.startswith("("):
                    break
                bounds = [*starts[1:], None]
                rows.append([row[s:e].strip() for s, e in zip(starts, bounds, strict=True)])
            return rows
    return []


def number(text: str) -> float:
    """The first number in ``text`` (commas allowed)."""
    match = re.search(r"[-+]?\d[\d,]*(?:\.\d+)?", text)
    if match is None:
        raise ValueError(f"no number in {text!r}")
    return float(match[0].replace(",", ""))


def ratio_text(ratio: float, better: str, worse: str) -> str:
    """``3.2x faster`` for a ratio above 1, ``1.05x slower`` style below."""
    if ratio >= 1:
        return f"{ratio:.2f}x {better}" if ratio < 10 else f"{ratio:.0f}x {better}"
    inverse = 1 / ratio
    return f"{inverse:.2f}x {worse}" if inverse < 10 else f"{inverse:.0f}x {worse}"


def parse_item_store(output: str) -> list[tuple[str, str, str, str, str]]:
    rows = table(output, "item store")  # what, SDK, sessiontape, speed-up
    out = []
    for prefix, target in (("add_items", ">= 3x faster"), ("get_items() of", ">= 2x faster"),
                           ("get_items(limit=40)", "-")):
        row = next(r for r in rows if r[0].startswith(prefix))
        out.append((row[0], row[2], row[1], f"{number(row[3]):.1f}x faster", target))
    return out


def parse_recording(output: str) -> list[tuple[str, str, str, str, str]]:
    # what, SDK + SQLiteSession, ItemStore not recorded, recorded, recorded / not, recorded / SDK
    rows = table(output, "recording overhead")
    wall = next(r for r in rows if r[0].startswith("wall time, 1 turn"))
    per_round = next(r for r in rows if r[0].startswith("per-round ratios"))
    cpu = next(r for r in rows if r[0].startswith("CPU, whole process"))
    flush = next(r for r in rows if r[0].startswith("flush at end"))
    writes = next(r for r in rows if r[0].startswith("AgentUse file writes"))
    return [
        (wall[0] + ", vs not recorded", wall[3], wall[2] + " ItemStore, not recorded",
         f"{number(wall[4]):.3f}x time", "<= 1.05x"),
        ("  per-round ratios, median", "", "", f"{number(per_round[4]):.3f}x time", "<= 1.05x"),
        (wall[0] + ", vs the SDK", wall[3], wall[1] + " SDK + SQLiteSession",
         f"{number(wall[5]):.3f}x time", "<= 1.00x"),
        ("  per-round ratios, median", "", "", f"{number(per_round[5]):.3f}x time", "<= 1.00x"),
        ("CPU, whole process, vs not recorded", cpu[3], cpu[2], f"{number(cpu[4]):.3f}x time",
         "-"),
        ("flush at end of run (in wall time)", flush[3], "-", "-", "-"),
        ("AgentUse file writes per tool call", writes[3], "-", "-", "-"),
    ]


def parse_hook_time(output: str) -> list[tuple[str, str, str, str, str]]:
    # what, events, median, p90, p99, max, warm median, no-op median, no-op p99 (us)
    rows = table(output, "hook time (us)")
    every = next(r for r in rows if r[0].startswith("all events, both runs"))
    slowest = max((r for r in rows if ": on_" in r[0]), key=lambda r: number(r[2]))
    text = next(r for r in rows if r[0].startswith("streamed: text delta (check"))
    return [
        (f"time on the event loop per event, median ({every[1]} events)", f"{every[2]} us",
         f"{every[7]} us no-op hook", f"{number(every[2]) - number(every[7]):+.1f} us",
         "<= 20 us"),
        ("  p99", f"{every[4]} us", f"{every[8]} us no-op hook",
         f"{number(every[4]) - number(every[8]):+.1f} us", "-"),
        (f"  slowest hook, median: {slowest[0]}", f"{slowest[2]} us",
         f"{slowest[6]} us warm replay", "-", "-"),
        ("  streamed text delta, median", f"{text[2]} us", f"{text[6]} us warm replay", "-",
         "-"),
    ]


def parse_compaction(output: str) -> list[tuple[str, str, str, str, str]]:
    rows = table(output, "items")
    by_size: dict[int, dict[str, list[str]]] = {}
    for row in rows:
        if row[0]:
            size = int(number(row[0]))
        by_size.setdefault(size, {})[row[1]] = row
    sizes = sorted(by_size)
    big = by_size[sizes[-1]]
    small = by_size[sizes[0]]
    c, u = big["compacted"], big["uncompacted"]
    n = f"{sizes[-1]:,} items"
    out = [
        (f"get_items(), {n}", c[2], u[2] + " uncompacted",
         ratio_text(number(u[2]) / number(c[2]), "faster", "slower"), "-"),
        (f"model input ~tokens, {n}", c[4], u[4] + " uncompacted",
         ratio_text(number(u[4]) / number(c[4]), "fewer", "more"), "-"),
        (f"add per turn (with compaction check), {n}", c[5], u[5] + " uncompacted",
         ratio_text(number(u[5]) / number(c[5]), "faster", "slower"), "-"),
    ]
    if len(sizes) > 1:
        first = small["compacted"]
        out.append((f"compacted get_items(), {sizes[-1]:,} vs {sizes[0]:,} items", c[2],
                    first[2] + f" at {sizes[0]:,}",
                    f"{number(c[2]) / number(first[2]):.2f}x time", "flat (~1x)"))
    return out


def parse_log_stream(output: str) -> list[tuple[str, str, str, str, str]]:
    lines = output.splitlines()

    def follower(name: str) -> list[str]:
        for line in lines:
            if line[:32].strip() == name and line[32:].split():
                return line[32:].split()  # got, p50, p99, max, CPU
        raise ValueError(f"no follower row {name!r}")

    def catchup(name: str) -> list[str]:
        for line in lines:
            if line[:38].strip() == name and line[38:].split():
                return line[38:].split()  # wall, MB/s, MB/s without start-up
        raise ValueError(f"no catch-up row {name!r}")

    ours, poll, tail = (follower("sessiontape log stream"),
                        follower("sessiontape log stream --poll"), follower("tail -F"))
    gap = re.search(r"p99 gap, sessiontape - tail -F: ([-+]?[\d.]+) ms", output)
    if gap is None:
        raise ValueError("no p99 gap line")
    size = re.search(r"Catch-up: (\d+) MB", output)
    cat, text, json_ = (catchup("cat"), catchup("sessiontape log stream --no-follow"),
                        catchup("sessiontape ... --no-follow --json"))
    mb = f" ({size[1]} MB)" if size else ""
    return [
        ("follow latency p99 (watchfiles)", f"{ours[2]} ms", f"{tail[2]} ms tail -F",
         f"{float(gap[1]):+.2f} ms", "within 10 ms"),
        ("follow latency p99 (--poll)", f"{poll[2]} ms", f"{tail[2]} ms tail -F",
         f"{float(poll[2]) - float(tail[2]):+.2f} ms", "-"),
        ("follow latency p50 (watchfiles)", f"{ours[1]} ms", f"{tail[1]} ms tail -F",
         f"{float(ours[1]) - float(tail[1]):+.2f} ms", "-"),
        (f"catch-up --no-follow{mb}", f"{text[1]} MB/s", f"{cat[1]} MB/s cat",
         ratio_text(float(text[1]) / float(cat[1]), "faster", "slower"), "-"),
        (f"catch-up --no-follow --json{mb}", f"{json_[1]} MB/s", f"{cat[1]} MB/s cat",
         ratio_text(float(json_[1]) / float(cat[1]), "faster", "slower"), "-"),
    ]


def parse_sessions(output: str) -> list[tuple[str, str, str, str, str]]:
    rows = table(output, "sessions")
    out = []
    for prefix, label in (("sessiontape sessions list --json", None),
                          ("sessiontape start-up", "  start-up (list --json, empty home)"),
                          ("list_sessions() in-process", None),
                          ("sessiontape sessions show NAME", None),
                          ("show_session(info)", None)):
        row = next(r for r in rows if r[0].startswith(prefix))
        ratio = f"{number(row[3]):g}x slower" if row[3] else "-"
        out.append((label or row[0], row[1], row[2] or "-", ratio, "-"))
    return out


def parse_startup(output: str) -> list[tuple[str, str, str, str, str]]:
    def ms(name: str) -> float:
        for line in output.splitlines():
            if line[:32].strip() == name:
                return number(line[32:])
        raise ValueError(f"no row {name!r}")

    bare, version, help_ = ms("python -c pass"), ms("sessiontape --version"), \
        ms("sessiontape --help")
    return [
        ("sessiontape --version, whole process", f"{version:.1f} ms",
         f"{bare:.1f} ms python -c pass", f"{version / bare:.1f}x time", "<= 60 ms"),
        ("sessiontape --help, whole process", f"{help_:.1f} ms",
         f"{bare:.1f} ms python -c pass", f"{help_ / bare:.1f}x time", "-"),
    ]


def parse_catalog(output: str) -> list[tuple[str, str, str, str, str]]:
    header = next((line for line in output.splitlines()
                   if line.startswith("catalog (whole processes")), None)
    if header is None:
        raise ValueError("no catalog table")
    rows = table(output, header.split("  ")[0])

    def value(prefix: str) -> str:
        return next(r for r in rows if r[0].startswith(prefix))[1]

    start_up = value("sessiontape search ... --json on an empty home")
    out = [
        ("full build, in-process", value("Catalog.refresh(): full build"), "-", "-", "<= 30 s"),
        ("refresh, nothing changed", value("Catalog.refresh(): nothing changed (median"), "-",
         "-", "-"),
        ("refresh after a recorded turn", value("Catalog.refresh(): after one recorded turn"),
         "-", "-", "-"),
    ]
    for prefix, label, target in (
            ("sessiontape search '", "search --json, whole process", "<= 100 ms"),
            ("sessiontape sessions show NAME", "sessions show --json, whole process",
             "<= 100 ms"),
            ("sessiontape usage model", "usage model --json, whole process", "<= 0.5 s"),
            ("sessiontape sessions list", "sessions list --json, whole process", "<= 0.5 s")):
        ours = value(prefix)
        out.append((label, ours, f"{start_up} start-up (empty home)",
                    f"{number(ours) - number(start_up):+.1f} ms", target))
    return out


def parse_exports(output: str) -> list[tuple[str, str, str, str, str]]:
    rows = table(output, "format")
    # format, workload, sessions, input MB, seconds, MB/s, output MB, MB/s at N/4,
    # peak RSS MB at N/4, peak RSS MB at N, RSS growth, target
    if not rows:
        raise ValueError("no exports table")
    out = []
    for row in rows:
        if row[0] == "sessions list --json":
            out.append((f"  sessions list --json ({row[1]}: each export's first step)",
                        f"{row[4]} s, {row[9]} MB RSS", f"{row[8]} MB RSS at N/4",
                        f"{row[10].split(' (')[0]} RSS", "-"))
            continue
        out.append((f"export --format {row[0]}, {row[1]}, {row[2]} sessions ({row[3]} MB)",
                    f"{row[5]} MB/s, {row[9]} MB RSS", f"{row[8]} MB RSS at N/4",
                    f"{row[10].split(' (')[0]} RSS", ">= 50 MB/s, constant RSS"))
    return out


def parse_ingest(output: str) -> list[tuple[str, str, str, str, str]]:
    """The largest size's ingest and live rows, and the ratio line."""
    runs = [line.split() for line in output.splitlines()
            if line.startswith(("ingest ", "live ")) and len(line.split()) == 6]
    ratio = re.search(r"ingest / live at (\d+) turns: ([0-9.]+)", output)
    if not runs or ratio is None:
        raise ValueError("no ingest table")
    turns = ratio[1]
    by = {run[0]: run for run in runs if run[1] == turns}
    ingest, live = by["ingest"], by["live"]
    return [(f"ingest --format agentrun, {turns} turns", f"{ingest[2]} s, {ingest[5]} MB RSS",
             f"live recording {live[2]} s", f"{ratio[2]}x", "<= 1.0x the live recording")]


def parse_web(output: str) -> list[tuple[str, str, str, str, str]]:
    header = next((line for line in output.splitlines() if line.startswith("web (")), None)
    if header is None:
        raise ValueError("no web table")
    rows = table(output, header.split("  ")[0])

    def row(prefix: str) -> list[str]:
        return next(r for r in rows if r[0].startswith(prefix))

    # what, median, p95 or max, wall median, wall p95, size or note, target
    listing = row("baseline: sessiontape sessions list")[3]
    search = row("baseline: sessiontape search museums")[3]
    first, filtered, search_page = row("first sessions page"), row("filtered page"), \
        row("/search?q=museums")
    big, first_byte, last_byte = (row("session page ("), row("wall to the first body byte"),
                                  row("wall to the last byte"))
    live, many = row("live: last write"), row("live, 50 clients")
    return [
        ("first sessions page /, server (p95)", f"{first[1]} ({first[2]})",
         f"sessions list --json {listing}", f"wall {first[3]}", "<= 300 ms"),
        ("filtered page /?q=..., server (p95)", f"{filtered[1]} ({filtered[2]})", "-",
         f"wall {filtered[3]}", "<= 300 ms"),
        ("/search?q=WORD, server (p95)", f"{search_page[1]} ({search_page[2]})",
         f"search --json {search}", f"wall {search_page[3]}", "<= 50 ms"),
        (big[0].split(":")[0] + ", first byte / last", f"{first_byte[1]} / {last_byte[1]}",
         "-", last_byte[5], "-"),
        ("live: last write -> SSE event, median (p95)", f"{live[1]} ({live[2]})", "-",
         live[5], "<= 1 s"),
        ("50 SSE clients: last write -> event", many[1], "-", many[5], "<= 1 s"),
    ]


def parse_postgres(output: str) -> list[tuple[str, str, str, str, str]]:
    """The session calls against SQLAlchemySession (asyncpg), the fleet, the live log."""
    rows = table(output, "session call (median ms/op)")
    fleet = re.search(r"fleet: (.*turns/s)", output)
    lost = re.search(r"lost (\d+), interleaved (\d+)", output)
    live = re.search(r"after rec.run returned: median ([0-9.]+) ms, max ([0-9.]+) ms", output)
    if not rows or fleet is None or lost is None or live is None:
        raise ValueError("no postgres figures")
    summary = [(f"postgres: {row[0]}", f"{row[1]} ms", f"SQLAlchemySession {row[2]} ms",
                row[3], ">= 2x") for row in rows]
    summary.append(("  fleet of recorders", fleet[1], "-",
                    f"lost {lost[1]}, interleaved {lost[2]}", "nothing lost"))
    summary.append(("  live log line after the turn", f"median {live[1]} ms", "-",
                    f"max {live[2]} ms", "<= 1 s"))
    return summary


def parse_replay(output: str) -> list[tuple[str, str, str, str, str]]:
    header = next((line for line in output.splitlines() if line.startswith("replay (median")),
                  None)
    size = re.search(r"replay of a (\d+)-turn session", output)
    if header is None or size is None:
        raise ValueError("no replay table")
    rows = table(output, header.split("  ")[0])

    def row(prefix: str) -> list[str]:
        return next(r for r in rows if r[0].startswith(prefix))

    # what, wall s, tool work s, calls, wall / tool work, overhead ms/turn, identical
    sdk, inproc, whole = row("baseline"), row("replay_session()"), row("sessiontape replay, ")
    recorded, recorded_cli = row("replay_session(), recorded"), \
        row("sessiontape replay --recorded-tools, whole")
    fixed = row("sessiontape replay --turn 1")
    if not all(r[6] == "yes" for r in rows):
        raise ValueError("a replay was not identical to the recording")
    turns = size[1]
    return [
        (f"replay of {turns} turns, in-process (identical)", f"{inproc[1]} s",
         f"tool work {inproc[2]} s", f"{inproc[4]}x, +{inproc[5]} ms/turn", "<= 1.10x"),
        ("  baseline: the SDK alone driving the agent, instant model", f"{sdk[1]} s",
         f"tool work {sdk[2]} s", f"{sdk[4]}x, +{sdk[5]} ms/turn", "-"),
        ("  whole process, sessiontape replay", f"{whole[1]} s", f"tool work {whole[2]} s",
         f"{whole[4]}x, +{whole[5]} ms/turn", "<= 1.10x"),
        ("  --recorded-tools (no tool work), in-process / whole process",
         f"{recorded[5]} / {recorded_cli[5]} ms/turn", f"fixed cost {fixed[1]} s", "-", "-"),
    ]


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    args: list[str]
    quick_args: list[str]
    parse: Callable[[str], list[tuple[str, str, str, str, str]]]


BENCHMARKS = [
    Benchmark("item store", "item_store.py", [], [], parse_item_store),
    Benchmark("recording overhead", "recording_overhead.py", [],
              ["--calls", "200", "--rounds", "1"], parse_recording),
    Benchmark("hook time", "hook_time.py", [], ["--calls", "200"], parse_hook_time),
    Benchmark("compaction", "compaction.py", [], [], parse_compaction),
    Benchmark("log stream", "log_stream.py", [], ["--size-mb", "20"], parse_log_stream),
    Benchmark("sessions listing", "sessions_listing.py", [], ["--sessions", "1000"],
              parse_sessions),
    Benchmark("start-up", "startup.py", [], ["--runs", "10"], parse_startup),
    Benchmark("catalog", "catalog.py", [], ["--sessions", "2000"], parse_catalog),
    Benchmark("exports", "exports.py", [], ["--quick"], parse_exports),
    Benchmark("ingest", "ingest.py", [], ["--quick"], parse_ingest),
    Benchmark("web", "web.py", [], ["--quick"], parse_web),
    Benchmark("replay", "replay.py", [], ["--quick"], parse_replay),
    Benchmark("postgres", "postgres.py", [], ["--quick"], parse_postgres),
]


# -- running ----------------------------------------------------------------------------


def run(bench: Benchmark, quick: bool, work: Path, timeout: float) -> Result:
    directory = work / bench.script.removesuffix(".py")
    directory.mkdir()
    argv = [sys.executable, str(BENCH / bench.script),
            *(bench.quick_args if quick else bench.args), "--dir", str(directory)]
    home = work / "home"
    env = {**os.environ, "SKILLET_HOME": str(home / "skillet"),
           "XDG_DATA_HOME": str(home / "xdg-data"), "XDG_STATE_HOME": str(home / "xdg-state"),
           "XDG_CACHE_HOME": str(home / "xdg-cache"), "XDG_CONFIG_HOME": str(home / "xdg-config"),
           "PYTHONUNBUFFERED": "1"}
    result = Result(bench.name, argv)
    print(f"run_all: {bench.name}: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout, check=False)
        result.returncode = done.returncode
        result.output = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            result.error = f"exited {done.returncode}"
    except subprocess.TimeoutExpired as exc:
        result.output = (exc.stdout or b"").decode(errors="replace")
        result.error = f"timed out after {timeout:.0f} s"
    result.seconds = time.perf_counter() - start
    if result.error is None:
        try:
            result.rows = bench.parse(result.output)
        except (ValueError, StopIteration, KeyError, IndexError, ZeroDivisionError) as exc:
            result.error = f"could not parse its table: {exc!r}"
    print(f"run_all: {bench.name}: {result.error or 'ok'} in {result.seconds:.0f} s",
          file=sys.stderr, flush=True)
    return result


def print_summary(results: list[Result]) -> None:
    header = ("benchmark", "measure", "ours", "baseline", "ratio", "target")
    rows: list[tuple[str, ...]] = [header]
    for result in results:
        if result.error is not None:
            rows.append((result.name, f"FAILED: {result.error}", "", "", "", ""))
            continue
        for number_, row in enumerate(result.rows):
            rows.append((result.name if number_ == 0 else "", *row))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a few minutes)")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        choices=[b.script.removesuffix(".py") for b in BENCHMARKS],
                        help="run only these (script names without .py)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="work here (default: a temp dir in the system's temp dir)")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds a benchmark may take (default 3600)")
    args = parser.parse_args()
    chosen = [b for b in BENCHMARKS
              if args.only is None or b.script.removesuffix(".py") in args.only]
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench-run-all-", dir=args.dir))
    try:
        results = [run(bench, args.quick, work, args.timeout) for bench in chosen]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - start
    print(f"Benchmarks{' (--quick)' if args.quick else ''}: {len(results)} run in {total:.0f} s; "
          "ours and the baseline measured side by side in the same run")
    print_summary(results)
    for result in results:
        status = result.error or "ok"
        command = " ".join([Path(result.argv[1]).name, *result.argv[2:]])
        print(f"\n=== {result.name}: {command} ({result.seconds:.0f} s, {status}) ===")
        print(result.output.rstrip())
    failed = [r.name for r in results if r.error is not None]
    if failed:
        print(f"\nrun_all: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
