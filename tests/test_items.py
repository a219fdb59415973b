"""Conversion between the Python Agents SDK's items and the JS SDK's protocol items
(storage/skillet/items.py), against the items the Python SDK really produces, skilled_crew's own
rows, the Python SDK's request builder and the JS SDK itself (tests/js).

The table ``PYTHON_ITEMS`` holds one item of every kind the Python SDK stores, each made
the way the SDK makes it: output items through ``ModelResponse.to_input_items()`` (what
the runner saves), tool outputs through the SDK's helpers or the dicts its tool actions
build, user input through ``ItemHelpers.input_to_new_input_list``.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from agents import Agent, ItemHelpers, ModelSettings, Runner, Usage, function_tool
from agents.items import ModelResponse, ToolCallOutputItem
from agents.models.interface import ModelTracing
from agents.models.openai_responses import OpenAIResponsesModel
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool import ToolOutputFileContent, ToolOutputImage, ToolOutputText
from conftest import SKILLET_FIXTURE
from harness import REPO, WAIT, run
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseApplyPatchToolCall,
    ResponseCodeInterpreterToolCall,
    ResponseCompactionItem,
    ResponseComputerToolCall,
    ResponseCustomToolCall,
    ResponseFileSearchToolCall,
    ResponseFunctionShellToolCall,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseToolSearchCall,
    ResponseToolSearchOutputItem,
)
from openai.types.responses.response_output_item import (
    ImageGenerationCall,
    LocalShellCall,
    LocalShellCallAction,
    McpApprovalRequest,
    McpCall,
    McpListTools,
    McpListToolsTool,
)

from sessiontape.storage.skillet.item_store import ItemStore
from sessiontape.storage.skillet.items import (
    clip,
    content_text,
    from_protocol,
    from_protocol_items,
    is_known_item,
    is_protocol_item,
    item_shape,
    item_text,
    output_text,
    read_item,
    to_protocol,
    to_protocol_items,
)

SKILLET_STORE = SKILLET_FIXTURE / ".agent_sessions.sqlite"
PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0xLjQK"
AGENT: Agent[Any] = Agent(name="a")
JS_KEYS = {"callId", "providerData", "rawContent", "maxOutputLength", "timeoutMs",
           "exitCode", "functionName", "deferLoading"}


# --------------------------------------------------------------------------- the table


def stored(*output: Any) -> list[Any]:
    """Model output items as the runner stores them (``ModelResponse.to_input_items``)."""
    return ModelResponse(output=list(output), usage=Usage(), response_id="resp_1").to_input_items()


def tool_output(raw: dict[str, Any]) -> Any:
    """A tool output as the runner stores it (``ToolCallOutputItem.to_input_item``)."""
    return ToolCallOutputItem(agent=AGENT, raw_item=raw, output="").to_input_item()


def python_items() -> list[tuple[str, Any]]:
    weather = ResponseFunctionToolCall(arguments='{"city":"Paris"}', call_id="call_w",
                                       name="get_weather", type="function_call", id="fc_w",
                                       status="completed")
    handoff = ResponseFunctionToolCall(arguments="{}", call_id="call_h", name="transfer_to_b",
                                       type="function_call", id="fc_h", status="completed")
    picture = ResponseFunctionToolCall(arguments="{}", call_id="call_p", name="picture",
                                       type="function_call", id="fc_p", status="completed")
    (message,) = stored(ResponseOutputMessage(
        id="msg_1", role="assistant", status="completed", type="message",
        content=[ResponseOutputText.model_validate({
                     "type": "output_text", "text": "Paris [1]", "logprobs": [
                         {"token": "Paris", "bytes": [80], "logprob": -0.1,
                          "top_logprobs": []}],
                     "annotations": [{"type": "url_citation", "url": "https://x.org",
                                      "title": "x", "start_index": 0, "end_index": 5}]}),
                 ResponseOutputRefusal(type="refusal", refusal="Not that.")]))
    (plain_message,) = stored(ResponseOutputMessage(
        id="msg_2", role="assistant", status="completed", type="message",
        content=[ResponseOutputText(type="output_text", text="Hi", annotations=[])]))
    (reasoning,) = stored(ResponseReasoningItem.model_validate({
        "id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text",
                                                        "text": "Look it up."}],
        "content": [{"type": "reasoning_text", "text": "raw"}],
        "encrypted_content": "gAAAAB", "status": "completed"}))
    (bare_reasoning,) = stored(ResponseReasoningItem(id="rs_2", type="reasoning", summary=[]))
    calls = stored(
        weather, handoff, picture,
        ResponseFunctionToolCall(arguments="{}", call_id="call_n", name="lookup",
                                 namespace="crm", type="function_call", id="fc_n",
                                 status="in_progress"),
        ResponseFunctionWebSearch.model_validate({
            "id": "ws_1", "type": "web_search_call", "status": "completed",
            "action": {"type": "search", "query": "paris", "sources": [
                {"type": "url", "url": "https://x.org"}]}}),
        ResponseFileSearchToolCall.model_validate({
            "id": "fs_1", "type": "file_search_call", "status": "completed",
            "queries": ["q"], "results": [{"file_id": "file_1", "filename": "a.txt",
                                           "score": 0.5, "text": "hit",
                                           "attributes": {"k": "v"}}]}),
        ResponseCodeInterpreterToolCall.model_validate({
            "id": "ci_1", "type": "code_interpreter_call", "status": "completed",
            "code": "print(1)", "container_id": "cntr_1",
            "outputs": [{"type": "logs", "logs": "1"}]}),
        ImageGenerationCall(id="ig_1", type="image_generation_call", status="completed",
                            result="iVBORw0KGgo=", output_format="png", size="1024x1024"),
        McpCall(id="mcp_1", type="mcp_call", name="add", arguments='{"a":1}',
                server_label="calc", output="3", status="completed"),
        McpListTools(id="mcpl_1", type="mcp_list_tools", server_label="calc",
                     tools=[McpListToolsTool(name="add", input_schema={"type": "object"},
                                             description="Add.")]),
        McpApprovalRequest(id="mcpr_1", type="mcp_approval_request", name="add",
                           arguments="{}", server_label="calc"),
        ResponseComputerToolCall.model_validate({
            "id": "cu_1", "type": "computer_call", "call_id": "call_c", "status": "completed",
            "pending_safety_checks": [],
            "action": {"type": "click", "button": "left", "x": 1, "y": 2}}),
        ResponseComputerToolCall.model_validate({
            "id": "cu_2", "type": "computer_call", "call_id": "call_c2",
            "status": "completed", "pending_safety_checks": [{"id": "sc_1", "code": "x"}],
            "actions": [{"type": "screenshot"}, {"type": "type", "text": "hi"}]}),
        LocalShellCall(id="ls_1", type="local_shell_call", call_id="call_l",
                       status="completed", action=LocalShellCallAction(
                           type="exec", command=["ls"], env={"PATH": "/bin"},
                           timeout_ms=1000)),
        ResponseFunctionShellToolCall.model_validate({
            "id": "sh_1", "type": "shell_call", "call_id": "call_s", "status": "completed",
            "action": {"commands": ["ls -la"], "max_output_length": None,
                       "timeout_ms": 1000}}),
        ResponseApplyPatchToolCall.model_validate({
            "id": "ap_1", "type": "apply_patch_call", "call_id": "call_a",
            "status": "completed",
            "operation": {"type": "create_file", "path": "a.txt", "diff": "+hello\n"}}),
        ResponseApplyPatchToolCall.model_validate({
            "id": "ap_2", "type": "apply_patch_call", "call_id": "call_a2",
            "status": "in_progress", "operation": {"type": "delete_file", "path": "b.txt"}}),
        ResponseCustomToolCall(call_id="call_x", input="SELECT 1", name="sql",
                               type="custom_tool_call", id="ctc_1"),
        ResponseToolSearchCall(id="ts_1", type="tool_search_call", call_id="call_t",
                               execution="client", status="completed",
                               arguments={"query": "weather"}),
        ResponseToolSearchOutputItem.model_validate({
            "id": "tso_1", "type": "tool_search_output", "call_id": "call_t",
            "execution": "client", "status": "completed",
            "tools": [{"type": "function", "name": "get_weather", "parameters": {},
                       "defer_loading": True, "strict": True}]}),
    )
    weather_item, handoff_item, picture_item, namespaced, *hosted = calls
    compaction = ResponseCompactionItem(id="cmp_1", type="compaction",
                                        encrypted_content="gAAAAC").model_dump(
                                            exclude_unset=True)
    return [
        ("user_input", ItemHelpers.input_to_new_input_list("What is the weather?")[0]),
        ("user_parts", {"role": "user", "content": [
            {"type": "input_text", "text": "Look"},
            {"type": "input_image", "image_url": "https://example.com/cat.png",
             "detail": "high"},
            {"type": "input_image", "file_id": "file_img", "detail": "auto"},
            {"type": "input_file", "file_data": PDF, "filename": "a.pdf"},
            {"type": "input_file", "file_url": "https://example.com/a.pdf"},
            {"type": "input_file", "file_id": "file_doc"},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        ]}),
        ("user_typed", {"type": "message", "role": "user", "content": "typed"}),
        ("system", {"role": "system", "content": "Be brief."}),
        ("developer", {"role": "developer", "content": "Use tools."}),
        ("assistant", message),
        ("assistant_plain", plain_message),
        ("assistant_text", {"role": "assistant", "content": "earlier answer"}),
        ("reasoning", reasoning),
        ("reasoning_bare", bare_reasoning),
        ("function_call", weather_item),
        ("function_call_namespaced", namespaced),
        ("function_call_picture", picture_item),
        ("function_call_output", ItemHelpers.tool_call_output_item(weather, "18C")),
        ("handoff_call", handoff_item),
        ("handoff_output", ItemHelpers.tool_call_output_item(
            handoff, json.dumps({"assistant": "b"}))),
        ("function_call_output_structured", ItemHelpers.tool_call_output_item(picture, [
            ToolOutputText(text="a picture"),
            ToolOutputImage(image_url="https://example.com/p.png", detail="low"),
            ToolOutputImage(file_id="file_p"),
            ToolOutputFileContent(file_data=PDF, filename="p.pdf"),
            ToolOutputFileContent(file_url="https://example.com/p.pdf"),
            ToolOutputFileContent(file_id="file_q")])),
        *[(item["type"] if isinstance(item, dict) else "?", item) for item in hosted[:7]],
        ("mcp_approval_response", {"approval_request_id": "mcpr_1", "approve": False,
                                   "type": "mcp_approval_response", "reason": "no"}),
        ("computer_call", hosted[7]),
        ("computer_call_batched", hosted[8]),
        ("computer_call_output", tool_output({
            "call_id": "call_c", "output": {"type": "computer_screenshot", "image_url": PNG},
            "type": "computer_call_output", "acknowledged_safety_checks": None})),
        ("local_shell_call", hosted[9]),
        ("local_shell_call_output", tool_output({"type": "local_shell_call_output",
                                                 "call_id": "call_l", "output": "a\nb\n"})),
        ("shell_call", hosted[10]),
        ("shell_call_output", tool_output({
            "type": "shell_call_output", "call_id": "call_s", "status": "completed",
            "max_output_length": 4096, "shell_output": [{"stdout": "x"}],
            "output": [{"stdout": "a\n", "stderr": "", "outcome": {"type": "exit",
                                                                   "exit_code": 0}},
                       {"stdout": "", "stderr": "slow", "outcome": {"type": "timeout"}}]})),
        ("apply_patch_call", hosted[11]),
        ("apply_patch_call_delete", hosted[12]),
        ("apply_patch_call_output", tool_output({
            "type": "apply_patch_call_output", "call_id": "call_a", "status": "completed",
            "output": "Created a.txt"})),
        ("apply_patch_call_output_failed", tool_output({
            "type": "apply_patch_call_output", "call_id": "call_a2", "status": "failed"})),
        ("custom_tool_call", hosted[13]),
        ("custom_tool_call_output", {"type": "custom_tool_call_output", "call_id": "call_x",
                                     "output": "1"}),
        ("tool_search_call", hosted[14]),
        ("tool_search_output", hosted[15]),
        ("compaction", compaction),
        ("item_reference", {"type": "item_reference", "id": "msg_1"}),
    ]


PYTHON_ITEMS = python_items()
CASES = dict(PYTHON_ITEMS)


def test_the_table_is_what_the_sdk_makes() -> None:
    """A few spot checks that the table holds the SDK's own dicts, not hand-made ones."""
    assert CASES["user_input"] == {"content": "What is the weather?", "role": "user"}
    assert CASES["function_call"] == {"arguments": '{"city":"Paris"}', "call_id": "call_w",
                                      "name": "get_weather", "type": "function_call",
                                      "id": "fc_w", "status": "completed"}
    assert CASES["function_call_output"] == {"call_id": "call_w", "output": "18C",
                                             "type": "function_call_output"}
    assert CASES["assistant"]["content"][0]["annotations"][0]["type"] == "url_citation"
    assert "created_by" not in CASES["shell_call_output"]  # stripped by to_input_item
    assert "status" not in CASES["shell_call_output"]
    assert [kind for kind, _ in PYTHON_ITEMS[17:24]] == [
        "web_search_call", "file_search_call", "code_interpreter_call",
        "image_generation_call", "mcp_call", "mcp_list_tools", "mcp_approval_request"]
    assert len(CASES) == len(PYTHON_ITEMS)


