"""``sessiontape log stream``: a thin verb over :mod:`sessiontape.storage.skillet.log_follow`."""

from __future__ import annotations

import argparse
import io
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from sessiontape.storage.backends import store_location
from sessiontape.storage.json_style import dumps_compact
from sessiontape.storage.paths import SkilletPaths
from sessiontape.storage.skillet.agentrun_stream import AgentrunLines
from sessiontape.storage.skillet.log_follow import LogSource, LogStream, StreamFilter
from sessiontape.storage.times import parse_since

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    eprint,
    printable,
    say_extra_missing,
    store_option,
    use_color,
)
from .transcript import EntryFormatter


def _since(text: str) -> datetime:
    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_log_stream(args: argparse.Namespace) -> int:
    """Print every replay log, then follow them (``--no-follow``: stop after catching up)."""
    store = store_location(args.store) if args.logs_dir is None else None
    if args.store is not None and args.logs_dir is not None:
        eprint("sessiontape log stream: --store and --logs-dir name two places: give one")
        return EXIT_USAGE
    if args.logs_dir is not None and not args.logs_dir.is_dir():  # a typo: not waited for
        said = "not a directory" if os.path.lexists(args.logs_dir) else "no such directory"
        eprint(printable(f"sessiontape log stream: --logs-dir {args.logs_dir}: {said}"))
        return EXIT_USAGE
    root = args.logs_dir or SkilletPaths.resolve().logs_root
    follow = not args.no_follow
    out = sys.stdout
    if follow and isinstance(out, io.TextIOWrapper):  # a StringIO stand-in has no buffering
        out.reconfigure(line_buffering=True)
    as_json = args.json or args.format == "json"
    formatter = EntryFormatter(steps=args.steps, json=as_json,
                               color=not as_json and use_color(out))
    agentrun = AgentrunLines() if args.format == "agentrun" else None

    def on_entries(source: LogSource, objects: list[dict[str, Any]]) -> None:
        if agentrun is not None:
            name = source.owner[1] if source.owner else source.session
            text = "".join(dumps_compact(message).decode() + "\n" for data in objects
                           for message in agentrun.messages(source.path, name, data))
        else:
            text = formatter.format_objects(source, objects)
        if text:
            out.write(text)  # one write per block read (line buffering: one flush)

    def on_problem(text: str) -> None:
        out.flush()  # keep the diagnostic next to the lines around it on a terminal
        eprint(f"sessiontape: {printable(text)} (line skipped)")

    def on_notice(text: str) -> None:
        out.flush()
        eprint(f"sessiontape: log stream: {printable(text)}")

    stream_filter = StreamFilter(args.user, args.session, args.since)
    stream: Any
    if isinstance(store, str):  # a server's store: every host's lines
        try:
            from sessiontape.storage.backends.postgres_log import StoreLogStream
        except ImportError as exc:
            return say_extra_missing("sessiontape log stream", "--store with a URL",
                                     "postgres", exc)
        stream = StoreLogStream(store, on_entries=on_entries, on_problem=on_problem,
                                on_notice=on_notice, filter=stream_filter)
    else:
        stream = LogStream(root, on_entries=on_entries, on_problem=on_problem,
                           on_notice=on_notice, filter=stream_filter, notify=not args.poll)
    try:
        stream.run(follow=follow)
        out.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep the interpreter's
        # final flush of stdout from failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    except OSError as exc:  # a store's server that cannot be reached
        eprint(printable(f"sessiontape log stream: {exc}"))
        return EXIT_FAILURE
    return EXIT_OK


def _log_usage(args: argparse.Namespace) -> int:
    args.log_parser.print_help(sys.stderr)
    return EXIT_USAGE


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``log`` verb and its ``stream`` subcommand."""
    log = verbs.add_parser("log", help=VERBS["log"].help,
                           description="Read skillet JSONL replay logs.")
    log.set_defaults(handler=_log_usage, log_parser=log)
    sub = log.add_subparsers(dest="log_verb", metavar="SUBCOMMAND")
    stream = sub.add_parser(
        "stream", help="print every replay log, then follow them",
        description="Print every *.jsonl replay log under the logs root, oldest-modified "
                    "first, then follow them: appended lines, new files (also in new "
                    "folders), truncated and replaced files. The default logs root is "
                    "waited for if it does not exist yet; a --logs-dir that is not a "
                    "directory exits 2. Malformed lines are reported on stderr "
                    "(file:line) and skipped. Uses file-system notifications (watchfiles), "
                    "else polls.",
        epilog="Exit status: 0 when done (or when the reader of the output goes away), "
               "2 on a usage error, 130 on Ctrl-C. Colour only on a terminal and "
               "never with NO_COLOR set.")
    stream.add_argument("--logs-dir", type=Path, default=None, metavar="DIR",
                        help="logs root (default: the skillet state dir's .agent_session_logs, "
                             "see `sessiontape paths`)")
    stream.add_argument("--no-follow", action="store_true",
                        help="stop after printing what is there now")
    stream.add_argument("--steps", action="store_true",
                        help="also print agent starts, tool calls, tool results (abbreviated), "
                             "handoffs and compactions")
    stream.add_argument("--json", action="store_true",
                        help="print every entry as one JSON object per line, with user, "
                             "session and file added, and user_id and session_name (the raw "
                             "names of the log's owner record, or null); as --format json")
    stream.add_argument("--format", choices=("text", "json", "agentrun"), default="text",
                        help="text (default); json (as --json); agentrun: agentrun Message "
                             "lines, an init when a log is first seen and each turn closed "
                             "by a result with its usage and cost (docs/interop.md)")
    stream.add_argument("--user", metavar="U", default=None,
                        help="only this user's logs (raw or sanitized name, e.g. "
                             "john@example.com or john_example_com)")
    stream.add_argument("--session", metavar="S", default=None,
                        help="only sessions with this (raw or sanitized) name")
    stream.add_argument("--since", metavar="WHEN", type=_since, default=None,
                        help="skip entries older than WHEN: a duration back from now "
                             "(30s, 10m, 2h, 1d, 1w) or an ISO-8601 time (local time "
                             "unless it has a zone, e.g. 2026-05-27T20:00:00Z)")
    store_option(stream, "follow: with a postgresql:// URL, every host's lines, live "
                         "(LISTEN/NOTIFY), instead of the log files here")
    stream.add_argument("--poll", action="store_true",
                        help="poll instead of using file-system notifications")
    stream.set_defaults(handler=cmd_log_stream)
