"""The store on a real PostgreSQL server (issue 29): many hosts, one conversation.

Hosts are processes with their own working directory and home (their own AgentUse tree
and JSONL logs), sharing one database schema (``pg_url``). A server going away is a real
TCP relay in front of the real server, stopped and started again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from agents import Agent, function_tool
from harness import EXECUTABLE, Lines, cli_environ, isolated_environ, run, run_cli, wait_for
from scripted import call, final, model, square, tools_step, usage

from sessiontape import Recorder
from sessiontape.storage.backends.postgres import (
    MIGRATIONS,
    PostgresStore,
    StoreUnavailable,
    migrate,
)
from sessiontape.storage.backends.postgres_log import StoreLogStream
from sessiontape.storage.backends.transfer import StoreNotEmpty, copy_store
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.log_owners import find_log_path

pytestmark = pytest.mark.postgres

AGENTS = Path(__file__).parent / "postgres_agents.py"


def rows(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query.encode(), params).fetchall()


def said_hi(url: str, session_name: str) -> None:
    """A conversation of user ``u`` in the store: one item and one log line ("hi")."""
    store = PostgresStore(url)
    try:
        asyncio.run(store.session("u", session_name).add_items(
            [{"role": "user", "content": "hi"}]))
        store.log_copy("u", session_name).append_many(
            [{"kind": "user_message", "userInput": "hi"}])
    finally:
        store.close_sync()


def host_env(base: Path, name: str, **extra: str) -> dict[str, str]:
    """A host's environment: its own home, AgentUse tree and skillet logs under ``base``."""
    return {**isolated_environ(base / name), "NO_COLOR": "1", "HOST_LABEL": name,
            "PYTHONPATH": str(Path(__file__).parent), **extra}


# -- two hosts, one conversation, a third watching -----------------------------------------

@pytest.mark.slow
def test_two_hosts_continue_one_conversation_and_a_third_streams_both(
        pg_url: str, tmp_path: Path) -> None:
    watcher = Lines([EXECUTABLE, "log", "stream", "--store", pg_url, "--json"],
                    env=host_env(tmp_path, "c"))
    try:
        for name in ("a", "b"):
            workdir = tmp_path / f"work-{name}"
            workdir.mkdir()
            done = run([EXECUTABLE, "run", "--agent", f"{AGENTS}:agent", "--store", pg_url,
                        "--user-email", "ops@example.com", "--session-name", "incident 7",
                        f"what do you see from {name}?"], cwd=workdir,
                       env=host_env(tmp_path, name, MODEL_INPUT=str(tmp_path / f"{name}.json")))
            assert done.returncode == 0, done.stderr
            assert f"answered on {name}" in done.stdout
            # The third host shows this turn's answer while the process is gone.
            watcher.expect(f"answered on {name}")
        seen_by_b = json.loads((tmp_path / "b.json").read_text())
        texts = json.dumps(seen_by_b)
        assert "what do you see from a?" in texts and "answered on a" in texts
        assert "running on a" in texts  # the first host's tool output, too
        assert "what do you see from b?" in texts
        finals = [json.loads(line) for line in watcher.out if '"final_result"' in line]
        assert [(f["user_id"], f["session_name"]) for f in finals] == \
            [("ops@example.com", "incident 7")] * 2
        assert [f["finalResult"]["text"] for f in finals] == ["answered on a", "answered on b"]
    finally:
        watcher.stop()
    # Each host keeps its own JSONL log: a's has its turn; b's was brought up to date from
    # the store when it continued the conversation (`run` shows the earlier turns), then
    # its own turn was appended.
    logs = {name: next((tmp_path / name / "skillet").rglob("*.jsonl")).read_text()
            for name in ("a", "b")}
    assert "answered on a" in logs["a"] and "answered on b" not in logs["a"]
    assert logs["b"].index("answered on a") < logs["b"].index("answered on b")


# -- the SDK session on the server ---------------------------------------------------------

