"""MCP tools (``Agent(mcp_servers=[...])``) recorded as the model had them (issue 13, item 3).

A real MCP server (``tests/mcp_server.py``, mcp 2's ``MCPServer``) runs as a subprocess,
connected over stdio with the SDK's ``MCPServerStdio``; the model is scripted, and
``ScriptedModel.calls`` shows what the model was given. Each test reads all three outputs:
the AgentUse tree, the JSONL log and the item store.

- ``tools.json`` lists the MCP tools with the name, description and parameters schema the
  model was given, learnt from the listing the SDK made for the run (no request of ours);
- a tool part's ``output`` and the log's ``agent_tool_end`` ``result`` are the
  ``function_call_output`` the model saw (as compact JSON when it is a list of content
  items), never a Python ``repr``;
- an error result (``isError: true``) is a failed call: ``MCPToolError: <its text>``;
- a server killed during a call: the run ends as it ends without a recorder, the call is
  failed with the SDK's exception, and the run's own end is recorded.

``test_describe_reads_mcp_calls_as_the_model_had_them`` drives ``sessiontape.describe``
from hooks of its own, through a real run: what the recorder's hooks build their events
from.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    RunHooks,
    Runner,
    ToolCallOutputItem,
    ToolOutputText,
    default_tool_error_function,
    function_tool,
)
from agents.mcp import MCPServerStdio, create_static_tool_filter
from agents.testing import ScriptedModel
from harness import WAIT
from scripted import (
    await_until,
    call,
    final,
    model,
    read_session,
    read_turns,
    run_way,
    steps_of,
    tool_parts,
    tools_step,
)

from sessiontape import Recorder
from sessiontape.describe import (
    MCPToolError,
    is_mcp_tool,
    mcp_tools,
    take_tool_failure,
    tool_output,
    watch_mcp_servers,
)
from sessiontape.storage.json_style import value_text

SERVER = Path(__file__).with_name("mcp_server.py")
WAYS = pytest.mark.parametrize(
    "way", ["rec.run", "rec.run_streamed", "Runner.run", "Runner.run_streamed"])
# what the SDK tells the model of a call whose connection closed (0.23 on: its one text)
CLOSED_TEXT = default_tool_error_function(None, Exception("Connection closed"))


def calc(**options: Any) -> MCPServerStdio:
    """A connection to a new ``tests/mcp_server.py`` process (opened by ``async with``)."""
    return MCPServerStdio(params={"command": sys.executable, "args": [str(SERVER)]},
                          name="calc", client_session_timeout_seconds=WAIT, **options)


def count_listings(server: MCPServerStdio) -> list[int]:
    """Count the server's ``list_tools`` calls from now on (the SDK's, and anyone's)."""
    listings: list[int] = []
    listed = server.list_tools

    async def list_tools(*args: Any, **kwargs: Any) -> Any:
        listings.append(1)
        return await listed(*args, **kwargs)

    server.list_tools = list_tools  # type: ignore[method-assign]
    return listings


def given_tools(scripted: ScriptedModel) -> list[dict[str, Any]]:
    """The tools of the model's first call as ``tools.json`` writes them."""
    first = scripted.first_call
    assert first is not None
    return [{"name": t.name, "description": t.description, "inputSchema": t.params_json_schema}
            for t in first.tools]


def store_outputs(items: list[Any]) -> dict[str, Any]:
    """The ``function_call_output`` items of the store, by call id: what the model saw."""
    return {i["call_id"]: i["output"] for i in items if i.get("type") == "function_call_output"}


def tool_ends(rec: Recorder) -> dict[str, dict[str, Any]]:
    """The last turn's ``agent_tool_end`` steps by tool name."""
    return {s["toolName"]: s for s in steps_of(read_turns(rec)[-1], "agent_tool_end")}


@function_tool
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


