"""Session items in the shapes of both Agents SDKs: conversion, shape, text.

skilled_crew's ``session_items`` rows hold protocol items of the JavaScript Agents
SDK (``@openai/agents-core`` 0.8: ``function_call`` with ``callId``,
``function_call_result``, ``hosted_tool_call``, ``providerData``...); the Python
Agents SDK works with the Responses API's input items (``call_id``,
``function_call_output``, ``web_search_call``...). :func:`to_protocol` turns a
Python SDK item into the protocol item the JS SDK would have stored for it, and
:func:`from_protocol` turns a protocol item into the input item the JS SDK would
send to the Responses API, which is what the Python SDK takes.

The JS SDK defines the correspondence (its ``convertToOutputItem`` and runner
for Python -> JS, ``getInputItems`` for JS -> Python, both in
``@openai/agents-openai``'s ``openaiResponsesModel``); docs/formats.md has the
table. What the protocol has no field for rides in ``providerData`` and comes back
unchanged, so that ``from_protocol(to_protocol(item)) == item`` for every item the
Python SDK produces, and ``to_protocol_items(from_protocol_items(rows)) == rows`` for
the rows skilled_crew writes. Where the JS SDK drops or defaults something (``getInputItems``
sends ``detail: "auto"``, ``status: "in_progress"``, drops ``output`` of an
``mcp_call``...) we keep the item as it was: the request differs only by what the
API defaults anyway. A few Python forms the protocol cannot hold carry a marker in
a ``providerData`` key that the JS request builder ignores (see "Markers" below).

:func:`from_protocol` also reads Python-shaped items (rows written by sessiontape
0.1) and returns them unchanged, so a reader needs no flag per row;
:func:`item_shape` tells the two apart. Items neither SDK knows (an unknown
``type``, not a dict) pass through both ways unchanged.

Every function here is a plain dict rebuild (no pydantic): they run for every row
the item store writes or reads. Results may share unchanged nested values with
their argument; arguments are never modified, but by ``read_item(item, own=True)``,
which converts a row just parsed in place (sparing the allocations of a copy).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from ..json_style import dumps_compact

__all__ = [
    "PROTOCOL_ONLY_TYPES",
    "PYTHON_ONLY_TYPES",
    "call_id_of",
    "clip",
    "content_text",
    "from_protocol",
    "from_protocol_items",
    "is_known_item",
    "is_protocol_item",
    "item_shape",
    "item_text",
    "output_text",
    "plain_text",
    "read_item",
    "text_once",
    "to_protocol",
    "to_protocol_items",
]

# Markers: a few Python forms the protocol cannot hold are noted in a providerData key
# that the JS request builder ignores for that item (a "reserved" key there): ``null``
# says "the Python item had no such key" where the protocol requires one (the protocol
# item then holds the JS default); a string ``content`` on an assistant message says its
# content was that plain string (the protocol wants parts), and ``true`` says the same of
# the text of its parts, stored once (:func:`text_once`); ``status`` on a
# ``function_call_result`` is the status the Python item carried itself.

PROTOCOL_ONLY_TYPES: Final = frozenset((
    "function_call_result", "computer_call_result", "hosted_tool_call", "unknown"))
_HOSTED: Final = frozenset((
    "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call"))
_MCP: Final = frozenset(("mcp_call", "mcp_list_tools", "mcp_approval_request",
                         "mcp_approval_response"))
# Item types of the Responses API that the protocol has no member for: they travel as the
# protocol's catch-all ``{"type": "unknown", "providerData": <the item>}``, which the JS
# SDK sends back to the API as the item itself.
_WRAPPED: Final = frozenset((
    "local_shell_call", "local_shell_call_output", "custom_tool_call",
    "custom_tool_call_output", "item_reference", "additional_tools", "configuration_update",
    "compaction_trigger", "program", "program_output"))
PYTHON_ONLY_TYPES: Final = frozenset((
    "function_call_output", "computer_call_output", *_HOSTED, *_MCP, *_WRAPPED))
_ROLES: Final = frozenset(("user", "assistant", "system", "developer"))
_STATUSES: Final = frozenset(("in_progress", "completed", "incomplete"))
_MISSING: Final = object()

# ---------------------------------------------------------------------------- helpers

_SNAKE: dict[str, str] = {}
_UPPER = re.compile(r"([A-Z])")


def _snake_key(key: str) -> str:
    """``camelCase`` -> ``camel_case`` as the JS SDK does it (cached: keys are few)."""
    snake = _SNAKE.get(key)
    if snake is None:
        snake = _UPPER.sub(r"_\1", key).lower() if isinstance(key, str) else key
        if len(_SNAKE) < 4096:
            _SNAKE[key] = snake
    return snake


_NONE: Final[Mapping[str, Any]] = {}


def _take(item: dict[str, Any]) -> Mapping[str, Any]:
    """Remove ``providerData`` from ``item`` (a dict this call may change) and return it
    (empty if there is none); it is only read, never changed."""
    data = item.pop("providerData", None)
    return data if isinstance(data, dict) else _NONE


def _merge(item: dict[str, Any], data: Mapping[str, Any]) -> None:
    """Add ``data``'s keys (snake_cased at the top level, as the JS SDK sends them) that
    ``item`` does not have: its own fields win over providerData.

    The JS SDK snake-cases nested keys too; we do not (it would rename, for example,
    the environment variables of a shell call).
    """
    for key, value in data.items():
        key = _SNAKE.get(key) or _snake_key(key)
        if key not in item:
            item[key] = value


def _restore(out: dict[str, Any], data: Mapping[str, Any], *keys: str) -> None:
    """Give back the Python item's own value of ``keys`` that the protocol item holds a
    default for: a marker in ``providerData`` (``null``: the Python item had none)."""
    for key in keys:
        if key in data:
            if data[key] is None:
                out.pop(key, None)
            else:
                out[key] = data[key]


_KEYS_TYPE_IMAGE_URL: Final = frozenset(("type", "image_url"))
_KEYS_TYPE_INPUT_AUDIO: Final = frozenset(("type", "input_audio"))
_KEYS_TYPE_REFUSAL: Final = frozenset(("type", "refusal"))
_KEYS_TYPE_TEXT: Final = frozenset(("type", "text"))


def _rest(item: Mapping[str, Any], taken: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in taken}


def _wrap(item: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's catch-all for an item it has no member for."""
    out: dict[str, Any] = {"type": "unknown"}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    out["providerData"] = item
    return out