TURN = [{"role": "user", "content": "square 7"},
        {"type": "function_call", "call_id": "c1", "name": "square", "arguments": '{"n":7}',
         "id": "fc_1"},
        {"type": "function_call_output", "call_id": "c1", "output": "49"},
        {"type": "message", "role": "assistant", "id": "m1", "status": "completed",
         "content": [{"type": "output_text", "text": "49 ✓ 😀", "annotations": []}]}]


def test_the_session_is_the_sqlite_stores_byte_for_byte(pg_url: str,
                                                               tmp_path: Path) -> None:
    async def main() -> None:
        sqlite_store = ItemStore(tmp_path / "s.sqlite")
        async with PostgresStore(pg_url) as server, sqlite_store:
            for store in (server, sqlite_store):
                session = store.session("u", "n")
                await session.add_items(TURN[:2])
                await session.add_items(TURN[2:])  # the output's call is named from the store
            on_server = rows(pg_url, "SELECT user_id, session_name, item_json FROM session_items "
                                     "ORDER BY id")
            with closing(sqlite3.connect(tmp_path / "s.sqlite")) as conn:
                in_file = conn.execute("SELECT user_id, session_name, item_json FROM session_items "
                                       "ORDER BY id").fetchall()
            assert on_server == in_file
            assert '"name":"square"' in on_server[2][2]  # function_call_result carries its name
            session = server.session("u", "n")
            assert await session.get_items() == await sqlite_store.session("u", "n").get_items()
            assert [item.get("type") for item in await session.get_items(2)] == \
                ["function_call_output", "message"]
            popped = await session.pop_item()
            assert popped is not None and popped["content"][0]["text"] == "49 ✓ 😀"
            assert len(await session.get_items()) == 3
            assert [(s.user_id, s.items) for s in await server.list_sessions()] == [("u", 3)]
            await session.clear_session()
            assert await session.get_items() == []

    asyncio.run(main())


