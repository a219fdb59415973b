"""Names: those that become path segments (the two sanitizers and the safe join), the one
spelling a model is reported in (:func:`reported_model`), and the user a person means by
what they type (:func:`match_user`).

* AgentUse agent names (``{sessionID}-{agentName}`` directories).
* Skillet log names (``{user}/{session}.jsonl``), where skilled_crew can yield
  an empty name; we never do. They are skilled_crew's own wherever it can write
  them (up to :data:`NAME_MAX` bytes); sessiontape 0.2-0.3 cut them sooner
  (:func:`old_log_name`).

No input yields an empty, ``.`` or ``..`` segment, a separator or a NUL, and
:func:`safe_join` refuses any path that would leave its root.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path

__all__ = [
    "DEFAULT_USER_ID",
    "MAX_NAME",
    "NAME_MAX",
    "AmbiguousUserError",
    "UnsafePathError",
    "default_session_name",
    "digest",
    "match_user",
    "not_a_link",
    "old_log_name",
    "reported_model",
    "safe_join",
    "sanitize_agent_name",
    "sanitize_log_name",
]

DEFAULT_USER_ID = "john@example.com"
DEFAULT_AGENT_NAME = "default"
# An agent name longer than this is cut and given a hash suffix (file systems
# allow 255 bytes; the ULID prefix, the suffix and temp names need room); so is a
# log name too long for a file, and sessiontape 0.2-0.3 cut every log name so.
MAX_NAME = 120
# Bytes in one file name on Linux's and macOS's file systems: longer, skilled_crew's
# own mkdir and appendFile fail (ENAMETOOLONG).
NAME_MAX = 255

_AGENT_UNSAFE = re.compile(r"[^a-z0-9\-_]")
_DASH_RUNS = re.compile(r"-+")
_LOG_UNSAFE_RUNS = re.compile(r"[^a-zA-Z0-9_-]+")


class UnsafePathError(ValueError):
    """A path segment or a joined path that would be empty, special or outside its root."""


def digest(raw: str) -> str:
    """12 hex of the SHA-256 of ``raw`` (lone surrogates included): a name's suffix."""
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _bounded(name: str, raw: str, joiner: str, most: int = MAX_NAME) -> str:
    if len(name) <= most:
        return name
    return f"{name[:MAX_NAME]}{joiner}{digest(raw)}"


def sanitize_agent_name(name: str) -> str:
    """AgentUse's agent-name sanitizer (lowercase ``[a-z0-9-_]``, ``default`` if empty).

    Names over 120 characters are cut and suffixed with a hash of the whole
    name (AgentUse has no limit and fails on such names).
    """
    cleaned = _DASH_RUNS.sub("-", _AGENT_UNSAFE.sub("-", name.lower())).strip("-")
    return _bounded(cleaned, name, "-") if cleaned else DEFAULT_AGENT_NAME


def _log_name(name: str, most: int) -> str:
    cleaned = _LOG_UNSAFE_RUNS.sub("_", name.strip()).strip("_")
    if not cleaned:
        return f"_{digest(name)}"
    return _bounded(cleaned, name, "_", most)


def sanitize_log_name(name: str, suffix: str = "") -> str:
    """skilled_crew's log-name sanitizer, without its gaps: the name of a user directory,
    or with ``suffix`` (``.jsonl``) the stem of a log file.

    Trim, replace each run of characters outside ``[a-zA-Z0-9_-]`` with ``_``,
    strip leading and trailing ``_`` (``SessionLogTypes.sanitizeForPath``). Where
    skilled_crew would return an empty name we return ``_`` plus a hash of the raw
    name. A name too long for a file name with ``suffix`` (over :data:`NAME_MAX`
    bytes: skilled_crew cannot write it) is cut to :data:`MAX_NAME` characters and
    given the same suffix; any other is skilled_crew's, uncut. A sanitized name never
    starts with ``_`` otherwise, and is ASCII (a character is a byte).
    """
    return _log_name(name, NAME_MAX - len(suffix))


def old_log_name(name: str) -> str:
    """The log name sessiontape 0.2 and 0.3 gave ``name``: :func:`sanitize_log_name`'s,
    but cut (and hashed) over :data:`MAX_NAME` characters, where skilled_crew does not cut."""
    return _log_name(name, MAX_NAME)


def reported_model(model: str | None) -> str | None:
    """A model as every report spells it, from either layout: the replay log's
    ``provider/model`` (skilled_crew's, kept as it is) or AgentUse's ``provider:model``,
    whose first ``:`` becomes ``/`` when a provider (no ``/`` in it) comes before it. So
    ``litellm:openrouter/meta-llama/llama-3`` and ``ollama:llama3:8b`` keep the rest of
    their name; a model without a provider (``gpt-4.1``, ``meta-llama/llama-3``) is as
    written."""
    if model:
        provider, colon, rest = model.partition(":")
        if colon and provider and "/" not in provider:
            return f"{provider}/{rest}"
    return model


class AmbiguousUserError(ValueError):
    """What was typed for a user means several users (:attr:`users`, sorted)."""

    def __init__(self, typed: str, users: list[str]) -> None:
        super().__init__(f"{typed!r} means several users; give one of them")
        self.typed, self.users = typed, users


# How a typed user may name a user id, tried in this order (both sides case-folded): the id,
# the part before its '@', its log folder's name.
_USER_FORMS: tuple[Callable[[str], str], ...] = (
    str.casefold, lambda user: user.partition("@")[0].casefold(),
    lambda user: sanitize_log_name(user).casefold())


def match_user(typed: str, users: Iterable[str]) -> str:
    """The user id among ``users`` that ``typed`` means, the way people type one: the exact
    id; else the id with case ignored (``Carol@Example.com``); else the id whose part before
    ``@`` it is (``carol`` for ``carol@example.com``); else the id whose log folder it names
    (``carol_example_com``, :func:`sanitize_log_name`), case ignored. The first of these that
    matches decides; if it matches several ids, :class:`AmbiguousUserError`. Matching none,
    ``typed`` itself (a user no conversation has)."""
    known = set(users)
    if typed in known:
        return typed
    folded = typed.casefold()
    for form in _USER_FORMS:
        meant = sorted(user for user in known if form(user) == folded)
        if len(meant) > 1:
            raise AmbiguousUserError(typed, meant)
        if meant:
            return meant[0]
    return typed


def default_session_name(now: datetime | None = None) -> str:
    """skilled_crew's default session name: ``session_<ISO timestamp>_<random hex>``.

    The timestamp is ISO 8601 (UTC) with ``-`` for ``:``, so that the name is
    its own sanitized log name: ``session_2026-11-22T18-30-00Z_1a2b3c4d``.
    """
    now = now or datetime.now(timezone.utc)
    stamp = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    return f"session_{stamp}_{secrets.token_hex(4)}"


def _check_segment(segment: str) -> None:
    if segment in ("", ".", "..") or "/" in segment or "\0" in segment or os.sep in segment:
        raise UnsafePathError(f"unsafe path segment: {segment!r}")


def not_a_link(path: Path) -> Path:
    """``path``, or UnsafePathError if it is a symbolic link: writers never write through one."""
    if path.is_symlink():
        raise UnsafePathError(f"{path} is a symbolic link; not writing through it")
    return path


def safe_join(root: Path, *segments: str) -> Path:
    """Join ``segments`` under ``root``, refusing anything that would escape it."""
    for segment in segments:
        _check_segment(segment)
    path = root.joinpath(*segments)
    if not os.path.abspath(path).startswith(os.path.abspath(root) + os.sep):
        raise UnsafePathError(f"{path} is outside {root}")
    return path