# ---------------------------------------------------------------------------- content parts
#
# Python (Responses API)                        protocol
# input_text {text}                             input_text {text}
# input_image {image_url | file_id, detail}     input_image {image: url | {id}, detail}
# input_file {file_data | file_url | file_id}   input_file {file: data | url | {url} | {id}}
# input_audio {input_audio: {data, format}}     audio {audio, format}
# output_text {text, annotations, logprobs}     output_text {text, providerData: {annotations..}}
# refusal {refusal}                             refusal {refusal}
# Keys without a protocol field go to the part's providerData.

_BASE64 = re.compile(r"^[A-Za-z0-9+/=]+$")


def _input_part_to(part: Any, tool_output: bool = False) -> Any:
    """A Python input content part as a protocol part; None if it has no protocol form."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "input_text":
        if not isinstance(part.get("text"), str):
            return None
        if len(part) == 2:
            return part
        out: dict[str, Any] = {"type": "input_text", "text": part["text"]}
        extra = _rest(part, _KEYS_TYPE_TEXT)
    elif kind == "input_image":
        out = {"type": "input_image"}
        extra = {}
        for key, value in part.items():
            if key == "type":
                continue
            if key == "image_url" and isinstance(value, str) and "image" not in out:
                out["image"] = value
            elif key == "file_id" and isinstance(value, str) and "image" not in out:
                out["image"] = {"id": value}
            elif key == "detail" and isinstance(value, str):
                out["detail"] = value
            else:
                extra[key] = value
    elif kind == "input_file":
        out = {"type": "input_file"}
        extra = {}
        for key, value in part.items():
            if key == "type":
                continue
            if key == "filename" and isinstance(value, str):
                out["filename"] = value
            elif not isinstance(value, str) or "file" in out or "fileData" in out:
                extra[key] = value
            elif key == "file_id":
                out["file"] = {"id": value}
            elif key == "file_url":
                # A user message's file may be an https URL string; anything else (and
                # every tool output file) goes as {url}, which both readers take.
                out["file"] = value if not tool_output and value.startswith("https://") \
                    else {"url": value}
            elif key == "file_data":
                if value.startswith("data:") or tool_output:
                    out["file"] = value
                else:  # raw base64 in a message: the JS SDK reads it from `fileData`
                    out["fileData"] = value
            else:
                extra[key] = value
    elif kind == "input_audio" and not tool_output:
        audio = part.get("input_audio")
        if not isinstance(audio, dict) or not isinstance(audio.get("data"), str) \
                or set(audio) - {"data", "format"}:
            return None
        out = {"type": "audio", "audio": audio["data"]}
        if "format" in audio:
            out["format"] = audio["format"]
        extra = _rest(part, _KEYS_TYPE_INPUT_AUDIO)
    else:
        return None
    if extra:
        out["providerData"] = extra
    return out


def _input_part_from(part: Any, own: bool) -> Any:
    """A protocol input content part as the Responses API part (a Python one unchanged)."""
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "input_text":
        if "providerData" not in part:
            return part
        part = part if own else dict(part)
        _merge(part, _take(part))
        return part
    if kind == "input_image":
        if not ("image" in part or "providerData" in part or "imageUrl" in part
                or "fileId" in part):
            return part  # Python-shaped
        part = part if own else dict(part)
        data = _take(part)
        image = part.pop("image", None)
        legacy_url, legacy_id = part.pop("imageUrl", None), part.pop("fileId", None)
        image = legacy_url if image is None else image
        if isinstance(image, str):
            part["image_url"] = image
        elif isinstance(image, dict) and isinstance(image.get("id"), str):
            part["file_id"] = image["id"]
        if isinstance(legacy_id, str):
            part["file_id"] = legacy_id
        _merge(part, data)
        return part
    if kind == "input_file":
        if not ("file" in part or "providerData" in part or "fileData" in part
                or "fileUrl" in part or "fileId" in part):
            return part  # Python-shaped
        part = part if own else dict(part)
        data = _take(part)
        file = part.pop("file", None)
        if isinstance(file, str):
            value = file.strip()
            if value.startswith("data:"):
                part["file_data"] = file
            elif value.startswith(("http://", "https://")) or not _BASE64.match(value):
                part["file_url"] = file
            else:
                part["file_data"] = file
        elif isinstance(file, dict):
            if isinstance(file.get("id"), str):
                part["file_id"] = file["id"]
            elif isinstance(file.get("url"), str):
                part["file_url"] = file["url"]
            if isinstance(file.get("filename"), str) and "filename" not in part:
                part["filename"] = file["filename"]
        for legacy, key in (("fileData", "file_data"), ("fileUrl", "file_url"),
                            ("fileId", "file_id")):
            value = part.pop(legacy, None)
            if isinstance(value, str):
                part[key] = value
        _merge(part, data)
        return part
    if kind == "audio" and isinstance(part.get("audio"), str):
        # The protocol's `transcript` has no field in the Responses API: it is dropped.
        audio = {"data": part["audio"]}
        if part.get("format") is not None:
            audio["format"] = part["format"]
        out: dict[str, Any] = {"type": "input_audio", "input_audio": audio}
        extra = part.get("providerData")
        if isinstance(extra, dict):
            _merge(out, extra)
        return out
    return part


def _output_part_to(part: Any) -> Any:
    """A Python assistant content part (output_text, refusal) as a protocol part."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "output_text":
        text = part.get("text")
        if not isinstance(text, str):
            return None
        out: dict[str, Any] = {"type": "output_text", "text": text}
        extra = _rest(part, _KEYS_TYPE_TEXT)
        if "annotations" not in part:
            extra["annotations"] = None
    elif kind == "refusal":
        if not isinstance(part.get("refusal"), str):
            return None
        out = {"type": "refusal", "refusal": part["refusal"]}
        extra = _rest(part, _KEYS_TYPE_REFUSAL)
    else:
        return None
    if extra:
        out["providerData"] = extra
    return out


