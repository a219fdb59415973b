"""ULIDs that are strictly increasing within a process.

AgentUse's ULIDs are random within a millisecond, so two made in the same
millisecond may sort either way. Ours increment the random part instead
(the "monotonic" ULID variant), so sorting by ID is the true creation order.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ulid import ULID

__all__ = ["is_ulid", "new_ulid", "ulid_ms"]

_RANDOM_BITS = 80
_CROCKFORD = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


class _MonotonicULIDs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def reset(self) -> None:
        """Forget the last ID (a forked child must not continue its parent's sequence)."""
        self._lock = threading.Lock()
        self._last_ms = -1

    def new(self) -> str:
        with self._lock:
            now = time.time_ns() // 1_000_000
            if now > self._last_ms:
                self._last_ms = now
                self._last_random = secrets.randbits(_RANDOM_BITS - 1)  # room to increment
            else:
                self._last_random += 1
                if self._last_random >> _RANDOM_BITS:  # the random part overflowed
                    self._last_ms += 1
                    self._last_random = secrets.randbits(_RANDOM_BITS - 1)
            raw = self._last_ms.to_bytes(6, "big") + self._last_random.to_bytes(10, "big")
        from ulid import ULID  # imported on first use: 20 ms a reader should not pay

        return str(ULID.from_bytes(raw))


_ULIDS = _MonotonicULIDs()
os.register_at_fork(after_in_child=_ULIDS.reset)


def new_ulid() -> str:
    """A new 26-char ULID, greater than every ULID this process made before."""
    return _ULIDS.new()


def is_ulid(text: str) -> bool:
    """Whether ``text`` is a 26-char uppercase Crockford base32 ULID."""
    return len(text) == 26 and text[0] in "01234567" and _CROCKFORD.issuperset(text)


def ulid_ms(text: str) -> int:
    """The Unix-ms timestamp encoded in a ULID."""
    from ulid import ULID

    ulid: ULID = ULID.from_str(text)  # annotated: python-ulid types it `Self`, unknown before 3.11
    return ulid.milliseconds
