"""Recorded conversations as OpenTelemetry traces, in the GenAI semantic conventions.

Langfuse, Phoenix and any OTLP backend load a past session as the trace it would have
been given live. :func:`otel_spans` makes one conversation's spans (one trace): each turn
an ``invoke_agent {agent}`` span, under it a ``chat {model}`` span a model call and an
``execute_tool {tool}`` span a tool call, a subagent's turns under the ``execute_tool``
span of the call that ran it; times are the recorded ones and the ids are derived from
the conversation and the span's place in it, so the same conversation always gives the
same trace (a backend receiving it twice keeps one). :func:`export_otel` writes one OTLP/JSON
``ExportTraceServiceRequest`` a line (the Collector's ``otlpjsonfile`` receiver reads it);
:func:`send_otel` sends the spans to an OTLP/HTTP endpoint. docs/interop.md maps each
field.

An optional extra: ``pip install 'sessiontape[otel]'`` (opentelemetry-sdk and the OTLP/HTTP
exporter). Without it, importing this module raises ImportError saying so.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog.conversation import (
    Call,
    Exchange,
    LedgerConversation,
    Message,
    ModelCall,
    Session,
    conversation_name,
    read_conversation,
    response_of,
)
from ..json_style import dumps_compact
from ..version import __version__
from .output import written_beside
from .summary import ExportSummary, read_each

NEEDS_EXTRA = "OpenTelemetry export needs: pip install 'sessiontape[otel]'"

try:
    from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
except ImportError as exc:  # the extra is not installed
    raise ImportError(NEEDS_EXTRA) from exc

__all__ = ["MAX_TEXT", "NEEDS_EXTRA", "OtelSendError", "OtelSummary", "export_otel",
           "otel_spans", "otlp_json", "send_otel"]

# The longest text an attribute holds (characters); a longer one is cut there and ends
# with a marker saying how much was left out.
MAX_TEXT = 65_536
# How many characters of attribute text one OTLP/HTTP request carries at most (the
# exporter drops a request over 64 MiB): a conversation's spans go in as many as needed.
_REQUEST_TEXT = 8 * 1024 * 1024
_SCOPE = InstrumentationScope("sessiontape.storage.exports.otel", __version__)
_RESOURCE = Resource({"service.name": "sessiontape", "service.version": __version__})
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_LOGGERS = "opentelemetry.exporter"


@dataclass
class OtelSummary(ExportSummary):
    """What :func:`export_otel` wrote to its file, or :func:`send_otel` sent to its
    ``endpoint`` (then ``path`` is empty and :meth:`to_json` says ``endpoint``)."""

    FORMAT, UNIT = "otel", "span"
    endpoint: str | None = None

    @property
    def target(self) -> str:
        """Where the spans went: the endpoint, else the file."""
        return self.endpoint if self.endpoint is not None else str(self.path)

    def to_json(self) -> dict[str, Any]:
        made = super().to_json()
        if self.endpoint is not None:
            del made["path"]
            made = {"endpoint": self.endpoint, **made}
        return made


class OtelSendError(RuntimeError):
    """The endpoint did not take the spans (refused, unreachable, timed out, or answered
    other than 2xx): ``endpoint`` and ``reason`` say which and why."""

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(f"cannot send spans to {endpoint}: {reason}")
        self.endpoint, self.reason = endpoint, reason


# -- attribute values ---------------------------------------------------------------------


def _text(value: str) -> str:
    """``value`` as an attribute can hold it: valid UTF-8 (a lone surrogate becomes
    U+FFFD) and at most :data:`MAX_TEXT` characters, then the clipping marker."""
    if not value.isascii():
        value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if len(value) <= MAX_TEXT:
        return value
    return value[:MAX_TEXT] + f"… [{len(value) - MAX_TEXT} more characters clipped]"


def _json(value: Any) -> str:
    """A GenAI messages attribute: compact JSON (its texts clipped before)."""
    return dumps_compact(value).decode()


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _ns(ms: int | None) -> int | None:
    return None if ms is None else ms * 1_000_000


def _model(model: str | None) -> tuple[str | None, str | None]:
    """A reported model (``provider/model``) as GenAI's provider and model names."""
    if not model:
        return None, None
    provider, slash, name = model.partition("/")
    return (provider, name) if slash and provider and name else (None, model)


def _attributes(**values: Any) -> dict[str, Any]:
    """Attributes without the empty ones, texts made safe (:func:`_text`); a name's ``__``
    is a dot (``gen_ai__agent__name``: ``gen_ai.agent.name``)."""
    made: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        made[key.replace("__", ".")] = _text(value) if isinstance(value, str) else value
    return made


