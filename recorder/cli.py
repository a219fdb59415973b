"""The ``sessiontape`` command line: thin verbs over library functions."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from sessiontape.storage.names import DEFAULT_USER_ID
from sessiontape.storage.paths import resolved_paths
from sessiontape.storage.version import __version__

from . import cli_export, cli_logs, cli_run, cli_sessions
from .console import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, print_json, use_color


def cmd_paths(args: argparse.Namespace) -> int:
    """Print where sessiontape reads and writes."""
    paths = resolved_paths(args.project)
    if args.json:
        print_json(paths)
    else:
        width = max(map(len, paths))
        for key, value in paths.items():
            print(f"{key.ljust(width)}  {value}")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    """Run one recorded turn of the bundled demo conversation."""
    if args.model and not os.environ.get("OPENAI_API_KEY"):
        print("sessiontape demo: --model needs OPENAI_API_KEY (leave it out to run offline)",
              file=sys.stderr)
        return EXIT_USAGE
    from sessiontape.storage.log_reader import SessionLogReader

    from .demo import DEMO_SESSION, demo_paths, run_demo
    from .transcript import render_turns

    args.session_name = args.session_name or DEMO_SESSION

    color = use_color()
    bold, reset = ("\x1b[1m", "\x1b[0m") if color else ("", "")
    print(f"{bold}sessiontape demo{reset}: conversation {args.session_name!r} of {args.user_email}"
          f" ({'model ' + args.model if args.model else 'offline, scripted model'})")
    print("agent> ", end="", flush=True)
    result = asyncio.run(run_demo(user_id=args.user_email, session_name=args.session_name,
                                  model=args.model,
                                  on_text=lambda t: print(t, end="", flush=True)))
    print()
    if result.model_input_items is not None:
        print(f"\nTurn {result.earlier_turns + 1}: the model's first call got "
              f"{result.model_input_items} input items ({result.model_input_items - 1} from "
              "earlier turns, replayed from the SQLite store).")
    print(f"\n{bold}Recorded to{reset}")
    for name, path in demo_paths(result.recorder).items():
        print(f"  {name:<17} {path}")
    print(f"\n{bold}Transcript{reset} (replayed from the JSONL log)")
    for line in render_turns(SessionLogReader(result.recorder.log_path).turns(), color=color):
        print(f"  {line}")
    if result.recorder.errors:
        print(f"sessiontape: {result.recorder.errors} recording error(s); see the warning above",
              file=sys.stderr)
        return EXIT_FAILURE
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

    demo = verbs.add_parser(
        "demo", help="run the bundled agent, recorded (offline by default)",
        description="Run one turn of a bundled trip-planner agent with a subagent, tools "
                    "(one fails) and a streamed answer, record it into both layouts, and "
                    "print where it went and the replayed transcript. Offline with a "
                    "scripted model unless --model is given. Each run continues the "
                    "same conversation.")
    demo.add_argument("--user-email", default=DEFAULT_USER_ID,
                      help="user id (default: %(default)s)")
    demo.add_argument("--session-name", default=None,
                      help="conversation to continue (default: the demo's own, "
                           "sessiontape_demo)")
    demo.add_argument("--model", default=None,
                      help="a real OpenAI model, e.g. gpt-4.1-mini (needs OPENAI_API_KEY)")
    demo.set_defaults(handler=cmd_demo)
    for module in (cli_run, cli_logs, cli_sessions, cli_export):
        module.register(verbs)
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
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        sys.stderr.close()  # quiet exit when the reader of our output goes away
        return EXIT_OK
