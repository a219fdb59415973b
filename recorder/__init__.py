"""sessiontape recorder: records OpenAI Agents SDK runs into the AgentUse and skillet layouts.

    from recorder import Recorder
    rec = Recorder(user_id="john@example.com", session_name="demo")
    result = await rec.run(agent, "prompt")

Names are imported on first use, so that the command line starts without
loading the Agents SDK for verbs that do not need it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from storage.version import __version__

_MODULE_OF = {
    "DEFAULT_PRICES": "pricing", "Price": "pricing", "PriceTable": "pricing",
    "Recorder": "recorder", "RecorderError": "recorder",
}

__all__ = sorted([*_MODULE_OF, "__version__"])


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'recorder' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .pricing import DEFAULT_PRICES, Price, PriceTable
    from .recorder import Recorder, RecorderError