def _output_part_from(part: Any, own: bool) -> Any:
    if not isinstance(part, dict):
        return part
    if "providerData" not in part:
        if "annotations" in part or part.get("type") != "output_text":
            return part  # Python-shaped (or a refusal, the same in both)
        return {**part, "annotations": []}  # what the JS SDK sends for it
    kind = part.get("type")
    if kind != "output_text" and kind != "refusal":
        return part
    part = part if own else dict(part)
    data = _take(part)
    if kind == "output_text":
        annotations = data.get("annotations", _MISSING)
        if annotations is not None:
            part["annotations"] = annotations if isinstance(annotations, list) else []
    if data:
        _merge(part, data)
        if kind == "output_text":
            _restore(part, data, "annotations")
    return part


def _parts_from(item: dict[str, Any], convert: Callable[[Any, bool], Any], own: bool) -> None:
    """Convert ``item``'s content parts (a list), in place when ``own``."""
    content = item.get("content")
    if not isinstance(content, list):
        return
    if own:
        for index, part in enumerate(content):
            content[index] = convert(part, True)
    else:
        parts = [convert(part, False) for part in content]
        if any(new is not old for new, old in zip(parts, content, strict=True)):
            item["content"] = parts


# ---------------------------------------------------------------------------- calls and outputs
#
# A tool call or output with a call id has one shape in the protocol: `type`, `id`,
# `callId`, `status` and its own fields, with every other key of the API item (`type` and
# `id` included, as convertToOutputItem writes them) in providerData.


def _call_to(item: dict[str, Any], kind: str, fields: dict[str, Any], taken: Iterable[str],
             statuses: frozenset[str] | tuple[str, ...] = _STATUSES,
             default: str | None = None) -> dict[str, Any]:
    """The protocol item ``kind`` for ``item``, with ``fields`` made from its keys
    ``taken``. A ``status`` outside ``statuses`` becomes ``default`` with a marker (or,
    without a default, stays in providerData)."""
    out: dict[str, Any] = {"type": kind}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    out["callId"] = item["call_id"]
    extra: dict[str, Any] = {}
    status = item.get("status", _MISSING)
    if status in statuses:
        out["status"] = status
    elif default is not None:
        out["status"] = default
        extra["status"] = None if status is _MISSING else status
    out.update(fields)
    skip = {"call_id", *taken}
    if "status" in out:
        skip.add("status")
    for key, value in item.items():
        if key not in skip:
            extra[key] = value
    out["providerData"] = extra
    return out


def _call_from(item: dict[str, Any], own: bool, *restored: str) -> dict[str, Any]:
    """A protocol call or output with its ``callId`` as ``call_id`` and providerData's keys
    back (``restored``: keys whose marker gives back the Python item's own value)."""
    item = item if own else dict(item)
    data = _take(item)
    item["call_id"] = item.pop("callId")
    _merge(item, data)
    _restore(item, data, *restored)
    return item


# ---------------------------------------------------------------------------- messages


def _message_to(item: dict[str, Any]) -> Any:
    role = item.get("role")
    content = item.get("content")
    if role == "assistant":
        return _assistant_to(item, content)
    if role not in ("user", "system") or (role == "system" and not isinstance(content, str)):
        return None  # developer messages and the like: wrapped
    if isinstance(content, list):
        parts = []
        for part in content:
            converted = _input_part_to(part)
            if converted is None:
                return None
            parts.append(converted)
        content = parts
    elif not isinstance(content, str):
        return None
    out: dict[str, Any] = {"type": "message"}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    out["role"] = role
    out["content"] = content
    extra = {key: value for key, value in item.items()
             if key != "type" and key != "role" and key != "content"
             and not (key == "id" and "id" in out)}
    # The JS SDK always writes `type: "message"`; a Python message without `type` (the
    # SDK's own user input) is told apart by the presence of providerData.
    if "type" not in item:
        out["providerData"] = extra
    elif extra:
        extra["type"] = item["type"]
        out["providerData"] = extra
    return out


def _assistant_to(item: dict[str, Any], content: Any) -> Any:
    extra: dict[str, Any] = {}
    if isinstance(content, str):
        parts: list[Any] = [{"type": "output_text", "text": content}]
        extra["content"] = content
    elif isinstance(content, list):
        parts = []
        for part in content:
            converted = _output_part_to(part)
            if converted is None:
                return None
            parts.append(converted)
    else:
        return None
    out: dict[str, Any] = {}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    out["type"] = "message"
    if "type" not in item:
        extra["type"] = None
    out["role"] = "assistant"
    out["content"] = parts
    status = item.get("status", _MISSING)
    if status in _STATUSES:
        out["status"] = status
    else:
        out["status"] = "completed"
        extra["status"] = None if status is _MISSING else status
    for key, value in item.items():
        if key not in ("type", "role", "content", "status") and not (key == "id" and "id" in out):
            extra[key] = value
    out["providerData"] = extra
    return out


def plain_text(item: Mapping[str, Any]) -> str | None:
    """The plain text an assistant message was made of, or None: its string ``content``,
    or a protocol row's marker: ``providerData.content``, the string itself (as
    sessiontape 0.1-0.3 stored it), or ``true`` for the text of its ``output_text`` parts."""
    content = item.get("content")
    data = item.get("providerData")
    marker = data.get("content") if isinstance(data, dict) else None
    if isinstance(marker, str):
        return marker
    if marker is True and isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict)
                       and part.get("type") == "output_text" and isinstance(part.get("text"), str))
    return content if isinstance(content, str) else None


