"""The AgentUse tree: golden bytes, round trips, AgentUse's own files, corrupt input."""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest

from sessiontape.storage.agentuse.reader import CorruptFileError, load_session, scan_sessions
from sessiontape.storage.agentuse.writer import (
    WRITER_VERSION,
    AgentUseSession,
    DocumentWrites,
    Tokens,
)
from sessiontape.storage.ids import is_ulid

T0 = 1795341733139
PROJECT = "/home/dev/proj"


def new_session(root: Path, name: str = "Tool User", **kwargs: object) -> AgentUseSession:
    kwargs = {"model": "openai:gpt-4.1", "project_root": PROJECT, "cwd": PROJECT,
              "max_steps": 10, "created": T0, **kwargs}
    return AgentUseSession.create(root, name, **kwargs)  # type: ignore[arg-type]


def test_session_json_golden_bytes(tmp_path: Path) -> None:
    session = new_session(tmp_path, description="Answers questions")
    assert session.directory == tmp_path / f"{session.id}-tool-user"
    assert (session.directory / "session.json").read_text() == f"""{{
  "agent": {{
    "id": "Tool User",
    "name": "Tool User",
    "description": "Answers questions",
    "isSubAgent": false
  }},
  "model": "openai:gpt-4.1",
  "version": "{WRITER_VERSION}",
  "config": {{
    "maxSteps": 10
  }},
  "project": {{
    "root": "/home/dev/proj",
    "cwd": "/home/dev/proj"
  }},
  "id": "{session.id}",
  "status": "running",
  "trigger": "manual",
  "time": {{
    "created": {T0},
    "updated": {T0}
  }},
  "format": "sessiontape-agentuse/2"
}}"""


def test_status_error_and_back(tmp_path: Path) -> None:
    session = new_session(tmp_path)
    session.set_status("error", error={"message": "boom", "detail": "x" * 5000}, at=T0 + 5)
    info = json.loads((session.directory / "session.json").read_bytes())
    assert info["status"] == "error"
    assert info["time"] == {"created": T0, "updated": T0 + 5}
    assert info["error"] == {"code": "EXECUTION_ERROR", "time": T0 + 5, "message": "boom",
                             "detail": "x" * 4000}
    session.set_status("completed", at=T0 + 9)
    info = json.loads((session.directory / "session.json").read_bytes())
    assert "error" not in info and info["time"]["updated"] == T0 + 9


def test_tools_json_golden_bytes(tmp_path: Path) -> None:
    """tools.json is compact: AgentUse 0.15 reads it only with ``JSON.parse``
    (``readToolsSnapshot``, src/session/manager.ts:902-905, through ``readJSON``,
    src/storage/storage.ts:96-113, called on a resume, src/runner/preparation.ts:250) and
    uses ``name``, ``description`` and ``inputSchema`` of each tool
    (``bindToolsToSnapshot``, src/runner/tool-snapshot.ts:91-111): its indentation is
    bytes no reader uses, 40% of the file at 40 tools."""
    session = new_session(tmp_path)
    tools = [{"name": "add", "description": "Add two numbers",
              "inputSchema": {"type": "object", "required": ["a"]}}]
    session.write_tools(tools)
    written = (session.directory / "tools.json").read_text()
    assert written == ('{"tools":[{"name":"add","description":"Add two numbers",'
                       '"inputSchema":{"type":"object","required":["a"]}}]}')
    assert json.loads(written) == {"tools": tools}  # what JSON.parse gives AgentUse
    session.write_tools([])
    assert (session.directory / "tools.json").read_text() == '{"tools":[]}'


def test_message_json_golden_bytes_and_usage(tmp_path: Path) -> None:
    session = new_session(tmp_path)
    message = session.add_message("Count the files", system=["Be brief."], created=T0 + 1)
    message.add_usage(Tokens(input=100, output=20, reasoning=5, cache_read=40), 0.25)
    message.add_usage(Tokens(input=10, output=2), 0.5)
    message.complete(at=T0 + 9)
    assert (message.directory / "message.json").read_text() == f"""{{
  "id": "{message.id}",
  "sessionID": "{session.id}",
  "time": {{
    "created": {T0 + 1},
    "completed": {T0 + 9}
  }},
  "user": {{
    "prompt": {{
      "task": "Count the files"
    }}
  }},
  "assistant": {{
    "system": [
      "Be brief."
    ],
    "modelID": "openai:gpt-4.1",
    "providerID": "openai",
    "mode": "build",
    "path": {{
      "cwd": "/home/dev/proj",
      "root": "/home/dev/proj"
    }},
    "cost": 0.75,
    "tokens": {{
      "input": 110,
      "output": 22,
      "reasoning": 5,
      "cache": {{
        "read": 40,
        "write": 0
      }}
    }}
  }}
}}"""


