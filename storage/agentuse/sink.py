"""Turns recorder events into the AgentUse tree (one session per conversation).

Each scope (the conversation's run, or a nested subagent run) has its own
session directory and exchange. Runs on the recorder's writer thread.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..events import (
    REJECTED,
    AgentInfo,
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
    ToolInfo,
    ToolsListed,
    ToolStarted,
)
from ..file_writes import WORKER
from .liveness import RecordingLock, close_interrupted
from .reader import CorruptFileError, DamagedFileError
from .writer import (
    FORMAT,
    AgentUseMessage,
    AgentUsePart,
    AgentUseSession,
    DocumentWrites,
)

__all__ = ["REASONING_SLOTS", "TEXT_REWRITE_INTERVAL", "AgentUseSink"]

log = logging.getLogger("sessiontape")

# What a run's open parts say when a later run finds that its recorder is gone.
# AgentUse's approval gate: a tool part of this name, ``pending`` with this resumePayload
# kind while it waits (src/runner/stream.ts:776-797), is what its views show as an approval.
APPROVAL_TOOL = "await_human"
APPROVAL_KIND = "await_human"
# How sessiontape 0.3 marked a call waiting for approval (the call's own part, pending);
# still resumed from an old tree.
OLD_APPROVAL_KIND = "tool_approval"
# A streamed text part is rewritten at most this often (seconds); its final text is exact.
TEXT_REWRITE_INTERVAL = 0.25
# Part ids set aside, before a streamed call's first text part, for that call's reasoning
# parts (which arrive with the call's end); more reasoning items than this share the last.
REASONING_SLOTS = 8


def tool_input(arguments: str) -> Any:
    """The parsed arguments object (the raw string when it is not JSON)."""
    try:
        return orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return arguments


@dataclass
class _Tool:
    """A tool part of an exchange, and what its state is rendered from.

    ``metadata`` is ours (a subagent call's ``sessionID, agent, path``); ``subagent``
    is AgentUse's summary of the nested run the call started (``agent, [toolCalls],
    tokensUsed, duration``), which becomes ``state.output.metadata`` and
    ``state.metadata.tokens`` as AgentUse writes them for its ``subagent__*`` tools.
    """

    part: AgentUsePart
    input: Any
    start: int
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    subagent: dict[str, Any] | None = None
    ended: tuple[str, int, dict[str, Any]] | None = None  # status, end, fields once closed

    def state(self, status: str, end: int | None = None, **fields: Any) -> dict[str, Any]:
        """``{status, input, [output | error], time, [metadata]}`` (AgentUse's order)."""
        if self.subagent is not None and "output" in fields:
            fields["output"] = {"output": fields["output"], "metadata": self.subagent}
        state: dict[str, Any] = {"status": status, "input": self.input, **fields}
        state["time"] = {"start": self.start} if end is None else {"start": self.start, "end": end}
        metadata = self.metadata
        tokens = self.subagent.get("tokensUsed") if self.subagent is not None else None
        if tokens:  # AgentUse: ...(tokens && {metadata: {tokens}})
            metadata = {"tokens": tokens, **metadata}
        if metadata:
            state["metadata"] = metadata
        return state

    def close(self, status: str, end: int, **fields: Any) -> None:
        """Write the final state (``completed`` or ``error``)."""
        self.ended = (status, end, fields)
        self.part.update(state=self.state(status, end, **fields))

    def set_subagent(self, summary: dict[str, Any]) -> None:
        """The nested run ended: rewrite the state with its summary (already closed, or
        still running: then the summary goes in when it closes)."""
        self.subagent = summary
        if self.ended is not None:
            status, end, fields = self.ended
            self.part.update(state=self.state(status, end, **fields))


@dataclass
class _Scope:
    session: AgentUseSession
    message: AgentUseMessage
    agent_name: str = ""
    started: int = 0
    parent_tool: _Tool | None = None  # a subagent run: the parent's tool call that ran it
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # a subagent's {tool, args}
    tools: dict[str, _Tool] = field(default_factory=dict)  # open tool calls
    gates: dict[str, _Tool] = field(default_factory=dict)  # open approval gates, by call id
    tools_json: list[dict[str, Any]] = field(default_factory=list)  # tools.json's tools
    texts: dict[str, AgentUsePart] = field(default_factory=dict)  # streamed text by item
    last_rewrite: float = 0.0
    # The model call going on: when it started, when its first streamed text part began
    # (None: no text streamed yet) and the part ids set aside then for its reasoning.
    call_start: int = 0
    text_start: int | None = None
    reasoning_ids: list[str] = field(default_factory=list)

    def subagent_summary(self, at: int) -> dict[str, Any]:
        """What AgentUse's subagent tool returns as ``metadata``: ``{agent, [toolCalls],
        tokensUsed, duration}`` (``toolCalls`` left out when there were none, as AgentUse
        does; tokens are this run's own calls, input + output; duration in ms)."""
        tokens = self.message.tokens
        summary: dict[str, Any] = {"agent": self.agent_name}
        if self.tool_calls:
            summary["toolCalls"] = list(self.tool_calls)
        summary["tokensUsed"] = tokens.input + tokens.output
        summary["duration"] = max(0, at - self.started)
        return summary


def _int(value: Any, default: int) -> int:
    """``value`` if it is an int (not a bool), else ``default``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _tool_entries(tools: tuple[ToolInfo, ...]) -> list[dict[str, Any]]:
    return [{k: v for k, v in (("name", t.name), ("description", t.description),
                               ("inputSchema", t.input_schema)) if v is not None}
            for t in tools]


def _tools_json(agent: AgentInfo) -> list[dict[str, Any]]:
    return _tool_entries(agent.tools)


def _said(damage: CorruptFileError, outcome: str) -> None:
    """One warning line: a file of the tree that could not be read, and what came of it."""
    log.warning("sessiontape: %s; %s", damage, outcome)


class AgentUseSink:
    """Writes one conversation into ``session_dir`` (created on the first run, reopened after).

    ``session_dir`` is ``<sessions root>/{ULID}-{agent}``, decided by the
    recorder so that it can be found again for the next run. Files are
    written at :meth:`flush` (the writer calls it after each batch of events),
    each once with its latest content.
    """

    def __init__(self, session_dir: Path, project_root: str, cwd: str,
                 conversation: dict[str, Any] | None = None) -> None:
        self.session_dir = session_dir
        self.project_root = project_root
        self.cwd = cwd
        # session.json's ``conversation``: the skillet conversation recorded here (``user``,
        # ``name``) and its replay ``log``.
        self.conversation = conversation
        self._scopes: dict[str, _Scope] = {}
        self._writes = DocumentWrites(deferred=True, worker=WORKER)
        # Tool calls ended in this batch (scope, call id): a failure reported after the
        # end still marks the part until the batch is written (see _tool_failed).
        self._closed: dict[tuple[str, str], _Tool] = {}
        self._handlers = {
            RunStarted: self._run_started, SubagentStarted: self._subagent_started,
            ModelCallStarted: self._model_call_started, TextDelta: self._text_delta,
            ModelCallFinished: self._model_call_finished, ToolStarted: self._tool_started,
            ToolFailed: self._tool_failed, ToolFinished: self._tool_finished,
            RunFinished: self._run_finished, RunFailed: self._run_failed,
            Compacted: self._compacted, Handoff: self._handoff,
            ToolsListed: self._tools_listed,
            RunSuspended: self._run_suspended,
        }
        self._suspended: _Scope | None = None  # the exchange a suspended run left open
        self._lock = RecordingLock(session_dir)  # held while a run is recorded (liveness.py)
        self._root: str | None = None  # the scope of the conversation's run going on

    def handle(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is None:
            return
        if not isinstance(event, RunStarted) and event.scope not in self._scopes:
            if isinstance(event, (RunFinished, RunFailed)):
                self._ended(event.scope)
            return  # a run whose session could not be started (that error was reported)
        handler(event)  # type: ignore[operator]

    def flush(self) -> None:
        self._closed.clear()
        self._writes.flush()

    def _session_kwargs(self, agent: AgentInfo) -> dict[str, Any]:
        return {"model": agent.model, "project_root": self.project_root, "cwd": self.cwd,
                "max_steps": agent.max_turns, "description": agent.description}

    def _start(self, scope: str, session: AgentUseSession, agent: AgentInfo, task: str,
               at: int, parent_tool: _Tool | None = None) -> None:
        tools = _tools_json(agent)
        session.write_tools(tools)
        system = [agent.instructions] if agent.instructions else []
        self._scopes[scope] = _Scope(session, session.add_message(task, system=system, created=at),
                                     agent_name=agent.name, started=at, parent_tool=parent_tool,
                                     tools_json=tools)

    def _handoff(self, event: Handoff) -> None:
        """An ``agent`` part naming the agent that takes over the exchange (as AgentUse
        marks a subagent), then an ``info`` ``log`` part saying so with its model, which
        AgentUse's ``sessions show`` prints as ``  [INFO] Handoff: A → B (model)`` where
        it prints no ``agent`` part (src/cli/sessions.ts:960-961, 1111-1117); the new
        agent's tools join ``tools.json``."""
        scope = self._scopes[event.scope]
        scope.message.add_part("agent", name=event.to_agent, time={"start": event.at})
        model = f" ({event.target.model})" if event.target and event.target.model else ""
        scope.message.add_part("log", level="info",
                               message=f"Handoff: {event.from_agent} → {event.to_agent}{model}",
                               time={"start": event.at})
        scope.agent_name = event.to_agent
        if event.target is not None:
            known = {tool.get("name") for tool in scope.tools_json}
            added = [tool for tool in _tools_json(event.target) if tool.get("name") not in known]
            if added:
                scope.tools_json = scope.tools_json + added
                scope.session.write_tools(scope.tools_json)

    def _tools_listed(self, event: ToolsListed) -> None:
        """An agent's MCP tools as the SDK listed them during the run: a new one joins
        ``tools.json``, a changed one (same name) replaces its entry; written if any did."""
        scope = self._scopes[event.scope]
        tools = list(scope.tools_json)
        where = {tool.get("name"): index for index, tool in enumerate(tools)}
        for entry in _tool_entries(event.tools):
            index = where.get(entry["name"])
            if index is None:
                where[entry["name"]] = len(tools)
                tools.append(entry)
            else:
                tools[index] = entry
        if tools != scope.tools_json:
            scope.tools_json = tools
            scope.session.write_tools(tools)

    def _run_started(self, event: RunStarted) -> None:
        suspended, self._suspended = self._suspended, None
        self._root = event.scope
        if event.resumed:
            suspended = suspended or self._suspended_on_disk(event)
            if suspended is not None:
                # The same exchange goes on, its pending calls with it (AgentUse's resume).
                self._scopes[event.scope] = suspended
                self._lock.acquire()
                self._announce(suspended.session, event.at)
                return
        self._writes.flush()  # an earlier run's session.json, if still pending
        if (self.session_dir / "session.json").exists():
            session = self._open_session(event)
            alone = self._lock.acquire()
            if alone and session.info.get("status") == "running" and "recorder" in session.info:
                try:
                    close_interrupted(session, event.at)
                except CorruptFileError as exc:  # a file it must read is damaged
                    _said(exc, "the exchange a killed recording left open there stays as it is")
            session.info["model"] = event.agent.model
            session.info["format"] = FORMAT  # what this run writes
        else:
            session_id = self.session_dir.name.partition("-")[0]
            session = AgentUseSession.create(  # in the linked directory, whatever the agent
                self.session_dir.parent, event.agent.name, session_id=session_id,
                directory=self.session_dir, created=event.at, writes=self._writes,
                **self._session_kwargs(event.agent))
            self._lock.acquire()
        self._announce(session, event.at)
        self._start(event.scope, session, event.agent, event.user_text, event.at)

    def _open_session(self, event: RunStarted) -> AgentUseSession:
        """The conversation's session, to go on with; a damaged ``session.json`` (truncated,
        not JSON) is rebuilt from the files beside it and this run's agent (the damaged
        bytes kept aside: :meth:`AgentUseSession.recover`), which is said once."""
        try:
            return AgentUseSession.open(self.session_dir, self._writes)
        except DamagedFileError as damage:
            session = AgentUseSession.recover(self.session_dir, damage, event.agent.name,
                                              at=event.at, writes=self._writes,
                                              **self._session_kwargs(event.agent))
            _said(damage, "rebuilt from the files beside it (the damaged file kept as "
                  f"{session.info['recovered']['kept']})")
            return session

    def _announce(self, session: AgentUseSession, at: int) -> None:
        """``running``, with the conversation and who records it (liveness.py)."""
        if self.conversation is not None:
            session.info["conversation"] = self.conversation
        session.info["recorder"] = {"pid": os.getpid(), "host": socket.gethostname(),
                                    "started": at}
        session.set_status("running", at=at)

    def _subagent_started(self, event: SubagentStarted) -> None:
        parent = self._scopes[event.scope]
        child = parent.session.create_subagent(event.agent.name, created=event.at,
                                               **self._session_kwargs(event.agent))
        parent.message.add_part("agent", name=event.agent.name, time={"start": event.at})
        tool = parent.tools.get(event.call_id)
        if tool is not None:
            tool.metadata.update(sessionID=child.id, agent=event.agent.name,
                                 path=str(child.directory.relative_to(parent.session.directory)))
            tool.part.update(state=tool.state("running"))
        self._start(event.child_scope, child, event.agent, event.task, event.at, tool)

    def _model_call_started(self, event: ModelCallStarted) -> None:
        scope = self._scopes[event.scope]
        scope.message.add_part("step-start", agent=event.agent_name, model=event.model or None,
                               time={"start": event.at})
        scope.call_start, scope.text_start, scope.reasoning_ids = event.at, None, []

    def _text_delta(self, event: TextDelta) -> None:
        scope = self._scopes[event.scope]
        key = event.item_id or ""
        part = scope.texts.get(key)
        if part is None:
            if scope.text_start is None:
                # The call's first text, written now; its reasoning comes with the call's
                # end and must sort before it: set ids aside for it first.
                scope.text_start = event.at
                scope.reasoning_ids = scope.message.reserve_ids(REASONING_SLOTS)
            part = scope.message.add_part("text", text=event.text, time={"start": event.at})
            scope.texts[key] = part
            scope.last_rewrite = time.monotonic()
            return
        if part.fields.get("time", {}).get("end") is not None:
            return  # the call already finished: its exact text is written
        part.fields["text"] += event.text
        now = time.monotonic()
        if now - scope.last_rewrite >= TEXT_REWRITE_INTERVAL:
            part.save()
            scope.last_rewrite = now

    def _model_call_finished(self, event: ModelCallFinished) -> None:
        scope = self._scopes[event.scope]
        self._add_reasoning(scope, event)
        for item_id, text in event.texts:
            part = scope.texts.get(item_id)
            if part is None:
                part = scope.message.add_part("text", text=text, time={"start": event.at})
                scope.texts[item_id] = part
            part.update(text=text, time={"start": part.fields["time"]["start"], "end": event.at})
        usage = event.usage
        scope.message.add_part("step-finish", cost=usage.cost, tokens=usage.tokens.to_json(),
                               agent=event.agent_name, model=event.model or None,
                               time={"start": scope.call_start or event.at, "end": event.at})
        scope.message.set_model(event.model)  # the model that answered last
        scope.message.add_usage(usage.tokens, usage.cost)
        scope.session.set_model(event.model)

    @staticmethod
    def _add_reasoning(scope: _Scope, event: ModelCallFinished) -> None:
        """The call's reasoning parts, before its text parts in id order.

        Not streamed (or no text streamed yet): new parts, made now, before the texts.
        Streamed text already written: the parts take the ids set aside before it (the
        last one holds every reasoning item beyond them), and their time is what it
        must have been: from the call's start to its first text.
        """
        ids, scope.reasoning_ids = scope.reasoning_ids, []
        texts = list(event.reasoning)
        text_start, scope.text_start = scope.text_start, None
        if not ids or text_start is None:
            for text in texts:
                scope.message.add_part("reasoning", text=text,
                                       time={"start": event.at, "end": event.at})
            return
        if len(texts) > len(ids):
            texts[len(ids) - 1:] = ["\n\n".join(texts[len(ids) - 1:])]
        start = min(scope.call_start or text_start, text_start)
        for part_id, text in zip(ids, texts, strict=False):  # texts: as many as ids, or fewer
            scope.message.add_part("reasoning", part_id=part_id, text=text,
                                   time={"start": start, "end": text_start})

    def _tool_started(self, event: ToolStarted) -> None:
        scope = self._scopes[event.scope]
        waiting = scope.tools.get(event.call_id)
        if waiting is not None:  # a call that waited for approval: its part goes on
            waiting.start = event.at
            waiting.part.update(state=waiting.state("running"))
            return
        args = tool_input(event.arguments)
        part = scope.message.add_part("tool", callID=event.call_id, tool=event.tool_name,
                                      state={"status": "running", "input": args,
                                             "time": {"start": event.at}})
        scope.tools[event.call_id] = _Tool(part, args, event.at)
        if scope.parent_tool is not None:  # a subagent's calls, for its summary
            scope.tool_calls.append({"tool": event.tool_name, "args": args})

    def _tool_failed(self, event: ToolFailed) -> None:
        """The call raised. The recorder says so before the call's end: the error is kept
        until then. Said after the end, in the same batch, the part closed as
        ``completed`` becomes ``error``, with the same end; a later one changes nothing
        (as in the replay log, whose line is written by then: both layouts agree)."""
        scope = self._scopes.get(event.scope)
        tool = scope.tools.get(event.call_id) if scope is not None else None
        if tool is not None:
            tool.error = event.error
            return
        tool = self._closed.get((event.scope, event.call_id))
        if tool is not None and tool.ended is not None and tool.error is None:
            tool.error = event.error
            tool.close("error", tool.ended[1], error=event.error)

    def _tool_finished(self, event: ToolFinished) -> None:
        scope = self._scopes[event.scope]
        tool = scope.tools.pop(event.call_id, None)
        if tool is None:
            return
        self._closed[(event.scope, event.call_id)] = tool
        if tool.error is not None:
            tool.close("error", event.at, error=tool.error)
        else:
            tool.close("completed", event.at, output=event.output)
        gate = scope.gates.pop(event.call_id, None)
        if gate is not None:
            # The human's decision, as AgentUse's resume writes it into its gate's output
            # (src/runner/resume.ts:63-74; {status, [comment]}, src/cli/sessions.ts:555-557),
            # at the time the resumed run acted on it (the call's start).
            rejected = tool.error is not None and tool.error.startswith(REJECTED)
            decision = ({"status": "rejected", "comment": tool.error[len(REJECTED):]}
                        if rejected and tool.error is not None else {"status": "approved"})
            gate.close("completed", max(gate.start, tool.start), output=decision)

    def _compacted(self, event: Compacted) -> None:
        """AgentUse's own ``compaction`` part, in the exchange during which it happened."""
        self._scopes[event.scope].message.add_part(
            "compaction", reason=event.reason, tokensBefore=event.tokens_before,
            tokensAfter=event.tokens_after, messagesBefore=event.items_before,
            messagesAfter=event.items_after, time={"start": event.at})

    def _close_open_tools(self, scope: _Scope, at: int, reason: str) -> None:
        for tool in (*scope.tools.values(), *scope.gates.values()):
            tool.close("error", at, error=tool.error or reason)
        scope.tools.clear()
        scope.gates.clear()

    def _report_to_parent(self, scope: _Scope, at: int) -> None:
        """A subagent run ended: its summary goes into the parent's tool part."""
        if scope.parent_tool is not None:
            scope.parent_tool.set_subagent(scope.subagent_summary(at))

    def _suspended_on_disk(self, event: RunStarted) -> _Scope | None:
        """The exchange a run suspended by another process left open: the latest one, with
        the ``pending`` approval gates of the calls this run resumes (None if there is
        none). A gate names its call in ``resumePayload.callID``; in a tree of sessiontape
        0.3 the call's own part waits instead (kind ``tool_approval``), and goes on."""
        if not (self.session_dir / "session.json").exists():
            return None
        self._writes.flush()
        session = self._open_session(event)
        try:
            message = AgentUseMessage.open_last(session)
            tools = message.open_parts("tool") if message is not None else []
        except CorruptFileError as exc:
            _said(exc, "the resumed run is recorded as a new exchange")
            return None
        if message is None:
            return None
        waiting = {call.call_id for call in event.pending}
        scope = _Scope(session, message, agent_name=event.agent.name, started=event.at)
        for part in tools:
            state = part.fields.get("state")
            if not isinstance(state, dict) or state.get("status") != "pending":
                continue
            payload = state.get("resumePayload")
            kind = payload.get("kind") if isinstance(payload, dict) else None
            call_id = payload.get("callID") if isinstance(payload, dict) else None
            if kind == APPROVAL_KIND and call_id in waiting:
                scope.gates[call_id] = _Tool(part, state.get("input"),
                                             _int(state.get("suspendedAt"), event.at),
                                             metadata={"resumePayload": payload})
            elif kind == OLD_APPROVAL_KIND and part.fields.get("callID") in waiting:
                scope.tools[part.fields["callID"]] = _Tool(
                    part, state.get("input"), event.at, metadata={"resumePayload": payload})
        return scope if scope.tools or scope.gates else None

    def _run_suspended(self, event: RunSuspended) -> None:
        """The run waits for approvals: the session is ``suspended`` and each waiting call
        has an approval gate as AgentUse's own is written (src/runner/stream.ts:776-797):
        a ``pending`` tool part ``await_human`` whose ``input`` asks the question and shows
        the call, and whose ``resumePayload`` is ``{kind: "await_human", prompt}`` plus the
        call's id (``callID``, which AgentUse does not read: what a resume in another
        process finds the gate by). The exchange stays open; the resume records the call
        as a tool part of its own and completes the gate with the decision."""
        scope = self._scopes.pop(event.scope)
        for call in event.pending:
            if call.call_id in scope.gates:
                continue  # still waiting since an earlier suspension
            prompt = f"Approve {call.tool_name}?"
            question = {"prompt": prompt, "tool": call.tool_name,
                        "arguments": tool_input(call.arguments)}
            payload = {"kind": APPROVAL_KIND, "prompt": prompt, "callID": call.call_id}
            part = scope.message.add_part("tool", callID=f"approval_{call.call_id}",
                                          tool=APPROVAL_TOOL,
                                          state={"status": "pending", "input": question,
                                                 "suspendedAt": event.at,
                                                 "resumePayload": payload})
            # resolved, the gate keeps the payload in state.metadata, as AgentUse's does
            scope.gates[call.call_id] = _Tool(part, question, event.at,
                                              metadata={"resumePayload": payload})
        scope.session.set_status("suspended", at=event.at)
        self._suspended = scope
        self._ended(event.scope)

    def _ended(self, scope: str) -> None:
        """A run ended: the conversation's own run lets the recording lock go (once its
        files are written)."""
        if scope == self._root:
            self._root = None
            self._writes.flush()
            self._lock.release()

    def _run_finished(self, event: RunFinished) -> None:
        scope = self._scopes.pop(event.scope)
        self._close_open_tools(scope, event.at, "the run ended before the tool finished")
        scope.message.complete(at=event.at)
        scope.session.set_status("completed", at=event.at)
        self._report_to_parent(scope, event.at)
        self._ended(event.scope)

    def _run_failed(self, event: RunFailed) -> None:
        scope = self._scopes.pop(event.scope, None)
        if scope is None:
            return
        self._close_open_tools(scope, event.at, f"{event.error_type}: {event.message}")
        scope.message.fail(event.message, event.error_type)
        # AgentUse's error part: what its session view shows as "✗ Run error (CODE): ..."
        scope.message.add_error(
            event.message, code=event.code,
            detail=event.detail or f"{event.error_type}: {event.message}",
            status_code=event.details.get("statusCode"), at=event.at)
        scope.session.set_status("error", at=event.at, error={
            "code": event.code, "message": event.message, **event.details})
        self._report_to_parent(scope, event.at)
        self._ended(event.scope)
