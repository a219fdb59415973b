"""A Recorder's lifecycle: closing, one run at a time, cancellation, run_sync, hooks.

Each test reads what was recorded (tree, log, store) with the project's readers.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import threading
from typing import Any

import pytest
from agents import Agent, RunHooks, Runner, default_tool_error_function, function_tool
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner
from harness import REPO, run
from scripted import (
    blocking_agent,
    call,
    final,
    model,
    read_session,
    read_turns,
    store_items,
    tools_step,
)

from sessiontape import Recorder
from sessiontape.recorder import RecorderBusyError, RecorderClosedError
from sessiontape.runner import install
from sessiontape.sdk_compat import (
    FORMATTER_SEES_TOOL_EXCEPTIONS,
    SDK_VERSION,
    formatter_misses_exceptions,
    missing,
)
from sessiontape.storage.skillet.item_store import ItemStore


def answering(text: str, name: str = "A") -> Agent[Any]:
    return Agent(name=name, model=model(final(text)))


def user_texts(rec: Recorder) -> list[tuple[Any, str, bool]]:
    return [(turn.user_input, turn.text, turn.complete) for turn in read_turns(rec)]


class CountingHooks(RunHooks[Any]):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        self.calls.append(f"start {agent.name}")

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        self.calls.append(f"end {agent.name}")


# ------------------------------------------------------------------------------ closing


def test_async_with_writes_everything_and_a_closed_recorder_refuses_use() -> None:
    async def main() -> Recorder:
        async with Recorder(session_name="closing") as rec:
            await rec.run(answering("one"), "first")
        assert rec.closed
        with pytest.raises(RecorderClosedError, match="closing"):
            await rec.run(answering("two"), "second")
        with pytest.raises(RecorderClosedError):
            await Runner.run(answering("two"), "second", hooks=rec.hooks, session=rec.session)
        with pytest.raises(RecorderClosedError):
            rec.run_streamed(answering("two"), "second")
        with pytest.raises(RecorderClosedError):
            await rec.session.get_items()
        await rec.aclose()  # again: nothing happens
        return rec

    rec = asyncio.run(main())
    assert user_texts(rec) == [("first", "one", True)]
    assert read_session(rec).info["status"] == "completed"
    # a new recorder continues the conversation
    again = Recorder(session_name="closing")
    items = asyncio.run(store_items(again))
    assert [item.get("role") for item in items] == ["user", "assistant"]


def test_aclose_waits_for_the_run_going_on() -> None:
    async def main() -> tuple[Recorder, str]:
        rec = Recorder(session_name="waiting")
        agent, started = blocking_agent("call_wait")
        run = asyncio.ensure_future(rec.run(agent, "slow"))
        await started.wait()
        closing = asyncio.ensure_future(rec.aclose())
        await asyncio.sleep(0.05)
        assert not closing.done()  # the run still holds the turn
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await closing
        return rec, read_session(rec).info["status"]

    rec, status = asyncio.run(main())
    assert rec.closed and status == "error"
    [turn] = read_turns(rec)
    assert turn.complete and turn.text.startswith("[run failed]")


THOUSAND = textwrap.dedent("""
    import asyncio, gc, json, os, sys, threading
    sys.path.insert(0, "tests")
    from agents import Agent
    from scripted import final, model
    from sessiontape import Recorder

    def descriptors():
        return len(os.listdir("/proc/self/fd"))

    def answering(text):
        return Agent(name="A", model=model(final(text)))

    async def main():
        recorders = []
        for number in range(1000):
            rec = Recorder(session_name=f"many-{number}")
            if number % 10 == 0:
                await rec.run(answering(f"answer {number}"), f"prompt {number}")
            recorders.append(rec)
        busiest = threading.active_count()
        for rec in recorders:
            await rec.aclose()
        return busiest

    # What a process starts once (the writer thread, the SDK's imports) exists before
    # the baseline; asyncio.run ends its loop's executor threads before it returns.
    warm = Recorder(session_name="warm-up")
    asyncio.run(warm.run(answering("warm"), "warm"))
    warm.close()
    gc.collect()
    threads, fds = threading.active_count(), descriptors()
    busiest = asyncio.run(main())
    for _ in range(300):  # the store's worker thread ends just after its close
        if threading.active_count() == threads:
            break
        threading.Event().wait(0.01)
    gc.collect()
    print(json.dumps({"threads": threading.active_count() - threads,
                      "descriptors": descriptors() - fds, "busiest": busiest - threads}))
