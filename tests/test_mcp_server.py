"""``sessiontape mcp`` driven by the ``mcp`` SDK's own client over stdio.

The real executable serves conversations recorded with the SDK's ``Runner`` (porto with a
subagent and a failed tool, hostile text, a 10 MB output: ``tests/web_world.py``). The
client initializes, lists the tools and calls each; the answers are the CLI's ``--json``,
paged and bounded; a hostile or huge request never breaks the stream; nothing is written.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from harness import EXECUTABLE, WAIT, isolated, run_cli
from mcp import ClientSession, StdioServerParameters, stdio_client
from web_world import HUGE_CHARS, ODD_NAME, record_world, tree_of

from sessiontape.mcp import MAX_RESULT_CHARS

TOOLS = {"list_sessions", "show_session", "search_sessions", "usage"}

Calls = Callable[[ClientSession], Awaitable[Any]]


def with_client(env: dict[str, str], calls: Calls) -> Any:
    """Start ``sessiontape mcp`` in ``env``, initialize a client session, run ``calls``."""
    async def main() -> Any:
        server = StdioServerParameters(command=str(EXECUTABLE), args=["mcp"], env=env)
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), WAIT)
            return await asyncio.wait_for(calls(session), WAIT * 4)

    return asyncio.run(main())


async def call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """Whether the tool said it failed, and its answer (JSON) or its message (text)."""
    result = await session.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.is_error:
        return True, text
    return False, result.structured_content if result.structured_content is not None \
        else json.loads(text)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("mcp")
    with isolated(base) as env:
        record_world()
        cli = {name: json.loads(run_cli(*argv, "--json", env=env).stdout) for name, argv in {
            "list": ["sessions", "list"], "search": ["search", "tram"],
            "usage": ["usage", "model"], "show": ["sessions", "show", "porto"]}.items()}
        layouts = [base / "skillet", base / "home" / "data"]
        before = [tree_of(root) for root in layouts]

        async def calls(session: ClientSession) -> dict[str, Any]:
            tools = await session.list_tools()
            answers = {
                "tools": {tool.name: tool for tool in tools.tools},
                "list": await call(session, "list_sessions"),
                "page": await call(session, "list_sessions", limit=1, offset=1),
                "mine": await call(session, "list_sessions", user="ANN"),
                "show": await call(session, "show_session", name="porto"),
                "huge": await call(session, "show_session", name=ODD_NAME, user="carol"),
                "search": await call(session, "search_sessions", query="tram"),
                "usage": await call(session, "usage", group="model"),
                "unknown": await call(session, "show_session", name="no such session"),
                "bad group": await call(session, "usage", group="yearly"),
                "hostile": await call(session, "search_sessions",
                                      query='"\x00</script> NOT OR AND *( ' + "x" * 100_000),
                "far": await call(session, "list_sessions", offset=10**30),
                "after": await call(session, "list_sessions", limit=1),
            }
            return answers

        answers = with_client(env, calls)
        after = [tree_of(root) for root in layouts]
    return {"cli": cli, "answers": answers, "before": before, "after": after}


def test_the_client_sees_the_four_tools_with_their_parameters(world: dict[str, Any]) -> None:
    tools = world["answers"]["tools"]
    assert set(tools) == TOOLS
    assert {"query", "user", "status", "since", "offset", "limit"} <= set(
        tools["list_sessions"].input_schema["properties"])
    assert tools["show_session"].input_schema["required"] == ["name"]
    assert "Full-text search" in tools["search_sessions"].description


def test_the_answers_are_the_clis_json(world: dict[str, Any]) -> None:
    answers, cli = world["answers"], world["cli"]
    failed, listed = answers["list"]
    assert not failed and listed["sessions"] == cli["list"] and listed["total"] == 3
    assert answers["search"] == (False, {"hits": cli["search"], "offset": 0,
                                         "next_offset": None})
    assert answers["usage"] == (False, {"rows": cli["usage"]})
    failed, shown = answers["show"]
    assert not failed and shown["turns"] == cli["show"]["turns"]
    assert (shown["session"], shown["turns_total"], shown["next_turn"]) == (
        cli["show"]["session"], 1, None)


def test_lists_are_paged_and_users_typed_as_people_type_them(world: dict[str, Any]) -> None:
    failed, page = world["answers"]["page"]
    assert not failed and (page["total"], page["offset"], page["next_offset"]) == (3, 1, 2)
    assert [s["session_name"] for s in page["sessions"]] == \
        [s["session_name"] for s in world["cli"]["list"]][1:2]
    failed, mine = world["answers"]["mine"]
    assert not failed and [s["session_name"] for s in mine["sessions"]] == ["porto"]


def test_a_huge_session_is_cut_and_bounded(world: dict[str, Any]) -> None:
    failed, huge = world["answers"]["huge"]
    assert not failed
    text = json.dumps(huge)
    assert len(text) <= MAX_RESULT_CHARS
    assert f"[{HUGE_CHARS // 15 * 15 + 7 - 4000} more characters]" in text


def test_errors_are_the_tools_own_and_the_stream_goes_on(world: dict[str, Any]) -> None:
    answers = world["answers"]
    failed, message = answers["unknown"]
    assert failed and "no such session" in message
    failed, message = answers["bad group"]
    assert failed and "unknown group 'yearly'" in message
    failed, hostile = answers["hostile"]
    assert not failed and hostile["hits"] == []
    failed, far = answers["far"]
    assert not failed and (far["sessions"], far["next_offset"]) == ([], None)
    failed, after = answers["after"]
    assert not failed and after["total"] == 3  # the protocol stream is intact


def test_nothing_is_written(world: dict[str, Any]) -> None:
    def recorded(tree: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        return {path: stat for path, stat in tree.items() if not path.endswith("-shm")}

    assert [recorded(t) for t in world["after"]] == [recorded(t) for t in world["before"]]


def test_without_the_mcp_sdk_it_says_which_extra(tmp_path: Path) -> None:
    blocker = tmp_path / "mcp"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('no mcp here')\n")
    with isolated(tmp_path / "env", PYTHONPATH=str(tmp_path)) as env:
        done = run_cli("mcp", env=env)
    assert done.returncode == 1
    assert "pip install 'sessiontape[mcp]'" in done.stderr
