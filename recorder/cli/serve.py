"""``sessiontape serve``: the local web viewer (the ``web`` extra)."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import VERBS
from .console import EXIT_FAILURE, EXIT_OK, eprint, plural, printable, say_extra_missing

PROG = "sessiontape serve"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765  # as sessiontape.web's, without importing it


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the pages until Ctrl-C."""
    try:
        from sessiontape.web import Served, ServeError, is_loopback, serve
    except ImportError as exc:
        return say_extra_missing(PROG, "the web viewer", "web", exc)

    def ready(served: Served) -> None:
        if served.catalog_note:
            eprint(printable(f"{PROG}: {served.catalog_note}"))
        print(f"{PROG}: {plural(served.conversations, 'conversation')} at {served.url} "
              "(read-only; Ctrl-C stops)", flush=True)
        if not is_loopback(args.host):
            eprint(f"{PROG}: listening on {args.host}, beyond this machine: anyone who can "
                   "reach it reads every recorded conversation (no login)")

    try:
        serve(host=args.host, port=args.port, project=args.project,
              open_browser=args.open, ready=ready)
    except ServeError as exc:
        eprint(printable(f"{PROG}: {exc}"))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = verbs.add_parser(
        "serve", help=VERBS["serve"].help,
        description="Serve a local, read-only web viewer of every recorded conversation: "
                    "the sessions (filter, status, pages), each transcript, search and "
                    "usage charts, updated live while conversations are recorded. It "
                    "listens on loopback only unless --host names another address.")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"the address to listen on (default {DEFAULT_HOST}; another "
                             "one exposes every conversation to whoever reaches it)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the port (default {DEFAULT_PORT}; 0: any free one)")
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    parser.add_argument("--project", type=Path, default=None, metavar="DIR",
                        help="the project whose AgentUse sessions to show "
                             "(default: the current directory)")
    parser.set_defaults(handler=cmd_serve)
