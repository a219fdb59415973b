"""Sanitizers, safe joins and monotonic ULIDs."""

from __future__ import annotations

import errno
import hashlib
import itertools
import multiprocessing
import os
import re
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontape.storage.ids import is_ulid, new_ulid, ulid_ms
from sessiontape.storage.names import (
    MAX_NAME,
    NAME_MAX,
    UnsafePathError,
    default_session_name,
    old_log_name,
    safe_join,
    sanitize_agent_name,
    sanitize_log_name,
)

HOSTILE = ["", " ", ".", "..", "../../x", "/", "/etc/passwd", "a/b", "a\0b", "\0", "x" * 10_000,
           "🎉🎉", "\u202eevil\u202c", "שלום", "Ω≈ç√", "CON", "-", "_", "--__--", "\t\n",
           "e\u0301", "\u00e9", "..\\..\\win", "\ud800"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("hello", "hello"),
        ("Tool User", "tool-user"),
        ("helpers/helper", "helpers-helper"),
        ("my_agent", "my_agent"),
        ("  --Weird!!Name--  ", "weird-name"),
        ("a---b", "a-b"),
        ("", "default"),
        ("   ", "default"),
        ("🎉", "default"),
        ("...", "default"),
        ("_", "_"),
        ("Ünïcode", "n-code"),
    ],
)
def test_agent_name_table(raw: str, expected: str) -> None:
    assert sanitize_agent_name(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("john@example.com", "john_example_com"),
        ("fixture_session_1", "fixture_session_1"),
        ("  spaced out  ", "spaced_out"),
        ("a@@b..c", "a_b_c"),
        ("__x__", "x"),
        ("Keep-Case_1", "Keep-Case_1"),
        ("session_2026-11-22T18:30:00.000Z_ab12", "session_2026-11-22T18_30_00_000Z_ab12"),
    ],
)
def test_log_name_table(raw: str, expected: str) -> None:
    assert sanitize_log_name(raw) == expected


@pytest.mark.parametrize("raw", ["", "   ", "@@@", "🎉", "..", "/"])
def test_log_name_never_empty_and_distinct_per_raw(raw: str) -> None:
    name = sanitize_log_name(raw)
    assert re.fullmatch(r"_[0-9a-f]{12}", name)
    assert name != sanitize_log_name(raw + "!")


def test_long_names_are_cut_with_a_hash() -> None:
    a, b = "x" * 10_000, "x" * 9_999 + "y"
    for sanitize in (sanitize_agent_name, sanitize_log_name):
        assert len(sanitize(a)) <= MAX_NAME + 13
        assert sanitize(a) != sanitize(b)


def test_a_log_name_is_cut_only_where_skilled_crew_could_not_write(tmp_path: Path) -> None:
    """Issue 23, item 9. skilled_crew 1.0.11 names a log
    ``{logs}/{sanitizeForPath(user)}/{sanitizeForPath(session)}.jsonl`` and never cuts it
    (SessionLogWriter.filePathFor, packages/_skillet_agent/src/session/session_log_writer.ts;
    SessionLogTypes.sanitizeForPath, session_log_types.ts): its ``mkdir`` and ``appendFile``
    fail where a name is longer than the file system's 255 bytes. Ours is the same name up
    to there; beyond, where skilled_crew cannot write at all, it is cut and hashed."""
    assert NAME_MAX == os.pathconf(tmp_path, "PC_NAME_MAX") == 255
    fits, over = "a" * (255 - len(".jsonl")), "a" * (256 - len(".jsonl"))
    assert sanitize_log_name(f" {fits}!", ".jsonl") == fits
    (tmp_path / f"{fits}.jsonl").touch()
    with pytest.raises(OSError) as too_long:
        (tmp_path / f"{over}.jsonl").touch()
    assert too_long.value.errno == errno.ENAMETOOLONG
    digest = hashlib.sha256(over.encode()).hexdigest()[:12]
    assert sanitize_log_name(over, ".jsonl") == f"{over[:MAX_NAME]}_{digest}"
    user, over_user = "u" * 255, "u" * 256  # a user directory: no suffix
    assert sanitize_log_name(user) == user
    (tmp_path / user).mkdir()
    digest = hashlib.sha256(over_user.encode()).hexdigest()[:12]
    assert sanitize_log_name(over_user) == f"{user[:MAX_NAME]}_{digest}"


