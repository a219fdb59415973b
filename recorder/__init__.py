"""sessiontape: records OpenAI Agents SDK runs into the AgentUse and skillet layouts.

    from sessiontape import Recorder
    rec = Recorder(user_id="john@example.com", session_name="demo")
    result = await rec.run(agent, "prompt")

Names are imported on first use, so that the command line starts without
loading the Agents SDK for verbs that do not need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiontape.storage.lazy import lazy_exports
from sessiontape.storage.version import __version__ as __version__

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "pricing": ["DEFAULT_PRICES", "Price", "PriceTable"],
    "recorder": ["Recorder", "RecorderBusyError", "RecorderClosedError", "RecorderError"],
}, defined=("__version__",))


# For type checkers, which cannot read the computed __all__: `X as X` re-exports X.
if TYPE_CHECKING:
    from .pricing import DEFAULT_PRICES as DEFAULT_PRICES
    from .pricing import Price as Price
    from .pricing import PriceTable as PriceTable
    from .recorder import Recorder as Recorder
    from .recorder import RecorderBusyError as RecorderBusyError
    from .recorder import RecorderClosedError as RecorderClosedError
    from .recorder import RecorderError as RecorderError