class DescribingHooks(RunHooks[Any]):
    """A test's own hooks that read the run with ``sessiontape.describe``, as the recorder's
    hooks do: the MCP tools listed for each turn, each call's output as the model saw it,
    and the failure noted for it."""

    def __init__(self) -> None:
        self.listed: list[tuple[Any, ...]] = []
        self.mcp_calls: list[str] = []
        self.outputs: dict[str, str] = {}
        self.failures: dict[str, BaseException | None] = {}

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        watch_mcp_servers(agent)

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any,
                           input_items: Any) -> None:
        self.listed.append(mcp_tools(agent))

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        if is_mcp_tool(tool):
            self.mcp_calls.append(tool.name)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.outputs[context.tool_call_id] = tool_output(context, tool, result)
        self.failures[context.tool_call_id] = take_tool_failure(context)


@function_tool
def note(text: str) -> ToolOutputText:
    """Keep a note (a structured output of a function tool)."""
    return ToolOutputText(text=f"noted: {text}")


def test_describe_reads_mcp_calls_as_the_model_had_them() -> None:
    """Without a recorder: what ``describe`` reads in hooks equals what the model was given
    (its tools) and saw (each call's output), and an ``isError`` result is noted."""
    async def main() -> None:
        async with calc() as server:
            scripted = model(tools_step(call("add", {"a": 2, "b": 3}, "call_add"),
                                        call("pair", {"word": "hi"}, "call_pair"),
                                        call("fail", {"reason": "no"}, "call_fail"),
                                        call("note", {"text": "x"}, "call_note"),
                                        call("shout", {"text": "hey"}, "call_shout")),
                             final("done"))
            agent = Agent(name="Calculator", tools=[note, shout], mcp_servers=[server],
                          model=scripted)
            hooks = DescribingHooks()
            result = await Runner.run(agent, "go", hooks=hooks)
            assert result.final_output == "done"

            mcp_given = [t for t in given_tools(scripted) if t["name"] not in ("note", "shout")]
            for listed in hooks.listed:  # each turn's listing, as the model had it
                assert [{"name": t.name, "description": t.description,
                         "inputSchema": t.input_schema} for t in listed] == mcp_given
            assert sorted(hooks.mcp_calls) == ["add", "fail", "pair"]

            seen = {i.raw_item["call_id"]: i.raw_item["output"] for i in result.new_items
                    if isinstance(i, ToolCallOutputItem)}
            assert hooks.outputs == {call_id: value_text(output)
                                     for call_id, output in seen.items()}
            assert hooks.outputs["call_add"] == '[{"type":"input_text","text":"5"}]'
            assert hooks.outputs["call_note"] == '[{"type":"input_text","text":"noted: x"}]'
            assert hooks.outputs["call_shout"] == "HEY"

            failure = hooks.failures.pop("call_fail")
            assert isinstance(failure, MCPToolError)
            assert str(failure) == "Error executing tool fail: no"
            assert set(hooks.failures.values()) == {None}

    asyncio.run(main())


def test_tools_json_has_the_mcp_tools_a_server_listed_before_the_run() -> None:
    """A server that listed its tools before the run (here by hand; as well by an earlier
    run): the run's session starts with them in tools.json."""
    async def main() -> None:
        async with calc() as server:
            await server.list_tools()
            listings = count_listings(server)
            scripted = model(final("ok"))
            agent = Agent(name="Calculator", tools=[shout], mcp_servers=[server],
                          model=scripted)
            rec = Recorder(session_name="mcp-listed-before")
            await rec.run(agent, "hi")
            assert len(listings) == 1  # the SDK's, for the one turn
            tools = json.loads((read_session(rec).directory / "tools.json").read_text())
            assert sorted(tools["tools"], key=lambda t: t["name"]) == \
                sorted(given_tools(scripted), key=lambda t: t["name"])
            [turn] = read_turns(rec)
            assert turn.complete and turn.text == "ok"
            assert [i.get("role") for i in await rec.session.get_items()] == \
                ["user", "assistant"]
            await rec.aclose()

    asyncio.run(main())


