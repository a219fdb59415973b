"""agentrun ``Message`` lines recorded into every layout, as a run of the SDK records them.

agentrun (Go) drives agent runtimes through one output vocabulary
(:mod:`sessiontape.storage.agentrun`). :class:`AgentrunIngest` takes its messages one line
at a time, as an orchestrator emits them (live, on stdin), and turns them into the
recorder's own events (:mod:`sessiontape.storage.events`) for a :class:`Recorder` of the
conversation, whose writer thread and sinks write the AgentUse tree and the replay log
as for any run; each turn's items (the prompt, the texts, the calls and their outputs)
go to the item store, so the conversation can be continued. :func:`ingest_agentrun`
records a whole stream.

How the stream is read:

- ``init`` names the conversation: ``resume_id`` is its session name (unless one was
  given), ``init.agent_name`` and ``init.model`` its agent and model. Another ``init``
  with another ``resume_id`` goes on in that conversation.
- A turn begins with its first message after the previous turn's ``result``; agentrun has
  no message for the prompt, so a ``system`` message that opens a turn is its prompt (as
  sessiontape's export writes it), and a turn opened by anything else has none.
- ``thinking``, ``text`` (or their deltas, joined) and ``tool_use`` messages with no
  ``tool_result`` between them are one model call's response.
- A ``tool_result`` ends the oldest open call of that tool (agentrun's calls carry no id);
  an ``error`` of code ``tool_failed`` just after it marks that call failed.
- A ``system`` message while a call is open begins a subagent run inside that call (its
  task), which the call's ``tool_result`` ends.
- ``result`` ends the turn, with the turn's usage and cost (else the sum of the usage the
  turn's other messages carried; a cost the stream does not give is priced as a run's
  is). A turn whose last ``error`` has no ``result`` stop reason after it failed; one
  marked ``turn_unfinished``, or cut off by the end of the stream or an ``eof``, is left
  unfinished, as a run that was killed.

A line that is not JSON, not an object, or of an unknown ``type`` is reported with its
line number (a last line without its newline: torn) and the rest is recorded. Messages
no layout holds (``context_window``, ``tool_use_delta``, a ``system`` status inside a
turn) are counted in :attr:`IngestSummary.ignored`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import IO, Any, cast

from agents.items import TResponseInputItem

from sessiontape.storage import agentrun as vocab
from sessiontape.storage.events import (
    AgentEnded,
    AgentInfo,
    AgentStarted,
    Event,
    ModelCallFinished,
    ModelCallStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    SubagentStarted,
    Tokens,
    ToolFailed,
    ToolFinished,
    ToolStarted,
    Usage,
)
from sessiontape.storage.ids import new_ulid
from sessiontape.storage.json_style import loads
from sessiontape.storage.names import DEFAULT_USER_ID, default_session_name
from sessiontape.storage.times import iso_to_ms, now_ms

from .recorder import Recorder, check_names
from .writer import WRITER

__all__ = ["AgentrunIngest", "IngestSummary", "ingest_agentrun", "lines_of"]

DEFAULT_AGENT = "agentrun"  # the agent of a stream that names none
_READ_SIZE = 1 << 16
# the types no layout holds: counted, not recorded
_IGNORED = {"context_window", "tool_use_delta"}
_KNOWN = {"init", "system", "text", "text_delta", "thinking", "thinking_delta", "tool_use",
          "tool_result", "error", "result", "eof"} | _IGNORED


@dataclass
class IngestSummary:
    """What :func:`ingest_agentrun` recorded: the messages read, the turns and tool calls
    recorded, each conversation (``user/session``, in the order first seen), the lines it
    could not read (``problems``: ``line N: why``), the messages no layout holds
    (``ignored``, by type) and the recording errors (each logged once)."""

    messages: int = 0
    turns: int = 0
    tool_calls: int = 0
    conversations: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)
    recording_errors: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"messages": self.messages, "turns": self.turns,
                "tool_calls": self.tool_calls, "conversations": self.conversations,
                "problems": self.problems, "ignored": dict(sorted(self.ignored.items())),
                "recording_errors": self.recording_errors}


def sdk_model(model: str) -> str:
    """A model as agentrun names it, as the recorder's ``provider:model``: ``provider/model``
    (a report's spelling) becomes ``provider:model``; a bare name is the ``agentrun``
    provider's."""
    if ":" in model:
        return model
    provider, slash, rest = model.partition("/")
    return f"{provider}:{rest}" if slash and provider and rest else f"{DEFAULT_AGENT}:{model}"


class _Unusable(ValueError):
    """A message that cannot be recorded as it says (the line is reported)."""


@dataclass
class _Call:
    call_id: str
    name: str
    arguments: str
    child: _Frame | None = None


@dataclass
class _Frame:
    """One run of the turn: the turn's own, or a subagent's inside a call."""

    scope: str
    agent: str
    model: str
    calls: list[_Call] = field(default_factory=list)  # open, oldest first
    responding: bool = False  # a model call's response is being read
    reasoning: list[str] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)  # (item id, text)
    answer: str = ""  # the last text


