"""Redaction: secrets replaced before anything is written to disk.

A :class:`Redactor` replaces every match of its patterns with
``[REDACTED:<name>]`` in strings, and in any structure of dicts, lists,
tuples and (frozen) dataclasses. :data:`DEFAULT_PATTERNS` covers common API
keys and tokens. ``Recorder(redact=True)`` applies the default set to the
AgentUse tree, the JSONL log and the item store (so the model's memory holds
the redacted text too); pass a ``Redactor`` of your own, or any function
``str -> str``, to change what is removed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["DEFAULT_PATTERNS", "Redactor", "as_redactor"]

DEFAULT_PATTERNS: dict[str, str] = {
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
    "anthropic_key": r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    "openai_key": r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "slack_token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    "google_api_key": r"\bAIza[0-9A-Za-z_-]{35}",
    "stripe_key": r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
    "bearer_token": r"(?i:\bbearer\s+)[A-Za-z0-9._~+/-]{20,}=*",
}


class Redactor:
    """Replaces matches of named regular expressions (one combined pass per string)."""

    def __init__(self, patterns: Mapping[str, str] | None = None) -> None:
        self.patterns = dict(DEFAULT_PATTERNS if patterns is None else patterns)
        joined = "|".join(f"(?P<{name}>{pattern})" for name, pattern in self.patterns.items())
        self._regex = re.compile(joined, re.DOTALL) if self.patterns else None

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by ``[REDACTED:<pattern name>]``."""
        if self._regex is None:
            return text
        return self._regex.sub(lambda m: f"[REDACTED:{m.lastgroup}]", text)

    def value(self, value: Any) -> Any:
        """A copy of ``value`` with every string in it redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(item) for item in value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {f.name: self.value(getattr(value, f.name))
                       for f in dataclasses.fields(value) if f.init}
            return dataclasses.replace(value, **changes)
        return value

    def __call__(self, text: str) -> str:
        return self.text(text)


def as_redactor(redact: bool | Redactor | Callable[[str], str] | None) -> Redactor | None:
    """``Recorder(redact=...)``: True for the defaults, a Redactor, a function, or off."""
    if redact is None or redact is False:
        return None
    if redact is True:
        return Redactor()
    if isinstance(redact, Redactor):
        return redact
    function = redact

    class _FunctionRedactor(Redactor):
        def text(self, text: str) -> str:
            return function(text)

    return _FunctionRedactor({})
