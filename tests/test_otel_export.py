"""The OpenTelemetry export: a recorded session as GenAI spans, to a file or an endpoint.

The conversation of ``test_agentrun_export.py`` (a subagent through ``as_tool``, a failing
tool, then a second turn), recorded with the real SDK Runner, is made into spans from its
tree and, the tree deleted, from its log alone; the spans go through the SDK's own
``InMemorySpanExporter``, into an OTLP/JSON file read back by protobuf into the
``ExportTraceServiceRequest`` of opentelemetry-proto, and to a real OTLP/HTTP receiver on
127.0.0.1 that decodes each request with the same message. docs/interop.md maps each field.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from harness import isolated, run_cli
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode
from test_agentrun_export import continue_porto
from test_hostile_outputs import record_tool
from test_session_events import record

from sessiontape.storage.catalog.conversation import (
    LedgerConversation,
    read_conversation,
)
from sessiontape.storage.catalog.sessions import list_sessions
from sessiontape.storage.exports.otel import (
    MAX_TEXT,
    NEEDS_EXTRA,
    OtelSendError,
    export_otel,
    otel_spans,
    send_otel,
)

REPO = Path(__file__).resolve().parent.parent


def conversations() -> list[LedgerConversation]:
    """Every recorded conversation of the (isolated) environment, as the CLI passes them."""
    return [LedgerConversation(i.user_id, i.session_name, i.agentuse_dir, i.log_path, i.origin)
            for i in list_sessions()]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """porto over two turns: its spans from its tree and from its log alone, its file
    exported twice, and what ``usage session --json`` counted."""
    base = tmp_path_factory.mktemp("otel")
    with isolated(base) as env:
        rec = record()
        continue_porto()
        spent = run_cli("usage", "session", "--json", env=env)
        assert spent.returncode == 0, spent.stderr
        (porto,) = conversations()
        problems: list[str] = []
        tree = otel_spans(porto, problems)
        session, read_from = read_conversation(porto, [])
        assert read_from == "agentuse"
        summary = export_otel(base / "tree.jsonl", [porto])
        export_otel(base / "again.jsonl", [porto])
        assert rec.session_dir is not None
        shutil.rmtree(rec.session_dir)
        (from_log,) = conversations()
        log = otel_spans(from_log, problems)
    return {"base": base, "porto": porto, "tree": tree, "log": log, "session": session,
            "spent": json.loads(spent.stdout), "summary": summary, "problems": problems}


def exported(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """``spans`` as the SDK's in-memory exporter holds them once exported."""
    exporter = InMemorySpanExporter()
    exporter.export(spans)
    return list(exporter.get_finished_spans())


