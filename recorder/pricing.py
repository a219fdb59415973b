"""Model names and what a model call costs.

Prices are US dollars per million tokens (input, cached input, output), as
OpenAI lists them for its current models. Pass your own table to
``Recorder(prices=...)`` to change or extend it. A model not in the table
costs 0, with one warning per model name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from sessiontape.storage.events import Tokens

__all__ = ["DEFAULT_PRICES", "Price", "PriceTable", "split_model"]

log = logging.getLogger("sessiontape")
_WARNED: set[str] = set()  # models already warned about, process-wide
_WARN_LOCK = threading.Lock()


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    input: float
    cached_input: float
    output: float


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-5": Price(1.25, 0.125, 10.00),
    "gpt-5-mini": Price(0.25, 0.025, 2.00),
    "gpt-5-nano": Price(0.05, 0.005, 0.40),
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.40),
    "gpt-4o": Price(2.50, 1.25, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.60),
    "o3": Price(2.00, 0.50, 8.00),
    "o3-mini": Price(1.10, 0.55, 4.40),
    "o4-mini": Price(1.10, 0.275, 4.40),
}

_PROVIDER_PREFIXES = ("openai", "litellm", "any-llm", "anthropic")


def split_model(model: str) -> tuple[str, str]:
    """``(provider, model)`` from an SDK model string (``litellm/anthropic/x``, ``gpt-4.1``)."""
    for separator in (":", "/"):
        provider, found, rest = model.partition(separator)
        if found and rest and (separator == ":" or provider in _PROVIDER_PREFIXES):
            return provider, rest
    return "openai", model


class PriceTable:
    """Computes the cost of a call; warns once for each model it has no price for."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    def _price(self, model: str) -> Price | None:
        name = split_model(model)[1]
        price = self.prices.get(name)
        if price is None:  # dated snapshots: gpt-4.1-2025-04-14 -> gpt-4.1
            candidates = [key for key in self.prices if name.startswith(key + "-")]
            price = self.prices[max(candidates, key=len)] if candidates else None
        return price

    def cost(self, model: str, tokens: Tokens) -> float:
        """Dollars for one call of ``model`` using ``tokens`` (0 for an unknown model)."""
        price = self._price(model)
        if price is None:
            with _WARN_LOCK:
                if model not in _WARNED:
                    _WARNED.add(model)
                    log.warning("sessiontape: no price for model %r; its cost is recorded as 0",
                                model)
            return 0.0
        cached = min(tokens.cache_read, tokens.input)
        return ((tokens.input - cached) * price.input + cached * price.cached_input
                + tokens.output * price.output) / 1_000_000