def text_once(row: Any) -> Any:
    """``row``, a protocol item, with the text of an assistant message made of plain text
    kept in its part alone (``providerData.content`` becomes ``true``; :func:`from_protocol`
    gives the string back); any other row as it is."""
    data = row.get("providerData") if isinstance(row, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("content"), str):
        return row
    once = {**row, "providerData": {**data, "content": True}}
    return once if plain_text(once) == data["content"] else row


def _message_from(item: dict[str, Any], own: bool) -> Any:
    role = item.get("role")
    if role not in _ROLES:
        return None
    content = item.get("content")
    if not isinstance(content, (str, list)):
        return None
    convert = _output_part_from if role == "assistant" else _input_part_from
    if "providerData" not in item:
        # Valid in both SDKs (a Python row, or a JS one written without providerData):
        # only content parts in the JS shape need converting.
        if isinstance(content, list) and not own:
            copy = dict(item)
            _parts_from(copy, convert, False)
            return item if copy["content"] is content else copy
        _parts_from(item, convert, own)
        return item
    item = item if own else dict(item)
    text = plain_text(item) if role == "assistant" else None
    data = _take(item)
    if role != "assistant":
        item.pop("type", None)  # the JS SDK writes it always; the Python item's is in data
    elif text is not None:
        item["content"] = text
    _parts_from(item, convert, own)
    if data:
        _merge(item, data)
        if role == "assistant":
            _restore(item, data, "type", "status")
    return item


# ---------------------------------------------------------------------------- function calls


def _function_call_to(item: dict[str, Any]) -> Any:
    name, arguments = item.get("name"), item.get("arguments")
    if not (isinstance(item.get("call_id"), str) and isinstance(name, str)
            and isinstance(arguments, str)):
        return None
    fields: dict[str, Any] = {"name": name}
    if isinstance(item.get("namespace"), str):
        fields["namespace"] = item["namespace"]
    fields["arguments"] = arguments
    return _call_to(item, "function_call", fields, fields)


def _function_call_from(item: dict[str, Any], own: bool) -> Any:
    if "callId" not in item:
        return item  # Python-shaped
    if not isinstance(item["callId"], str) or not isinstance(item.get("name"), str) \
            or not isinstance(item.get("arguments"), str):
        return None
    return _call_from(item, own)


def _tool_output_to(output: Any) -> Any:
    """A function_call_output's output as the protocol's (None if it has no protocol form)."""
    if isinstance(output, str):
        return {"type": "text", "text": output}
    if isinstance(output, list):
        parts = []
        for part in output:
            converted = _input_part_to(part, tool_output=True)
            if converted is None:
                return None
            parts.append(converted)
        return parts
    return None


def _legacy_output_from(output: dict[str, Any]) -> Any:
    """The JS SDK's older ``{type: "image" | "file", ...}`` tool outputs as input parts."""
    if output.get("type") == "image":
        part: dict[str, Any] = {"type": "input_image"}
        image = output.get("image")
        media = output.get("mediaType") or output.get("mimeType")
        if isinstance(image, str) and image:
            part["image_url"] = image
        elif isinstance(image, dict):
            media = image.get("mediaType") or image.get("mimeType") or media
            if isinstance(image.get("url"), str) and image["url"]:
                part["image_url"] = image["url"]
            elif isinstance(image.get("data"), str) and image["data"]:
                part["image_url"] = _data_url(image["data"], media)
            elif isinstance(image.get("fileId") or image.get("id"), str):
                part["file_id"] = image.get("fileId") or image.get("id")
        elif isinstance(output.get("imageUrl"), str):
            part["image_url"] = output["imageUrl"]
        elif isinstance(output.get("fileId"), str):
            part["file_id"] = output["fileId"]
        elif isinstance(output.get("data"), str) and output["data"]:
            part["image_url"] = _data_url(output["data"], media)
        if output.get("detail"):
            part["detail"] = output["detail"]
        return [part]
    part = {"type": "input_file"}
    file = output.get("file")
    if isinstance(file, str):
        part["file_data" if file.startswith("data:") else "file_url"] = file
    elif isinstance(file, dict):
        if isinstance(file.get("data"), str) and file["data"]:
            part["file_data"] = _data_url(file["data"], file.get("mediaType") or "text/plain")
        elif isinstance(file.get("url"), str) and file["url"]:
            part["file_url"] = file["url"]
        elif isinstance(file.get("id") or file.get("fileId"), str):
            part["file_id"] = file.get("id") or file.get("fileId")
        if isinstance(file.get("filename"), str) and file["filename"]:
            part["filename"] = file["filename"]
    return [part]


def _data_url(data: str, media: Any) -> str:
    if data.startswith("data:"):
        return data
    return f"data:{media};base64,{data}" if isinstance(media, str) and media else data


def _tool_output_from(output: Any, own: bool) -> Any:
    if isinstance(output, dict):
        kind = output.get("type")
        if kind == "text" and isinstance(output.get("text"), str):
            return output["text"]
        if kind in ("image", "file"):
            return _legacy_output_from(output)
        return output
    if isinstance(output, list):
        return [_input_part_from(part, own) for part in output]
    return output


def _function_output_to(item: dict[str, Any], names: Mapping[str, str] | None) -> Any:
    call_id = item.get("call_id")
    output = _tool_output_to(item.get("output"))
    if not isinstance(call_id, str) or output is None:
        return None
    name = names.get(call_id) if names else None
    if not isinstance(name, str):  # as convertToOutputItem: the item's own name, or the id
        name = item.get("name") or item.get("function_name")
        name = name if isinstance(name, str) else call_id
    out: dict[str, Any] = {"type": "function_call_result", "name": name}
    namespace = item.get("namespace")
    if isinstance(namespace, str):
        out["namespace"] = namespace
    out["callId"] = call_id
    extra: dict[str, Any] = {}
    status = item.get("status", _MISSING)
    if status in ("in_progress", "incomplete"):
        out["status"] = status
    else:
        # The JS runner writes "completed"; a status given in the Python item is kept
        # in providerData (a key its request builder ignores here).
        out["status"] = "completed"
        if status is not _MISSING:
            extra["status"] = status
    out["output"] = output
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    for key, value in item.items():
        if key not in ("type", "call_id", "output", "status") \
                and not (key == "namespace" and "namespace" in out) \
                and not (key == "id" and "id" in out):
            extra[key] = value
    if extra:
        out["providerData"] = extra
    return out


