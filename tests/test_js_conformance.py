"""Session items against the real JavaScript Agents SDK that skilled_crew 1.0.11 runs on.

skilled_crew reads the rows of its SQLite item store back as items of ``@openai/agents-core``
and sends them to the model with ``@openai/agents-openai``. tests/js/ pins those packages
(0.8.3, the versions skilled_crew 1.0.11 is built on) and ``tests/js/check_items.mjs`` runs them
with no network: it validates each item with the SDK's protocol schema
(``protocol.ModelItem``) and builds the Responses API request from the whole history with the
SDK's ``OpenAIResponsesModel`` on a stand-in client.

- skilled_crew's own store passes, and becomes a request with every call followed by its
  output;
- negative controls: items shaped like the Python SDK's are reported;
- a table of hand-written items of every type the schema knows passes, and each becomes the
  Responses API input item written beside it (the wire shape, which is the Python SDK's item
  shape): the table is the reference for converting between the two SDKs' items.

Node >= 20 with npm is needed; the first test installs tests/js/node_modules with
``npm ci --prefix tests/js`` when it is missing or older than tests/js/package-lock.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from harness import REPO, WAIT, run, snapshot
from scripted import call, final, model, reasoning, run_agent, tools_step

from sessiontape import Recorder
from sessiontape.storage.skillet.log_entries import STEP_TYPES

JS = REPO / "tests" / "js"
SCRIPT = JS / "check_items.mjs"
LOCKFILE = JS / "package-lock.json"
NODE_MODULES = JS / "node_modules"
# npm writes this at the end of every install: node_modules' own record of what it holds.
INSTALLED_LOCK = NODE_MODULES / ".package-lock.json"
PINNED = {"@openai/agents-core": "0.8.3", "@openai/agents-openai": "0.8.3"}
STORE = ".agent_sessions.sqlite"


# --------------------------------------------------------------------------- the harness


def _installed() -> bool:
    """Whether node_modules is there and no older than package-lock.json."""
    return (INSTALLED_LOCK.is_file()
            and INSTALLED_LOCK.stat().st_mtime_ns >= LOCKFILE.stat().st_mtime_ns)


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    """One ``npm ci`` at a time in this checkout (several pytest runs may share it)."""
    name = hashlib.sha256(str(JS).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"sessiontape-npm-ci-{name}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="module", autouse=True)
def js_sdk() -> Path:
    """tests/js/node_modules as package-lock.json pins it (``npm ci`` once if it is missing or
    stale). Node and npm are required: their absence fails, it does not skip."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH: the JS conformance tests need Node >= 20 with "
                        f"npm (then `npm ci --prefix tests/js`)")
    with _install_lock():
        if not _installed():
            done = run(["npm", "ci", "--prefix", JS, "--no-audit", "--no-fund"],
                       env=dict(os.environ), cwd=REPO, timeout=WAIT * 20)
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
            assert _installed(), "npm ci left no node_modules/.package-lock.json"
    return NODE_MODULES


def check_items(items: list[Any]) -> dict[str, Any]:
    """``node tests/js/check_items.mjs`` on ``items``: its parsed report, with the keys
    ``schema_errors`` ([{index, type, errors}]), ``request_error`` (None or the message) and
    ``request_input`` (the built request's ``input``, None if building failed)."""
    with tempfile.TemporaryDirectory(prefix="sessiontape-js-") as tmp:
        path = Path(tmp) / "items.json"
        path.write_text(json.dumps(items), encoding="utf-8")
        done = run(["node", SCRIPT, path], cwd=REPO, timeout=WAIT * 4)
    assert done.returncode == 0, f"check_items.mjs exited {done.returncode}:\n{done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout)
    assert set(report) == {"schema_errors", "request_error", "request_input"}, report
    return report


def node_eval(code: str) -> str:
    """The stdout of an ES module ``code`` run by node in tests/js (where the SDK resolves)."""
    done = run(["node", "--input-type=module", "-e", code], cwd=JS, timeout=WAIT * 4)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_pinned_sdk_is_installed() -> None:
    manifest = json.loads((JS / "package.json").read_text())
    assert manifest["private"] is True
    assert "scripts" not in manifest
    for name, version in PINNED.items():
        assert manifest["dependencies"][name] == version
        installed = json.loads((NODE_MODULES / name / "package.json").read_text())
        assert installed["version"] == version
    lock = json.loads(LOCKFILE.read_text())
    assert {name: lock["packages"][f"node_modules/{name}"]["version"] for name in PINNED} == PINNED
    # agents-openai runs on exactly that agents-core, and both on zod 4 (their peer dependency).
    openai = json.loads((NODE_MODULES / "@openai/agents-openai/package.json").read_text())
    assert openai["dependencies"]["@openai/agents-core"] == "0.8.3"
    assert openai["peerDependencies"]["zod"] == "^4.0.0"
    assert json.loads((NODE_MODULES / "zod/package.json").read_text())["version"].startswith("4.")
    assert "node_modules/" in (REPO / ".gitignore").read_text().splitlines()