def test_tools_json_lists_the_mcp_tools_the_model_was_given() -> None:
    """A fresh connection has listed nothing before the run: the SDK lists the tools at the
    start of the agent's turn, and tools.json gets them as the model got them (with the
    agent's own tool), without a listing of the recorder's. A second run, which starts with
    the tools known, leaves tools.json the same."""
    def script() -> ScriptedModel:
        return model(tools_step(call("add", {"a": 2, "b": 3}, "call_add")), final("5"))

    async def main() -> None:
        async with calc() as server:  # the same run without a recorder, for its listings
            listings = count_listings(server)
            plain = Agent(name="Calculator", tools=[shout], mcp_servers=[server],
                          model=script())
            assert (await Runner.run(plain, "2 + 3?")).final_output == "5"
            unrecorded = len(listings)
        async with calc() as server:
            listings = count_listings(server)
            first = script()
            agent = Agent(name="Calculator", tools=[shout], mcp_servers=[server], model=first)
            rec = Recorder(session_name="mcp-tools")
            result = await rec.run(agent, "2 + 3?")
            assert result.final_output == "5"
            assert len(listings) == unrecorded == 2  # one per model turn: none of ours
            given = given_tools(first)
            assert {t["name"] for t in given} == {"add", "pair", "fail", "crash", "hang",
                                                  "shout"}
            tools = json.loads((read_session(rec).directory / "tools.json").read_text())
            assert sorted(tools["tools"], key=lambda t: t["name"]) == \
                sorted(given, key=lambda t: t["name"])
            [add] = [t for t in tools["tools"] if t["name"] == "add"]
            assert add["description"] == "Add two integers."
            assert add["inputSchema"]["properties"].keys() == {"a", "b"}
            assert add["inputSchema"]["required"] == ["a", "b"]

            agent.model = second = model(final("still 5"))
            await rec.run(agent, "again?")
            assert len(listings) == 3
            again = json.loads((read_session(rec).directory / "tools.json").read_text())
            assert again == tools
            assert given_tools(second) == given
            first_turn, second_turn = read_turns(rec)
            assert [s["toolName"] for s in steps_of(first_turn, "agent_tool_end")] == ["add"]
            assert second_turn.complete and second_turn.text == "still 5"
            assert len(await rec.session.get_items()) == 4 + 2  # the two turns' items
            await rec.aclose()

    asyncio.run(main())


def test_tools_json_follows_the_agents_mcp_settings() -> None:
    """Server-prefixed names, strict schemas and a static tool filter: tools.json has the
    names and schemas the model had, and not the filtered-out tool."""
    async def main() -> None:
        async with calc(tool_filter=create_static_tool_filter(blocked_tool_names=["hang"]),
                        cache_tools_list=True) as server:
            scripted = model(final("ok"))
            agent = Agent(name="Strict", mcp_servers=[server], model=scripted,
                          mcp_config={"include_server_in_tool_names": True,
                                      "convert_schemas_to_strict": True})
            rec = Recorder(session_name="mcp-settings")
            await rec.run(agent, "hi")
            given = given_tools(scripted)
            assert {t["name"] for t in given} == {"mcp_calc__add", "mcp_calc__pair",
                                                  "mcp_calc__fail", "mcp_calc__crash"}
            assert given[0]["name"] == "mcp_calc__add"
            assert given[0]["inputSchema"]["additionalProperties"] is False  # strict
            tools = json.loads((read_session(rec).directory / "tools.json").read_text())
            assert tools == {"tools": given}
            await rec.aclose()

    asyncio.run(main())