def test_a_host_reads_what_others_wrote_and_removed_even_out_of_id_order(pg_url: str) -> None:
    def said(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    async def main() -> None:
        async with PostgresStore(pg_url) as here, PostgresStore(pg_url) as there:
            mine, theirs = here.session("u", "n"), there.session("u", "n")
            await mine.add_items([said("one")])
            assert await mine.get_items() == [said("one")]
            await theirs.add_items([said("two")])
            assert await mine.get_items() == [said("one"), said("two")]  # (read since)
            assert await theirs.pop_item() == said("two")
            assert await mine.get_items() == [said("one")]
            # A row whose id is older than one committed before it (two writers at once):
            async with await psycopg.AsyncConnection.connect(pg_url) as slow:
                await slow.execute("INSERT INTO session_items (user_id, session_name, "
                                   "created_at, item_json) VALUES ('u', 'n', %s, %s)",
                                   (9_999_999_999_999,
                                    '{"type":"message","role":"user","content":"late"}'))
                await theirs.add_items([said("three")])  # a higher id, committed first
                assert [i["content"] for i in await mine.get_items()] == ["one", "three"]
                await slow.commit()
            # (after "three" in order, before it in id: only the count of rows up to the
            # last one read tells it is there)
            assert [i["content"] for i in await mine.get_items()] == ["one", "three", "late"]

    asyncio.run(main())


def test_compaction_archives_on_the_server_and_the_run_sees_the_summary(
        pg_url: str) -> None:
    async def main() -> None:
        agent = Agent("calc", tools=[square], model=model(
            *[step for n in range(4) for step in (tools_step(call("square", {"n": n})),
                                                  final(f"{n * n}"))]))
        async with Recorder("u", "long", store=pg_url, compaction_threshold=6) as rec:
            for n in range(4):
                await rec.run(agent, f"square {n}")
            assert rec.errors == 0
        archived = rows(pg_url, "SELECT id, item_json, compaction_id FROM session_items_archive "
                                "ORDER BY id")
        compactions = rows(pg_url, "SELECT id, reason, archived FROM sessiontape_compactions")
        assert archived and compactions
        assert {row[2] for row in archived} == {c[0] for c in compactions}
        assert sum(c[2] for c in compactions) == len(archived)
        live = rows(pg_url, "SELECT item_json FROM session_items ORDER BY created_at, id")
        texts = " ".join(text for (text,) in live + [(a[1],) for a in archived])
        for n in range(4):  # every turn is in the archive or live: nothing lost
            assert f"square {n}" in texts
        assert "Summary" in live[0][0] or "summary" in live[0][0].lower()

    asyncio.run(main())


# -- migrations ----------------------------------------------------------------------------

@pytest.mark.slow
def test_two_hosts_starting_at_once_migrate_once(pg_url: str, tmp_path: Path) -> None:
    script = ("import asyncio, sys\nfrom sessiontape.storage.backends.postgres import "
              "PostgresStore\nasync def main():\n    async with PostgresStore(sys.argv[1]) as s:\n"
              "        await s.session('u', sys.argv[2]).add_items([{'role': 'user', "
              "'content': sys.argv[2]}])\nasyncio.run(main())\n")
    procs = [Lines([EXECUTABLE.with_name("python"), "-c", script, pg_url, f"host{n}"],
                   env=cli_environ()) for n in range(4)]
    assert [proc.finish() for proc in procs] == [0] * 4, [p.err for p in procs]
    assert rows(pg_url, "SELECT version FROM sessiontape_migrations") == \
        [(version,) for version, _, _ in MIGRATIONS]
    assert len(rows(pg_url, "SELECT * FROM session_items")) == 4


def test_a_store_of_a_newer_sessiontape_is_refused_clearly(pg_url: str) -> None:
    async def main() -> None:
        async with PostgresStore(pg_url) as store:
            await store.list_sessions()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("INSERT INTO sessiontape_migrations VALUES (99, 'the future', 0)")
        async with PostgresStore(pg_url) as store:
            with pytest.raises(StoreUnavailable, match="version 99, newer than this sessiontape"):
                await store.list_sessions()

    asyncio.run(main())


# -- a server that goes away ---------------------------------------------------------------

class Relay:
    """A TCP relay to the real server: stop() drops every connection and refuses new ones
    (a server going down), start() lets them through again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.listener.close()
        self._open: list[socket.socket] = []
        self._server: socket.socket | None = None

    def start(self) -> None:
        self._server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self._server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        if self._server is not None:
            with suppress(OSError):  # wakes the thread blocked in accept()
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        for conn in self._open:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self._open.clear()


@pytest.fixture
def relay(pg_url: str) -> Iterator[tuple[Relay, str]]:
    """A relay to the server and the store URL through it, with a password in it (trust
    authentication ignores it): no message may show it."""
    parts = urlsplit(pg_url)
    relay = Relay((parts.hostname or "127.0.0.1", parts.port or 5432))
    relay.start()
    netloc = f"{parts.username}:hunter2-secret@127.0.0.1:{relay.port}"
    try:
        yield relay, urlunsplit(parts._replace(netloc=netloc))
    finally:
        relay.stop()


def test_the_server_going_away_mid_run_costs_only_the_recording(
        relay: tuple[Relay, str], pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    link, url = relay
    caplog.set_level(logging.WARNING)

    @function_tool
    def outage(n: int) -> str:
        """The server goes away while this tool runs (turn 1 only)."""
        if n == 1:
            link.stop()
        return f"ran {n}"

    steps = [step for n in range(3) for step in (tools_step(call("outage", {"n": n})),
                                                 final(f"answer {n}"))]
    agent = Agent("calc", tools=[outage], model=model(*steps))

    async def main() -> None:
        async with Recorder("u", "outage", store=url, compaction_threshold=None) as rec:
            assert (await rec.run(agent, "turn 0")).final_output == "answer 0"
            assert (await rec.run(agent, "turn 1")).final_output == "answer 1"  # mid-run
            await rec.flush()
            assert rec.errors > 0
            link.start()  # back: the next turn first writes what the last one could not
            assert (await rec.run(agent, "turn 2")).final_output == "answer 2"
            await rec.flush()

    asyncio.run(main())
    items = [text for (text,) in rows(pg_url, "SELECT item_json FROM session_items "
                                              "ORDER BY created_at, id")]
    prompts = [text for text in items if '"role":"user"' in text]
    assert len(prompts) == 3
    assert all(f"turn {n}" in prompt for n, prompt in enumerate(prompts))
    assert len(items) == 3 * 4  # each turn: the prompt, the call, its output, the answer
    assert "ran 1" in items[6]  # turn 1's tool output, written after the server came back
    lines = rows(pg_url, "SELECT seq, entry FROM sessiontape_log ORDER BY seq")
    assert [seq for seq, _ in lines] == list(range(1, len(lines) + 1))
    finals = [json.loads(entry)["finalResult"]["text"] for _, entry in lines
              if '"final_result"' in entry]
    assert finals == ["answer 0", "answer 1", "answer 2"]
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "recording error" in said and "postgres:***@127.0.0.1" in said
    assert "hunter2" not in said


def test_no_message_shows_the_password(relay: tuple[Relay, str], tmp_path: Path) -> None:
    link, url = relay
    link.stop()
    as_parameter = url.replace(":hunter2-secret@", "@") + "&password=hunter2-secret"
    for argv, shown in (
            (["store", "info", "--store", url], "postgres:***@127.0.0.1"),
            (["log", "stream", "--store", url], "postgres:***@127.0.0.1"),
            (["sessions", "materialize", "--store", url], "postgres:***@127.0.0.1"),
            (["sessions", "list", "--store", as_parameter], "password=***"),
            (["run", "--store", url, "hello"], "postgres:***@127.0.0.1")):
        done = run_cli(*argv, timeout=60)
        assert done.returncode == 1, (argv, done.stderr)
        assert shown in done.stderr, (argv, done.stderr)
        assert "hunter2" not in done.stderr + done.stdout
    for location in (url, as_parameter):
        with pytest.raises(StoreUnavailable) as raised:
            asyncio.run(PostgresStore(location).list_sessions())
        assert "hunter2" not in str(raised.value) and "***" in str(raised.value)


# -- the live log --------------------------------------------------------------------------

def test_the_log_follower_catches_up_then_follows_and_reconnects(
        relay: tuple[Relay, str], pg_url: str) -> None:
    link, url = relay
    store = PostgresStore(pg_url)
    store.log_copy("ann", "one").append_many([{"kind": "user_message", "userInput": "early"}])
    seen: list[tuple[str, str, str]] = []
    notices: list[str] = []
    stop = threading.Event()
    follower = StoreLogStream(
        url, on_entries=lambda source, objects: seen.extend(
            (*(source.owner or ("", "")), str(o.get("userInput"))) for o in objects),
        on_notice=notices.append)
    thread = threading.Thread(target=follower.run, kwargs={"stop": stop.is_set}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: seen, "the catch-up")
        store.log_copy("bob", "two").append_many([{"kind": "user_message", "userInput": "live"}])
        wait_for(lambda: len(seen) == 2, "a line written after the catch-up")
        link.stop()  # the server restarts: the follower says so and waits
        wait_for(lambda: notices, "the notice of a lost connection")
        store.log_copy("ann", "one").append_many(
            [{"kind": "user_message", "userInput": "while away"}])
        link.start()
        wait_for(lambda: len(seen) == 3, "the line written while it was away")
        store.log_copy("ann", "one").append_many(
            [{"kind": "user_message", "userInput": "after"}])
        wait_for(lambda: len(seen) == 4, "a line after the reconnection")
    finally:
        stop.set()
        thread.join(10)
        store.close_sync()
    assert seen == [("ann", "one", "early"), ("bob", "two", "live"),
                    ("ann", "one", "while away"), ("ann", "one", "after")]
    assert "hunter2" not in " ".join(notices)


def test_log_stream_store_filters_and_prints_json_as_for_files(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        for user, name in (("ann@example.com", "trip plan"), ("bob", "other")):
            store.log_copy(user, name).append_many(
                [{"kind": "user_message", "timestamp": "2026-11-27T10:00:00.000Z",
                  "userInput": f"hello from {user}"},
                 {"kind": "final_result", "timestamp": "2026-11-27T10:00:01.000Z",
                  "finalResult": {"text": f"bye {user}"}}])
    finally:
        store.close_sync()
    done = run_cli("log", "stream", "--store", pg_url, "--no-follow", "--json",
                   "--user", "ann_example_com")
    assert done.returncode == 0, done.stderr
    shown = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(s["user_id"], s["session_name"], s["user"], s["session"]) for s in shown] == \
        [("ann@example.com", "trip plan", "ann_example_com", "trip_plan")] * 2
    assert shown[1]["finalResult"]["text"] == "bye ann@example.com"
    text = run_cli("log", "stream", "--store", pg_url, "--no-follow", "--session", "other")
    assert "bye bob" in text.stdout and "ann" not in text.stdout
    both = run_cli("log", "stream", "--store", pg_url, "--logs-dir", ".", "--no-follow")
    assert both.returncode == 2 and "give one" in both.stderr


# -- moving a store ------------------------------------------------------------------------

def test_store_copy_round_trips_every_row_and_log_line(pg_url: str, tmp_path: Path) -> None:
    agent = Agent("calc", tools=[square], model=model(
        *[step for n in range(3) for step in (tools_step(call("square", {"n": n})),
                                              final(f"{n * n}", usage(3, 1)))]))

    async def record() -> Path:
        async with Recorder("u", "moved", compaction_threshold=4) as rec:
            for n in range(3):
                await rec.run(agent, f"square {n}")
            assert isinstance(rec.store, ItemStore)
            return rec.store.path

    original = asyncio.run(record())
    logs = original.parent / ".agent_session_logs"
    assert run_cli("store", "copy", original, pg_url).returncode == 0
    back = tmp_path / "back" / "store.sqlite"
    done = run_cli("store", "copy", pg_url, back, "--to-logs", tmp_path / "back" / "logs",
                   "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"]["session_items_archive"] > 0
    for table, key in (("session_items", "id"), ("session_items_archive", "id"),
                       ("sessiontape_compactions", "id"), ("sessiontape_links", "user_id")):
        with closing(sqlite3.connect(original)) as a, closing(sqlite3.connect(back)) as b:
            query = f"SELECT * FROM {table} ORDER BY {key}"
            assert a.execute(query).fetchall() == b.execute(query).fetchall(), table
    path = find_log_path("u", "moved", logs)
    copied = find_log_path("u", "moved", tmp_path / "back" / "logs")
    assert path is not None and copied is not None
    assert copied.read_bytes() == path.read_bytes()
    assert oct(copied.stat().st_mode & 0o777) == "0o600"
    again = run_cli("store", "copy", original, pg_url)
    assert again.returncode == 1 and "already holds" in again.stderr
    with pytest.raises(StoreNotEmpty):
        copy_store(pg_url, back)

    async def go_on() -> list[Any]:  # the copy on the server is continued
        scripted = model(final("still here"))
        async with Recorder("u", "moved", store=pg_url) as rec:
            await rec.run(Agent("calc", model=scripted), "are you there?")
        assert scripted.first_call is not None
        return list(scripted.first_call.input)

    seen = json.dumps(asyncio.run(go_on()), default=str)
    assert "square 2" in seen and "are you there?" in seen


# -- writing a server's conversations out on a host ----------------------------------------

@pytest.mark.slow
def test_materialize_writes_every_hosts_log_and_a_tree(pg_url: str, tmp_path: Path) -> None:
    for name in ("a", "b"):
        workdir = tmp_path / f"work-{name}"
        workdir.mkdir(exist_ok=True)
        done = run([EXECUTABLE, "run", "--agent", f"{AGENTS}:agent", "--store", pg_url,
                    "--session-name", "shared", f"from {name}"], cwd=tmp_path / "work-a",
                   env=host_env(tmp_path, name))
        assert done.returncode == 0, done.stderr
    env_c = host_env(tmp_path, "c")
    done = run([EXECUTABLE, "sessions", "materialize", "--store", pg_url, "--json"], env=env_c)
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)
    assert (result["outcome"], result["tree_outcome"]) == ("written", "written")
    lines = [entry for (entry,) in rows(pg_url, "SELECT entry FROM sessiontape_log ORDER BY seq")]
    assert Path(result["path"]).read_text().splitlines() == lines
    shown = run([EXECUTABLE, "sessions", "show", "shared", "--json"], env=env_c)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "answered on a" in text and "answered on b" in text
    # Host a's log has only its turn; materialized there it holds both, nothing lost.
    env_a = host_env(tmp_path, "a")
    again = run([EXECUTABLE, "sessions", "materialize", "--store", pg_url, "--json"], env=env_a)
    [on_a] = json.loads(again.stdout)
    assert on_a["outcome"] == "written" and on_a["tree_outcome"] == "here already"
    assert Path(on_a["path"]).read_text().splitlines() == lines
    # A line here that the database lacks (never sent): the file is kept, exit 1.
    with open(on_a["path"], "a") as log:
        log.write('{"kind":"user_message","userInput":"only here"}\n')
    kept = run([EXECUTABLE, "sessions", "materialize", "--store", pg_url], env=env_a)
    assert kept.returncode == 1 and "kept" in kept.stdout
    assert "only here" in Path(on_a["path"]).read_text()


# -- many recorders at once ----------------------------------------------------------------

def test_twenty_recorders_at_once_lose_nothing_and_interleave_nothing(
        pg_url: str) -> None:
    async def main() -> None:
        turns = 4

        async def converse(n: int) -> int:
            steps = [step for t in range(turns) for step in (
                tools_step(call("square", {"n": t})), final(f"c{n} t{t} done"))]
            agent = Agent("calc", tools=[square], model=model(*steps))
            async with Recorder("fleet", f"c{n}", store=pg_url, compaction_threshold=None) as rec:
                for t in range(turns):
                    await rec.run(agent, f"c{n} t{t} go")
                return rec.errors

        assert await asyncio.gather(*(converse(n) for n in range(20))) == [0] * 20
        for n in range(20):
            items = [text for (text,) in rows(
                pg_url, "SELECT item_json FROM session_items WHERE session_name = %s "
                        "ORDER BY created_at, id", (f"c{n}",))]
            assert len(items) == turns * 4
            for t in range(turns):  # each turn's four items together, in order
                turn = items[t * 4:(t + 1) * 4]
                assert f"c{n} t{t} go" in turn[0] and f"c{n} t{t} done" in turn[3]
            lines = rows(pg_url, "SELECT seq, entry FROM sessiontape_log WHERE session_name = %s "
                                 "ORDER BY seq", (f"c{n}",))
            assert [seq for seq, _ in lines] == list(range(1, len(lines) + 1))
            finals = [json.loads(e)["finalResult"]["text"] for _, e in lines if "final_result" in e]
            assert finals == [f"c{n} t{t} done" for t in range(turns)]

    asyncio.run(main())


def test_migrate_is_idempotent(pg_url: str) -> None:
    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            assert await migrate(conn) == await migrate(conn) == MIGRATIONS[-1][0]

    asyncio.run(main())


def test_recorder_store_from_the_environment(pg_url: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONTAPE_STORE", pg_url)
    done = run_cli("run", "--agent", f"{AGENTS}:agent", "--session-name", "env", "hi",
                   env={**cli_environ(), "PYTHONPATH": str(Path(__file__).parent)})
    assert done.returncode == 0, done.stderr
    info = run_cli("store", "info", "--json")
    facts = json.loads(info.stdout)
    assert (facts["kind"], facts["conversations"], facts["items"]) == ("postgresql", 1, 4)
    assert facts["log_lines"] > 0 and socket.gethostname() in facts["hosts"]
    assert not (Path(os.environ["SKILLET_HOME"]) / "state" / ".agent_sessions.sqlite").exists()


# -- reading a server's conversations from any host ----------------------------------------

@pytest.mark.slow
def test_reading_verbs_read_every_hosts_conversations_through_a_mirror(
        pg_url: str, tmp_path: Path) -> None:
    def turn(host: str, prompt: str) -> None:
        (tmp_path / f"work-{host}").mkdir(exist_ok=True)
        done = run([EXECUTABLE, "run", "--agent", f"{AGENTS}:agent", "--store", pg_url,
                    "--user-email", "ops@example.com", "--session-name", "shared", prompt],
                   cwd=tmp_path / "work-a", env=host_env(tmp_path, host))
        assert done.returncode == 0, done.stderr

    turn("a", "first from a")
    turn("b", "then from b")
    env_c = host_env(tmp_path, "c")

    def on_c(*argv: str) -> Any:
        done = run([EXECUTABLE, *argv, "--store", pg_url, "--json"], env=env_c)
        assert done.returncode == 0, (argv, done.stderr)
        return json.loads(done.stdout)

    [listed] = on_c("sessions", "list")
    assert (listed["user_id"], listed["session_name"], listed["turns"]) == \
        ("ops@example.com", "shared", 2)
    shown = json.dumps(on_c("sessions", "show", "shared"))
    assert "first from a" in shown and "answered on b" in shown
    hits = on_c("search", "answered")
    assert {hit["session"] for hit in hits} == {"shared"} and len(hits) >= 2
    turn("a", "again from a")  # the mirror follows the store
    [listed] = on_c("sessions", "list")
    assert listed["turns"] == 3
    assert not (tmp_path / "c" / "skillet").exists()  # host c's own layouts: untouched


@pytest.mark.slow
def test_fork_rename_clear_and_prune_change_the_servers_store(pg_url: str,
                                                              tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()

    def on(host: str, *argv: str, code: int = 0) -> str:
        done = run([EXECUTABLE, *argv], cwd=tmp_path / "work",
                   env={**host_env(tmp_path, host), "SESSIONTAPE_STORE": pg_url})
        assert done.returncode == code, (argv, done.stdout, done.stderr)
        return done.stdout

    for host, prompt in (("a", "first"), ("b", "second")):
        on(host, "run", "--agent", f"{AGENTS}:agent", "--session-name", "shared", prompt)

    def pairs() -> dict[str, tuple[int, int]]:  # name: (items, log lines) in the store
        found = rows(pg_url, "SELECT session_name, COUNT(*) FROM session_items GROUP BY 1")
        lines = dict(rows(pg_url, "SELECT session_name, COUNT(*) FROM sessiontape_log "
                                  "GROUP BY 1"))
        return {name: (count, lines.get(name, 0)) for name, count in found}

    assert pairs()["shared"][0] == 8
    on("c", "sessions", "fork", "shared", "--at-turn", "1", "--as", "branch")
    assert pairs()["branch"][0] == 4 and pairs()["branch"][1] > 0
    assert pairs()["shared"][0] == 8  # the original untouched
    # The fork continues on another host from its one turn.
    on("a", "run", "--agent", f"{AGENTS}:agent", "--session-name", "branch", "third")
    seen = rows(pg_url, "SELECT item_json FROM session_items WHERE session_name = 'branch' "
                        "ORDER BY created_at, id")
    assert ["first" in seen[0][0], "third" in seen[4][0]] == [True, True] and len(seen) == 8
    on("c", "sessions", "rename", "branch", "twig")
    assert "branch" not in pairs() and pairs()["twig"][0] == 8
    taken = on("c", "sessions", "rename", "twig", "shared", code=2)
    assert taken == "" and pairs()["twig"][0] == 8
    listed = json.loads(on("c", "sessions", "list", "--json"))
    assert sorted(s["session_name"] for s in listed) == ["shared", "twig"]
    on("c", "sessions", "clear", "twig", "--yes")
    assert "twig" not in pairs()
    assert not rows(pg_url, "SELECT 1 FROM sessiontape_links WHERE session_name = 'twig'")
    listed = json.loads(on("c", "sessions", "list", "--json"))
    assert [s["session_name"] for s in listed] == ["shared"]
    on("c", "sessions", "prune", "--older-than", "0s", "--yes")
    assert pairs() == {} and not rows(pg_url, "SELECT 1 FROM sessiontape_log")
    assert json.loads(on("b", "sessions", "list", "--json")) == []


def test_demo_and_ingest_record_into_the_servers_store(pg_url: str, tmp_path: Path) -> None:
    demo = run_cli("demo", "--store", pg_url)
    assert demo.returncode == 0, demo.stderr
    stream = tmp_path / "agentrun.jsonl"
    stream.write_text("".join(json.dumps(line) + "\n" for line in [
        {"type": "init", "resume_id": "lisbon",
         "init": {"model": "openai/gpt-4.1-mini", "agent_name": "Guide"}},
        {"type": "system", "content": "where is the castle?"},
        {"type": "text", "content": "up the hill"},
        {"type": "result", "stop_reason": "end_turn",
         "usage": {"input_tokens": 20, "output_tokens": 5}}]))
    ingested = run_cli("ingest", "--format", "agentrun", "--store", pg_url, stream)
    assert ingested.returncode == 0, ingested.stderr
    names = {name for (name,) in rows(pg_url, "SELECT DISTINCT session_name FROM session_items")}
    assert names == {"sessiontape_demo", "lisbon"}
    logged = {name for (name,) in rows(pg_url, "SELECT DISTINCT session_name FROM "
                                               "sessiontape_log")}
    assert logged == names
    assert not (Path(os.environ["SKILLET_HOME"]) / "state" / ".agent_sessions.sqlite").exists()


def test_following_and_moving_rows_load_no_agents_sdk() -> None:
    """``log stream --store``, ``store info``, ``store copy`` and a mirror's refresh start
    without the Agents SDK (about 2 s of imports): only building a tree records."""
    check = ("import sys\nimport sessiontape.storage.backends.postgres_log, "
             "sessiontape.storage.backends.transfer, sessiontape.materialize, "
             "sessiontape.cli.logs, sessiontape.cli.store\n"
             "print(sorted(m for m in sys.modules if m == 'agents' or m.startswith('agents.')))")
    done = run([EXECUTABLE.with_name("python"), "-c", check])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_reading_verbs_at_once_on_one_host_share_its_mirror(pg_url: str, tmp_path: Path) -> None:
    """Several reading verbs at once on one host (a script, a shell loop) each refresh the
    one mirror: they take turns (else they copied into one file at once: tracebacks, a
    UNIQUE constraint failed, "disk I/O error")."""
    said_hi(pg_url, "n")
    readers = [Lines([EXECUTABLE, "sessions", "list", "--store", pg_url, "--json"])
               for _ in range(4)]
    codes = [reader.finish() for reader in readers]
    assert codes == [0] * 4, [reader.err for reader in readers]
    for reader in readers:
        assert [s["session_name"] for s in json.loads("\n".join(reader.out))] == ["n"]


@pytest.mark.slow
def test_a_reading_verb_answers_from_the_mirror_while_the_server_is_away(
        relay: tuple[Relay, str]) -> None:
    link, url = relay
    said_hi(url, "kept")
    first = run_cli("sessions", "list", "--store", url, "--json")
    assert first.returncode == 0, first.stderr
    link.stop()
    away = run_cli("sessions", "list", "--store", url, "--json", timeout=60)
    assert away.returncode == 0, away.stderr
    assert json.loads(away.stdout) == json.loads(first.stdout)
    assert "answering from this host's mirror of it as of" in away.stderr
    assert "postgres:***@" in away.stderr and "hunter2" not in away.stderr
