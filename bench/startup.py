"""Start-up: how long ``sessiontape --version`` and ``--help`` take, against a bare Python.

Each command runs ``--runs`` times as a whole process, keeping compiled modules as an
installed package does; the figures are medians. sessiontape is installed from a wheel
into a fresh venv (``bench/installed.py``); the last rows are this environment's editable
install, whose import hook every process runs. The
target (issue 15): ``--version`` within 60 ms, against 20-40 ms for ``python -c pass`` on
the team machine.

    python bench/startup.py [--runs 20] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from installed import installed_sessiontape
from timing import median, with_bytecode

TARGET_MS = 60.0


def wall_ms(argv: list[str], runs: int, env: dict[str, str]) -> float:
    """Median wall time of ``argv`` as a whole process, in ms (one untimed run first)."""
    subprocess.run(argv, capture_output=True, check=True, env=env)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=env)
        times.append((time.perf_counter() - start) * 1e3)
    return median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command")
    parser.add_argument("--dir", type=Path, default=None,
                        help="work here (default: a temp dir in the system's temp dir)")
    args = parser.parse_args()
    runs = args.runs
    editable = str(Path(sys.executable).with_name("sessiontape"))  # this environment's
    with tempfile.TemporaryDirectory(prefix="sessiontape-startup-", dir=args.dir) as work:
        env = {**os.environ, **with_bytecode(Path(work, "pycache"))}
        installed = installed_sessiontape(Path(work))
        bare = wall_ms([str(installed.with_name("python")), "-c", "pass"], runs, env)
        rows = [("python -c pass", bare)]
        rows += [(f"sessiontape {flag}", wall_ms([str(installed), flag], runs, env))
                 for flag in ("--version", "--help")]
        rows += [("python -c pass, editable", wall_ms([sys.executable, "-c", "pass"], runs, env)),
                 ("sessiontape --version, editable", wall_ms([editable, "--version"], runs, env))]
    for name, ms in rows:
        verdict = ""
        if name == "sessiontape --version":
            verdict = f"  ({'within' if ms <= TARGET_MS else 'over'} {TARGET_MS:.0f} ms)"
        print(f"{name:<32} {ms:6.1f} ms  {ms / bare:4.1f}x bare python{verdict}")


if __name__ == "__main__":
    main()
