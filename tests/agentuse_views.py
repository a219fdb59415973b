"""AgentUse 0.15's own views of a session tree, ported line by line from its source, so that
a test can check what AgentUse shows for the files we write (AgentUse is not on a package
registry: the tests cannot run it). Each function names the lines it ports (files of
github.com/agentuse/agentuse at v0.15.0); what a port leaves out is said in its docstring.

- :func:`show_lines`: ``agentuse sessions show <id> [--full]`` (src/cli/sessions.ts,
  ``showSession``);
- :func:`error_part_line`: its line for an ``error`` part;
- :func:`listed_approval`: the entry of ``GET /api/approvals`` (its serve) for a session.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["error_part_line", "listed_approval", "show_lines"]


def _read(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def _truncate(text: str, length: int) -> str:
    """``truncate`` (src/cli/sessions.ts:340-343)."""
    return text if len(text) <= length else text[:length - 1] + "…"


def _stringify(value: Any, indent: int | None = None) -> str:
    """``JSON.stringify(value[, null, indent])``."""
    return json.dumps(value, ensure_ascii=False, indent=indent,
                      separators=(",", ": ") if indent else (",", ":"))


def _string(value: Any) -> str:
    """``String(value)`` of a JSON value that is not an object or array."""
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _value_full(value: Any, indent: str = "  ") -> str:
    """``formatValueFull`` (src/cli/sessions.ts:397-420), as ``sessions show`` calls it."""
    text = _stringify(value, 2) if isinstance(value, (dict, list)) else _string(value)
    return "\n".join(indent + line for line in text.split("\n"))


def _main_input(value: Any) -> str | None:
    """``extractMainInput`` (src/cli/sessions.ts:460-482)."""
    if not isinstance(value, dict):
        return None
    for key in ("command", "query", "url", "path", "file_path", "pattern", "text", "content"):
        if isinstance(value.get(key), str) and value[key]:
            return str(value[key])
    for item in value.values():
        if isinstance(item, str) and len(item) < 200:
            return item
    return None


def _output_value(output: Any) -> str:
    """``extractOutputValue`` (src/cli/sessions.ts:487-515)."""
    if isinstance(output, dict):
        for key in ("output", "result", "content"):
            if isinstance(output.get(key), str) and output[key]:
                return str(output[key])
    return _stringify(output) if isinstance(output, (dict, list)) else _string(output)


def _tool_output(text: str, max_len: int, max_lines: int = 5) -> str:
    """``formatToolOutput`` (src/cli/sessions.ts:587-605)."""
    lines = text.split("\n")
    result = []
    for index, line in enumerate(lines):
        if len(line) > max_len:
            line = line[:max_len] + f"… [{len(text)} chars]"
        result.append(line)
        if index >= max_lines - 1 and len(lines) > max_lines:
            result.append(f"... ({len(lines) - max_lines} more lines)")
            break
    return "\n".join(result)


def _tool_name(name: str) -> str:
    """``formatToolName`` (src/cli/sessions.ts:427-438): ``mcp__bash__run`` -> ``Bash{run}``."""
    if name.startswith("mcp__"):
        server, _, method = name[5:].partition("__")
        if method:
            return f"{server[:1].upper()}{server[1:]}{{{method}}}"
    return name


def error_part_line(part: dict[str, Any]) -> str:
    """What ``sessions show`` prints for an ``error`` part: ``describeErrorPart``
    (src/runner/session-helper.ts) and its caller (src/cli/sessions.ts:1086-1101, the
    message cut at 400 characters)."""
    source = "compaction" if part.get("source") == "compaction" else "agent"
    code = part.get("code") if isinstance(part.get("code"), str) else None
    title = "Context compaction failed" if source == "compaction" else (
        f"Run error ({code})" if code else "Run error")
    status = part.get("statusCode")
    prefix = f"HTTP {status}: " if isinstance(status, int) else ""
    detail = part.get("detail") if isinstance(part.get("detail"), str) else None
    body = detail if detail and detail.strip() else part["message"]
    message = f"{prefix}{body}"
    message = message if len(message) <= 400 else message[:397] + "..."
    return f"✗ {title}: {message}"


def _tool_lines(part: dict[str, Any], full: bool) -> list[str]:
    """A tool part's block (src/cli/sessions.ts:973-1057)."""
    state = part["state"]
    status = state["status"]
    mark = "✓" if status == "completed" else "✗" if status == "error" else "…"
    main = _main_input(state.get("input"))
    shown = f" ({_truncate(main, 60)})" if main else ""
    times = state.get("time") or {}
    duration = ""
    if times.get("start") and times.get("end"):
        ms = times["end"] - times["start"]
        duration = f" {ms}ms" if ms < 1000 else f" {ms / 1000:.1f}s"
    header = f"─── {mark} {_tool_name(part['tool'])}{shown}{duration} "
    lines = [header + "─" * max(0, 60 - len(header))]
    if full and "input" in state:
        lines += ["Input:", _value_full(state["input"])]
    payload = state.get("resumePayload") or {}
    url = payload.get("approvalUrl") or (payload.get("channelMessage") or {}).get("url")
    if status == "pending" and payload.get("kind") == "await_human":  # :1029-1034
        lines.append("Approval: pending")
        if url:
            lines.append(f"Review URL: {url}")
    if status == "error" and state.get("error"):
        lines += ["Error:", _value_full(state["error"])] if full \
            else [_tool_output(state["error"], 150)]
    elif status == "completed" and "output" in state:
        lines += ["Result:", _value_full(state["output"])] if full \
            else [_tool_output(_output_value(state["output"]), 150)]
    lines.append("─" * 60)
    return lines


