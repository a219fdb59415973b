"""A replay log's lines, as they come, turned into agentrun ``Message`` lines.

``log stream --format agentrun`` watches every conversation in agentrun's vocabulary
(:mod:`sessiontape.storage.agentrun`), as the export writes a recorded one: an ``init``
when a log is first seen (``resume_id`` its session name), each prompt a ``system``
message, reasoning ``thinking``, the log's text steps ``text_delta`` (pieces, as a
streamed run writes them; the ``result`` holds the whole answer), tool calls ``tool_use``
and ``tool_result`` (a subagent's among them, in the order the log has them; a failed call's
followed by an ``error`` of code ``tool_failed``), and each turn's ``final_result`` a
``result`` with the turn's usage and cost (every model call since its prompt, the subagents'
included; a turn that ended in an error: an ``error``, then a ``result`` without stop
reason). Each message's ``raw`` is its log line.
"""

from __future__ import annotations

from typing import Any

from .. import agentrun as vocab
from .items import input_text
from .log_entries import step_failed, step_of

__all__ = ["AgentrunLines"]


class AgentrunLines:
    """The agentrun messages of log lines, per log (its first line starts with ``init``)."""

    def __init__(self) -> None:
        self._spent: dict[str, dict[str, Any]] = {}  # by log: the turn's usage so far

    def messages(self, log: str, session_name: str, data: dict[str, Any]
                 ) -> list[dict[str, Any]]:
        """The messages of one line of ``log`` (the conversation ``session_name``)."""
        made: list[dict[str, Any]] = []
        at = data.get("timestamp") if isinstance(data.get("timestamp"), str) else None
        if log not in self._spent:
            self._spent[log] = {}
            made.append(vocab.message("init", at, resume_id=session_name))
        kind = data.get("kind")
        if kind == "user_message":
            self._spent[log] = {}
            made.append(vocab.message("system", at, data,
                                      content=input_text(data.get("userInput"), "\n")))
        elif kind == "model_call":
            usage = data.get("usage")
            vocab.add_usage(self._spent[log], {**(usage if isinstance(usage, dict) else {}),
                                               "cost": data.get("cost")})
            reasoning = data.get("reasoning")
            made += [vocab.message("thinking", at, data, content=str(text))
                     for text in (reasoning if isinstance(reasoning, list) else [])]
        elif kind == "final_result":
            result = data.get("finalResult")
            text = result.get("text") if isinstance(result, dict) else None
            failure = data.get("error")  # a turn that ended in an error has no stop reason
            if isinstance(failure, dict):
                made.append(vocab.message("error", at, data,
                                          content=str(failure.get("message") or "the run failed")))
            made.append(vocab.message("result", at, data,
                                      stop_reason=None if failure else "end_turn",
                                      content=text if isinstance(text, str) else None,
                                      usage=vocab.usage(self._spent[log])))
            self._spent[log] = {}
        else:
            step = step_of(str(kind), data)
            if step is not None:
                made += self._step(step, at, data)
        return made

    @staticmethod
    def _step(step: dict[str, Any], at: str | None, data: dict[str, Any]
              ) -> list[dict[str, Any]]:
        kind, name = step.get("type"), step.get("toolName")
        if kind == "text" and step.get("text"):  # a piece, as a streamed run wrote it
            return [vocab.message("text_delta", at, data, content=str(step["text"]))]
        if kind == "agent_tool_start":
            arguments = step.get("toolArgumentsStr")
            return [vocab.message("tool_use", at, data, tool=vocab.tool(
                name, input=vocab.raw_json(arguments if isinstance(arguments, str) else None)))]
        if kind == "agent_tool_end":
            failed = step_failed(step)
            output = step.get("error") if failed else step.get("result")
            ended = [vocab.message("tool_result", at, data, tool=vocab.tool(
                name, output=vocab.raw_json(output) if isinstance(output, str) else output))]
            if failed:  # as the export says it: agentrun's ToolCall has no error flag
                ended.append(vocab.message("error", at, data, content=str(output or ""),
                                           error_code=vocab.TOOL_FAILED))
            return ended
        return []