def names() -> dict[str, str]:
    """Tool names by call id, as to_protocol_items finds them in a batch."""
    return {item["call_id"]: item["name"] for _, item in PYTHON_ITEMS
            if item.get("type") == "function_call"}


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("case", list(CASES))
def test_python_to_protocol_and_back_is_the_same_item(case: str) -> None:
    item = CASES[case]
    original = json.loads(json.dumps(item))
    protocol = to_protocol(item, names())
    assert protocol != item or case in ("user_typed", "compaction")  # it was converted
    assert from_protocol(protocol) == original
    # and through JSON, as the store keeps it
    stored_row = orjson.loads(orjson.dumps(protocol))
    assert from_protocol(stored_row) == original  # key order may differ: nothing reads it
    assert item == original  # the argument was not modified
    # no JS-only key leaks into the Python item
    assert not JS_KEYS & set(from_protocol(stored_row))


def test_batch_conversion_names_tool_outputs_after_their_calls() -> None:
    items = [item for _, item in PYTHON_ITEMS]
    protocol = to_protocol_items(items)
    by_call = {row.get("callId"): row for row in protocol
               if row.get("type") == "function_call_result"}
    assert by_call["call_w"]["name"] == "get_weather"
    assert by_call["call_h"]["name"] == "transfer_to_b"
    assert by_call["call_p"]["name"] == "picture"
    assert from_protocol_items(protocol) == items
    # an output whose call is elsewhere: the name given, else the call id (as the JS SDK)
    alone = CASES["function_call_output"]
    assert to_protocol_items([alone], {"call_w": "weather"})[0]["name"] == "weather"
    assert to_protocol(alone)["name"] == "call_w"


