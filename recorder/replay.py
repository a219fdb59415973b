"""A recorded session replayed as a regression test: where does the agent take another path?

:func:`replay_session` runs an agent (the one recorded, or today's version of it) on each
recorded prompt with a :class:`ReplayModel`: a model that answers every call with the
response the recording holds for it, in order, offline. The agent's tools run for real
(``recorded_tools``: they return the recorded outputs); a call that ran a subagent is
answered from the recording (its agent is not reachable from the tool). Each turn is
compared with the recording, call by call:

* ``instructions``: the agent's instructions differ from those recorded for the turn;
* ``tool_output``: a tool returned another output than the recorded one;
* ``tool_missing``: the recording calls a tool the agent no longer has;
* ``unrecorded_call``: the agent asks the model once more than the recording did;
* ``fewer_calls``: the run ended before the recorded calls were all asked for;
* ``final_answer``: the turn ends with another answer;
* ``error``: the run failed otherwise.

Each turn runs on its prompt, with the turns before it as recorded when the agent has
input guardrails (which read them); the model never does.

The recorded responses are the model-output items of the session's item store (what the
model said, its reasoning and the calls it made), split into calls at each input or tool
output; the instructions are those the AgentUse tree kept for each exchange. Nothing is
written to the recorded session: a replay records only when ``record_as`` names a scratch
session. docs/replay.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

from agents import Agent, FunctionTool, ModelResponse, RunConfig, Runner, Usage
from agents.exceptions import AgentsException, ModelBehaviorError
from agents.models.interface import Model
from openai.types.responses import ResponseOutputItem
from pydantic import TypeAdapter

from sessiontape.storage.agentuse.reader import CorruptFileError, load_session
from sessiontape.storage.catalog.sessions import SessionInfo
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.items import content_text
from sessiontape.storage.text import printable

__all__ = ["KINDS", "Divergence", "RecordedTurn", "ReplayModel", "ReplayReport", "recorded_turns",
           "replay_session"]

_OUTPUT_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)
SHOWN = 300  # characters of each side of a divergence in :meth:`ReplayReport.explain`
KINDS = {"instructions": "the agent's instructions differ",
         "tool_output": "a tool returned another output",
         "tool_missing": "the recording calls a tool the agent does not have",
         "unrecorded_call": "the agent asks the model a call the recording does not have",
         "fewer_calls": "the run ended before the recorded calls",
         "final_answer": "the final answer differs", "error": "the run failed"}
_MODEL_OUTPUTS = {"message", "function_call", "reasoning", "computer_call", "web_search_call",
                  "file_search_call", "custom_tool_call", "mcp_call"}


@dataclass(frozen=True)
class Divergence:
    """Where a replayed turn left the recording: the turn (1-based), the model call in it
    (1-based; None for the turn as a whole), what differs, and both sides as text."""

    turn: int
    call: int | None
    kind: str
    recorded: str | None
    replayed: str | None
    tool: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "call": self.call, "kind": self.kind, "tool": self.tool,
                "recorded": self.recorded, "replayed": self.replayed}


@dataclass
class RecordedTurn:
    """One recorded turn: its prompt, its model calls' output items, each tool call's
    recorded output (by call id), the instructions, and the final answer."""

    number: int
    prompt: Any
    calls: list[list[dict[str, Any]]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None
    answer: str | None = None


@dataclass
class ReplayReport:
    """What a replay found: the session, how many turns it replayed of how many, each
    divergence, and what it could not replay (and why)."""

    session: str
    turns: int
    replayed: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    not_replayed: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """Whether the turns replayed (at least one) took the recorded path."""
        return not self.divergences and self.replayed > 0

    def explain(self) -> str:
        """The report for people: a line saying how the replay went, then each divergence
        (its turn, call and kind; both sides), then what was not replayed."""
        verdict = "identical" if self.identical else \
            f"{len(self.divergences)} divergence{'s' * (len(self.divergences) != 1)}"
        lines = [f"replay {self.session}: {self.replayed} turn{'s' * (self.replayed != 1)} "
                 f"of {self.turns} replayed, {verdict}"]
        for divergence in self.divergences:
            call = f", call {divergence.call}" if divergence.call is not None else ""
            tool = f" ({divergence.tool})" if divergence.tool else ""
            lines += [f"turn {divergence.turn}{call}{tool}: {KINDS[divergence.kind]}",
                      f"  recorded: {_shown(divergence.recorded)}",
                      f"  replayed: {_shown(divergence.replayed)}"]
        lines += [f"not replayed: {reason}" for reason in self.not_replayed]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "turns": self.turns, "replayed": self.replayed,
                "identical": self.identical,
                "divergences": [d.to_json() for d in self.divergences],
                "not_replayed": self.not_replayed}


def _shown(text: str | None) -> str:
    """One side of a divergence on one line, controls escaped, cut to :data:`SHOWN`."""
    shown = printable(" ".join((text if text is not None else "-").split()), one_line=True)
    return shown if len(shown) <= SHOWN else shown[:SHOWN - 1] + "…"


def _calls(count: int) -> str:
    return f"{count} model call{'s' * (count != 1)}"


def _text(value: Any) -> str:
    """A tool output or an answer as text, to compare and to show."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts (input_text, ...)
        return content_text(value)
    return dumps_compact(value).decode()


