"""Damaged and hostile files for every reader: JSONL logs, AgentUse trees, symbolic links.

Each case gets a clear error or a documented recovery (docs/formats.md "Reading",
docs/reliability.md "Recovery from damage"); readers never rewrite anything
and never follow a symbolic link out of the tree; the CLI readers run as the
real executable and exit 0 with warnings naming the bad file.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from agents import Agent, function_tool
from harness import EXECUTABLE, cli_environ, run_many, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted import call, final, model, run_agent, tools_step, usage
from test_log_reader import READERS, text_line, texts

from sessiontape import Recorder
from sessiontape.storage.agentuse.reader import CorruptFileError, load_session, scan_sessions
from sessiontape.storage.agentuse.writer import AgentUseSession
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet import log_entries as le
from sessiontape.storage.skillet.log_reader import SessionLogReader, SessionLogTailer

SECRET = "SECRET-OUTSIDE-THE-ROOT"


# -- JSONL logs -------------------------------------------------------------------------

LONG = "y" * 5_000_000
HOSTILE_LOGS = [
    pytest.param(b"", [], [], id="empty-file"),
    pytest.param(b"\xef\xbb\xbf", [], [], id="only-a-bom"),
    pytest.param(b"\xef\xbb\xbf" + text_line("a").replace(b"\n", b"\r\n") + text_line("b"),
                 ["a", "b"], [], id="bom-and-crlf"),
    pytest.param(text_line("a") + b"\0\0\0\n" + text_line("b"), ["a", "b"], [2], id="nul-line"),
    pytest.param(text_line("a")[:-2] + b"\0}\n" + text_line("b"), ["b"], [1], id="nul-in-line"),
    pytest.param(text_line("a")[:25] + b"\n" + text_line("b"), ["b"], [1], id="half-line"),
    pytest.param(text_line(LONG) + b"{" * 3_000_000 + b"\n" + text_line("c"), [LONG, "c"], [2],
                 id="very-long-lines"),
    pytest.param(dumps_compact(le.step(le.text("\ud800 lone surrogate"))) + b"\n" + text_line("ok"),
                 ["\ud800 lone surrogate", "ok"], [], id="lone-surrogate-escape"),
    pytest.param(b'{"kind":"step","stepResult":{"type":"text","text":"x"},"n":NaN}\n'
                 + text_line("ok"), ["ok"], [1], id="nan-literal"),
    pytest.param(b"\r\n\r\n" + text_line("a") + b"\x1b[2J\n", ["a"], [4], id="blank-and-escape"),
]


@READERS
@pytest.mark.parametrize(("data", "expected", "problem_lines"), HOSTILE_LOGS)
def test_hostile_log_contents(tmp_path: Path, read: Callable[..., Any], data: bytes,
                              expected: list[str], problem_lines: list[int]) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(data)
    entries, problems = read(path)
    assert texts(entries) == expected
    assert [p.line for p in problems] == problem_lines
    assert path.read_bytes() == data  # a reader never changes the file


def _fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path, outside: Path) -> None:
    path.mkdir()


def _link_out(path: Path, outside: Path) -> None:
    path.symlink_to(outside)


def _dangling_link(path: Path, outside: Path) -> None:
    path.symlink_to(outside.with_name("nothing-here"))


NOT_A_LOG = [
    pytest.param(_directory, errno.EISDIR, id="directory"),
    pytest.param(_fifo, errno.EINVAL, id="fifo"),
    pytest.param(_link_out, errno.ELOOP, id="link-out-of-the-root"),
    pytest.param(_dangling_link, errno.ELOOP, id="dangling-link"),
]


@pytest.mark.parametrize(("make", "code"), NOT_A_LOG)
def test_a_log_path_that_is_not_a_regular_file(tmp_path: Path, make: Callable[..., None],
                                               code: int) -> None:
    """A clear OSError naming the path, at once (a FIFO does not block), from both readers;
    the file a link points to is never read."""
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(text_line(SECRET))
    path = tmp_path / "root" / "u" / "s.jsonl"
    path.parent.mkdir(parents=True)
    make(path, outside)
    with pytest.raises(OSError) as caught:
        SessionLogReader(path).entries()
    assert caught.value.errno == code and caught.value.filename == str(path)
    tailer = SessionLogTailer(path)
    for _ in range(2):  # and again on the next poll: the path is still not a log
        with pytest.raises(OSError) as again:
            tailer.poll()
        assert again.value.errno == code
    tailer.close()


def test_a_tailer_finishes_a_file_replaced_by_a_link(tmp_path: Path) -> None:
    """The rest of the old file is returned; the link is refused on the next poll."""
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(text_line(SECRET))
    path = tmp_path / "s.jsonl"
    path.write_bytes(text_line("a"))
    tailer = SessionLogTailer(path)
    assert texts(tailer.poll()) == ["a"]
    with open(path, "ab") as f:
        f.write(text_line("b"))
    path.unlink()
    path.symlink_to(outside)
    assert texts(tailer.poll()) == ["b"]
    with pytest.raises(OSError, match="symbolic link"):
        tailer.poll()
    tailer.close()


GOOD = [le.user_message("q?", "2026-01-01T00:00:00.000Z"), le.step(le.text("t")),
        le.final_result("a", model="openai/gpt-4.1")]
LINE = st.one_of(
    st.sampled_from([orjson.dumps(e) for e in GOOD]),  # whole valid lines
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),  # anything else
    st.sampled_from([b"", b"  ", b"\r", b"\xef\xbb\xbf", b"{", b'{"kind":1}', b"[]", b"\0"]),
)


def oracle(raw: bytes, first: bool) -> dict[str, Any] | bool | None:
    """What one line must give, by the standard library: the entry, None (blank) or
    False (a problem)."""
    if first and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    raw = raw.rstrip(b"\r")
    if not raw.strip():
        return None
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=lambda c: 1 / 0)
    except (ValueError, ZeroDivisionError, RecursionError):
        return False
    return data if isinstance(data, dict) and isinstance(data.get("kind"), str) else False


@settings(max_examples=200, deadline=None)
@given(st.lists(LINE, max_size=12), st.sampled_from([b"\n", b"\r\n"]), st.booleans(),
       st.lists(st.integers(1, 60), max_size=8))
def test_any_bytes_as_a_log(tmp_path_factory: pytest.TempPathFactory, lines: list[bytes],
                            end: bytes, bom: bool, cuts: list[int]) -> None:
    """Never an error; every whole valid line is returned, every other non-blank line is a
    problem; a tailer fed the file in arbitrary pieces returns the same."""
    data = (b"\xef\xbb\xbf" if bom else b"") + b"".join(line + end for line in lines)
    expected = [(n, o) for n, o in ((n, oracle(raw, n == 1)) for n, raw in
                                    enumerate(data.split(b"\n")[:-1], 1)) if o is not None]
    path = tmp_path_factory.mktemp("log") / "s.jsonl"
    path.write_bytes(data)
    reader = SessionLogReader(path)
    assert [(e.line, e.data) for e in reader.entries()] == [(n, o) for n, o in expected if o]
    assert [p.line for p in reader.problems] == [n for n, o in expected if o is False]
    reader.turns()
    path.write_bytes(b"")
    tailer = SessionLogTailer(path)
    got, position = [], 0
    for cut in [*cuts, len(data)]:
        with open(path, "ab") as f:
            f.write(data[position:position + cut])
        position += cut
        got.extend(tailer.poll())
    tailer.close()
    assert [(e.line, e.data) for e in got] == [(e.line, e.data) for e in reader.entries()]
    assert tailer.problems == reader.problems


# -- AgentUse files ---------------------------------------------------------------------


def build_tree(root: Path) -> dict[str, Path]:
    """A session with tools, one exchange of three parts and a subagent; and a second
    session beside it. The files, by role."""
    session = AgentUseSession.create(root, "Main", model="openai:gpt-4.1", project_root="/p",
                                     cwd="/p")
    session.write_tools([{"name": "add"}])
    message = session.add_message("task")
    parts = [message.add_part("step-start"), message.add_part("text", text="hi"),
             message.add_part("step-finish", cost=0)]
    child = session.create_subagent("Helper", model="openai:gpt-4.1")
    child.add_message("sub task").add_part("text", text="sub")
    AgentUseSession.create(root, "Other", model="openai:gpt-4.1", project_root="/p", cwd="/p")
    return {"session": session.directory / "session.json",
            "tools": session.directory / "tools.json",
            "message": message.directory / "message.json",
            "part": parts[1].path,
            "subagent": child.directory / "session.json"}


def _empty(path: Path, outside: Path) -> None:
    path.write_bytes(b"")


def _blank(path: Path, outside: Path) -> None:
    path.write_bytes(b" \n\t")


def _truncated(path: Path, outside: Path) -> None:
    path.write_bytes(path.read_bytes()[:20])


def _not_an_object(path: Path, outside: Path) -> None:
    path.write_bytes(b"[1, 2]")


def _nul_bytes(path: Path, outside: Path) -> None:
    path.write_bytes(b"\0" * 16)


def _missing(path: Path, outside: Path) -> None:
    path.unlink()


def _replace_by(make: Callable[[Path, Path], None]) -> Callable[[Path, Path], None]:
    def damage(path: Path, outside: Path) -> None:
        path.unlink()
        make(path, outside)
    return damage


DAMAGE = {"missing": _missing, "empty": _empty, "blank": _blank, "truncated": _truncated,
          "not-an-object": _not_an_object, "nul-bytes": _nul_bytes,
          "directory": _replace_by(_directory), "fifo": _replace_by(_fifo),
          "link-out": _replace_by(_link_out)}
REASONS = {"missing": "missing", "empty": "empty", "blank": "empty", "truncated": "invalid JSON",
           "not-an-object": "expected a JSON object", "nul-bytes": "invalid JSON",
           "directory": "not a regular file", "fifo": "not a regular file",
           "link-out": "symbolic link"}
# What a missing file means: an error, or (tools.json, a part) simply fewer things.
OPTIONAL = {"tools", "part"}


@pytest.mark.parametrize("role", ["session", "tools", "message", "part", "subagent"])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_agentuse_file(tmp_path: Path, role: str, damage: str) -> None:
    root = tmp_path / "root"
    files = build_tree(root)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"id": SECRET, "tools": [SECRET], "text": SECRET}))
    target = files[role]
    DAMAGE[damage](target, outside)
    before = snapshot(root)
    directory = files["session"].parent
    if damage == "missing" and role in OPTIONAL:
        loaded = load_session(directory)
        assert loaded.tools == [] if role == "tools" else len(loaded.messages[0].parts) == 2
    else:
        with pytest.raises(CorruptFileError, match=REASONS[damage]) as caught:
            load_session(directory)
        assert caught.value.path == target
    scan = scan_sessions(root)
    bad_summary = role in ("session", "subagent") and damage != "missing"
    assert [p.path for p in scan.problems] == ([target] if bad_summary else [])
    assert len(scan.sessions) == 3 - (role in ("session", "subagent"))
    assert SECRET not in repr(scan)
    assert snapshot(root) == before  # nothing rewritten, nothing removed


WRONG_TYPES = {
    "session": {"id": 7, "version": ["x"], "time": "yesterday", "agent": "A", "status": 3},
    "message": {"id": None, "time": "yesterday", "assistant": [], "user": 5},
    "part": {"id": 12, "type": 5, "time": "x", "state": "running"},
}


def test_wrong_types_inside_the_files_are_loaded_as_they_are(tmp_path: Path) -> None:
    """Fields of the wrong type are kept as they are (readers of a field check its type);
    ordering treats a bad time as 0. ``tools`` that is not a list is an error."""
    root = tmp_path / "root"
    files = build_tree(root)
    for role, fields in WRONG_TYPES.items():
        files[role].write_bytes(orjson.dumps({**orjson.loads(files[role].read_bytes()),
                                              **fields}))
    loaded = load_session(files["session"].parent)
    assert loaded.info["time"] == "yesterday" and loaded.messages[0].info["assistant"] == []
    assert {p["type"] for p in loaded.messages[0].parts} == {"step-start", 5, "step-finish"}
    assert [s.id for s in scan_sessions(root).sessions if s.info["id"] == 7] == ["7"]
    files["tools"].write_bytes(b'{"tools": "add"}')
    with pytest.raises(CorruptFileError, match="not a list") as caught:
        load_session(files["session"].parent)
    assert caught.value.path == files["tools"]


@pytest.mark.parametrize("leftover", [None, ".session.json.123.1f.tmp",
                                      f"{'8' * 26}/part/.x.json.1.2.tmp"],
                         ids=["empty", "temp-file", "empty-exchange"])
def test_a_subagent_directory_left_by_a_crash_is_ignored(tmp_path: Path,
                                                         leftover: str | None) -> None:
    """Killed between ``mkdir`` and the first write of a subagent: nothing to lose."""
    root = tmp_path / "root"
    files = build_tree(root)
    crashed = files["subagent"].parent.with_name(f"{'7' * 26}-crashed")
    crashed.mkdir()
    if leftover:
        (crashed / leftover).parent.mkdir(parents=True, exist_ok=True)
        (crashed / leftover).write_bytes(b'{"half')
    loaded = load_session(files["session"].parent)
    assert [s.info["agent"]["name"] for s in loaded.subagents] == ["Helper"]
    assert scan_sessions(root).problems == []
    (crashed / "tools.json").write_bytes(b"{}")  # something to lose: no longer ignored
    with pytest.raises(CorruptFileError, match="missing"):
        load_session(files["session"].parent)


LINKED_DIRS = {  # which directory is replaced by a link to a copy outside, and what remains
    "exchange": lambda s: len(s.messages) == 0,
    "part": lambda s: s.messages[0].parts == [],
    "subagent": lambda s: s.subagents == [],
    "subagent-session": lambda s: s.subagents == [],
}


@pytest.mark.parametrize("which", list(LINKED_DIRS))
def test_linked_directories_are_not_entered(tmp_path: Path, which: str) -> None:
    root = tmp_path / "root"
    files = build_tree(root)
    directory = {"exchange": files["message"].parent, "part": files["part"].parent,
                 "subagent": files["subagent"].parent.parent,
                 "subagent-session": files["subagent"].parent}[which]
    outside = tmp_path / "outside" / directory.name
    shutil.copytree(directory, outside)
    for path in outside.rglob("*.json"):  # what a reader following the link would see
        path.write_text(json.dumps({**json.loads(path.read_text()), "text": SECRET}))
    shutil.rmtree(directory)
    directory.symlink_to(outside, target_is_directory=True)
    loaded = load_session(files["session"].parent)
    assert LINKED_DIRS[which](loaded)
    assert SECRET not in repr(loaded) and SECRET not in repr(scan_sessions(root))
    link = root / f"{'0' * 26}-linked"
    link.symlink_to(files["session"].parent, target_is_directory=True)
    with pytest.raises(CorruptFileError, match="symbolic link"):
        load_session(link)


def test_a_deep_folder_tree_is_scanned_without_recursion_limits(tmp_path: Path) -> None:
    """1 500 nested folders (beyond Python's recursion limit) with a session at the bottom;
    removed again here, since pytest's own clean-up (``shutil.rmtree``) recurses."""
    session = AgentUseSession.create(tmp_path / "root", "Main", model="m", project_root="/p",
                                     cwd="/p")
    chain = [str(tmp_path / "root" / "d")]
    for _ in range(1_499):
        chain.append(chain[-1] + "/d")
    for folder in chain:
        os.mkdir(folder)
    try:
        found = AgentUseSession.create(Path(chain[-1]), "Deep", model="m", project_root="/p",
                                       cwd="/p")
        ids = {s.id for s in scan_sessions(tmp_path / "root").sessions}
        assert ids == {session.id, found.id}
    finally:
        shutil.rmtree(chain[-1])
        for folder in reversed(chain[:-1]):
            os.rmdir(folder)


# -- the CLI readers, as the real executable --------------------------------------------


@function_tool
def square(n: int) -> int:
    """Square a number."""
    return n * n


CONVERSATIONS = ["intact", "bad-session", "bad-message", "bad-part", "wrong-types",
                 "linked-out", "hostile-log"]


def record_world() -> dict[str, Recorder]:
    """One recorded turn (a tool and a subagent) per conversation name."""

    async def main() -> dict[str, Recorder]:
        recorders = {}
        for name in CONVERSATIONS:
            rec = Recorder("ann@example.com", name)
            helper = Agent(name="Helper", model=model(final("helped", usage(3, 1))))
            agent = Agent(name="Main", tools=[square, helper.as_tool("helper", "Ask.")],
                          model=model(tools_step(call("square", {"n": 3}),
                                                 call("helper", {"input": "q"}),
                                                 u=usage(10, 2)),
                                      final(f"answer {name}", usage(20, 4))))
            await run_agent(rec, agent, f"prompt {name}", streamed=False)
            await rec.flush()
            await rec.store.close()
            assert rec.errors == 0
            recorders[name] = rec
        return recorders

    return asyncio.run(main())


def damage_world(recorders: dict[str, Recorder], outside: Path) -> tuple[dict[str, Path], int]:
    """Damage each conversation its own way: the paths that must be named in warnings, and
    the number of the hostile log's first bad line."""
    dirs = {name: rec.session_dir for name, rec in recorders.items()}
    assert all(d is not None for d in dirs.values())
    bad: dict[str, Path] = {}
    bad["bad-session"] = dirs["bad-session"] / "session.json"  # type: ignore[operator]
    bad["bad-session"].write_bytes(b'{"agent": {')
    bad["bad-message"] = next(dirs["bad-message"].glob("*/message.json"))  # type: ignore[union-attr]
    bad["bad-message"].write_bytes(b"[1, 2]")
    bad["bad-part"] = next(dirs["bad-part"].glob("*/part/*.json"))  # type: ignore[union-attr]
    bad["bad-part"].write_bytes(b"")
    message = next(dirs["wrong-types"].glob("*/message.json"))  # type: ignore[union-attr]
    message.write_bytes(orjson.dumps({**orjson.loads(message.read_bytes()),
                                      "time": "yesterday", "assistant": []}))
    linked = dirs["linked-out"]
    assert linked is not None
    copy = outside / linked.name
    shutil.copytree(linked, copy)
    for path in copy.rglob("message.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "note": SECRET}))
    shutil.rmtree(linked)
    linked.symlink_to(copy, target_is_directory=True)
    bad["linked-out"] = linked
    log = recorders["hostile-log"].log_path
    first_bad = log.read_bytes().count(b"\n") + 1
    long_turn = (orjson.dumps(le.user_message("y" * 1_000_000)) + b"\r\n"
                 + orjson.dumps(le.final_result("answer hostile-log 2")) + b"\r\n")
    with open(log, "ab") as f:
        f.write(b"garbage\n\0\0\0\n" + long_turn)
    bad["hostile-log"] = log
    users = log.parent.parent
    secret_log = outside / "secret.jsonl"
    secret_log.write_bytes(orjson.dumps(le.user_message(SECRET)) + b"\n")
    (log.parent / "linked.jsonl").symlink_to(secret_log)
    (users / "linked_user").symlink_to(outside, target_is_directory=True)
    (log.parent / "folder.jsonl").mkdir()
    (log.parent / "empty.jsonl").write_bytes(b"")
    return bad, first_bad


def test_cli_readers_on_a_damaged_world(isolated_env: Path) -> None:
    """``sessions list``, ``sessions show`` and ``log stream``: exit 0, every intact thing
    shown, each damaged file named in a warning, nothing from outside the roots printed,
    nothing changed on disk."""
    recorders = record_world()
    outside = isolated_env / "outside"
    outside.mkdir()
    bad, first_bad = damage_world(recorders, outside)
    log = bad["hostile-log"]
    roots = [SkilletPaths.resolve().state, Path(os.environ["XDG_DATA_HOME"])]
    before = [snapshot(r) for r in roots]
    commands = {"list": [EXECUTABLE, "sessions", "list", "--json"],
                "stream": [EXECUTABLE, "log", "stream", "--no-follow", "--json"]}
    for name in CONVERSATIONS:
        commands[name] = [EXECUTABLE, "sessions", "show", name, "--json"]
    results = run_many(commands, cli_environ())
    for key, done in results.items():
        assert done.returncode == 0, (key, done.stderr)
        assert SECRET not in done.stdout, key
    assert [before == snapshot(r) for r, before in zip(roots, before, strict=True)] == [True, True]

    listed = {s["session_name"]: s for s in json.loads(results["list"].stdout)}
    assert set(CONVERSATIONS) <= set(listed)
    assert listed["intact"]["problems"] == [] and listed["intact"]["tokens"] == 40
    assert listed["wrong-types"]["tokens"] == 4  # the subagent's; the bad message counts 0
    for name, path in bad.items():
        # Every one has its usage: a tree that cannot be read gives way to the log's
        # model_call lines (the one rule of storage/catalog/timeline.py), and parts are not read
        # for totals; each damaged file is named.
        assert listed[name]["tokens"] == listed["intact"]["tokens"], name
        if name not in ("bad-part", "hostile-log"):
            assert any(str(path) in p for p in listed[name]["problems"]), name
            assert str(path) in results["list"].stderr
    assert listed["hostile-log"]["turns"] == 2
    assert [p.startswith(f"{log}:{n}: ") for p, n in zip(
        listed["hostile-log"]["problems"], (first_bad, first_bad + 1), strict=True)] == [True] * 2
    logs = {s["log_path"]: s for s in listed.values()}
    linked = str(log.parent / "linked.jsonl")
    assert "symbolic link" in " ".join(logs[linked]["problems"])
    assert logs[str(log.parent / "empty.jsonl")]["turns"] == 0

    texts_of = {name: [t["text"] for t in json.loads(results[name].stdout)["turns"]]
                for name in CONVERSATIONS}
    assert texts_of == {name: [f"answer {name}"] for name in CONVERSATIONS} | {
        "hostile-log": ["answer hostile-log", "answer hostile-log 2"]}

    streamed = [json.loads(line) for line in results["stream"].stdout.splitlines()]
    finals = [e["finalResult"]["text"] for e in streamed if e["kind"] == "final_result"]
    assert sorted(finals) == sorted([*(f"answer {name}" for name in CONVERSATIONS),
                                     "answer hostile-log 2"])
    stderr = results["stream"].stderr
    assert f"{log}:{first_bad}:" in stderr and f"{log}:{first_bad + 1}:" in stderr
    assert f"cannot read {linked}" in stderr and "symbolic link" in stderr


# -- writers never write through a link -------------------------------------------------


@pytest.mark.parametrize("link", ["file", "user-dir"])
def test_the_log_writer_does_not_write_through_a_link(tmp_path: Path, link: str) -> None:
    from sessiontape.storage.names import UnsafePathError
    from sessiontape.storage.skillet.replay_log import ReplayLog

    root, outside = tmp_path / "logs", tmp_path / "outside"
    outside.mkdir()
    (outside / "s.jsonl").write_bytes(b"precious\n")
    if link == "file":
        (root / "ann").mkdir(parents=True)
        (root / "ann" / "s.jsonl").symlink_to(outside / "s.jsonl")
    else:
        root.mkdir()
        (root / "ann").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError), ReplayLog("ann", "s", root) as log:
        log.append({"kind": "user_message", "userInput": "x"})
    assert (outside / "s.jsonl").read_bytes() == b"precious\n"


def test_the_agentuse_writer_does_not_write_through_a_linked_session_dir(
        tmp_path: Path) -> None:
    rec = Recorder("ann", "linked")

    async def turn(text: str) -> None:
        await run_agent(rec, Agent(name="A", model=model(final(text))), text, streamed=False)
        await rec.flush()

    asyncio.run(turn("one"))
    directory = rec.session_dir
    assert directory is not None
    outside = tmp_path / "outside" / directory.name
    outside.parent.mkdir()
    directory.rename(outside)
    directory.symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in outside.iterdir())
    asyncio.run(turn("two"))  # the run goes on; the AgentUse error is reported
    assert rec.errors >= 1
    assert sorted(p.name for p in outside.iterdir()) == before