def test_reading_in_place_gives_the_same_items_and_from_protocol_changes_nothing() -> None:
    """The store converts freshly parsed rows in place (``own=True``); the public functions
    leave their argument as it was. Both give the same items."""
    rows = to_protocol_items([item for _, item in PYTHON_ITEMS])
    texts = [orjson.dumps(row) for row in rows]
    for row, text in zip(rows, texts, strict=True):
        assert read_item(orjson.loads(text), True) == from_protocol(row)
        assert orjson.dumps(row) == text  # not modified


def test_protocol_items_are_not_converted_twice(skillet_fixture: Path) -> None:
    """Items already in the protocol's shape (skilled_crew's rows, ours) stay as they are."""
    rows = session_rows(skillet_fixture / ".agent_sessions.sqlite")
    ours = to_protocol_items([item for _, item in PYTHON_ITEMS])
    for row in rows + ours:
        assert to_protocol(row) == row
    assert to_protocol_items(rows) == rows


def test_python_shaped_items_read_back_unchanged() -> None:
    """Rows written before the conversion (sessiontape 0.1) hold Python shapes: a reader
    takes them as they are."""
    for case, item in PYTHON_ITEMS:
        assert from_protocol(item) == item, case
        assert read_item(item) is item, case


# --------------------------------------------------------------------------- the JS shapes


