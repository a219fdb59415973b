"""Writes the AgentUse tree: session.json, tools.json, message.json and parts.

Every file is rewritten whole and atomically (temp file + rename) with
AgentUse's byte-level JSON rules (:func:`sessiontape.storage.json_style.dumps_pretty`).
The objects here keep the current document of each file in memory, so an
update changes a few fields and rewrites the file, at once or, batched by
:class:`DocumentWrites`, once per burst of updates. They are not thread-safe:
one writer (the recorder's writer thread) owns them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..events import Tokens
from ..file_writes import FileWorker, write_here
from ..files import atomic_write, make_private_dir
from ..ids import is_ulid, new_ulid
from ..json_style import dumps_compact, dumps_pretty
from ..names import not_a_link, safe_join, sanitize_agent_name
from ..times import now_ms
from ..version import __version__
from .reader import (
    SESSION_FILE,
    SUBAGENT_DIR,
    CorruptFileError,
    DamagedFileError,
    read_json_object,
)

__all__ = [
    "FORMAT",
    "WRITER_VERSION",
    "AgentUseMessage",
    "AgentUsePart",
    "AgentUseSession",
    "DocumentWrites",
    "Tokens",
    "drop_none",
]

WRITER_VERSION = f"sessiontape/{__version__}"
# The tree's format, in session.json's ``format``: what a reader dispatches on (AgentUse's
# own sessions have no such key; docs/formats.md, "Format versions").
FORMAT = "sessiontape-agentuse/2"
MAX_DETAIL = 4000  # characters of an error's ``detail`` kept (AgentUse's cap)
Encoder = Callable[[Any], bytes]  # a document as a file's bytes


def drop_none(**fields: Any) -> dict[str, Any]:
    """The given fields in order, without those that are None (AgentUse omits, never nulls)."""
    return {key: value for key, value in fields.items() if value is not None}


class DocumentWrites:
    """Where a session tree's documents go: to disk at once, or batched.

    Batched (``deferred=True``, what the recorder's writer thread uses), each
    file is written once per :meth:`flush` with its latest content, in the
    order the files were first touched (a session before its messages, a
    message before its parts), so several updates of one file in a burst of
    events cost one atomic rewrite. With a ``worker``
    (:class:`~sessiontape.storage.file_writes.FileWorker`), the batch is written
    by its helper process.
    """

    def __init__(self, deferred: bool = False, worker: FileWorker | None = None) -> None:
        self.deferred = deferred
        self.worker = worker
        self._pending: dict[Path, tuple[Callable[[], dict[str, Any]], Encoder]] = {}

    def put(self, path: Path, document: Callable[[], dict[str, Any]],
            encode: Encoder = dumps_pretty) -> None:
        """Write ``encode(document())`` to ``path`` now, or at the next :meth:`flush`
        (default: two-space indented, as AgentUse writes its files)."""
        if self.deferred:
            # an existing key keeps its place in the order
            self._pending[path] = (document, encode)
        else:
            atomic_write(path, encode(document()))

    def flush(self) -> None:
        """Write every pending file; a failure skips that file only, then is raised."""
        pending, self._pending = self._pending, {}
        files = [(path, encode(document())) for path, (document, encode) in pending.items()]
        if self.worker is not None:
            self.worker.write(files)
        else:
            write_here(files)


class AgentUsePart:
    """One ``part/{partID}.json``; :meth:`update` rewrites it.

    ``part_id`` is an id set aside earlier (:meth:`AgentUseMessage.reserve_ids`);
    default: a new one, after every id made before.
    """

    def __init__(self, message: AgentUseMessage, fields: dict[str, Any],
                 part_id: str | None = None, *, save: bool = True) -> None:
        self.id = part_id or new_ulid()
        self.message = message
        self.fields = fields
        self.path = message.directory / "part" / f"{self.id}.json"
        if save:
            self.save()

    @property
    def document(self) -> dict[str, Any]:
        """The part as written: its fields, then ``id, sessionID, messageID``."""
        return {**self.fields, "id": self.id, "sessionID": self.message.session.id,
                "messageID": self.message.id}

    def update(self, **fields: Any) -> None:
        """Replace the given top-level fields and rewrite the file."""
        self.fields.update(fields)
        self.save()

    def save(self) -> None:
        """Rewrite the part file from :attr:`fields`."""
        self.message.session.writes.put(self.path, lambda: self.document)


class AgentUseMessage:
    """One exchange: ``{messageID}/message.json`` and its ``part/`` directory."""

    def __init__(self, session: AgentUseSession, info: dict[str, Any], directory: Path) -> None:
        self.session = session
        self.info = info
        self.directory = directory
        self._part_dir_made = False

    @property
    def id(self) -> str:
        return str(self.info["id"])

    @property
    def tokens(self) -> Tokens:
        """The exchange's token totals so far."""
        return Tokens.from_json(self.info["assistant"]["tokens"])

    def add_part(self, part_type: str, *, part_id: str | None = None,
                 **fields: Any) -> AgentUsePart:
        """Write a new part of ``part_type``; None-valued fields are omitted.

        Its id is ``part_id`` when given (one of :meth:`reserve_ids`), else a new one,
        which sorts after every part made before (so part ids tell the true order)."""
        if not self._part_dir_made:
            make_private_dir(self.directory / "part")
            self._part_dir_made = True
        return AgentUsePart(self, {"type": part_type, **drop_none(**fields)}, part_id)

    @staticmethod
    def reserve_ids(count: int) -> list[str]:
        """``count`` part ids, in order, set aside now for parts written later that must
        sort before the parts added from now on (a streamed call's reasoning, which
        arrives after the text it led to). An id not used is simply never written."""
        return [new_ulid() for _ in range(count)]

    @classmethod
    def open_last(cls, session: AgentUseSession) -> AgentUseMessage | None:
        """The session's latest exchange, to go on with (None if it has none)."""
        names = sorted(entry.name for entry in session.directory.iterdir()
                       if entry.is_dir() and (entry / "message.json").is_file())
        if not names:
            return None
        directory = safe_join(session.directory, names[-1])
        return cls(session, read_json_object(directory / "message.json"), directory)

    def open_parts(self, part_type: str) -> list[AgentUsePart]:
        """This exchange's parts of ``part_type`` already on disk, in id order."""
        directory = self.directory / "part"
        if not directory.is_dir():
            return []
        self._part_dir_made = True
        parts = []
        for path in sorted(directory.glob("*.json")):
            document = read_json_object(path)
            if document.get("type") == part_type:
                fields = {k: v for k, v in document.items()
                          if k not in ("id", "sessionID", "messageID")}
                parts.append(AgentUsePart(self, fields, str(document.get("id") or path.stem),
                                          save=False))
        return parts

    def set_model(self, model: str) -> None:
        """``modelID`` (``provider:model``) and ``providerID`` of the exchange's answer (the
        model of its latest call: after a handoff, the new agent's), and ``models``: every
        model that answered in the exchange, in order of first answer (sessiontape's key);
        saved with the next write of the file."""
        if model:
            assistant = self.info["assistant"]
            assistant["modelID"] = model
            assistant["providerID"] = model.split(":", 1)[0] if ":" in model else ""
            models = assistant.setdefault("models", [])
            if model not in models:
                models.append(model)

    def add_usage(self, tokens: Tokens, cost: float) -> None:
        """Add one model call's usage to the exchange's totals and rewrite the file."""
        assistant = self.info["assistant"]
        assistant["tokens"] = (self.tokens + tokens).to_json()
        assistant["cost"] = assistant["cost"] + cost
        self.save()

    def complete(self, at: int | None = None) -> None:
        """Mark the exchange finished (``time.completed``)."""
        self.info["time"]["completed"] = at if at is not None else now_ms()
        self.save()

    def add_error(self, message: str, *, code: str | None = None, detail: str | None = None,
                  status_code: int | None = None, source: str = "agent",
                  at: int | None = None) -> AgentUsePart:
        """AgentUse's ``error`` part, the failure of a run as its session log shows it:
        ``{type: "error", source, message, [code], [detail], [statusCode], time: {start}}``
        then the base fields (AgentUse's key order; an empty or absent field is omitted,
        as AgentUse omits it). ``detail`` is cut at 4000 characters."""
        if detail and len(detail) > MAX_DETAIL:
            detail = detail[:MAX_DETAIL]
        return self.add_part("error", source=source, message=message, code=code or None,
                             detail=detail or None,
                             statusCode=status_code if isinstance(status_code, int) else None,
                             time={"start": at if at is not None else now_ms()})

    def fail(self, message: str, error_type: str | None = None) -> None:
        """Record the exchange's error; ``time.completed`` stays absent."""
        self.info["assistant"]["error"] = drop_none(message=message, type=error_type)
        self.save()

    def save(self) -> None:
        """Rewrite ``message.json`` from :attr:`info`."""
        self.session.writes.put(self.directory / "message.json", lambda: self.info)


def _first_created(directory: Path, default: int) -> int:
    """The earliest ``time.created`` of the session's exchanges whose ``message.json``
    reads (``default`` when none does)."""
    with os.scandir(directory) as entries:
        exchanges = [Path(entry.path) for entry in entries
                     if is_ulid(entry.name) and entry.is_dir(follow_symlinks=False)]
    created = []
    for exchange in exchanges:
        try:
            times = read_json_object(exchange / "message.json").get("time")
        except CorruptFileError:
            continue
        at = times.get("created") if isinstance(times, dict) else None
        if isinstance(at, int) and not isinstance(at, bool):
            created.append(at)
    return min(created, default=default)


class AgentUseSession:
    """One session directory ``{sessionID}-{agentName}/``.

    Create a new one with :meth:`create` (or :meth:`create_subagent` for a
    nested one), or continue an existing one with :meth:`open`.
    """

    def __init__(self, directory: Path, info: dict[str, Any],
                 writes: DocumentWrites | None = None) -> None:
        self.directory = directory
        self.info = info
        self.writes = writes if writes is not None else DocumentWrites()

    @property
    def id(self) -> str:
        return str(self.info["id"])

    @classmethod
    def create(
        cls,
        root: Path,
        agent_name: str,
        *,
        model: str,
        project_root: str,
        cwd: str,
        max_steps: int | None = None,
        description: str | None = None,
        parent: AgentUseSession | None = None,
        trigger: str = "manual",
        config: dict[str, Any] | None = None,
        created: int | None = None,
        session_id: str | None = None,
        directory: Path | None = None,
        writes: DocumentWrites | None = None,
    ) -> AgentUseSession:
        """Create ``root/{ULID}-{sanitized agent name}/session.json`` with status ``running``.

        ``root`` is a project's ``session/`` directory (see
        :func:`sessiontape.storage.paths.agentuse_sessions_root`). ``config`` holds extra
        config fields (``timeout``, ``mcpServers``, ``subagents``). ``session_id``
        is a ULID the caller made beforehand (default: a new one); ``directory``
        a session directory chosen beforehand too (default: named from the id
        and the agent). ``writes`` batches the files of the whole tree (default:
        each written at once).
        """
        session_id = session_id or new_ulid()
        if directory is None:
            directory = safe_join(root, f"{session_id}-{sanitize_agent_name(agent_name)}")
        created = created if created is not None else now_ms()
        info = drop_none(
            parentSessionID=parent.id if parent else None,
            agent=drop_none(id=agent_name, name=agent_name, description=description or None,
                            isSubAgent=parent is not None),
            model=model,
            version=WRITER_VERSION,
            config=drop_none(maxSteps=max_steps, **(config or {})),
            project={"root": project_root, "cwd": cwd},
            id=session_id,
            status="running",
            trigger=trigger,
            time={"created": created, "updated": created},
            format=FORMAT,
        )
        make_private_dir(directory)
        session = cls(directory, info, writes)
        session.save()
        return session

    def create_subagent(self, agent_name: str, **kwargs: Any) -> AgentUseSession:
        """Create a nested session under ``subagent/`` whose parent is this one."""
        kwargs.setdefault("project_root", self.info["project"]["root"])
        kwargs.setdefault("cwd", self.info["project"]["cwd"])
        return AgentUseSession.create(self.directory / SUBAGENT_DIR, agent_name,
                                      parent=self, writes=self.writes, **kwargs)

    @classmethod
    def open(cls, directory: Path, writes: DocumentWrites | None = None) -> AgentUseSession:
        """Continue the session in ``directory`` (its session.json must parse; a
        symbolic link is refused with UnsafePathError, never written through)."""
        return cls(not_a_link(directory), read_json_object(directory / SESSION_FILE), writes)

    @classmethod
    def recover(cls, directory: Path, damage: DamagedFileError, agent_name: str, *, at: int,
                writes: DocumentWrites | None = None, **kwargs: Any) -> AgentUseSession:
        """A new ``session.json`` for the top-level session in ``directory``, whose own is
        damaged (``damage``): its id from the directory's name, its creation its first
        exchange's (else ``at``), the rest as :meth:`create` writes it for ``agent_name``
        and ``kwargs``, and ``recovered``: ``{at, reason, kept}``. The damaged bytes are
        kept beside it as ``kept``, ``session.json.corrupt-<at>`` (0600), never deleted."""
        kept = f"{SESSION_FILE}.corrupt-{at}"
        atomic_write(safe_join(not_a_link(directory), kept), damage.content)
        session = cls.create(directory.parent, agent_name, writes=writes, directory=directory,
                             session_id=directory.name.partition("-")[0],
                             created=_first_created(directory, at), **kwargs)
        session.info["recovered"] = {"at": at, "reason": damage.reason, "kept": kept}
        session.save()
        return session

    def write_tools(self, tools: list[dict[str, Any]]) -> None:
        """Write ``tools.json``: ``{"tools": [{name, [description], [inputSchema]}]}``, compact.

        AgentUse reads it only with ``JSON.parse`` (``readToolsSnapshot``, on a resume), so
        whitespace means nothing to it, and indenting the schemas cost 60% of the file."""
        self.writes.put(self.directory / "tools.json", lambda: {"tools": tools}, dumps_compact)

    def set_status(self, status: str, *, error: dict[str, Any] | None = None,
                   at: int | None = None) -> None:
        """Set ``status`` (``running``, ``completed``, ``error``...), bump ``time.updated``.

        ``error`` holds ``code`` (default ``EXECUTION_ERROR``), ``message`` and optionally
        ``statusCode``, ``url``, ``detail`` (cut at 4000 characters); it is written in
        AgentUse's key order, ``{code, message, [statusCode], [url], [detail], time}``
        (``time`` is ``at``), and removed when the status is not ``error``.
        """
        at = at if at is not None else now_ms()
        self.info["status"] = status
        self.info["time"]["updated"] = at
        if error is not None:
            fields = {k: v for k, v in error.items() if k != "time"}
            detail = fields.get("detail")
            if isinstance(detail, str) and len(detail) > MAX_DETAIL:
                fields["detail"] = detail[:MAX_DETAIL]
            ordered: dict[str, Any] = {"code": fields.pop("code", "EXECUTION_ERROR")}
            if "message" in fields:
                ordered["message"] = fields.pop("message")
            self.info["error"] = {**ordered, **fields, "time": at}
        elif status != "error":
            self.info.pop("error", None)
        self.save()

    def set_model(self, model: str) -> None:
        """``model``: the model that answered last (after a handoff, the new agent's, which
        AgentUse's ``sessions show`` prints as ``Model:``); rewritten only when it changes,
        ``time.updated`` left as it is (it moves with the status)."""
        if model and self.info.get("model") != model:
            self.info["model"] = model
            self.save()

    def add_message(self, task: str, *, user: str | None = None, system: list[str] | None = None,
                    mode: str = "build", created: int | None = None) -> AgentUseMessage:
        """Start an exchange: ``{messageID}/message.json`` with zero usage."""
        message_id = new_ulid()
        directory = safe_join(self.directory, message_id)
        model = str(self.info.get("model", ""))
        provider = model.split(":", 1)[0] if ":" in model else ""
        project = self.info.get("project", {})
        info = {
            "id": message_id,
            "sessionID": self.id,
            "time": {"created": created if created is not None else now_ms()},
            "user": {"prompt": drop_none(task=task, user=user)},
            "assistant": {
                "system": list(system or []),
                "modelID": model,
                "providerID": provider,
                "mode": mode,
                "path": {"cwd": project.get("cwd", ""), "root": project.get("root", "")},
                "cost": 0,
                "tokens": Tokens().to_json(),
            },
        }
        make_private_dir(directory)
        message = AgentUseMessage(self, info, directory)
        message.save()
        return message

    def save(self) -> None:
        """Rewrite ``session.json`` from :attr:`info`."""
        self.writes.put(self.directory / "session.json", lambda: self.info)
