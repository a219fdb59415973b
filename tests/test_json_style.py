"""JSON bytes as JSON.stringify writes them, checked against files AgentUse wrote and,
for numbers, against what Node's own JSON.stringify prints."""

from __future__ import annotations

import json
import math
import random
import secrets
import shutil
import struct
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import orjson
import pytest
from harness import as_doubles
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontape.storage.json_style import (
    CIRCULAR,
    _dumps_converted,
    dumps_compact,
    dumps_pretty,
    js_values,
    loads,
    value_text,
)


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


# --- Numbers as JSON.stringify prints them, checked against a real Node ----------------------
#
# One Node process serves the whole module: each request is one line, a JSON array of values
# in a tagged form that carries every float as the 8 bytes of its IEEE double (so Node holds the
# very same double), and each answer is one line, ``[JSON.stringify(v), JSON.stringify(v, null,
# 2)]`` for every value. Tests that use it compare both of our encoders with those bytes.

NODE_STRINGIFY = r"""
const build = (x) => {
  if ("f" in x) return Buffer.from(x.f, "hex").readDoubleBE(0);
  if ("s" in x) return x.s;
  if ("v" in x) return x.v;
  if ("l" in x) return x.l.map(build);
  const object = {};
  for (const [key, value] of x.d) object[String(build(key))] = build(value);
  return object;
};
require("readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const answers = JSON.parse(line).map((item) => {
    const value = build(item);
    return [JSON.stringify(value), JSON.stringify(value, null, 2)];
  });
  process.stdout.write(JSON.stringify(answers) + "\n");
});
"""


def tagged(value: object) -> object:
    """``value`` in the form NODE_STRINGIFY builds back: floats as their 8 big-endian bytes."""
    if isinstance(value, float):
        return {"f": struct.pack(">d", value).hex()}
    if isinstance(value, str):
        return {"s": value}
    if isinstance(value, (list, tuple)):
        return {"l": [tagged(item) for item in value]}
    if isinstance(value, dict):
        return {"d": [[tagged(key), tagged(item)] for key, item in value.items()]}
    assert value is None or (isinstance(value, int) and abs(value) <= 2**53), value
    return {"v": value}


