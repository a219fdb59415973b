"""``sessiontape ingest``: another tool's stream of messages, recorded into every layout."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import IO

from sessiontape.ingest import IngestSummary, ingest_agentrun, lines_of
from sessiontape.recorder import check_names
from sessiontape.storage.names import DEFAULT_USER_ID

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    eprint,
    plural,
    print_json,
    printable,
    store_option,
    warnings_in_one_line,
)

PROG = "sessiontape ingest"


def _summary_line(summary: IngestSummary) -> str:
    where = ", ".join(summary.conversations) or "no conversation"
    line = (f"ingested {plural(summary.messages, 'message')} into {where}: "
            f"{plural(summary.turns, 'turn')}, {plural(summary.tool_calls, 'tool call')}")
    if summary.problems:
        line += f"; {plural(len(summary.problems), 'line')} skipped"
    return line


async def _ingest(stream: IO[bytes], args: argparse.Namespace) -> IngestSummary:
    options: dict[str, object] = {"store": args.store}
    if args.project is not None:
        options["project_root"] = args.project
    return await ingest_agentrun(lines_of(stream), user_id=args.user,
                                 session_name=args.session_name, **options)


def cmd_ingest(args: argparse.Namespace) -> int:
    """Record the stream of FILE (or stdin) and say what was recorded."""
    warnings_in_one_line()
    try:
        check_names(args.user, args.session_name or "unnamed")
    except ValueError as exc:
        eprint(printable(f"{PROG}: {exc}"))
        return EXIT_USAGE
    try:
        if args.file == "-":
            summary = asyncio.run(_ingest(sys.stdin.buffer, args))
        else:
            with Path(args.file).open("rb") as stream:
                summary = asyncio.run(_ingest(stream, args))
    except OSError as exc:
        eprint(printable(f"{PROG}: cannot read {args.file}: {exc.strerror or exc}"))
        return EXIT_FAILURE
    for problem in summary.problems:
        eprint(f"{PROG}: warning: {printable(problem)}; skipped")
    if summary.recording_errors:
        eprint(f"{PROG}: warning: {plural(summary.recording_errors, 'recording error')} "
               "(each said above): not everything was recorded")
    if args.json:
        print_json(summary.to_json())
    else:
        print(printable(_summary_line(summary)))
    return EXIT_FAILURE if summary.problems or summary.recording_errors else EXIT_OK


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``ingest`` verb."""
    ingest = verbs.add_parser(
        "ingest", help=VERBS["ingest"].help,
        description="Record a stream of another tool's messages into the AgentUse tree, the "
                    "replay log and the item store, as a recorded run: it then shows in "
                    "`sessions list/show`, `log stream`, search and usage, and `run "
                    "--session-name` continues it. agentrun: agentrun's Message lines "
                    "(JSONL), as a Go orchestrator emits them, live on stdin with `-`; each "
                    "`init` names its conversation (`resume_id`), each `result` ends a turn "
                    "with its usage and cost, a `system` message that opens a turn is its "
                    "prompt. docs/interop.md says how each message is read.",
        epilog="Exit status: 0 every line recorded; 1 a line could not be read (each is "
               "reported with its number; the rest is recorded), a recording error, or "
               "FILE cannot be read; 2 a usage error (an empty --user or --session-name).")
    ingest.add_argument("--format", required=True, choices=("agentrun",),
                        help="the stream's format (agentrun: agentrun Message lines, JSONL)")
    ingest.add_argument("--user", default=DEFAULT_USER_ID, metavar="U",
                        help="the user the conversations are recorded for (default: "
                             "%(default)s)")
    ingest.add_argument("--session-name", default=None, metavar="S",
                        help="record every conversation of the stream into S (default: the "
                             "name each `init` gives in `resume_id`, else a new "
                             "session_<time>_<hex>)")
    ingest.add_argument("--project", type=Path, default=None, metavar="DIR",
                        help="the project the AgentUse sessions belong to (default: the "
                             "working directory's)")
    ingest.add_argument("--json", action="store_true",
                        help="print what was recorded as one JSON object")
    ingest.add_argument("file", metavar="FILE", help="the stream to read; - for stdin")
    store_option(ingest, "record into")
    ingest.set_defaults(handler=cmd_ingest)