def _function_result_from(item: dict[str, Any], own: bool) -> Any:
    if not isinstance(item.get("callId"), str) or "output" not in item:
        return None
    item = item if own else dict(item)
    data = _take(item)
    item["type"] = "function_call_output"
    item["call_id"] = item.pop("callId")
    item.pop("name", None)  # not a field of the API's item (the JS SDK drops it too)
    item["output"] = _tool_output_from(item["output"], own)
    if "status" in data:  # the Python item's own status
        item["status"] = data["status"]
    elif item.get("status") == "completed":
        del item["status"]  # the JS SDK's default: the Python item had none
    _merge(item, data)
    return item


# ---------------------------------------------------------------------------- reasoning


def _reasoning_to(item: dict[str, Any]) -> Any:
    summary = item.get("summary")
    if not isinstance(summary, list) or not all(
            isinstance(part, dict) and isinstance(part.get("text"), str) for part in summary):
        return None
    out: dict[str, Any] = {"type": "reasoning"}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    out["content"] = [{"type": "input_text", "text": part["text"],
                       "providerData": {key: value for key, value in part.items()
                                        if key != "text"}}
                      for part in summary]
    out["providerData"] = {key: value for key, value in item.items() if key != "summary"}
    return out


def _reasoning_from(item: dict[str, Any], own: bool) -> Any:
    if "summary" in item and "providerData" not in item:
        return item  # Python-shaped
    content = item.get("content")
    if not isinstance(content, list):
        return None
    item = item if own else dict(item)
    data = _take(item)
    del item["content"]
    item.pop("rawContent", None)  # not sent by the JS SDK either
    summary = []
    for part in content:
        if isinstance(part, dict):
            part = part if own else dict(part)
            part_data = _take(part)
            part["type"] = "summary_text"
            _merge(part, part_data)
            summary.append(part)
    item["summary"] = summary
    _merge(item, data)
    return item


# ---------------------------------------------------------------------------- computer use


def _computer_call_to(item: dict[str, Any]) -> Any:
    action, actions = item.get("action"), item.get("actions")
    if not isinstance(item.get("call_id"), str) or not (
            isinstance(action, dict) or (isinstance(actions, list) and actions)):
        return None
    fields: dict[str, Any] = {key: item[key] for key in ("action", "actions") if key in item}
    return _call_to(item, "computer_call", fields, fields, default="completed")


def _status_call_from(item: dict[str, Any], own: bool) -> Any:
    """computer_call, apply_patch_call and its output: the protocol requires their
    ``status``, so a marker may give back the Python item's own."""
    return _call_from(item, own, "status") if "callId" in item else item


def _computer_output_to(item: dict[str, Any]) -> Any:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str) or not isinstance(output, dict) \
            or output.get("type") != "computer_screenshot":
        return None
    image = output.get("image_url")
    screenshot: dict[str, Any] = {"type": "computer_screenshot",
                                  "data": image if isinstance(image, str) else ""}
    shot_extra = _rest(output, _KEYS_TYPE_IMAGE_URL)
    if not isinstance(image, str):
        shot_extra["image_url"] = image if "image_url" in output else None
    if shot_extra:
        screenshot["providerData"] = shot_extra
    out: dict[str, Any] = {"type": "computer_call_result"}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    out["callId"] = call_id
    out["output"] = screenshot
    extra: dict[str, Any] = {}
    for key, value in item.items():
        if key == "acknowledged_safety_checks":
            extra["acknowledgedSafetyChecks"] = value  # as the JS runner writes it
        elif key not in ("type", "call_id", "output") and not (key == "id" and "id" in out):
            extra[key] = value
    if extra:
        out["providerData"] = extra
    return out


def _computer_result_from(item: dict[str, Any], own: bool) -> Any:
    output = item.get("output")
    if not isinstance(item.get("callId"), str) or not isinstance(output, dict):
        return None
    item = item if own else dict(item)
    data = _take(item)
    item["type"] = "computer_call_output"
    item["call_id"] = item.pop("callId")
    shot = output if own else dict(output)
    shot_data = _take(shot)
    shot["image_url"] = shot.pop("data", None)
    _merge(shot, shot_data)
    _restore(shot, shot_data, "image_url")
    item["output"] = shot
    _merge(item, data)
    return item


# ---------------------------------------------------------------------------- shell


def _shell_action_to(action: Any) -> tuple[dict[str, Any], bool] | None:
    """The protocol's shell action, and whether it gives the Python action back exactly."""
    if not isinstance(action, dict) or not isinstance(action.get("commands"), list):
        return None
    out: dict[str, Any] = {"commands": action["commands"]}
    exact = set(action) == {"commands", "timeout_ms", "max_output_length"}
    for key, camel in (("timeout_ms", "timeoutMs"), ("max_output_length", "maxOutputLength")):
        value = action.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[camel] = value
        elif value is not None:
            exact = False
    return out, exact


def _shell_call_to(item: dict[str, Any]) -> Any:
    converted = _shell_action_to(item.get("action"))
    if not isinstance(item.get("call_id"), str) or converted is None:
        return None
    action, exact = converted
    out = _call_to(item, "shell_call", {"action": action}, ("action",))
    if not exact:  # the request builder reads only `environment` from here
        out["providerData"]["action"] = item["action"]
    return out


