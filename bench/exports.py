"""``sessiontape export``: each format's speed and peak memory over many sessions (issue 26).

The target: exports stream, 1 GB of sessions exports in constant memory, >= 50 MB/s.

Two workloads of recorded conversations, each generated as ``bench/sessions_listing.py``
generates them (replay logs with owner records, AgentUse trees, the item store), in a
temporary directory (``--dir``): SKILLET_HOME and the XDG directories point into it, and
the AgentUse tree is made the project's, as ``bench/catalog.py`` does, so every export
reads each conversation from its tree and its log:

* ``typical``: 2-4 turns, each with 1-2 tool calls whose results are search hits of 1-6 KB
  (70 %), 6-30 KB (25 %) or 50-150 KB (5 %), and an answer of 40-200 words
  (:func:`make_typical_session`): ~125 KB of log and tree files a session, so the default
  9 000 sessions are about 1.1 GB;
* ``tiny``: ``sessions_listing``'s own sessions, 1-3 turns of one small tool call: ~8.6 KB
  a session in 18 files, so the default 125 000 sessions are about 1 GB and 2.2 million
  inodes. The worst case: the cost of each file and each conversation dominates.

Each workload is measured twice: with SESSIONS / 4 sessions, then (the first deleted) with
SESSIONS. At each size, after one untimed ``sessiontape sessions list --json`` (it builds
the catalog, which the exports list from, and warms the page cache), each format runs once
as a whole process of sessiontape installed from a wheel (``bench/installed.py``):
``sessiontape export --format F --out FILE --force --json`` over every conversation. For
each: wall seconds, the process's peak RSS, the output's size, and input MB/s = the bytes
of the log and tree files / wall (start-up, the catalog's refresh and the listing
included, as a user waits for them). The peak RSS is ``ru_maxrss`` of the export's process
as a small launcher process sees it (``_LAUNCHER``): ``ru_maxrss`` survives ``execve``, so a
process spawned straight from this bench reports at least the bench's own ~100 MB.
Constant memory: the peak RSS at SESSIONS is that at SESSIONS / 4 give or take RSS_SLACK,
or RSS_PER_INPUT of the input the larger size adds. The baseline, measured the same way:
``sessiontape sessions list --json`` (start-up, the catalog's refresh and the listing every
export does first). MB are MiB. Each workload's table is printed when it is done, the whole
table at the end. ``--quick``: 150 typical and 2 000 tiny sessions (~17 MB each).

    python bench/exports.py [--workload typical|tiny|both] [--sessions N] [--quick] [--dir DIR]

Measured on the team machine (2 cores, nothing else running) on 2026-11-27, two runs:
typical, 9 000 sessions (1.19 GB): 76-152 MB/s (session-events 76.2 ... atif 151.9; the
target holds, 1.5-3.0x), peak RSS 31-36 MB at N/4 and at N; tiny, 20 000 sessions
(168 MB): 16-21 MB/s (missed: ~0.4 ms a session, the cost of its 18 files), 28-34 MB. On
the same kind of machine shared with other test runs (load 1.0-2.2): typical 27-43 MB/s.
docs/performance.md, "Exports", has the tables and what limits each figure.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import sessions_listing
from catalog import make_project
from installed import installed_sessiontape
from sessions_listing import AGENT, MODEL, environment, generate_and_say, layout

from sessiontape.storage.json_style import dumps_compact, dumps_pretty
from sessiontape.storage.names import sanitize_agent_name, sanitize_log_name
from sessiontape.storage.skillet import log_entries as e

FORMATS = ("ledger", "session-events", "markdown", "html", "agentrun", "atif")
SUFFIX = {"ledger": "sqlite", "markdown": "md", "html": "html"}  # else jsonl
TARGET_MB_S = 50.0
# "constant": peak RSS at N at most RSS_SLACK above that at N/4, or RSS_PER_INPUT of the
# input added (the Agents SDK's ~97 MB of imports hide growth from a plain ratio)
RSS_SLACK, RSS_PER_INPUT = 2 * 2**20, 0.02
MB = 2**20
LISTING = "sessions list --json"  # the baseline: start-up, catalog refresh and listing
# the workloads: sessions at the large size by default (~1 GB each), and with --quick
WORKLOADS = ("typical", "tiny")
DEFAULT_SESSIONS = {"tiny": 125_000, "typical": 9_000}
QUICK_SESSIONS = {"tiny": 2_000, "typical": 150}
WORDS = ("museum", "tram", "harbour", "lunch", "ticket", "opening", "hours", "river", "old",
         "town", "market", "bridge", "tower", "garden", "station", "price", "free", "walk")


@dataclass(frozen=True)
class Run:
    """One export as a whole process."""

    seconds: float
    peak_rss: int  # bytes
    output: int  # bytes


# -- the typical workload -----------------------------------------------------------------


def _output(rng: random.Random) -> str:
    """A tool's result as JSON text: search hits with snippets, mostly a few KB, a quarter
    tens of KB, one in twenty 50-150 KB (a fetched page, a file)."""
    pick = rng.random()
    size = rng.randint(1_000, 6_000) if pick < 0.70 else rng.randint(6_000, 30_000) \
        if pick < 0.95 else rng.randint(50_000, 150_000)
    hits, length = [], 0
    while length < size:
        snippet = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
        hits.append({"title": f"{rng.choice(WORDS).title()} {len(hits)}", "url":
                     f"https://example.com/{rng.randbytes(6).hex()}", "snippet": snippet,
                     "score": round(rng.random(), 3)})
        length += len(snippet) + 70
    return orjson.dumps({"results": hits}).decode()


def make_typical_session(index: int, paths: dict[str, Path], project: str
                         ) -> tuple[list[tuple[str, str, int, str]], tuple[str, str, str]]:
    """:func:`sessions_listing.make_session`'s session with typical sizes: 2-4 turns, each
    with 1-2 tool calls (:func:`_output`) before its answer; ~100 KB of log and tree."""
    user, name, _, start = sessions_listing.session_for(index)
    rng = random.Random(index * 7 + 1)
    turns = rng.randint(2, 4)
    session_id = sessions_listing._ulid(start, rng)
    directory = paths["agentuse"] / f"{session_id}-{sanitize_agent_name(AGENT)}"
    os.mkdir(directory, 0o700)
    log_dir = paths["logs"] / sanitize_log_name(user)
    stem = sanitize_log_name(name, ".jsonl")
    iso = sessions_listing._iso
    rows: list[tuple[str, str, int, str]] = []
    log_lines: list[bytes] = []
    at = start
    for turn in range(turns):
        city = rng.choice(["Paris", "Lisbon", "Kyoto", "Lima", "Oslo", "Accra"])
        prompt = f"Plan day {turn + 1} of my trip to {city}, with museums, under 200 EUR."
        answer = f"Day {turn + 1} in {city}: " + " ".join(rng.choice(WORDS)
                                                         for _ in range(rng.randint(40, 200)))
        calls = [(f"call_{rng.randbytes(8).hex()}", {"city": city, "query": rng.choice(WORDS)},
                  _output(rng)) for _ in range(rng.randint(1, 2))]
        t_end = at + 2000 * len(calls) + 1400
        rows += [(user, name, t_end, dumps_compact(item).decode()) for item in (
            {"role": "user", "content": prompt},
            {"type": "message", "role": "assistant", "id": f"msg_{index}_{turn}",
             "status": "completed",
             "content": [{"type": "output_text", "text": answer, "annotations": []}]})]
        log_lines += [dumps_compact(e.user_message(prompt, iso(at))) + b"\n",
                      dumps_compact(e.step(e.agent_start(AGENT), iso(at + 100))) + b"\n"]
        message_id = sessions_listing._ulid(at, rng)
        message_dir = directory / message_id
        os.mkdir(message_dir, 0o700)
        os.mkdir(message_dir / "part", 0o700)
        parts: list[dict[str, Any]] = []
        for number, (call, args, result) in enumerate(calls):
            t_tool = at + 900 + 2000 * number
            log_lines += [dumps_compact(entry) + b"\n" for entry in (
                e.step(e.agent_tool_start(AGENT, "search", orjson.dumps(args).decode()),
                       iso(t_tool)),
                e.step(e.agent_tool_end(AGENT, "search", result), iso(t_tool + 200)))]
            parts += [{"type": "step-start"},
                      {"type": "tool", "callID": call, "tool": "search",
                       "state": {"status": "completed", "input": args, "output": result,
                                 "time": {"start": t_tool, "end": t_tool + 200}}},
                      {"type": "step-finish", "cost": 0.0002,
                       "tokens": sessions_listing._tokens(1500 + len(result) // 4, 30)}]
        t_text = t_end - 100
        log_lines += [dumps_compact(entry) + b"\n" for entry in (
            e.step(e.text(answer), iso(t_text)), e.step(e.agent_end(AGENT), iso(t_end - 1)),
            e.final_result(answer, model="openai/gpt-4.1-nano", timestamp=iso(t_end)))]
        parts += [{"type": "step-start"},
                  {"type": "text", "text": answer, "time": {"start": t_text, "end": t_text}},
                  {"type": "step-finish", "cost": 0.0003,
                   "tokens": sessions_listing._tokens(2000, len(answer) // 4)}]
        sessions_listing._write(message_dir / "message.json", dumps_pretty({
            "id": message_id, "sessionID": session_id,
            "time": {"created": at, "completed": t_end},
            "user": {"prompt": {"task": prompt}},
            "assistant": {"system": ["You plan trips."], "modelID": MODEL,
                          "providerID": "openai", "mode": "build",
                          "path": {"cwd": project, "root": project}, "cost": 0.001,
                          "tokens": sessions_listing._tokens(4000, 500)}}))
        for offset, part in enumerate(parts):
            part_id = sessions_listing._ulid(at + 100 + offset, rng)
            sessions_listing._write(message_dir / "part" / f"{part_id}.json", dumps_pretty(
                {**part, "id": part_id, "sessionID": session_id, "messageID": message_id}))
        at = t_end + rng.randint(30_000, 600_000)
    sessions_listing._write(log_dir / f"{stem}.jsonl", b"".join(log_lines))
    sessions_listing._write(log_dir / f".{stem}.owner.json",
                            dumps_compact({"user_id": user, "session_name": name}))
    sessions_listing._write(directory / "tools.json", dumps_compact({"tools": [
        {"name": "search", "description": "Search the web.",
         "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}}}]}))
    sessions_listing._write(directory / "session.json", dumps_pretty({
        "agent": {"id": AGENT, "name": AGENT, "isSubAgent": False}, "model": MODEL,
        "version": "sessiontape/0.1.0", "config": {"maxSteps": 12},
        "project": {"root": project, "cwd": project}, "id": session_id,
        "status": "completed", "trigger": "manual", "time": {"created": start, "updated": at}}))
    sessions_listing._date(at, log_dir / f"{stem}.jsonl", log_dir / f".{stem}.owner.json",
                           directory)
    return rows, (user, name, str(directory))


@contextmanager
def sessions_made_by(workload: str) -> Iterator[None]:
    """``sessions_listing.generate`` writing the ``workload``'s sessions (its worker
    processes are forked, and look the maker up by name)."""
    original = sessions_listing.make_session
    if workload == "typical":
        sessions_listing.make_session = make_typical_session
    try:
        yield
    finally:
        sessions_listing.make_session = original


# -- measuring ------------------------------------------------------------------------------


def input_bytes(home: Path) -> int:
    """Bytes of the files an export reads: the replay logs (owner records too) and the
    AgentUse trees."""
    paths = layout(home)
    return sum(os.path.getsize(os.path.join(top, name))
               for root in (paths["logs"], paths["agentuse"])
               for top, _, names in os.walk(root) for name in names)


# Runs argv[2:] as its own child and writes that child's peak RSS (KiB) and wall seconds
# to argv[1]. ``ru_maxrss`` survives ``execve``: a child spawned straight from this process
# (vfork: it shares our memory until it execs) reports at least this process's own peak
# (~100 MB of imports), which hid any export's smaller peak; one forked from this small
# launcher starts from the launcher's ~10 MB.
_LAUNCHER = """import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
with open(sys.argv[1], "w") as out:
    out.write(f"{usage.ru_maxrss} {seconds}")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if 0 <= code <= 255 else 1)  # a signal: 1
