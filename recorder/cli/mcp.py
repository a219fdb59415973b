"""``sessiontape mcp``: the recorded sessions as an MCP server over stdio."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from . import VERBS
from .console import EXIT_OK, say_extra_missing

PROG = "sessiontape mcp"


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve MCP over stdin and stdout until the client closes them."""
    try:
        from sessiontape.mcp import run
    except ImportError as exc:
        return say_extra_missing(PROG, "the MCP server", "mcp", exc)
    with contextlib.suppress(KeyboardInterrupt):  # the client's Ctrl-C reaches us too
        run(args.project)
    return EXIT_OK


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = verbs.add_parser(
        "mcp", help=VERBS["mcp"].help,
        description="Serve the recorded sessions to an MCP client (an agent, an assistant, "
                    "an IDE) over stdio, read-only: the tools list_sessions, show_session, "
                    "search_sessions and usage answer with the JSON of the CLI's --json, "
                    "paged and bounded in size. The client starts this command itself.")
    parser.add_argument("--project", type=Path, default=None, metavar="DIR",
                        help="the project whose AgentUse sessions to serve "
                             "(default: the working directory's)")
    parser.set_defaults(handler=cmd_mcp)
