"""sessiontape.storage: the AgentUse tree and the skillet store and log, read and written.

The public names are available here; each is imported from its module on
first use (so that ``import sessiontape.storage`` does not pay for the Agents SDK until
the item store is needed). The modules behind them:

=====================  =====================================================
``paths``              where things live (XDG, SKILLET_HOME, project hash)
``names``, ``ids``     sanitizers, safe path joins, monotonic ULIDs
``agentuse_writer``    session.json, tools.json, message.json, parts
``agentuse_reader``    finding and loading sessions
``item_store``         the ``session_items`` SQLite store (an SDK Session)
``compaction``         the compacting session, its archive; ``summarizers``
``events``             the recorder's event vocabulary; ``*_sink`` consume it
``log_entries``        the lines of the JSONL replay log
``replay_log``         appending to a log
``log_reader``         reading and following logs
=====================  =====================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports
from .version import __version__ as __version__

_EXPORTS = {
    "agentuse_reader": ["CorruptFileError", "LoadedMessage", "LoadedSession", "ReadProblem",
                        "SessionScan", "SessionSummary", "load_session", "scan_sessions"],
    "agentuse_writer": ["AgentUseMessage", "AgentUsePart", "AgentUseSession",
                        "DocumentWrites"],
    "compaction": ["AutoCompactingSession", "CompactingSession", "CompactionInfo",
                   "archived_items", "plan_compaction"],
    "events": ["Tokens"],
    "ids": ["new_ulid"],
    "item_store": ["ItemStore", "ItemStoreSession", "StoredSession"],
    "log_reader": ["LogEntry", "LogProblem", "SessionLogReader", "SessionLogTailer", "Turn"],
    "names": ["DEFAULT_USER_ID", "UnsafePathError", "default_session_name", "safe_join",
              "sanitize_agent_name", "sanitize_log_name"],
    "paths": ["SkilletPaths", "agentuse_sessions_root", "project_hash", "resolved_paths"],
    "replay_log": ["ReplayLog", "log_path_for"],
    "summarizers": ["DeterministicSummarizer", "ModelSummarizer", "OpenAICompactSummarizer",
                    "Summarizer"],
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


# For type checkers, which cannot read the computed __all__: `X as X` re-exports X.
if TYPE_CHECKING:
    from .agentuse_reader import CorruptFileError as CorruptFileError
    from .agentuse_reader import LoadedMessage as LoadedMessage
    from .agentuse_reader import LoadedSession as LoadedSession
    from .agentuse_reader import ReadProblem as ReadProblem
    from .agentuse_reader import SessionScan as SessionScan
    from .agentuse_reader import SessionSummary as SessionSummary
    from .agentuse_reader import load_session as load_session
    from .agentuse_reader import scan_sessions as scan_sessions
    from .agentuse_writer import AgentUseMessage as AgentUseMessage
    from .agentuse_writer import AgentUsePart as AgentUsePart
    from .agentuse_writer import AgentUseSession as AgentUseSession
    from .agentuse_writer import DocumentWrites as DocumentWrites
    from .compaction import AutoCompactingSession as AutoCompactingSession
    from .compaction import CompactingSession as CompactingSession
    from .compaction import CompactionInfo as CompactionInfo
    from .compaction import archived_items as archived_items
    from .compaction import plan_compaction as plan_compaction
    from .events import Tokens as Tokens
    from .ids import new_ulid as new_ulid
    from .item_store import ItemStore as ItemStore
    from .item_store import ItemStoreSession as ItemStoreSession
    from .item_store import StoredSession as StoredSession
    from .log_reader import LogEntry as LogEntry
    from .log_reader import LogProblem as LogProblem
    from .log_reader import SessionLogReader as SessionLogReader
    from .log_reader import SessionLogTailer as SessionLogTailer
    from .log_reader import Turn as Turn
    from .names import DEFAULT_USER_ID as DEFAULT_USER_ID
    from .names import UnsafePathError as UnsafePathError
    from .names import default_session_name as default_session_name
    from .names import safe_join as safe_join
    from .names import sanitize_agent_name as sanitize_agent_name
    from .names import sanitize_log_name as sanitize_log_name
    from .paths import SkilletPaths as SkilletPaths
    from .paths import agentuse_sessions_root as agentuse_sessions_root
    from .paths import project_hash as project_hash
    from .paths import resolved_paths as resolved_paths
    from .replay_log import ReplayLog as ReplayLog
    from .replay_log import log_path_for as log_path_for
    from .summarizers import DeterministicSummarizer as DeterministicSummarizer
    from .summarizers import ModelSummarizer as ModelSummarizer
    from .summarizers import OpenAICompactSummarizer as OpenAICompactSummarizer
    from .summarizers import Summarizer as Summarizer
