"""Times, once each: now in Unix ms, Unix ms to and from ISO-8601 text, and ``--since``.

Every time sessiontape writes is UTC ISO-8601 with milliseconds and a ``Z``
(``2026-11-23T14:37:23.881Z``), as skillet's logs write them; every time its text output
shows a person is UTC too, with the zone said: ``2026-11-23 14:37:23 UTC``
(:func:`shown_time`).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = ["iso_ms", "iso_to_ms", "ms_to_iso", "now_ms", "parse_since", "shown_time"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_FRACTION = re.compile(r"\.(\d+)(?=Z|[+-]\d\d:?\d\d$|$)")  # a second's fraction, any length


def now_ms() -> int:
    """Now, in Unix ms."""
    return time.time_ns() // 1_000_000


def iso_ms(moment: datetime | None = None) -> str:
    """UTC ISO-8601 with milliseconds and ``Z``: ``2026-05-27T20:11:02.482Z`` (now when
    ``moment`` is None)."""
    moment = (moment or datetime.now(timezone.utc)).astimezone(timezone.utc)
    # isoformat, not strftime: glibc's %Y does not pad years before 1000 to 4 digits.
    return moment.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def ms_to_iso(ms: int | None) -> str | None:
    """Unix ms as :func:`iso_ms` writes it; None for None or a time out of range."""
    if ms is None:
        return None
    try:
        return iso_ms(datetime.fromtimestamp(ms / 1000, tz=timezone.utc))
    except (OverflowError, OSError, ValueError):
        return None


def iso_to_ms(stamp: Any) -> int | None:
    """An ISO-8601 time (``...Z`` or with an offset) in Unix ms; None if it is not one."""
    if not isinstance(stamp, str):
        return None
    # Go writes up to 9 digits of a second; Python 3.10 reads exactly 3 or 6
    stamp = _FRACTION.sub(lambda m: "." + (m.group(1) + "00000")[:6], stamp, count=1)
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        return None


def shown_time(moment: int | str | None) -> str:
    """A time (Unix ms, or ISO-8601 text) as text output shows it to a person, in UTC with
    the zone said: ``2026-11-23 14:37:23 UTC``; ``-`` when there is none or it is not a
    time."""
    ms = iso_to_ms(moment) if isinstance(moment, str) else moment
    iso = ms_to_iso(ms)
    return "-" if iso is None else f"{iso[:10]} {iso[11:19]} UTC"


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``10m``/``2h``/``1d`` (``s m h d w``) before ``now``, or an ISO-8601 date or time.

    An ISO time without a zone is local time. ValueError when it is neither.
    """
    now = now or datetime.now(timezone.utc)
    match = _DURATION.match(text)
    if match:
        return now - timedelta(seconds=float(match[1]) * _UNIT[match[2].lower()])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a duration like 10m, 2h, 1d or an ISO time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time
    return moment.astimezone(timezone.utc)