def test_a_linked_user_log_dir_leaves_the_agentuse_tree_recording(tmp_path: Path) -> None:
    """The log cannot be set up (its user directory is a link out): reported, and the
    AgentUse tree and the store still record the run."""
    logs_root = SkilletPaths.resolve().logs_root
    logs_root.mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (logs_root / "ann").symlink_to(tmp_path / "outside", target_is_directory=True)
    rec = Recorder("ann", "logless")

    async def main() -> None:
        await run_agent(rec, Agent(name="A", model=model(final("ok"))), "q", streamed=False)
        await rec.flush()

    asyncio.run(main())
    assert rec.errors == 1 and list((tmp_path / "outside").iterdir()) == []
    assert rec.session_dir is not None
    assert [m.info["user"]["prompt"]["task"] for m in load_session(rec.session_dir).messages] \
        == ["q"]


# -- the CLI readers on awkward recordings ------------------------------------------------


def _record(user: str, session: str, *prompts: str) -> Recorder:
    rec = Recorder(user, session)

    async def main() -> None:
        for prompt in prompts:
            await run_agent(rec, Agent(name="A", model=model(final(f"answer to {prompt}"))),
                            prompt, streamed=False)
        await rec.flush()

    asyncio.run(main())
    return rec


def _cli(*args: str) -> Any:
    import subprocess

    return subprocess.run([str(EXECUTABLE), *args], capture_output=True, text=True, timeout=60)


