"""``sessiontape serve``: a local, read-only web viewer of every recorded conversation, live.

:func:`serve` brings the catalog up to date, binds the address (loopback unless another
host is given on purpose) and runs the app of :mod:`~sessiontape.web.app` under uvicorn
until interrupted; :func:`create_app` is the ASGI app alone (to mount elsewhere, or to
test). Needs the ``web`` extra (``pip install 'sessiontape[web]'``: Starlette, uvicorn,
sse-starlette, Jinja2). Pages and what keeps them live: docs/web.md.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import tempfile
import webbrowser
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from sessiontape.storage.catalog.index import Catalog, CatalogUnavailable
from sessiontape.storage.paths import Locations

from .app import LOOPBACK_HOSTS, create_app

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ServeError", "Served", "create_app",
           "is_loopback", "serve"]

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765


class ServeError(Exception):
    """The server cannot start: the address is in use or cannot be bound."""


@dataclass(frozen=True)
class Served:
    """Where the server listens, and what it serves."""

    url: str
    conversations: int
    catalog: Path
    catalog_note: str | None  # why a private catalog is used instead of the shared one


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # TCP's own protocol number: asyncio turns Nagle off only on connections accepted from
    # such a socket (with 0, a response after the first on a kept-alive connection waited
    # ~40 ms for the client's delayed ACK)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(f"port {port} on {host} is in use: give another with --port "
                             "(--port 0: any free one)") from None
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _catalog(where: Locations, stack: ExitStack) -> tuple[Path, int, str | None]:
    """The catalog to serve from, refreshed: the shared one, else (locked, read-only, of a
    newer sessiontape) a private one in a temporary directory, built from the layouts."""
    try:
        with Catalog() as catalog:
            summary = catalog.refresh(where)
            return catalog.path, summary.conversations, None
    except CatalogUnavailable as exc:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(  # mode 0700
            prefix="sessiontape-serve-")))
        path = directory / "catalog.sqlite"
        with Catalog(path) as catalog:
            summary = catalog.refresh(where)
        return path, summary.conversations, f"{exc}; serving from a private catalog"


def serve(*, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          project: Path | None = None, open_browser: bool = False,
          ready: Callable[[Served], None] | None = None) -> None:
    """Serve the pages until interrupted (Ctrl-C, SIGTERM). ``ready`` is told where, once
    the address is bound and the catalog current. A host other than loopback's is answered
    under any name (it was asked for). Raises :class:`ServeError`."""
    import uvicorn

    where = Locations.resolve(project_root=project)
    with ExitStack() as stack:
        catalog_path, conversations, note = _catalog(where, stack)
        sock = stack.enter_context(_bound(host, port))
        bound_port = sock.getsockname()[1]
        shown_host = f"[{host.strip('[]')}]" if ":" in host else host
        url = f"http://{shown_host}:{bound_port}/"
        app = create_app(where, catalog_path,
                         allowed_hosts=LOOPBACK_HOSTS if is_loopback(host) else ["*"])
        server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", access_log=False, timeout_graceful_shutdown=2,
            lifespan="on"))
        if ready is not None:
            ready(Served(url, conversations, catalog_path, note))
        if open_browser:
            webbrowser.open(url)
        server.run(sockets=[sock])
