"""Timing helpers shared by the benchmarks (run them as ``python bench/NAME.py``)."""

from __future__ import annotations

import time
from typing import Any


def median(values: list[float]) -> float:
    """The middle value (0.0 for none)."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


async def timed(call: Any, repeat: int) -> tuple[float, Any]:
    """Median seconds of ``repeat`` awaits of ``call()``, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = await call()
        times.append(time.perf_counter() - start)
    return median(times), result


def timed_sync(call: Any, repeat: int) -> tuple[float, Any]:
    """Median seconds of ``repeat`` calls of ``call()``, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return median(times), result