def test_failed_message_has_error_and_no_completed_time(tmp_path: Path) -> None:
    message = new_session(tmp_path).add_message("x")
    message.fail("max turns exceeded", "MaxTurnsExceeded")
    info = json.loads((message.directory / "message.json").read_bytes())
    assert "completed" not in info["time"]
    assert info["assistant"]["error"] == {"message": "max turns exceeded",
                                          "type": "MaxTurnsExceeded"}


def test_part_golden_bytes_base_fields_last(tmp_path: Path) -> None:
    message = new_session(tmp_path).add_message("x")
    step = message.add_part("step-finish", cost=0, tokens=Tokens(3, 4).to_json())
    assert step.path.read_text() == f"""{{
  "type": "step-finish",
  "cost": 0,
  "tokens": {{
    "input": 3,
    "output": 4,
    "reasoning": 0,
    "cache": {{
      "read": 0,
      "write": 0
    }}
  }},
  "id": "{step.id}",
  "sessionID": "{message.session.id}",
  "messageID": "{message.id}"
}}"""


def test_tool_part_running_then_completed_or_error(tmp_path: Path) -> None:
    message = new_session(tmp_path).add_message("x")
    ok = message.add_part("tool", callID="call_1", tool="add",
                          state={"status": "running", "input": {"a": 1}, "time": {"start": T0}})
    bad = message.add_part("tool", callID="call_2", tool="div",
                           state={"status": "running", "input": {"a": 0}, "time": {"start": T0}})
    ok.update(state={"status": "completed", "input": {"a": 1}, "output": "2",
                     "time": {"start": T0, "end": T0 + 3}})
    bad.update(state={"status": "error", "input": {"a": 0}, "error": "division by zero",
                      "time": {"start": T0, "end": T0 + 4}})
    read = {p["callID"]: p for p in load_session(message.session.directory).messages[0].parts}
    assert read["call_1"]["state"]["status"] == "completed"
    assert read["call_1"]["state"]["output"] == "2"
    assert read["call_2"]["state"] == {"status": "error", "input": {"a": 0},
                                       "error": "division by zero",
                                       "time": {"start": T0, "end": T0 + 4}}
    assert list(read["call_1"])[-3:] == ["id", "sessionID", "messageID"]


def test_none_fields_are_omitted(tmp_path: Path) -> None:
    message = new_session(tmp_path).add_message("x", user=None)
    part = message.add_part("text", text="hi", synthetic=None, time={"start": T0})
    assert "synthetic" not in json.loads(part.path.read_bytes())
    assert json.loads((message.directory / "message.json").read_bytes())["user"] == {
        "prompt": {"task": "x"}}


def test_round_trip_keeps_order_subagents_and_tools(tmp_path: Path) -> None:
    parent = new_session(tmp_path, "manager")
    parent.write_tools([{"name": "helper"}])
    first = parent.add_message("one")
    kinds = ["step-start", "reasoning", "text", "tool", "agent", "step-finish"] * 30
    for kind in kinds:  # many parts in the same millisecond: order by ID must hold
        first.add_part(kind, text=kind)
    child = parent.create_subagent("helper", model="openai:gpt-4.1-mini")
    grandchild = child.create_subagent("deep", model="openai:gpt-4.1-mini")
    grandchild.add_message("deepest").add_part("text", text="bottom")
    second = parent.add_message("two")
    loaded = load_session(parent.directory)
    assert [m.info["user"]["prompt"]["task"] for m in loaded.messages] == ["one", "two"]
    assert [p["type"] for p in loaded.messages[0].parts] == kinds
    assert loaded.tools == [{"name": "helper"}]
    assert [s.id for s in loaded.subagents] == [child.id]
    sub = loaded.subagents[0]
    assert sub.directory.parent == parent.directory / "subagent"
    assert sub.info["parentSessionID"] == parent.id and sub.info["agent"]["isSubAgent"] is True
    assert sub.subagents[0].info["parentSessionID"] == child.id
    assert sub.subagents[0].messages[0].parts[0]["text"] == "bottom"
    assert loaded.messages[1].info["id"] == second.id


