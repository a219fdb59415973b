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
from .version import __version__

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


if TYPE_CHECKING:
    from .agentuse_reader import (CorruptFileError, LoadedMessage, LoadedSession, ReadProblem,
                                  SessionScan, SessionSummary, load_session, scan_sessions)
    from .agentuse_writer import AgentUseMessage, AgentUsePart, AgentUseSession, DocumentWrites
    from .compaction import (AutoCompactingSession, CompactingSession, CompactionInfo,
                             archived_items, plan_compaction)
    from .events import Tokens
    from .ids import new_ulid
    from .item_store import ItemStore, ItemStoreSession, StoredSession
    from .log_reader import LogEntry, LogProblem, SessionLogReader, SessionLogTailer, Turn
    from .names import (DEFAULT_USER_ID, UnsafePathError, default_session_name, safe_join,
                        sanitize_agent_name, sanitize_log_name)
    from .paths import SkilletPaths, agentuse_sessions_root, project_hash, resolved_paths
    from .replay_log import ReplayLog, log_path_for
    from .summarizers import (DeterministicSummarizer, ModelSummarizer, OpenAICompactSummarizer,
                              Summarizer)
