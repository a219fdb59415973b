"""``sessiontape serve`` (``recorder/web/``): pages, search, a long transcript and live events.

SESSIONS (10 000 by default) recorded conversations are generated as
``bench/sessions_listing.py`` generates them, in a temporary directory (SKILLET_HOME and
the XDG directories point into it; the AgentUse tree is the root of a project directory
there, as ``bench/catalog.py`` makes it). One more conversation is recorded by
sessiontape's :class:`Recorder` with the SDK's ``Runner`` on a scripted model: one turn of
CALLS tool calls (2 000 by default; 40 parallel calls a model step, each output ~300
characters). Then sessiontape installed from a wheel (``bench/installed.py``) runs
``sessiontape serve --port 0`` as a whole process, and, page cache and catalog warm:

* each page and API answer, one warm-up request and REPEAT timed ones (20) over one
  keep-alive connection (``httpx2``): the server's time to the response's start (its
  ``Server-Timing: app;dur=`` header) and the request's wall time, median and p95: the
  first sessions page ``/``, a middle page of the table (``/sessions/rows?page=P``, P 100
  at 10 000 sessions), a filtered page (``/?q=user07``), ``/api/sessions``, ``/search``
  and ``/api/search`` of a word in every session and of a phrase in a sixth of them, and
  ``/usage``;
* the long conversation's page (streamed while rendered): the server's time to the
  response's start, the time to the first body byte and to the last, and its size; then
  in Debian's headless Chromium (Playwright, ``/usr/bin/chromium``), median of 5 loads:
  DOMContentLoaded and load from the navigation's start, and the main thread's long tasks
  (> 50 ms, a PerformanceObserver installed before the page's own scripts);
* live latency: one client on ``/events``; LIVE times (10) a turn is recorded in this
  process into a generated conversation; from the last write of its files (the newest
  mtime among its log and its AgentUse tree, what the page reads) to the arrival of the
  last ``session-ID`` event the keeper sends for it, and from the recording's end
  (``Recorder`` closed, everything written) to that event;
* 50 clients on ``/events`` at once while a turn is recorded: how many get the event, and
  the spread of their arrival times (from the last write, as above).

Baselines beside them in the same run: ``sessiontape sessions list --json`` and
``sessiontape search WORD --json`` as whole processes (median of CLI_RUNS), which answer
from the same catalog after bringing it up to date; and the server's start-up (the
catalog current) to the line saying where it listens.

    python bench/web.py [--sessions 10000] [--calls 2000] [--quick] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import orjson
from catalog import make_project, run_cli
from installed import installed_sessiontape
from sessions_listing import environment, generate_and_say, session_for
from timing import median

REPEAT = 20
CLI_RUNS = 5
LIVE = 10
CLIENTS = 50
CALLS_PER_STEP = 40
BIG_USER, BIG_NAME = "bench@example.com", "two-thousand-calls"
FILTER = "user07"
SEARCHES = {"word": "museums", "phrase": '"trip to Kyoto"'}
CHROMIUM = Path("/usr/bin/chromium")
TARGETS = {"page": 0.300, "search": 0.050, "live": 1.0}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else 0.0


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


# -- recording ------------------------------------------------------------------------


def record_big(calls: int) -> None:
    """One turn of ``calls`` tool calls (CALLS_PER_STEP a model step), recorded."""
    from agents import Agent, Usage, function_tool, set_tracing_disabled
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from sessiontape import Recorder

    @function_tool
    def look_up(n: int) -> str:
        """Look up item n."""
        return orjson.dumps({"n": n, "title": f"Result {n}", "rows": [
            {"name": f"row {i} of {n}", "value": i * n} for i in range(8)]}).decode()

    def usage() -> Usage:
        return Usage(requests=1, input_tokens=1200, output_tokens=60, total_tokens=1260)

    steps = []
    for first in range(0, calls, CALLS_PER_STEP):
        steps.append(ModelStep(output=[function_call("look_up", {"n": n}, call_id=f"call_{n}")
                                       for n in range(first, min(calls, first + CALLS_PER_STEP))],
                               usage=usage(), response_id=f"resp_big_{first}"))
    steps.append(ModelStep(output=[assistant_message(f"Looked up {calls} items.",
                                                     item_id="msg_big")],
                           usage=usage(), response_id="resp_big_end"))
    model = ScriptedModel(steps)
    model.model = "gpt-4.1"  # type: ignore[attr-defined]  # priced (tests/scripted.py)
    agent = Agent(name="Looker", tools=[look_up], model=model)
    set_tracing_disabled(True)

    async def run() -> None:
        async with Recorder(user_id=BIG_USER, session_name=BIG_NAME) as rec:
            await rec.run(agent, f"Look up items 0 to {calls - 1}.", max_turns=calls + 10)

    asyncio.run(run())


def record_turn(index: int, repetition: int) -> float:
    """One turn recorded into generated conversation ``index``; time.time() at its end."""
    from catalog import record

    user, name, _, _ = session_for(index)
    record(user, name, f"web_{index}_{repetition}")
    return time.time()


def last_write(info: dict[str, Any]) -> float:
    """The newest mtime (epoch seconds) among a conversation's log and AgentUse tree: what
    its page is read from (the item store's own writes, its checkpoint at close among them,
    are left out: they change no page)."""
    newest = 0
    paths = [Path(info["log_path"])]
    for top, _, names in os.walk(info["agentuse_dir"]):
        paths += [Path(top), *(Path(top, name) for name in names)]
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            newest = max(newest, path.stat().st_mtime_ns)
    return newest / 1e9


# -- the server -----------------------------------------------------------------------


class Server:
    """``sessiontape serve --port 0`` until :meth:`stop`; ``url``, ``started`` (seconds to
    the line saying where it listens)."""

    def __init__(self, executable: Path, env: dict[str, str], cwd: Path) -> None:
        began = time.perf_counter()
        self.process = subprocess.Popen([str(executable), "serve", "--port", "0"], env=env,
                                        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # ends at its exit too
        self.started = time.perf_counter() - began
        match = re.search(r"at (http://\S+/) ", line)
        if match is None:
            self.stop()
            raise SystemExit(f"serve said {line!r}, exited {self.process.returncode}")
        self.url = match[1]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def server_ms(response: httpx2.Response) -> float:
    match = re.search(r"app;dur=([\d.]+)", response.headers.get("server-timing", ""))
    assert match, f"no Server-Timing on {response.url}"
    return float(match[1]) / 1e3


def timed_get(client: httpx2.Client, path: str, repeat: int, **params: Any
              ) -> tuple[list[float], list[float], httpx2.Response]:
    """Server times and wall times of ``repeat`` GETs after one warm-up; the last answer."""
    response = client.get(path, params=params)
    response.raise_for_status()
    servers, walls = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(path, params=params)
        walls.append(time.perf_counter() - start)
        response.raise_for_status()
        servers.append(server_ms(response))
    return servers, walls, response


def streamed_page(client: httpx2.Client, path: str) -> tuple[float, float, float, float, int]:
    """Server time to the response's start, wall to the headers, to the first body byte,
    to the last; bytes."""
    start = time.perf_counter()
    with client.stream("GET", path) as response:
        headers = time.perf_counter() - start
        response.raise_for_status()
        first, size = None, 0
        for chunk in response.iter_bytes():
            if first is None and chunk:
                first = time.perf_counter() - start
            size += len(chunk)
        total = time.perf_counter() - start
    return server_ms(response), headers, first or total, total, size


def in_browser(url: str, runs: int) -> dict[str, Any] | str:
    """DOMContentLoaded, load and long tasks of ``runs`` loads in headless Chromium (the
    first one untimed), or why not measured."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "Playwright is not installed"
    if not CHROMIUM.exists():
        return f"no {CHROMIUM}"
    observer = ("window.__long = []; new PerformanceObserver((list) => { for (const e of "
                "list.getEntries()) window.__long.push(e.duration); })"
                ".observe({type: 'longtask', buffered: true});")
    results: list[dict[str, Any]] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            for run in range(runs + 1):
                page = browser.new_page()
                page.add_init_script(observer)
                page.goto(url, wait_until="load", timeout=120_000)
                page.wait_for_timeout(300)  # long tasks after load are reported too
                got = page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0]; "
                    "return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, "
                    "first: n.responseStart, last: n.responseEnd, long: window.__long, "
                    "calls: document.querySelectorAll('details.call').length}; }")
                page.close()
                if run:
                    results.append(got)
        finally:
            browser.close()
    longs = [task for got in results for task in got["long"]]
    return {"dcl": median([g["dcl"] / 1e3 for g in results]),
            "load": median([g["load"] / 1e3 for g in results]),
            "first": median([g["first"] / 1e3 for g in results]),
            "last": median([g["last"] / 1e3 for g in results]),
            "long_max": max(longs, default=0.0) / 1e3,
            "long_per_load": sum(longs) / 1e3 / len(results),
            "long_count": len(longs) / len(results), "calls": results[-1]["calls"],
            "runs": len(results)}


