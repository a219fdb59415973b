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
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import platformdirs

from sessiontape.storage.agentuse.reader import is_real_dir
from sessiontape.storage.backends.postgres import PostgresStore
from sessiontape.storage.backends.transfer import Materialized, copy_store, materialize_logs
from sessiontape.storage.db import connect
from sessiontape.storage.files import make_private_dir
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.paths import (
    SkilletPaths,
    agentuse_data_root,
    project_key,
    sessions_root_for_key,
)
from sessiontape.storage.skillet import links
from sessiontape.storage.skillet.agentrun_stream import AgentrunLines
from sessiontape.storage.skillet.log_owners import owner_record_path

__all__ = ["MaterializedSession", "lock_mirror", "materialize", "mirror_dir", "refresh_mirror"]


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
    # The recorder, and with it the Agents SDK, is loaded only when a tree is built.
    from sessiontape.ingest import ingest_agentrun
    from sessiontape.storage.skillet.item_store import ItemStore

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
                      session_name: str | None = None,
                      rebuild: bool = False) -> list[MaterializedSession]:
    """Write each conversation of the PostgreSQL store at ``url`` (or only ``user_id``'s,
    ``session_name``'s) out on this host: see the module doc. ``rebuild``: a tree whose
    log was written again is built again (a mirror's trees are all rebuilt ones)."""
    logs = await asyncio.to_thread(materialize_logs, url, logs_root, user_id=user_id,
                                   session_name=session_name)
    done = []
    async with PostgresStore(url) as store:
        linked_dirs = await asyncio.to_thread(store.links)
        roots: dict[str, Path] = {}  # a project's sessions root (git is asked once a project)
        for log in logs:
            linked = linked_dirs.get((log.user_id, log.session_name))
            project = _project_of(log.path) if log.path is not None else None
            if linked is None or project is None:
                done.append(MaterializedSession(log, None, "none: no turn names its tree"))
                continue
            if project not in roots:
                key = await asyncio.to_thread(project_key, project)
                roots[project] = sessions_root_for_key(key)
            target = roots[project] / Path(linked).name
            if rebuild and log.outcome == "written" and is_real_dir(target):
                await asyncio.to_thread(shutil.rmtree, target)
            if is_real_dir(target):
                done.append(MaterializedSession(log, target, "here already"))
                continue
            done.append(MaterializedSession(log, target, await _build_tree(log, target,
                                                                            project)))
    return done


def mirror_dir(url: str) -> Path:
    """Where this host keeps the mirror of the store at ``url``: under sessiontape's cache,
    one folder per server, database and options (never its password)."""
    parts = urlsplit(url)
    key = f"{parts.hostname}:{parts.port}/{parts.path}?{parts.query}#{parts.username}"
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(platformdirs.user_cache_dir("sessiontape")) / "stores" / name


def lock_mirror(mirror: Path) -> int:
    """The mirror's lock, taken exclusively (waiting for every other process's turn): a
    descriptor the caller holds while it refreshes the mirror, then turns shared
    (``fcntl.flock(fd, fcntl.LOCK_SH)``) and keeps open while it reads, so that no other
    process refreshes the mirror under it. Closing the descriptor (or exiting) lets go."""
    make_private_dir(mirror)
    fd = os.open(mirror / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


async def refresh_mirror(url: str, mirror: Path) -> list[MaterializedSession]:
    """Bring this host's mirror of the store at ``url`` up to date, in the layouts the
    environment names now (the CLI points them into ``mirror``, its :func:`mirror_dir`,
    first, and holds :func:`lock_mirror`; layouts anywhere else are refused): the store's
    rows copied whole into the skillet file, every log written, the tree of each
    conversation whose log changed rebuilt, the links pointed at those trees, and the logs
    and trees of conversations the store no longer has removed. Every verb that reads then
    reads the mirror as it reads this host's own recordings."""
    skillet, trees = SkilletPaths.resolve(), agentuse_data_root()
    if not all(path.is_relative_to(mirror) for path in (skillet.state, trees)):
        raise ValueError(f"the layouts ({skillet.state}, {trees}) are not a mirror's")
    await asyncio.to_thread(_copy_rows, url, skillet.store_file)
    done = await materialize(url, rebuild=True)
    await asyncio.to_thread(_relink, skillet.store_file, done)
    await asyncio.to_thread(_drop_gone, done, skillet.logs_root, trees)
    return done


def _drop_gone(done: list[MaterializedSession], logs_root: Path, trees: Path) -> None:
    """A mirror's logs and trees of conversations the store no longer has (cleared or
    renamed on any host): removed."""
    logs = {one.log.path for one in done}
    for path in logs_root.rglob("*.jsonl") if logs_root.is_dir() else ():
        if path not in logs:
            path.unlink()
            owner_record_path(path).unlink(missing_ok=True)
    kept = {one.tree for one in done}
    for tree in trees.glob("project/*/session/*"):
        if tree not in kept and is_real_dir(tree):
            shutil.rmtree(tree)


def _copy_rows(url: str, store_file: Path) -> None:
    """The store's rows, copied whole into a new file that then takes ``store_file``'s place."""
    make_private_dir(store_file.parent)
    fresh = store_file.with_name(f"{store_file.name}.new")
    for stale in (fresh, *(Path(f"{fresh}{end}") for end in ("-wal", "-shm"))):
        stale.unlink(missing_ok=True)
    copy_store(url, fresh, logs=False)
    for end in ("-wal", "-shm"):
        Path(f"{store_file}{end}").unlink(missing_ok=True)
    os.replace(fresh, store_file)


def _relink(store_file: Path, done: list[MaterializedSession]) -> None:
    """Each conversation's link pointed at its tree in the mirror."""
    with closing(connect(store_file)) as conn:
        conn.executemany(f"UPDATE {links.LINKS_TABLE} SET agentuse_dir = ? "
                         "WHERE user_id = ? AND session_name = ?",
                         [(str(one.tree), one.log.user_id, one.log.session_name)
                          for one in done if one.tree is not None])