def test_check_items_usage_errors_exit_non_zero(tmp_path: Path) -> None:
    assert run(["node", SCRIPT], timeout=WAIT * 4).returncode == 2
    not_a_list = tmp_path / "object.json"
    not_a_list.write_text('{"type": "message"}')
    done = run(["node", SCRIPT, not_a_list], timeout=WAIT * 4)
    assert done.returncode == 2
    assert "does not hold a JSON array" in done.stderr
    assert check_items([]) == {"schema_errors": [], "request_error": None, "request_input": []}


# --------------------------------------------------------------------------- skilled_crew's store


def read_sessions(store: Path) -> dict[tuple[str, str], list[Any]]:
    """Every session's items in skilled_crew's order, read through a read-only connection."""
    conn = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT user_id, session_name, item_json FROM session_items "
                            "ORDER BY user_id, session_name, created_at, id").fetchall()
    finally:
        conn.close()
    sessions: dict[tuple[str, str], list[Any]] = {}
    for user_id, session_name, item_json in rows:
        sessions.setdefault((user_id, session_name), []).append(json.loads(item_json))
    return sessions


def test_skilled_crews_own_store_conforms(skillet_fixture: Path) -> None:
    before = snapshot(skillet_fixture, mtimes=True, sqlite_sidecars=True)
    sessions = read_sessions(skillet_fixture / STORE)
    assert {name for _, name in sessions} == {
        "fixture_session_1", "fixture_session_stream", "fixture_session_stream_ok"}
    calls_seen = 0
    for key, items in sessions.items():
        report = check_items(items)
        assert report["schema_errors"] == [], key
        assert report["request_error"] is None, key
        wire = report["request_input"]
        assert len(wire) == len(items), key
        for item, entry in zip(items, wire, strict=True):
            if item["type"] == "function_call":
                assert entry == {"type": "function_call", "call_id": item["callId"],
                                 "name": item["name"], "arguments": item["arguments"],
                                 "status": "completed"}
            elif item["type"] == "function_call_result":
                assert entry == {"type": "function_call_output", "call_id": item["callId"],
                                 "output": item["output"]["text"], "status": "completed"}
            elif item["role"] == "user":
                assert entry == {"role": "user", "content": item["content"]}
            else:
                assert item["role"] == "assistant"
                assert entry == {"type": "message", "id": item["id"], "role": "assistant",
                                 "status": "completed",
                                 "content": [{"type": "output_text", "annotations": [],
                                              "text": part["text"]}
                                             for part in item["content"]]}
        # Every call is followed by its output, and every output follows its call.
        calls = {e["call_id"]: i for i, e in enumerate(wire) if e.get("type") == "function_call"}
        outputs = {e["call_id"]: i for i, e in enumerate(wire)
                   if e.get("type") == "function_call_output"}
        assert calls.keys() == outputs.keys(), key
        assert all(calls[c] < outputs[c] for c in calls), key
        calls_seen += len(calls)
    assert calls_seen == 9  # 6 in fixture_session_1, 3 in fixture_session_stream_ok
    assert snapshot(skillet_fixture, mtimes=True, sqlite_sidecars=True) == before


# --------------------------------------------------------------------------- negative controls

USER_TURN = {"type": "message", "role": "user", "content": "What is the weather?"}
JS_CALL = {"type": "function_call", "callId": "c1", "name": "weather", "arguments": "{}"}
JS_RESULT = {"type": "function_call_result", "name": "weather", "callId": "c1",
             "status": "completed", "output": {"type": "text", "text": "sunny"}}


def test_python_shaped_function_call_output_is_reported() -> None:
    python_output = {"type": "function_call_output", "call_id": "c1", "output": "x"}
    report = check_items([USER_TURN, JS_CALL, python_output])
    [error] = report["schema_errors"]
    assert error["index"] == 2
    assert error["type"] == "function_call_output"
    assert 'no ModelItem member accepts type="function_call_output"' in error["errors"][0]
    # The request builder knows no such item either: skilled_crew could not continue.
    compact = json.dumps(python_output, separators=(",", ":"))
    assert report["request_error"] == f"UserError: Unsupported item {compact}"
    assert report["request_input"] is None


