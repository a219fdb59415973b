"""Hostile tool arguments and outputs through real recorded runs, and odd values through
the JSON writer.

A function tool's output is recorded as the string the model saw (the SDK's
``str()`` of the returned value), in full (no cap), in all three layouts.
Arguments that are not JSON are kept as the raw string. Whatever a tool
returns, every file written parses and every layout reads back.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, default_tool_error_function, function_tool
from agents.exceptions import UserError
from harness import as_doubles
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from scripted import (
    call,
    final,
    model,
    read_session,
    read_turns,
    run_agent,
    steps_of,
    store_items,
    tool_parts,
    tools_step,
)

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import read_json_object, scan_sessions
from sessiontape.storage.json_style import (
    CIRCULAR,
    MAX_DEPTH,
    TOO_DEEP,
    dumps_compact,
    dumps_pretty,
    js_values,
    loads,
)
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.log_reader import SessionLogReader


class Unprintable:
    """An object whose ``str`` and ``repr`` both raise."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class UnprintableError(Exception):
    """An exception whose message cannot be printed."""

    def __str__(self) -> str:
        raise RuntimeError("no str")


class Answer(BaseModel):
    """A structured final output that cannot be printed with ``str``."""

    x: int

    def __str__(self) -> str:
        raise RuntimeError("no str")


def nested(depth: int) -> list[Any]:
    """``[[[...]]]`` with ``depth`` lists."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _cycle() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


OUTPUTS = {
    "bytes": b"\xff\x00abc",
    "lone-surrogate": "a\ud800b",
    "surrogateescape": b"caf\xe9".decode("utf-8", "surrogateescape"),
    "nul-and-escapes": "a\0b\x1b[2J\r\n",
    "object": object(),
    "cycle": _cycle(),
    "nan-infinity": {"nan": math.nan, "inf": math.inf, "-inf": -math.inf},
    "set": {1, 2, 3},
    "datetime": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
    "tuple-keys": {(1, 2): "pair", None: "null"},
    "deep": nested(400),
    "big-int": 2**100,
    "empty": "",
}


def written_files() -> list[Path]:
    """Every file the recorder may have written (SQLite's own files aside)."""
    roots = [SkilletPaths.resolve().state, Path(os.environ["XDG_DATA_HOME"])]
    return [p for root in roots if root.exists() for p in root.rglob("*")
            if p.is_file() and not p.name.startswith(".agent_sessions.sqlite")]


def assert_everything_reads_back() -> None:
    """Every JSON file parses as an object, every log line is whole, no session is skipped."""
    files = written_files()
    assert files
    for path in files:
        if path.suffix == ".json":
            read_json_object(path)
        elif path.suffix == ".jsonl":
            reader = SessionLogReader(path)
            assert reader.entries() and reader.problems == []
    assert scan_sessions(Path(os.environ["XDG_DATA_HOME"])).problems == []


def record_tool(result: Any, *, arguments: dict[str, Any] | str = "{}",
                streamed: bool = False) -> tuple[Recorder, Any]:
    """One recorded run whose tool ``give`` returns ``result`` (call id ``c1``)."""

    @function_tool
    def give() -> str:
        """Return the hostile value."""
        return result

    rec = Recorder("ann@example.com", "hostile")
    agent = Agent(name="A", tools=[give],
                  model=model(tools_step(call("give", arguments, "c1")), final("done")))

    async def main() -> Any:
        output = await run_agent(rec, agent, "go", streamed)
        await rec.flush()
        return output

    return rec, asyncio.run(main())


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("value", list(OUTPUTS.values()), ids=list(OUTPUTS))
def test_any_tool_output_is_recorded_as_the_model_saw_it(value: Any, streamed: bool) -> None:
    rec, output = record_tool(value, streamed=streamed)
    assert output == "done" and rec.errors == 0
    items = asyncio.run(store_items(rec))
    seen = next(i["output"] for i in items if i.get("type") == "function_call_output")
    assert seen == str(value)  # the SDK's text for the model
    tool = tool_parts(read_session(rec).messages[0])["c1"]
    assert tool["state"]["status"] == "completed" and tool["state"]["output"] == seen
    [turn] = read_turns(rec)
    assert steps_of(turn, "agent_tool_end")[0]["result"] == seen
    assert_everything_reads_back()


BAD_ARGUMENTS = [
    pytest.param("{not json", id="garbage"),
    pytest.param('{"a": 1', id="truncated"),
    pytest.param('{"a": NaN}', id="nan-literal"),
    pytest.param("a\0b\x1b", id="nul-and-escape"),
    pytest.param("[" * 300 + "]" * 300, id="deep"),
]


@pytest.mark.parametrize("arguments", BAD_ARGUMENTS)
def test_arguments_that_are_not_json_objects_are_kept(arguments: str) -> None:
    """The log keeps the raw string; the tool part keeps it too (parsed when it is JSON,
    cut with ``[Too deep]`` beyond 200 levels of the part file)."""
    rec, output = record_tool("unused", arguments=arguments)
    assert output == "done" and rec.errors == 0
    tool = tool_parts(read_session(rec).messages[0])["c1"]
    try:
        parsed = loads(arguments)
    except ValueError:
        assert tool["state"]["input"] == arguments
    else:  # the input is two levels down in the part file: {"state": {"input": ...}}
        assert tool["state"]["input"] == js_values({"state": {"input": parsed}})["state"]["input"]
        assert TOO_DEEP in json.dumps(tool["state"]["input"])
    [turn] = read_turns(rec)
    assert steps_of(turn, "agent_tool_start")[0]["toolArgumentsStr"] == arguments
    assert_everything_reads_back()


def test_an_unprintable_tool_output_fails_the_run_and_is_recorded() -> None:
    """The SDK itself cannot make the model's text (``str`` raises): the run fails with its
    UserError, and the recording says so in every layout."""
    with pytest.raises(UserError):
        record_tool(Unprintable())
    rec = Recorder("ann@example.com", "hostile")
    session = read_session(rec)
    assert session.info["status"] == "error"
    assert tool_parts(session.messages[0])["c1"]["state"]["status"] == "error"
    [turn] = read_turns(rec)
    assert turn.complete and turn.final["text"].startswith("[run failed] UserError")
    assert_everything_reads_back()


def test_unprintable_exceptions_and_final_outputs_do_not_break_the_recording() -> None:
    """``str`` raising on a tool's exception or on the final output: the exception is
    recorded with its ``repr``, the structured output as JSON (which needs no ``str``), and
    the run returns what it would have returned. (Before 0.23 the SDK's own text for the
    model holds ``str(exception)``: the SDK fails the run, and that is recorded.)"""

    @function_tool
    def boom() -> str:
        """Raise an exception that cannot be printed."""
        raise UnprintableError()

    rec = Recorder("ann@example.com", "unprintable")
    agent = Agent(name="A", tools=[boom], output_type=Answer,
                  model=model(tools_step(call("boom", {}, "c1")), final('{"x": 7}')))

    async def main() -> Any:
        try:
            return await run_agent(rec, agent, "go", streamed=False)
        finally:
            await rec.flush()

    try:
        default_tool_error_function(None, UnprintableError())
    except RuntimeError:  # the SDK cannot make the model's text
        with pytest.raises(UserError, match="Error running tool boom: no str"):
            asyncio.run(main())
        error = "UserError: Error running tool boom: no str"
        final_text = f"[run failed] {error}"
    else:
        assert asyncio.run(main()) == Answer(x=7)
        error, final_text = "UnprintableError: UnprintableError()", '{"x":7}'
    assert rec.errors == 0
    tool = tool_parts(read_session(rec).messages[0])["c1"]
    assert tool["state"] == {**tool["state"], "status": "error", "error": error}
    [turn] = read_turns(rec)
    assert turn.complete and turn.final == {"text": final_text}


@pytest.mark.slow
def test_a_100_mb_output_is_recorded_whole() -> None:
    """No cap: the whole output in the tool part, the log line and the store row (about 4 s
    and under 1 GB of peak memory here: docs/performance.md)."""
    big = "x" * 100_000_000
    rec, output = record_tool(big)
    assert output == "done" and rec.errors == 0
    tool = tool_parts(read_session(rec).messages[0])["c1"]
    assert tool["state"]["output"] == big
    [turn] = read_turns(rec)
    assert steps_of(turn, "agent_tool_end")[0]["result"] == big
    items = asyncio.run(store_items(rec))
    assert items[2] == {"call_id": "c1", "output": big, "type": "function_call_output"}
    assert rec.log_path.stat().st_size > 100_000_000


# -- the JSON writer with any value ------------------------------------------------------

JSON_SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                | st.floats() | st.text(alphabet=st.characters()))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(alphabet=st.characters(), max_size=8), inner, max_size=4),
    max_leaves=25)


