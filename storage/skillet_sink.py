"""Turns recorder events into the skillet JSONL replay log of one conversation.

One turn per recorded run: ``user_message``, the steps (subagent runs
included, under their own agent names), ``final_result``. A failed run is
closed with a ``final_result`` whose text says what failed and which carries
an extra ``error`` object (``code``, ``message``, ``type``); skilled_crew's
reader ignores keys it does not know. A compaction during a run is marked by
a line of kind ``compaction`` (the log itself is never rewritten): skilled_crew's
readers skip kinds they do not know, but its ``run`` and ``chat`` stop at a step
of a type they do not know (see storage/log_entries.py). So a tool call that raised keeps
its ``agent_tool_end`` step (``result``: the text the model saw) and adds
``status: "error"`` and ``error`` (the exception), keys skilled_crew ignores.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from . import log_entries as entry
from .events import (
    AgentEnded,
    AgentStarted,
    Compacted,
    Event,
    Handoff,
    ModelCallFinished,
    RunFailed,
    RunFinished,
    RunStarted,
    RunSuspended,
    TextDelta,
    ToolFailed,
    ToolFinished,
    ToolStarted,
)
from .replay_log import ReplayLog

__all__ = ["SkilletLogSink", "skillet_model"]


def _stamp(at: int) -> str:
    return entry.iso_ms(datetime.fromtimestamp(at / 1000, timezone.utc))


def skillet_model(model: str) -> str:
    """``provider:model`` as skilled_crew writes it: ``provider/model``."""
    return model.replace(":", "/", 1)


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

    def __init__(self, log: ReplayLog) -> None:
        self.log = log
        self._roots: set[str] = set()
        self._lines: list[dict[str, Any]] = []  # this batch's lines, until flush()
        self._failures: dict[tuple[str, str], str] = {}  # failed calls whose end is to come
        self._ends: dict[tuple[str, str], dict[str, Any]] = {}  # this batch's tool ends
        self._streamed: dict[tuple[str, str], int] = {}  # text streamed so far, by call item
        self._handlers = {
            RunStarted: self._run_started, AgentStarted: self._agent_started,
            AgentEnded: self._agent_ended, Handoff: self._handoff, TextDelta: self._text_delta,
            ModelCallFinished: self._model_call_finished, ToolStarted: self._tool_started,
            ToolFailed: self._tool_failed, ToolFinished: self._tool_finished,
            RunFinished: self._run_finished, RunFailed: self._run_failed,
            Compacted: self._compacted, RunSuspended: self._run_suspended,
        }

    def handle(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)  # type: ignore[operator]

    def flush(self) -> None:
        """Append the lines of the batch, in one write."""
        lines, self._lines = self._lines, []
        self._ends.clear()
        self.log.append_many(lines)

    def _step(self, event: Event, result: dict[str, Any]) -> None:
        self._lines.append(entry.step(result, _stamp(event.at)))

    def _run_started(self, event: RunStarted) -> None:
        self._roots.add(event.scope)
        if not event.resumed:  # a resumed run goes on in the suspended run's turn
            self._lines.append(entry.user_message(event.user_input, _stamp(event.at)))

    def _run_suspended(self, event: RunSuspended) -> None:
        if event.scope in self._roots:
            self._roots.discard(event.scope)
            self._forget_failures(event.scope)
            self._lines.append(entry.suspended(
                [{"callId": call.call_id, "toolName": call.tool_name,
                  "arguments": call.arguments} for call in event.pending], _stamp(event.at)))

    def _agent_started(self, event: AgentStarted) -> None:
        self._step(event, entry.agent_start(event.agent_name))

    def _agent_ended(self, event: AgentEnded) -> None:
        self._step(event, entry.agent_end(event.agent_name))

    def _handoff(self, event: Handoff) -> None:
        self._step(event, entry.handoff(event.from_agent, event.to_agent))

    def _text_delta(self, event: TextDelta) -> None:
        if event.scope in self._roots and event.text:
            self._step(event, entry.text(event.text))
            key = (event.scope, event.item_id or "")
            self._streamed[key] = self._streamed.get(key, 0) + len(event.text)

    def _model_call_finished(self, event: ModelCallFinished) -> None:
        """The call's text: all of it for a call that was not streamed; for a streamed one,
        what its deltas did not bring (a run that stopped before the consumer read them:
        a tripwire, a cancel), so that the log holds what the model wrote, as the tree."""
        if event.scope not in self._roots:
            return
        for item_id, text in event.texts:
            seen = self._streamed.pop((event.scope, item_id or ""), 0) if event.streamed else 0
            if text[seen:]:
                self._step(event, entry.text(text[seen:]))

    def _tool_started(self, event: ToolStarted) -> None:
        self._step(event, entry.agent_tool_start(event.agent_name, event.tool_name,
                                                 event.arguments))

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
                                   error=self._failures.pop(key, None))
        self._step(event, end)
        self._ends[key] = end

    def _forget_failures(self, scope: str) -> None:
        """A run ended: failures of its calls that never got an end (the run failed
        with the call open, or the end was written already) are dropped, and so is what
        it streamed of a call that never finished."""
        for key in [key for key in self._failures if key[0] == scope]:
            del self._failures[key]
        for key in [key for key in self._streamed if key[0] == scope]:
            del self._streamed[key]

    def _compacted(self, event: Compacted) -> None:
        """A ``compaction`` line in the turn (a line of its own kind, which skilled_crew skips)."""
        self._lines.append(entry.compaction(
            {"compactionId": event.compaction_id, "reason": event.reason,
             "summarizer": event.summarizer, "itemsBefore": event.items_before,
             "itemsAfter": event.items_after, "archived": event.archived}, _stamp(event.at)))

    def _run_finished(self, event: RunFinished) -> None:
        self._forget_failures(event.scope)
        if event.scope in self._roots:
            self._roots.discard(event.scope)
            self._lines.append(entry.final_result(
                event.final_text, model=skillet_model(event.model), timestamp=_stamp(event.at)))

    def _run_failed(self, event: RunFailed) -> None:
        self._forget_failures(event.scope)
        if event.scope not in self._roots:
            return
        self._roots.discard(event.scope)
        final = entry.final_result(f"[run failed] {event.error_type}: {event.message}",
                                   model=skillet_model(event.model) if event.model else None,
                                   timestamp=_stamp(event.at))
        final["error"] = {"code": event.code, "message": event.message, "type": event.error_type}
        self._lines.append(final)