def _shell_call_from(item: dict[str, Any], own: bool) -> Any:
    if "callId" not in item:
        return item
    data = item.get("providerData")
    stashed = data.get("action") if isinstance(data, dict) else None
    item = _call_from(item, own)
    action = item.get("action")
    if isinstance(stashed, dict):  # the Python item's own action
        item["action"] = stashed
    elif isinstance(action, dict):
        timeout, length = action.get("timeoutMs"), action.get("maxOutputLength")
        item["action"] = {"commands": action.get("commands"),
                          "timeout_ms": timeout if isinstance(timeout, int) else None,
                          "max_output_length": length if isinstance(length, int) else None}
    return item


def _shell_output_to(item: dict[str, Any]) -> Any:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str) or not isinstance(output, list):
        return None
    entries = []
    for entry in output:
        if not isinstance(entry, dict) or not isinstance(entry.get("stdout"), str) \
                or not isinstance(entry.get("stderr"), str):
            return None
        outcome = entry.get("outcome")
        if outcome == {"type": "timeout"}:
            shell_outcome: dict[str, Any] = {"type": "timeout"}
        elif isinstance(outcome, dict) and outcome.get("type") == "exit" \
                and set(outcome) == {"type", "exit_code"} \
                and (outcome["exit_code"] is None or isinstance(outcome["exit_code"], int)):
            shell_outcome = {"type": "exit", "exitCode": outcome["exit_code"]}
        else:
            return None
        # The protocol's output entries pass other keys through.
        entries.append({**entry, "outcome": shell_outcome})
    fields: dict[str, Any] = {"output": entries}
    length = item.get("max_output_length")
    if isinstance(length, int) and not isinstance(length, bool):
        fields["maxOutputLength"] = length
    taken = ("output", "max_output_length") if "maxOutputLength" in fields else ("output",)
    return _call_to(item, "shell_call_output", fields, taken, statuses=())


def _shell_output_from(item: dict[str, Any], own: bool) -> Any:
    if "callId" not in item:
        return item
    item = _call_from(item, own)
    entries = []
    for entry in item.get("output") or ():
        outcome = entry.get("outcome") if isinstance(entry, dict) else None
        if isinstance(outcome, dict) and outcome.get("type") == "exit":
            entry = {**entry, "outcome": {"type": "exit", "exit_code": outcome.get("exitCode")}}
        entries.append(entry)
    item["output"] = entries
    if "maxOutputLength" in item:
        item["max_output_length"] = item.pop("maxOutputLength")
    return item


# ---------------------------------------------------------------------------- apply_patch


_OPERATIONS: Final = {"create_file": ("path", "diff"), "update_file": ("path", "diff"),
                      "delete_file": ("path",)}


def _apply_patch_call_to(item: dict[str, Any]) -> Any:
    operation = item.get("operation")
    if not isinstance(item.get("call_id"), str) or not isinstance(operation, dict) or not all(
            isinstance(operation.get(key), str)
            for key in _OPERATIONS.get(str(operation.get("type")), ("-",))):
        return None
    return _call_to(item, "apply_patch_call", {"operation": operation}, ("operation",),
                    ("in_progress", "completed"), "in_progress")


def _apply_patch_output_to(item: dict[str, Any]) -> Any:
    if not isinstance(item.get("call_id"), str):
        return None
    fields = {"output": item["output"]} if isinstance(item.get("output"), str) else {}
    return _call_to(item, "apply_patch_call_output", fields, fields, ("completed", "failed"),
                    "completed")


# ---------------------------------------------------------------------------- hosted tools


def _hosted_to(item: dict[str, Any]) -> Any:
    """web/file search, code interpreter, image generation, MCP: a hosted_tool_call with the
    API item in providerData (as convertToOutputItem and the JS runner write them)."""
    kind = item["type"]
    if kind == "mcp_approval_response":  # as the JS runner writes it: no id, no status
        return {"type": "hosted_tool_call", "name": kind,
                "providerData": {key: value for key, value in item.items() if key != "type"}}
    out: dict[str, Any] = {"type": "hosted_tool_call"}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    out["name"] = kind
    data = dict(item)
    if kind in _MCP:
        out["status"] = "completed"  # the item's own status, if any, stays in providerData
        if kind == "mcp_call" and isinstance(item.get("output"), str) and item["output"]:
            out["output"] = data.pop("output")
    else:
        status = data.pop("status", _MISSING)
        if isinstance(status, str):
            out["status"] = status
        elif status is not _MISSING:
            data["status"] = status
        if kind == "image_generation_call" and isinstance(item.get("result"), str):
            out["output"] = data.pop("result")
    out["providerData"] = data
    return out


_HOSTED_ALIASES: Final = {"web_search": "web_search_call", "file_search": "file_search_call",
                          "code_interpreter": "code_interpreter_call",
                          "image_generation": "image_generation_call"}


def _hosted_from(item: dict[str, Any], own: bool) -> Any:
    data = item.get("providerData")
    data = data if isinstance(data, dict) else {}
    kind: Any = data.get("type")
    if kind not in _HOSTED and kind not in _MCP:
        kind = _HOSTED_ALIASES.get(str(kind), kind)
    if kind not in _HOSTED and kind not in _MCP:
        kind = item.get("name")
    if kind not in _HOSTED and kind not in _MCP:
        return None  # neither SDK can send it
    out: dict[str, Any] = {}
    _merge(out, data)
    out["type"] = kind
    if kind in _MCP:
        if "id" not in out and "id" in item:
            out["id"] = item["id"]
        if kind == "mcp_call" and "output" in item:
            out["output"] = item["output"]
        return out
    if "id" in item:
        out["id"] = item["id"]
    if "status" in item:
        out["status"] = item["status"]
    if kind == "image_generation_call" and "output" in item:
        out["result"] = item["output"]
    if kind == "code_interpreter_call" and "outputs" not in out and "results" in out:
        out["outputs"] = out.pop("results")  # the JS SDK's older name for them
    return out