""")


@pytest.mark.slow
def test_a_thousand_recorders_opened_and_closed_leave_no_threads_or_descriptors() -> None:
    """1 000 recorders of one store in a process of their own (every tenth with a run):
    they share one connection, and once all are closed the process's threads and file
    descriptors are back to where they were."""
    done = run([sys.executable, "-c", THOUSAND], cwd=REPO)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.splitlines()[-1])
    assert (figures["threads"], figures["descriptors"]) == (0, 0)
    # the store's worker and the loop's executor, not a thread per recorder
    assert figures["busiest"] <= 1 + min(32, (os.cpu_count() or 1) + 4)
    assert user_texts(Recorder(session_name="many-990")) == [("prompt 990", "answer 990", True)]


def test_recorders_of_one_store_share_it_until_the_last_is_closed() -> None:
    async def main() -> None:
        first, second = Recorder(session_name="a"), Recorder(session_name="b")
        assert first.store is second.store and first.store.shares == 2
        await first.run(answering("one"), "first")
        await first.aclose()
        assert second.store.shares == 1
        await second.run(answering("two"), "second")  # the store is still open for it
        await second.aclose()
        assert second.store.shares == 0
        third = Recorder(session_name="a")
        assert third.store is not first.store  # a fresh store once all were released
        assert [i.get("role") for i in await third.session.get_items()] == ["user", "assistant"]
        await third.aclose()

    asyncio.run(main())


def test_a_store_given_by_the_caller_stays_open() -> None:
    async def main() -> None:
        store = ItemStore()
        async with Recorder(session_name="given", store=store) as rec:
            await rec.run(answering("one"), "first")
        assert len(await store.session(rec.user_id, "given").get_items()) == 2
        await store.close()

    asyncio.run(main())


# ------------------------------------------------------------------------------ one run at a time


def test_concurrent_runs_take_turns_and_each_sees_the_history_before_it() -> None:
    second_model = model(final("two"))

    async def main() -> Recorder:
        rec = Recorder(session_name="turns")
        first = Agent(name="First", model=model(final("one")))
        second = Agent(name="Second", model=second_model)
        results = await asyncio.gather(
            rec.run(first, "question one"),
            Runner.run(second, "question two", hooks=rec.hooks, session=rec.session))
        assert [r.final_output for r in results] == ["one", "two"]
        return rec

    rec = asyncio.run(main())
    assert user_texts(rec) == [("question one", "one", True), ("question two", "two", True)]
    assert rec.errors == 0
    seen = second_model.calls[0].input  # the second run waited: it saw the first turn
    assert [item.get("content") for item in seen if item.get("role") == "user"] == [
        "question one", "question two"]
    session = read_session(rec)
    assert [m.info["user"]["prompt"]["task"] for m in session.messages] == [
        "question one", "question two"]


def test_a_streamed_run_while_another_is_going_on_is_refused_clearly() -> None:
    async def main() -> Recorder:
        rec = Recorder(session_name="busy")
        agent, started = blocking_agent("call_busy")
        run = asyncio.ensure_future(rec.run(agent, "slow"))
        await started.wait()
        with pytest.raises(RecorderBusyError, match="already running"):
            rec.run_streamed(answering("two"), "second")
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        streamed = rec.run_streamed(answering("three"), "third")  # its turn now
        async for _ in streamed.stream_events():
            pass
        await rec.run(answering("four"), "fourth")  # the streamed run gave the turn back
        return rec

    rec = asyncio.run(main())
    turns = user_texts(rec)
    assert [t[0] for t in turns] == ["slow", "third", "fourth"]
    assert turns[1:] == [("third", "three", True), ("fourth", "four", True)]


# ------------------------------------------------------------------------------ cancellation


def test_a_timeout_during_the_run_reaches_the_caller_after_it_is_recorded() -> None:
    async def main() -> Recorder:
        rec = Recorder(session_name="timeout")
        agent, _ = blocking_agent("call_timeout")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(rec.run(agent, "wait"), 0.2)
        return rec

    rec = asyncio.run(main())
    info = read_session(rec).info
    assert info["status"] == "error" and info["error"]["code"] == "USER_STOPPED"
    [turn] = read_turns(rec)
    assert turn.complete and "cancelled" in turn.text


class SlowFlushRecorder(Recorder):
    """A recorder whose end-of-run wait never ends (after it wrote everything)."""

    flushing: asyncio.Event

    async def flush(self) -> None:
        await super().flush()
        if self._active is not None and not self.closed:
            self.flushing.set()
            await asyncio.sleep(3600)


def test_a_cancellation_while_the_end_of_the_run_is_written_is_not_swallowed() -> None:
    async def main() -> SlowFlushRecorder:
        rec = SlowFlushRecorder(session_name="late-cancel")
        rec.flushing = asyncio.Event()
        run = asyncio.ensure_future(rec.run(answering("done"), "hello"))
        await rec.flushing.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return rec

    rec = asyncio.run(main())
    assert user_texts(rec) == [("hello", "done", True)]  # the run itself had ended


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is Python 3.11+")
def test_a_task_group_that_fails_cancels_the_recorded_run_and_says_why() -> None:
    async def fails_soon(started: asyncio.Event) -> None:
        await started.wait()
        raise ValueError("a sibling task failed")

    async def main() -> Recorder:
        rec = Recorder(session_name="group")
        agent, started = blocking_agent("call_group")
        with pytest.raises(BaseExceptionGroup) as raised:  # noqa: F821 (3.11+)
            async with asyncio.TaskGroup() as group:  # type: ignore[attr-defined]
                group.create_task(rec.run(agent, "in a group"))
                group.create_task(fails_soon(started))
        assert [type(e) for e in raised.value.exceptions] == [ValueError]
        return rec

    rec = asyncio.run(main())
    assert read_session(rec).info["error"]["code"] == "USER_STOPPED"
    [turn] = read_turns(rec)
    assert turn.complete and turn.text.startswith("[run failed]")


# ------------------------------------------------------------------------------ run_sync


@pytest.mark.parametrize("entry", ["Runner.run_sync", "rec.run_sync"])
def test_run_sync_records_the_whole_turn(entry: str) -> None:
    rec = Recorder(session_name=f"sync-{entry}")

    @function_tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    agent = Agent(name="A", tools=[add], model=model(
        tools_step(call("add", {"a": 1, "b": 2})), final("three")))
    if entry == "rec.run_sync":
        result = rec.run_sync(agent, "1+2?")
    else:
        result = Runner.run_sync(agent, "1+2?", hooks=rec.hooks, session=rec.session)
    assert result.final_output == "three"
    rec.close()
    assert rec.errors == 0
    [turn] = read_turns(rec)
    assert (turn.user_input, turn.text, turn.complete) == ("1+2?", "three", True)
    assert [s["type"] for s in turn.steps if s["type"].startswith("agent_tool")] == [
        "agent_tool_start", "agent_tool_end"]
    session = read_session(rec)
    assert session.info["status"] == "completed"
    [message] = session.messages
    assert [p["state"]["output"] for p in message.parts if p["type"] == "tool"] == ["3"]
    items = asyncio.run(store_items(Recorder(session_name=f"sync-{entry}")))
    assert [i.get("type", "message") for i in items] == [
        "message", "function_call", "function_call_output", "message"]


# ------------------------------------------------------------------------------ hooks


def test_the_users_hooks_chained_twice_are_called_and_recorded_once() -> None:
    mine = CountingHooks()

    async def main() -> Recorder:
        rec = Recorder(session_name="chained")
        await rec.run(answering("one"), "first", hooks=rec.hooks_with(mine))
        return rec

    rec = asyncio.run(main())
    assert mine.calls == ["start A", "end A"]
    lines = [json.loads(text) for text in rec.log_path.read_text("utf-8").splitlines()]
    assert [line["stepResult"]["type"] for line in lines if line["kind"] == "step"] == [
        "agent_start", "text", "agent_end"]
    assert rec.errors == 0


def test_hooks_of_two_recorders_in_one_run_are_refused() -> None:
    async def main() -> None:
        first, second = Recorder(session_name="x"), Recorder(session_name="y")
        with pytest.raises(ValueError, match="two Recorders"):
            await first.run(answering("one"), "first", hooks=second.hooks)

    asyncio.run(main())


def test_a_run_sessiontape_did_not_start_is_a_clear_logged_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """If something replaces the SDK's default runner after sessiontape, rec.hooks are
    called for a run that was never begun: a warning says so, nothing is half-written."""
    caplog.set_level("WARNING", logger="sessiontape")
    rec = Recorder(session_name="displaced")
    ours = get_default_agent_runner()
    set_default_agent_runner(AgentRunner())
    try:
        result = asyncio.run(Runner.run(answering("fine"), "hello", hooks=rec.hooks))
    finally:
        set_default_agent_runner(ours)
    assert result.final_output == "fine"  # the run itself is untouched
    assert rec.errors >= 1
    assert any("did not start" in r.getMessage() for r in caplog.records)
    assert not rec.log_path.exists() and rec.session_dir is None
    install()


def test_sdk_private_details_are_all_present() -> None:
    """sessiontape.sdk_compat holds every private SDK name it relies on; an SDK upgrade
    that moves one fails here."""
    assert missing() == [], f"openai-agents {SDK_VERSION}"


def test_what_differs_between_sdk_releases_is_told_apart() -> None:
    """sdk_compat tells the supported releases apart by what they do: from 0.24 the SDK
    gives ``tool_error_formatter`` the exception of a tool on its default failure function;
    before, such a tool's invoker is watched instead. A tool with a failure function of its
    own is watched by neither (docs/recording.md, "Limits")."""

    @function_tool
    def plain() -> str:
        """Fail."""
        raise ValueError("plain")

    @function_tool(failure_error_function=default_tool_error_function)
    def own() -> str:
        """Fail."""
        raise ValueError("own")

    since_024 = tuple(int(part) for part in SDK_VERSION.split(".")[:2]) >= (0, 24)
    assert since_024 == FORMATTER_SEES_TOOL_EXCEPTIONS, SDK_VERSION
    assert formatter_misses_exceptions(plain) != since_024, SDK_VERSION
    assert not formatter_misses_exceptions(own)


def test_sinks_are_set_up_off_the_event_loop() -> None:
    """The first event of a run sets up the layouts (SQLite link, git, directories) on the
    writer thread: the event loop's thread opens no database and starts no process."""
    seen: list[tuple[str, str]] = []
    loop_thread: list[int] = []

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if loop_thread and threading.get_ident() == loop_thread[0] and event in (
                "sqlite3.connect", "subprocess.Popen"):
            seen.append((event, str(args[0])[:80]))

    sys.addaudithook(audit)

    async def main() -> Recorder:
        loop_thread.append(threading.get_ident())
        rec = Recorder(session_name="off-loop", project_root=os.getcwd())
        await rec.run(Agent(name="A", tools=[], model=model(final("done"))), "hello")
        loop_thread.clear()
        return rec

    rec = asyncio.run(main())
    assert seen == []
    assert read_session(rec).info["status"] == "completed"