def test_protocol_forms_of_the_common_items() -> None:
    batch = to_protocol_items([CASES[c] for c in (
        "user_input", "function_call", "function_call_output", "assistant", "reasoning",
        "handoff_call", "handoff_output", "web_search_call", "user_typed")])
    user, call, result, assistant, reasoning, handoff, handed, search, typed = batch
    assert user == {"type": "message", "role": "user", "content": "What is the weather?",
                    "providerData": {}}
    assert typed == {"type": "message", "role": "user", "content": "typed"}
    assert call == {"type": "function_call", "id": "fc_w", "callId": "call_w",
                    "name": "get_weather", "status": "completed",
                    "arguments": '{"city":"Paris"}',
                    "providerData": {"type": "function_call", "id": "fc_w"}}
    # exactly what skilled_crew's JS runner writes for a tool result
    assert result == {"type": "function_call_result", "name": "get_weather",
                      "callId": "call_w", "status": "completed",
                      "output": {"type": "text", "text": "18C"}}
    assert list(result) == ["type", "name", "callId", "status", "output"]
    assert handed == {"type": "function_call_result", "name": "transfer_to_b",
                      "callId": "call_h", "status": "completed",
                      "output": {"type": "text", "text": '{"assistant": "b"}'}}
    assert handoff["name"] == "transfer_to_b" and handoff["callId"] == "call_h"
    assert assistant == {
        "id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Paris [1]", "providerData": {
                        "annotations": [{"end_index": 5, "start_index": 0, "title": "x",
                                         "type": "url_citation", "url": "https://x.org"}],
                        "logprobs": [{"token": "Paris", "bytes": [80], "logprob": -0.1,
                                      "top_logprobs": []}]}},
                    {"type": "refusal", "refusal": "Not that."}],
        "providerData": {}}
    assert reasoning == {
        "type": "reasoning", "id": "rs_1",
        "content": [{"type": "input_text", "text": "Look it up.",
                     "providerData": {"type": "summary_text"}}],
        "providerData": {"id": "rs_1", "type": "reasoning",
                         "content": [{"text": "raw", "type": "reasoning_text"}],
                         "encrypted_content": "gAAAAB", "status": "completed"}}
    assert search == {"type": "hosted_tool_call", "id": "ws_1", "name": "web_search_call",
                      "status": "completed", "providerData": {
                          "id": "ws_1", "type": "web_search_call",
                          "action": {"type": "search", "query": "paris", "sources": [
                              {"type": "url", "url": "https://x.org"}]}}}


def test_other_protocol_forms() -> None:
    def form(case: str) -> Any:
        return to_protocol(CASES[case], names())

    assert form("function_call_output_structured")["output"] == [
        {"type": "input_text", "text": "a picture"},
        {"type": "input_image", "image": "https://example.com/p.png", "detail": "low"},
        {"type": "input_image", "image": {"id": "file_p"}},
        {"type": "input_file", "file": PDF, "filename": "p.pdf"},
        {"type": "input_file", "file": {"url": "https://example.com/p.pdf"}},
        {"type": "input_file", "file": {"id": "file_q"}}]
    assert form("user_parts")["content"] == [
        {"type": "input_text", "text": "Look"},
        {"type": "input_image", "image": "https://example.com/cat.png", "detail": "high"},
        {"type": "input_image", "image": {"id": "file_img"}, "detail": "auto"},
        {"type": "input_file", "file": PDF, "filename": "a.pdf"},
        {"type": "input_file", "file": "https://example.com/a.pdf"},
        {"type": "input_file", "file": {"id": "file_doc"}},
        {"type": "audio", "audio": "UklGRg==", "format": "wav"}]
    assert form("assistant_text") == {
        "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": "earlier answer"}],
        "status": "completed",
        "providerData": {"content": "earlier answer", "type": None, "status": None}}
    assert form("image_generation_call")["output"] == "iVBORw0KGgo="
    assert "result" not in form("image_generation_call")["providerData"]
    assert form("mcp_call")["output"] == "3"
    assert form("mcp_approval_response") == {
        "type": "hosted_tool_call", "name": "mcp_approval_response",
        "providerData": {"approval_request_id": "mcpr_1", "approve": False, "reason": "no"}}
    assert form("computer_call_output") == {
        "type": "computer_call_result", "callId": "call_c",
        "output": {"type": "computer_screenshot", "data": PNG},
        "providerData": {"acknowledgedSafetyChecks": None}}
    assert form("shell_call")["action"] == {"commands": ["ls -la"], "timeoutMs": 1000}
    assert form("shell_call_output")["output"] == [
        {"stdout": "a\n", "stderr": "", "outcome": {"type": "exit", "exitCode": 0}},
        {"stdout": "", "stderr": "slow", "outcome": {"type": "timeout"}}]
    assert form("shell_call_output")["maxOutputLength"] == 4096
    for case in ("developer", "local_shell_call", "local_shell_call_output",
                 "custom_tool_call", "custom_tool_call_output", "item_reference"):
        assert form(case) == {"type": "unknown", **(
            {"id": CASES[case]["id"]} if "id" in CASES[case] else {}),
            "providerData": CASES[case]}
    assert form("compaction") == CASES["compaction"]


