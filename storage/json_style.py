"""JSON bytes exactly as the original (JavaScript) tools write them.

AgentUse writes ``JSON.stringify(x, null, 2)`` (two-space indent, no trailing
newline); skilled_crew writes ``JSON.stringify(x)`` (compact). Both print
non-ASCII as-is and NaN/Infinity as ``null``; every float is printed as
JavaScript's ``Number::toString`` prints it (:func:`js_number`): the shortest
digits that read back as the same double (those of ``repr``), in decimal
notation from 1e-6 up to below 1e21 (``0.000009600000000000001``,
``100000000000000000000``, ``2`` for ``2.0``, ``0`` for ``-0.0``), else as
``1e-7``, ``1.5e+300``. Python ints are written exact, whatever their size.

Values JSON has no form for never make a write fail (see docs/formats.md):
a container that contains itself is cut with ``"[Circular]"``, one nested
deeper than :data:`MAX_DEPTH` levels with ``"[Too deep]"``, bytes are decoded
as UTF-8 with replacement, keys that are not strings, numbers, booleans or
null become their ``str()``, other objects their ``str()`` (``repr()``, then
``<TypeName>``, when that raises), lone surrogates are escaped (``\\ud800``).

:func:`loads` reads back everything written here, lone surrogate escapes included,
every float as the same double but for integral ones beyond 2**53 (see :func:`loads`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

__all__ = ["CIRCULAR", "MAX_DEPTH", "TOO_DEEP", "dumps_compact", "dumps_pretty", "js_number",
           "js_values", "loads", "safe_str", "value_text"]


CIRCULAR = "[Circular]"
TOO_DEEP = "[Too deep]"
# Containers nested deeper than this are cut (orjson stops at 255 levels, and
# Python's own encoders at its recursion limit).
MAX_DEPTH = 200


def safe_str(value: Any) -> str:
    """``str(value)``; its ``repr()`` when that raises, else ``<TypeName>``. Never raises."""
    try:
        return str(value)
    except Exception:
        pass
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


# Integral floats up to this size print the same digits as their int (beyond, the shortest
# digits of the double are padded with zeros: 2.0**60 is 1152921504606847000).
_EXACT_INTEGERS = 2.0**53
# Non-integral floats of at least this size orjson prints as JavaScript does (plain decimal,
# shortest digits); smaller ones, and integral ones beyond _EXACT_INTEGERS, are written from
# js_number (orjson prints 1e-6 as 1e-6 and 1e16 as 1e+16, JavaScript as 0.000001 and
# 10000000000000000).
_ORJSON_AGREES_FROM = 1e-5
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def js_number(number: float) -> str:
    """``String(number)`` in JavaScript (ECMAScript ``Number::toString``).

    The digits are the shortest that read back as the same double (``repr``'s); the
    notation is decimal from 1e-6 up to below 1e21, else ``d.ddde+N`` / ``de-N``:
    ``0.000009600000000000001``, ``100000000000000000000``, ``2`` (for ``2.0``), ``0``
    (for ``-0.0``), ``1e-7``, ``1e+21``, ``1.5e+300``; ``NaN``, ``Infinity``,
    ``-Infinity``. (JSON has no form for the last three: the encoders write ``null``.)
    """
    text = float.__repr__(number)  # float subclasses (numpy's) have a repr of their own
    mantissa, e, exponent = text.partition("e")
    if not e:  # repr is decimal from 1e-4 up to below 1e16, as JavaScript is
        if text.endswith(".0"):
            return "0" if number == 0 else text[:-2]
        return _NON_FINITE.get(text, text)
    power = int(exponent)  # repr's exponent: below -4 or from 16 on
    if -7 < power < 21:  # JavaScript writes these in decimal too
        sign = "-" if mantissa[0] == "-" else ""
        digits = mantissa.lstrip("-").replace(".", "")
        if power < 0:
            return f"{sign}0.{'0' * (-power - 1)}{digits}"
        return sign + digits + "0" * (power + 1 - len(digits))  # 17 digits at most
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def _js_key(key: Any) -> Any:
    """A dict key both encoders accept: str, int, bool and None as they are; floats as
    JavaScript prints them (``String(key)``); anything else as its ``str()``."""
    if key is None or isinstance(key, (str, int)):
        return key
    if isinstance(key, float):
        return js_number(key)
    return safe_str(key)


def _plain_float(number: float) -> Any:
    """A float as :func:`js_values` returns it."""
    if number.is_integer():
        return int(number) if -_EXACT_INTEGERS <= number <= _EXACT_INTEGERS else number
    return number if math.isfinite(number) else None


def _orjson_float(number: float) -> Any:
    """A float as orjson is given it: itself where orjson prints it as JavaScript does,
    an int where that prints the same, else the text of :func:`js_number`."""
    if number.is_integer():
        if -_EXACT_INTEGERS <= number <= _EXACT_INTEGERS:
            return int(number)
        return orjson.Fragment(js_number(number).encode())
    magnitude = abs(number)
    if magnitude >= _ORJSON_AGREES_FROM:
        if magnitude == math.inf:
            return None
        return number if type(number) is float else float(number)  # orjson: no subclasses
    if magnitude == magnitude:  # not NaN
        return orjson.Fragment(js_number(number).encode())
    return None


# Values that _convert returns as they are: checked inline, without a call per leaf.
_AS_THEY_ARE = frozenset({str, int, bool, type(None)})


def _convert(value: Any, path: frozenset[int], number: Callable[[float], Any]) -> Any:
    """:func:`js_values` with each float replaced by ``number(float)``."""
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (dict, list, tuple)):
        if id(value) in path:
            return CIRCULAR
        if len(path) >= MAX_DEPTH:
            return TOO_DEEP
        inner = path | {id(value)}
        if isinstance(value, dict):
            return {k if type(k) is str else _js_key(k):
                    v if type(v) in _AS_THEY_ARE else _convert(v, inner, number)
                    for k, v in value.items()}
        return [v if type(v) in _AS_THEY_ARE else _convert(v, inner, number) for v in value]
    return value


def js_values(value: Any, _path: frozenset[int] = frozenset()) -> Any:
    """Return a copy of ``value`` with numbers as JavaScript would print them.

    Integral floats that print the same as ints become ints (``1.0`` -> ``1``; up to
    2**53, beyond they stay floats), non-finite floats become ``None``, a container
    that contains itself is cut at the repeat with the string ``"[Circular]"``, one
    below :data:`MAX_DEPTH` levels with ``"[Too deep]"``, and dict keys JSON cannot hold
    become strings (floats as :func:`js_number` prints them).
    """
    return _convert(value, _path, _plain_float)


def _unknown(value: Any, number: Callable[[float], Any] = _orjson_float) -> Any:
    """Fallback for objects JSON has no form for: a pydantic model's fields, else their
    ``str`` (never raises)."""
    if isinstance(value, (set, frozenset)):
        return _convert(list(value), frozenset(), number)
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return _convert(dump(mode="json"), frozenset(), number)
        except Exception:
            pass
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return safe_str(value)


class _Markers:
    """Floats for the standard encoder: each one not written as an int becomes a marker
    string (a random tag and its index) whose :func:`js_number` text is kept here."""

    def __init__(self) -> None:
        import secrets  # only for this fallback: not loaded by every command

        self.tag = secrets.token_hex(8)
        self.numbers: list[str] = []

    def __call__(self, number: float) -> Any:
        plain = _plain_float(number)
        if not isinstance(plain, float):
            return plain
        self.numbers.append(js_number(plain))
        return f"{self.tag}:{len(self.numbers) - 1}"

    def replace(self, text: str) -> str:
        """``text`` with each quoted marker replaced by its number."""
        if not self.numbers:
            return text
        return re.sub(f'"{self.tag}:([0-9]+)"', lambda match: self.numbers[int(match[1])], text)


def _dumps_stdlib(value: Any, indent: int | None) -> bytes:
    """What orjson refuses (lone surrogates, integers beyond 64 bits) through the standard
    encoder, which escapes them as JSON.stringify does. It prints floats as ``repr`` does,
    so they go in as :class:`_Markers` and come out as :func:`js_number` prints them."""
    separators = (",", ": ") if indent else (",", ":")
    while True:
        markers = _Markers()
        text = json.dumps(_convert(value, frozenset(), markers),
                          default=partial(_unknown, number=markers), indent=indent,
                          separators=separators, ensure_ascii=True)
        if text.count(markers.tag) == len(markers.numbers):  # no string holds the tag
            return markers.replace(text).encode("ascii")


# What orjson may write otherwise than JavaScript, in the JSON it wrote: an integral float
# (``1.0``, ``-0.0``) or an exponent (``1e-6``, ``1e+16``); a string holding one only sends
# the value the long way.
_NOT_AS_JAVASCRIPT = re.compile(rb"[0-9]\.0(?![0-9])|[0-9][eE][-+]?[0-9]")


def _dumps(value: Any, option: int, indent: int | None) -> bytes:
    """``value`` as JSON written as JavaScript writes it. Most values (str keys, no float
    that orjson prints otherwise than JavaScript, no object orjson cannot write, fewer
    brackets than :data:`MAX_DEPTH`) are written by orjson alone, without walking them;
    the rest the long way (:func:`_dumps_converted`), to the same bytes
    (``tests/test_json_style.py``)."""
    try:
        written = orjson.dumps(value, option=option)
    except (TypeError, orjson.JSONEncodeError):  # a non-str key, an object, a cycle...
        return _dumps_converted(value, option, indent)
    if _NOT_AS_JAVASCRIPT.search(written) or \
            written.count(b"[") + written.count(b"{") >= MAX_DEPTH:
        return _dumps_converted(value, option, indent)
    return written


def _dumps_converted(value: Any, option: int, indent: int | None) -> bytes:
    """:func:`_dumps` the long way: every float, key and object converted first."""
    converted = _convert(value, frozenset(), _orjson_float)
    try:
        return orjson.dumps(converted, default=_unknown,
                            option=option | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return _dumps_stdlib(value, indent)


def dumps_pretty(value: Any) -> bytes:
    """Two-space indented JSON with no trailing newline (AgentUse files)."""
    return _dumps(value, orjson.OPT_INDENT_2, 2)


def dumps_compact(value: Any) -> bytes:
    """Compact one-line JSON (JSONL lines and SQLite item rows)."""
    return _dumps(value, 0, None)


def value_text(value: Any) -> str:
    """A value as one line of text: a string as it is, None as ``""``; anything else as
    compact JSON (a structured output: a pydantic model, a dataclass, a dict...), whatever
    JSON has no form for as its ``str``. Never raises."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        text = dumps_compact(value).decode()
    except Exception:
        return safe_str(value)
    return safe_str(value) if text.startswith('"') else text  # an object JSON cannot hold


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes | str) -> Any:
    """Parse JSON (orjson), falling back to the standard parser for what orjson refuses
    but JSON allows: lone surrogate escapes (``"\\ud800"``, which :func:`dumps_compact`
    writes for a string holding one) and numbers beyond a double. ``NaN`` and
    ``Infinity`` literals stay refused. Raises ValueError.

    Every float written here reads back as the same double, except integral doubles beyond
    2**53: JavaScript writes them as their shortest digits padded with zeros (2.0**60 as
    ``1152921504606847000``), which read back as that integer (``JSON.parse`` would read the
    double)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        try:
            text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
            return json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            raise error from None