class Node:
    """A ``node -e`` process answering with JSON.stringify's bytes for a batch of values."""

    def __init__(self) -> None:
        node = shutil.which("node")
        assert node, "these tests need Node (node) on PATH"
        self.process = subprocess.Popen([node, "-e", NODE_STRINGIFY], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def stringify(self, values: Sequence[object]) -> list[tuple[bytes, bytes]]:
        """``(JSON.stringify(v), JSON.stringify(v, null, 2))`` as bytes for each value."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps([tagged(value) for value in values]) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"node exited with {self.process.wait()}"
        return [(compact.encode(), pretty.encode()) for compact, pretty in json.loads(line)]

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        assert self.process.wait() == 0


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    process = Node()
    yield process
    process.close()


def mismatches(node: Node, values: Sequence[object]) -> list[str]:
    """Every value whose bytes from dumps_compact or dumps_pretty differ from Node's."""
    found = []
    for value, (compact, pretty) in zip(values, node.stringify(values), strict=True):
        ours = (dumps_compact(value), dumps_pretty(value))
        if ours != (compact, pretty):
            found.append(f"{value!r}: ours {ours!r}, JSON.stringify {(compact, pretty)!r}")
    return found


def in_shapes(number: float) -> list[object]:
    """``number`` as a value, in a list, in nested dicts and as a dict key (JSON.stringify
    writes a numeric key as ``String(key)``)."""
    return [number, [number, -number], {"cost": number, "deep": {"list": [1, number, "x"]}},
            {number: "key"}, {"k": {number: [number]}}]


def read_back(number: float) -> object:
    """What reading ``number`` back must give: the same double (NaN and infinities: null)."""
    return number if math.isfinite(number) else None


FLOATS = [
    9.600000000000001e-06, 5e-05, 1.5e300, 1e21, 1e20, 123456789012345680000.0, 1e-7, 1e-6,
    0.1, 0.1 + 0.2, -0.0, 0.0, 5e-324, 1.7976931348623157e308, -1.7976931348623157e308, 2.0,
    -2.5, 1e-5, 1e-4, 1.5e-10, 2.2250738585072014e-308, 1e22, 1e-300, 1e16, 1e15, 4.35,
    0.40049999999999997, 1.2345678901234567, 12345.678901234567, 0.00012345678901234567,
    math.nextafter(1e21, 0), math.nextafter(1e-6, 0), math.nextafter(1e-7, 1), 2.0**53,
    2.0**53 + 2, -(2.0**60), 2.0**63, 2.0**64, 2.0**64 * 3, 2.0**70, 3e-7,
    -9.600000000000001e-06, 0.5, 100.0, math.inf, -math.inf, math.nan,
]


@pytest.fixture(scope="module")
def table_answers(node: Node) -> dict[str, list[tuple[bytes, bytes]]]:
    """Node's bytes for every shape of every float in FLOATS, in one request."""
    values = [shape for number in FLOATS for shape in in_shapes(number)]
    answers = iter(node.stringify(values))
    return {repr(number): [next(answers) for _ in in_shapes(number)] for number in FLOATS}


@pytest.mark.parametrize("number", FLOATS, ids=repr)
def test_floats_are_written_as_json_stringify_writes_them(
        number: float, table_answers: dict[str, list[tuple[bytes, bytes]]]) -> None:
    """Each shape of each float: dumps_compact is JSON.stringify(v), dumps_pretty
    JSON.stringify(v, null, 2), byte for byte, as printed by Node itself."""
    for shape, (compact, pretty) in zip(in_shapes(number), table_answers[repr(number)],
                                        strict=True):
        assert (dumps_compact(shape), dumps_pretty(shape)) == (compact, pretty), shape
    assert as_doubles(loads(dumps_compact([number]))) == [read_back(number)]
    assert as_doubles(loads(dumps_pretty({"n": number}))) == {"n": read_back(number)}


def test_the_costs_from_the_report() -> None:
    """The forms that were wrong, spelled out (the table above checks them against Node)."""
    assert dumps_compact({"cost": 9.600000000000001e-06}) == b'{"cost":0.000009600000000000001}'
    assert dumps_compact([5e-05, 1.5e300, 1e21, 1e20, 1e-7, 1e-6]) == (
        b"[0.00005,1.5e+300,1e+21,100000000000000000000,1e-7,0.000001]")
    assert dumps_compact({9.6e-06: 1, 1e21: 2}) == b'{"0.0000096":1,"1e+21":2}'


@pytest.mark.parametrize("number", FLOATS, ids=repr)
def test_floats_beside_what_orjson_refuses_are_written_the_same(
        number: float, table_answers: dict[str, list[tuple[bytes, bytes]]]) -> None:
    """A lone surrogate or an integer beyond 64 bits sends the document to the standard
    encoder: its numbers are written the same way, and read back."""
    compact, pretty = table_answers[repr(number)][2]
    for odd, text in (("\ud800", b'"\\ud800"'), (2**70, str(2**70).encode())):
        assert dumps_compact([odd, {"cost": number, "deep": {"list": [1, number, "x"]}}]) == (
            b"[" + text + b"," + compact + b"]")
        indented = pretty.replace(b"\n", b"\n  ")
        assert dumps_pretty([odd, {"cost": number, "deep": {"list": [1, number, "x"]}}]) == (
            b"[\n  " + text + b",\n  " + indented + b"\n]")
        assert as_doubles(loads(dumps_compact([odd, number])))[1:] == [read_back(number)]


def random_floats(count: int, seed: int) -> list[float]:
    """Finite floats of every kind: uniform bit patterns (mostly huge or tiny), decimals
    around the switches between notations, integral values, and short decimals like costs."""
    rng = random.Random(seed)
    floats: list[float] = []
    while len(floats) < count:
        kind = len(floats) % 4
        if kind == 0:
            number = struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0]
        elif kind == 1:
            number = rng.uniform(-10, 10) * 10.0 ** rng.randint(-12, 25)
        elif kind == 2:
            number = float(rng.getrandbits(rng.randint(1, 75)))
        else:
            number = round(rng.uniform(0, 1) * 10.0 ** rng.randint(-9, 3), rng.randint(1, 17))
        if math.isfinite(number):
            floats.append(number)
    return floats


