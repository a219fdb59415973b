"""sessiontape.storage: the AgentUse tree and the skillet store and log, read and written.

The public names are available here; each is imported from its module on first use (so
that ``import sessiontape.storage`` does not pay for the Agents SDK until the item store is
needed). The modules of this package itself are the shared ground, which every subpackage
may import and which imports none of them: ``events`` (the recorder's event vocabulary),
``files`` and ``file_writes`` (private files, atomic writes, the file worker), ``db`` (the
item store's SQLite connections, the SQL they share), ``tables``, ``paths``, ``ids``,
``times``, ``names``, ``json_style``, ``text`` (text shown to people), ``agentrun`` (its
message vocabulary), ``redaction``, ``version``, ``lazy``. The
subpackages, each saying in its docstring what it owns and what it may import:

=============  ==============================================================
``agentuse``   the AgentUse tree: writer, sink, reader, liveness
``skillet``    the item store, compaction, the replay log, links, sink
``catalog``    the read model: list, show, clear, search, usage, fork, doctor
``exports``    other tools' and the standards' formats, one module each
``backends``   where a store other than SQLite plugs in
=============  ==============================================================

Nothing here imports ``sessiontape`` (the recorder); docs/architecture.md has the picture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports
from .version import __version__ as __version__

_EXPORTS = {
    "agentuse.reader": ["CorruptFileError", "LoadedMessage", "LoadedSession", "ReadProblem",
                        "SessionScan", "SessionSummary", "load_session", "scan_sessions"],
    "agentuse.writer": ["AgentUseMessage", "AgentUsePart", "AgentUseSession",
                        "DocumentWrites"],
    "skillet.compaction": ["AutoCompactingSession", "CompactingSession", "CompactionInfo",
                   "archived_items", "plan_compaction"],
    "events": ["Tokens"],
    "ids": ["new_ulid"],
    "skillet": ["log_entries"],
    "skillet.item_store": ["ItemStore", "ItemStoreSession", "StoredSession"],
    "skillet.log_reader": ["LogEntry", "LogProblem", "SessionLogReader", "SessionLogTailer",
                           "Turn"],
    "names": ["DEFAULT_USER_ID", "UnsafePathError", "default_session_name", "safe_join",
              "sanitize_agent_name", "sanitize_log_name"],
    "paths": ["SkilletPaths", "agentuse_sessions_root", "project_hash", "resolved_paths"],
    "skillet.replay_log": ["ReplayLog", "log_path_for"],
    "skillet.summarizers": ["DeterministicSummarizer", "ModelSummarizer", "OpenAICompactSummarizer",
                    "Summarizer"],
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, defined=("__version__",))


# For type checkers, which cannot read the computed __all__: `X as X` re-exports X.
if TYPE_CHECKING:
    from .agentuse.reader import CorruptFileError as CorruptFileError
    from .agentuse.reader import LoadedMessage as LoadedMessage
    from .agentuse.reader import LoadedSession as LoadedSession
    from .agentuse.reader import ReadProblem as ReadProblem
    from .agentuse.reader import SessionScan as SessionScan
    from .agentuse.reader import SessionSummary as SessionSummary
    from .agentuse.reader import load_session as load_session
    from .agentuse.reader import scan_sessions as scan_sessions
    from .agentuse.writer import AgentUseMessage as AgentUseMessage
    from .agentuse.writer import AgentUsePart as AgentUsePart
    from .agentuse.writer import AgentUseSession as AgentUseSession
    from .agentuse.writer import DocumentWrites as DocumentWrites
    from .events import Tokens as Tokens
    from .ids import new_ulid as new_ulid
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
    from .skillet import log_entries as log_entries
    from .skillet.compaction import AutoCompactingSession as AutoCompactingSession
    from .skillet.compaction import CompactingSession as CompactingSession
    from .skillet.compaction import CompactionInfo as CompactionInfo
    from .skillet.compaction import archived_items as archived_items
    from .skillet.compaction import plan_compaction as plan_compaction
    from .skillet.item_store import ItemStore as ItemStore
    from .skillet.item_store import ItemStoreSession as ItemStoreSession
    from .skillet.item_store import StoredSession as StoredSession
    from .skillet.log_reader import LogEntry as LogEntry
    from .skillet.log_reader import LogProblem as LogProblem
    from .skillet.log_reader import SessionLogReader as SessionLogReader
    from .skillet.log_reader import SessionLogTailer as SessionLogTailer
    from .skillet.log_reader import Turn as Turn
    from .skillet.replay_log import ReplayLog as ReplayLog
    from .skillet.replay_log import log_path_for as log_path_for
    from .skillet.summarizers import DeterministicSummarizer as DeterministicSummarizer
    from .skillet.summarizers import ModelSummarizer as ModelSummarizer
    from .skillet.summarizers import OpenAICompactSummarizer as OpenAICompactSummarizer
    from .skillet.summarizers import Summarizer as Summarizer
