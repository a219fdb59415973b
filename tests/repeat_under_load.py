"""Run the whole test suite several times in a row beside CPU hogs: a determinism check.

    .venv/bin/python tests/repeat_under_load.py [--runs 5] [--hogs 2] [-- PYTEST ARGS...]

Each hog is a process spinning on a core, so the suite gets less CPU than it would on a
quiet machine, as on a busy CI host. A test that depends on wall-clock time fails here
sooner or later; the suite must pass every run. Prints one line per run (exit code, time,
pytest's summary line), keeps the whole output of a failed run in
``$TMPDIR/sessiontape-load-run-N.log``, and exits non-zero if any run failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOG = "while True: pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="suite runs in a row (default 5)")
    parser.add_argument("--hogs", type=int, default=2, help="CPU-spinning processes (default 2)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    failed = 0
    try:
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   *args.pytest_args], cwd=REPO, capture_output=True, text=True)
            summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
            print(f"run {run}/{args.runs}: exit {done.returncode} in "
                  f"{time.monotonic() - started:.0f} s: {summary}", flush=True)
            if done.returncode != 0:
                failed += 1
                kept = Path(tempfile.gettempdir()) / f"sessiontape-load-run-{run}.log"
                kept.write_text(done.stdout + "\n" + done.stderr, encoding="utf-8")
                print(f"  its output: {kept}", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(f"{args.runs - failed} of {args.runs} runs passed with {args.hogs} CPU hogs beside them")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