# -- live -----------------------------------------------------------------------------


class Listener:
    """One client on ``/events`` in a thread: the arrival time (time.time()) of each event."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.events: list[tuple[float, str]] = []
        self.ready = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self.ready.wait(10):
            raise SystemExit("no hello on /events")

    def _run(self) -> None:
        with httpx2.Client(timeout=httpx2.Timeout(5, read=None)) as client, \
                client.stream("GET", self.url + "events") as response:
            for line in response.iter_lines():
                if line.startswith("event:"):
                    name = line.split(":", 1)[1].strip()
                    self.events.append((time.time(), name))
                    if name == "hello":
                        self.ready.set()
                if self.done.is_set():
                    return

    def arrivals(self, name: str, since: float) -> list[float]:
        return [at for at, got in self.events if got == name and at >= since]


def settle(seconds: float = 1.5) -> None:
    """Let the keeper's last batch for a recording arrive (its debounce is 50 ms)."""
    time.sleep(seconds)


def live_latency(url: str, client: httpx2.Client, sessions: int
                 ) -> tuple[list[float], list[float], int]:
    """From the last write, and from the recording's end, to the last event for the
    conversation; LIVE repetitions, each into another conversation."""
    listener = Listener(url)
    from_write, from_end, missed = [], [], 0
    try:
        for repetition in range(LIVE):
            index = (repetition + 1) * sessions // (LIVE + 2)
            name = session_for(index)[1]
            rows = client.get("/api/sessions", params={"q": name}).json()["sessions"]
            assert len(rows) == 1, rows
            row_id = rows[0]["id"]
            began = time.time()
            ended = record_turn(index, repetition)
            settle()
            got = listener.arrivals(f"session-{row_id}", began)
            if not got:
                missed += 1
                continue
            info = client.get("/api/sessions", params={"q": name}).json()["sessions"][0]
            from_write.append(got[-1] - last_write(info))
            from_end.append(got[-1] - ended)
    finally:
        listener.done.set()
    return from_write, from_end, missed


