"""The ``sessiontape`` command line: thin verbs over library functions.

One module per verb group (:data:`VERBS` says which holds each verb); a module's
``register`` adds its verbs to the parser. Only the module of the verb being run is
imported, with what its library needs, so ``sessiontape --version`` and ``--help``
import none of them (``tests/test_cli.py::test_version_and_help_import_no_verb``;
the start-up time: docs/performance.md, "Start-up").
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import NamedTuple

from sessiontape.storage.version import __version__


class Verb(NamedTuple):
    module: str  # the module of this package that registers and runs the verb
    help: str


VERBS = {
    "paths": Verb("paths", "print the resolved AgentUse root and skillet directories"),
    "demo": Verb("demo", "run the bundled agent, recorded (offline by default)"),
    "run": Verb("run", "run one prompt through an agent, recorded"),
    "chat": Verb("run", "chat with an agent, recorded"),
    "log": Verb("logs", "read skillet JSONL replay logs"),
    "sessions": Verb("sessions", "list, show, fork, clear and locate recorded conversations"),
    "search": Verb("catalog", "full-text search over every recorded conversation"),
    "usage": Verb("catalog", "tokens and cost by day, month, session, model or agent"),
    "catalog": Verb("catalog", "refresh or locate the index that list, show, search and usage use"),
    "export": Verb("export", "write recorded conversations in another tool's format"),
    "ingest": Verb("ingest", "record another tool's stream of messages (agentrun)"),
    "doctor": Verb("doctor", "check the recorded layouts; --fix repairs what is safe"),
    "serve": Verb("serve", "a local web viewer of every conversation, live (web extra)"),
    "mcp": Verb("mcp", "the recorded sessions as a read-only MCP server over stdio"),
    "replay": Verb("replay", "replay a recorded session against its recorded model answers"),
    "store": Verb("store", "copy a store between SQLite and PostgreSQL; what a store holds"),
}


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every verb's, or with ``verb``, only the parsers of that verb's
    module (the others are listed by name and help, enough for ``--help``; an unknown
    ``verb``, such as ``""``, loads none)."""
    parser = argparse.ArgumentParser(
        prog="sessiontape",
        description="Record OpenAI Agents SDK runs into the AgentUse and skillet layouts.")
    parser.add_argument("--version", action="version", version=f"sessiontape {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="COMMAND")
    if verb is None:
        wanted = {entry.module for entry in VERBS.values()}
    else:
        wanted = {VERBS[verb].module} if verb in VERBS else set()
    registered: set[str] = set()
    for name, entry in VERBS.items():
        if entry.module not in wanted:
            verbs.add_parser(name, help=entry.help)
        elif entry.module not in registered:
            registered.add(entry.module)
            import_module(f".{entry.module}", __name__).register(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    # The first argument that is not an option names the verb (the top level's options
    # take no value); none (--version, --help): no verb module is loaded.
    verb = next((argument for argument in arguments if not argument.startswith("-")), "")
    parser = build_parser(verb)
    args = parser.parse_args(arguments)
    from .console import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

    if args.verb is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if getattr(args, "reads_store", False):
            from .finding import read_from_store

            failed = read_from_store(f"sessiontape {args.verb}", args.store)
            if failed is not None:
                return failed
        return int(args.handler(args))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        sys.stderr.close()  # quiet exit when the reader of our output goes away
        return EXIT_OK