def test_markers_restore_what_the_protocol_requires() -> None:
    """Python forms the protocol has no room for: defaults in the protocol item, a marker
    in providerData, the Python item back unchanged."""
    cases = [
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "no annotations"}]},
        {"type": "computer_call", "call_id": "c", "action": {"type": "screenshot"}},
        {"type": "apply_patch_call", "call_id": "p", "operation": {
            "type": "update_file", "path": "a", "diff": "-a\n+b\n"}},
        {"type": "apply_patch_call_output", "call_id": "p", "status": "failed",
         "output": None},
        {"type": "function_call_output", "call_id": "f", "output": "x",
         "status": "completed", "id": "fco_1"},
        {"type": "function_call_output", "call_id": "f", "output": "x", "status": "incomplete"},
        {"type": "shell_call", "call_id": "s", "action": {"commands": ["pwd"]}},
        {"type": "computer_call_output", "call_id": "c",
         "output": {"type": "computer_screenshot", "file_id": "file_1"}},
        {"type": "user_thing_of_the_future", "x": 1},  # neither SDK's: unchanged
        {"type": "web_search_call", "id": "ws", "action": {"type": "search"},
         "status": None},
        {"type": "message", "role": "assistant", "status": "weird", "content": [
            {"type": "refusal", "refusal": "no"}]},
        {"type": "computer_call", "call_id": "c", "status": 7, "actions": [{"type": "wait"}]},
        {"type": "apply_patch_call_output", "call_id": "p", "status": "unknown_yet"},
        {"type": "computer_call_output", "call_id": "c",
         "output": {"type": "computer_screenshot", "image_url": 5}},
    ]
    for item in cases:
        protocol = orjson.loads(orjson.dumps(to_protocol(item)))
        assert from_protocol(protocol) == item, item


def test_skilled_crews_rows_round_trip(skillet_fixture: Path) -> None:
    """Every row of skilled_crew's own store: to Python and back gives the row itself."""
    conn = sqlite3.connect(f"{(skillet_fixture / '.agent_sessions.sqlite').as_uri()}?mode=ro",
                           uri=True)
    try:
        rows = conn.execute("SELECT session_name, item_json FROM session_items "
                            "ORDER BY session_name, created_at, id").fetchall()
    finally:
        conn.close()
    sessions: dict[str, list[Any]] = {}
    for name, text in rows:
        sessions.setdefault(name, []).append(json.loads(text))
    assert sum(map(len, sessions.values())) == 27
    for name, items in sessions.items():
        python = from_protocol_items(items)
        assert to_protocol_items(python) == items, name
        for item in python:
            assert not JS_KEYS & set(item), item
            assert item.get("type") != "function_call_result"
    shapes = [item_shape(item) for items in sessions.values() for item in items]
    assert shapes.count("protocol") == 22 and shapes.count("both") == 5  # user messages
    assert all(is_protocol_item(item) for items in sessions.values() for item in items)


# --------------------------------------------------------------------------- shapes, unknowns


def test_item_shape_tells_legacy_rows_from_protocol_rows() -> None:
    assert item_shape(CASES["function_call"]) == "python"
    assert item_shape(to_protocol(CASES["function_call"])) == "protocol"
    assert item_shape(CASES["function_call_output"]) == "python"
    assert item_shape(CASES["reasoning"]) == "python"
    assert item_shape(to_protocol(CASES["reasoning"])) == "protocol"
    assert item_shape(CASES["assistant"]) == "python"
    assert item_shape(CASES["web_search_call"]) == "python"
    assert item_shape(CASES["user_input"]) == "both"
    assert item_shape(CASES["user_typed"]) == "both"
    assert item_shape(CASES["compaction"]) == "both"
    assert item_shape({"type": "nothing_known"}) == "unknown"
    assert item_shape(42) == "unknown"
    assert not is_protocol_item(CASES["function_call"])
    assert is_protocol_item(to_protocol(CASES["function_call"]))


@pytest.mark.parametrize("item", [
    42, "text", None, [1, 2], {"n": 1}, {"type": "future_item", "callId": "x"},
    {"role": "tool", "content": "x"}, {"type": "hosted_tool_call", "name": "mystery"},
])
def test_items_neither_sdk_knows_pass_through(item: Any) -> None:
    assert to_protocol(item) is item
    assert from_protocol(item) is item
    assert not is_known_item(item)


