"""ULIDs that strictly increase within a process and differ within 12 characters.

AgentUse's ULIDs are random within a millisecond, so two made in the same
millisecond may sort either way. Ours step the random part instead (a
variant of the "monotonic" ULID), so sorting by ID is the true creation order.

AgentUse shows and finds a session by the first 12 characters of its id: the
ID column of ``sessions list`` and the subagents of ``sessions show`` print
``id.substring(0, 12)``, and ``sessions show <id>`` takes a prefix, answering
"Multiple sessions match" when two ids start with it (src/cli/sessions.ts:733,
844 and 1141-1156). Characters 1-10 are the millisecond, 11-12 the random part's
top 10 bits: so within a millisecond it is those bits that step, by one (the
other 70 are new random bits each time), and when they run out the next id
moves on to the next millisecond. Every two ids of a process differ within
their first 12 characters.
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

_STEP_BITS = 10  # the random part's top bits: the ULID's characters 11 and 12
_LOW_BITS = 70  # the rest of the 80 random bits, new for every id
_CROCKFORD = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


class _MonotonicULIDs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_step = 0

    def reset(self) -> None:
        """Forget the last ID (a forked child must not continue its parent's sequence)."""
        self._lock = threading.Lock()
        self._last_ms = -1

    def new(self) -> str:
        with self._lock:
            now = time.time_ns() // 1_000_000
            if now > self._last_ms:
                self._last_ms = now
                self._last_step = secrets.randbits(_STEP_BITS - 1)  # room for 512 steps
            else:
                self._last_step += 1
                if self._last_step >> _STEP_BITS:  # 1024 ids in this millisecond
                    self._last_ms += 1
                    self._last_step = secrets.randbits(_STEP_BITS - 1)
            random = self._last_step << _LOW_BITS | secrets.randbits(_LOW_BITS)
            raw = self._last_ms.to_bytes(6, "big") + random.to_bytes(10, "big")
        from ulid import ULID  # imported on first use: 20 ms a reader should not pay

        return str(ULID.from_bytes(raw))


_ULIDS = _MonotonicULIDs()
os.register_at_fork(after_in_child=_ULIDS.reset)


def new_ulid() -> str:
    """A new 26-char ULID, greater than every ULID this process made before and
    differing from each of them within its first 12 characters."""
    return _ULIDS.new()


def is_ulid(text: str) -> bool:
    """Whether ``text`` is a 26-char uppercase Crockford base32 ULID."""
    return len(text) == 26 and text[0] in "01234567" and _CROCKFORD.issuperset(text)


def ulid_ms(text: str) -> int:
    """The Unix-ms timestamp encoded in a ULID."""
    from ulid import ULID

    ulid: ULID = ULID.from_str(text)  # annotated: python-ulid types it `Self`, unknown before 3.11
    return ulid.milliseconds
