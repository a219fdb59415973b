"""Timing helpers shared by the benchmarks (run them as ``python bench/NAME.py``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def with_bytecode(cache: Path) -> dict[str, str]:
    """Environment for timing whole ``sessiontape`` processes as an installed package
    runs: compiled modules are kept (in ``cache``, not beside the sources), even where
    the shell sets PYTHONDONTWRITEBYTECODE (an empty value unsets it for Python)."""
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(cache)}


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