def test_malformed_items_of_known_types_never_raise() -> None:
    odd: list[Any] = [
        {"type": "function_call"}, {"type": "function_call", "callId": 3},
        {"type": "function_call_result"}, {"type": "function_call_result", "output": 5},
        {"type": "reasoning"}, {"type": "reasoning", "content": [1, {"text": 2}]},
        {"type": "message", "role": "user", "content": [1, None, {"type": "input_image"}]},
        {"type": "message", "role": "assistant", "content": None, "providerData": 7},
        {"type": "computer_call_result"}, {"type": "shell_call", "callId": "s"},
        {"type": "shell_call_output", "callId": "s", "output": [3, {"outcome": 1}]},
        {"type": "hosted_tool_call", "providerData": []}, {"type": "unknown"},
        {"type": "compaction", "providerData": {}}, {"type": "tool_search_output",
                                                       "tools": "x", "callId": 1},
        {"type": "apply_patch_call", "callId": "p"},
    ]
    python_odd: list[Any] = [
        {"type": "function_call", "call_id": 1}, {"type": "function_call_output"},
        {"type": "function_call_output", "call_id": "c", "output": {"x": 1}},
        {"type": "reasoning", "summary": "x"}, {"type": "message", "role": "assistant"},
        {"role": "user", "content": [{"type": "input_video"}]}, {"role": "system",
                                                                  "content": []},
        {"type": "computer_call", "call_id": "c"}, {"type": "computer_call_output",
                                                     "call_id": "c", "output": "x"},
        {"type": "shell_call", "call_id": "s", "action": "ls"},
        {"type": "shell_call_output", "call_id": "s", "output": [{"stdout": 1}]},
        {"type": "apply_patch_call", "call_id": "p", "operation": {"type": "x"}},
        {"type": "compaction"}, {"type": "tool_search_output", "tools": 3},
        {"type": "web_search_call"}, {"type": "mcp_call", "output": ""},
    ]
    for item in odd:
        from_protocol(item)
        item_text(item)
    for item in python_odd:
        protocol = orjson.loads(orjson.dumps(to_protocol(item)))
        assert from_protocol(protocol) == item, item


# --------------------------------------------------------------------------- text


def test_item_text_reads_both_shapes() -> None:
    result = to_protocol(CASES["function_call_output"], names())
    assert item_text(CASES["function_call_output"]) == "function_call_output: 18C"
    assert item_text(result) == "function_call_result get_weather: 18C"
    assert item_text(CASES["function_call"]) == 'function_call get_weather({"city":"Paris"})'
    assert item_text(to_protocol(CASES["function_call"])) == \
        'function_call get_weather({"city":"Paris"})'
    assert item_text(CASES["user_input"]) == "user: What is the weather?"
    assert item_text(CASES["assistant"]) == "assistant: Paris [1] Not that."
    assert item_text(to_protocol(CASES["assistant"])) == "assistant: Paris [1] Not that."
    assert item_text(CASES["reasoning"]) == "reasoning: Look it up. raw"
    assert item_text(to_protocol(CASES["developer"])) == "developer: Use tools."
    assert item_text(CASES["web_search_call"]) == "web_search_call()"
    assert item_text(7) == "7"
    assert content_text([{"type": "input_image", "image_url": "x"}, "a"]) == "[input_image] a"
    assert output_text({"type": "text", "text": "ok"}) == "ok"
    assert output_text([{"type": "input_image"}]) == '[{"type":"input_image"}]'
    assert clip("a\n  b   c", 100) == "a b c"
    assert clip("abcdef", 4) == "abc…"


# --------------------------------------------------------------------------- the request


def captured_request(items: list[Any]) -> dict[str, Any]:
    """The JSON body the Python SDK's ``OpenAIResponsesModel`` sends for ``items`` (no
    network: the HTTP transport is a stand-in that records it)."""
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json={
            "id": "resp_x", "object": "response", "created_at": 0, "model": "gpt-4.1",
            "status": "completed", "output": [], "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}})

    async def main() -> None:
        client = AsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9/v1",
                             http_client=httpx2.AsyncClient(
                                 transport=httpx2.MockTransport(handler)))
        model = OpenAIResponsesModel("gpt-4.1", client)
        await model.get_response(None, items, ModelSettings(), [], None, [],
                                 ModelTracing.DISABLED, previous_response_id=None,
                                 conversation_id=None, prompt=None)
    asyncio.run(main())
    assert len(bodies) == 1
    return bodies[0]


def test_skilled_crews_history_becomes_a_valid_openai_request(skillet_fixture: Path) -> None:
    conn = sqlite3.connect(f"{(skillet_fixture / '.agent_sessions.sqlite').as_uri()}?mode=ro",
                           uri=True)
    try:
        rows = [json.loads(text) for (text,) in conn.execute(
            "SELECT item_json FROM session_items WHERE session_name = 'fixture_session_1' "
            "ORDER BY created_at, id")]
    finally:
        conn.close()
    sent = captured_request(from_protocol_items(rows))["input"]
    assert len(sent) == 18
    assert sent[0] == {"type": "message", "role": "user",
                       "content": "How many lines are in the fixture data file?"}
    assert sent[1] == {"type": "function_call", "name": "transfer_to_count_files",
                       "call_id": "call_fx_1", "arguments": "{}", "status": "completed"}
    assert sent[2] == {"type": "function_call_output", "call_id": "call_fx_1",
                       "output": '{"assistant":"count-files"}'}
    assert sent[7] == {"id": "msg_fx_7", "type": "message", "role": "assistant",
                       "status": "completed", "content": [
                           {"type": "output_text", "text": "The fixture data file has 3 lines.",
                            "annotations": []}]}
    check_responses_input(sent)


