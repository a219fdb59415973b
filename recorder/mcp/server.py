"""The MCP server's tools: the catalog's list, show, search and usage, bounded and paged.

Every call brings the catalog in line with the layouts first (as each CLI verb does: only
what changed is re-read), then answers from it. Results are the JSON of the CLI's
``--json``; lists are paged (``offset``, ``limit``, and ``next_offset`` when there is
more), and every text longer than ``max_text`` characters is cut with a note saying how
much was left out, so that no answer exceeds :data:`MAX_RESULT_CHARS` (a transcript is
paged by turns). Nothing is written but the catalog, a cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from sessiontape.storage.catalog.index import GROUPS, Catalog, CatalogUnavailable
from sessiontape.storage.catalog.sessions import (
    NoSuchTurnError,
    SessionLookupError,
)
from sessiontape.storage.catalog.sessions import show_session as session_view
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.names import AmbiguousUserError
from sessiontape.storage.paths import Locations
from sessiontape.storage.times import parse_since

__all__ = ["MAX_RESULT_CHARS", "make_server", "run"]

MAX_RESULT_CHARS = 200_000  # of one answer's JSON: past it, texts are cut harder
MAX_LIMIT = 200  # items in one page
INSTRUCTIONS = (
    "Read-only access to the agent sessions recorded by sessiontape (OpenAI Agents SDK runs, "
    "skilled_crew and AgentUse sessions): list_sessions to find them, show_session for a "
    "transcript (paged by turns), search_sessions for full-text search over every prompt, "
    "answer, reasoning, tool argument and output, usage for tokens and cost.")


def _cut(value: Any, max_text: int) -> Any:
    """``value`` with every string longer than ``max_text`` cut, saying what was left."""
    if isinstance(value, str) and len(value) > max_text:
        return f"{value[:max_text]}… [{len(value) - max_text} more characters]"
    if isinstance(value, dict):
        return {key: _cut(item, max_text) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut(item, max_text) for item in value]
    return value


def _bounded(value: Any, max_text: int) -> Any:
    """``value`` cut to ``max_text`` characters a text, and harder until its JSON fits in
    :data:`MAX_RESULT_CHARS`."""
    cut = _cut(value, max_text)
    while len(dumps_compact(cut)) > MAX_RESULT_CHARS and max_text > 50:
        max_text //= 4
        cut = _cut(value, max_text)
    return cut


def _page(items: list[Any], offset: int, total: int) -> dict[str, Any]:
    after = offset + len(items)
    return {"total": total, "offset": offset, "next_offset": after if after < total else None}


def _offset(offset: int) -> int:
    """An offset from 0 to 10**9 (beyond, SQLite's integers would overflow)."""
    return min(max(0, offset), 10**9)


def _limit(limit: int) -> int:
    if limit < 1:
        raise ToolError("limit must be at least 1")
    return min(limit, MAX_LIMIT)


def _since(text: str | None) -> Any:
    if not text:
        return None
    try:
        return parse_since(text)
    except ValueError as exc:
        raise ToolError(str(exc)) from None


class _Catalog:
    """A catalog in line with the layouts of ``project``, for one call."""

    def __init__(self, project: Path | None) -> None:
        self.where = Locations.resolve(project_root=project)

    def __enter__(self) -> Catalog:
        self.catalog = Catalog()
        try:
            self.catalog.refresh(self.where)
        except CatalogUnavailable:
            self.catalog.close()
            self.catalog = Catalog.in_memory()
            self.catalog.refresh(self.where)
        return self.catalog

    def __exit__(self, *exc: object) -> None:
        self.catalog.close()


def make_server(project: Path | None = None) -> MCPServer:
    """The MCP server over the sessions of ``project``'s environment (default: the working
    directory's AgentUse project, the skillet store and logs)."""
    server: MCPServer = MCPServer("sessiontape", instructions=INSTRUCTIONS)

    @server.tool()
    def list_sessions(query: str | None = None, user: str | None = None,
                      status: str | None = None, since: str | None = None, offset: int = 0,
                      limit: int = 50) -> dict[str, Any]:
        """Recorded sessions, newest activity first, as `sessiontape sessions list --json`
        gives each (name, user, origin, turns, items, tokens, cost, usage, first and last
        activity, paths, agent, status). query: text in the name, user or agent (case
        ignored); user: as people type it ("carol" for carol@example.com); status: running,
        completed, failed or crashed; since: "7d", "2h" or an ISO time. Paged: offset,
        limit (at most 200); next_offset is null on the last page."""
        try:
            with _Catalog(project) as catalog:
                total, rows = catalog.page(text=query, status=status, user=user,
                                           since=_since(since), offset=_offset(offset),
                                           limit=_limit(limit))
        except AmbiguousUserError as exc:
            raise ToolError(str(exc)) from None
        sessions = [row.info.to_json() for row in rows]
        return {"sessions": _bounded(sessions, 500), **_page(sessions, _offset(offset), total)}

    @server.tool()
    def show_session(name: str, user: str | None = None, from_turn: int = 1,
                     turns: int = 10, max_text: int = 4000) -> dict[str, Any]:
        """One session's transcript, as `sessiontape sessions show NAME --json` gives it:
        the session, then each turn with its prompt, the agent's answers, reasoning, tool
        calls with their arguments and outputs, subagents, and its usage. name: the
        session's name or the start of its AgentUse id; user: as people type it. Paged by
        turns: from_turn (1-based), turns (at most 200); next_turn is null after the last.
        Texts longer than max_text characters are cut, saying how many were left out."""
        if from_turn < 1:
            raise ToolError("from_turn must be at least 1")
        try:
            with _Catalog(project) as catalog:
                found = catalog.find(name, catalog.user(user) if user is not None else None,
                                     where=Locations.resolve(project_root=project))
            view = session_view(found).to_json()
        except (SessionLookupError, AmbiguousUserError, NoSuchTurnError) as exc:
            raise ToolError(str(exc)) from None
        every = view.pop("turns")
        shown = every[from_turn - 1:from_turn - 1 + _limit(turns)]
        after = from_turn + len(shown)
        view.update(turns=shown, turns_total=len(every), from_turn=from_turn,
                    next_turn=after if after <= len(every) else None)
        return dict(_bounded(view, max(50, max_text)))

    @server.tool()
    def search_sessions(query: str, user: str | None = None, agent: str | None = None,
                        tool: str | None = None, kind: str | None = None,
                        since: str | None = None, offset: int = 0,
                        limit: int = 20) -> dict[str, Any]:
        """Full-text search over every recorded session, best match first, as `sessiontape
        search --json` gives each hit (session, user, turn, kind, snippet, agent, tool,
        at). query: words as written, "phrases", prefix*, OR/NOT/AND; any text is a
        query. kind: user, answer, reasoning, tool_args, tool_output or error. Paged: offset,
        limit (at most 200)."""
        start = _offset(offset)
        try:
            with _Catalog(project) as catalog:
                hits = catalog.search(query, user=user, agent=agent, tool=tool, kind=kind,
                                      since=_since(since), limit=start + _limit(limit) + 1)
        except AmbiguousUserError as exc:
            raise ToolError(str(exc)) from None
        page = [hit.to_json() for hit in hits[start:start + _limit(limit)]]
        more = len(hits) > start + len(page)
        return {"hits": _bounded(page, 1000), "offset": start,
                "next_offset": start + len(page) if more else None}

    @server.tool()
    def usage(group: str = "daily", since: str | None = None, until: str | None = None,
              user: str | None = None, breakdown: bool = False) -> dict[str, Any]:
        """Tokens and cost of every recorded model call, summed per group (daily, weekly,
        monthly, session, model, agent), as `sessiontape usage GROUP --json` gives each
        row; since and until: "30d" or an ISO time; breakdown: each row's calls per model
        (not for the model group)."""
        if group not in GROUPS:
            raise ToolError(f"unknown group {group!r}; one of {', '.join(GROUPS)}")
        try:
            with _Catalog(project) as catalog:
                rows = catalog.usage(group, since=_since(since), until=_since(until),
                                     user=user, breakdown=breakdown)
        except (AmbiguousUserError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return {"rows": _bounded([row.to_json(group) for row in rows], 500)}

    return server


def run(project: Path | None = None) -> None:
    """Serve over stdio until the client closes its end."""
    make_server(project).run("stdio")