# ---------------------------------------------------------------------------- others


def _compaction_to(item: dict[str, Any]) -> Any:
    if not isinstance(item.get("encrypted_content"), str):
        return None
    taken = ("type", "id", "encrypted_content", "created_by")
    if all(key in taken for key in item):
        return item  # the protocol's compaction item is the API's
    out = {key: item[key] for key in taken if key in item}
    out["providerData"] = {key: value for key, value in item.items() if key not in taken}
    return out


def _compaction_from(item: dict[str, Any], own: bool) -> Any:
    if "providerData" not in item and "encryptedContent" not in item:
        return item
    item = item if own else dict(item)
    data = _take(item)
    if "encryptedContent" in item:
        item.setdefault("encrypted_content", item.pop("encryptedContent"))
    _merge(item, data)
    return item


def _tool_search_to(item: dict[str, Any]) -> Any:
    """tool_search_call / tool_search_output, as convertToOutputItem writes them: the call
    id and execution in providerData, tool references and function tools camel-cased."""
    tools = item.get("tools", _MISSING)
    if tools is not _MISSING and not isinstance(tools, list):
        return None
    out: dict[str, Any] = {"type": item["type"]}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    if isinstance(item.get("status"), str):
        out["status"] = item["status"]
    if "arguments" in item:
        out["arguments"] = item["arguments"]
    if isinstance(tools, list):
        out["tools"] = [_search_tool(tool, _TO_CAMEL) for tool in tools]
    out["providerData"] = {key: value for key, value in item.items()
                           if key not in out or key == "type"}
    return out


def _tool_search_from(item: dict[str, Any], own: bool) -> Any:
    if "providerData" not in item and "callId" not in item and not (
            isinstance(item.get("tools"), list)
            and any(isinstance(tool, dict) and set(tool) & _FROM_CAMEL.keys()
                    for tool in item["tools"])):
        return item
    item = item if own else dict(item)
    data = _take(item)
    if "callId" in item:
        item.setdefault("call_id", item.pop("callId"))
    if isinstance(item.get("tools"), list):
        item["tools"] = [_search_tool(tool, _FROM_CAMEL) for tool in item["tools"]]
    _merge(item, data)
    return item


_TO_CAMEL: Final = {"function_name": "functionName", "defer_loading": "deferLoading"}
_FROM_CAMEL: Final = {"functionName": "function_name", "deferLoading": "defer_loading"}


def _search_tool(tool: Any, names: Mapping[str, str]) -> Any:
    if not isinstance(tool, dict):
        return tool
    kind = tool.get("type")
    if kind == "namespace" and isinstance(tool.get("tools"), list):
        return {**tool, "tools": [_search_tool(entry, names) for entry in tool["tools"]]}
    if kind in ("tool_reference", "function"):
        return {names.get(key, key): value for key, value in tool.items()}
    return tool


def _unknown_from(item: dict[str, Any], own: bool) -> Any:
    data = item.get("providerData")
    if not isinstance(data, dict):
        return None
    if "id" in item and data.get("id") != item["id"]:
        return {**data, "id": item["id"]}
    return data


# ---------------------------------------------------------------------------- dispatch

_TO: Final[dict[str, Callable[[dict[str, Any]], Any]]] = {
    "message": _message_to,
    "function_call": _function_call_to,
    "reasoning": _reasoning_to,
    "computer_call": _computer_call_to,
    "computer_call_output": _computer_output_to,
    "shell_call": _shell_call_to,
    "shell_call_output": _shell_output_to,
    "apply_patch_call": _apply_patch_call_to,
    "apply_patch_call_output": _apply_patch_output_to,
    "compaction": _compaction_to,
    "tool_search_call": _tool_search_to,
    "tool_search_output": _tool_search_to,
    **dict.fromkeys((*_HOSTED, *_MCP), _hosted_to),
}
_FROM: Final[dict[str, Callable[[dict[str, Any], bool], Any]]] = {
    "message": _message_from,
    "function_call": _function_call_from,
    "function_call_result": _function_result_from,
    "reasoning": _reasoning_from,
    "computer_call": _status_call_from,
    "computer_call_result": _computer_result_from,
    "shell_call": _shell_call_from,
    "shell_call_output": _shell_output_from,
    "apply_patch_call": _status_call_from,
    "apply_patch_call_output": _status_call_from,
    "hosted_tool_call": _hosted_from,
    "compaction": _compaction_from,
    "tool_search_call": _tool_search_from,
    "tool_search_output": _tool_search_from,
    "unknown": _unknown_from,
}


def _same(item: dict[str, Any], own: bool) -> Any:
    return item


for _kind in PYTHON_ONLY_TYPES:  # Python-shaped already
    _FROM.setdefault(_kind, _same)


def to_protocol(item: Any, names: Mapping[str, str] | None = None) -> Any:
    """The protocol item for a Python SDK input item (anything unknown: unchanged).

    ``names`` maps call ids to tool names: a ``function_call_result`` needs the
    name of its tool, which the Python ``function_call_output`` does not carry
    (:func:`to_protocol_items` takes it from the batch). Without it, the item's
    own ``name`` or, as the JS SDK does, its call id.
    """
    if not isinstance(item, dict) or "providerData" in item or "callId" in item:
        return item  # not an item, or a protocol item already
    kind = item.get("type", _MISSING)
    if kind is _MISSING or kind == "message":
        if item.get("role") in _ROLES:
            converted = _message_to(item)
        elif _is_reference(item):
            converted = None
        else:
            return item  # neither SDK's
    elif kind == "function_call_output":
        converted = _function_output_to(item, names)
    elif kind == "reasoning" and "summary" not in item:
        return item  # a protocol item already
    elif kind in _WRAPPED or (kind is None and _is_reference(item)):
        converted = None
    else:
        convert = _TO.get(kind)
        if convert is None:
            return item  # neither SDK's
        converted = convert(item)
    return _wrap(item) if converted is None else converted


