"""sessiontape storage: the AgentUse tree and the skillet store and log, read and written.

The public names are re-exported here; the modules behind them are:

=====================  =====================================================
``paths``              where things live (XDG, SKILLET_HOME, project hash)
``names``, ``ids``     sanitizers, safe path joins, monotonic ULIDs
``agentuse_writer``    session.json, tools.json, message.json, parts
``agentuse_reader``    finding and loading sessions
``item_store``         the ``session_items`` SQLite store (an SDK Session)
``log_entries``        the lines of the JSONL replay log
``replay_log``         appending to a log
``log_reader``         reading and following logs
=====================  =====================================================
"""

from .agentuse_reader import (
    CorruptFileError,
    LoadedMessage,
    LoadedSession,
    ReadProblem,
    SessionScan,
    SessionSummary,
    load_session,
    scan_sessions,
)
from .agentuse_writer import AgentUseMessage, AgentUsePart, AgentUseSession, Tokens
from .ids import new_ulid
from .item_store import ItemStore, ItemStoreSession, StoredSession
from .log_reader import LogEntry, LogProblem, SessionLogReader, SessionLogTailer, Turn
from .names import (
    DEFAULT_USER_ID,
    UnsafePathError,
    default_session_name,
    safe_join,
    sanitize_agent_name,
    sanitize_log_name,
)
from .paths import SkilletPaths, agentuse_sessions_root, project_hash, resolved_paths
from .replay_log import ReplayLog, log_path_for
from .version import __version__

__all__ = [
    "DEFAULT_USER_ID",
    "AgentUseMessage",
    "AgentUsePart",
    "AgentUseSession",
    "CorruptFileError",
    "ItemStore",
    "ItemStoreSession",
    "LoadedMessage",
    "LoadedSession",
    "LogEntry",
    "LogProblem",
    "ReadProblem",
    "ReplayLog",
    "SessionLogReader",
    "SessionLogTailer",
    "SessionScan",
    "SessionSummary",
    "SkilletPaths",
    "StoredSession",
    "Tokens",
    "Turn",
    "UnsafePathError",
    "__version__",
    "agentuse_sessions_root",
    "default_session_name",
    "load_session",
    "log_path_for",
    "new_ulid",
    "project_hash",
    "resolved_paths",
    "safe_join",
    "sanitize_agent_name",
    "sanitize_log_name",
    "scan_sessions",
]