def test_open_continues_a_session(tmp_path: Path) -> None:
    session = new_session(tmp_path)
    session.add_message("first")
    session.set_status("completed")
    again = AgentUseSession.open(session.directory)
    again.set_status("running")
    again.add_message("second")
    loaded = load_session(session.directory)
    assert [m.info["user"]["prompt"]["task"] for m in loaded.messages] == ["first", "second"]
    assert loaded.info["status"] == "running" and loaded.id == session.id


def test_files_are_private_and_no_temp_files_remain(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b"
    session = new_session(root)
    session.write_tools([])
    message = session.add_message("x")
    text = message.add_part("text", text="t")
    text.update(text="tt")
    child = session.create_subagent("helper", model="m")
    found = sorted((tmp_path / "a").rglob("*"))
    files = {path.relative_to(session.directory).as_posix() for path in found if path.is_file()}
    assert files == {"session.json", "tools.json", f"{message.id}/message.json",
                     f"{message.id}/part/{text.id}.json",
                     f"{child.directory.relative_to(session.directory).as_posix()}/session.json"}
    modes = {path: stat.S_IMODE(path.stat().st_mode) for path in found}
    assert {path for path, mode in modes.items()
            if mode != (0o700 if path.is_dir() else 0o600)} == set()


def test_a_reader_never_sees_half_a_part(tmp_path: Path) -> None:
    part = new_session(tmp_path).add_message("x").add_part("text", text="")
    done = threading.Event()
    seen: list[int] = []

    def read_all_the_time() -> None:
        while not done.is_set():
            seen.append(len(json.loads(part.path.read_bytes())["text"]))

    reader = threading.Thread(target=read_all_the_time)
    reader.start()
    for size in range(0, 400_000, 4_000):
        part.update(text="x" * size)
    done.set()
    reader.join()
    assert len(seen) > 10 and all(n % 4_000 == 0 for n in seen)


@pytest.mark.parametrize("name", ["../../escape", "/", "..", "a\0b", "x" * 10_000, "🎉", "\u202e"])
def test_hostile_agent_names_stay_inside(tmp_path: Path, name: str) -> None:
    session = new_session(tmp_path / "root", name)
    assert session.directory.parent == tmp_path / "root"
    assert load_session(session.directory).info["agent"]["name"] == name


# --- AgentUse's own files ------------------------------------------------------------


def test_scan_finds_every_agentuse_session(agentuse_fixture: Path) -> None:
    scan = scan_sessions(agentuse_fixture)
    assert scan.problems == []
    names = sorted(s.agent_name for s in scan.sessions)
    assert names == ["failing", "hello", "helpers-helper", "manager", "tools"]
    child = next(s for s in scan.sessions if s.agent_name == "helpers-helper")
    assert child.parent_id == "01M81BB9MADG4RB40MW6DV8WYR"
    assert all(is_ulid(s.id) for s in scan.sessions)


def _fixture_session(root: Path, suffix: str) -> Path:
    return next(s.directory for s in scan_sessions(root).sessions if s.agent_name == suffix)


def test_load_agentuse_tools_session(agentuse_fixture: Path) -> None:
    loaded = load_session(_fixture_session(agentuse_fixture, "tools"))
    assert loaded.info["config"] == {"maxSteps": 5}
    assert [t["name"] for t in loaded.tools] == ["tools__filesystem_read", "tools__bash"]
    parts = loaded.messages[0].parts
    assert len(parts) == 17
    tools = {p["callID"]: p["state"]["status"] for p in parts if p["type"] == "tool"}
    assert tools == {"toolu_fx_bash_ok_01": "completed", "toolu_fx_read_ok_02": "completed",
                     "toolu_fx_bash_blocked_03": "error"}
    starts = [p.get("time", p.get("state", {}).get("time", {})).get("start") for p in parts]
    assert starts == sorted(starts)  # AgentUse's IDs are not monotonic: ordered by time
    assert {"log", "reasoning", "text", "tool"} == {p["type"] for p in parts}


def test_load_agentuse_subagent_and_failure(agentuse_fixture: Path) -> None:
    manager = load_session(_fixture_session(agentuse_fixture, "manager"))
    assert len(manager.subagents) == 1
    helper = manager.subagents[0]
    assert helper.info["parentSessionID"] == manager.id
    assert any(p["type"] == "tool" and p["tool"] == "tools__bash"
               for p in helper.messages[0].parts)
    failing = load_session(_fixture_session(agentuse_fixture, "failing"))
    assert failing.info["status"] == "error" and failing.info["error"]["code"] == "unknown"
    assert "completed" not in failing.messages[0].info["time"]
    error = [p for p in failing.messages[0].parts if p["type"] == "error"]
    assert error[0]["statusCode"] == 400


# --- corrupt and odd input -------------------------------------------------------------


@pytest.fixture
def copied(agentuse_fixture: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(agentuse_fixture, target)
    return target


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "file is empty"),
    (b'{\n  "agent": {', "invalid JSON"),
    (b"\x00\xff garbage", "invalid JSON"),
    (b"[1, 2]", "expected a JSON object"),
])
def test_corrupt_session_json(copied: Path, content: bytes, reason: str) -> None:
    hello = _fixture_session(copied, "hello")
    (hello / "session.json").write_bytes(content)
    with pytest.raises(CorruptFileError, match=reason) as caught:
        load_session(hello)
    assert caught.value.path == hello / "session.json"
    scan = scan_sessions(copied)
    assert [p.path for p in scan.problems] == [hello / "session.json"]
    assert len(scan.sessions) == 4  # the others are still listed


