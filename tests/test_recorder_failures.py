"""The Recorder when runs fail, while they run, and when recording itself fails."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from agents import Agent, MaxTurnsExceeded, function_tool
from agents.testing import ModelStep
from scripted import (
    await_until,
    blocking_agent,
    call,
    final,
    model,
    parts,
    read_session,
    read_turns,
    run_agent,
    store_items,
    tool_parts,
    tools_step,
    usage,
)

from sessiontape import Recorder, RecorderError
from sessiontape.storage.agentuse.sink import AgentUseSink
from sessiontape.storage.skillet.log_reader import SessionLogReader
from sessiontape.storage.skillet.sink import SkilletLogSink

STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def assert_failed_turn(rec: Recorder, code: str, message: str, error_type: str) -> dict[str, Any]:
    """The session, its last exchange and the log's last turn all say the run failed."""
    session = read_session(rec)
    assert session.info["status"] == "error"
    error = session.info["error"]
    assert (error["code"], error["message"]) == (code, message)
    assert isinstance(error["time"], int) and error["time"] == session.info["time"]["updated"]
    msg = session.messages[-1]
    assert "completed" not in msg.info["time"]
    assert msg.info["assistant"]["error"] == {"message": message, "type": error_type}
    turn = read_turns(rec)[-1]
    assert turn.complete  # closed by a final_result...
    assert turn.final["text"] == f"[run failed] {error_type}: {message}"
    raw = SessionLogReader(rec.log_path).entries()[-1].data  # ...that carries the error
    assert raw["kind"] == "final_result"
    assert raw["error"] == {"code": code, "message": message, "type": error_type}
    assert raw["model"] == "scripted/gpt-4.1"
    return {"session": session, "message": msg, "turn": turn}


@STREAMED
def test_a_model_error_fails_the_session_and_propagates(streamed: bool) -> None:
    error = RuntimeError("the model is down")
    agent = Agent(name="A", tools=[add], model=model(
        tools_step(call("add", {"a": 1, "b": 1}, "c_before"), u=usage(10, 2)),
        ModelStep(error=error)))
    rec = Recorder(session_name="model-error")
    with pytest.raises(RuntimeError) as raised:
        asyncio.run(run_agent(rec, agent, "hi", streamed))
    assert raised.value is error
    found = assert_failed_turn(rec, "EXECUTION_ERROR", "the model is down", "RuntimeError")
    msg = found["message"]
    assert msg.info["assistant"]["tokens"]["input"] == 10  # the call that did happen
    assert tool_parts(msg)["c_before"]["state"]["status"] == "completed"
    assert rec.errors == 0


@STREAMED
def test_max_turns_exceeded(streamed: bool) -> None:
    agent = Agent(name="A", tools=[add], model=model(
        tools_step(call("add", {"a": 1, "b": 2}, "c_only")), final("never")))
    rec = Recorder(session_name="max-turns")
    with pytest.raises(MaxTurnsExceeded):
        asyncio.run(run_agent(rec, agent, "hi", streamed, max_turns=1))
    found = assert_failed_turn(rec, "EXECUTION_ERROR", "Max turns (1) exceeded",
                               "MaxTurnsExceeded")
    assert found["session"].info["config"]["maxSteps"] == 1
    assert tool_parts(found["message"])["c_only"]["state"]["output"] == "3"


@STREAMED
def test_cancellation_closes_open_tool_parts(streamed: bool) -> None:
    agent, started = blocking_agent("c_wait")
    rec = Recorder(session_name="cancelled")

    async def main() -> None:
        task = asyncio.ensure_future(run_agent(rec, agent, "hi", streamed))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    found = assert_failed_turn(rec, "USER_STOPPED", "the run was cancelled", "CancelledError")
    state = tool_parts(found["message"])["c_wait"]["state"]
    assert state["status"] == "error"
    assert state["error"] == "CancelledError: the run was cancelled"
    assert state["time"]["end"] >= state["time"]["start"]
    assert rec.errors == 0


@STREAMED
def test_the_next_run_after_a_failure_is_recorded_normally(streamed: bool) -> None:
    agent = Agent(name="A", model=model(ModelStep(error=RuntimeError("flaky")), final("fine")))
    rec = Recorder(session_name="recovers")

    async def main() -> None:
        with pytest.raises(RuntimeError):
            await run_agent(rec, agent, "one", streamed)
        assert await run_agent(rec, agent, "two", streamed) == "fine"

    asyncio.run(main())
    session = read_session(rec)
    assert session.info["status"] == "completed" and "error" not in session.info
    assert ["completed" in m.info["time"] for m in session.messages] == [False, True]
    assert [t.final["text"] for t in read_turns(rec)] == ["[run failed] RuntimeError: flaky",
                                                          "fine"]


