"""The SDK integration point: a wrapper around the SDK's default agent runner.

``Runner.run``/``run_streamed`` delegate to the SDK's default runner, which
sessiontape replaces (once, on the first ``Recorder``) with
:class:`RecordingRunner`. It passes every call through unchanged unless

* the call's ``hooks`` are a recorder's :attr:`Recorder.hooks`: a recorded
  run of that conversation begins; or
* a recorded run is active in this context (a ``ContextVar``, which the SDK's
  tool tasks inherit) and the call comes from one of its open tool calls
  (``Agent.as_tool`` passes the parent's ``ToolContext``): a nested subagent
  run begins, with no wiring by the user, at any depth.

For a recorded run it adds the scope's hooks (after the user's own), a
``tool_error_formatter`` that reports tool exceptions (the SDK hides them
from hooks) and then defers to the user's formatter, and records how the
run ended, including exceptions and cancellation. A conversation's runs take
turns (:meth:`~sessiontape.recorder.Recorder.turn`): one at a time per
``Recorder``. ``run_sync`` goes through the same ``run``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from contextvars import ContextVar
from typing import Any, TypeGuard, cast

from agents import RunConfig, RunHooks
from agents.lifecycle import RunHooksBase
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner

from .describe import output_text_delta
from .hooks import RecorderHooks
from .scope import RunScope
from .sdk_compat import cancel_requested, run_sync_with, stored_exception
from .writer import WRITER

__all__ = ["RecordingRunner", "chain_hooks", "install"]

_ACTIVE: ContextVar[RunScope | None] = ContextVar("sessiontape_active_run", default=None)
_HOOK_NAMES = [name for name in vars(RunHooksBase) if name.startswith("on_")]


class _ChainedHooks(RunHooks[Any]):
    """Calls each of several ``RunHooks`` in turn (the user's first)."""

    def __init__(self, *hooks: RunHooks[Any]) -> None:
        self.hooks = hooks


def _chain(name: str) -> Any:
    async def call(self: _ChainedHooks, *args: Any, **kwargs: Any) -> None:
        # After a hook of the user's raised, the recorder's still hear of the event (the
        # record shows the call the run failed on); then the user's error goes on.
        failure: BaseException | None = None
        for hooks in self.hooks:
            if failure is not None and not isinstance(hooks, RecorderHooks):
                continue
            try:
                await getattr(hooks, name)(*args, **kwargs)
            except BaseException as exc:
                if failure is not None:
                    raise
                failure = exc
        if failure is not None:
            raise failure

    call.__name__ = name
    return call


for _name in _HOOK_NAMES:
    setattr(_ChainedHooks, _name, _chain(_name))


def _is_recorder_hooks(hooks: object) -> TypeGuard[RecorderHooks]:
    return isinstance(hooks, RecorderHooks) and hooks.scope.recorder.hooks is hooks


def _members(hooks: Any) -> list[Any]:
    """``hooks`` as a flat list (chains of chains unrolled, None left out)."""
    if isinstance(hooks, _ChainedHooks):
        return [member for inner in hooks.hooks for member in _members(inner)]
    return [] if hooks is None else [hooks]


def _split_recorder_hooks(hooks: Any) -> tuple[RecorderHooks | None, list[Any]]:
    """A recorder's ``rec.hooks`` among ``hooks`` (alone or chained, at any depth: each
    one given once however often it appears), and the others.

    ValueError for the hooks of two recorders: a run belongs to one conversation.
    """
    members = _members(hooks)
    found = [h for h in members if _is_recorder_hooks(h)]
    if len({id(h) for h in found}) > 1:
        raise ValueError("the hooks of two Recorders were given to one run; a run is "
                         "recorded into one conversation")
    return (found[0] if found else None), [h for h in members if not _is_recorder_hooks(h)]


def chain_hooks(*hooks: RunHooks[Any] | None) -> RunHooks[Any]:
    """One ``RunHooks`` that calls each given one in turn (None entries are skipped)."""
    present = [h for h in hooks if h is not None]
    return present[0] if len(present) == 1 else _ChainedHooks(*present)


def _with_error_reporting(run_config: RunConfig | None, scope: RunScope) -> RunConfig:
    config = run_config if run_config is not None else RunConfig()
    users = config.tool_error_formatter

    def formatter(args: Any) -> Any:
        if args.kind == "tool_exception" and args.error is not None:
            try:
                scope.tool_failed(args.call_id, args.error)
            except Exception as exc:
                scope.recorder.report(exc, in_hook=False)
        return users(args) if users is not None else None

    return dataclasses.replace(config, tool_error_formatter=formatter)


class RecordingRunner:
    """Wraps the SDK's default runner; see the module docstring."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _plan(self, kwargs: dict[str, Any], streamed: bool) -> RunScope | None:
        hooks = kwargs.get("hooks")
        run_config = kwargs.get("run_config")
        if isinstance(run_config, dict):
            run_config = RunConfig(**run_config)
        recorder_hooks, users = _split_recorder_hooks(hooks)
        scope: RunScope | None
        if recorder_hooks is not None:
            scope = recorder_hooks.scope.recorder.begin_run(streamed, run_config)
            scope_hooks = RecorderHooks(scope)
            kwargs["hooks"] = _ChainedHooks(*users, scope_hooks) if users else scope_hooks
        else:
            active = _ACTIVE.get()
            scope = active.child(kwargs.get("context"), streamed, run_config) if active else None
            if scope is None:
                return None
            scope_hooks = RecorderHooks(scope)
            kwargs["hooks"] = _ChainedHooks(hooks, scope_hooks) if hooks else scope_hooks
        kwargs["run_config"] = _with_error_reporting(run_config, scope)
        return scope

    def _start(self, scope: RunScope, agent: Any, user_input: Any, kwargs: dict[str, Any]) -> None:
        try:
            scope.start(agent, user_input, kwargs.get("max_turns"))
        except Exception as exc:
            scope.recorder.report(exc, in_hook=True)

    async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        recorder_hooks, _ = _split_recorder_hooks(kwargs.get("hooks"))
        if recorder_hooks is None:
            return await self._run(starting_agent, input, kwargs)
        async with recorder_hooks.scope.recorder.turn():
            return await self._run(starting_agent, input, kwargs)

    def run_sync(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        recorder_hooks, _ = _split_recorder_hooks(kwargs.get("hooks"))
        if recorder_hooks is None:
            return self.inner.run_sync(starting_agent, input, **kwargs)
        return run_sync_with(self, starting_agent, input, kwargs)

    async def _run(self, starting_agent: Any, input: Any, kwargs: dict[str, Any]) -> Any:
        scope = self._plan(kwargs, streamed=False)
        if scope is None:
            return await self.inner.run(starting_agent, input, **kwargs)
        self._start(scope, starting_agent, input, kwargs)
        token = _ACTIVE.set(scope)
        failed = False
        try:
            result = await self.inner.run(starting_agent, input, **kwargs)
            if scope.parent is None and not result.interruptions:
                await scope.recorder.end_run(kwargs.get("session"))
        except BaseException as exc:
            failed = True
            scope.fail(exc)
            raise
        else:
            scope.end(result)
            return result
        finally:
            _ACTIVE.reset(token)
            if scope.parent is None:
                await scope.recorder.flush_after_run(run_failed=failed)

    def run_streamed(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        recorder_hooks, _ = _split_recorder_hooks(kwargs.get("hooks"))
        recorder = recorder_hooks.scope.recorder if recorder_hooks is not None else None
        if recorder is not None:
            recorder.take_turn_now()  # run_streamed returns at once: it cannot wait
        try:
            scope = self._plan(kwargs, streamed=True)
            if scope is None:
                return self.inner.run_streamed(starting_agent, input, **kwargs)
            self._start(scope, starting_agent, input, kwargs)
            token = _ACTIVE.set(scope)  # the run's task copies this context when created
            try:
                result = self.inner.run_streamed(starting_agent, input, **kwargs)
            except BaseException as exc:
                scope.fail(exc)
                raise
            finally:
                _ACTIVE.reset(token)
        except BaseException:
            if recorder is not None:
                recorder.end_turn()
            raise
        result.stream_events = _recorded_stream(result, result.stream_events, scope,
                                                kwargs.get("session"))
        return result


def _recorded_stream(result: Any, stream_events: Any, scope: RunScope, session: Any) -> Any:
    async def recorded() -> Any:
        failure: BaseException | None = None
        exiting = False
        events = stream_events()
        try:
            async for event in events:
                delta = output_text_delta(event)
                if delta is not None:
                    scope.text_delta(delta.item_id, delta.delta)
                    if WRITER.pending > WRITER.high_water:  # the writer is far behind
                        await WRITER.room()
                yield event
        except GeneratorExit:
            # The consumer stopped reading (``break``, or the generator was dropped).
            # Closing the SDK's stream lets the run go on to its end, as it would
            # without us; record that end, not the consumer leaving.
            exiting = True
            try:
                await events.aclose()
            except Exception as exc:
                failure = exc
            failure = failure or stored_exception(result)
            raise
        except BaseException as exc:
            failure = exc
            raise
        finally:
            # result.cancel() ends the stream normally, with no final output.
            stopped = cancel_requested(result) and result.final_output is None
            if failure is None and result.is_complete and not stopped and scope.parent is None \
                    and not result.interruptions:
                await scope.recorder.end_run(session)
            if failure is not None:
                scope.fail(failure)
            elif result.is_complete and not stopped:
                scope.end(result)
            else:  # cancelled, or the stream ended before the run did
                scope.fail(asyncio.CancelledError())
            if scope.parent is None:
                # no RecorderError over the run's own exception, nor out of aclose()
                try:
                    await scope.recorder.flush_after_run(
                        run_failed=failure is not None or exiting)
                finally:
                    scope.recorder.end_turn()

    return recorded


def install() -> None:
    """Make the SDK's ``Runner`` go through :class:`RecordingRunner` (idempotent)."""
    current = get_default_agent_runner()
    if not isinstance(current, RecordingRunner):
        # A proxy, not a subclass: what it does not override goes to the runner it wraps.
        set_default_agent_runner(cast(AgentRunner, RecordingRunner(current)))
