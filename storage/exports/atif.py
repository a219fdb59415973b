"""Recorded conversations as ATIF trajectories (Agent Trajectory Interchange Format, v1.8).

ATIF is the trajectory format of Harbor / Terminal-Bench and a growing set of trajectory
tools. :func:`atif_trajectory` makes one conversation's trajectory: its agent (name,
sessiontape's version, model), its steps in turn order (each system prompt and prompt a
step of its own; each turn's agent work one ``agent`` step: its text, its reasoning, its
tool calls, their observations, and its metrics summed over the turn's model calls), each
subagent run an embedded trajectory that the observation of the call that ran it names,
and the totals (``final_metrics``). :func:`export_atif` writes one trajectory a line.
docs/interop.md maps each field.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..catalog.conversation import (
    Call,
    Exchange,
    LedgerConversation,
    Session,
    read_conversation,
)
from ..json_style import dumps_compact, loads
from ..times import ms_to_iso
from ..version import __version__
from .output import written_beside
from .summary import ExportSummary, read_each

__all__ = ["ATIF_VERSION", "AtifSummary", "atif_trajectory", "export_atif"]

ATIF_VERSION = "ATIF-v1.8"


class AtifSummary(ExportSummary):
    """What :func:`export_atif` wrote, and what it could not read."""

    FORMAT, UNIT = "atif", "step"


def _arguments(params: str | None) -> dict[str, Any]:
    """A call's arguments as ATIF's object: the JSON object they are, else ``{"input": ...}``
    holding what they are (a JSON value, or the text)."""
    if params is None:
        return {}
    try:
        value = loads(params)
    except ValueError:
        return {"input": params}
    return value if isinstance(value, dict) else {"input": value}


def _clean(value: dict[str, Any]) -> dict[str, Any]:
    return {key: item for key, item in value.items() if item is not None}


class _Trajectory:
    """One session's trajectory; a subagent's is embedded in its parent's."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.steps: list[dict[str, Any]] = []
        self.subagents: list[dict[str, Any]] = []
        self.totals = {"prompt": 0, "completion": 0, "cached": 0, "cost": 0.0}

    def step(self, source: str, at: int | None, message: str, **fields: Any) -> None:
        self.steps.append(_clean({"step_id": len(self.steps) + 1, "timestamp": ms_to_iso(at),
                                  "source": source, "message": message, **fields}))

    def build(self, conversation: LedgerConversation | None, trajectory_id: str
              ) -> dict[str, Any]:
        for exchange in self.session.exchanges:
            self.exchange(exchange)
        totals = self.totals
        extra = None if conversation is None else _clean({
            "user_id": conversation.user_id, "session_name": conversation.session_name,
            "origin": conversation.origin})
        return _clean({
            "schema_version": ATIF_VERSION, "session_id": self.session.preferred,
            "trajectory_id": trajectory_id,
            "agent": _clean({"name": self.session.agent or "agent", "version": __version__,
                             "model_name": self.session.model,
                             "extra": {"recorder": "sessiontape"}}),
            "steps": self.steps,
            "final_metrics": {"total_prompt_tokens": totals["prompt"],
                              "total_completion_tokens": totals["completion"],
                              "total_cached_tokens": totals["cached"],
                              "total_cost_usd": totals["cost"],
                              "total_steps": len(self.steps)},
            "extra": extra, "subagent_trajectories": self.subagents or None})

    def exchange(self, exchange: Exchange) -> None:
        said: list[str] = []
        reasoning: list[str] = []
        calls: list[tuple[Call, str]] = []  # each with its id (one made up where none is)
        first_at: int | None = None
        for message in exchange.messages:
            if message.role in ("system", "user"):
                if message.content:
                    self.step(message.role, message.timestamp, message.content)
                continue
            first_at = first_at or message.timestamp
            if message.call is not None:
                number = f"step-{len(self.steps) + 1}-call-{len(calls) + 1}"
                calls.append((message.call,
                              message.call.call_id or message.preferred or number))
            elif message.kind == "reasoning" and message.content:
                reasoning.append(message.content)
            elif message.kind == "text" and message.content:
                said.append(message.content)
        if not (said or reasoning or calls):
            return
        usage = exchange.usage or {}
        metrics = _clean({"prompt_tokens": usage.get("inputTokens"),
                          "completion_tokens": usage.get("outputTokens"),
                          "cached_tokens": usage.get("cachedTokens"),
                          "cost_usd": usage.get("cost")}) if usage else None
        if usage:
            self.totals["prompt"] += usage["inputTokens"]
            self.totals["completion"] += usage["outputTokens"]
            self.totals["cached"] += usage["cachedTokens"]
            self.totals["cost"] += usage["cost"]
        self.step("agent", first_at, "\n\n".join(said), model_name=exchange.model,
                  reasoning_content="\n\n".join(reasoning) or None,
                  tool_calls=[{"tool_call_id": call_id, "function_name": call.name or "",
                               "arguments": _arguments(call.params)}
                              for call, call_id in calls] or None,
                  observation={"results": [self.observation(*each) for each in calls]}
                  if calls else None,
                  metrics=metrics, llm_call_count=len(exchange.model_calls) or None)

    def observation(self, call: Call, call_id: str) -> dict[str, Any]:
        """What the call gave back; the trajectory of the subagent it ran, embedded and
        named."""
        result = _clean({"source_call_id": call_id,
                         "content": call.error if call.failed and call.error
                         else call.output})
        if call.failed:
            result["extra"] = {"failed": True}
        if call.child is not None:
            child_id = call.child.preferred or f"{call_id}:subagent"
            self.subagents.append(_Trajectory(call.child).build(None, child_id))
            result["subagent_trajectory_ref"] = [{"trajectory_id": child_id}]
        return result


def atif_trajectory(conversation: LedgerConversation, problems: list[str]) -> dict[str, Any]:
    """The conversation's ATIF trajectory, as JSON values (LedgerSourceError: nothing to
    read it from); what was read around is added to ``problems``."""
    session, _ = read_conversation(conversation, problems)
    return _Trajectory(session).build(conversation, _trajectory_id(conversation, session))


def _trajectory_id(conversation: LedgerConversation, session: Session) -> str:
    return session.preferred or f"{conversation.user_id or ''}:{conversation.session_name}"


def export_atif(out: Path, conversations: Iterable[LedgerConversation], *,
                force: bool = False, strict: bool = False) -> AtifSummary:
    """Write one ATIF trajectory a line (JSONL) for ``conversations`` to a new file at
    ``out`` (mode 0600). As the other exports: FileExistsError unless ``force``;
    ``skipped`` or, with ``strict``, LedgerSourceError; nothing left behind on an error."""
    out = Path(out)
    summary = AtifSummary(out)
    with written_beside(out, force=force) as tmp, tmp.open("wb") as file:
        for conversation, session, _ in read_each(conversations, summary, strict):
            trajectory = _Trajectory(session).build(
                conversation, _trajectory_id(conversation, session))
            file.write(dumps_compact(trajectory) + b"\n")
            summary.written += len(trajectory["steps"])
    return summary