def tree_of(spans: list[ReadableSpan]) -> list[tuple[int, str]]:
    """Each span's depth and name, parents first (the order the export gives them)."""
    by_id = {s.context.span_id: s for s in spans}

    def depth(span: ReadableSpan) -> int:
        return 0 if span.parent is None else 1 + depth(by_id[span.parent.span_id])

    return [(depth(s), s.name) for s in spans]


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_spans_nest_as_the_run_did(world: dict[str, Any], read_from: str) -> None:
    spans = exported(world[read_from])
    assert tree_of(spans) == [
        (0, "invoke_agent Guide"),
        (1, "execute_tool helper"),
        (2, "invoke_agent Helper"),
        (3, "chat gpt-4.1"),
        (1, "execute_tool fail"),
        (1, "chat gpt-4.1"),
        (1, "chat gpt-4.1"),
        (0, "invoke_agent Guide"),
        (1, "chat gpt-4.1")]
    assert len({s.context.trace_id for s in spans}) == 1  # one trace a conversation
    assert world["problems"] == []


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_spans_carry_the_gen_ai_attributes(world: dict[str, Any], read_from: str) -> None:
    spans = world[read_from]
    for span in spans:
        attributes = span.attributes or {}
        operation = attributes["gen_ai.operation.name"]
        assert span.name.startswith(str(operation))
        assert attributes["gen_ai.conversation.id"] == "ann:porto"
        assert attributes["session.id"] == "ann:porto" and attributes["user.id"] == "ann"
        assert span.resource.attributes["service.name"] == "sessiontape"
    first, helper_call, helper, *_ = spans
    assert first.attributes is not None and helper.attributes is not None
    assert json.loads(str(first.attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "how do I get around?"}]}]
    assert json.loads(str(first.attributes["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "take the tram"}],
         "finish_reason": "stop"}]
    assert first.attributes["gen_ai.agent.name"] == "Guide"
    assert helper.attributes["gen_ai.agent.name"] == "Helper"
    assert helper_call.attributes == {**(helper_call.attributes or {}),
                                      "gen_ai.tool.name": "helper",
                                      "gen_ai.tool.call.arguments": '{"input":"tram or bus?"}'}
    assert "the tram is faster" in str((helper_call.attributes or {})[
        "gen_ai.tool.call.result"])
    chat = next(s for s in spans if s.name.startswith("chat"))
    assert chat.attributes is not None
    assert (chat.attributes["gen_ai.request.model"], chat.attributes["gen_ai.provider.name"]) \
        == ("gpt-4.1", "scripted")


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_chat_tokens_and_cost_sum_to_what_usage_counts(world: dict[str, Any],
                                                       read_from: str) -> None:
    chats = [s.attributes or {} for s in world[read_from]
             if (s.attributes or {})["gen_ai.operation.name"] == "chat"]
    (spent,) = world["spent"]
    assert sum(int(str(c["gen_ai.usage.input_tokens"])) for c in chats) \
        == spent["input_tokens"]
    assert sum(int(str(c["gen_ai.usage.output_tokens"])) for c in chats) \
        == spent["output_tokens"]
    assert sum(float(str(c["sessiontape.cost_usd"])) for c in chats) \
        == pytest.approx(spent["cost"])


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_a_failed_tool_call_is_an_error_span(world: dict[str, Any], read_from: str) -> None:
    (failed,) = [s for s in world[read_from] if s.name == "execute_tool fail"]
    assert failed.status.status_code is StatusCode.ERROR
    assert "no such city: Atlantis" in str(failed.status.description)
    assert (failed.attributes or {})["error.type"] == "tool_error"
    assert [s.name for s in world[read_from] if s.status.status_code is StatusCode.ERROR] \
        == ["execute_tool fail"]


@pytest.mark.parametrize("read_from", ["tree", "log"])
def test_times_are_the_records_and_children_lie_within_their_parent(
        world: dict[str, Any], read_from: str) -> None:
    spans = world[read_from]
    by_id = {s.context.span_id: s for s in spans}
    for span in spans:
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time
        if span.parent is not None:
            parent = by_id[span.parent.span_id]
            assert parent.start_time is not None and parent.end_time is not None
            assert parent.start_time <= span.start_time <= span.end_time <= parent.end_time
    turns = [s for s in spans if s.parent is None]
    assert turns[0].end_time is not None and turns[1].start_time is not None
    assert turns[0].end_time <= turns[1].start_time
    # the turn starts at its prompt's recorded time (ms), the turn's end its record's
    session = world["session"]
    prompts = [next(m for m in e.messages if m.role == "user") for e in session.exchanges]
    assert [t.start_time for t in turns] == [p.timestamp * 1_000_000 for p in prompts]
    tools = [m.call for m in session.exchanges[0].messages if m.call is not None]
    assert [s.start_time for s in spans if s.name.startswith("execute_tool")] \
        == [c.started * 1_000_000 for c in tools if c and c.started]


def test_the_same_conversation_gives_the_same_ids_from_either_layout(
        world: dict[str, Any]) -> None:
    tree, log = world["tree"], world["log"]
    assert [(s.context.trace_id, s.context.span_id) for s in tree] \
        == [(s.context.trace_id, s.context.span_id) for s in log]
    assert len({s.context.span_id for s in tree}) == len(tree)


def within_parents(spans: list[ReadableSpan]) -> None:
    by_id = {s.context.span_id: s for s in spans}
    for span in spans:
        assert span.start_time is not None and span.end_time is not None
        parent = by_id[span.parent.span_id] if span.parent is not None else None
        assert parent is None or (parent.start_time or 0) <= span.start_time \
            <= span.end_time <= (parent.end_time or 0), span.name


def test_a_session_agentuse_wrote_nests_its_subagent_under_the_call(
        agentuse_fixture: Path) -> None:
    manager = next(agentuse_fixture.glob("agentuse/project/*/session/*-manager"))
    spans = otel_spans(LedgerConversation(None, manager.name, manager, None, "agentuse"), [])
    by_id = {s.context.span_id: s for s in spans}
    nested = [s for s in spans if s.name.startswith("invoke_agent") and s.parent is not None]
    assert nested and all(by_id[s.parent.span_id].name.startswith("execute_tool subagent__")
                          for s in nested if s.parent is not None)
    assert any((s.attributes or {}).get("gen_ai.system_instructions") for s in spans)
    within_parents(spans)


def test_every_log_skilled_crew_wrote_exports(skillet_fixture: Path, tmp_path: Path) -> None:
    logs = sorted(skillet_fixture.rglob("*.jsonl"))
    assert logs
    found = [LedgerConversation("x", log.stem, None, log, "skilled_crew") for log in logs]
    summary = export_otel(tmp_path / "crew.jsonl", found)
    lines = (tmp_path / "crew.jsonl").read_bytes().splitlines()
    assert summary.conversations == len(logs) and summary.skipped == []
    assert sum(len(read_back(line).resource_spans[0].scope_spans[0].spans)
               for line in lines) == summary.written > 0
    for conversation in found:
        within_parents(otel_spans(conversation, []))


# -- the OTLP/JSON file ---------------------------------------------------------------------


def read_back(line: bytes) -> ExportTraceServiceRequest:
    """One line as protobuf's own parser reads it, the hex ids turned into its base64 (as
    the Collector's OTLP/JSON reader does)."""

    def to_base64(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: base64.b64encode(bytes.fromhex(v)).decode()
                    if k in ("traceId", "spanId", "parentSpanId") else to_base64(v)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [to_base64(v) for v in value]
        return value

    request = ExportTraceServiceRequest()
    json_format.ParseDict(to_base64(json.loads(line)), request)
    return request


def test_the_file_holds_one_otlp_json_request_a_conversation(world: dict[str, Any]) -> None:
    out: Path = world["base"] / "tree.jsonl"
    (line,) = out.read_bytes().splitlines()
    raw = json.loads(line)
    span = raw["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
    assert int(span["traceId"], 16) == world["tree"][0].context.trace_id
    assert span["kind"] == 1 and span["startTimeUnixNano"].isdigit()  # enums as numbers
    request = read_back(line)
    spans = request.resource_spans[0].scope_spans[0].spans
    assert [s.name for s in spans] == [s.name for s in world["tree"]]
    assert [int.from_bytes(s.span_id, "big") for s in spans] \
        == [s.context.span_id for s in world["tree"]]
    assert [int.from_bytes(s.parent_span_id, "big") if s.parent_span_id else None
            for s in spans] == [s.parent.span_id if s.parent else None for s in world["tree"]]
    assert (out.stat().st_mode & 0o777) == 0o600
    assert world["summary"].to_json() == {
        "path": str(out), "format": "otel", "conversations": 1, "spans": 9,
        "skipped": [], "problems": []}


def test_a_second_export_writes_the_same_bytes_and_keeps_an_existing_file(
        world: dict[str, Any]) -> None:
    out: Path = world["base"] / "tree.jsonl"
    assert (world["base"] / "again.jsonl").read_bytes() == out.read_bytes()
    before = out.read_bytes()
    with pytest.raises(FileExistsError):
        export_otel(out, [])
    assert out.read_bytes() == before
    assert export_otel(out, [], force=True).written == 0 and out.read_bytes() == b""


# -- OTLP/HTTP --------------------------------------------------------------------------------


class Receiver:
    """An OTLP/HTTP traces receiver on 127.0.0.1: each POST decoded as an
    ``ExportTraceServiceRequest``, answered ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def spans(self) -> list[Any]:
        return [span for request in self.requests for resource in request.resource_spans
                for scope in resource.scope_spans for span in scope.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    made.thread.start()
    try:
        yield made
    finally:
        made.server.shutdown()
        made.server.server_close()


def test_send_otel_delivers_every_span_to_an_otlp_http_receiver(
        world: dict[str, Any], receiver: Receiver) -> None:
    summary = send_otel(receiver.endpoint, [world["porto"]], headers={"x-api-key": "k1"},
                        timeout=5)
    got = receiver.spans()
    assert [int.from_bytes(s.span_id, "big") for s in got] \
        == [s.context.span_id for s in world["log"]]
    assert {s.name for s in got} >= {"invoke_agent Guide", "execute_tool fail", "chat gpt-4.1"}
    assert receiver.headers[0]["x-api-key"] == "k1"
    assert receiver.headers[0]["content-type"] == "application/x-protobuf"
    assert summary.written == 9 and summary.to_json()["endpoint"] == receiver.endpoint
    assert "path" not in summary.to_json()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_connection_is_a_clear_error_not_a_hang(world: dict[str, Any]) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}/v1/traces"
    with pytest.raises(OtelSendError) as caught:
        send_otel(endpoint, [world["porto"]], timeout=1)
    assert caught.value.endpoint == endpoint and endpoint in str(caught.value)
    assert "refused" in caught.value.reason.lower() or "timeout" in caught.value.reason


def test_an_answer_other_than_2xx_is_a_clear_error(world: dict[str, Any]) -> None:
    rejecting = Receiver(status=400)
    rejecting.thread.start()
    try:
        with pytest.raises(OtelSendError) as caught:
            send_otel(rejecting.endpoint, [world["porto"]], timeout=5)
    finally:
        rejecting.server.shutdown()
        rejecting.server.server_close()
    assert "400" in caught.value.reason and len(rejecting.requests) == 1


# -- hostile content, and the extra missing ----------------------------------------------------


def test_hostile_content_is_clipped_and_still_exports(tmp_path: Path,
                                                      receiver: Receiver) -> None:
    hostile = "a\ud800b\0\x1b[2J\u202e" + "x" * (MAX_TEXT * 3)
    record_tool(hostile)
    (conversation,) = conversations()
    spans = otel_spans(conversation, [])
    (tool,) = [s for s in spans if s.name == "execute_tool give"]
    result = str((tool.attributes or {})["gen_ai.tool.call.result"])
    assert result.startswith("a\ufffd") and "b\0\x1b[2J\u202exxx" in result  # no surrogate
    result.encode("utf-8")
    assert result.endswith("more characters clipped]") and len(result) < MAX_TEXT + 64
    summary = export_otel(tmp_path / "h.jsonl", [conversation])
    (line,) = (tmp_path / "h.jsonl").read_bytes().splitlines()
    assert len(read_back(line).resource_spans[0].scope_spans[0].spans) == summary.written
    send_otel(receiver.endpoint, [conversation], timeout=5)
    (sent,) = [s for s in receiver.spans() if s.name == "execute_tool give"]
    assert any(a.value.string_value == result for a in sent.attributes)


def test_without_the_extra_the_import_says_how_to_install_it() -> None:
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "try:\n import sessiontape.storage.exports.otel\n"
            "except ImportError as exc:\n print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == NEEDS_EXTRA


# -- the command line ----------------------------------------------------------------------


def test_the_cli_writes_a_file_and_sends_to_an_endpoint(tmp_path: Path,
                                                        receiver: Receiver) -> None:
    with isolated(tmp_path) as env:
        record()
        written = run_cli("export", "--format", "otel", "--out", tmp_path / "spans.jsonl",
                          "--json", env=env)
        sent = run_cli("export", "--format", "otel", "--endpoint", receiver.endpoint,
                       "--header", "Authorization=Basic abc", "--session", "porto", env=env)
    assert written.returncode == 0 and sent.returncode == 0, written.stderr + sent.stderr
    summary = json.loads(written.stdout)
    (line,) = (tmp_path / "spans.jsonl").read_bytes().splitlines()
    in_file = [span for resource in read_back(line).resource_spans
               for scope in resource.scope_spans for span in scope.spans]
    assert summary["spans"] == len(in_file) == len(receiver.spans()) > 0
    assert [s.span_id for s in receiver.spans()] == [s.span_id for s in in_file]
    assert receiver.headers[0]["authorization"] == "Basic abc"
    assert sent.stdout.strip() == (f"sent 1 conversation to {receiver.endpoint}: "
                                   f"{len(in_file)} spans")


@pytest.mark.parametrize(("args", "said"), [
    (["--format", "agentrun", "--endpoint", "http://127.0.0.1:9/v1/traces"],
     "use it with --format otel"),
    (["--format", "otel", "--out", "x.jsonl", "--endpoint", "http://127.0.0.1:9/v1/traces"],
     "not both"),
    (["--format", "otel"], "--out FILE is required (or --endpoint URL)"),
    (["--format", "otel", "--out", "x.jsonl", "--header", "a=b"], "--header goes with"),
])
def test_the_cli_refuses_what_does_not_go_together(tmp_path: Path, args: list[str],
                                                   said: str) -> None:
    done = run_cli("export", *args, cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_the_cli_says_when_the_endpoint_does_not_take_the_spans(tmp_path: Path) -> None:
    with isolated(tmp_path) as env:
        record()
        done = run_cli("export", "--format", "otel", "--endpoint",
                       f"http://127.0.0.1:{free_port()}/v1/traces", env=env, timeout=60)
    assert done.returncode == 1
    assert "cannot send spans to http://127.0.0.1:" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_cli_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nsys.modules['opentelemetry'] = None\n")
    with isolated(tmp_path / "home") as env:
        record()
        done = run_cli("export", "--format", "otel", "--out", tmp_path / "spans.jsonl",
                       env={**env, "PYTHONPATH": str(blocker)})
        listed = run_cli("export", "--format", "agentrun", "--out", tmp_path / "a.jsonl",
                         env={**env, "PYTHONPATH": str(blocker)})
    assert done.returncode == 1 and NEEDS_EXTRA in done.stderr
    assert not (tmp_path / "spans.jsonl").exists()
    assert listed.returncode == 0, listed.stderr  # the other formats need no extra