"""


def run_process(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS (bytes: ``ru_maxrss`` of this one process, through
    :data:`_LAUNCHER`) and stdout of a whole process; fails on a non-zero exit."""
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr, \
            tempfile.NamedTemporaryFile("r") as measured:
        child = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, measured.name, *argv],
                               env=env, cwd=cwd, stdout=stdout, stderr=stderr, check=False)
        stdout.seek(0)
        stderr.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(argv[1:])} exited {child.returncode}: "
                             f"{stderr.read().decode(errors='replace')[-2000:]}")
        rss_kib, seconds = measured.read().split()
        return float(seconds), int(rss_kib) * 1024, stdout.read()


def run_export(executable: Path, form: str, out: Path, env: dict[str, str], cwd: Path,
               sessions: int) -> Run:
    """``sessiontape export --format FORM`` over every conversation; checks that it wrote
    every conversation and skipped none."""
    seconds, rss, stdout = run_process(
        [str(executable), "export", "--format", form, "--out", str(out), "--force", "--json"],
        env, cwd)
    summary = orjson.loads(stdout)
    assert summary["conversations"] == sessions and not summary["skipped"], \
        (form, summary["conversations"], summary["skipped"][:3])
    return Run(seconds, rss, out.stat().st_size)


def measure_size(base: Path, sessions: int, executable: Path, workload: str
                 ) -> tuple[int, dict[str, Run]]:
    """Generate ``sessions`` of ``workload`` under ``base``, export them in each format;
    the input bytes and each format's run. Everything generated is deleted after."""
    home = base / f"home-{workload}-{sessions}"
    try:
        with sessions_made_by(workload):
            generate_and_say(home, sessions)
        size = input_bytes(home)
        print(f"  log and tree files: {size:,} bytes ({size / MB:.1f} MB)")
        os.environ.update(environment(home))  # make_project finds the AgentUse root by it
        env = dict(os.environ)
        project = make_project(home)
        listing = [str(executable), "sessions", "list", "--json"]
        run_process(listing, env, project)  # builds the catalog
        seconds, rss, stdout = run_process(listing, env, project)
        assert len(orjson.loads(stdout)) == sessions
        runs = {LISTING: Run(seconds, rss, len(stdout))}
        out = base / "out"
        out.mkdir(exist_ok=True)
        for form in FORMATS:
            target = out / f"export.{SUFFIX.get(form, 'jsonl')}"
            runs[form] = run_export(executable, form, target, env, project, sessions)
            target.unlink()
        return size, runs
    finally:
        shutil.rmtree(home, ignore_errors=True)


