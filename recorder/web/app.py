"""The ASGI app of ``sessiontape serve``: read-only pages over the catalog and the layouts.

Pages (Jinja2 templates, escaped by default): ``/`` the sessions (filter, status, pages;
``/sessions/rows`` the table alone), ``/session/ID`` a transcript (``/session/ID/tail``
its turns from one on, ``/session/ID/call/N/PART`` a call's whole arguments or output),
``/search``, ``/usage``; ``/events`` the server-sent events that keep an open page live;
``/api/sessions``, ``/api/search``, ``/api/usage`` the same data as the CLI's ``--json``.
A conversation is named in a URL only by its catalog id (an integer), never by a path.

Every response has a Content-Security-Policy that allows only this server's own scripts
and styles (htmx, its SSE extension and uPlot are served from the package) and a
``Server-Timing`` header with the server's time. Requests whose ``Host`` is not one the
server answers to (loopback names, unless bound elsewhere on purpose) are refused, so a web
page elsewhere cannot read the sessions through DNS rebinding.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

import anyio
import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sessiontape.storage.catalog.conversation import LedgerSourceError
from sessiontape.storage.catalog.index import (
    SNIPPET_END,
    SNIPPET_START,
    Catalog,
    SearchHit,
    SearchSyntaxError,
)
from sessiontape.storage.catalog.sessions import SessionInfo
from sessiontape.storage.paths import Locations
from sessiontape.storage.text import cost_text, printable
from sessiontape.storage.times import shown_time

from .live import CatalogKeeper, Changes
from .views import call_text, read_transcript, usage_series

__all__ = ["LOOPBACK_HOSTS", "PAGE_SIZE", "create_app"]

PAGE_SIZE = 50
STATUSES = ("running", "completed", "failed", "crashed")
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]
_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
           "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
_HERE = files("sessiontape.web")
T = TypeVar("T")


class _Headers:
    """Adds the security headers and ``Server-Timing`` (the time to the first byte of the
    response) to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                spent = (time.perf_counter() - began) * 1000
                message["headers"] = [*message.get("headers", []),
                                      (b"content-security-policy", _POLICY.encode()),
                                      (b"x-content-type-options", b"nosniff"),
                                      (b"referrer-policy", b"no-referrer"),
                                      (b"server-timing", f"app;dur={spent:.2f}".encode())]
            await send(message)

        await self.app(scope, receive, sending)


def _marked(snippet: str) -> Markup:
    """A search snippet as HTML: its text escaped, the matched words in ``<mark>``."""
    def shown(text: str) -> Markup:
        return escape(printable(text, one_line=True))

    first, *marked = snippet.split(SNIPPET_START)
    html = shown(first)
    for piece in marked:
        match, _, rest = piece.partition(SNIPPET_END)
        html += Markup("<mark>") + shown(match) + Markup("</mark>") + shown(rest)
    return html


def _templates() -> Environment:
    environment = Environment(loader=FileSystemLoader(str(_HERE / "templates")),
                              autoescape=select_autoescape(["html"]), trim_blocks=True,
                              lstrip_blocks=True)
    environment.filters.update(
        cost=cost_text, when=shown_time, line=lambda text: printable(str(text), one_line=True),
        count=lambda n: f"{n:,}" if isinstance(n, int) else "-", marked=_marked)
    return environment


