"""What the older part of a history becomes when it is compacted.

A :class:`Summarizer` turns a list of input items into the items that
replace them:

* :class:`DeterministicSummarizer` (the default): offline, no model; what the
  user asked, which tools ran with which arguments and results, what the
  assistant concluded, and the previous summary, in bounded size.
* :class:`ModelSummarizer`: asks any Agents SDK ``Model`` (OpenAI, LiteLLM,
  a scripted model in tests) to write the summary.
* :class:`OpenAICompactSummarizer`: OpenAI's ``responses.compact`` (what
  skilled_crew does through the SDK's ``OpenAIResponsesCompactionSession``):
  the user messages plus one encrypted ``compaction`` item.

A summary is one assistant message whose text starts with
:data:`SUMMARY_HEADER`, which is how it is recognised later; compaction stores it
with its text once (:func:`~sessiontape.storage.skillet.items.text_once`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

from agents.items import TResponseInputItem

from .items import call_id_of, content_text, output_text, plain_text
from .items import clip as _clip

__all__ = [
    "SUMMARY_HEADER",
    "DeterministicSummarizer",
    "ModelSummarizer",
    "OpenAICompactSummarizer",
    "Summarizer",
    "is_summary",
    "summary_message",
    "transcript",
]

SUMMARY_HEADER = "[Summary of the earlier conversation]"


class Summarizer(Protocol):
    """Turns the older items of a history into the items that replace them."""

    name: str

    async def summarize(self, items: list[TResponseInputItem]) -> list[TResponseInputItem]: ...


def summary_message(text: str) -> TResponseInputItem:
    """The summary as one assistant message (accepted by every provider)."""
    return {"role": "assistant", "content": f"{SUMMARY_HEADER}\n{text.strip()}"}


def summary_text(item: Any) -> str | None:
    """The text of a summary item (without the header), or None if it is not one.

    Either shape: the Python SDK's (string content) or the protocol row stored for it
    (its text in its part, ``providerData.content`` ``true``; rows of sessiontape 0.1-0.3
    hold the text there too: :func:`~sessiontape.storage.skillet.items.plain_text`)."""
    if isinstance(item, dict) and item.get("role") == "assistant":
        content = plain_text(item)
        if content is not None and content.startswith(SUMMARY_HEADER):
            return content[len(SUMMARY_HEADER):].strip()
    return None


def is_summary(item: Any) -> bool:
    return summary_text(item) is not None


_OUTPUTS = ("function_call_output", "function_call_result")


def _text_of(item: dict[str, Any]) -> str:
    """A message's text (its parts' texts joined; parts without text left out)."""
    content = item.get("content")
    if isinstance(content, list):
        return content_text([part for part in content
                             if isinstance(part, dict) and part.get("text")])
    return content if isinstance(content, str) else ""


def _tool_lines(items: Sequence[Any], limit: int) -> list[str]:
    outputs = {call_id_of(item): output_text(item.get("output")) for item in items
               if isinstance(item, dict) and item.get("type") in _OUTPUTS}
    lines = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function_call":
            result = outputs.get(call_id_of(item), "(no result)")
            lines.append(f"- {item.get('name')}({_clip(item.get('arguments', ''), limit)})"
                         f" -> {_clip(result, limit)}")
    return lines


def _bounded(title: str, lines: list[str], most: int, budget: int | None = None) -> list[str]:
    """The title and the latest ``most`` lines, within ``budget`` characters if given."""
    if not lines:
        return []
    shown = lines[-most:]
    if budget is not None:  # the most recent lines that fit (the latest one clipped if need be)
        room = budget - len(title) - 40  # the title, its "(n earlier not shown)" and newlines
        fitting: list[str] = []
        for line in reversed(shown):
            if len(line) + 1 > room:
                if not fitting and room > 1:
                    fitting.append(line[: room - 2] + "…")
                break
            fitting.append(line)
            room -= len(line) + 1
        shown = fitting[::-1]
    skipped = f" ({len(lines) - len(shown)} earlier not shown)" if len(lines) > len(shown) else ""
    return [f"{title}{skipped}:", *shown]


class DeterministicSummarizer:
    """An offline summary, the same for the same items, of bounded size."""

    name = "deterministic"

    def __init__(self, *, max_chars: int = 6000, most: int = 30, clip: int = 160) -> None:
        self.max_chars = max_chars
        self.most = most
        self.clip = clip

    async def summarize(self, items: list[TResponseInputItem]) -> list[TResponseInputItem]:
        return [summary_message(self.text(items))]

    def text(self, items: Sequence[Any]) -> str:
        """The summary text of ``items``."""
        earlier = [t for t in map(summary_text, items) if t]
        asked = [f'- "{_clip(_text_of(i), self.clip)}"' for i in items
                 if isinstance(i, dict) and i.get("role") == "user" and _text_of(i)]
        concluded = [f'- "{_clip(_text_of(i), self.clip)}"' for i in items
                     if isinstance(i, dict) and i.get("role") == "assistant"
                     and not is_summary(i) and _text_of(i)]
        lines = [f"{len(items)} earlier items were compacted."]
        share = (self.max_chars - len(lines[0])) // 3  # no section crowds out the others
        lines += _bounded("The user asked", asked, self.most, share)
        lines += _bounded("Tools that ran (arguments -> result)",
                          _tool_lines(items, self.clip), self.most, share)
        lines += _bounded("The assistant concluded", concluded, self.most, share)
        text = "\n".join(lines)
        if earlier:  # the previous summary, after what is new, cut first when too long
            room = self.max_chars - len(text) - 40
            previous = "\n".join(earlier)
            if room > 0:
                text += "\nBefore that:\n" + (previous if len(previous) <= room
                                              else previous[: room - 1] + "…")
        return text[: self.max_chars]


def transcript(items: Sequence[Any], clip: int = 2000) -> str:
    """A plain-text transcript of items, for a model to summarize."""
    lines = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            lines.append(f"tool call {item.get('name')}({_clip(item.get('arguments', ''), clip)})")
        elif item.get("type") in _OUTPUTS:
            lines.append(f"tool result: {_clip(output_text(item.get('output', '')), clip)}")
        elif item.get("role") in ("user", "assistant", "system", "developer"):
            lines.append(f"{item['role']}: {_clip(_text_of(item), clip)}")
    return "\n".join(lines)


class ModelSummarizer:
    """Asks an Agents SDK ``Model`` to summarize (no Runner, no tools, no tracing)."""

    name = "model"
    INSTRUCTIONS = ("Summarize this conversation between a user and an AI assistant so that "
                    "the assistant can continue it without the original. Keep every fact, "
                    "name, number, decision and tool result that may matter later. Be concise.")

    def __init__(self, model: Any, *, instructions: str | None = None,
                 fallback: DeterministicSummarizer | None = None) -> None:
        self.model = model
        self.instructions = instructions or self.INSTRUCTIONS
        self.fallback = fallback or DeterministicSummarizer()

    async def summarize(self, items: list[TResponseInputItem]) -> list[TResponseInputItem]:
        from agents import ModelSettings
        from agents.models.interface import ModelTracing

        response = await self.model.get_response(
            self.instructions, [{"role": "user", "content": transcript(items)}],
            ModelSettings(), [], None, [], ModelTracing.DISABLED,
            previous_response_id=None, conversation_id=None, prompt=None)
        texts = [_text_of(item.model_dump()) for item in response.output
                 if getattr(item, "type", None) == "message"]
        text = "\n".join(t for t in texts if t).strip()
        return [summary_message(text)] if text else await self.fallback.summarize(items)


def _as_input_item(item: Any) -> TResponseInputItem:
    """A compacted output item (a model, or a mapping from a stand-in client) as input."""
    value = item.model_dump(exclude_none=True) if hasattr(item, "model_dump") else dict(item)
    # Which of the input item shapes this dump is, the API decides: not knowable statically.
    return cast(TResponseInputItem, value)


class OpenAICompactSummarizer:
    """OpenAI's ``responses.compact``: needs an OpenAI client (or a stand-in) and model."""

    name = "openai-compact"

    def __init__(self, client: Any = None, model: str = "gpt-4.1") -> None:
        self.client = client
        self.model = model

    async def summarize(self, items: list[TResponseInputItem]) -> list[TResponseInputItem]:
        if self.client is None:
            from openai import AsyncOpenAI

            self.client = AsyncOpenAI()
        response = await self.client.responses.compact(model=self.model, input=items)
        return [_as_input_item(item) for item in response.output]