async def many_clients(url: str, index: int) -> tuple[int, list[float], list[float]]:
    """CLIENTS clients on ``/events`` while a turn is recorded: how many got the event, and
    each one's arrival after the last write and after the recording's end."""
    name = session_for(index)[1]
    limits = httpx2.Limits(max_connections=CLIENTS + 5, max_keepalive_connections=CLIENTS + 5)
    async with httpx2.AsyncClient(base_url=url, limits=limits,
                                  timeout=httpx2.Timeout(10, read=None)) as client:
        rows = (await client.get("/api/sessions", params={"q": name})).json()["sessions"]
        wanted = f"session-{rows[0]['id']}"
        arrivals: list[list[float]] = [[] for _ in range(CLIENTS)]
        hello = [asyncio.Event() for _ in range(CLIENTS)]

        async def listen(number: int) -> None:
            async with client.stream("GET", "/events") as response:
                async for line in response.aiter_lines():
                    if line.startswith("event:"):
                        got = line.split(":", 1)[1].strip()
                        if got == "hello":
                            hello[number].set()
                        elif got == wanted:
                            arrivals[number].append(time.time())

        tasks = [asyncio.create_task(listen(n)) for n in range(CLIENTS)]
        try:
            await asyncio.wait_for(asyncio.gather(*(h.wait() for h in hello)), 30)
            ended = await asyncio.to_thread(record_turn, index, 99)
            await asyncio.sleep(2.0)
            info = (await client.get("/api/sessions", params={"q": name})).json()["sessions"][0]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    written = await asyncio.to_thread(last_write, info)
    lasts = [got[-1] - written for got in arrivals if got]
    return len(lasts), lasts, [got[-1] - ended for got in arrivals if got]


# -- measuring ------------------------------------------------------------------------