class _Site:
    """What the routes share: the catalog's path, the templates, the changes."""

    def __init__(self, catalog_path: Path) -> None:
        self.catalog_path = catalog_path
        self.templates = _templates()
        self.changes: Changes | None = None

    def catalog(self) -> Catalog:
        return Catalog(self.catalog_path)

    def page(self, name: str, request: Request, status_code: int = 200,
             **context: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(request=request, **context)
        return HTMLResponse(html, status_code=status_code)

    def streamed(self, name: str, request: Request, **context: Any) -> StreamingResponse:
        """A page written as it is rendered (a long transcript shows while it arrives)."""
        chunks = self.templates.get_template(name).generate(request=request, **context)
        return StreamingResponse(iterate_in_threadpool(chunks), media_type="text/html")

    def info(self, row_id: int) -> SessionInfo | None:
        with self.catalog() as catalog:
            return catalog.by_id(row_id)


MAX_NUMBER = 10**9  # of a page or a turn: beyond, SQLite's integers would overflow


def _number(request: Request, name: str, default: int) -> int:
    """A whole-number parameter, from 0 to :data:`MAX_NUMBER`; ``default`` when it is not
    a number."""
    try:
        return min(MAX_NUMBER, max(0, int(request.query_params.get(name, default))))
    except ValueError:
        return default


def _listing(site: _Site, request: Request) -> dict[str, Any]:
    text = request.query_params.get("q", "").strip()
    status = request.query_params.get("status") or None
    status = status if status in STATUSES else None
    number = max(1, _number(request, "page", 1))
    with site.catalog() as catalog:
        total, rows = catalog.page(text=text or None, status=status,
                                   offset=(number - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    return {"rows": rows, "total": total, "q": text, "status": status, "statuses": STATUSES,
            "page": number, "pages": max(1, math.ceil(total / PAGE_SIZE))}


async def _until_stopped(awaited: Awaitable[T], stopping: anyio.Event) -> T | None:
    """What ``awaited`` gives, or None once ``stopping`` is set first."""
    task = asyncio.ensure_future(awaited)
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, stopped):
            pending.cancel()
    return task.result() if task.done() and not task.cancelled() else None


def _routes(site: _Site) -> list[Route | Mount]:
    def sessions(request: Request) -> HTMLResponse:
        return site.page("sessions.html", request, **_listing(site, request))

    def sessions_rows(request: Request) -> HTMLResponse:
        return site.page("_rows.html", request, **_listing(site, request))

    def session(request: Request) -> Response:
        row_id = request.path_params["id"]
        info = site.info(row_id)
        if info is None:
            return site.page("gone.html", request, 404, row_id=row_id)
        try:
            transcript = read_transcript(info)
        except LedgerSourceError as exc:
            return site.page("gone.html", request, 404, row_id=row_id, why=str(exc))
        return site.streamed("session.html", request, row_id=row_id, t=transcript,
                             first=1)

    def session_tail(request: Request) -> Response:
        """The turns from ``from`` on, replacing the page's last turn (the one that may
        still be going on) and adding those after it."""
        row_id = request.path_params["id"]
        info = site.info(row_id)
        try:
            transcript = read_transcript(info) if info is not None else None
        except LedgerSourceError:
            transcript = None
        if transcript is None:
            return site.page("_gone_tail.html", request, row_id=row_id)
        first = max(1, _number(request, "from", 1))
        return site.page("_tail.html", request, row_id=row_id, t=transcript, first=first)

    def call(request: Request) -> Response:
        row_id, number, part = (request.path_params[k] for k in ("id", "number", "part"))
        info = site.info(row_id)
        if part not in ("arguments", "output") or info is None:
            return Response("not found", 404, media_type="text/plain")
        try:
            shown = call_text(info, number, part)
        except LedgerSourceError:
            shown = None
        if shown is None:
            return Response("not found", 404, media_type="text/plain")
        return site.page("_text.html", request, shown=shown)

    def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        hits: list[SearchHit] = []
        ids: list[int | None] = []
        problem = None
        if query:
            try:
                with site.catalog() as catalog:
                    hits = catalog.search(query, limit=100)
                    ids = catalog.ids_of(hits)
            except SearchSyntaxError as exc:
                problem = str(exc)
        return site.page("search.html", request, q=query, hits=hits, hit_ids=ids,
                         problem=problem)

    def usage(request: Request) -> Response:
        with site.catalog() as catalog:
            daily = catalog.usage("daily", breakdown=True)
            models = catalog.usage("model")
        series = orjson.dumps(usage_series(daily)).decode()
        return site.page("usage.html", request, daily=daily, models=models, series=series)

    def api_sessions(request: Request) -> JSONResponse:
        listing = _listing(site, request)
        return JSONResponse({"total": listing["total"], "page": listing["page"],
                             "sessions": [{"id": row.id, **row.info.to_json()}
                                          for row in listing["rows"]]})

    def api_search(request: Request) -> JSONResponse:
        query = request.query_params.get("q", "")
        try:
            with site.catalog() as catalog:
                hits = catalog.search(query, limit=min(500, _number(request, "limit", 50)))
        except SearchSyntaxError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        return JSONResponse([hit.to_json() for hit in hits])

    def api_usage(request: Request) -> JSONResponse:
        group = request.query_params.get("group", "daily")
        try:
            with site.catalog() as catalog:
                rows = catalog.usage(group)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        return JSONResponse([row.to_json(group) for row in rows])

    async def events(request: Request) -> EventSourceResponse:
        changes = site.changes
        assert changes is not None
        subscription = changes.subscribe()
        stopping = anyio.Event()  # set by sse-starlette when the server shuts down

        async def stream() -> AsyncIterator[dict[str, str]]:
            try:
                yield {"event": "hello", "data": "live"}
                while True:
                    changed = await _until_stopped(subscription.next(), stopping)
                    if changed is None:
                        return  # the response ends whole, so the server can stop at once
                    # "sessions" first, then each conversation's
                    for name in sorted(changed, key=lambda name: (name != "sessions", name)):
                        yield {"event": name, "data": name}
            finally:
                changes.unsubscribe(subscription)

        return EventSourceResponse(stream(), ping=15, send_timeout=10,
                                   shutdown_event=stopping, shutdown_grace_period=1)

    return [
        Route("/", sessions), Route("/sessions/rows", sessions_rows),
        Route("/session/{id:int}", session), Route("/session/{id:int}/tail", session_tail),
        Route("/session/{id:int}/call/{number:int}/{part}", call),
        Route("/search", search), Route("/usage", usage),
        Route("/api/sessions", api_sessions), Route("/api/search", api_search),
        Route("/api/usage", api_usage), Route("/events", events),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]


def create_app(where: Locations, catalog_path: Path, *, allowed_hosts: list[str] | None = None,
               live: bool = True) -> Starlette:
    """The app over the catalog at ``catalog_path`` (refreshed already) and the layouts of
    ``where``. ``allowed_hosts``: the ``Host`` names it answers (default: loopback's);
    ``live``: a :class:`CatalogKeeper` keeps the catalog current while it runs."""
    site = _Site(catalog_path)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        site.changes = Changes(asyncio.get_running_loop())
        keeper = CatalogKeeper(where, catalog_path, site.changes) if live else None
        if keeper is not None:
            keeper.start()
        app.state.keeper = keeper
        try:
            yield
        finally:
            if keeper is not None:
                keeper.stop()
                await run_in_threadpool(keeper.join, 5)

    hosts = allowed_hosts if allowed_hosts is not None else LOOPBACK_HOSTS
    return Starlette(routes=_routes(site), lifespan=lifespan, middleware=[
        Middleware(_Headers), Middleware(TrustedHostMiddleware, allowed_hosts=hosts)])