def _is_reference(item: dict[str, Any]) -> bool:
    """An item reference written without its (optional) ``type``: ``{"id": "..."}``."""
    return isinstance(item.get("id"), str) and all(key in ("id", "type") for key in item)


def to_protocol_items(items: Iterable[Any], names: Mapping[str, str] | None = None) -> list[Any]:
    """:func:`to_protocol` of each item; a tool output's tool name is taken from the
    ``function_call`` with its call id among ``items`` (else from ``names``)."""
    items = list(items)
    found = dict(names) if names else {}
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function_call" \
                and isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str):
            found[item["call_id"]] = item["name"]
    return [to_protocol(item, found) for item in items]


def read_item(item: Any, own: bool = False) -> Any:
    """The Python SDK item for an item of either shape; None if it is neither SDK's.

    Protocol items are converted, Python-shaped ones returned as they are. With
    ``own=True`` the item (just parsed, say) may be converted in place, which spares
    allocating its copy; otherwise it is left as it was.
    """
    if not isinstance(item, dict):
        return None
    kind = item.get("type", _MISSING)
    convert = _FROM.get(kind) if isinstance(kind, str) else None
    if convert is not None:
        return convert(item, own)
    if kind is _MISSING and "role" in item:
        return _message_from(item, own)
    return item if (kind is _MISSING or kind is None) and _is_reference(item) else None


def from_protocol(item: Any) -> Any:
    """The Python SDK input item for a protocol item (a Python-shaped item, or one that
    neither SDK knows, unchanged)."""
    converted = read_item(item)
    return item if converted is None else converted


def from_protocol_items(items: Iterable[Any]) -> list[Any]:
    return [from_protocol(item) for item in items]


def is_known_item(item: Any) -> bool:
    """Whether ``item`` is an item of either SDK (of a type one of them knows)."""
    return read_item(item) is not None


def item_shape(item: Any) -> str:
    """How a reader must take ``item``: ``"protocol"`` (the JS SDK's shape: convert it with
    :func:`from_protocol`), ``"python"`` (the Python SDK's shape, e.g. a row written by
    sessiontape 0.1: use it as it is), ``"both"`` (the same in both SDKs, e.g. a user
    message with text content) or ``"unknown"`` (neither SDK's item)."""
    converted = read_item(item)
    if converted is None:
        return "unknown"
    if converted is not item:
        return "protocol"
    written = to_protocol(item)
    if written == item:
        return "both"
    if isinstance(written, dict) and written.get("providerData") == {} \
            and item.get("role") in ("user", "system") and "type" not in item:
        return "both"  # a message without `type`, which the protocol makes optional
    return "python"


def is_protocol_item(item: Any) -> bool:
    """Whether ``item`` is a protocol item (readable as it is by the JS SDK): of shape
    ``"protocol"`` or ``"both"`` (see :func:`item_shape`)."""
    return item_shape(item) in ("protocol", "both")
# ---------------------------------------------------------------------------- text


def call_id_of(item: Any) -> Any:
    """A tool call's or output's call id, in either shape (None if it has none)."""
    if not isinstance(item, dict):
        return None
    return item.get("call_id", item.get("callId"))


CLIP_CHARS: Final = 120


def clip(text: Any, limit: int = CLIP_CHARS) -> str:
    """``text`` on one line (runs of whitespace as one space), cut to ``limit`` characters
    with an ellipsis."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def content_text(content: Any) -> str:
    """A message's ``content`` as text: a string, or the texts of its content parts
    (``input_text``/``output_text``/``text``, a refusal) joined with spaces; a part
    without text shows as ``[its type]``."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                text = part.get("text", part.get("refusal"))
                if isinstance(text, str):
                    texts.append(text)
                elif part.get("type") is not None:
                    texts.append(f"[{part.get('type')}]")
        return " ".join(texts)
    return "" if content is None else str(content)


def input_text(user_input: Any, separator: str = " ") -> str:
    """A run's input (a string, or a list of input items) as text: each item's content,
    joined with ``separator``."""
    if isinstance(user_input, list):
        return separator.join(content_text(item.get("content", "")) if isinstance(item, dict)
                              else str(item) for item in user_input)
    return "" if user_input is None else str(user_input)


def output_text(output: Any) -> str:
    """A tool output as text: the Python SDK's string (or list of content parts), or the
    JS SDK's ``{"type": "text", "text": ...}`` object; other values as compact JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, (dict, list)):
        text = content_text(output)
        return text if text and not text.startswith("[") else dumps_compact(output).decode()
    return "" if output is None else str(output)


def item_text(item: Any) -> str:
    """An item of either shape on one line: ``role: text`` for messages,
    ``kind name(arguments)`` for calls, ``kind name: output`` for outputs."""
    if not isinstance(item, dict):
        return str(item)
    if item.get("type") == "unknown" and isinstance(item.get("providerData"), dict):
        item = item["providerData"]
    kind = item.get("type")
    if item.get("role") is not None and kind in (None, "message"):
        return f"{item['role']}: {content_text(item.get('content'))}"
    if kind in ("function_call", "hosted_tool_call", "custom_tool_call") or kind in _HOSTED \
            or kind in ("mcp_call", "mcp_approval_request"):
        arguments = item.get("arguments", item.get("input", ""))
        if not isinstance(arguments, str):
            arguments = content_text(arguments) or str(arguments)
        name = item.get("name")
        return f"{kind} {name}({arguments})" if name else f"{kind}({arguments})"
    if kind in ("function_call_output", "function_call_result", "custom_tool_call_output"):
        name = f" {item['name']}" if isinstance(item.get("name"), str) else ""
        return f"{kind}{name}: {output_text(item.get('output'))}"
    if kind == "reasoning":
        texts = [s.get("text", "") for key in ("summary", "content")
                 for s in (item.get(key) or []) if isinstance(s, dict)]
        return "reasoning: " + " ".join(map(str, texts))
    return str(kind)