@WAYS
def test_mcp_results_are_recorded_as_the_model_saw_them(way: str) -> None:
    """One text block and two: the SDK gives on_tool_end the MCP content as Python dicts,
    and the model a list of input_text items. The tree and the log hold that list as JSON
    (the store's function_call_output, which is also the next call's input)."""
    async def main() -> None:
        async with calc() as server:
            scripted = model(tools_step(call("add", {"a": 2, "b": 3}, "call_add"),
                                        call("pair", {"word": "hi"}, "call_pair")),
                             final("5, hi HI"))
            agent = Agent(name="Calculator", mcp_servers=[server], model=scripted)
            rec = Recorder(session_name=f"mcp-output-{way}")
            assert await run_way(way, rec, agent, "add and pair") == "5, hi HI"

            seen = store_outputs(await rec.session.get_items())
            assert seen == {"call_add": [{"type": "input_text", "text": "5"}],
                            "call_pair": [{"type": "input_text", "text": "hi"},
                                          {"type": "input_text", "text": "HI"}]}
            last = scripted.last_call
            assert last is not None
            sent = {i["call_id"]: i["output"] for i in last.input
                    if isinstance(i, dict) and i.get("type") == "function_call_output"}
            assert sent == seen  # the model's own input

            parts = tool_parts(read_session(rec).messages[-1])
            ends = tool_ends(rec)
            for call_id, name in (("call_add", "add"), ("call_pair", "pair")):
                text = value_text(seen[call_id])
                assert parts[call_id]["state"]["status"] == "completed"
                assert parts[call_id]["state"]["output"] == text
                assert ends[name]["result"] == text
                assert "status" not in ends[name]
            assert ends["add"]["result"] == '[{"type":"input_text","text":"5"}]'
            await rec.aclose()

    asyncio.run(main())


@WAYS
def test_an_mcp_error_result_is_recorded_as_a_failed_call(way: str) -> None:
    """``isError: true`` (a tool that raised on the server): the SDK hands the model the
    error's text as an ordinary output and the run goes on; the record says the call failed,
    with that text, beside a call of the same turn that succeeded."""
    async def main() -> None:
        async with calc() as server:
            agent = Agent(name="Calculator", mcp_servers=[server], model=model(
                tools_step(call("fail", {"reason": "no such city"}, "call_fail"),
                           call("crash", {}, "call_crash"),
                           call("add", {"a": 1, "b": 1}, "call_add")),
                final("sorry")))
            rec = Recorder(session_name=f"mcp-error-{way}")
            assert await run_way(way, rec, agent, "try") == "sorry"

            seen = store_outputs(await rec.session.get_items())
            assert seen["call_fail"] == [{"type": "input_text",
                                          "text": "Error executing tool fail: no such city"}]
            assert seen["call_crash"] == [{"type": "input_text",
                                           "text": "Error executing tool crash"}]
            parts = tool_parts(read_session(rec).messages[-1])
            ends = tool_ends(rec)
            for call_id, name, error in (
                    ("call_fail", "fail", "MCPToolError: Error executing tool fail: no such city"),
                    ("call_crash", "crash", "MCPToolError: Error executing tool crash")):
                state = parts[call_id]["state"]
                assert state["status"] == "error" and state["error"] == error
                assert "output" not in state
                assert ends[name]["result"] == value_text(seen[call_id])
                assert ends[name]["status"] == "error" and ends[name]["error"] == error
            assert parts["call_add"]["state"]["status"] == "completed"
            assert "status" not in ends["add"]
            session = read_session(rec)
            assert session.info["status"] == "completed"
            assert read_turns(rec)[-1].text == "sorry"
            await rec.aclose()

    asyncio.run(main())


