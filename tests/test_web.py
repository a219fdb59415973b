"""``sessiontape serve`` over HTTP: pages, the API, hostile content, live events, robustness.

One real ``serve`` process (``tests/web_world.py``) over conversations recorded with the
SDK's ``Runner``: porto (a subagent, a failed tool), hostile (markup and terminal escapes)
and carol's odd name with a 10 MB output. The browser's view: ``test_web_browser.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx2
import pytest
from harness import WAIT, isolated, run_cli, wait_for
from web_world import HUGE_CHARS, ODD_NAME, Server, add_turn, record_world, tree_of

from sessiontape.storage.catalog.index import SCHEMA_VERSION, Catalog, default_catalog_path
from sessiontape.web import _bound, is_loopback

pytestmark = pytest.mark.slow  # a server process and 50 event streams


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("web")
    with isolated(base) as env:
        record_world()
        layouts = {"skillet": base / "skillet", "data": base / "home" / "data"}
        with Server(env) as server:
            sessions = httpx2.get(server.url + "api/sessions").json()["sessions"]
            ids = {s["session_name"]: s["id"] for s in sessions}
            yield {"base": base, "env": env, "server": server, "url": server.url, "ids": ids,
                   "layouts": layouts}


def get(world: dict[str, Any], path: str, **options: Any) -> httpx2.Response:
    return httpx2.get(world["url"] + path.lstrip("/"), timeout=WAIT, **options)


def test_the_sessions_page_lists_every_conversation_with_its_figures(
        world: dict[str, Any]) -> None:
    page = get(world, "/")
    assert page.status_code == 200
    for name in ("porto", "hostile"):
        assert f">{name}</a>" in page.text
    assert "&lt;b&gt;odd&lt;/b&gt; &amp; name" in page.text and "<b>odd" not in page.text
    listed = get(world, "/api/sessions").json()
    assert listed["total"] == 3
    cli = json.loads(run_cli("sessions", "list", "--json", env=world["env"]).stdout)
    assert {s["session_name"]: (s["turns"], s["tokens"], s["cost"]) for s in cli} == {
        s["session_name"]: (s["turns"], s["tokens"], s["cost"]) for s in listed["sessions"]}


def test_the_filter_and_the_status_narrow_the_rows(world: dict[str, Any]) -> None:
    rows = get(world, "/sessions/rows", params={"q": "HOST"}).text  # case ignored
    assert ">hostile</a>" in rows and ">porto</a>" not in rows
    assert "1 session matching" in rows
    assert "0 sessions matching" in get(world, "/sessions/rows", params={"q": "%"}).text
    assert "0 sessions matching" in get(world, "/sessions/rows", params={"q": "_"}).text
    by_user = get(world, "/sessions/rows", params={"q": "carol"}).text
    assert "&lt;b&gt;odd" in by_user and ">porto</a>" not in by_user
    done = get(world, "/sessions/rows", params={"status": "completed"}).text
    assert "3 sessions matching" in done
    assert "0 sessions matching" in get(world, "/sessions/rows",
                                        params={"status": "failed"}).text


@pytest.mark.parametrize("page", ["9" * 40, "-3", "two", ""])
def test_any_page_number_is_answered(world: dict[str, Any], page: str) -> None:
    answer = get(world, "/sessions/rows", params={"page": page})
    assert answer.status_code == 200
    assert "sessions" in answer.text and "Internal Server Error" not in answer.text


def test_pages_slice_the_listing_in_its_order(world: dict[str, Any]) -> None:
    with isolated(world["base"]), Catalog() as catalog:
        listed = [json.loads(row.json)["session_name"] for row in catalog.listed()]
        total, none = catalog.page(limit=0)
        one_by_one = [catalog.page(offset=k, limit=1)[1][0].info.session_name
                      for k in range(total)]
        beyond = catalog.page(offset=total, limit=5)
        (found,) = catalog.page(text="porto")[1]
        by_id = catalog.by_id(found.id)
    assert (total, none, beyond) == (len(listed), [], (total, []))
    assert one_by_one == listed
    assert by_id is not None and by_id.session_name == "porto"


def test_a_transcript_shows_turns_calls_subagents_and_usage(world: dict[str, Any]) -> None:
    page = get(world, f"/session/{world['ids']['porto']}")
    assert page.status_code == 200
    text = page.text
    assert "how do I get around?" in text and "take the tram" in text
    helper = text.index('<span class="tool">helper</span>')
    subagent = text.index("Subagent", helper)
    assert text.index("the tram is faster", subagent) < text.index("</details>", subagent)
    assert re.search(r'<details class="call failed"[^>]*>\s*<summary><span class="tool">fail',
                     text)
    assert re.search(r"Turn 1: \d+ tokens in, \d+ out, \$", text)
    assert "user <b>ann</b>" in text


def test_hostile_records_are_text_never_markup(world: dict[str, Any]) -> None:
    page = get(world, f"/session/{world['ids']['hostile']}").text
    body = page[page.index("<main>"):]
    assert "<script>alert" not in body and "<img" not in body
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "\x1b" not in body and "\\x1b[31mred" in body
    assert "<b>bold?</b>" not in body and "&lt;b&gt;bold?&lt;/b&gt;" in body
    assert "script-src 'self'" in get(world, "/").headers["content-security-policy"]


def test_a_huge_output_is_cut_and_shown_whole_on_request(world: dict[str, Any]) -> None:
    row_id = world["ids"][ODD_NAME]
    page = get(world, f"/session/{row_id}")
    assert page.status_code == 200 and len(page.content) < 200_000
    assert f"show all ({HUGE_CHARS // 15 * 15 + 7:,} characters)" in page.text
    whole = get(world, f"/session/{row_id}/call/1/output")
    assert whole.status_code == 200 and whole.text.rstrip().endswith(
        "THE END</code></pre></div>")
    assert len(whole.content) > HUGE_CHARS


@pytest.mark.parametrize("path", [
    "/session/999999", "/session/abc", "/session/-1", "/session/1/call/99/output",
    "/session/1/call/1/secrets", "/session/1/call/1/..%2F..%2Fetc%2Fpasswd",
    "/static/../pyproject.toml", "/static/%2e%2e/__init__.py"])
def test_paths_never_reach_a_file_they_name(world: dict[str, Any], path: str) -> None:
    answer = get(world, path)
    assert answer.status_code == 404, (path, answer.status_code)
    assert "import" not in answer.text and "[project]" not in answer.text


def test_search_marks_matches_and_answers_as_the_cli(world: dict[str, Any]) -> None:
    page = get(world, "/search", params={"q": "tram"}).text
    assert "<mark>tram</mark>" in page
    assert f'href="/session/{world["ids"]["porto"]}#turn-1"' in page
    hostile = get(world, "/search", params={"q": "script"}).text
    assert "<script>alert" not in hostile[hostile.index("<main>"):]
    cli = json.loads(run_cli("search", "tram", "--json", env=world["env"]).stdout)
    assert get(world, "/api/search", params={"q": "tram"}).json() == cli
    broken = get(world, "/api/search", params={"q": '"unclosed'})
    assert broken.status_code in (200, 400)


def test_usage_answers_as_the_cli(world: dict[str, Any]) -> None:
    for group in ("daily", "model"):
        cli = json.loads(run_cli("usage", group, "--json", env=world["env"]).stdout)
        assert get(world, "/api/usage", params={"group": group}).json() == cli
    assert get(world, "/api/usage", params={"group": "nonsense"}).status_code == 400
    page = get(world, "/usage").text
    series = json.loads(re.search(r'data-series="([^"]*)"', page)[1]  # type: ignore[index]
                        .replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&"))
    assert series["models"] and len(series["days"]) == 1


def test_only_loopback_names_are_answered(world: dict[str, Any]) -> None:
    assert get(world, "/", headers={"Host": "attacker.example"}).status_code == 400
    assert get(world, "/", headers={"Host": "localhost"}).status_code == 200
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.10")
    assert world["url"].startswith("http://127.0.0.1:")


def test_every_response_says_its_server_time(world: dict[str, Any]) -> None:
    timing = get(world, "/").headers["server-timing"]
    assert re.fullmatch(r"app;dur=\d+\.\d\d", timing)


async def _events(url: str, clients: int, ready: asyncio.Event, wanted: str,
                  opened: list[int]) -> list[list[str]]:
    """``clients`` event streams at once, each read until it has seen ``wanted``."""
    async with httpx2.AsyncClient(timeout=WAIT) as client:
        async def one() -> list[str]:
            seen: list[str] = []
            async with client.stream("GET", url + "events") as response:
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        seen.append(line.removeprefix("event: "))
                        if seen == ["hello"]:
                            opened.append(1)
                            if len(opened) == clients:
                                ready.set()
                        if seen[-1] == wanted:
                            return seen
            return seen

        return await asyncio.wait_for(asyncio.gather(*(one() for _ in range(clients))), WAIT)


def test_fifty_event_streams_each_hear_of_a_new_turn(world: dict[str, Any]) -> None:
    row_id = world["ids"]["porto"]

    async def main() -> list[list[str]]:
        ready = asyncio.Event()
        opened: list[int] = []
        listening = asyncio.create_task(
            _events(world["url"], 50, ready, f"session-{row_id}", opened))
        await asyncio.wait_for(ready.wait(), WAIT)
        await asyncio.to_thread(add_turn, "ann", "porto", "fifty listen")
        return await listening

    with isolated(world["base"]):  # the server's layouts, not this test's own
        seen = asyncio.run(main())
    assert len(seen) == 50 and all(s[-1] == f"session-{row_id}" for s in seen), seen[:3]
    assert all("sessions" in s for s in seen)
    tail = get(world, f"/session/{row_id}/tail", params={"from": 1}).text
    assert "fifty listen" in tail and 'hx-get="/session/' in tail


def test_a_client_that_leaves_mid_stream_harms_nobody(world: dict[str, Any]) -> None:
    host, port = world["url"].removeprefix("http://").rstrip("/").split(":")
    for _ in range(20):  # a stream opened, its first event read, the socket dropped
        with socket.create_connection((host, int(port)), timeout=WAIT) as raw:
            raw.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert b"200 OK" in raw.recv(4096)
    with socket.create_connection((host, int(port)), timeout=WAIT) as raw:  # half a request
        raw.sendall(b"GET /session/1 HTTP/1.1\r\nHo")
    assert get(world, "/").status_code == 200
    assert world["server"].process.poll() is None


def test_a_session_deleted_while_open_says_so(world: dict[str, Any]) -> None:
    with isolated(world["base"]):
        add_turn("zed", "doomed", "soon gone")
    row_id = wait_for(lambda: next((s["id"] for s in get(world, "/api/sessions").json()[
        "sessions"] if s["session_name"] == "doomed"), None), "doomed to be listed")
    assert get(world, f"/session/{row_id}").status_code == 200
    assert run_cli("sessions", "clear", "doomed", "--user", "zed", "--yes",
                   env=world["env"]).returncode == 0
    gone = wait_for(lambda: (answer := get(world, f"/session/{row_id}/tail",
                                           params={"from": 1})).status_code == 200
                    and "is gone" in answer.text and answer, "the tail to say it is gone")
    assert 'hx-get' not in gone.text  # no more requests for it
    assert get(world, f"/session/{row_id}").status_code == 404


def _recorded(root: Path) -> dict[str, tuple[int, int]]:
    """What is recorded under ``root``: every file but SQLite's shared-memory index (its
    ``-shm``), which every reader of a WAL database writes."""
    return {path: stat for path, stat in tree_of(root).items() if not path.endswith("-shm")}


def test_nothing_is_written_to_the_layouts(world: dict[str, Any]) -> None:
    before = {name: _recorded(root) for name, root in world["layouts"].items()}
    for _ in range(3):
        for path in ("/", f"/session/{world['ids']['porto']}", "/usage", "/search?q=tram",
                     f"/session/{world['ids']['porto']}/call/1/output", "/api/sessions"):
            assert get(world, path).status_code == 200
    assert {name: _recorded(root) for name, root in world["layouts"].items()} == before


def test_a_port_in_use_is_said_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with isolated(tmp_path) as env:
            done = run_cli("serve", "--port", str(port), env=env, timeout=WAIT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"sessiontape serve: port {port} on 127.0.0.1 is in use: give another with --port "
        "(--port 0: any free one)"]


def test_a_catalog_of_a_newer_sessiontape_is_said_and_a_private_one_serves(
        tmp_path: Path) -> None:
    with isolated(tmp_path) as env:
        add_turn("ann", "alone", "answered")
        run_cli("catalog", "refresh", env=env)
        with closing(sqlite3.connect(default_catalog_path())) as conn, conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                         (str(SCHEMA_VERSION + 1),))
        kept = default_catalog_path().read_bytes()
        with Server(env) as server:
            listed = httpx2.get(server.url + "api/sessions", timeout=WAIT).json()
            add_turn("ann", "later", "live too")
            wait_for(lambda: httpx2.get(server.url + "api/sessions", timeout=WAIT).json()[
                "total"] == 2, "the new conversation in the private catalog")
        assert default_catalog_path().read_bytes() == kept  # left to the newer sessiontape
    assert [s["session_name"] for s in listed["sessions"]] == ["alone"]
    assert any("newer than this sessiontape" in line and "private catalog" in line
               for line in server.stderr), server.stderr


def test_the_listening_socket_is_tcps_own_so_each_connection_is_not_delayed() -> None:
    """asyncio turns Nagle off (TCP_NODELAY) only on connections accepted from a socket of
    protocol IPPROTO_TCP: with protocol 0, each response after the first on a kept-alive
    connection waited for the client's delayed ACK, ~40 ms (found by bench/web.py)."""
    with _bound("127.0.0.1", 0) as listening:
        assert listening.proto == socket.IPPROTO_TCP