def test_random_floats_match_node(node: Node) -> None:
    """2000 seeded floats, each as a value and as a key, in one request."""
    floats = random_floats(2000, seed=20260522)
    assert mismatches(node, [[number, {number: number}] for number in floats]) == []
    assert as_doubles(loads(dumps_compact(floats))) == floats
    assert as_doubles(loads(dumps_pretty(floats))) == floats


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(), min_size=1, max_size=20))
def test_any_floats_match_node(node: Node, floats: list[float]) -> None:
    values = [floats, {"cost": floats[0], "keys": {floats[0]: 0}}]
    assert mismatches(node, values) == []
    assert as_doubles(loads(dumps_compact(floats))) == [read_back(number) for number in floats]


def test_js_values_keeps_floats_floats() -> None:
    """Integral floats become ints only up to 2**53, where the int prints the same digits;
    beyond, they stay floats (and are printed as JavaScript prints them)."""
    converted = js_values([2.0, -0.0, 2.0**53, 2.0**53 + 2, 1.5e300, 1e21, 0.5, math.inf])
    assert converted == [2, 0, 2**53, 2.0**53 + 2, 1.5e300, 1e21, 0.5, None]
    assert [type(item) for item in converted] == [int, int, int, float, float, float, float,
                                                  type(None)]


def test_a_string_holding_the_float_marker_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard encoder's path writes floats through marker strings with a random tag;
    a tag that a string of the value holds is not used."""
    tags = iter(["feedface00000000", "0123456789abcdef"])
    monkeypatch.setattr(secrets, "token_hex", lambda _size: next(tags))
    value = ["\ud800", "feedface00000000:0", 1e-7, {"cost": 9.600000000000001e-06}]
    assert dumps_compact(value) == (
        b'["\\ud800","feedface00000000:0",1e-7,{"cost":0.000009600000000000001}]')


def test_value_text_gives_structured_outputs_as_json() -> None:
    """A run's output as text: strings as they are, None as "", a pydantic model, a
    dataclass or a dict as compact JSON, an object JSON cannot hold as its str."""
    import dataclasses

    from pydantic import BaseModel

    class Weather(BaseModel):
        city: str
        temp_c: float

    @dataclasses.dataclass
    class Point:
        x: int
        y: float

    class Opaque:
        def __str__(self) -> str:
            return "opaque thing"

    assert value_text("plain ünïcode") == "plain ünïcode"
    assert value_text(None) == ""
    assert value_text(Weather(city="Paris", temp_c=21.5)) == '{"city":"Paris","temp_c":21.5}'
    assert value_text(Point(1, 0.5)) == '{"x":1,"y":0.5}'
    assert value_text({"a": [1, 2.0]}) == '{"a":[1,2]}'
    assert value_text(Opaque()) == "opaque thing"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


# keys of every kind the long way converts (floats as JavaScript prints them, ints, bools)
ANY_KEYS = st.text() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.booleans()
VALUES_WITH_ANY_KEYS = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_KEYS, inner, max_size=4),
    max_leaves=20)


@given(value=JSON_VALUES | VALUES_WITH_ANY_KEYS)
@settings(max_examples=400, deadline=None)
def test_orjson_alone_writes_what_the_long_way_writes(value: object) -> None:
    """orjson alone writes the same bytes as every value converted first, or the value goes
    the long way; also for the JSON text of it read back (as an export re-writes it)."""
    for each in (value, loads(dumps_compact(value))):
        assert dumps_compact(each) == _dumps_converted(each, 0, None)
        assert dumps_pretty(each) == _dumps_converted(each, orjson.OPT_INDENT_2, 2)


@pytest.mark.parametrize("number", [1.0, -0.0, 1e-6, 1.5e-7, 1e16, 2.0**60, 0.1, 1e21, 3.25])
def test_numbers_orjson_prints_otherwise_take_the_long_way(number: float) -> None:
    value = {"n": [number, "1.0 e5"]}
    assert dumps_compact(value) == _dumps_converted(value, 0, None)
    assert dumps_pretty(value) == _dumps_converted(value, orjson.OPT_INDENT_2, 2)
    assert float(orjson.loads(dumps_compact(value))["n"][0]) == number


def test_a_value_nested_past_max_depth_is_cut_as_before() -> None:
    """orjson alone would write 250 levels whole; the bracket count sends it the long way."""
    deep: list[object] = []
    inner = deep
    for _ in range(250):
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    assert b'"[Too deep]"' in dumps_compact(deep)
    assert dumps_compact(deep) == _dumps_converted(deep, 0, None)
