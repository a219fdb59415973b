"""The recorder's event vocabulary: what happened in a run, in order.

The recorder turns SDK callbacks and stream events into these; the sinks
(:mod:`sessiontape.storage.agentuse.sink`, :mod:`sessiontape.storage.skillet.sink`) turn them into
files. Every event carries ``scope`` (one recorded run: the conversation's
turn, or a nested subagent run inside it) and ``at`` (Unix ms).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "REJECTED",
    "AgentEnded",
    "AgentInfo",
    "AgentStarted",
    "Compacted",
    "Event",
    "Handoff",
    "ModelCallFinished",
    "ModelCallStarted",
    "PendingCall",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "RunSuspended",
    "Sink",
    "SubagentStarted",
    "TextDelta",
    "Tokens",
    "ToolFailed",
    "ToolFinished",
    "ToolInfo",
    "ToolStarted",
    "ToolsListed",
    "Usage",
]


@dataclass(frozen=True)
class ToolInfo:
    """A tool as ``tools.json`` lists it."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class AgentInfo:
    """The agent a run starts with: what ``session.json`` and ``tools.json`` need."""

    name: str
    model: str  # "provider:model"
    instructions: str | None = None
    description: str | None = None
    max_turns: int | None = None
    tools: tuple[ToolInfo, ...] = ()


@dataclass(frozen=True)
class Tokens:
    """Token counts as AgentUse writes them (``cache.read``: cached input tokens)."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.input + other.input, self.output + other.output,
                      self.reasoning + other.reasoning, self.cache_read + other.cache_read,
                      self.cache_write + other.cache_write)

    def to_json(self) -> dict[str, Any]:
        """The ``tokens`` object of message.json and step-finish parts."""
        return {"input": self.input, "output": self.output, "reasoning": self.reasoning,
                "cache": {"read": self.cache_read, "write": self.cache_write}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tokens:
        """Read a ``tokens`` object (missing fields count as 0)."""
        cache = data.get("cache") or {}
        return cls(int(data.get("input", 0)), int(data.get("output", 0)),
                   int(data.get("reasoning", 0)), int(cache.get("read", 0)),
                   int(cache.get("write", 0)))


@dataclass(frozen=True)
class Usage:
    """One model call's tokens and what they cost (US dollars)."""

    tokens: Tokens = field(default_factory=Tokens)
    cost: float = 0.0


@dataclass(frozen=True)
class Event:
    scope: str
    at: int


@dataclass(frozen=True)
class PendingCall:
    """A tool call waiting for a human's approval (``needs_approval``)."""

    call_id: str
    tool_name: str
    arguments: str  # the raw JSON arguments string


@dataclass(frozen=True)
class RunStarted(Event):
    """A recorded run begins: the user's input reaches the first agent; or, ``resumed``,
    a suspended run goes on with the human's decisions on its ``pending`` calls."""

    agent: AgentInfo
    user_input: Any  # a string or a list of input items, as given to the Runner
    user_text: str  # the input as one string (message.json's task)
    resumed: bool = False
    pending: tuple[PendingCall, ...] = ()


@dataclass(frozen=True)
class RunSuspended(Event):
    """The run stopped to wait for a human's approval of ``pending`` tool calls."""

    pending: tuple[PendingCall, ...]
    model: str


@dataclass(frozen=True)
class SubagentStarted(Event):
    """A nested run (``Agent.as_tool``) begins inside ``scope``'s tool call ``call_id``."""

    call_id: str
    child_scope: str
    agent: AgentInfo
    task: str


@dataclass(frozen=True)
class AgentStarted(Event):
    agent_name: str


@dataclass(frozen=True)
class AgentEnded(Event):
    agent_name: str


@dataclass(frozen=True)
class Handoff(Event):
    from_agent: str
    to_agent: str
    target: AgentInfo | None = None  # the agent taking over (its model and tools)


@dataclass(frozen=True)
class ModelCallStarted(Event):
    agent_name: str
    model: str = ""  # "provider:model"


@dataclass(frozen=True)
class TextDelta(Event):
    """A chunk of streamed model text, of the output message ``item_id``."""

    agent_name: str
    item_id: str
    text: str


@dataclass(frozen=True)
class ModelCallFinished(Event):
    """A model call's result: its reasoning summaries, its texts and its usage.

    ``texts`` holds ``(message item id, text)`` per output message; in a
    streamed run their chunks came before as :class:`TextDelta` events.
    """

    agent_name: str
    model: str
    usage: Usage
    reasoning: tuple[str, ...] = ()
    texts: tuple[tuple[str, str], ...] = ()
    streamed: bool = False


@dataclass(frozen=True)
class ToolStarted(Event):
    agent_name: str
    call_id: str
    tool_name: str
    arguments: str  # the raw JSON arguments string


@dataclass(frozen=True)
class ToolsListed(Event):
    """The tools the SDK listed from an agent's MCP servers for a turn (not known before:
    the SDK lists them at the start of each of the agent's turns); ``tools.json`` gets the
    new ones and the changed ones."""

    agent_name: str
    tools: tuple[ToolInfo, ...]


# The error of a call a human rejected (a ToolFailed's ``error``: this, then what the model
# was told), which the sinks tell from a tool's own failure.
REJECTED = "rejected: "


@dataclass(frozen=True)
class ToolFailed(Event):
    """The tool ``call_id`` raised (or was rejected: ``error`` starts with
    :data:`REJECTED`); its ToolFinished (with the model-facing text) follows."""

    call_id: str
    error: str


@dataclass(frozen=True)
class ToolFinished(Event):
    agent_name: str
    call_id: str
    tool_name: str
    output: str


@dataclass(frozen=True)
class Compacted(Event):
    """The conversation's stored history was compacted during this run."""

    compaction_id: str
    reason: str
    summarizer: str
    items_before: int
    items_after: int
    tokens_before: int
    tokens_after: int
    archived: int


@dataclass(frozen=True)
class RunFinished(Event):
    final_text: str
    model: str


@dataclass(frozen=True)
class RunFailed(Event):
    """The run ended with an exception (AgentUse error codes: EXECUTION_ERROR, ...).

    ``details`` are the extra fields of session.json's ``error`` for a provider's HTTP
    error (``statusCode``, ``url``, ``detail`` = the response body); ``detail`` is the
    ``detail`` of the exchange's ``error`` part: that body, else the exception as text
    (``Type: message`` and its causes).
    """

    code: str
    message: str
    error_type: str
    model: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    detail: str = ""


class Sink(Protocol):
    """Consumes events in order (on the writer thread)."""

    def handle(self, event: Event) -> None:
        """Take one event (a sink may keep its writes until :meth:`flush`)."""

    def flush(self) -> None:
        """Write whatever :meth:`handle` kept back; called after each batch of events."""