def measure(home: Path, sessions: int, calls: int) -> tuple[list[tuple[str, ...]],
                                                           dict[str, Any]]:
    env = {**os.environ, **environment(home)}
    os.environ.update(environment(home))  # for the recordings in this process
    project = make_project(home)
    os.chdir(project)  # the Recorder's project, as serve's

    started = time.perf_counter()
    record_big(calls)
    print(f"recorded {calls:,} tool calls in one turn in {time.perf_counter() - started:.1f} s")

    installed = installed_sessiontape(home.parent / "installed")
    # the catalog built (and warm) before anything is timed: every figure below is current
    subprocess.run([str(installed), "sessions", "list", "--json"], env=env, cwd=project,
                   check=True, capture_output=True)
    cli_list, out = run_cli(["sessions", "list", "--json"], env, project, CLI_RUNS, installed)
    assert len(orjson.loads(out)) == sessions + 1
    cli_search = {}
    for label, query in SEARCHES.items():
        cli_search[label], out = run_cli(["search", query, "--json"], env, project, CLI_RUNS,
                                         installed)
        assert orjson.loads(out), f"sessiontape search {query} found nothing"

    server = Server(installed, env, project)
    rows: list[tuple[str, ...]] = []
    figures: dict[str, Any] = {"cli_list": cli_list, "cli_search": cli_search["word"],
                               "started": server.started}
    try:
        with httpx2.Client(base_url=server.url, timeout=120) as client:
            middle = max(1, sessions // 50 // 2)
            pages = [("first sessions page /", "/", {}),
                     (f"table page {middle} /sessions/rows?page={middle}", "/sessions/rows",
                      {"page": middle}),
                     (f"filtered page /?q={FILTER}", "/", {"q": FILTER}),
                     ("/api/sessions (first 50, JSON)", "/api/sessions", {})]
            for label, path, params in pages:
                servers, walls, response = timed_get(client, path, REPEAT, **params)
                assert "session_" in response.text
                rows.append((label, ms(median(servers)), ms(p95(servers)), ms(median(walls)),
                             ms(p95(walls)), f"{len(response.content) / 1024:.0f} KiB",
                             "<= 300 ms"))
                figures.setdefault("pages", {})[label] = (median(servers), p95(servers),
                                                          median(walls))
            walls = []
            for _ in range(REPEAT):  # a new connection each: no delayed ACK to wait for
                with httpx2.Client(base_url=server.url, timeout=120) as fresh:
                    start = time.perf_counter()
                    fresh.get("/").raise_for_status()
                    walls.append(time.perf_counter() - start)
            rows.append(("  / on a new connection each", "", "", ms(median(walls)),
                         ms(p95(walls)), "", "-"))
            for label, query in SEARCHES.items():
                for path in ("/search", "/api/search"):
                    servers, walls, response = timed_get(client, path, REPEAT, q=query)
                    assert "session_" in response.text, f"{path} found nothing for {query}"
                    rows.append((f"{path}?q={query} ({label})", ms(median(servers)),
                                 ms(p95(servers)), ms(median(walls)), ms(p95(walls)),
                                 f"{len(response.content) / 1024:.0f} KiB", "<= 50 ms"))
                    figures.setdefault("searches", {})[f"{path} {label}"] = (
                        median(servers), p95(servers), median(walls))
            servers, walls, response = timed_get(client, "/usage", REPEAT)
            rows.append(("/usage (charts of every day)", ms(median(servers)), ms(p95(servers)),
                         ms(median(walls)), ms(p95(walls)),
                         f"{len(response.content) / 1024:.0f} KiB", "-"))

            big = client.get("/api/sessions", params={"q": BIG_NAME}).json()["sessions"]
            assert len(big) == 1, big
            page = f"/session/{big[0]['id']}"
            streamed_page(client, page)  # warm-up
            runs = [streamed_page(client, page) for _ in range(5)]
            size = runs[-1][4]
            n = f"{calls:,}"
            for label, at in ((f"session page ({n} calls): server, to the response start", 0),
                              ("  wall to the headers", 1), ("  wall to the first body byte", 2),
                              ("  wall to the last byte", 3)):
                values = [run[at] for run in runs]
                rows.append((label, ms(median(values)), ms(max(values)), "", "",
                             f"{size / 2**20:.2f} MiB" if at == 3 else "", "-"))
            figures["big"] = {"server": median([r[0] for r in runs]),
                              "first": median([r[2] for r in runs]),
                              "last": median([r[3] for r in runs]), "size": size,
                             "calls": calls}
            browser = in_browser(server.url + page.lstrip("/"), 5)
            figures["browser"] = browser
            if isinstance(browser, str):
                rows.append(("  Chromium: not measured", browser, "", "", "", "", "-"))
            else:
                assert browser["calls"] == calls, browser["calls"]
                rows += [
                    ("  Chromium: DOMContentLoaded (median of 5 loads)", ms(browser["dcl"]),
                     "", "", "", "", "-"),
                    ("  Chromium: load", ms(browser["load"]), "", "", "", "", "-"),
                    ("  Chromium: response start", ms(browser["first"]), "", "", "", "", "-"),
                    ("  Chromium: response end", ms(browser["last"]), "", "", "", "", "-"),
                    ("  Chromium: longest main-thread task", ms(browser["long_max"]), "", "",
                     "", f"{browser['long_count']:.1f} tasks > 50 ms a load, "
                     f"{ms(browser['long_per_load'])} in all", "-")]

            from_write, from_end, missed = live_latency(server.url, client, sessions)
            rows.append((f"live: last write -> SSE event ({LIVE} turns)", ms(median(from_write)),
                         ms(p95(from_write)), "", "", f"{missed} missed", "<= 1 s"))
            rows.append(("  recording's end -> SSE event", ms(median(from_end)),
                         ms(p95(from_end)), "", "", "", "<= 1 s"))
            figures["live"] = (median(from_write), p95(from_write), missed)
            got, lasts, after_end = asyncio.run(many_clients(server.url, sessions // 7))
            spread = max(lasts) - min(lasts) if lasts else 0.0
            rows.append((f"live, {CLIENTS} clients: last write -> SSE event",
                         ms(median(lasts)), ms(p95(lasts)), "", "",
                         f"{got}/{CLIENTS} got it; first {ms(min(lasts, default=0))}, last "
                         f"{ms(max(lasts, default=0))}, spread {ms(spread)}", "<= 1 s"))
            rows.append(("  recording's end -> SSE event", ms(median(after_end)),
                         ms(p95(after_end)), "", "", f"last {ms(max(after_end, default=0))}",
                         "<= 1 s"))
            figures["many"] = (got, median(lasts), max(lasts, default=0.0), spread)
    finally:
        server.stop()
    rows += [
        (f"baseline: sessiontape sessions list --json ({sessions + 1:,})", "", "",
         ms(cli_list), "", "whole process", "-"),
        *((f"baseline: sessiontape search {query} --json ({label})", "", "",
           ms(cli_search[label]), "", "whole process", "-") for label, query in SEARCHES.items()),
        ("baseline: sessiontape serve start-up (catalog current)", "", "", ms(server.started),
         "", "to the line with the URL", "-"),
    ]
    return rows, figures


def targets(figures: dict[str, Any]) -> list[tuple[str, str]]:
    def verdict(seconds: float, limit: float) -> str:
        return "holds" if seconds <= limit else "MISSED"

    out = []
    for label, (server, high, wall) in figures["pages"].items():
        out.append((f"{label} <= 300 ms (server)", f"{ms(server)} (p95 {ms(high)}, wall "
                    f"{ms(wall)}): {verdict(high, TARGETS['page'])}"))
    for label, (server, high, wall) in figures["searches"].items():
        out.append((f"search {label} <= 50 ms (server)", f"{ms(server)} (p95 {ms(high)}, wall "
                    f"{ms(wall)}): {verdict(high, TARGETS['search'])}"))
    big = figures["big"]
    out.append((f"{big['calls']:,}-call session renders (streamed)",
                f"first byte {ms(big['first'])}, whole {ms(big['last'])}, "
                f"{big['size'] / 2**20:.2f} MiB"))
    live, high, missed = figures["live"]
    out.append(("an open page updates within 1 s",
                f"{ms(live)} (p95 {ms(high)}, {missed} missed): "
                f"{verdict(high, TARGETS['live']) if not missed else 'MISSED'}"))
    got, _, last, spread = figures["many"]
    out.append((f"{CLIENTS} clients all get the event within 1 s",
                f"{got}/{CLIENTS}, last {ms(last)}, spread {ms(spread)}: "
                f"{verdict(last, TARGETS['live']) if got == CLIENTS else 'MISSED'}"))
    return out


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=None,
                        help="recorded sessions (default 10 000; --quick 2 000)")
    parser.add_argument("--calls", type=int, default=None,
                        help="tool calls of the long session (default 2 000; --quick 500)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--dir", type=Path, default=None,
                        help="work here (default: a temp dir in the system's temp dir)")
    args = parser.parse_args()
    sessions = args.sessions or (2_000 if args.quick else 10_000)
    calls = args.calls or (500 if args.quick else 2_000)
    base = Path(tempfile.mkdtemp(prefix="bench-web-", dir=args.dir))
    cwd = Path.cwd()
    try:
        home = base / "home"
        generate_and_say(home, sessions)
        rows, figures = measure(home, sessions, calls)
        print_table([(f"web ({sessions:,} sessions)", "median", "p95 or max", "wall median",
                      "wall p95", "size or note", "target"), *rows])
        print(f"(server: its Server-Timing, to the response's start; wall: the request over "
              f"a keep-alive loopback connection; median and p95 of {REPEAT} after a warm-up; "
              f"the session page 5 after one; whole processes median of {CLI_RUNS})")
        print()
        print_table([("target", "measured"), *targets(figures)])
    finally:
        os.chdir(cwd)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