def as_javascript(value: Any) -> Any:
    """What JSON.parse(JSON.stringify(value)) gives, computed independently."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return value
    if isinstance(value, dict):
        return {k: as_javascript(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_javascript(v) for v in value]
    return value


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_json_values_round_trip(value: Any) -> None:
    """Lone surrogates, NaN and infinities included: written bytes read back equal."""
    for dumps in (dumps_compact, dumps_pretty):
        written = dumps(value)
        assert as_doubles(loads(written)) == as_doubles(as_javascript(value))
        assert as_doubles(json.loads(written)) == as_doubles(as_javascript(value))  # any reader
    assert b"\n" not in dumps_compact(value) and not dumps_pretty(value).endswith(b"\n")


ODD_SCALARS = (JSON_SCALARS | st.binary(max_size=8) | st.integers()
               | st.datetimes() | st.builds(object) | st.builds(Unprintable)
               | st.frozensets(st.integers(), max_size=3))
ODD_KEYS = (st.text(max_size=4) | st.integers() | st.floats() | st.booleans() | st.none()
            | st.tuples(st.integers()) | st.datetimes())
ODD_VALUES = st.recursive(
    ODD_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(ODD_KEYS, inner, max_size=3),
    max_leaves=15)


@settings(max_examples=200, deadline=None)
@given(ODD_VALUES, st.booleans())
def test_any_python_value_is_written_as_json_that_reads_back(value: Any,
                                                             cyclic: bool) -> None:
    """Bytes, sets, datetimes, objects, unprintable objects, odd keys, big integers and
    cycles: never an error, always a JSON document."""
    if cyclic:
        value = [value]
        value.append(value)
    for dumps in (dumps_compact, dumps_pretty):
        parsed = loads(dumps(value))
        if cyclic:
            assert parsed[1] == CIRCULAR


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, 5_000])
def test_deep_nesting_is_cut_not_fatal(depth: int) -> None:
    for dumps in (dumps_compact, dumps_pretty):
        parsed = loads(dumps({"a": nested(depth)}))
        levels = 0
        while isinstance(parsed, (list, dict)) and parsed:
            parsed = parsed["a"] if isinstance(parsed, dict) else parsed[0]
            levels += 1
        assert levels == (depth if depth < MAX_DEPTH else MAX_DEPTH)
        assert parsed == ([] if depth < MAX_DEPTH else TOO_DEEP)
