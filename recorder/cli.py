"""The ``sessiontape`` command line: thin verbs over library functions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

from storage.paths import resolved_paths
from storage.version import __version__

EXIT_OK = 0
EXIT_USAGE = 2


def _print_json(value: object) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def cmd_paths(args: argparse.Namespace) -> int:
    """Print where sessiontape reads and writes."""
    paths = resolved_paths(args.project)
    if args.json:
        _print_json(paths)
    else:
        width = max(map(len, paths))
        for key, value in paths.items():
            print(f"{key.ljust(width)}  {value}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every verb."""
    parser = argparse.ArgumentParser(
        prog="sessiontape",
        description="Record OpenAI Agents SDK runs into the AgentUse and skillet layouts.")
    parser.add_argument("--version", action="version", version=f"sessiontape {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="COMMAND")
    paths = verbs.add_parser(
        "paths", help="print the resolved AgentUse root and skillet directories",
        description="Print the AgentUse session root of a project and the skillet "
                    "state, cache and config directories, as the environment resolves them.")
    paths.add_argument("--project", type=Path, default=None,
                       help="project root whose AgentUse root to show (default: cwd)")
    paths.add_argument("--json", action="store_true", help="print one JSON object")
    paths.set_defaults(handler=cmd_paths)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        sys.stderr.close()  # quiet exit when the reader of our output goes away
        return EXIT_OK