def show_lines(session_dir: Path, *, full: bool = False) -> list[str]:
    """The lines ``agentuse sessions show <id> [--full]`` prints for the session in
    ``session_dir`` (``showSession``, src/cli/sessions.ts:781-1120, reading as
    ``getSessionDetails`` does, :235-313), but for the lines that depend on the clock or
    the machine (``Started:``, ``Project:``, ``Working Dir:``, the ``Tokens:`` line, its
    ``Subagents:`` list, the session error's ``Time:``), the blocks of ``compaction`` and
    ``learning`` parts, the frames of ``═`` and blank lines. Checked against AgentUse's
    own output on its fixture sessions and on ours (a trial, by hand: it is not on a
    registry)."""
    session = _read(session_dir / "session.json")
    lines = [f"Agent:       {session['agent']['name']}"]  # :819
    if session["agent"].get("description"):
        lines.append(f"Description: {session['agent']['description']}")
    lines.append(f"Model:       {session['model']}")  # :826
    mark = {"completed": "✓", "error": "✗", "suspended": "⏸"}.get(session["status"], "⋯")
    lines.append(f"Status:      {mark} {session['status'] or 'unknown'}")  # :830-831
    error = session.get("error")
    if error:  # :846-862
        interrupted = error.get("code") == "USER_INTERRUPT"
        lines += ["─" * 60, f"{'⚠' if interrupted else '✗'} "
                  f"{'INTERRUPTED' if interrupted else 'ERROR'}: {_string(error.get('code'))}",
                  f"  {error['message']}"]
        if isinstance(error.get("statusCode"), int):
            lines.append(f"  HTTP {error['statusCode']}" + (f" @ {error['url']}"
                                                            if error.get("url") else ""))
        if error.get("detail"):
            lines.append(f"  Provider response: {error['detail']}")
    messages = []
    for directory in session_dir.iterdir():  # :268-309: every ULID directory
        if directory.is_dir() and re.fullmatch(r"[0-9A-Z]{26}", directory.name, re.I) \
                and (directory / "message.json").is_file():
            parts = [_read(p) for p in (directory / "part").glob("*.json")] \
                if (directory / "part").is_dir() else []
            messages.append((_read(directory / "message.json"), parts))
    messages.sort(key=lambda m: m[0]["time"]["created"])
    if messages:
        lines.append("─" * 60)  # :865-866
    for message, parts in messages:
        if len(messages) > 1:
            lines.append(f"[Message {message['id'][:8]}]")
        task = message["user"]["prompt"]["task"]
        lines.append(f"Task: {_truncate(task.split(chr(10))[0], 80)}")  # :877-878
        if message["user"]["prompt"].get("user"):
            lines.append(f"User: {message['user']['prompt']['user']}")
        counts: dict[str, int] = {}
        for part in parts:  # :920-930, in the order the files were read
            counts[part["type"]] = counts.get(part["type"], 0) + 1
        if counts:
            lines.append("Parts: " + ", ".join(f"{k}: {v}" for k, v in counts.items()))
        tools: dict[str, int] = {}
        for part in parts:  # :933-958
            if part["type"] == "tool":
                tools[part["tool"]] = tools.get(part["tool"], 0) + 1
        if tools:
            summary = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in tools.items())
            lines.append(f"Tools: {sum(tools.values())} calls ({_truncate(summary, 60)})")
        shown = sorted((p for p in parts if p["type"] in (
            "text", "tool", "compaction", "learning", "error", "log")), key=lambda p: p["id"])
        if shown:  # :960-1120
            lines.append("Output:")
        for part in shown:
            if part["type"] == "text" and part["text"].strip():
                lines.append(part["text"].strip())
            elif part["type"] == "tool":
                lines += _tool_lines(part, full)
            elif part["type"] == "error":
                lines.append(error_part_line(part))
            elif part["type"] == "log" and part["level"] != "debug":
                lines.append(f"  [{part['level'].upper()}] {_truncate(part['message'], 400)}")
    return [line for line in "\n".join(lines).split("\n") if line.strip()]