def _span_id(seed: str, path: str) -> int:
    digest = hashlib.sha256(f"sessiontape-otel\0{seed}\0{path}".encode(
        "utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") or 1


def _trace_id(seed: str) -> int:
    digest = hashlib.sha256(f"sessiontape-otel-trace\0{seed}".encode(
        "utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:16], "big") or 1


# -- the spans of one conversation --------------------------------------------------------


@dataclass
class _Place:
    """Where a session's spans go: under ``parent`` (None: the trace's top), no earlier
    than ``floor`` (ns, the parent's start), their ids made from ``path``."""

    parent: SpanContext | None
    floor: int | None
    path: str


class _Trace:
    """One conversation's spans, parents before their children."""

    def __init__(self, conversation: LedgerConversation, session: Session) -> None:
        self.seed = f"{conversation.user_id or ''}\0{conversation.session_name}"
        self.trace_id = _trace_id(self.seed)
        self.common = _attributes(gen_ai__conversation__id=conversation_name(conversation),
                                  session__id=conversation_name(conversation),
                                  user__id=conversation.user_id)
        self.main = session
        self.spans: list[ReadableSpan] = []

    def build(self) -> list[ReadableSpan]:
        start = _ns(self.main.created_at)
        self.session(self.main, _Place(None, start, "s"))
        return self.spans

    def context(self, path: str) -> SpanContext:
        return SpanContext(self.trace_id, _span_id(self.seed, path), False, _SAMPLED)

    def add(self, at: int, name: str, context: SpanContext, place: _Place, kind: SpanKind,
            attributes: dict[str, Any], start: int, end: int,
            status: Status | None = None) -> None:
        """Put a span at index ``at`` (its children, added before it, come after it)."""
        self.spans.insert(at, ReadableSpan(
            _text(name), context, place.parent, _RESOURCE, {**self.common, **attributes},
            kind=kind, status=status or Status(StatusCode.UNSET), start_time=start,
            end_time=max(start, end), instrumentation_scope=_SCOPE))

    def around(self, at: int, start: int) -> int:
        """A parent's start: ``start``, or the earliest of its children's (the spans from
        ``at`` on), so that it holds them all."""
        return min([start, *(s.start_time for s in self.spans[at:] if s.start_time)])

    def session(self, session: Session, place: _Place) -> int | None:
        """Each turn of ``session``, then its subagents that no call of it ran; the last
        end (ns) among them."""
        ends: list[int] = []
        for number, exchange in enumerate(session.exchanges, 1):
            ends.append(self.turn(session, exchange, _Place(place.parent, place.floor,
                                                           f"{place.path}/t{number}")))
        for number, child in enumerate(session.subagents, 1):
            spawn = child.spawn
            if spawn is None or spawn.call is None or spawn.call.child is not child:
                end = self.session(child, _Place(place.parent, _ns(child.created_at)
                                                 or place.floor, f"{place.path}/a{number}"))
                ends += [end] if end is not None else []
        return max(ends, default=None)

    def turn(self, session: Session, exchange: Exchange, place: _Place) -> int:
        """The turn's ``invoke_agent`` span and its children; its end (ns)."""
        times = [m.timestamp for m in exchange.messages if m.timestamp is not None]
        start = _ns(min(times)) if times else place.floor
        start = start if start is not None else _ns(session.created_at) or 0
        context = self.context(place.path)
        here = _Place(context, start, place.path)
        at = len(self.spans)
        ends = [start, _ns(max(times)) or start, _ns(exchange.completed) or start]
        calls = [m for m in exchange.messages if m.call is not None]
        for number, message in enumerate(calls, 1):
            ends.append(self.tool(session, message, _Place(context, start,
                                                           f"{place.path}/x{number}")))
        ends += self.chats(session, exchange, here, [m.call for m in calls if m.call])
        start, end = self.around(at, start), max(ends)
        provider, model = _model(exchange.model or session.model)
        agent = session.agent or "agent"
        errors = [m.content for m in exchange.messages if m.kind == "error" and m.content]
        self.add(at, f"invoke_agent {agent}", context, place, SpanKind.INTERNAL, _attributes(
            gen_ai__operation__name="invoke_agent", gen_ai__agent__name=agent,
            gen_ai__agent__id=session.preferred, gen_ai__provider__name=provider,
            gen_ai__system=provider, gen_ai__request__model=model,
            gen_ai__system_instructions=_instructions(exchange),
            gen_ai__input__messages=_input(exchange), gen_ai__output__messages=_output(exchange),
            sessiontape__turn__id=exchange.preferred,
            error__type="agent_error" if errors else None),
            start, end, Status(StatusCode.ERROR, _text(errors[-1])) if errors else None)
        return end

    def chats(self, session: Session, exchange: Exchange, place: _Place,
              calls: list[Call]) -> list[int]:
        """The turn's ``chat`` spans, one a model call (the turn's own usage as one when it
        lists none); their ends. A model call is recorded when it ended: its span starts
        at the turn's latest event before that (its start, an earlier model call's end, a
        tool call's end)."""
        start = place.floor or 0
        made = list(exchange.model_calls)
        if not made and exchange.usage is not None:
            usage = exchange.usage
            made = [ModelCall(session.agent, exchange.model, usage, usage.get("cost") or 0.0,
                              exchange.completed)]
        marks = [start, *(_ns(c.completed) for c in calls if c.completed is not None)]
        ends = []
        for number, call in enumerate(made, 1):
            end = _ns(call.at) or start
            begin = max((m for m in marks if m is not None and m <= end), default=end)
            provider, model = _model(call.model or exchange.model or session.model)
            tokens = call.tokens
            self.add(len(self.spans), f"chat {model}" if model else "chat",
                     self.context(f"{place.path}/c{number}"), place, SpanKind.CLIENT,
                     _attributes(
                         gen_ai__operation__name="chat", gen_ai__provider__name=provider,
                         gen_ai__system=provider, gen_ai__request__model=model,
                         gen_ai__response__model=model,
                         gen_ai__agent__name=call.agent or session.agent,
                         gen_ai__usage__input_tokens=_int(tokens.get("inputTokens")),
                         gen_ai__usage__output_tokens=_int(tokens.get("outputTokens")),
                         gen_ai__usage__cache_read__input_tokens=_int(
                             tokens.get("cachedTokens")),
                         gen_ai__usage__reasoning__output_tokens=_int(
                             tokens.get("reasoningTokens")),
                         sessiontape__cost_usd=float(call.cost)),
                     begin, end)
            marks.append(end)
            ends.append(end)
        return ends

    def tool(self, session: Session, message: Message, place: _Place) -> int:
        """A tool call's ``execute_tool`` span, the subagent it ran under it; its end."""
        call = message.call
        assert call is not None
        start = _ns(call.started) or _ns(message.timestamp) or place.floor or 0
        context = self.context(place.path)
        at = len(self.spans)
        ends = [start, _ns(call.completed) or start]
        if call.child is not None:
            end = self.session(call.child, _Place(context, start, place.path))
            ends += [end] if end is not None else []
        start = self.around(at, start)
        failed = call.failed
        reason = (call.error or call.output or "failed") if failed else None
        self.add(at, f"execute_tool {call.name or 'tool'}", context, place, SpanKind.INTERNAL,
                 _attributes(gen_ai__operation__name="execute_tool",
                             gen_ai__tool__name=call.name or "tool", gen_ai__tool__type="function",
                             gen_ai__tool__call__id=call.call_id,
                             gen_ai__agent__name=message.metadata.get("agent") or session.agent,
                             gen_ai__tool__call__arguments=call.params,
                             gen_ai__tool__call__result=None if failed else call.output,
                             error__type="tool_error" if failed else None),
                 start, max(ends),
                 Status(StatusCode.ERROR, _text(reason)) if reason is not None else None)
        return max(ends)


def _parts(texts: list[str]) -> list[dict[str, str]]:
    return [{"type": "text", "content": _text(text)} for text in texts]


def _instructions(exchange: Exchange) -> str | None:
    said = [m.content for m in exchange.messages if m.role == "system" and m.content]
    return _json(_parts(said)) if said else None


def _input(exchange: Exchange) -> str | None:
    said = [m.content for m in exchange.messages if m.role == "user" and m.content]
    return _json([{"role": "user", "parts": _parts(said)}]) if said else None


def _output(exchange: Exchange) -> str | None:
    answer = response_of(exchange)
    if answer is None or not answer.content:
        return None
    return _json([{"role": "assistant", "parts": _parts([answer.content]),
                   "finish_reason": "stop"}])


def _spans(conversation: LedgerConversation, session: Session) -> list[ReadableSpan]:
    return _Trace(conversation, session).build()


def otel_spans(conversation: LedgerConversation, problems: list[str]) -> list[ReadableSpan]:
    """The conversation's spans (one trace, parents before their children), as the SDK's
    :class:`ReadableSpan`: what any ``SpanExporter`` exports. LedgerSourceError: nothing
    to read it from; what was read around is added to ``problems``."""
    session, _ = read_conversation(conversation, problems)
    return _spans(conversation, session)


# -- OTLP/JSON ------------------------------------------------------------------------------

_ID_KEYS = frozenset(("traceId", "spanId", "parentSpanId"))


def _hex_ids(value: Any) -> Any:
    """Protobuf's JSON with the ids in hex, as OTLP/JSON has them (protobuf: base64)."""
    if isinstance(value, dict):
        return {key: base64.b64decode(item).hex() if key in _ID_KEYS and isinstance(item, str)
                else _hex_ids(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """``spans`` as one OTLP/JSON ``ExportTraceServiceRequest`` (the official encoder's
    message; lowerCamelCase keys, enums as numbers, ids in hex, 64-bit numbers as text)."""
    request = encode_spans(spans)
    made = json_format.MessageToDict(request, use_integers_for_enums=True)
    return dict(_hex_ids(made))


def export_otel(out: Path, conversations: Iterable[LedgerConversation], *,
                force: bool = False, strict: bool = False) -> OtelSummary:
    """Write the traces of ``conversations`` to a new file at ``out`` (mode 0600): one
    OTLP/JSON ``ExportTraceServiceRequest`` a line, a line a conversation, as the
    OpenTelemetry Collector's ``otlpjsonfile`` receiver reads them. As the other exports:
    FileExistsError unless ``force``; ``skipped`` or, with ``strict``, LedgerSourceError;
    nothing left behind on an error."""
    out = Path(out)
    summary = OtelSummary(out)
    with written_beside(out, force=force) as tmp, tmp.open("wb") as file:
        for conversation, session, _ in read_each(conversations, summary, strict):
            spans = _spans(conversation, session)
            if spans:
                file.write(dumps_compact(otlp_json(spans)) + b"\n")
            summary.written += len(spans)
    return summary


# -- OTLP/HTTP ------------------------------------------------------------------------------


class _Said(logging.Handler):
    """What the exporter logs while it sends (it says why a request failed only there)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def reason(self) -> str:
        failed = [r for r in self.records if r.levelno >= logging.ERROR] or self.records
        if not failed:
            return "the exporter reported a failure"
        return " ".join(r.getMessage() for r in failed[-2:])


@contextmanager
def _listening() -> Iterator[_Said]:
    handler = _Said()
    logger = logging.getLogger(_LOGGERS)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _batches(spans: list[ReadableSpan]) -> Iterator[list[ReadableSpan]]:
    """``spans`` in requests of at most about :data:`_REQUEST_TEXT` characters of text."""
    batch: list[ReadableSpan] = []
    size = 0
    for span in spans:
        weight = sum(len(v) for v in (span.attributes or {}).values() if isinstance(v, str))
        if batch and size + weight > _REQUEST_TEXT:
            yield batch
            batch, size = [], 0
        batch.append(span)
        size += weight
    if batch:
        yield batch


def send_otel(endpoint: str, conversations: Iterable[LedgerConversation], *,
              strict: bool = False, headers: Mapping[str, str] | None = None,
              timeout: float = 10.0) -> OtelSummary:
    """Send the traces of ``conversations`` to the OTLP/HTTP (protobuf) ``endpoint``, the
    whole URL (``http://127.0.0.1:4318/v1/traces``), with the official exporter: each
    conversation's spans once read, in requests of at most about 8 MB of text. ``headers``
    go with each request (an API key); ``timeout``: seconds for each request, retries
    included (the exporter retries a refused connection, 429 and 5xx until then).

    OtelSendError when a request is not taken (nothing more is sent; what was sent stays:
    sending again is safe, the ids being the same). As the other exports: ``skipped`` or,
    with ``strict``, LedgerSourceError."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ImportError as exc:
        raise ImportError(NEEDS_EXTRA) from exc
    summary = OtelSummary(Path(), endpoint=endpoint)
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=timeout,
                                headers=dict(headers) if headers is not None else None)
    try:
        for conversation, session, _ in read_each(conversations, summary, strict):
            spans = _spans(conversation, session)
            for batch in _batches(spans):
                with _listening() as said:
                    result = exporter.export(batch)
                if result is not SpanExportResult.SUCCESS:
                    raise OtelSendError(endpoint, said.reason())
                summary.written += len(batch)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call, unused-ignore]
    return summary