def test_function_call_with_snake_case_call_id_is_reported() -> None:
    python_call = {"type": "function_call", "call_id": "c1", "name": "weather",
                   "arguments": "{}"}
    report = check_items([USER_TURN, python_call, JS_RESULT])
    assert report["schema_errors"] == [{
        "index": 1, "type": "function_call",
        "errors": ["function_call: callId: Invalid input: expected string, received undefined"]}]
    # Why the schema check matters: the builder alone would silently send a call without id.
    assert report["request_error"] is None
    assert report["request_input"][1] == {"type": "function_call", "name": "weather",
                                          "arguments": "{}"}


def test_unknown_item_type_is_reported() -> None:
    custom = {"type": "custom_tool_call", "call_id": "c9", "name": "grammar", "input": "abc"}
    report = check_items([USER_TURN, custom, JS_CALL, JS_RESULT])
    [error] = report["schema_errors"]
    assert error["index"] == 1
    assert error["type"] == "custom_tool_call"
    assert error["errors"][1].startswith('type: expected one of "message"|"tool_search_call"|')
    assert report["request_error"].startswith(
        'UserError: Unsupported item {"type":"custom_tool_call"')
    assert report["request_input"] is None


def test_wrong_fields_of_a_known_type_are_reported() -> None:
    items = [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]},
        {**JS_RESULT, "status": "done"},
        {"type": "computer_call", "callId": "c2", "status": "completed"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}]},
    ]
    report = check_items(items)
    assert report["schema_errors"] == [
        {"index": 0, "type": "message", "errors": [
            'message(role=assistant): status: Invalid option: expected one of '
            '"in_progress"|"completed"|"incomplete"',
            "message(role=assistant): content[0].text: "
            "Invalid input: expected string, received undefined"]},
        {"index": 1, "type": "function_call_result", "errors": [
            'function_call_result: status: Invalid option: expected one of '
            '"in_progress"|"completed"|"incomplete"']},
        # (zod reports a refinement's issue alone: no other member is named)
        {"index": 2, "type": "computer_call", "errors": [
            "action: computer_call items must include action or actions."]},
        {"index": 3, "type": "reasoning", "errors": [
            "reasoning: content: Invalid input: expected array, received undefined"]},
    ]


# --------------------------------------------------------------------------- every item type

PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0xLjQK"