def recorded_turns(items: list[dict[str, Any]], instructions: list[str | None],
                   first: int = 1) -> list[RecordedTurn]:
    """The turns of a conversation's stored items, numbered from ``first`` (past the turns
    a compaction summarized): a turn begins at each user message; its model calls are
    the runs of model-output items between inputs and tool outputs. ``instructions``:
    each turn of the conversation's, as the AgentUse tree kept them (None: unknown)."""
    turns: list[RecordedTurn] = []
    previous_was_output = False
    for item in items:
        kind = item.get("type", "message")
        if _is_prompt(item):
            number = first + len(turns)
            turns.append(RecordedTurn(number, item.get("content"), instructions=(
                instructions[number - 1] if number <= len(instructions) else None)))
            previous_was_output = False
            continue
        if not turns:
            continue  # a compaction summary, or items before the first prompt
        turn = turns[-1]
        if kind in _MODEL_OUTPUTS and item.get("role", "assistant") == "assistant":
            if not previous_was_output:
                turn.calls.append([])
            turn.calls[-1].append(item)
            previous_was_output = True
            if kind == "message":
                turn.answer = content_text(item.get("content"))
        else:
            if kind == "function_call_output":
                turn.outputs[str(item.get("call_id"))] = item.get("output")
            previous_was_output = False
    return turns


class _Exhausted(AgentsException):
    """The agent asked the model once more than the recording did."""


class ReplayModel(Model):
    """Answers each call with the next recorded response of ``turn``, and notes where the
    input differs from the recording (``divergences``)."""

    def __init__(self, turn: RecordedTurn) -> None:
        self.turn = turn
        self.asked = 0
        self.divergences: list[Divergence] = []

    async def get_response(self, system_instructions: str | None, input: Any,
                           *args: Any, **kwargs: Any) -> ModelResponse:
        self.asked += 1
        turn, call = self.turn, self.asked
        if call == 1 and turn.instructions is not None \
                and (system_instructions or None) != turn.instructions:
            self.divergences.append(Divergence(turn.number, call, "instructions",
                                               turn.instructions, system_instructions))
        if call > 1:
            self._compare_outputs(input, turn.calls[call - 2], call)
        if call > len(turn.calls):
            self.divergences.append(Divergence(turn.number, call, "unrecorded_call", None,
                                               "a model call the recording does not have"))
            raise _Exhausted(f"no recorded response for call {call}")
        output = [_OUTPUT_ITEM.validate_python(item) for item in turn.calls[call - 1]]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def _compare_outputs(self, input: Any, calls: list[dict[str, Any]], call: int) -> None:
        """The tool outputs the agent produced for the previous call's tool calls, against
        the recorded ones."""
        given = {str(item.get("call_id")): item.get("output") for item in input
                 if isinstance(item, dict) and item.get("type") == "function_call_output"} \
            if isinstance(input, list) else {}
        for made in calls:
            call_id = str(made.get("call_id"))
            if made.get("type") != "function_call" or call_id not in self.turn.outputs:
                continue
            recorded, replayed = self.turn.outputs[call_id], given.get(call_id)
            if replayed is not None and _text(recorded) != _text(replayed):
                self.divergences.append(Divergence(
                    self.turn.number, call - 1, "tool_output", _text(recorded),
                    _text(replayed), tool=str(made.get("name"))))

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("a replay runs each turn with Runner.run")


def _answered(name: str, schema: dict[str, Any], outputs: dict[str, Any]) -> FunctionTool:
    """A tool named ``name`` that returns the recorded output of each call."""
    async def invoke(context: Any, arguments: str) -> Any:
        return outputs.get(str(getattr(context, "tool_call_id", "")), "")

    return FunctionTool(name=name, description=f"{name}, answered from the recording",
                        params_json_schema=schema, on_invoke_tool=invoke,
                        strict_json_schema=False)


def _with_tools(agent: Agent[Any], turn: RecordedTurn, answered: set[str]) -> Agent[Any]:
    """``agent`` with the tools named in ``answered`` returning their recorded outputs."""
    if not answered:
        return agent
    tools = [_answered(tool.name, getattr(tool, "params_json_schema", {}) or {},
                       turn.outputs) if tool.name in answered else tool
             for tool in agent.tools]
    return agent.clone(tools=tools)


def _tree_facts(info: SessionInfo) -> tuple[list[str | None], set[str]]:
    """From the conversation's AgentUse tree: each exchange's instructions (``system``;
    None where it kept none), and the tools that ran a subagent (a tool part whose output
    carries the subagent's summary)."""
    if info.agentuse_dir is None:
        return [], set()
    try:
        loaded = load_session(info.agentuse_dir)
    except (CorruptFileError, OSError):
        return [], set()
    instructions: list[str | None] = []
    subagents: set[str] = set()
    for message in loaded.messages:
        system = message.info.get("assistant", {}).get("system")
        instructions.append("\n".join(system) if isinstance(system, list) and system
                            else None)
        subagents |= {str(part.get("tool")) for part in message.parts
                      if part.get("type") == "tool"
                      and isinstance(part.get("state", {}).get("output"), dict)}
    return instructions, subagents


