"""``sessiontape log stream`` next to ``tail -F`` and ``cat``.

1. Follow latency. One logs root holds IDLE (1 000) idle log files and one hot
   file. ``sessiontape log stream`` (file-system notifications),
   ``sessiontape log stream --poll`` (the polling fallback) and
   ``tail -F -n 0`` on the hot file all run at once. A writer appends one
   ``user_message`` line carrying a sequence number every ~20 ms, LINES times;
   a thread per follower reads its stdout and takes the time each numbered
   line arrives. Latency = arrival - time just before the write. Also shown:
   the CPU time each follower used while following.
2. Catch-up throughput: ``sessiontape log stream --no-follow`` (text, and
   ``--json``) over SIZE MB of generated logs (realistic turns: user message,
   agent/tool steps with JSON arguments and results, text chunks, final
   result), against ``cat`` of the same files, output to /dev/null, page cache
   warm. sessiontape's own start-up (timed on an empty root) is shown, and
   MB/s is given with and without it.

Everything goes to a temporary directory. ``--only follow`` or ``--only catch-up`` runs
one of the two.

    python bench/log_stream.py [--lines 500] [--idle 1000] [--size-mb 200] [--dir DIR]
                               [--only follow|catch-up]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

from sessiontape.storage.skillet import log_entries as e
from sessiontape.storage.times import iso_ms

EXECUTABLE = Path(sys.executable).with_name("sessiontape")
SEQ = re.compile(rb"bench seq (\d+)")


def jsonl(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def realistic_turn(rng: random.Random, turn: int) -> bytes:
    stamp = iso_ms()
    city = rng.choice(["Paris", "Lisbon", "Kyoto", "Lima", "Oslo", "Accra"])
    out = [jsonl(e.user_message(f"Plan day {turn} of my trip to {city}, with museums and "
                                f"a budget of {rng.randint(50, 500)} EUR.", stamp)),
           jsonl(e.step(e.agent_start("Planner"), stamp))]
    for _ in range(rng.randint(1, 4)):
        args = orjson.dumps({"city": city, "day": turn, "kinds": ["museum", "food"],
                             "limit": rng.randint(3, 10)}).decode()
        result = orjson.dumps({"results": [{"name": f"Place {i} in {city}", "rating": 4.5,
                                            "price": rng.randint(0, 40),
                                            "summary": "A well-known spot " * 4}
                                           for i in range(rng.randint(2, 6))]}).decode()
        out.append(jsonl(e.step(e.agent_tool_start("Planner", "search_places", args), stamp)))
        out.append(jsonl(e.step(e.agent_tool_end("Planner", "search_places", result), stamp)))
    out.append(jsonl(e.step(e.handoff("Planner", "Writer"), stamp)))
    answer = []
    for i in range(rng.randint(5, 25)):
        chunk = f"Stop {i}: visit the museum, then lunch nearby. "
        answer.append(chunk)
        out.append(jsonl(e.step(e.text(chunk), stamp)))
    out.append(jsonl(e.step(e.agent_end("Writer"), stamp)))
    out.append(jsonl(e.final_result("".join(answer), model="openai/gpt-4.1-nano", timestamp=stamp)))
    return b"".join(out)


def make_idle(root: Path, count: int) -> None:
    rng = random.Random(1)
    for i in range(count):
        path = root / f"user{i % 50:02d}" / f"idle_{i:04d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(realistic_turn(rng, 1))


class Follower:
    """A follower process whose stdout lines are timed by a thread."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.arrivals: dict[int, float] = {}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "NO_COLOR": "1"})
        self.cpu_start = 0.0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            now = time.perf_counter()
            match = SEQ.search(raw)
            if match:
                self.arrivals.setdefault(int(match[1]), now)

    def cpu(self) -> float:
        """User + system CPU seconds of the process so far (Linux /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(base: Path, lines: int, idle: int, interval: float) -> None:
    root = base / "follow"
    make_idle(root, idle)
    hot = root / "john_example_com" / "hot.jsonl"
    hot.parent.mkdir(parents=True, exist_ok=True)
    hot.write_bytes(realistic_turn(random.Random(2), 1))
    followers = [
        Follower("sessiontape log stream",
                 [str(EXECUTABLE), "log", "stream", "--logs-dir", str(root)]),
        Follower("sessiontape log stream --poll",
                 [str(EXECUTABLE), "log", "stream", "--poll", "--logs-dir", str(root)]),
        Follower("tail -F", ["tail", "-F", "-n", "0", str(hot)]),
    ]
    fd = os.open(hot, os.O_WRONLY | os.O_APPEND)
    try:
        # Warm-up: until every follower has printed a warm-up line (start-up, catch-up).
        deadline = time.monotonic() + 120
        warm = 1_000_000  # warm-up lines are numbered from here
        while not all(any(k >= 1_000_000 for k in f.arrivals) for f in followers):
            if time.monotonic() > deadline:
                raise SystemExit("followers did not start")
            os.write(fd, jsonl(e.user_message(f"bench seq {warm}")))
            warm += 1
            time.sleep(0.1)
        time.sleep(1.0)
        for f in followers:
            f.cpu_start = f.cpu()
        started = time.perf_counter()
        written: dict[int, float] = {}
        for seq in range(lines):
            data = jsonl(e.user_message(f"bench seq {seq}"))
            written[seq] = time.perf_counter()
            os.write(fd, data)
            time.sleep(max(0.0, started + (seq + 1) * interval - time.perf_counter()))
        time.sleep(2.0)  # let the slowest (polling) follower catch up
        cpu = {f.name: f.cpu() - f.cpu_start for f in followers}
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        for f in followers:
            f.stop()
    print(f"\nFollow latency: {lines} lines every {interval * 1000:.0f} ms to one file, "
          f"{idle} idle log files beside it, all followers at once")
    print(f"{'follower':<32} {'got':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'CPU s':>7}")
    results = {}
    for f in followers:
        lat = [(f.arrivals[s] - w) * 1000 for s, w in written.items() if s in f.arrivals]
        results[f.name] = lat
        if not lat:
            print(f"{f.name:<32} {0:>5}")
            continue
        print(f"{f.name:<32} {len(lat):>5} {pct(lat, 0.5):>8.2f} {pct(lat, 0.99):>8.2f} "
              f"{max(lat):>8.2f} {cpu[f.name]:>7.2f}")
    ours, tail = results["sessiontape log stream"], results["tail -F"]
    if ours and tail:
        gap = pct(ours, 0.99) - pct(tail, 0.99)
        print(f"p99 gap, sessiontape - tail -F: {gap:+.2f} ms (aim: within 5 ms); "
              f"run took {elapsed:.1f} s")


def timed(argv: list[str], repeat: int) -> float:
    best = float("inf")
    with open(os.devnull, "wb") as sink:
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(argv, stdout=sink, stderr=subprocess.DEVNULL, check=True,
                           env={**os.environ, "NO_COLOR": "1"})
            best = min(best, time.perf_counter() - start)
    return best


def throughput(base: Path, size_mb: float, repeat: int) -> None:
    root = base / "catchup"
    rng = random.Random(3)
    target = int(size_mb * 1024 * 1024)
    total, files, n = 0, [], 0
    while total < target:
        path = root / f"user{n % 20:02d}" / f"session_{n:04d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        chunk = b"".join(realistic_turn(rng, t) for t in range(rng.randint(20, 80)))
        path.write_bytes(chunk)
        files.append(str(path))
        total += len(chunk)
        n += 1
    empty = base / "empty"
    empty.mkdir()
    mb = total / (1024 * 1024)
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    rows = [
        ("cat", timed(["cat", *files], repeat), False),
        ("sessiontape log stream --no-follow",
         timed([str(EXECUTABLE), "log", "stream", "--no-follow", "--logs-dir", str(root)], repeat),
         True),
        ("sessiontape ... --no-follow --steps",
         timed([str(EXECUTABLE), "log", "stream", "--no-follow", "--steps", "--logs-dir",
                str(root)], repeat), True),
        ("sessiontape ... --no-follow --json",
         timed([str(EXECUTABLE), "log", "stream", "--no-follow", "--json", "--logs-dir", str(root)],
               repeat), True),
    ]
    startup = timed([str(EXECUTABLE), "log", "stream", "--no-follow", "--logs-dir", str(empty)],
                    max(repeat, 3))
    print(f"\nCatch-up: {mb:.0f} MB in {len(files)} files, output to /dev/null, best of {repeat}; "
          f"sessiontape start-up (empty root) {startup:.2f} s")
    print(f"{'command':<38} {'wall s':>8} {'MB/s':>8} {'MB/s w/o start-up':>18}")
    for name, wall, ours in rows:
        net = wall - startup if ours else wall
        net_text = f"{mb / net:>18.1f}" if net > 0.05 else f"{'n/a':>18}"
        print(f"{name:<38} {wall:>8.2f} {mb / wall:>8.1f} {net_text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=500, help="lines appended (default 500)")
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--idle", type=int, default=1000, help="idle log files (default 1000)")
    parser.add_argument("--size-mb", type=float, default=200.0, help="catch-up size (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="catch-up runs, best taken")
    parser.add_argument("--dir", type=Path, default=None, help="work here (default: a temp dir)")
    parser.add_argument("--only", choices=["follow", "catch-up"], default=None,
                        help="run only the follow latency or only the catch-up throughput")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-log-stream-", dir=args.dir))
    try:
        print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {shutil.which('tail')}")
        if args.only != "catch-up":
            latency(base, args.lines, args.idle, args.interval_ms / 1000)
        if args.only != "follow":
            throughput(base, args.size_mb, args.repeat)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
