"""sessiontape recorder: records OpenAI Agents SDK runs into the AgentUse and skillet layouts.

    from recorder import Recorder
    rec = Recorder(user_id="john@example.com", session_name="demo")
    result = await rec.run(agent, "prompt")
"""

from storage.version import __version__

from .pricing import DEFAULT_PRICES, Price, PriceTable
from .recorder import Recorder, RecorderError

__all__ = ["DEFAULT_PRICES", "Price", "PriceTable", "Recorder", "RecorderError", "__version__"]