def test_corrupt_part_names_the_part(copied: Path) -> None:
    tools = _fixture_session(copied, "tools")
    part = sorted(tools.glob("*/part/*.json"))[3]
    part.write_bytes(part.read_bytes()[:40])
    with pytest.raises(CorruptFileError) as caught:
        load_session(tools)
    assert caught.value.path == part


def test_missing_session_json_and_crash_leftovers(copied: Path) -> None:
    hello = _fixture_session(copied, "hello")
    (hello / "01M81B9K8PCFD1R9CH54MKR9KZ").mkdir()  # an exchange dir made just before a crash
    (hello / "01M81B9K8PCFD1R9CH54MKR9KH" / "part" / ".x.json.123.tmp").write_text("{")
    assert len(load_session(hello).messages) == 1
    (hello / "session.json").unlink()
    with pytest.raises(CorruptFileError, match="missing"):
        load_session(hello)
    assert "hello" not in [s.agent_name for s in scan_sessions(copied).sessions]


def test_symlinks_out_of_the_root_are_not_followed(tmp_path: Path) -> None:
    outside = new_session(tmp_path / "outside", "secret")
    root = tmp_path / "root"
    inside = new_session(root, "visible")
    os.symlink(outside.directory, root / f"{outside.directory.name}")
    os.symlink(tmp_path / "outside", root / "elsewhere")
    assert [s.id for s in scan_sessions(root).sessions] == [inside.id]


def test_scan_of_a_missing_root_is_empty(tmp_path: Path) -> None:
    scan = scan_sessions(tmp_path / "nope")
    assert scan.sessions == [] and scan.problems == []


def test_batched_writes_write_each_file_once_in_first_touched_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sessiontape.storage.file_writes as writer_module

    written: list[str] = []
    real_write = writer_module.atomic_write

    def counting_write(path: Path, data: bytes) -> None:
        written.append(path.name)
        real_write(path, data)

    monkeypatch.setattr(writer_module, "atomic_write", counting_write)
    writes = DocumentWrites(deferred=True)
    session = new_session(tmp_path, writes=writes)
    message = session.add_message("count")
    tool = message.add_part("tool", callID="c1", state={"status": "running"})
    tool.update(state={"status": "completed", "output": "3"})
    message.add_usage(Tokens(input=5, output=2), 0.5)
    message.complete(at=T0 + 9)
    assert written == [] and not (session.directory / "session.json").exists()

    writes.flush()
    assert written == ["session.json", "message.json", f"{tool.id}.json"]
    [loaded] = load_session(session.directory).messages
    assert loaded.info["time"]["completed"] == T0 + 9
    assert loaded.info["assistant"]["tokens"]["input"] == 5
    assert loaded.parts[0]["state"] == {"status": "completed", "output": "3"}
    writes.flush()
    assert len(written) == 3  # nothing pending: nothing rewritten


def test_a_failed_batched_file_does_not_stop_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sessiontape.storage.file_writes as writer_module

    real_write = writer_module.atomic_write

    def full_for_messages(path: Path, data: bytes) -> None:
        if path.name == "message.json":
            raise OSError(28, "No space left on device")
        real_write(path, data)

    monkeypatch.setattr(writer_module, "atomic_write", full_for_messages)
    writes = DocumentWrites(deferred=True)
    session = new_session(tmp_path, writes=writes)
    part = session.add_message("hi").add_part("text", text="hello")
    with pytest.raises(OSError, match="No space"):
        writes.flush()
    assert json.loads((session.directory / "session.json").read_bytes())["id"] == session.id
    assert json.loads(part.path.read_bytes())["text"] == "hello"  # written after the failure
    assert not (part.path.parent.parent / "message.json").exists()