def test_cancelling_a_streamed_result_is_a_stopped_run() -> None:
    agent, started = blocking_agent("c_stop")
    rec = Recorder(session_name="result-cancel")

    async def main() -> None:
        result = rec.run_streamed(agent, "hi")

        async def stop() -> None:
            await started.wait()
            result.cancel()  # the stream then ends normally, with no final output

        stopper = asyncio.ensure_future(stop())
        async for _ in result.stream_events():
            pass
        await stopper
        assert result.final_output is None

    asyncio.run(asyncio.wait_for(main(), 10))
    found = assert_failed_turn(rec, "USER_STOPPED", "the run was cancelled", "CancelledError")
    assert tool_parts(found["message"])["c_stop"]["state"]["status"] == "error"
    assert rec.errors == 0


def test_a_cancel_after_the_last_turn_is_a_completed_run() -> None:
    agent = Agent(name="A", model=model(final("all said")))
    rec = Recorder(session_name="late-cancel")

    async def main() -> None:
        result = rec.run_streamed(agent, "hi")
        async for event in result.stream_events():
            if getattr(event, "name", "") == "message_output_created":
                result.cancel(mode="after_turn")
        assert result.final_output == "all said"

    asyncio.run(main())
    assert read_session(rec).info["status"] == "completed"
    assert read_turns(rec)[0].final["text"] == "all said"


def test_an_abandoned_stream_records_how_the_run_really_ended() -> None:
    # The SDK lets a run go on when its consumer stops reading; so does the recording.
    agent = Agent(name="A", tools=[add], model=model(
        tools_step(call("add", {"a": 3, "b": 4}, "c_left")), final("seven")))
    rec = Recorder(session_name="abandoned")

    async def main() -> None:
        result = rec.run_streamed(agent, "3+4")
        async for event in result.stream_events():
            if event.type == "raw_response_event":
                break  # the generator is dropped here, and closed by the event loop
        # the tree's status and the log's last line are written one after the other
        await await_until(lambda: read_session(rec).info["status"] != "running"
                          and bool(read_turns(rec)) and read_turns(rec)[0].complete)
        assert result.final_output == "seven"

    asyncio.run(main())
    session = read_session(rec)
    assert session.info["status"] == "completed"
    assert tool_parts(session.messages[0])["c_left"]["state"]["output"] == "7"
    assert read_turns(rec)[0].final["text"] == "seven"
    assert rec.errors == 0


# -- live --------------------------------------------------------------------------------


@STREAMED
def test_files_are_written_while_the_run_goes_on(streamed: bool) -> None:
    release = asyncio.Event()

    @function_tool
    async def wait_for_release(note: str) -> str:
        """Waits until the test releases it."""
        await release.wait()
        return f"released {note}"

    agent = Agent(name="Live", tools=[wait_for_release], model=model(
        tools_step(call("wait_for_release", {"note": "n1"}, "c_live")), final("done")))
    rec = Recorder(session_name="live")

    def log_kinds() -> list[tuple[str, str | None]]:
        return [(e.kind, e.data.get("stepResult", {}).get("type"))
                for e in SessionLogReader(rec.log_path).entries()]

    def running_tool() -> dict[str, Any] | None:
        [msg] = read_session(rec).messages
        part = tool_parts(msg).get("c_live")
        return part if part and part["state"]["status"] == "running" else None

    async def main() -> None:
        task = asyncio.ensure_future(run_agent(rec, agent, "go", streamed))
        kinds = await await_until(
            lambda: ("step", "agent_tool_start") in log_kinds() and log_kinds())
        assert kinds[0] == ("user_message", None)
        assert ("final_result", None) not in kinds
        part = await await_until(running_tool)
        assert part["state"]["input"] == {"note": "n1"} and "end" not in part["state"]["time"]
        session = read_session(rec)
        assert session.info["status"] == "running"
        assert "completed" not in session.messages[0].info["time"]
        assert not task.done()
        release.set()
        assert await asyncio.wait_for(task, 5) == "done"

    asyncio.run(main())
    [msg] = read_session(rec).messages
    assert tool_parts(msg)["c_live"]["state"]["output"] == "released n1"
    assert read_turns(rec)[0].complete


# -- recording failures are harmless ------------------------------------------------------


def _broken(error: Exception) -> Any:
    def handle(self: Any, event: Any) -> None:
        raise error
    return handle