def print_table(rows: list[tuple[str, ...]], indent: str = "") -> None:
    """Left-justified cells joined by two spaces (what bench/run_all.py parses)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def verdict(mb_s: float, growth: int, added: int) -> str:
    """Whether a format meets the issue's target (``growth``: bytes of peak RSS the
    ``added`` bytes of input cost), and by how much it misses."""
    missed = []
    if mb_s < TARGET_MB_S:
        missed.append(f"{mb_s / TARGET_MB_S:.2f}x the speed")
    if growth > max(RSS_SLACK, RSS_PER_INPUT * added):
        missed.append(f"RSS grows {growth / added:.2f} MB a MB of input")
    return "holds" if not missed else "MISSED: " + ", ".join(missed)


def workload_rows(workload: str, small: int, large: int, small_bytes: int, large_bytes: int,
                  small_runs: dict[str, Run], large_runs: dict[str, Run]
                  ) -> list[tuple[str, ...]]:
    """The table's rows of one workload: each format, then the baseline."""
    rows = []
    for form in (*FORMATS, LISTING):
        few, many = small_runs[form], large_runs[form]
        mb_s = large_bytes / MB / many.seconds
        growth = many.peak_rss - few.peak_rss
        judged = verdict(mb_s, growth, large_bytes - small_bytes)
        rows.append((form, workload, f"{large:,}", f"{large_bytes / MB:.1f}",
                     f"{many.seconds:.2f}", f"{mb_s:.1f}", f"{many.output / MB:.1f}",
                     f"{small_bytes / MB / few.seconds:.1f}", f"{few.peak_rss / MB:.1f}",
                     f"{many.peak_rss / MB:.1f}",
                     f"{growth / MB:+.1f} MB ({growth / (large - small) / 1024:+.1f} KB a "
                     "session)",
                     judged if form != LISTING else "(baseline)"))
    return rows