@pytest.mark.parametrize("length", [121, 200, 249, 300])
def test_old_log_names_are_cut_over_120_characters(length: int) -> None:
    """sessiontape 0.2 and 0.3 cut every log name over 120 characters (the rule their logs
    are still found by)."""
    raw = "t" * length
    digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
    assert old_log_name(raw) == f"{raw[:MAX_NAME]}_{digest}"
    assert old_log_name(raw[:MAX_NAME]) == sanitize_log_name(raw[:MAX_NAME]) == raw[:MAX_NAME]
    assert (sanitize_log_name(raw, ".jsonl") == old_log_name(raw)) == (length > 249)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_no_input_makes_an_unsafe_segment(raw: str) -> None:
    for sanitize in (sanitize_agent_name, sanitize_log_name):
        segment = sanitize(raw)
        assert segment not in ("", ".", "..")
        assert "/" not in segment and "\0" not in segment
        assert len(segment.encode()) <= NAME_MAX
        assert re.fullmatch(r"[A-Za-z0-9_-]+", segment)
    assert len(sanitize_log_name(raw, ".jsonl").encode()) <= NAME_MAX - len(".jsonl")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=100))
def test_sanitized_segments_stay_under_the_root(tmp_path_factory: pytest.TempPathFactory,
                                                raw: str) -> None:
    root = tmp_path_factory.getbasetemp() / "root"
    path = safe_join(root, sanitize_log_name(raw), sanitize_agent_name(raw) + ".jsonl")
    assert os.path.abspath(path).startswith(str(root) + os.sep)


@pytest.mark.parametrize("segment", ["", ".", "..", "a/b", "/abs", "x\0y", "../up"])
def test_safe_join_refuses(tmp_path: Path, segment: str) -> None:
    with pytest.raises(UnsafePathError):
        safe_join(tmp_path, segment)


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_names_make_real_files_inside_the_root(tmp_path: Path, raw: str) -> None:
    path = safe_join(tmp_path, sanitize_log_name(raw), f"{sanitize_agent_name(raw)}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    assert path.resolve().is_relative_to(tmp_path.resolve())


@pytest.mark.parametrize(("raw", "expected"), [
    ("caf\u00e9", "caf"),                                # NFC: the accent is one char
    (unicodedata.normalize("NFD", "caf\u00e9"), "cafe"),  # NFD: e + combining accent
])
def test_unicode_normalisation_twins_sanitize_by_code_point(raw: str, expected: str) -> None:
    assert sanitize_log_name(raw) == expected


def test_default_session_name_shape() -> None:
    name = default_session_name()
    assert re.fullmatch(r"session_\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ_[0-9a-f]{8}", name)
    assert sanitize_log_name(name) == name
    assert name != default_session_name()


def test_ulids_strictly_increase_and_differ_within_12_characters_in_a_burst() -> None:
    """AgentUse shows and finds a session by its id's first 12 characters
    (src/cli/sessions.ts:733, 844, 1141-1156): ids made in the same millisecond must
    differ there, and still sort in the order they were made."""
    ids = [new_ulid() for _ in range(10_000)]
    assert all(is_ulid(i) for i in ids)
    assert all(a < b for a, b in itertools.pairwise(ids))
    assert len({i[:12] for i in ids}) == len(ids)
    assert ulid_ms(ids[0]) <= ulid_ms(ids[-1])
    same_ms = sum(ulid_ms(a) == ulid_ms(b) for a, b in itertools.pairwise(ids))
    assert same_ms > 100  # bursts happened


def test_ids_beyond_what_a_millisecond_holds_move_on_to_the_next(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that stands still: 10 bits give at most 1024 ids a millisecond, then the ids
    go on in the next millisecond, in order and distinct within 12 characters."""
    still = time.time_ns()
    monkeypatch.setattr(time, "time_ns", lambda: still)
    made = [new_ulid() for _ in range(3000)]
    assert all(a < b for a, b in itertools.pairwise(made))
    assert len({i[:12] for i in made}) == len(made)
    spans = [ulid_ms(i) - still // 1_000_000 for i in made]  # each millisecond: 513 to 1024
    assert spans[0] == 0 and spans == sorted(spans) and 2 <= spans[-1] <= 5


def _child_ids(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put([new_ulid() for _ in range(1000)])


def test_forked_children_do_not_repeat_the_parents_sequence() -> None:
    new_ulid()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_child_ids, args=(queue,)) for _ in range(2)]
    for proc in procs:
        proc.start()
    batches = [queue.get(timeout=30) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    mine = [new_ulid() for _ in range(1000)]
    every = batches[0] + batches[1] + mine
    assert len(set(every)) == len(every)


@pytest.mark.parametrize("text", ["", "01ARZ3NDEKTSV4RRFFQ69G5FA", "01ARZ3NDEKTSV4RRFFQ69G5FAVX",
                                  "01arz3ndektsv4rrffq69g5fav", "81ARZ3NDEKTSV4RRFFQ69G5FAV",
                                  "01ARZ3NDEKTSV4RRFFQ69G5FAU"])
def test_is_ulid_rejects(text: str) -> None:
    assert not is_ulid(text)
