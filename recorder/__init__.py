"""sessiontape recorder: records OpenAI Agents SDK runs into the AgentUse and skillet layouts.

The capture of agent runs arrives with the recorder issue; today this
package holds the command line (:mod:`recorder.cli`).
"""

from storage.version import __version__

__all__ = ["__version__"]