HEADER = ("format", "workload", "sessions", "input MB", "seconds", "MB/s", "output MB",
          "MB/s at N/4", "peak RSS MB at N/4", "peak RSS MB at N", "RSS growth",
          f"target >= {TARGET_MB_S:.0f} MB/s, constant RSS")


def load() -> str:
    with open("/proc/loadavg") as file:
        return " ".join(file.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=(*WORKLOADS, "both"), default="both",
                        help="which sessions: typical (~100 KB each), tiny (~8.7 KB each: "
                             "the worst case, per-file costs dominate) or both (default)")
    parser.add_argument("--sessions", type=int, default=None,
                        help="recorded sessions at the large size (the small: a quarter; "
                             "default ~1 GB: tiny 125 000, typical 9 000)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes: tiny 2 000 sessions, typical 150 (~17 MB each)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="work here (default: a temp dir in the system's temp dir)")
    args = parser.parse_args()
    workloads = WORKLOADS if args.workload == "both" else (args.workload,)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bench-exports-", dir=args.dir))
    rows: list[tuple[str, ...]] = [HEADER]
    notes = []
    try:
        executable = installed_sessiontape(base / "installed")
        for workload in workloads:
            large = args.sessions or (QUICK_SESSIONS if args.quick
                                      else DEFAULT_SESSIONS)[workload]
            small = large // 4
            print(f"{workload} sessions, load average {load()} at the start")
            small_bytes, small_runs = measure_size(base, small, executable, workload)
            large_bytes, large_runs = measure_size(base, large, executable, workload)
            done = workload_rows(workload, small, large, small_bytes, large_bytes,
                                 small_runs, large_runs)
            rows += done
            # at once (indented: run_all parses the last table), so that a long run's
            # first half is not lost
            print_table([HEADER, *done], indent="  ")
            print()
            notes.append(f"{workload}: N = {large:,} sessions ({large_bytes / large / 1024:.1f} "
                         f"KB each), N/4 = {small:,} ({small_bytes / MB:.1f} MB); load "
                         f"average {load()} at the end")
            print(f"{workload} done, load average {load()}")
        print()
        print_table(rows)
        print(f"({'; '.join(notes)}. One whole process each, start-up, catalog refresh and "
              f"listing included; constant RSS: at N at most {RSS_SLACK // MB} MB or "
              f"{RSS_PER_INPUT:.0%} of the input added above that at N/4)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
