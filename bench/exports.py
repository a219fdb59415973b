"""``sessiontape export``: each format's speed and peak memory over many sessions (issue 26).

The target: exports stream, 1 GB of sessions exports in constant memory, >= 50 MB/s.

Recorded conversations are generated as ``bench/sessions_listing.py`` generates them
(replay logs with owner records, AgentUse trees, the item store; about 8.7 KB of log and
tree files a session, so the default 125 000 sessions are about 1 GB), in a temporary
directory (``--dir``): SKILLET_HOME and the XDG directories point into it, and the
AgentUse tree is made the project's, as ``bench/catalog.py`` does, so every export reads
each conversation from its tree and its log. This is done twice: with SESSIONS / 4
sessions, then (the first deleted) with SESSIONS.

At each size, after one untimed ``sessiontape sessions list --json`` (it builds the
catalog, which the exports list from, and warms the page cache), each format runs once
as a whole process of sessiontape installed from a wheel (``bench/installed.py``):
``sessiontape export --format F --out FILE --force --json`` over every conversation. For
each: wall seconds, the process's peak RSS (``ru_maxrss`` from ``os.wait4`` of that one
child), the output's size, and input MB/s = the bytes of the log and tree files / wall
(start-up, the catalog's refresh and the listing included, as a user waits for them).
Constant memory: the peak RSS at SESSIONS is that at SESSIONS / 4 give or take
RSS_SLACK, or RSS_PER_INPUT of the input the larger size adds (a ratio of the two RSS
would hide a growth under the floor of imports). The baseline, measured the same way:
``sessiontape sessions list --json`` (start-up, the catalog's refresh and the listing
every export does first; the Agents SDK imported makes most of its RSS, a floor under
every export's). MB are MiB. About 1 GB of files and 2.2 million inodes at the default
size.

    python bench/exports.py [--sessions 125000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
from catalog import make_project
from installed import installed_sessiontape
from sessions_listing import environment, generate_and_say, layout

FORMATS = ("ledger", "session-events", "markdown", "html", "agentrun", "atif")
SUFFIX = {"ledger": "sqlite", "markdown": "md", "html": "html"}  # else jsonl
TARGET_MB_S = 50.0
# "constant": peak RSS at N at most RSS_SLACK above that at N/4, or RSS_PER_INPUT of the
# input added (the Agents SDK's ~97 MB of imports hide growth from a plain ratio)
RSS_SLACK, RSS_PER_INPUT = 2 * 2**20, 0.02
MB = 2**20
LISTING = "sessions list --json"  # the baseline: start-up, catalog refresh and listing


@dataclass(frozen=True)
class Run:
    """One export as a whole process."""

    seconds: float
    peak_rss: int  # bytes
    output: int  # bytes


def input_bytes(home: Path) -> int:
    """Bytes of the files an export reads: the replay logs (owner records too) and the
    AgentUse trees."""
    paths = layout(home)
    return sum(os.path.getsize(os.path.join(top, name))
               for root in (paths["logs"], paths["agentuse"])
               for top, _, names in os.walk(root) for name in names)


def run_process(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS (bytes: ``ru_maxrss`` of this one child, from ``os.wait4``)
    and stdout of a whole process; fails on a non-zero exit."""
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        stdout.seek(0)
        stderr.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(argv[1:])} exited {child.returncode}: "
                             f"{stderr.read().decode(errors='replace')[-2000:]}")
        return seconds, usage.ru_maxrss * 1024, stdout.read()  # ru_maxrss: KiB


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


def measure_size(base: Path, sessions: int, executable: Path) -> tuple[int, dict[str, Run]]:
    """Generate ``sessions`` under ``base``, export them in each format; the input bytes
    and each format's run. Everything generated is deleted after."""
    home = base / f"home-{sessions}"
    try:
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


def print_table(rows: list[tuple[str, ...]]) -> None:
    """Left-justified cells joined by two spaces (what bench/run_all.py parses)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def verdict(mb_s: float, growth: int, added: int) -> str:
    """Whether a format meets the issue's target (``growth``: bytes of peak RSS the
    ``added`` bytes of input cost), and by how much it misses."""
    missed = []
    if mb_s < TARGET_MB_S:
        missed.append(f"{mb_s / TARGET_MB_S:.2f}x the speed")
    if growth > max(RSS_SLACK, RSS_PER_INPUT * added):
        missed.append(f"RSS grows {growth / added:.2f} MB a MB of input")
    return "holds" if not missed else "MISSED: " + ", ".join(missed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=125_000,
                        help="recorded sessions at the large size (the small: a quarter)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="work here (default: a temp dir in the system's temp dir)")
    args = parser.parse_args()
    small, large = args.sessions // 4, args.sessions
    base = Path(tempfile.mkdtemp(prefix="bench-exports-", dir=args.dir))
    try:
        executable = installed_sessiontape(base / "installed")
        small_bytes, small_runs = measure_size(base, small, executable)
        large_bytes, large_runs = measure_size(base, large, executable)
        rows: list[tuple[str, ...]] = [(
            "format", "sessions", "input MB", "seconds", "MB/s", "output MB",
            "MB/s at N/4", "peak RSS MB at N/4", "peak RSS MB at N", "RSS growth",
            f"target >= {TARGET_MB_S:.0f} MB/s, constant RSS")]
        for form in (*FORMATS, LISTING):
            few, many = small_runs[form], large_runs[form]
            mb_s = large_bytes / MB / many.seconds
            growth = many.peak_rss - few.peak_rss
            judged = verdict(mb_s, growth, large_bytes - small_bytes)
            rows.append((form, f"{large:,}", f"{large_bytes / MB:.1f}", f"{many.seconds:.2f}",
                         f"{mb_s:.1f}", f"{many.output / MB:.1f}",
                         f"{small_bytes / MB / few.seconds:.1f}", f"{few.peak_rss / MB:.1f}",
                         f"{many.peak_rss / MB:.1f}",
                         f"{growth / MB:+.1f} MB ({growth / (large - small) / 1024:+.1f} KB a "
                         "session)",
                         judged if form != LISTING else "(baseline)"))
        print()
        print_table(rows)
        print(f"(N = {large:,} sessions, N/4 = {small:,} ({small_bytes / MB:.1f} MB); one whole "
              "process each, start-up, catalog refresh and listing included; constant RSS: "
              f"at N at most {RSS_SLACK // MB} MB or {RSS_PER_INPUT:.0%} of the input added "
              "above that at N/4)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
