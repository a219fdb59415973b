"""Turns recorder events into the skillet JSONL replay log of one conversation.

One turn per recorded run: ``user_message``, the steps (subagent runs
included, under their own agent names), ``final_result``. A failed run is
closed with a ``final_result`` whose text says what failed and which carries
an extra ``error`` object (``code``, ``message``, ``type``); skilled_crew's
reader ignores keys it does not know. A compaction during a run is marked by
a line of kind ``compaction`` (the log itself is never rewritten): skilled_crew's
readers skip kinds they do not know, but its ``run`` and ``chat`` stop at a step
of a type they do not know (see storage/skillet/log_entries.py). So a tool call that raised keeps
its ``agent_tool_end`` step (``result``: the text the model saw) and adds
``status: "error"`` and ``error`` (the exception), keys skilled_crew ignores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..events import (
    AgentEnded,
    AgentStarted,
    Compacted,
    Event,
    Handoff,
    ModelCallFinished,
    ModelCallStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    RunSuspended,
    SubagentStarted,
    TextDelta,
    ToolFailed,
    ToolFinished,
    ToolStarted,
)
from ..names import reported_model
from ..times import ms_to_iso
from . import log_entries as entry
from .replay_log import ReplayLog

__all__ = ["EntryLog", "SkilletLogSink"]


class EntryLog(Protocol):
    """Where a conversation's log lines can go besides its file (a server's log table)."""

    def append_many(self, entries: Sequence[dict[str, Any]]) -> None: ...


class SkilletLogSink:
    """Appends each run of the conversation to its :class:`ReplayLog` (the lines of a
    batch of events in one write, at :meth:`flush`).

    Only the conversation's own runs (the scopes of ``RunStarted`` events)
    write ``user_message``, ``text`` and ``final_result``; nested subagent
    runs add their agent and tool steps to the same turn.

    A tool's failure (``ToolFailed``) and its end (``ToolFinished``) are paired by
    scope and call id. The recorder sends the failure first: it is kept until the end
    comes. One that comes after the end still marks that step while its line is in the
    batch not yet written; a line already written is never changed (the log is only
    appended to).
    """

    def __init__(self, log: ReplayLog, where: dict[str, Any] | None = None,
                 copies: Sequence[EntryLog] = ()) -> None:
        self.log = log
        self.copies = list(copies)  # where each batch's lines also go (a server's log)
        # Keys on each turn's user_message: the format, the conversation by its raw names
        # (userId, sessionName: the log's file name has them sanitized), where the run
        # happened (cwd, projectRoot) and the AgentUse session it is also recorded in
        # (sessionId, sessionDir).
        self.where = {"format": entry.FORMAT, "userId": log.user_id,
                      "sessionName": log.session_name, **(where or {})}
        self._roots: set[str] = set()
        self._lines: list[dict[str, Any]] = []  # this batch's lines, until flush()
        self._failures: dict[tuple[str, str], str] = {}  # failed calls whose end is to come
        self._ends: dict[tuple[str, str], dict[str, Any]] = {}  # this batch's tool ends
        self._streamed: dict[tuple[str, str], int] = {}  # text streamed so far, by call item
        self._parents: dict[str, str] = {}  # a subagent run's scope -> the call that ran it
        self._call_starts: dict[str, int] = {}  # scope -> when its model call started
        # The last line of the batch, when it is streamed text of (scope, item): the next
        # chunk of that text joins it.
        self._open_text: tuple[tuple[str, str], dict[str, Any]] | None = None
        self._handlers = {
            RunStarted: self._run_started, AgentStarted: self._agent_started,
            AgentEnded: self._agent_ended, Handoff: self._handoff, TextDelta: self._text_delta,
            ModelCallStarted: self._model_call_started,
            ModelCallFinished: self._model_call_finished, ToolStarted: self._tool_started,
            ToolFailed: self._tool_failed, ToolFinished: self._tool_finished,
            RunFinished: self._run_finished, RunFailed: self._run_failed,
            Compacted: self._compacted, RunSuspended: self._run_suspended,
            SubagentStarted: self._subagent_started,
        }

    def handle(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)  # type: ignore[operator]

    def flush(self) -> None:
        """Append the lines of the batch, in one write, to the file and then to each copy
        (each is tried whatever the others did; the first failure is raised)."""
        lines, self._lines = self._lines, []
        self._ends.clear()
        self._open_text = None
        failure: Exception | None = None
        for target in (self.log, *self.copies):
            try:
                target.append_many(lines)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def _add(self, line: dict[str, Any]) -> None:
        self._lines.append(line)
        self._open_text = None

    def _step(self, event: Event, result: dict[str, Any]) -> dict[str, Any]:
        """Add a step line; a subagent run's steps name the call that ran it
        (``parentCallId``). Returns the step's result, for a later change in this batch."""
        parent = self._parents.get(event.scope)
        if parent is not None:
            result["parentCallId"] = parent
        self._add(entry.step(result, ms_to_iso(event.at)))
        return result

    def _run_started(self, event: RunStarted) -> None:
        self._roots.add(event.scope)
        if not event.resumed:  # a resumed run goes on in the suspended run's turn
            self._add(entry.user_message(event.user_input, ms_to_iso(event.at), **self.where))

    def _subagent_started(self, event: SubagentStarted) -> None:
        self._parents[event.child_scope] = event.call_id

    def _model_call_started(self, event: ModelCallStarted) -> None:
        self._call_starts[event.scope] = event.at

    def _run_suspended(self, event: RunSuspended) -> None:
        if event.scope in self._roots:
            self._roots.discard(event.scope)
            self._forget_failures(event.scope)
            self._add(entry.suspended(
                [{"callId": call.call_id, "toolName": call.tool_name,
                  "arguments": call.arguments} for call in event.pending], ms_to_iso(event.at)))

    def _agent_started(self, event: AgentStarted) -> None:
        self._step(event, entry.agent_start(event.agent_name))

    def _agent_ended(self, event: AgentEnded) -> None:
        self._step(event, entry.agent_end(event.agent_name))

    def _handoff(self, event: Handoff) -> None:
        self._step(event, entry.handoff(event.from_agent, event.to_agent))

    def _text_delta(self, event: TextDelta) -> None:
        """A streamed chunk: a ``text`` step, or, when the batch's last line is a step of
        the same text, more of that step (one line per text per batch, not per chunk)."""
        if event.scope in self._roots and event.text:
            key = (event.scope, event.item_id or "")
            self._streamed[key] = self._streamed.get(key, 0) + len(event.text)
            if self._open_text is not None and self._open_text[0] == key:
                self._open_text[1]["text"] += event.text
                return
            step = self._step(event, entry.text(event.text))
            self._open_text = (key, step)

    def _model_call_finished(self, event: ModelCallFinished) -> None:
        """A ``model_call`` line (the call's agent, model, tokens, cost, time and
        reasoning), then its text: all of it for a call that was not streamed; for a
        streamed one, what its deltas did not bring (a run that stopped before the consumer
        read them: a tripwire, a cancel), so that the log holds what the model wrote, as the
        tree."""
        tokens = event.usage.tokens
        started = self._call_starts.pop(event.scope, None)
        fields: dict[str, Any] = {
            "agentName": event.agent_name, "model": reported_model(event.model),
            "usage": {"inputTokens": tokens.input, "outputTokens": tokens.output,
                      "cachedTokens": tokens.cache_read, "reasoningTokens": tokens.reasoning},
            "cost": event.usage.cost,
            "durationMs": None if started is None else max(0, event.at - started),
            "reasoning": list(event.reasoning),
            "parentCallId": self._parents.get(event.scope)}
        self._add(entry.model_call({k: v for k, v in fields.items() if v is not None},
                                   ms_to_iso(event.at)))
        if event.scope not in self._roots:
            return
        for item_id, text in event.texts:
            seen = self._streamed.pop((event.scope, item_id or ""), 0) if event.streamed else 0
            if text[seen:]:
                self._step(event, entry.text(text[seen:]))

    def _tool_started(self, event: ToolStarted) -> None:
        self._step(event, entry.agent_tool_start(event.agent_name, event.tool_name,
                                                 event.arguments, event.call_id))

    def _tool_failed(self, event: ToolFailed) -> None:
        key = (event.scope, event.call_id)
        end = self._ends.get(key)
        if end is not None:  # its end came first and is not written yet
            end.update(entry.tool_failure(event.error))
        else:
            self._failures[key] = event.error

    def _tool_finished(self, event: ToolFinished) -> None:
        key = (event.scope, event.call_id)
        end = entry.agent_tool_end(event.agent_name, event.tool_name, event.output,
                                   error=self._failures.pop(key, None), call_id=event.call_id)
        self._ends[key] = self._step(event, end)

    def _forget_failures(self, scope: str) -> None:
        """A run ended: failures of its calls that never got an end (the run failed
        with the call open, or the end was written already) are dropped, and so is what
        it streamed of a call that never finished."""
        for key in [key for key in self._failures if key[0] == scope]:
            del self._failures[key]
        for key in [key for key in self._streamed if key[0] == scope]:
            del self._streamed[key]
        self._parents.pop(scope, None)
        self._call_starts.pop(scope, None)

    def _compacted(self, event: Compacted) -> None:
        """A ``compaction`` line in the turn (a line of its own kind, which skilled_crew skips)."""
        self._add(entry.compaction(
            {"compactionId": event.compaction_id, "reason": event.reason,
             "summarizer": event.summarizer, "itemsBefore": event.items_before,
             "itemsAfter": event.items_after, "archived": event.archived}, ms_to_iso(event.at)))

    def _run_finished(self, event: RunFinished) -> None:
        self._forget_failures(event.scope)
        if event.scope in self._roots:
            self._roots.discard(event.scope)
            self._add(entry.final_result(
                event.final_text, model=reported_model(event.model), timestamp=ms_to_iso(event.at)))

    def _run_failed(self, event: RunFailed) -> None:
        self._forget_failures(event.scope)
        if event.scope not in self._roots:
            return
        self._roots.discard(event.scope)
        final = entry.final_result(f"[run failed] {event.error_type}: {event.message}",
                                   model=reported_model(event.model),
                                   timestamp=ms_to_iso(event.at))
        final["error"] = {"code": event.code, "message": event.message, "type": event.error_type}
        self._add(final)