@dataclass
class _Ended:
    """A call's ``tool_result``, held back for an ``error`` that may say it failed."""

    frame: _Frame
    call: _Call
    output: str
    at: int
    error: str | None = None


@dataclass
class _Turn:
    frames: list[_Frame]  # the turn's run, then the subagents going on inside it, innermost last
    items: list[dict[str, Any]] = field(default_factory=list)  # the model's memory of it
    spent: Tokens = field(default_factory=Tokens)  # usage carried by messages other than result
    spent_cost: float = 0.0
    priced: bool = False  # a message's usage gave a cost
    error: str | None = None  # the last error since the turn's last text or call
    unfinished: bool = False
    ended: _Ended | None = None
    # text or thinking in pieces: its type, the pieces joined, when the last one came
    delta: tuple[str, str, int] | None = None


class _Conversation:
    def __init__(self, recorder: Recorder, agent: str, model: str) -> None:
        self.recorder = recorder
        self.agent, self.model = agent, model
        self.turn: _Turn | None = None


class AgentrunIngest:
    """Records agentrun messages, fed one line at a time with :meth:`feed`, into the
    conversations they name (one :class:`Recorder` each, made with ``recorder_options``);
    :meth:`aclose` ends the stream (a turn still going on is left unfinished)."""

    def __init__(self, *, user_id: str = DEFAULT_USER_ID, session_name: str | None = None,
                 **recorder_options: Any) -> None:
        check_names(user_id, session_name or "unnamed")  # ValueError, at once
        self.user_id = user_id
        self.session_name = session_name  # given: every conversation of the stream goes here
        self.options = recorder_options
        self.summary = IngestSummary()
        self._conversations: dict[str, _Conversation] = {}
        self._current: _Conversation | None = None
        self._default_name: str | None = None
        self._last_at = 0  # the latest time a message gave: when an unfinished turn ends

    # -- lines ------------------------------------------------------------------------

    async def feed(self, number: int, line: bytes | str, *, torn: bool = False) -> None:
        """Record line ``number`` of the stream (``torn``: the stream ended inside it)."""
        if not line.strip():
            return
        try:
            message = loads(line)
        except ValueError as exc:
            why = "torn: the stream ended inside it" if torn else f"not JSON ({exc})"
            self.summary.problems.append(f"line {number}: {why}")
            return
        kind = message.get("type") if isinstance(message, dict) else None
        if kind not in _KNOWN:
            why = (f"unknown message type {kind!r}" if isinstance(message, dict)
                   else "not a JSON object")
            self.summary.problems.append(f"line {number}: {why}")
            return
        self.summary.messages += 1
        if kind in _IGNORED:
            self.summary.ignored[kind] += 1
            return
        try:
            await self._message(kind, message)
        except _Unusable as exc:
            self.summary.problems.append(f"line {number}: {exc}")

    async def _message(self, kind: str, message: dict[str, Any]) -> None:
        at = iso_to_ms(message.get("timestamp"))
        at = at if at is not None and at > 0 else now_ms()
        self._last_at = max(self._last_at, at)
        said = message.get("content")
        content = said if isinstance(said, str) else ""
        if kind == "init":
            await self._init(message)
            return
        conversation = self._conversation()
        turn = conversation.turn
        if turn is not None:
            self._join_deltas(conversation, turn, kind, content)
            if turn.ended is not None and not (kind == "error" and message.get("error_code")
                                               == vocab.TOOL_FAILED):
                self._end_call(conversation, turn)
        if kind == "eof":
            await self._leave_turn(conversation)
        elif kind == "result":
            await self._result(conversation, message, at, content)
        elif kind == "error":
            self._error(conversation, message, content)
        elif kind == "system":
            await self._system(conversation, at, content)
        else:
            turn = await self._turn(conversation, at, "")
            self._carried(turn, message.get("usage"))
            frame = turn.frames[-1]
            if kind in ("text_delta", "thinking_delta"):
                base = kind.removesuffix("_delta")
                joined = turn.delta[1] if turn.delta is not None else ""
                turn.delta = (base, joined + content, at)
            elif kind in ("text", "thinking"):
                self._said(conversation, turn, frame, kind, content, at)
            elif kind == "tool_use":
                self._tool_use(conversation, turn, frame, message.get("tool"), at)
            elif kind == "tool_result":
                self._tool_result(conversation, turn, message.get("tool"), at)

    # -- conversations and turns --------------------------------------------------------

    async def _init(self, message: dict[str, Any]) -> None:
        given = message.get("init")
        init: dict[str, Any] = given if isinstance(given, dict) else {}
        resume = message.get("resume_id")
        if self.session_name is None and isinstance(resume, str) and resume:
            name = resume
        else:
            name = self.session_name or self._default()
        if name not in self._conversations:
            try:
                check_names(self.user_id, name)
            except ValueError as exc:
                raise _Unusable(f"cannot record a conversation named {name!r} ({exc}); its "
                                "messages go on where the stream was") from None
        if self._current is not None and self._current is not self._conversations.get(name):
            await self._leave_turn(self._current)
        conversation = self._conversation(name)
        agent, model = init.get("agent_name"), init.get("model")
        if isinstance(agent, str) and agent:
            conversation.agent = agent
        if isinstance(model, str) and model:
            conversation.model = sdk_model(model)

    def _default(self) -> str:
        if self._default_name is None:
            self._default_name = default_session_name()
        return self._default_name

    def _conversation(self, name: str | None = None) -> _Conversation:
        if name is None:
            if self._current is not None:
                return self._current
            name = self.session_name or self._default()
        conversation = self._conversations.get(name)
        if conversation is None:
            recorder = Recorder(self.user_id, name, **self.options)
            conversation = self._conversations[name] = _Conversation(
                recorder, DEFAULT_AGENT, f"{DEFAULT_AGENT}:unknown")
            self.summary.conversations.append(f"{self.user_id}/{name}")
        self._current = conversation
        return conversation

    async def _turn(self, conversation: _Conversation, at: int, prompt: str) -> _Turn:
        """The conversation's turn going on, else a new one with ``prompt``."""
        if conversation.turn is not None:
            return conversation.turn
        recorder = conversation.recorder
        recorder.take_turn_now()
        scope = recorder.begin_run(streamed=False, run_config=None)
        frame = _Frame(scope.id, conversation.agent, conversation.model)
        turn = conversation.turn = _Turn([frame])
        info = AgentInfo(name=frame.agent, model=frame.model)
        self._emit(conversation, RunStarted(frame.scope, at, info, prompt, prompt))
        self._emit(conversation, AgentStarted(frame.scope, at, frame.agent))
        if prompt:
            turn.items.append({"role": "user", "content": prompt})
        self.summary.turns += 1
        return turn

    async def _system(self, conversation: _Conversation, at: int, content: str) -> None:
        turn = conversation.turn
        if turn is None:
            await self._turn(conversation, at, content)
            return
        frame = turn.frames[-1]
        opened = next((call for call in reversed(frame.calls) if call.child is None), None)
        if opened is None:
            self.summary.ignored["system"] += 1  # a status: no layout holds it
            return
        child = _Frame(new_ulid(), opened.name, frame.model)
        opened.child = child
        turn.frames.append(child)
        self._emit(conversation, SubagentStarted(frame.scope, at, opened.call_id, child.scope,
                                                 AgentInfo(name=child.agent, model=child.model),
                                                 content))
        self._emit(conversation, AgentStarted(child.scope, at, child.agent))

    def _join_deltas(self, conversation: _Conversation, turn: _Turn, kind: str,
                     content: str) -> None:
        """Pieces of a text or reasoning become one when something else comes: the whole
        ``text`` (or ``thinking``) a backend sends after its pieces replaces them."""
        if turn.delta is None or kind == f"{turn.delta[0]}_delta":
            return
        base, joined, at = turn.delta
        turn.delta = None
        if kind != base:
            self._said(conversation, turn, turn.frames[-1], base, joined, at)

    # -- what the agent says and does ---------------------------------------------------

    def _respond(self, conversation: _Conversation, frame: _Frame, at: int) -> None:
        if not frame.responding:
            frame.responding = True
            frame.reasoning, frame.texts = [], []
            self._emit(conversation, ModelCallStarted(frame.scope, at, frame.agent, frame.model))

    def _responded(self, conversation: _Conversation, frame: _Frame, at: int,
                   usage: Usage | None = None) -> None:
        if frame.responding:
            frame.responding = False
            self._emit(conversation, ModelCallFinished(
                frame.scope, at, frame.agent, frame.model, usage or Usage(),
                tuple(frame.reasoning), tuple(frame.texts)))

    def _said(self, conversation: _Conversation, turn: _Turn, frame: _Frame, kind: str,
              content: str, at: int) -> None:
        self._respond(conversation, frame, at)
        turn.error = None
        if not content:
            return
        if kind == "thinking":
            frame.reasoning.append(content)
            return
        item_id = f"msg_{new_ulid()}"
        frame.texts.append((item_id, content))
        frame.answer = content
        if len(turn.frames) == 1:
            turn.items.append({"type": "message", "role": "assistant", "id": item_id,
                               "status": "completed", "content": [
                                   {"type": "output_text", "text": content,
                                    "annotations": [], "logprobs": []}]})

    def _tool_use(self, conversation: _Conversation, turn: _Turn, frame: _Frame, tool: Any,
                  at: int) -> None:
        tool = tool if isinstance(tool, dict) else {}
        name = tool.get("name") if isinstance(tool.get("name"), str) else ""
        call = _Call(f"call_{new_ulid()}", name or "tool", vocab.raw_text(tool.get("input")))
        self._respond(conversation, frame, at)
        self._responded(conversation, frame, at)
        turn.error = None
        frame.calls.append(call)
        self.summary.tool_calls += 1
        if len(turn.frames) == 1:
            turn.items.append({"type": "function_call", "call_id": call.call_id,
                               "name": call.name, "arguments": call.arguments,
                               "id": f"fc_{new_ulid()}", "status": "completed"})
        self._emit(conversation, ToolStarted(frame.scope, at, frame.agent, call.call_id,
                                             call.name, call.arguments))

    def _tool_result(self, conversation: _Conversation, turn: _Turn, tool: Any,
                     at: int) -> None:
        tool = tool if isinstance(tool, dict) else {}
        name = tool.get("name") if isinstance(tool.get("name"), str) else ""
        output = vocab.raw_text(tool.get("output"))
        found = self._open_call(turn, name)
        if found is None:  # a result whose call the stream did not show: the call is made up
            self._tool_use(conversation, turn, turn.frames[-1], {"name": name}, at)
            found = self._open_call(turn, name)
            assert found is not None
        depth, call = found
        while len(turn.frames) > depth + 1:  # the subagents inside this call are done
            self._end_frame(conversation, turn.frames.pop(), at)
        frame = turn.frames[depth]
        self._responded(conversation, frame, at)
        frame.calls.remove(call)
        turn.error = None
        turn.ended = _Ended(frame, call, output, at)

    @staticmethod
    def _open_call(turn: _Turn, name: str) -> tuple[int, _Call] | None:
        """The open call a ``tool_result`` of ``name`` ends: the oldest of that tool in the
        innermost run that has one, else the innermost run's oldest."""
        for depth in range(len(turn.frames) - 1, -1, -1):
            for call in turn.frames[depth].calls:
                if call.name == name:
                    return depth, call
        for depth in range(len(turn.frames) - 1, -1, -1):
            if turn.frames[depth].calls:
                return depth, turn.frames[depth].calls[0]
        return None

    def _end_call(self, conversation: _Conversation, turn: _Turn) -> None:
        ended, turn.ended = turn.ended, None
        assert ended is not None
        frame, call = ended.frame, ended.call
        if ended.error is not None:
            self._emit(conversation, ToolFailed(frame.scope, ended.at, call.call_id,
                                                ended.error))
        self._emit(conversation, ToolFinished(frame.scope, ended.at, frame.agent, call.call_id,
                                              call.name, ended.output))
        if frame is turn.frames[0]:
            turn.items.append({"type": "function_call_output", "call_id": call.call_id,
                               "output": ended.output})

    def _end_frame(self, conversation: _Conversation, frame: _Frame, at: int) -> None:
        """A subagent's run is done (its call's result came)."""
        self._responded(conversation, frame, at)
        self._emit(conversation, AgentEnded(frame.scope, at, frame.agent))
        self._emit(conversation, RunFinished(frame.scope, at, frame.answer, frame.model))

    def _error(self, conversation: _Conversation, message: dict[str, Any], content: str) -> None:
        turn = conversation.turn
        code = message.get("error_code")
        if turn is None:
            self.summary.ignored["error"] += 1  # outside a turn: no layout holds it
        elif code == vocab.TOOL_FAILED and turn.ended is not None:
            turn.ended.error = content or "the tool failed"
            self._end_call(conversation, turn)
        elif code == vocab.TURN_UNFINISHED:
            turn.unfinished = True
        else:
            turn.error = content or (code if isinstance(code, str) and code else "error")

    def _carried(self, turn: _Turn, usage: Any) -> None:
        """Usage on a message other than ``result`` (agentrun's backends put it on texts)."""
        tokens, cost = vocab.spent(usage)
        turn.spent = turn.spent + tokens
        if cost is not None:
            turn.spent_cost += cost
            turn.priced = True

    async def _result(self, conversation: _Conversation, message: dict[str, Any], at: int,
                      content: str) -> None:
        turn = await self._turn(conversation, at, "")
        recorder = conversation.recorder
        root = turn.frames[0]
        while len(turn.frames) > 1:  # subagents whose call never ended
            self._end_frame(conversation, turn.frames.pop(), at)
        tokens, cost = vocab.spent(message.get("usage"))
        if tokens == Tokens() and cost is None:
            tokens, cost = turn.spent, turn.spent_cost if turn.priced else None
        if cost is None:
            cost = recorder.prices.cost(root.model, tokens) if tokens != Tokens() else 0.0
        usage = Usage(tokens, cost)
        if not root.responding and usage != Usage():  # the usage needs a model call to hold it
            self._respond(conversation, root, at)
        self._responded(conversation, root, at, usage)
        stop = message.get("stop_reason")
        failed = turn.error is not None and not (isinstance(stop, str) and stop)
        await self._close_turn(conversation, at, None if turn.unfinished else (
            RunFailed(root.scope, at, "EXECUTION_ERROR", turn.error or "", "AgentrunError",
                      root.model, detail=turn.error or "") if failed else
            RunFinished(root.scope, at, content or root.answer, root.model)))

    async def _leave_turn(self, conversation: _Conversation) -> None:
        """The stream has no more of the turn going on: it is left unfinished, ending when
        the stream last said something."""
        if conversation.turn is not None:
            await self._close_turn(conversation, self._last_at or now_ms(), None)

    async def _close_turn(self, conversation: _Conversation, at: int,
                          end: RunFinished | RunFailed | None) -> None:
        turn, conversation.turn = conversation.turn, None
        assert turn is not None
        recorder = conversation.recorder
        try:
            if turn.ended is not None:
                self._end_call(conversation, turn)
            for frame in reversed(turn.frames):  # what a cut-off response said is kept
                self._responded(conversation, frame, at)
            await recorder.session.add_items(cast(list[TResponseInputItem], turn.items))
            if end is not None:
                self._emit(conversation, AgentEnded(end.scope, at, turn.frames[0].agent))
                await recorder.end_run(recorder.session)
                self._emit(conversation, end)
        finally:
            recorder.end_turn()
        # Not waiting for the writer after each turn (the turn is on disk a batch window
        # later, as a run's): only for room, when it is far behind a fast stream.
        await WRITER.room()

    @staticmethod
    def _emit(conversation: _Conversation, event: Event) -> None:
        conversation.recorder.submit(event)

    # -- the end ------------------------------------------------------------------------

    async def aclose(self) -> IngestSummary:
        """The stream ended: a turn going on is left unfinished; everything is written and
        each recorder closed. Returns the summary."""
        try:
            for conversation in self._conversations.values():
                await self._leave_turn(conversation)
        finally:
            for conversation in self._conversations.values():
                await conversation.recorder.aclose()
                self.summary.recording_errors += conversation.recorder.errors
        return self.summary