def test_a_servers_own_custom_data_extractor_still_runs() -> None:
    """The recorder learns of ``isError`` through the server's custom_data_extractor, which
    it wraps: the user's extractor is still called, and its data reaches the output item."""
    seen: list[tuple[str, bool | None]] = []

    def extractor(context: Any) -> dict[str, Any]:
        seen.append((context.tool_name, context.is_error))
        return {"flagged": bool(context.is_error)}

    async def main() -> None:
        async with calc(custom_data_extractor=extractor) as server:
            agent = Agent(name="Calculator", mcp_servers=[server], model=model(
                tools_step(call("fail", {"reason": "nope"}, "call_fail")), final("done")))
            rec = Recorder(session_name="mcp-extractor")
            result = await rec.run(agent, "go")
            [output] = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
            assert output.custom_data == {"flagged": True}
            assert seen == [("fail", True)]
            state = tool_parts(read_session(rec).messages[-1])["call_fail"]["state"]
            assert state["error"] == "MCPToolError: Error executing tool fail: nope"
            assert tool_ends(rec)["fail"]["error"] == state["error"]
            assert store_outputs(await rec.session.get_items())["call_fail"] == \
                [{"type": "input_text", "text": "Error executing tool fail: nope"}]
            await rec.aclose()

    asyncio.run(main())


async def killed_mid_call(marker: Path, run: Callable[[Agent[Any]], Awaitable[Any]],
                          cache_tools_list: bool) -> tuple[str, list[Any]]:
    """Run an agent whose one MCP call never returns, kill the server during that call,
    and return how the run ended (``raised Type: message`` or ``output ...``) and the
    run's items (those of the result, or what a failed run left: none)."""
    async with calc(cache_tools_list=cache_tools_list) as server:
        agent = Agent(name="Waiter", mcp_servers=[server], model=model(
            tools_step(call("hang", {"marker": str(marker)}, "call_hang")), final("gave up")))
        task = asyncio.create_task(run(agent))
        pid = int(await await_until(lambda: marker.read_text(), WAIT))
        os.kill(pid, signal.SIGKILL)
        try:
            result = await task
        except Exception as error:
            return f"raised {type(error).__name__}: {error}", []
        return f"output {result.final_output}", [i.raw_item for i in result.new_items
                                                  if isinstance(i, ToolCallOutputItem)]


@pytest.mark.parametrize("cache_tools_list", [False, True])
def test_a_server_killed_during_a_call(tmp_path: Path, cache_tools_list: bool) -> None:
    """The server dies while the model waits for a tool: the SDK gives the model its
    generic tool error, then, listing the tools for the next turn, fails the run with the
    closed connection (with ``cache_tools_list`` it needs no listing and the run ends
    normally). Recorded or not, the run ends the same way; the record has the call failed
    with the SDK's exception and the run's own end."""
    async def main() -> None:
        plain = await killed_mid_call(
            tmp_path / "plain.pid", lambda agent: Runner.run(agent, "wait"), cache_tools_list)
        rec = Recorder(session_name=f"mcp-killed-{cache_tools_list}")
        recorded = await killed_mid_call(
            tmp_path / "recorded.pid", lambda agent: rec.run(agent, "wait"), cache_tools_list)
        assert recorded == plain
        ended, _ = recorded
        if cache_tools_list:
            assert ended == "output gave up"
        else:
            assert ended == "raised MCPError: Connection closed"

        assert store_outputs(await rec.session.get_items()) == {"call_hang": CLOSED_TEXT}
        session = read_session(rec)
        state = tool_parts(session.messages[-1])["call_hang"]["state"]
        assert state["status"] == "error"
        assert state["error"] == "MCPError: Connection closed"
        [turn] = read_turns(rec)
        end = tool_ends(rec)["hang"]
        assert end["result"] == CLOSED_TEXT
        assert end["status"] == "error" and end["error"] == "MCPError: Connection closed"
        assert turn.complete
        if cache_tools_list:
            assert session.info["status"] == "completed" and turn.text == "gave up"
        else:
            assert session.info["status"] == "error"
            assert session.info["error"]["message"] == "Connection closed"
            assert turn.text == "[run failed] MCPError: Connection closed"
            [error] = [p for p in session.messages[-1].parts if p["type"] == "error"]
            assert error["detail"].startswith("MCPError: Connection closed")
        assert rec.errors == 0
        await rec.aclose()

    asyncio.run(main())