# (case, the JS SDK item as skilled_crew stores it, what the request builder sends for it).
# An expected str instead of a dict: the item passes the schema but building the request
# fails with that message (the JS SDK itself could not send it).
TABLE: list[tuple[str, dict[str, Any], dict[str, Any] | str]] = [
    # --- messages: `type: "message"` is optional; user and system ones go out without it
    ("user_text", {"type": "message", "role": "user", "content": "Hello"},
     {"role": "user", "content": "Hello"}),
    ("user_without_type", {"role": "user", "content": "Hello"},
     {"role": "user", "content": "Hello"}),
    ("user_parts", {
        "type": "message", "role": "user", "id": "msg_u1", "providerData": {"customKey": 1},
        "content": [
            {"type": "input_text", "text": "Look", "providerData": {"someFlag": True}},
            {"type": "input_image", "image": "https://example.com/cat.png", "detail": "high"},
            {"type": "input_image", "image": {"id": "file_img1"}},
            {"type": "input_image", "image": PNG},
            {"type": "input_file", "file": PDF, "filename": "a.pdf"},
            {"type": "input_file", "file": "https://example.com/a.pdf"},
            {"type": "input_file", "file": {"id": "file_doc1"}},
            {"type": "input_file", "file": {"url": "https://example.com/b.pdf"}},
        ]},
     {"id": "msg_u1", "role": "user", "custom_key": 1, "content": [
         {"type": "input_text", "text": "Look", "some_flag": True},
         {"type": "input_image", "detail": "high", "image_url": "https://example.com/cat.png"},
         {"type": "input_image", "detail": "auto", "file_id": "file_img1"},
         {"type": "input_image", "detail": "auto", "image_url": PNG},
         {"type": "input_file", "file_data": PDF, "filename": "a.pdf"},
         {"type": "input_file", "file_url": "https://example.com/a.pdf"},
         {"type": "input_file", "file_id": "file_doc1"},
         {"type": "input_file", "file_url": "https://example.com/b.pdf"},
     ]}),
    ("user_audio", {"type": "message", "role": "user",
                    "content": [{"type": "audio", "audio": "UklGRg==", "format": "wav",
                                 "transcript": None}]},
     'UserError: Unsupported input content type: {"type":"audio","audio":"UklGRg==",'
     '"format":"wav","transcript":null}'),
    ("user_file_bare_string", {"type": "message", "role": "user",
                               "content": [{"type": "input_file", "file": "file_abc"}]},
     "UserError: Unsupported string data for file input. If you're trying to pass an uploaded "
     "file's ID, use an object with the ID property instead."),
    ("system", {"type": "message", "role": "system", "content": "Be brief."},
     {"role": "system", "content": "Be brief."}),
    ("assistant", {
        "type": "message", "role": "assistant", "id": "msg_a1", "status": "completed",
        "providerData": {},
        "content": [
            {"type": "output_text", "text": "Paris",
             "providerData": {"annotations": [{"type": "url_citation", "url": "https://x.org",
                                               "title": "x", "start_index": 0,
                                               "end_index": 5}],
                              "logprobs": []}},
            {"type": "output_text", "text": "plain"},
            {"type": "refusal", "refusal": "No."},
        ]},
     {"type": "message", "id": "msg_a1", "role": "assistant", "status": "completed",
      "content": [
          {"type": "output_text", "text": "Paris", "logprobs": [],
           "annotations": [{"type": "url_citation", "url": "https://x.org", "title": "x",
                            "start_index": 0, "end_index": 5}]},
          {"type": "output_text", "text": "plain", "annotations": []},
          {"type": "refusal", "refusal": "No."},
      ]}),
    ("assistant_audio", {"type": "message", "role": "assistant", "status": "completed",
                         "content": [{"type": "audio", "audio": {"id": "audio_1"}}]},
     'UserError: Unsupported output content type: {"type":"audio","audio":{"id":"audio_1"}}'),
    ("assistant_image", {"type": "message", "role": "assistant", "status": "in_progress",
                         "content": [{"type": "image", "image": "iVBORw0KGgo="}]},
     'UserError: Unsupported output content type: {"type":"image","image":"iVBORw0KGgo="}'),
    # --- function calls and their results
    ("function_call", {
        "type": "function_call", "id": "fc_1", "callId": "call_1", "name": "get_weather",
        "namespace": "weather", "status": "completed", "arguments": '{"city":"Paris"}',
        "providerData": {"type": "function_call"}},
     {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
      "namespace": "weather", "status": "completed", "arguments": '{"city":"Paris"}'}),
    ("function_call_minimal", {"type": "function_call", "callId": "call_2", "name": "f",
                               "arguments": "{}"},
     {"type": "function_call", "call_id": "call_2", "name": "f", "arguments": "{}"}),
    ("result_string", {"type": "function_call_result", "name": "f", "callId": "call_2",
                       "status": "completed", "output": "plain"},
     {"type": "function_call_output", "call_id": "call_2", "output": "plain",
      "status": "completed"}),
    ("result_text", {"type": "function_call_result", "id": "fco_1", "name": "f",
                     "namespace": "weather", "callId": "call_2", "status": "incomplete",
                     "output": {"type": "text", "text": "ok"}},
     {"type": "function_call_output", "id": "fco_1", "call_id": "call_2", "output": "ok",
      "status": "incomplete"}),
    ("result_image_url", {"type": "function_call_result", "name": "f", "callId": "call_3",
                          "status": "completed",
                          "output": {"type": "image", "image": "https://example.com/c.png",
                                     "detail": "low"}},
     {"type": "function_call_output", "call_id": "call_3", "status": "completed",
      "output": [{"type": "input_image", "image_url": "https://example.com/c.png",
                  "detail": "low"}]}),
    ("result_image_data", {"type": "function_call_result", "name": "f", "callId": "call_4",
                           "status": "completed",
                           "output": {"type": "image", "image": {"data": "iVBORw0KGgo=",
                                                                 "mediaType": "image/png"}}},
     {"type": "function_call_output", "call_id": "call_4", "status": "completed",
      "output": [{"type": "input_image", "image_url": PNG}]}),
    ("result_image_file_id", {"type": "function_call_result", "name": "f", "callId": "call_5",
                              "status": "completed",
                              "output": {"type": "image", "image": {"fileId": "file_img2"}}},
     {"type": "function_call_output", "call_id": "call_5", "status": "completed",
      "output": [{"type": "input_image", "file_id": "file_img2"}]}),
    ("result_file_data", {"type": "function_call_result", "name": "f", "callId": "call_6",
                          "status": "completed",
                          "output": {"type": "file", "file": {"data": "aGVsbG8=",
                                                             "mediaType": "text/plain",
                                                             "filename": "h.txt"}}},
     {"type": "function_call_output", "call_id": "call_6", "status": "completed",
      "output": [{"type": "input_file", "file_data": "data:text/plain;base64,aGVsbG8=",
                  "filename": "h.txt"}]}),
    ("result_file_id", {"type": "function_call_result", "name": "f", "callId": "call_7",
                        "status": "completed",
                        "output": {"type": "file", "file": {"id": "file_3",
                                                           "filename": "r.pdf"}}},
     {"type": "function_call_output", "call_id": "call_7", "status": "completed",
      "output": [{"type": "input_file", "file_id": "file_3", "filename": "r.pdf"}]}),
    ("result_structured", {"type": "function_call_result", "name": "f", "callId": "call_8",
                           "status": "completed",
                           "output": [{"type": "input_text", "text": "a"},
                                      {"type": "input_image",
                                       "image": "https://example.com/i.png", "detail": "auto"},
                                      {"type": "input_file",
                                       "file": {"url": "https://example.com/f.pdf"},
                                       "filename": "f.pdf"}]},
     {"type": "function_call_output", "call_id": "call_8", "status": "completed",
      "output": [{"type": "input_text", "text": "a"},
                 {"type": "input_image", "image_url": "https://example.com/i.png",
                  "detail": "auto"},
                 {"type": "input_file", "file_url": "https://example.com/f.pdf",
                  "filename": "f.pdf"}]}),
    # --- reasoning: the summary is `content` (input_text parts); encrypted content in
    # providerData; rawContent is not sent
    ("reasoning", {"type": "reasoning", "id": "rs_1",
                   "content": [{"type": "input_text", "text": "Thinking about it"}],
                   "rawContent": [{"type": "reasoning_text", "text": "raw thoughts"}],
                   "providerData": {"encryptedContent": "gAAAAB"}},
     {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB",
      "summary": [{"type": "summary_text", "text": "Thinking about it"}]}),
    ("reasoning_minimal", {"type": "reasoning", "content": []},
     {"type": "reasoning", "summary": []}),
    # --- hosted tool calls: the Responses API item lives in providerData (its `type` picks it)
    ("hosted_web_search", {"type": "hosted_tool_call", "id": "ws_1", "name": "web_search_call",
                           "status": "completed",
                           "providerData": {"type": "web_search_call",
                                            "action": {"type": "search", "query": "paris"}}},
     {"type": "web_search_call", "id": "ws_1", "status": "completed",
      "action": {"type": "search", "query": "paris"}}),
    ("hosted_file_search", {"type": "hosted_tool_call", "id": "fs_1",
                            "name": "file_search_call", "status": "completed",
                            "providerData": {"type": "file_search_call", "queries": ["q"],
                                             "results": []}},
     {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"],
      "results": []}),
    ("hosted_code_interpreter", {"type": "hosted_tool_call", "id": "ci_1",
                                 "name": "code_interpreter_call", "status": "completed",
                                 "providerData": {"type": "code_interpreter_call",
                                                  "code": "print(1)",
                                                  "outputs": [{"type": "logs", "logs": "1"}],
                                                  "container_id": "cntr_1"}},
     {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "code": "print(1)",
      "outputs": [{"type": "logs", "logs": "1"}], "container_id": "cntr_1"}),
    ("hosted_image_generation", {"type": "hosted_tool_call", "id": "ig_1",
                                 "name": "image_generation_call", "status": "completed",
                                 "providerData": {"type": "image_generation_call",
                                                  "result": "iVBORw0KGgo="}},
     {"type": "image_generation_call", "id": "ig_1", "status": "completed",
      "result": "iVBORw0KGgo="}),
    ("hosted_mcp_call", {"type": "hosted_tool_call", "id": "mcp_1", "name": "mcp_call",
                         "status": "completed", "arguments": "{}", "output": "3",
                         "providerData": {"type": "mcp_call", "id": "mcp_1", "name": "add",
                                          "arguments": "{}", "server_label": "calc",
                                          "output": "3"}},
     {"type": "mcp_call", "id": "mcp_1", "name": "add", "arguments": "{}",
      "server_label": "calc", "output": "3"}),
    ("hosted_mcp_list_tools", {"type": "hosted_tool_call", "id": "mcpl_1",
                               "name": "mcp_list_tools",
                               "providerData": {"type": "mcp_list_tools",
                                                "server_label": "calc",
                                                "tools": [{"name": "add",
                                                           "input_schema": {}}]}},
     {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "calc",
      "tools": [{"name": "add", "input_schema": {}}]}),
    ("hosted_mcp_approval_request", {"type": "hosted_tool_call", "id": "mcpr_1",
                                     "name": "mcp_approval_request",
                                     "providerData": {"type": "mcp_approval_request",
                                                      "id": "mcpr_1", "name": "add",
                                                      "arguments": "{}",
                                                      "server_label": "calc"}},
     {"type": "mcp_approval_request", "id": "mcpr_1", "name": "add", "arguments": "{}",
      "server_label": "calc"}),
    ("hosted_mcp_approval_response", {"type": "hosted_tool_call",
                                      "name": "mcp_approval_response",
                                      "providerData": {"type": "mcp_approval_response",
                                                       "approve": True,
                                                       "approval_request_id": "mcpr_1",
                                                       "reason": "fine"}},
     {"type": "mcp_approval_response", "approve": True, "approval_request_id": "mcpr_1",
      "reason": "fine"}),
    ("hosted_other", {"type": "hosted_tool_call", "name": "custom_thing", "status": "done"},
     'UserError: Unsupported built-in tool call type: {"type":"hosted_tool_call",'
     '"name":"custom_thing","status":"done"}'),
    # --- computer use
    ("computer_call", {"type": "computer_call", "id": "cu_1", "callId": "call_c1",
                       "status": "completed",
                       "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
                       "providerData": {"pendingSafetyChecks": [{"id": "sc_1", "code": "x",
                                                                 "message": "m"}]}},
     {"type": "computer_call", "id": "cu_1", "call_id": "call_c1", "status": "completed",
      "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
      "pending_safety_checks": [{"id": "sc_1", "code": "x", "message": "m"}]}),
    ("computer_call_batched", {"type": "computer_call", "callId": "call_c2",
                               "status": "in_progress",
                               "actions": [{"type": "screenshot"},
                                           {"type": "type", "text": "hi"},
                                           {"type": "scroll", "x": 0, "y": 0, "scroll_x": 0,
                                            "scroll_y": 40},
                                           {"type": "keypress", "keys": ["CTRL", "A"]},
                                           {"type": "drag", "path": [{"x": 0, "y": 0},
                                                                     {"x": 5, "y": 5}]},
                                           {"type": "double_click", "x": 3, "y": 4},
                                           {"type": "move", "x": 6, "y": 7},
                                           {"type": "wait"}]},
     {"type": "computer_call", "call_id": "call_c2", "status": "in_progress",
      "action": {"type": "screenshot"},
      "actions": [{"type": "screenshot"}, {"type": "type", "text": "hi"},
                  {"type": "scroll", "x": 0, "y": 0, "scroll_x": 0, "scroll_y": 40},
                  {"type": "keypress", "keys": ["CTRL", "A"]},
                  {"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 5, "y": 5}]},
                  {"type": "double_click", "x": 3, "y": 4}, {"type": "move", "x": 6, "y": 7},
                  {"type": "wait"}]}),
    ("computer_call_result", {"type": "computer_call_result", "id": "cuo_1",
                              "callId": "call_c1",
                              "output": {"type": "computer_screenshot", "data": PNG},
                              "providerData": {"acknowledgedSafetyChecks": [{"id": "sc_1"}]}},
     {"type": "computer_call_output", "id": "cuo_1", "call_id": "call_c1",
      "output": {"type": "computer_screenshot", "image_url": PNG},
      "acknowledged_safety_checks": [{"id": "sc_1"}]}),
    # --- shell
    ("shell_call", {"type": "shell_call", "id": "sh_1", "callId": "call_s1",
                    "status": "completed",
                    "action": {"commands": ["ls -la"], "timeoutMs": 1000,
                               "maxOutputLength": 4096}},
     {"type": "shell_call", "id": "sh_1", "call_id": "call_s1", "status": "completed",
      "action": {"commands": ["ls -la"], "timeout_ms": 1000, "max_output_length": 4096}}),
    ("shell_call_minimal", {"type": "shell_call", "callId": "call_s2",
                            "action": {"commands": ["pwd"]}},
     {"type": "shell_call", "call_id": "call_s2", "status": "in_progress",
      "action": {"commands": ["pwd"], "timeout_ms": None, "max_output_length": None}}),
    ("shell_call_output", {"type": "shell_call_output", "callId": "call_s1",
                           "maxOutputLength": 4096,
                           "output": [{"stdout": "a", "stderr": "",
                                       "outcome": {"type": "exit", "exitCode": 0}},
                                      {"stdout": "", "stderr": "slow",
                                       "outcome": {"type": "timeout"}},
                                      {"stdout": "", "stderr": "killed",
                                       "outcome": {"type": "exit", "exitCode": None}}]},
     {"type": "shell_call_output", "call_id": "call_s1", "max_output_length": 4096,
      "output": [{"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
                 {"stdout": "", "stderr": "slow", "outcome": {"type": "timeout"}},
                 {"stdout": "", "stderr": "killed",
                  "outcome": {"type": "exit", "exit_code": 0}}]}),
    # --- apply_patch
    ("apply_patch_create", {"type": "apply_patch_call", "id": "ap_1", "callId": "call_p1",
                            "status": "completed",
                            "operation": {"type": "create_file", "path": "a.txt",
                                          "diff": "+hello\n"}},
     {"type": "apply_patch_call", "id": "ap_1", "call_id": "call_p1", "status": "completed",
      "operation": {"type": "create_file", "path": "a.txt", "diff": "+hello\n"}}),
    ("apply_patch_update", {"type": "apply_patch_call", "callId": "call_p2",
                            "status": "in_progress",
                            "operation": {"type": "update_file", "path": "a.txt",
                                          "diff": "-hello\n+bye\n"}},
     {"type": "apply_patch_call", "call_id": "call_p2", "status": "in_progress",
      "operation": {"type": "update_file", "path": "a.txt", "diff": "-hello\n+bye\n"}}),
    ("apply_patch_delete", {"type": "apply_patch_call", "callId": "call_p3",
                            "status": "completed",
                            "operation": {"type": "delete_file", "path": "a.txt"}},
     {"type": "apply_patch_call", "call_id": "call_p3", "status": "completed",
      "operation": {"type": "delete_file", "path": "a.txt"}}),
    ("apply_patch_output", {"type": "apply_patch_call_output", "id": "apo_1",
                            "callId": "call_p1", "status": "completed",
                            "output": "Created a.txt"},
     {"type": "apply_patch_call_output", "id": "apo_1", "call_id": "call_p1",
      "status": "completed", "output": "Created a.txt"}),
    ("apply_patch_output_failed", {"type": "apply_patch_call_output", "callId": "call_p2",
                                   "status": "failed"},
     {"type": "apply_patch_call_output", "call_id": "call_p2", "status": "failed"}),
    # --- tool search
    ("tool_search_call", {"type": "tool_search_call", "id": "ts_1", "callId": "call_t1",
                          "execution": "client", "status": "completed",
                          "arguments": {"query": "weather"}},
     {"type": "tool_search_call", "id": "ts_1", "call_id": "call_t1", "execution": "client",
      "status": "completed", "arguments": {"query": "weather"}}),
    ("tool_search_call_server", {"type": "tool_search_call", "id": "ts_2",
                                 "call_id": None, "execution": "server",
                                 "status": "searching",
                                 "arguments": {"paths": ["crm"], "query": "contacts"}},
     {"type": "tool_search_call", "id": "ts_2", "execution": "server",
      "arguments": {"paths": ["crm"], "query": "contacts"}}),
    ("tool_search_output", {"type": "tool_search_output", "id": "tso_1", "callId": "call_t1",
                            "execution": "client", "status": "completed",
                            "tools": [{"type": "tool_reference", "functionName": "get_weather",
                                       "namespace": "weather"},
                                      {"type": "function", "name": "f", "parameters": {},
                                       "deferLoading": True}]},
     {"type": "tool_search_output", "id": "tso_1", "call_id": "call_t1",
      "execution": "client", "status": "completed",
      "tools": [{"type": "tool_reference", "function_name": "get_weather",
                 "namespace": "weather"},
                {"type": "function", "name": "f", "parameters": {}, "defer_loading": True}]}),
    # --- compaction and the catch-all
    ("compaction", {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAC",
                    "created_by": "server"},
     {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAC"}),
    ("unknown", {"type": "unknown", "id": "ct_1",
                 "providerData": {"type": "custom_tool_call", "callId": "call_u1",
                                  "name": "grammar", "input": "abc"}},
     {"type": "custom_tool_call", "id": "ct_1", "call_id": "call_u1", "name": "grammar",
      "input": "abc"}),
]
CASES = {case: (item, wire) for case, item, wire in TABLE}


@pytest.fixture(scope="module")
def table_reports() -> dict[str, tuple[dict[str, Any], Any]]:
    """Each case's schema verdict and built input item: the items the SDK can send go through
    check_items together, in one history (in the table's order); each of the others alone."""
    sendable = [case for case, (_, wire) in CASES.items() if isinstance(wire, dict)]
    together = check_items([CASES[case][0] for case in sendable])
    assert together["request_error"] is None, together["request_error"]
    errors = {e["index"]: e for e in together["schema_errors"]}
    found: dict[str, tuple[dict[str, Any], Any]] = {}
    for index, case in enumerate(sendable):
        found[case] = ({"schema_errors": [errors[index]] if index in errors else []},
                       together["request_input"][index])
    for case, (item, wire) in CASES.items():
        if not isinstance(wire, dict):
            alone = check_items([item])
            found[case] = (alone, alone["request_error"])
    return found


@pytest.mark.parametrize("case", list(CASES))
def test_every_item_type_passes_and_builds(
        case: str, table_reports: dict[str, tuple[dict[str, Any], Any]]) -> None:
    report, built = table_reports[case]
    assert report["schema_errors"] == []
    assert built == CASES[case][1]


def test_the_table_covers_every_member_of_the_schema() -> None:
    """Every member of protocol.ModelItem (by its type, and role for messages) has a case, and
    every content part type of the members' unions is used."""
    members = json.loads(node_eval("""
        import { protocol } from '@openai/agents-core';
        const lit = (s) => { let d = s?.def; if (d?.type === 'optional') d = d.innerType?.def;
                             return d?.type === 'literal' ? d.values[0] : null; };
        const parts = (u) => u.options.map((o) => lit(o.shape.type));
        console.log(JSON.stringify({
          members: protocol.ModelItem.options.map((o) => [lit(o.shape.type), lit(o.shape.role)]),
          user: parts(protocol.UserContent), assistant: parts(protocol.AssistantContent),
          output: parts(protocol.ToolCallOutputContent),
          structured: parts(protocol.ToolCallStructuredOutput),
        }));
    """))
    assert len(members["members"]) == 17
    kinds = {(item.get("type", "message"), item.get("role")) for item, _ in CASES.values()}
    assert {(t, r) for t, r in members["members"]} == kinds
    user_parts = {p["type"] for item, _ in CASES.values()
                  if item.get("role") == "user" and isinstance(item["content"], list)
                  for p in item["content"]}
    assistant_parts = {p["type"] for item, _ in CASES.values() if item.get("role") == "assistant"
                       for p in item["content"]}
    outputs = [item["output"] for item, _ in CASES.values()
               if item.get("type") == "function_call_result"]
    output_parts = {o["type"] for o in outputs if isinstance(o, dict)}
    structured_parts = {p["type"] for o in outputs if isinstance(o, list) for p in o}
    assert user_parts == set(members["user"])
    assert assistant_parts == set(members["assistant"])
    assert output_parts == set(members["output"])
    assert structured_parts == set(members["structured"])


# ------------------------------------------------- what sessiontape records, in the JS SDK


def test_a_rich_recorded_session_is_accepted_by_the_js_sdk() -> None:
    """A conversation recorded by the Recorder with the real Runner (tools, a failing tool,
    a subagent, a handoff, reasoning; a plain and a streamed turn): every stored row passes
    the JS SDK's schema, and its request builder turns the whole history into a request in
    which every call is followed by its output."""
    @function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @function_tool
    def broken(reason: str) -> str:
        """Always fails."""
        raise ValueError("broken on purpose")

    async def record() -> tuple[Path, Path]:
        rec = Recorder(session_name="rich")
        for turn, streamed in enumerate((False, True)):
            helper = Agent(name="Helper", tools=[add], model=model(
                tools_step(call("add", {"a": turn, "b": 2})), final(f"helped {turn}")))
            specialist = Agent(name="Specialist", model=model(
                final(f"special answer {turn}", None, reasoning(f"why {turn}"))))
            planner = Agent(name="Planner", handoffs=[specialist],
                            tools=[add, broken, helper.as_tool("ask_helper", "Ask the helper.")],
                            model=model(
                                tools_step(call("add", {"a": 1, "b": turn}),
                                           call("broken", {"reason": "test"}),
                                           call("ask_helper", {"input": f"q{turn}"}),
                                           extra=[reasoning(f"plan {turn}")]),
                                tools_step(call("transfer_to_specialist", {}))))
            output = await run_agent(rec, planner, f"question {turn}", streamed=streamed)
            assert output == f"special answer {turn}"
        await rec.flush()
        await rec.store.close()
        assert rec.errors == 0
        return rec.store.path, rec.log_path

    store, log = asyncio.run(record())
    (items,) = read_sessions(store).values()
    kinds = [item.get("type") for item in items]
    assert {"function_call", "function_call_result", "reasoning", "message"} <= set(kinds)
    assert kinds.count("function_call") == kinds.count("function_call_result") == 8
    assert not any("call_id" in item or item.get("type") == "function_call_output"
                   for item in items)  # no Python shapes in skilled_crew's table

    report = check_items(items)
    assert report["schema_errors"] == [] and report["request_error"] is None
    wire = report["request_input"]
    assert len(wire) == len(items)
    calls = [i for i, item in enumerate(wire) if item.get("type") == "function_call"]
    outputs = {item["call_id"]: i for i, item in enumerate(wire)
               if item.get("type") == "function_call_output"}
    assert len(calls) == len(outputs) == 8
    assert all(outputs[wire[i]["call_id"]] > i for i in calls)
    failed = [item for item in items if item.get("type") == "function_call_result"
              and item["name"] == "broken"]
    assert len(failed) == 2  # the SDK's default error text, as the model saw it
    assert all(item["output"]["text"].startswith("An error occurred while running the tool")
               for item in failed)
    # skilled_crew's run and chat replay the log first and stop at a step type they do not
    # know (CliChatHelper.displayTurn): every step is of one of its six types.
    lines = [json.loads(text) for text in log.read_text("utf-8").splitlines()]
    assert [line["kind"] for line in lines].count("user_message") == 2
    assert {line["stepResult"]["type"] for line in lines if line["kind"] == "step"} \
        == STEP_TYPES
