"""One recorded conversation read from its layouts: the read model's sessions, exchanges,
messages and tool calls.

:func:`read_conversation` reads a :class:`LedgerConversation` (its user, session name,
AgentUse directory and replay log; named for the Ledger export, its first reader) from its
AgentUse tree when it has one (ids, times, parts, subagents), with the turns of its JSONL
replay log that name no exchange of the tree (skilled_crew's;
:mod:`sessiontape.storage.catalog.timeline`), else from its log alone (turns; a subagent
run is the steps that share a ``parentCallId``). Models are spelled as the log spells
them, ``provider/model``, whichever layout they are read from (:func:`reported_model`).
The catalog index (:mod:`~sessiontape.storage.catalog.rows`) and every export
(:mod:`sessiontape.storage.exports`) read conversations through it. This module only
reads the layouts.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agentuse.liveness import reported_status
from ..agentuse.reader import CorruptFileError, LoadedMessage, LoadedSession, load_session
from ..json_style import dumps_compact, loads
from ..names import reported_model
from ..skillet.items import input_text
from ..skillet.log_entries import step_failed, step_of
from ..skillet.log_reader import LogEntry, SessionLogReader, Turn, group_turns
from ..times import iso_to_ms
from .timeline import ExchangeKey, TurnKey, align

__all__ = [
    "Call",
    "Exchange",
    "LedgerConversation",
    "LedgerSourceError",
    "Message",
    "ModelCall",
    "Session",
    "conversation_name",
    "read_conversation",
    "response_of",
    "task_text",
    "without_empty",
]

# A layout's status as the ledger says it (others, such as running or pending, stay as they are).
_STATUS = {"completed": "completed", "error": "failed", "crashed": "failed"}
# Parts that mark structure or are AgentUse's debug lines, not messages.
_SKIPPED_PARTS = frozenset(("step-start", "step-finish", "log"))
# Keys of a part that the row holds elsewhere (id, content, time, the tool call).
_PART_KEYS = frozenset(("id", "sessionID", "messageID", "type", "text", "message", "time",
                        "callID", "tool", "state", "agent", "model"))

class LedgerSourceError(ValueError):
    """A conversation has nothing to export from (no tree, no log), or none can be read."""


@dataclass(frozen=True)
class LedgerConversation:
    """One conversation to export, as the caller found it: its user (None for a session
    AgentUse wrote), session name, AgentUse session directory and replay log (either may be
    None), and ``origin`` (who wrote it: ``sessiontape``, ``agentuse``, ``skilled_crew``),
    which becomes ``agent_sessions.source``."""

    user_id: str | None
    session_name: str
    agentuse_dir: Path | None
    log_path: Path | None
    origin: str

# -- what both layouts are read into ----------------------------------------------------


@dataclass
class _Call:
    """A tool call; ``child_ref`` is the subagent session id its tree part names."""

    call_id: str | None
    name: str | None
    params: str | None
    status: str | None = None
    result: str | None = None
    started: int | None = None
    completed: int | None = None
    error: str | None = None
    child_ref: str | None = None
    child: _Session | None = None
    id: str = ""
    ended_by: Any = None  # the log line that ended it (a tree's part holds both ends)

    @property
    def output(self) -> str | None:
        """The call's result as the tool gave it: a JSON string's text, else its JSON."""
        if self.result is None:
            return None
        try:
            value = loads(self.result)
        except ValueError:
            return self.result
        return value if isinstance(value, str) else self.result

    @property
    def failed(self) -> bool:
        """Whether the call ended in an error (its output, if any, is the error's)."""
        return self.status in ("failed", "error") or self.error is not None


@dataclass
class _Message:
    """One ``agent_messages`` row; ``preferred`` is the layout's id for it, if any;
    ``source`` the record it was read from (a tree's part or ``message.json``, a log's
    line)."""

    role: str
    content: str
    timestamp: int | None
    metadata: dict[str, Any]
    preferred: str | None = None
    call: _Call | None = None
    id: str = ""
    source: Any = None

    @property
    def kind(self) -> Any:
        return self.metadata.get("kind")


@dataclass(frozen=True)
class ModelCall:
    """One model call: a ``step-finish`` part or a ``model_call`` line (tokens in the
    log's ``usage`` names)."""

    agent: str | None
    model: str | None
    tokens: dict[str, Any]
    cost: float
    at: int | None


@dataclass
class _Exchange:
    """One turn: its messages in order, the model that answered, tokens and cost, and its
    model calls (as the layout lists them)."""

    messages: list[_Message] = field(default_factory=list)
    preferred: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None
    completed: int | None = None
    model_calls: list[ModelCall] = field(default_factory=list)
    names: str | None = None  # the AgentUse session a log turn names (its ``sessionId``)
    id: str = ""

    def add_usage(self, tokens: dict[str, Any], cost: Any) -> None:
        """Add one model call's (or the whole exchange's) tokens and cost."""
        usage = self.usage or {"inputTokens": 0, "outputTokens": 0, "reasoningTokens": 0,
                               "cachedTokens": 0, "cost": 0}
        for key in ("inputTokens", "outputTokens", "reasoningTokens", "cachedTokens"):
            usage[key] += _int(tokens.get(key)) or 0
        usage["cost"] += _number(cost)
        self.usage = usage


@dataclass
class _Session:
    """One ``agent_sessions`` row with its turns and its subagents."""

    seed: str
    preferred: str | None
    source: str
    model: str | None = None
    workspace: str | None = None
    created_at: int | None = None
    exchanges: list[_Exchange] = field(default_factory=list)
    subagents: list[_Session] = field(default_factory=list)
    parent: _Session | None = None
    spawn: _Message | None = None  # the parent's tool call message that ran it
    task_status: str | None = None
    context_limit: int | None = None
    context_used: int | None = None
    agentic: bool = False
    agent: str | None = None   # the session's agent (a log's: its first)
    status: str | None = None  # the layout's own status (a tree's, as reported)
    id: str = ""

    def adopt(self, child: _Session, spawn: _Message | None) -> None:
        """Make ``child`` a subagent run by the call of ``spawn`` (None: not found)."""
        child.parent, child.spawn = self, spawn
        if spawn is not None and spawn.call is not None:
            spawn.call.child = child
        self.subagents.append(child)


# -- small readers ----------------------------------------------------------------------


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _model(value: Any) -> str | None:
    """A model as it is reported, whichever layout spells it (:func:`reported_model`)."""
    return reported_model(_str(value))


def _int(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return None


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0


def _status(status: Any) -> str | None:
    """A layout's status as the ledger says it (``error`` is ``failed``)."""
    return _STATUS.get(status, status) if isinstance(status, str) else None


def _json_text(value: Any) -> str:
    """``value`` as a JSON document: a string that is JSON already as it is (tool arguments,
    a JSON result), another string as a JSON string, anything else as compact JSON."""
    if isinstance(value, str):
        try:
            loads(value)
        except ValueError:
            return dumps_compact(value).decode()
        return value
    return dumps_compact(value).decode()


def task_text(params: str | None) -> str | None:
    """What a subagent was asked: the one string argument of its call (``{"input": ...}``,
    AgentUse's ``{"task": ...}``), else the arguments as they are."""
    try:
        value = loads(params) if params is not None else None
    except ValueError:
        return params
    if isinstance(value, dict) and len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str):
            return only
    return params


def without_empty(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` without its empty entries."""
    return {key: value for key, value in metadata.items() if value is not None}


def _tokens(tokens: dict[str, Any]) -> dict[str, Any]:
    """An AgentUse ``tokens`` object in the log's ``usage`` names."""
    return {"inputTokens": tokens.get("input"), "outputTokens": tokens.get("output"),
            "reasoningTokens": tokens.get("reasoning"),
            "cachedTokens": _obj(tokens.get("cache")).get("read")}


def _context(tokens: dict[str, Any]) -> int | None:
    """The context a model call ended with: its input and output tokens."""
    used = [_int(tokens.get(key)) for key in ("inputTokens", "outputTokens")]
    return sum(n for n in used if n is not None) if any(n is not None for n in used) else None


# -- the AgentUse tree ------------------------------------------------------------------


def _prompt(info: dict[str, Any]) -> str:
    """An exchange's prompt: ``user.prompt.task``, and ``user.prompt.user`` when given."""
    prompt = _obj(_obj(info.get("user")).get("prompt"))
    return "\n".join(str(prompt[key]) for key in ("task", "user") if prompt.get(key))


def _tree_call(part: dict[str, Any]) -> _Call:
    state = _obj(part.get("state"))
    times = _obj(state.get("time"))
    status = state.get("status")
    error = state.get("error") if status == "error" else None
    output = error if error is not None else state.get("output")
    return _Call(_str(part.get("callID")), _str(part.get("tool")),
                 _json_text(state["input"]) if "input" in state else None, _status(status),
                 None if output is None else _json_text(output),
                 _int(times.get("start")), _int(times.get("end")),
                 error if isinstance(error, str) else None,
                 _str(_obj(state.get("metadata")).get("sessionID")))


def _part_time(part: dict[str, Any]) -> int | None:
    times = _obj(part.get("time")) or _obj(_obj(part.get("state")).get("time"))
    return _int(times.get("start"))


def _part_message(part: dict[str, Any], agent: str | None, model: str | None,
                  at: int | None) -> _Message:
    """A part as a row: a tool call with its call, any other part with its text (or message)
    as the content and its own fields in the metadata."""
    kind = str(part.get("type"))
    extra = {key: value for key, value in part.items() if key not in _PART_KEYS}
    metadata = without_empty({"kind": kind, "agent": agent, "model": model, **extra})
    when = _part_time(part) or at
    if kind == "tool":
        return _Message("assistant", "", when, metadata, _str(part.get("id")), _tree_call(part),
                        source=part)
    content = part.get("text", part.get("message"))
    return _Message("assistant", "" if content is None else str(content), when, metadata,
                    _str(part.get("id")), source=part)


class _TreeReader:
    """Reads one AgentUse session (and its subagents, recursively) into a :class:`_Session`."""

    def __init__(self, loaded: LoadedSession, source: str) -> None:
        info = loaded.info
        self.loaded = loaded
        self.agent = _str(_obj(info.get("agent")).get("name"))
        self.session = _Session(
            str(loaded.directory), _str(info.get("id")), source, _model(info.get("model")),
            _str(_obj(info.get("project")).get("root")),
            _int(_obj(info.get("time")).get("created")),
            agentic=bool(loaded.tools), agent=self.agent)
        self.session.status = reported_status(info, loaded.directory)
        self.session.task_status = _status(self.session.status)
        self.calls: list[_Message] = []

    def read(self) -> _Session:
        for message in self.loaded.messages:
            self.session.exchanges.append(self._exchange(message))
        self.session.agentic = self.session.agentic or bool(self.calls)
        used: set[int] = set()
        for sub in self.loaded.subagents:
            child = _TreeReader(sub, self.session.source).read()
            self.session.adopt(child, self._spawning_call(child, used))
        return self.session

    def _exchange(self, message: LoadedMessage) -> _Exchange:
        info = message.info
        times = _obj(info.get("time"))
        created = _int(times.get("created"))
        assistant = _obj(info.get("assistant"))
        exchange = _Exchange(preferred=_str(info.get("id")), model=_model(assistant.get("modelID")),
                             completed=_int(times.get("completed")))
        system = assistant.get("system")
        exchange.messages += [_Message("system", text, created, {"kind": "system"}, source=info)
                              for text in (system if isinstance(system, list) else [])
                              if isinstance(text, str)]
        exchange.messages.append(_Message("user", _prompt(info), created, {"kind": "prompt"},
                                          source=info))
        self._parts(message.parts, exchange, created)
        if isinstance(assistant.get("tokens"), dict):
            exchange.add_usage(_tokens(assistant["tokens"]), assistant.get("cost"))
        context = _obj(assistant.get("context"))  # AgentUse's own: the context window
        self.session.context_limit = _int(context.get("contextLimit")) \
            or self.session.context_limit
        self.session.context_used = _int(context.get("activeTokens")) \
            or self.session.context_used
        return exchange

    def _parts(self, parts: list[dict[str, Any]], exchange: _Exchange, at: int | None) -> None:
        """The exchange's parts as rows; step parts name the agent and model of what
        follows (AgentUse writes none: its session's agent and the exchange's model)."""
        agent, model = self.agent, exchange.model
        for part in parts:
            kind = part.get("type")
            if kind == "step-start":
                agent, model = _str(part.get("agent")) or agent, _model(part.get("model")) or model
            elif kind == "step-finish":
                tokens = _tokens(_obj(part.get("tokens")))
                self.session.context_used = _context(tokens)
                times = _obj(part.get("time"))
                exchange.model_calls.append(ModelCall(
                    _str(part.get("agent")) or agent, _model(part.get("model")) or model, tokens,
                    _number(part.get("cost")), _int(times.get("end")) or _int(times.get("start"))))
            if kind in _SKIPPED_PARTS or not isinstance(kind, str):
                continue
            row = _part_message(part, agent, model, at)
            if row.call is not None:
                self.calls.append(row)
            exchange.messages.append(row)

    def _spawning_call(self, child: _Session, used: set[int]) -> _Message | None:
        """The call that ran ``child``: the tool part naming its session (ours), else
        (AgentUse's own ``subagent__*`` parts name none) the unused one of those that
        started nearest to the subagent's creation."""
        named = [m for m in self.calls if m.call and m.call.child_ref == child.preferred]
        unnamed = [m for m in self.calls if m.call and m.call.child_ref is None
                   and (m.call.name or "").startswith("subagent__") and id(m) not in used]
        created = child.created_at or 0
        candidates = named or sorted(unnamed, key=lambda m: abs((m.timestamp or 0) - created))
        if not candidates:
            return None
        used.add(id(candidates[0]))
        return candidates[0]


# -- the replay log ---------------------------------------------------------------------


@dataclass
class _Scope:
    """Where a log line's rows go: the conversation's session, or a subagent run's."""

    session: _Session
    exchange: _Exchange
    agent: str | None = None
    text: _Message | None = None  # the last row, if text: the next text step extends it
    # skilled_crew's steps have no callId: a tool's ends come in its starts' order
    open: defaultdict[tuple[str | None, str | None], deque[_Message]] = field(
        default_factory=lambda: defaultdict(deque))

    def add(self, message: _Message) -> _Message:
        self.exchange.messages.append(message)
        self.text = message if message.kind == "text" else None
        return message

    def answer(self, text: str, at: int | None, source: Any) -> None:
        """The exchange's answer, when the log has it only outside a ``text`` step (a
        ``final_result``, a subagent's result: ``source``)."""
        if not any(m.kind == "text" for m in self.exchange.messages):
            self.add(_Message("assistant", text, at, without_empty({"kind": "text",
                                                                "agent": self.agent}),
                              source=source))


def _turn_entries(entries: list[LogEntry]) -> Iterator[list[LogEntry]]:
    """The log's entries cut where :func:`group_turns` starts a turn: at each
    ``user_message`` and after each ``final_result``."""
    chunk: list[LogEntry] = []
    for entry in entries:
        if entry.kind == "user_message" and chunk:
            yield chunk
            chunk = []
        chunk.append(entry)
        if entry.kind == "final_result":
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _LogReader:
    """Reads a replay log into the conversation's :class:`_Session`; each subagent run (the
    steps and model calls with one ``parentCallId``) becomes a subagent session of the
    session that made that call."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.main = _Session(str(path), None, source)
        self.scope = _Scope(self.main, _Exchange())
        self.calls: dict[str, tuple[_Message, _Scope]] = {}  # by callId
        self.runs: dict[str, _Scope] = {}  # subagent runs by parentCallId
        self.problems: list[str] = []
        self.line: dict[str, Any] = {}  # the line being read: the source of its rows

    def read(self, tree: _Session | None = None) -> _Session:
        """The log's session. With ``tree`` (the conversation's, read from its AgentUse
        tree): when the log's turns and the tree's exchanges pair one for one
        (:func:`~sessiontape.storage.catalog.timeline.align`), the tree holds every turn
        and :func:`_with_log_turns` would take none from the log; the turns are then not
        read into rows, and the session returned has no exchanges, only when it began
        (all the tree takes from it)."""
        reader = SessionLogReader(self.path)
        entries = reader.entries()
        self.problems += [str(problem) for problem in reader.problems]
        chunks = []
        for chunk in _turn_entries(entries):
            turns = group_turns(chunk)
            if turns:
                chunks.append((chunk, turns[0]))
        if tree is not None and self._all_in(tree, [chunk for chunk, _ in chunks]):
            return self.main
        for chunk, turn in chunks:
            self._turn(chunk, turn)
        return self.main

    def _all_in(self, tree: _Session, chunks: list[list[LogEntry]]) -> bool:
        """Whether the turns of ``chunks`` and ``tree``'s exchanges pair one for one, as
        :func:`_with_log_turns` pairs them (each turn's key as :meth:`_turn` would read
        it: a chunk's ``user_message`` is its first entry); if so, the session's start is
        set as :meth:`_turn` sets it."""
        keys, created = [], None
        for chunk in chunks:
            first = chunk[0]
            if first.kind != "user_message":
                keys.append(TurnKey(None, "", None))
                continue
            at = iso_to_ms(first.timestamp)
            created = created or at
            keys.append(TurnKey(_str(first.data.get("sessionId")),
                                input_text(first.data.get("userInput"), "\n"), at))
        pairs = align(keys, [ExchangeKey(*_prompt_key(e)) for e in tree.exchanges],
                      tree.preferred)
        if any(t is None or e is None for t, e in pairs):
            return False
        self.main.created_at = created
        return True

    def _turn(self, entries: list[LogEntry], turn: Turn) -> None:
        self.scope = _Scope(self.main, _Exchange(), self.scope.agent)
        self.main.exchanges.append(self.scope.exchange)
        final: dict[str, Any] = {}
        for entry in entries:
            at = iso_to_ms(entry.timestamp)
            self.line = entry.data
            if entry.kind == "user_message":
                self._user_message(entry.data, at)
            elif entry.kind == "model_call":
                self._model_call(entry.data, at)
            elif entry.kind == "final_result":
                self.scope.exchange.completed, final = at, entry.data
            else:
                step = step_of(entry.kind, entry.data)
                if step is not None:
                    self._step(step, at)
        exchange = self.scope.exchange
        exchange.model = _model(turn.model) or exchange.model
        self.main.model = exchange.model or self.main.model
        if turn.complete and turn.text:
            self.scope.answer(turn.text, exchange.completed, final)

    def _user_message(self, data: dict[str, Any], at: int | None) -> None:
        self.scope.exchange.names = _str(data.get("sessionId"))
        self.main.created_at = self.main.created_at or at
        self.main.workspace = _str(data.get("projectRoot")) or self.main.workspace
        user_input = data.get("userInput")
        metadata = {"kind": "prompt"} if isinstance(user_input, str) \
            else {"kind": "prompt", "input": user_input}
        self.scope.add(_Message("user", input_text(user_input, "\n"), at, metadata,
                                source=self.line))

    def _scope_of(self, data: dict[str, Any], at: int | None) -> _Scope:
        """The scope of a line: its subagent run's (started at its first line), else the
        conversation's."""
        parent = _str(data.get("parentCallId"))
        if parent is None:
            return self.scope
        if parent not in self.runs:
            spawn, owner = self.calls.get(parent, (None, self.scope))
            child = _Session(f"{self.path}#run{len(self.runs)}", None, self.main.source,
                             workspace=self.main.workspace, created_at=at)
            scope = self.runs[parent] = _Scope(child, _Exchange())
            child.exchanges.append(scope.exchange)
            owner.session.adopt(child, spawn)
            if spawn is not None and spawn.call is not None:
                task = task_text(spawn.call.params)
                if task is not None:
                    scope.add(_Message("user", task, at, {"kind": "prompt"},
                                       source=spawn.source))
        return self.runs[parent]

    def _model_call(self, data: dict[str, Any], at: int | None) -> None:
        scope = self._scope_of(data, at)
        agent, model = _str(data.get("agentName")) or scope.agent, _model(data.get("model"))
        tokens = _obj(data.get("usage"))
        scope.exchange.add_usage(tokens, data.get("cost"))
        scope.exchange.model_calls.append(ModelCall(agent, model, tokens,
                                                    _number(data.get("cost")), at))
        scope.exchange.model = model or scope.exchange.model
        scope.session.model = model or scope.session.model
        scope.session.context_used = _context(tokens)
        reasoning = data.get("reasoning")
        for text in reasoning if isinstance(reasoning, list) else []:
            metadata = {"kind": "reasoning", "agent": agent, "model": model}
            scope.add(_Message("assistant", str(text), at, without_empty(metadata),
                               source=self.line))

    def _step(self, step: dict[str, Any], at: int | None) -> None:
        scope = self._scope_of(step, at)
        kind = step.get("type")
        agent = _str(step.get("agentName")) or scope.agent
        if kind in ("agent_start", "handoff"):
            scope.agent = _str(step.get("toAgentName" if kind == "handoff" else "agentName"))
            scope.session.agent = scope.session.agent or scope.agent
        if kind == "text" and scope.text is not None:
            scope.text.content += str(step.get("text", ""))
        elif kind == "agent_tool_start":
            self._tool_start(scope, step, agent, at)
        elif kind == "agent_tool_end":
            self._tool_end(scope, step, agent, at)
        elif kind == "handoff":
            scope.add(_Message("assistant", "", at, without_empty(
                {"kind": "handoff", "agent": agent, "toAgent": step.get("toAgentName")}),
                source=self.line))
        elif kind not in ("agent_start", "agent_end"):
            extra = {k: v for k, v in step.items()
                     if k not in ("type", "text", "agentName", "parentCallId")}
            scope.add(_Message("assistant", str(step.get("text", "")), at,
                               without_empty({"kind": kind, "agent": agent, **extra}),
                               source=self.line))

    def _tool_start(self, scope: _Scope, step: dict[str, Any], agent: str | None,
                    at: int | None) -> None:
        arguments = step.get("toolArgumentsStr")
        call = _Call(_str(step.get("callId")), _str(step.get("toolName")),
                     None if arguments is None else _json_text(arguments), "running", started=at)
        message = scope.add(_Message("assistant", "", at, without_empty(
            {"kind": "tool", "agent": agent}), call=call, source=self.line))
        scope.session.agentic = True
        if call.call_id is not None:
            self.calls[call.call_id] = (message, scope)
        else:
            scope.open[(agent, call.name)].append(message)

    def _started(self, scope: _Scope, step: dict[str, Any], agent: str | None) -> _Call | None:
        """The call a tool's end closes: by its callId, else its tool's oldest open start."""
        call_id = _str(step.get("callId"))
        if call_id is not None:
            message = self.calls[call_id][0] if call_id in self.calls else None
        else:
            waiting = scope.open.get((agent, _str(step.get("toolName"))))
            message = waiting.popleft() if waiting else None
        return message.call if message is not None else None

    def _tool_end(self, scope: _Scope, step: dict[str, Any], agent: str | None,
                  at: int | None) -> None:
        call = self._started(scope, step, agent)
        if call is None:  # an end whose start is not in the log
            call = _Call(_str(step.get("callId")), _str(step.get("toolName")), None, started=at)
            scope.add(_Message("assistant", "", at, without_empty({"kind": "tool", "agent": agent}),
                               call=call, source=self.line))
        call.ended_by = self.line
        failed = step_failed(step)
        call.error = _str(step.get("error")) if failed else None
        result = call.error or step.get("result")
        call.status, call.completed = ("failed" if failed else "completed"), at
        call.result = None if result is None else _json_text(result)
        run = self.runs.get(call.call_id) if call.call_id is not None else None
        if run is not None:  # a subagent run ends with its call, whose result is its answer
            run.session.task_status, run.exchange.completed = call.status, at
            if not failed and isinstance(step.get("result"), str):
                run.answer(step["result"], at, self.line)


def _prompt_key(exchange: _Exchange) -> tuple[str, int | None]:
    """An exchange's prompt and when it was given (its first user message)."""
    prompt = next((m for m in exchange.messages if m.role == "user"), None)
    return (prompt.content, prompt.timestamp) if prompt is not None else ("", None)


def _with_log_turns(tree: _Session, log: _Session) -> _Session:
    """The tree's session with the turns of its log: the log's turns in order, each the
    tree's exchange it names when there is one, and the tree's other exchanges placed by
    time (:mod:`sessiontape.storage.catalog.timeline`); the subagent runs of the turns read from
    the log come along."""
    pairs = align([TurnKey(e.names, *_prompt_key(e)) for e in log.exchanges],
                  [ExchangeKey(*_prompt_key(e)) for e in tree.exchanges], tree.preferred)
    exchanges, from_log = [], set()
    for t, e in pairs:
        if e is not None:
            exchanges.append(tree.exchanges[e])
        elif t is not None:
            exchanges.append(log.exchanges[t])
            from_log |= {id(m) for m in log.exchanges[t].messages}
    tree.exchanges = exchanges
    for child in list(log.subagents):
        if child.spawn is not None and id(child.spawn) in from_log:
            tree.adopt(child, child.spawn)
    starts = [at for at in (tree.created_at, log.created_at) if at is not None]
    tree.created_at = min(starts) if starts else None
    return tree


# What the readers above make, as other modules (catalog.py) name them.
Session = _Session
Exchange = _Exchange
Message = _Message
Call = _Call

def response_of(exchange: _Exchange) -> _Message | None:
    """The exchange's answer: its last text."""
    texts = [m for m in exchange.messages if m.kind == "text"]
    return texts[-1] if texts else None

# -- reading a conversation --------------------------------------------------------------

def read_conversation(conversation: LedgerConversation, problems: list[str],
                      tree: LoadedSession | None = None) -> tuple[_Session, str]:
    """The conversation's session tree and where it was read (``agentuse`` or ``log``);
    LedgerSourceError when there is nothing to read it from. What was read around is
    added to ``problems``. ``tree``: its AgentUse tree, loaded already with its parts."""
    directory, log = conversation.agentuse_dir, conversation.log_path
    read: _Session | None = None
    if directory is not None and directory.is_dir():
        try:
            read = _TreeReader(tree if tree is not None else load_session(directory),
                               conversation.origin).read()
        except (CorruptFileError, OSError) as exc:
            if log is None:
                raise LedgerSourceError(f"{conversation_name(conversation)}: {exc}") from None
            problems.append(f"{conversation_name(conversation)}: {exc}; exported from its log")
    if log is None:
        if read is not None:
            return read, "agentuse"
        raise LedgerSourceError(f"{conversation_name(conversation)}: nothing to export: no "
                                "AgentUse tree and no replay log")
    reader = _LogReader(log, conversation.origin)
    try:
        session = reader.read(read)
    except OSError as exc:
        if read is not None:
            problems.append(f"{conversation_name(conversation)}: {log}: cannot read: "
                            f"{exc.strerror or exc}; exported from its tree")
            return read, "agentuse"
        raise LedgerSourceError(f"{conversation_name(conversation)}: {log}: cannot read: "
                                f"{exc.strerror or exc}") from None
    problems.extend(reader.problems)
    if read is not None:
        return _with_log_turns(read, session), "agentuse"
    return session, "log"

def conversation_name(conversation: LedgerConversation) -> str:
    user = f"{conversation.user_id}:" if conversation.user_id is not None else ""
    return f"{user}{conversation.session_name}"
