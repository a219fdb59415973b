"""JSON bytes as JSON.stringify writes them, checked against files AgentUse wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiontape.storage.json_style import CIRCULAR, dumps_compact, dumps_pretty


@pytest.mark.parametrize(
    ("value", "pretty", "compact"),
    [
        ({"cost": 0.0}, '{\n  "cost": 0\n}', '{"cost":0}'),
        ({"a": [], "b": {}}, '{\n  "a": [],\n  "b": {}\n}', '{"a":[],"b":{}}'),
        ({"t": "héllo → 世界 🎉"}, '{\n  "t": "héllo → 世界 🎉"\n}', '{"t":"héllo → 世界 🎉"}'),
        ({"x": 1.5, "y": -0.0, "z": 2e-7}, None, '{"x":1.5,"y":0,"z":2e-7}'),
        ({"n": float("nan"), "i": float("inf")}, None, '{"n":null,"i":null}'),
        ({"nested": [{"k": [1.0, 2.25]}]}, None, '{"nested":[{"k":[1,2.25]}]}'),
        ({"q": 'say "hi"\n\ttab'}, None, '{"q":"say \\"hi\\"\\n\\ttab"}'),
    ],
)
def test_js_rules(value: object, pretty: str | None, compact: str) -> None:
    if pretty is not None:
        assert dumps_pretty(value).decode() == pretty
    assert dumps_compact(value).decode() == compact


def test_pretty_has_no_trailing_newline() -> None:
    assert not dumps_pretty({"a": 1}).endswith(b"\n")


def test_cycles_are_cut_not_fatal() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    assert json.loads(dumps_compact({"l": loop})) == {"l": [1, CIRCULAR]}


def test_odd_values_still_encode() -> None:
    value = {"big": 2**70, "obj": object(), "b": b"\xff", "s": "\ud800"}
    encoded = json.loads(dumps_compact(value))
    assert encoded["big"] == 2**70
    assert encoded["obj"].startswith("<object object")
    assert encoded["b"] == "\ufffd"
    assert encoded["s"] == "\ud800"  # a lone surrogate is escaped, as JSON.stringify does


def test_every_agentuse_fixture_file_round_trips_byte_for_byte(agentuse_fixture: Path) -> None:
    files = sorted(agentuse_fixture.rglob("*.json"))
    assert len(files) > 50
    for path in files:
        raw = path.read_bytes()
        assert dumps_pretty(json.loads(raw)) == raw, path


def test_every_skillet_fixture_line_round_trips_byte_for_byte(skillet_fixture: Path) -> None:
    lines = [line for path in sorted(skillet_fixture.rglob("*.jsonl"))
             for line in path.read_bytes().splitlines()]
    assert len(lines) > 20
    for line in lines:
        assert dumps_compact(json.loads(line)) == line
