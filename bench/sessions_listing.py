"""``sessiontape sessions list`` and ``show`` with many recorded sessions on disk.

SESSIONS (10 000 by default) recorded conversations are generated without
running an agent, in the layout the recorder writes (no call of a writer that
fsyncs or renames, so generation takes seconds; one worker per CPU):

* the item store: 5 rows per turn in ``session_items`` (user message,
  reasoning, function call, its output, assistant message) and the pair's row
  in ``sessiontape_links``; WAL mode, as :class:`sessiontape.storage.skillet.item_store.ItemStore`
  leaves it;
* the JSONL replay log with its owner record: 1-3 turns of ``user_message``,
  agent/tool/text steps and ``final_result``;
* the AgentUse tree: ``session.json``, ``tools.json`` and one exchange per turn
  (``message.json`` with tokens and cost, six parts: step-start, tool,
  step-finish, step-start, text, step-finish).

Users are spread over 40 ids. Then, page cache warm, medians of REPEAT runs:

* ``sessiontape sessions list --json`` and ``sessiontape sessions list`` (table)
  as subprocesses, output to /dev/null; sessiontape's start-up (``sessions list
  --json`` on an empty home) beside them. These answer from the catalog, which the
  first (untimed) run builds; ``bench/catalog.py`` times that build;
* ``sessiontape sessions show NAME`` (and with ``--user``) for one session;
* in-process: ``list_sessions()``, ``list_sessions(with_usage=False)``,
  ``find_session()`` and ``show_session()``: reading the files directly, as the
  catalog does for what changed and as the CLI does when the catalog can't be used;
* baselines doing part of the same work side by side: ``sqlite3`` listing the
  pairs (the same GROUP BY), ``find | wc -l`` of the session.json files, and
  ``find | xargs cat`` of every file a listing reads (logs, owner records and
  AgentUse trees) plus that ``sqlite3`` query: the bytes, read by C tools,
  parsed not at all. Also in-process: ``orjson.loads`` of each of those files
  (the Python floor of parsing them).

Everything goes to a temporary directory (SKILLET_HOME and the XDG directories
point into it). ``--profile`` adds the top cProfile entries of ``list_sessions()``.

    python bench/sessions_listing.py [--sessions 10000] [--repeat 3] [--dir DIR] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import multiprocessing
import os
import pstats
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
from timing import median, timed_sync, with_bytecode
from ulid import ULID

from sessiontape.storage.json_style import dumps_compact, dumps_pretty
from sessiontape.storage.names import sanitize_agent_name, sanitize_log_name
from sessiontape.storage.skillet import log_entries as e
from sessiontape.storage.skillet.item_store import SCHEMA as ITEM_SCHEMA
from sessiontape.storage.skillet.links import SCHEMA as LINKS_SCHEMA
from sessiontape.storage.times import ms_to_iso

EXECUTABLE = Path(sys.executable).with_name("sessiontape")
USERS = 40
ITEMS_PER_TURN = 5
PARTS_PER_EXCHANGE = 6
MODEL = "openai:gpt-4.1-nano"
AGENT = "Trip Planner"
DAY_MS = 86_400_000
NOW_MS = 1_795_000_000_000  # 2026-11-18; sessions spread over the 90 days before


# -- where things go ------------------------------------------------------------------


def environment(home: Path) -> dict[str, str]:
    """Every location sessiontape would use, inside ``home`` (compiled modules too:
    :func:`timing.with_bytecode`)."""
    return {**with_bytecode(home / "pycache"), "SKILLET_HOME": str(home / "skillet"),
            "XDG_DATA_HOME": str(home / "xdg-data"), "XDG_STATE_HOME": str(home / "xdg-state"),
            "XDG_CACHE_HOME": str(home / "xdg-cache"), "XDG_CONFIG_HOME": str(home / "xdg-config"),
            "NO_COLOR": "1"}


def layout(home: Path) -> dict[str, Path]:
    state = home / "skillet" / "state"
    return {"store": state / ".agent_sessions.sqlite", "logs": state / ".agent_session_logs",
            # a fixed project hash: what agentuse_sessions_root() gives for some project
            "agentuse": home / "xdg-data" / "agentuse" / "project" / "5f3a9c0d1e2b4a67" / "session"}


# -- generation -----------------------------------------------------------------------


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _ulid(ms: int, rng: random.Random) -> str:
    return str(ULID.from_bytes(ms.to_bytes(6, "big") + rng.randbytes(10)))


def _iso(ms: int) -> str:
    return ms_to_iso(ms) or ""


def _tokens(inp: int, out: int, cached: int = 0) -> dict[str, Any]:
    return {"input": inp, "output": out, "reasoning": 0, "cache": {"read": cached, "write": 0}}


def session_for(index: int) -> tuple[str, str, int, int]:
    """``(user, session name, turns, start ms)`` of session ``index`` (deterministic)."""
    rng = random.Random(index)
    start = NOW_MS - rng.randrange(90 * DAY_MS)
    stamp = datetime.fromtimestamp(start / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    return (f"user{index % USERS:02d}@example.com", f"session_{stamp}_{index:08x}",
            rng.randint(1, 3), start)


def make_session(index: int, paths: dict[str, Path], project: str
                 ) -> tuple[list[tuple[str, str, int, str]], tuple[str, str, str]]:
    """Write one session's log and AgentUse tree; return its item rows and its link row."""
    user, name, turns, start = session_for(index)
    rng = random.Random(index * 7 + 1)
    session_id = _ulid(start, rng)
    directory = paths["agentuse"] / f"{session_id}-{sanitize_agent_name(AGENT)}"
    os.mkdir(directory, 0o700)
    log_dir = paths["logs"] / sanitize_log_name(user)
    stem = sanitize_log_name(name, ".jsonl")
    rows: list[tuple[str, str, int, str]] = []
    log_lines: list[bytes] = []
    at = start
    for turn in range(turns):
        city = rng.choice(["Paris", "Lisbon", "Kyoto", "Lima", "Oslo", "Accra"])
        prompt = f"Plan day {turn + 1} of my trip to {city}, with museums, under 200 EUR."
        call = f"call_{rng.randbytes(8).hex()}"
        args = {"city": city, "kinds": ["museum", "food"], "limit": rng.randint(3, 8)}
        result = orjson.dumps({"results": [{"name": f"Place {i} in {city}", "rating": 4.5,
                                            "price": rng.randint(0, 40)}
                                           for i in range(rng.randint(2, 5))]}).decode()
        answer = f"Day {turn + 1} in {city}: start at Place 0, lunch nearby, then Place 1."
        t_user, t_tool, t_tool_end, t_text, t_end = at, at + 900, at + 1100, at + 2300, at + 2400
        # the item store: one add_items per turn, rows sharing created_at
        items = [
            {"role": "user", "content": prompt},
            {"type": "reasoning", "id": f"rs_{index}_{turn}", "summary": [
                {"type": "summary_text", "text": f"Search {city} places, then plan."}]},
            {"type": "function_call", "call_id": call, "name": "search_places",
             "arguments": orjson.dumps(args).decode(), "id": f"fc_{index}_{turn}",
             "status": "completed"},
            {"type": "function_call_output", "call_id": call, "output": result},
            {"type": "message", "role": "assistant", "id": f"msg_{index}_{turn}",
             "status": "completed",
             "content": [{"type": "output_text", "text": answer, "annotations": []}]},
        ]
        rows += [(user, name, t_end, dumps_compact(item).decode()) for item in items]
        # the replay log
        log_lines += [dumps_compact(entry) + b"\n" for entry in (
            e.user_message(prompt, _iso(t_user)),
            e.step(e.agent_start(AGENT), _iso(t_user + 100)),
            e.step(e.agent_tool_start(AGENT, "search_places", orjson.dumps(args).decode()),
                   _iso(t_tool)),
            e.step(e.agent_tool_end(AGENT, "search_places", result), _iso(t_tool_end)),
            e.step(e.text(answer), _iso(t_text)),
            e.step(e.agent_end(AGENT), _iso(t_end - 1)),
            e.final_result(answer, model="openai/gpt-4.1-nano", timestamp=_iso(t_end)))]
        # the AgentUse exchange
        message_id = _ulid(t_user, rng)
        message_dir = directory / message_id
        os.mkdir(message_dir, 0o700)
        os.mkdir(message_dir / "part", 0o700)
        first, second = 400 + 60 * turn, 900 + 60 * turn
        cost = round((first + second) * 0.1e-6 + 2 * 30 * 0.4e-6, 8)
        _write(message_dir / "message.json", dumps_pretty({
            "id": message_id, "sessionID": session_id,
            "time": {"created": t_user, "completed": t_end},
            "user": {"prompt": {"task": prompt}},
            "assistant": {"system": ["You plan trips."], "modelID": MODEL,
                          "providerID": "openai", "mode": "build",
                          "path": {"cwd": project, "root": project},
                          "cost": cost, "tokens": _tokens(first + second, 60)}}))
        parts = [
            {"type": "step-start"},
            {"type": "tool", "callID": call, "tool": "search_places",
             "state": {"status": "completed", "input": args, "output": result,
                       "time": {"start": t_tool, "end": t_tool_end}}},
            {"type": "step-finish", "cost": round(first * 0.1e-6 + 30 * 0.4e-6, 8),
             "tokens": _tokens(first, 30)},
            {"type": "step-start"},
            {"type": "text", "text": answer, "time": {"start": t_text, "end": t_text}},
            {"type": "step-finish", "cost": round(second * 0.1e-6 + 30 * 0.4e-6, 8),
             "tokens": _tokens(second, 30)},
        ]
        for offset, part in enumerate(parts):
            part_id = _ulid(t_user + 100 + offset, rng)
            _write(message_dir / "part" / f"{part_id}.json", dumps_pretty(
                {**part, "id": part_id, "sessionID": session_id, "messageID": message_id}))
        at = t_end + rng.randint(30_000, 600_000)
    _write(log_dir / f"{stem}.jsonl", b"".join(log_lines))
    _write(log_dir / f".{stem}.owner.json",
           dumps_compact({"user_id": user, "session_name": name}))
    _write(directory / "tools.json", dumps_compact({"tools": [
        {"name": "search_places", "description": "Search places in a city.",
         "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}]}))
    _write(directory / "session.json", dumps_pretty({
        "agent": {"id": AGENT, "name": AGENT, "isSubAgent": False}, "model": MODEL,
        "version": "sessiontape/0.1.0", "config": {"maxSteps": 12},
        "project": {"root": project, "cwd": project}, "id": session_id,
        "status": "completed", "trigger": "manual",
        "time": {"created": start, "updated": at}}))
    _date(at, log_dir / f"{stem}.jsonl", log_dir / f".{stem}.owner.json", directory)
    return rows, (user, name, str(directory))


def _date(ms: int, *paths: Path) -> None:
    """Give ``paths`` and everything in them the mtime ``ms``, as a session recorded then
    has (directories after what they hold): an old session is not one written just now."""
    ns = ms * 1_000_000
    for path in paths:
        if path.is_dir():
            for top, dirs, files in os.walk(path, topdown=False):
                for name in files + dirs:
                    os.utime(os.path.join(top, name), ns=(ns, ns))
        os.utime(path, ns=(ns, ns))


def _make_chunk(job: tuple[range, dict[str, Path], str]) -> tuple[list, list]:
    indices, paths, project = job
    rows, links = [], []
    for index in indices:
        r, link = make_session(index, paths, project)
        rows += r
        links.append(link)
    return rows, links


def generate(home: Path, sessions: int) -> dict[str, Any]:
    """Write ``sessions`` recorded sessions under ``home``; counts and seconds."""
    started = time.perf_counter()
    paths = layout(home)
    paths["agentuse"].mkdir(parents=True, mode=0o700)
    for user in range(USERS):
        (paths["logs"] / sanitize_log_name(f"user{user:02d}@example.com")).mkdir(
            parents=True, exist_ok=True, mode=0o700)
    conn = sqlite3.connect(paths["store"], isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(ITEM_SCHEMA + ";\n" + LINKS_SCHEMA + ";")
    project = str(home / "project")
    chunk = 250
    jobs = [(range(i, min(i + chunk, sessions)), paths, project)
            for i in range(0, sessions, chunk)]
    items = 0
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        for rows, links in pool.imap_unordered(_make_chunk, jobs):
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO session_items (user_id, session_name, created_at, "
                             "item_json) VALUES (?, ?, ?, ?)", rows)
            conn.executemany("INSERT INTO sessiontape_links VALUES (?, ?, ?)", links)
            conn.execute("COMMIT")
            items += len(rows)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    files = sum(len(names) for _, _, names in os.walk(home))
    return {"seconds": time.perf_counter() - started, "items": items, "files": files}


# -- measuring ------------------------------------------------------------------------


def generate_and_say(home: Path, sessions: int) -> dict[str, Any]:
    """:func:`generate`, then a line saying on what and how much."""
    made = generate(home, sessions)
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, SQLite "
          f"{sqlite3.sqlite_version}; generated {sessions:,} sessions "
          f"({made['items']:,} items, {made['files']:,} files) in {made['seconds']:.1f} s")
    return made


def run_timed(argv: list[str], env: dict[str, str], repeat: int, shell: bool = False) -> float:
    """Median wall seconds of ``repeat`` runs, stdout to /dev/null; fails on a non-zero exit."""
    times = []
    with open(os.devnull, "wb") as sink:
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, env=env,
                                  shell=shell, check=False)
            times.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"{argv!r} exited {done.returncode}: "
                                 f"{done.stderr.decode(errors='replace')[-2000:]}")
    return median(times)


def parse_every_file(roots: list[Path]) -> int:
    """``orjson.loads`` of every JSON file and every log line under ``roots``."""
    count = 0
    stack = [str(r) for r in roots]
    while stack:
        for entry in os.scandir(stack.pop()):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.name.endswith(".jsonl"):
                with open(entry.path, "rb") as f:
                    for line in f:
                        orjson.loads(line)
                count += 1
            elif entry.name.endswith(".json"):
                with open(entry.path, "rb") as f:
                    orjson.loads(f.read())
                count += 1
    return count


def profile_listing(top: int) -> str:
    from sessiontape.storage.catalog.sessions import list_sessions

    profiler = cProfile.Profile()
    profiler.enable()
    list_sessions()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def measure(home: Path, sessions: int, repeat: int) -> list[tuple[str, str, str, str]]:
    env = {**os.environ, **environment(home)}
    os.environ.update(environment(home))  # for the in-process calls
    paths = layout(home)
    empty = home.parent / "empty-home"
    empty.mkdir(exist_ok=True)
    exe = str(EXECUTABLE)
    user, name, _, _ = session_for(sessions // 2)

    # warm the page cache and check the listing is whole
    done = subprocess.run([exe, "sessions", "list", "--json"], env=env, capture_output=True,
                          check=True)
    listed = orjson.loads(done.stdout)
    assert len(listed) == sessions, (len(listed), sessions)
    assert all(s["usage"] and s["turns"] >= 1 and s["problems"] == [] for s in listed), \
        "a generated session did not list whole"
    assert sum(s["items"] for s in listed) == sum(ITEMS_PER_TURN * s["turns"] for s in listed)

    import sessiontape.storage.skillet.item_store  # noqa: F401  (list_sessions imports the Agents SDK: not timed)
    from sessiontape.storage.catalog.sessions import find_session, list_sessions, show_session

    startup = run_timed([exe, "sessions", "list", "--json"],
                        {**os.environ, **environment(empty)}, repeat)
    cli_list_json = run_timed([exe, "sessions", "list", "--json"], env, repeat)
    cli_list = run_timed([exe, "sessions", "list"], env, repeat)
    cli_show = run_timed([exe, "sessions", "show", name], env, repeat)
    cli_show_user = run_timed([exe, "sessions", "show", "--user", user, name], env, repeat)
    lib_list, infos = timed_sync(list_sessions, repeat)
    assert len(infos) == sessions
    lib_list_nousage, _ = timed_sync(lambda: list_sessions(with_usage=False), repeat)
    lib_find, info = timed_sync(lambda: find_session(name), repeat)
    lib_show, view = timed_sync(lambda: show_session(info), max(repeat, 21))
    assert view.turns and all(t.usage is not None for t in view.turns)

    store, logs, agentuse = (str(paths[k]) for k in ("store", "logs", "agentuse"))
    group_by = ("SELECT user_id, session_name, COUNT(*), MIN(created_at), MAX(created_at) "
                "FROM session_items GROUP BY user_id, session_name "
                "ORDER BY MAX(created_at) DESC, user_id, session_name")
    sqlite_list = run_timed(["sqlite3", "-readonly", store, group_by], env, repeat)
    find_count = run_timed(f"find {agentuse} -name session.json | wc -l", env, repeat, shell=True)
    cat_all = f"find {logs} {agentuse} -type f -print0 | xargs -0 cat"
    floor = run_timed(f"sqlite3 -readonly {store} '{group_by}' && {cat_all}", env, repeat,
                      shell=True)
    parse_floor, parsed = timed_sync(lambda: parse_every_file([paths["logs"], paths["agentuse"]]),
                                     repeat)
    one_dir = str(info.agentuse_dir)
    select_one = (f"SELECT item_json FROM session_items WHERE user_id = '{user}' AND "
                  f"session_name = '{name}' ORDER BY created_at, id")
    show_floor = run_timed(f"sqlite3 -readonly {store} \"{select_one}\" && cat {info.log_path} "
                           f"&& find {one_dir} -type f -print0 | xargs -0 cat", env, repeat,
                           shell=True)

    n = f"{sessions:,}"

    def per(seconds: float) -> str:
        return f"{seconds / sessions * 1e6:.0f} us/session"

    return [
        (f"sessiontape sessions list --json ({n} sessions)", f"{cli_list_json:.2f} s",
         f"floor {floor:.2f} s", f"{cli_list_json / floor:.1f}x"),
        ("sessiontape sessions list (table)", f"{cli_list:.2f} s", f"floor {floor:.2f} s",
         f"{cli_list / floor:.1f}x"),
        ("  sessiontape start-up (list --json, empty home)", f"{startup:.2f} s", "", ""),
        ("list_sessions() in-process", f"{lib_list:.2f} s", f"parse floor {parse_floor:.2f} s",
         f"{lib_list / parse_floor:.1f}x"),
        ("  per session", per(lib_list), per(parse_floor), ""),
        ("list_sessions(with_usage=False) in-process", f"{lib_list_nousage:.2f} s", "", ""),
        (f"sessiontape sessions show NAME ({n} on disk)", f"{cli_show:.2f} s",
         f"show floor {show_floor * 1e3:.0f} ms", f"{cli_show / show_floor:.0f}x"),
        ("sessiontape sessions show --user U NAME", f"{cli_show_user:.2f} s",
         f"show floor {show_floor * 1e3:.0f} ms", f"{cli_show_user / show_floor:.0f}x"),
        ("find_session(NAME) in-process", f"{lib_find:.2f} s", "", ""),
        ("show_session(info) in-process", f"{lib_show * 1e3:.2f} ms", "", ""),
        ("baseline: sqlite3 GROUP BY of the pairs", f"{sqlite_list:.3f} s", "", ""),
        ("baseline: find -name session.json | wc -l", f"{find_count:.3f} s", "", ""),
        ("baseline: floor = sqlite3 GROUP BY + cat of every log/tree file",
         f"{floor:.3f} s", "", ""),
        (f"baseline: orjson.loads of those {parsed:,} files (in-process)",
         f"{parse_floor:.2f} s", "", ""),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000, help="recorded sessions")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="work here (default: a temp dir in the system's temp dir)")
    parser.add_argument("--profile", action="store_true",
                        help="also print the top cProfile entries of list_sessions()")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-sessions-", dir=args.dir))
    try:
        home = base / "home"
        generate_and_say(home, args.sessions)
        rows = [("sessions", "sessiontape", "baseline", "ratio")]
        rows += measure(home, args.sessions, args.repeat)
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for row in rows:
            cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            print("  ".join(cells).rstrip())
        print(f"(medians of {args.repeat}, page cache warm; floor = what list reads, in C, "
              "parsed not at all)")
        if args.profile:
            print("\ncProfile of list_sessions():")
            print(profile_listing(25))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