async def lines_of(stream: IO[bytes]) -> AsyncIterator[tuple[bytes, bool]]:
    """The lines of a binary stream as they arrive (a pipe's too), read off the event
    loop: each ``(line, torn)``, ``torn`` for a last line the stream ended inside."""
    read = getattr(stream, "read1", stream.read)
    rest = b""
    while True:
        chunk = await asyncio.to_thread(read, _READ_SIZE)
        if not chunk:
            break
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            yield line, False
    if rest:
        yield rest, True


async def ingest_agentrun(source: AsyncIterable[tuple[bytes, bool]] | Iterable[bytes | str],
                          *, user_id: str = DEFAULT_USER_ID, session_name: str | None = None,
                          **recorder_options: Any) -> IngestSummary:
    """Record a stream of agentrun Message lines (an iterable of lines, or the
    ``(line, torn)`` pairs of :func:`lines_of`) for ``user_id``: into ``session_name``, else
    each conversation the stream's ``init`` names. ``recorder_options`` go to each
    :class:`Recorder` (``project_root``, ``redact``...)."""
    ingest = AgentrunIngest(user_id=user_id, session_name=session_name, **recorder_options)
    try:
        if isinstance(source, AsyncIterable):
            number = 0
            async for line, torn in source:
                number += 1
                await ingest.feed(number, line, torn=torn)
        else:
            for number, text in enumerate(source, 1):
                await ingest.feed(number, text)
    finally:
        summary = await ingest.aclose()
    return summary