def _approval_part(session_dir: Path) -> dict[str, Any] | None:
    """``getLatestApprovalPart`` (src/session/manager.ts:734-745): the newest exchange
    directory first (not ``subagent``), the newest part file first (``listPartKeysShallow``,
    :694-727), the first whose text matches ``/"tool"\\s*:\\s*"await_human"/`` and which
    parses as a ``tool`` part of tool ``await_human`` (``readApprovalToolPart``,
    :666-692)."""
    for directory in sorted((d for d in session_dir.iterdir()
                             if d.is_dir() and d.name != "subagent"), reverse=True):
        part_dir = directory / "part"
        for path in sorted(part_dir.glob("*.json") if part_dir.is_dir() else (),
                           reverse=True):
            text = path.read_text("utf-8")
            if not re.search(r'"tool"\s*:\s*"await_human"', text):
                continue
            part = json.loads(text)
            if part.get("type") == "tool" and part.get("tool") == "await_human":
                return dict(part)
    return None


def listed_approval(session_dir: Path) -> dict[str, Any] | None:
    """The approval ``GET /api/approvals`` lists for the session in ``session_dir`` (None:
    none): ``summarizeApproval`` in ``listAllApprovals`` (src/index.ts:2351-2493), the
    fields that come from the tree: ``sessionId``, ``agentName``, ``status``,
    ``sessionStatus``, ``prompt``, ``summary``, ``risk``, ``suspendedAt``,
    ``decisionStatus``, ``decisionComment`` (not the cascade through ``subagent_wait``
    bookmarks: we write none). Its serve sorts ``pending`` ones into the ``pending``
    bucket of the page (src/cli/serve.ts:2970-2973)."""
    session = _read(session_dir / "session.json")
    if isinstance(session.get("parentSessionID"), str) and session["parentSessionID"]:
        return None  # :2367-2371: a subagent's gate is listed through its root
    part = _approval_part(session_dir)
    if part is None:
        return None
    state = part["state"]
    output = state.get("output") if state["status"] == "completed" else {}
    output = output if isinstance(output, dict) else {}
    code = (session.get("error") or {}).get("code")
    if state["status"] == "pending" and code == "USER_STOPPED":  # :2418-2442
        status = "errored"
    elif state["status"] == "pending" and code == "TIMEOUT":
        status = "expired"
    elif state["status"] == "pending" and session["status"] not in ("suspended", "running"):
        status = "errored"
    elif state["status"] == "pending":
        status = "pending"
    elif state["status"] == "completed":
        decision = str(output.get("status", "")).lower()
        status = {"approve": "approved", "approved": "approved", "reject": "rejected",
                  "rejected": "rejected", "comment": "commented",
                  "commented": "commented"}.get(decision, "approved")
    elif state["status"] == "error":
        status = "expired" if re.search(r"timed out|timeout|APPROVAL_TIMEOUT",
                                        str(state.get("error", "")), re.I) else "errored"
    else:
        status = "errored"
    given = state.get("input") if isinstance(state.get("input"), dict) else {}
    entry: dict[str, Any] = {"sessionId": session["id"],
                             "agentName": session["agent"]["name"] or session["agent"]["id"],
                             "status": status, "sessionStatus": session["status"]}
    for key in ("prompt", "summary", "risk"):  # :2470-2472
        if isinstance(given.get(key), str):
            entry[key] = given[key]
    if state["status"] == "pending" and isinstance(state.get("suspendedAt"), int):
        entry["suspendedAt"] = state["suspendedAt"]
    if isinstance(output.get("status"), str):
        entry["decisionStatus"] = output["status"]
    if isinstance(output.get("comment"), str):
        entry["decisionComment"] = output["comment"]
    return entry