def check_responses_input(sent: list[Any]) -> None:
    """What the Responses API takes: every call answered by an output with its call_id and a
    string output, messages with a role and content, no JS SDK key anywhere."""
    for index, item in enumerate(sent):
        assert not JS_KEYS & set(item), item
        kind = item.get("type", "message")
        assert kind not in ("function_call_result", "hosted_tool_call", "unknown"), item
        if kind == "message":
            assert item["role"] in ("user", "assistant", "system", "developer")
            assert isinstance(item["content"], (str, list))
        if kind == "function_call":
            outputs = [other for other in sent[index + 1:]
                       if other.get("type") == "function_call_output"
                       and other.get("call_id") == item["call_id"]]
            assert len(outputs) == 1, item
            assert isinstance(outputs[0]["output"], (str, list))
        if kind == "function_call_output":
            assert isinstance(item["call_id"], str) and "name" not in item


def test_every_python_item_survives_storage_into_a_request() -> None:
    """The whole table, converted for storage and read back, is the input the SDK sends."""
    items = [item for _, item in PYTHON_ITEMS]
    back = from_protocol_items(orjson.loads(orjson.dumps(to_protocol_items(items))))
    sent = captured_request(back)["input"]
    assert sent == json.loads(json.dumps(items))


# --------------------------------------------------------------------------- the JS SDK

JS = REPO / "tests" / "js"


@pytest.fixture(scope="module")
def js_checker() -> Any:
    """tests/js's ``check_items.mjs`` (the real @openai/agents-core schema and
    @openai/agents-openai request builder), installed with ``npm ci`` if needed."""
    for tool in ("node", "npm"):
        assert shutil.which(tool), f"{tool} is needed for the JS SDK check (tests/js)"
    installed = JS / "node_modules" / ".package-lock.json"
    # the lock test_js_conformance.py takes too: one `npm ci` at a time in this checkout
    lock = Path(tempfile.gettempdir()) / \
        f"sessiontape-npm-ci-{hashlib.sha256(str(JS).encode()).hexdigest()[:16]}.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if not installed.is_file() or installed.stat().st_mtime_ns < \
                    (JS / "package-lock.json").stat().st_mtime_ns:
                done = run(["npm", "ci", "--prefix", JS, "--no-audit", "--no-fund"],
                           env=dict(os.environ), cwd=REPO, timeout=WAIT * 20)
                assert done.returncode == 0, done.stderr
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

    def check(items: list[Any], path: Path) -> dict[str, Any]:
        path.write_text(json.dumps(items), encoding="utf-8")
        done = run(["node", JS / "check_items.mjs", path], cwd=REPO, timeout=WAIT * 4)
        assert done.returncode == 0, done.stderr
        report: dict[str, Any] = json.loads(done.stdout)
        return report
    return check


def js_sends(case: str, item: dict[str, Any]) -> dict[str, Any]:
    """What the JS SDK's request builder sends for a Python item we stored: the item itself
    but for the JS SDK's own defaults and omissions (and one JS SDK bug)."""
    item = json.loads(json.dumps(item))
    if case == "user_typed":
        del item["type"]  # user and system messages go out without `type`
    elif case == "assistant_text":
        item = {"type": "message", "role": "assistant", "status": "completed", "content": [
            {"type": "output_text", "text": item["content"], "annotations": []}]}
    elif item.get("type") == "function_call_output":
        item["status"] = "completed"
    elif case == "image_generation_call":
        item["result"] = None  # the JS SDK never sends a generated image back
    elif case == "mcp_call":
        del item["output"]
    elif case == "computer_call":
        del item["pending_safety_checks"]  # an empty list is left out
    elif case == "computer_call_batched":
        item["action"] = item["actions"][0]
    elif case == "computer_call_output":
        del item["acknowledged_safety_checks"]  # null
    elif case == "local_shell_call":
        # The JS SDK snake-cases every key of a catch-all item, environment variables too.
        item["action"]["env"] = {"_p_a_t_h": "/bin"}
    return item


def test_the_js_sdk_accepts_every_item_we_write(js_checker: Any, tmp_path: Path) -> None:
    """The whole table as we store it (one conversation), through the real JS SDK: every
    item passes its protocol schema, and its request builder sends the Responses API items
    we started from (but for what ``js_sends`` lists)."""
    cases = [(case, item) for case, item in PYTHON_ITEMS if case != "user_parts"]
    report = js_checker(to_protocol_items([item for _, item in cases]), tmp_path / "all.json")
    assert report["schema_errors"] == []
    assert report["request_error"] is None, report["request_error"]
    assert len(report["request_input"]) == len(cases)
    for (case, item), sent in zip(cases, report["request_input"], strict=True):
        assert sent == js_sends(case, item), case
    # a user message with audio passes the schema; the JS request builder refuses audio
    alone = js_checker([to_protocol(CASES["user_parts"])], tmp_path / "parts.json")
    assert alone["schema_errors"] == []
    assert alone["request_error"].startswith("UserError: Unsupported input content type")
    without_audio = {**CASES["user_parts"], "content": CASES["user_parts"]["content"][:-1]}
    report = js_checker([to_protocol(without_audio)], tmp_path / "parts.json")
    assert report["request_input"] == [without_audio]