def test_show_warns_about_a_corrupt_part() -> None:
    rec = _record("ann", "partly", "q")
    assert rec.session_dir is not None
    part = next(rec.session_dir.glob("*/part/*.json"))
    part.write_bytes(b"")
    done = _cli("sessions", "show", "partly")
    assert done.returncode == 0 and str(part) in done.stderr
    assert "user> q" in done.stdout


def test_show_with_a_message_whose_time_is_not_an_object() -> None:
    from sessiontape.storage.catalog.sessions import find_session, show_session

    rec = _record("ann", "times", "one", "two")
    assert rec.session_dir is not None
    first, second = sorted(rec.session_dir.glob("*/message.json"))
    second.parent.rename(second.parent.with_name("not-an-exchange"))
    first.write_text(json.dumps({**json.loads(first.read_text()), "time": "yesterday"}))
    view = show_session(find_session("times"))
    assert [t.turn.text for t in view.turns] == ["answer to one", "answer to two"]


def test_the_cli_never_prints_terminal_escapes_from_recorded_text() -> None:
    """Names, prompts and answers may hold escape sequences (clear screen, set title):
    the text output shows them escaped; --json keeps them exact."""
    user, session, prompt = "ann\x1b]0;pwned\x07", "clear\x1b[2J", "hi\x1b[31m red"
    _record(user, session, prompt)
    listed = _cli("sessions", "list")
    shown = _cli("sessions", "show", session)
    streamed = _cli("log", "stream", "--no-follow", "--steps")
    for done in (listed, shown, streamed):
        assert done.returncode == 0, done.stderr
        assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout
    assert "clear\\x1b[2J" in listed.stdout and "hi\\x1b[31m red" in shown.stdout
    assert "hi\\x1b[31m red" in streamed.stdout
    as_json = _cli("log", "stream", "--no-follow", "--json")
    assert json.loads(as_json.stdout.splitlines()[0])["userInput"] == prompt