def test_open_shows_the_page_in_the_browser(tmp_path: Path) -> None:
    """``--open`` hands the URL to the user's browser ($BROWSER, as Python's webbrowser)."""
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(0o700)
    with isolated(tmp_path / "home-of-it") as env:
        add_turn("ann", "shown", "here")
        with Server({**env, "BROWSER": str(browser)}, "--open") as server:
            assert wait_for(lambda: opened.exists() and opened.read_text().strip(),
                            "the browser to be given the page") == server.url


def test_layouts_made_after_the_start_are_watched_too(tmp_path: Path) -> None:
    """Nothing recorded yet: no root to watch. The first recording makes them; the server
    finds them (it looks every second) and lists the conversation without a restart."""
    with isolated(tmp_path) as env, Server(env) as server:
        assert httpx2.get(server.url + "api/sessions", timeout=WAIT).json()["total"] == 0
        add_turn("ann", "first", "hello")
        wait_for(lambda: httpx2.get(server.url + "api/sessions", timeout=WAIT).json()[
            "total"] == 1, "the first conversation to be listed")
        add_turn("ann", "first", "again")
        wait_for(lambda: httpx2.get(server.url + "api/sessions", timeout=WAIT).json()[
            "sessions"][0]["turns"] == 2, "its second turn, through the watcher")


def test_ctrl_c_with_pages_open_stops_cleanly(tmp_path: Path) -> None:
    """Open event streams end whole when the server stops: no error is logged, exit 0."""
    with isolated(tmp_path) as env:
        add_turn("ann", "open", "hello")
        server = Server(env)
        host, port = server.url.removeprefix("http://").rstrip("/").split(":")
        streams = [socket.create_connection((host, int(port)), timeout=WAIT) for _ in range(3)]
        try:
            for raw in streams:
                raw.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                seen = b""
                while b"event: hello" not in seen:  # the stream is open and subscribed
                    chunk = raw.recv(4096)
                    assert chunk, seen  # not closed before its first event
                    seen += chunk
            assert server.stop() == 0
        finally:
            for raw in streams:
                raw.close()
    assert not [line for line in server.stderr if "ERROR" in line], server.stderr
