"""A conversation recorded into a PostgreSQL store, written out on this host.

The AgentUse tree and the JSONL log are per machine: each host writes those of the turns it
ran. :func:`materialize` (``sessiontape sessions materialize``) rebuilds both here from the
database:

* the log: every host's lines, whole (:func:`~sessiontape.storage.backends.transfer.
  materialize_logs`; a file here with lines the database lacks is kept as it is);
* the tree, for a conversation that has none on this host: under the session directory name
  the store links it to (the name every host uses), in the project its first turn names,
  rebuilt from the log's lines as ``ingest`` records an agentrun stream (turns, prompts,
  answers, reasoning, tool calls and results, usage and cost; what only a live run has,
  such as the model's request settings, is not in the log). A tree already here (this
  host ran turns of it) is left as it is.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from sessiontape.ingest import ingest_agentrun
from sessiontape.storage.agentuse.reader import is_real_dir
from sessiontape.storage.backends.postgres import PostgresStore
from sessiontape.storage.backends.transfer import Materialized, materialize_logs
from sessiontape.storage.db import connect
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.paths import project_key, sessions_root_for_key
from sessiontape.storage.skillet import links
from sessiontape.storage.skillet.agentrun_stream import AgentrunLines
from sessiontape.storage.skillet.item_store import ItemStore

__all__ = ["MaterializedSession", "materialize"]


@dataclass(frozen=True)
class MaterializedSession:
    """What :func:`materialize` did for one conversation: its log, then its tree."""

    log: Materialized
    tree: Path | None
    tree_outcome: str  # "written", "here already", or why there is none

    def to_json(self) -> dict[str, Any]:
        return {**self.log.to_json(), "tree": str(self.tree) if self.tree else None,
                "tree_outcome": self.tree_outcome}


def _entries(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_bytes().splitlines():
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            yield data


def _project_of(path: Path) -> str | None:
    """The project root the conversation's first turn names (``projectRoot``)."""
    for data in _entries(path):
        if data.get("kind") == "user_message" and isinstance(data.get("projectRoot"), str):
            return str(data["projectRoot"])
    return None


async def _build_tree(log: Materialized, target: Path, project: str) -> str:
    """Record the log's lines into a tree at ``target`` (its store and log: thrown away)."""
    assert log.path is not None
    lines = AgentrunLines()
    messages = [dumps_compact(message) for data in _entries(log.path)
                for message in lines.messages(str(log.path), log.session_name, data)]
    with tempfile.TemporaryDirectory(prefix="sessiontape-materialize-") as scratch:
        store_file = Path(scratch) / "links.sqlite"
        with closing(connect(store_file)) as conn:  # the tree's name: the one the store links
            conn.execute(links.SCHEMA)
            conn.execute(f"INSERT INTO {links.LINKS_TABLE} VALUES (?, ?, ?)",
                         (log.user_id, log.session_name, str(target)))
        async with ItemStore(store_file) as store:
            summary = await ingest_agentrun(
                messages, user_id=log.user_id, session_name=log.session_name, store=store,
                logs_root=Path(scratch) / "logs", agentuse_root=target.parent,
                project_root=project, compaction_threshold=None)
    if summary.recording_errors or not is_real_dir(target):
        return f"not written: {summary.recording_errors} recording errors"
    return "written"


async def materialize(url: str, *, logs_root: Path | None = None, user_id: str | None = None,
                      session_name: str | None = None) -> list[MaterializedSession]:
    """Write each conversation of the PostgreSQL store at ``url`` (or only ``user_id``'s,
    ``session_name``'s) out on this host: see the module doc."""
    logs = await asyncio.to_thread(materialize_logs, url, logs_root, user_id=user_id,
                                   session_name=session_name)
    done = []
    async with PostgresStore(url) as store:
        for log in logs:
            linked = await asyncio.to_thread(store.find_agentuse_dir, log.user_id,
                                             log.session_name)
            project = _project_of(log.path) if log.path is not None else None
            if linked is None or project is None:
                done.append(MaterializedSession(log, None, "none: no turn names its tree"))
                continue
            target = sessions_root_for_key(project_key(project)) / linked.name
            if is_real_dir(target):
                done.append(MaterializedSession(log, target, "here already"))
                continue
            done.append(MaterializedSession(log, target, await _build_tree(log, target,
                                                                            project)))
    return done