@STREAMED
@pytest.mark.parametrize("broken", [AgentUseSink, SkilletLogSink], ids=["agentuse", "skillet"])
def test_a_failing_sink_does_not_touch_the_run(streamed: bool, broken: type,
                                               monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sessiontape")
    monkeypatch.setattr(broken, "handle", _broken(OSError(28, "No space left on device")))
    agent = Agent(name="A", tools=[add], model=model(
        tools_step(call("add", {"a": 2, "b": 3}, "c_sink")), final("five")))
    rec = Recorder(session_name="broken-sink")

    async def main() -> list[Any]:
        assert await run_agent(rec, agent, "2+3", streamed) == "five"
        return await store_items(rec)

    items = asyncio.run(main())
    assert items[0] == {"role": "user", "content": "2+3"} and len(items) == 4
    assert rec.errors > 1  # every event failed in that sink...
    warnings = [r for r in caplog.records if r.name == "sessiontape"]
    assert len(warnings) == 1  # ...but only the first is logged
    assert "No space left on device" in warnings[0].getMessage()
    # the other layout is complete
    if broken is AgentUseSink:
        assert read_turns(rec)[0].final["text"] == "five"
    else:
        assert read_session(rec).info["status"] == "completed"
        assert not rec.log_path.exists()


@STREAMED
def test_strict_mode_raises_after_the_run(streamed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    failure = OSError(28, "No space left on device")
    monkeypatch.setattr(AgentUseSink, "handle", _broken(failure))
    scripted = model(tools_step(call("add", {"a": 2, "b": 3}, "c_strict")), final("five"))
    agent = Agent(name="A", tools=[add], model=scripted)
    rec = Recorder(session_name="strict", strict=True)

    async def main() -> list[Any]:
        with pytest.raises(RecorderError) as raised:
            await run_agent(rec, agent, "2+3", streamed)
        assert raised.value.__cause__ is failure
        return await store_items(rec)

    items = asyncio.run(main())
    # the run went to its end before the error was raised
    assert scripted.remaining_steps == 0
    assert items[-1]["content"][0]["text"] == "five"
    assert read_turns(rec)[0].final["text"] == "five"


def test_a_failing_hook_does_not_touch_the_run(monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    import sessiontape.hooks as hooks

    def bad_usage(*args: Any) -> Any:
        raise ValueError("bad usage object")

    caplog.set_level(logging.WARNING, logger="sessiontape")
    monkeypatch.setattr(hooks, "response_usage", bad_usage)
    agent = Agent(name="A", tools=[add], model=model(
        tools_step(call("add", {"a": 1, "b": 1}, "c_hook")), final("two")))
    rec = Recorder(session_name="bad-hook")
    assert asyncio.run(rec.run(agent, "1+1")).final_output == "two"
    assert rec.errors == 2  # one per model call
    assert len([r for r in caplog.records if r.name == "sessiontape"]) == 1
    session = read_session(rec)
    assert session.info["status"] == "completed"
    assert tool_parts(session.messages[0])["c_hook"]["state"]["output"] == "2"
    assert parts(session.messages[0], "step-finish") == []

    # strict: the response is read on the writer thread (no time on the event loop), so
    # its failure is raised after the run, as every writer-side error is
    strict = Recorder(session_name="bad-hook-strict", strict=True)
    agent = Agent(name="A", model=model(final("fine")))
    with pytest.raises(RecorderError, match="bad usage object") as raised:
        asyncio.run(strict.run(agent, "hi"))
    assert isinstance(raised.value.__cause__, ValueError)
    assert read_session(strict).info["status"] == "completed"


@STREAMED
def test_strict_mode_keeps_the_runs_own_exception(streamed: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SkilletLogSink, "handle", _broken(OSError(5, "I/O error")))
    error = RuntimeError("the model is down")
    agent = Agent(name="A", model=model(ModelStep(error=error)))
    rec = Recorder(session_name="strict-failed-run", strict=True)
    with pytest.raises(RuntimeError) as raised:
        asyncio.run(run_agent(rec, agent, "hi", streamed))
    assert raised.value is error
    assert rec.errors > 0
    assert read_session(rec).info["error"]["message"] == "the model is down"


def test_a_linked_directory_without_session_json_is_used_whatever_the_agent() -> None:
    """A process died after linking the conversation to its AgentUse directory and before
    writing session.json; the next run, by another agent, writes into that directory."""
    from sessiontape.storage.agentuse.reader import load_session, scan_sessions
    from sessiontape.storage.paths import SkilletPaths, project_key, sessions_root_for_key
    from sessiontape.storage.skillet.links import agentuse_dir_for

    linked = agentuse_dir_for(SkilletPaths.resolve().store_file, "u", "died",
                              sessions_root_for_key(project_key()), "First agent")
    rec = Recorder("u", "died")
    asyncio.run(rec.run(Agent(name="Second agent", model=model(final("ok"))), "hi"))
    assert rec.session_dir == linked
    assert [s.directory for s in scan_sessions(linked.parent).sessions] == [linked]
    session = load_session(linked)
    assert session.info["agent"]["name"] == "Second agent"
    assert [m.info["user"]["prompt"]["task"] for m in session.messages] == ["hi"]


def test_strict_mode_raises_a_hooks_own_error_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a hook does on the event loop and fails at is raised there in strict mode, and
    is what the caller gets; the run is recorded as failed with it."""
    from sessiontape.scope import RunScope

    def broken_model_of(self: Any, agent: Any) -> str:
        raise ValueError("no model name")

    monkeypatch.setattr(RunScope, "model_of", broken_model_of)
    strict = Recorder(session_name="hook-strict", strict=True)
    with pytest.raises(ValueError, match="no model name"):
        asyncio.run(strict.run(Agent(name="A", model=model(final("never seen"))), "hi"))
    assert read_session(strict).info["status"] == "error"