# --------------------------------------------------------------------------- one session, two SDKs

USER = "john@example.com"


@function_tool
def count_lines(path: str) -> int:
    """Count the lines of a file."""
    return 3


def continue_fixture_session(skillet_fixture: Path, tmp_path: Path) -> tuple[Path, Any]:
    """skilled_crew's fixture_session_1, continued by the Python SDK's Runner through our
    store on a copy of skilled_crew's file: the model calls a tool, then answers."""
    copy = tmp_path / "state" / ".agent_sessions.sqlite"
    copy.parent.mkdir()
    shutil.copy(skillet_fixture / ".agent_sessions.sqlite", copy)
    model = ScriptedModel([
        ModelStep(output=[function_call("count_lines", {"path": "data.txt"},
                                        call_id="call_py_1", item_id="fc_py_1")],
                  response_id="resp_py_1"),
        ModelStep(output=[assistant_message("3 lines, again.", item_id="msg_py_1")],
                  response_id="resp_py_2"),
    ])
    agent = Agent(name="fixture_agent", instructions="Count.", model=model, tools=[count_lines])

    async def main() -> None:
        async with ItemStore(copy) as store:
            result = await Runner.run(agent, "next question",
                                      session=store.session(USER, "fixture_session_1"))
            assert result.final_output == "3 lines, again."
    asyncio.run(main())
    model.assert_complete()
    return copy, model


def session_rows(path: Path, name: str = "fixture_session_1") -> list[Any]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [json.loads(text) for (text,) in conn.execute(
            "SELECT item_json FROM session_items WHERE session_name = ? "
            "ORDER BY created_at, id", (name,))]
    finally:
        conn.close()


def test_the_python_sdk_continues_a_skilled_crew_session(skillet_fixture: Path,
                                                          tmp_path: Path) -> None:
    original = session_rows(skillet_fixture / ".agent_sessions.sqlite")
    copy, model = continue_fixture_session(skillet_fixture, tmp_path)

    # what the model got: skilled_crew's history as the Python SDK's items, then the question
    seen = model.calls[0].input
    assert len(seen) == 19
    assert seen[:18] == from_protocol_items(original)
    assert seen[2] == {"type": "function_call_output", "call_id": "call_fx_1",
                       "output": '{"assistant":"count-files"}'}
    assert seen[-1] == {"content": "next question", "role": "user"}
    check_responses_input(seen)
    check_responses_input(model.calls[1].input)
    # and the request the OpenAI model would send for the second call
    sent = captured_request(model.calls[1].input)["input"]
    check_responses_input(sent)
    assert sent[-2:] == [
        {"arguments": '{"path":"data.txt"}', "call_id": "call_py_1", "name": "count_lines",
         "type": "function_call", "id": "fc_py_1"},
        {"call_id": "call_py_1", "output": "3", "type": "function_call_output"}]

    # what we stored: skilled_crew's rows untouched, ours as protocol items
    rows = session_rows(copy)
    assert rows[:18] == original
    new = rows[18:]
    assert [item_shape(row) for row in new] == ["protocol"] * 4
    assert new[0] == {"type": "message", "role": "user", "content": "next question",
                      "providerData": {}}
    assert new[1]["callId"] == "call_py_1" and new[1]["name"] == "count_lines"
    assert new[2] == {"type": "function_call_result", "name": "count_lines",
                      "callId": "call_py_1", "status": "completed",
                      "output": {"type": "text", "text": "3"}}
    assert new[3]["content"] == [{"type": "output_text", "text": "3 lines, again.",
                                  "providerData": {"annotations": [], "logprobs": []}}]
    assert new[3]["status"] == "completed" and new[3]["providerData"] == {}
    assert not any("call_id" in row for row in new)


def test_skilled_crew_can_continue_our_turn(js_checker: Any, skillet_fixture: Path,
                                            tmp_path: Path) -> None:
    """The whole session after our turn, through the JS SDK skilled_crew runs on: every row
    passes its schema and becomes a request with every call answered."""
    copy, _ = continue_fixture_session(skillet_fixture, tmp_path)
    report = js_checker(session_rows(copy), tmp_path / "session.json")
    assert report["schema_errors"] == []
    assert report["request_error"] is None
    sent = report["request_input"]
    assert len(sent) == 22
    check_responses_input(sent)
    assert sent[-3:] == [
        {"type": "function_call", "id": "fc_py_1", "name": "count_lines",
         "call_id": "call_py_1", "arguments": '{"path":"data.txt"}'},
        {"type": "function_call_output", "call_id": "call_py_1", "output": "3",
         "status": "completed"},
        {"type": "message", "id": "msg_py_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "3 lines, again.", "annotations": [],
                      "logprobs": []}]}]