async def _stored_items(info: SessionInfo) -> list[dict[str, Any]]:
    if info.user_id is None:
        return []
    store = ItemStore(SkilletPaths.resolve().store_file)
    try:
        items = await store.session(info.user_id, info.session_name).get_items()
    finally:
        await store.close()
    return [cast(dict[str, Any], item) for item in items if isinstance(item, dict)]


async def replay_session(info: SessionInfo, agent: Agent[Any], *, turn: int | None = None,
                         recorded_tools: bool = False,
                         record_as: str | None = None) -> ReplayReport:
    """Replay the conversation ``info`` names with ``agent`` (every turn, or turn
    ``turn``): a :class:`ReplayReport`. ``recorded_tools``: every tool returns its
    recorded output; ``record_as``: record the replay into that session (of the same
    user), never into the recorded one."""
    items = await _stored_items(info)
    instructions, subagents = _tree_facts(info)
    kept = sum(1 for item in items if _is_prompt(item))
    summarized = max(0, info.turns - kept) if info.compactions else 0
    turns = recorded_turns(items, instructions, first=summarized + 1)
    report = ReplayReport(info.session_name, summarized + len(turns))
    if not turns:
        report.not_replayed.append(
            "no stored items: only a conversation with an item store replays (a session "
            "AgentUse alone wrote has none)")
        return report
    if summarized:
        report.not_replayed.append(
            f"turns 1 to {summarized}: compacted into a summary, which the turns after it "
            "are replayed with")
    chosen = [t for t in turns if turn is None or t.number == turn]
    if turn is not None and not chosen:
        which = f" (turns {summarized + 1} to {report.turns} replay)" if summarized else ""
        raise ValueError(f"no turn {turn} to replay: the recording has {report.turns}{which}")
    each_turn = _split_at_prompts(items)
    history: list[Any] = list(each_turn[0])  # before the first prompt: a compaction's summary
    for index, recorded in enumerate(turns, 1):
        if recorded in chosen:
            await _replay_turn(recorded, agent, history, report, subagents, recorded_tools,
                               record_as, info)
        history += each_turn[index]  # as recorded: each turn on its own
    return report


def _is_prompt(item: dict[str, Any]) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == "user"


def _split_at_prompts(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The stored items of each kept turn, from its user message to the next one; first,
    those before the first (a compaction's summary)."""
    turns: list[list[dict[str, Any]]] = [[]]
    for item in items:
        if _is_prompt(item):
            turns.append([])
        turns[-1].append(item)
    return turns


async def _replay_turn(recorded: RecordedTurn, agent: Agent[Any], history: list[Any],
                       report: ReplayReport, subagents: set[str], recorded_tools: bool,
                       record_as: str | None, info: SessionInfo) -> None:
    model = ReplayModel(recorded)
    called = {str(item.get("name")) for call in recorded.calls for item in call
              if item.get("type") == "function_call"}
    answered = called if recorded_tools else called & subagents
    replayed = _with_tools(agent, recorded, answered)
    # The model answers from the recording and never reads the turns before; only input
    # guardrails do. Without them each turn runs on its prompt alone: the SDK copies and
    # normalizes all of its input at every call (a history grows it with every turn).
    before = history if replayed.input_guardrails else []
    prompt = [*before, {"role": "user", "content": recorded.prompt}]
    config = RunConfig(model=model, tracing_disabled=True)
    result: Any = None
    try:
        if record_as is not None:
            from .recorder import Recorder

            async with Recorder(user_id=info.user_id or "replay",
                                session_name=record_as) as scratch:
                result = await scratch.run(replayed, recorded.prompt, run_config=config)
        else:
            result = await Runner.run(replayed, prompt, run_config=config,
                                      max_turns=max(10, len(recorded.calls) + 2))
    except _Exhausted:
        pass
    except ModelBehaviorError as exc:
        report.divergences.extend(model.divergences)
        missing = next((str(item.get("name")) for item in recorded.calls[model.asked - 1]
                        if item.get("type") == "function_call"
                        and str(item.get("name")) in str(exc)), None)
        report.divergences.append(Divergence(recorded.number, model.asked, "tool_missing",
                                             missing, str(exc), tool=missing))
        report.replayed += 1
        return
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception as exc:
        report.divergences.extend(model.divergences)
        report.divergences.append(Divergence(recorded.number, model.asked, "error", None,
                                             f"{type(exc).__name__}: {exc}"))
        report.replayed += 1
        return
    report.divergences.extend(model.divergences)
    report.replayed += 1
    if result is None:
        return
    if model.asked < len(recorded.calls):
        report.divergences.append(Divergence(
            recorded.number, model.asked + 1, "fewer_calls",
            _calls(len(recorded.calls)), _calls(model.asked)))
    final = result.final_output
    if recorded.answer is not None and _text(final) != recorded.answer:
        report.divergences.append(Divergence(recorded.number, None, "final_answer",
                                             recorded.answer, _text(final)))
