"""``sessiontape store copy`` and ``store info``: a store moved between SQLite and
PostgreSQL, and what a store holds (thin verbs over :mod:`sessiontape.storage.backends`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sessiontape.storage.backends import is_store_url, store_location

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    eprint,
    print_fields,
    print_json,
    printable,
    say_extra_missing,
    store_option,
)

PROG = "sessiontape store"


def _named(location: str) -> str:
    """A location as messages show it (a URL without its password)."""
    if is_store_url(location):
        from sessiontape.storage.backends.postgres import redacted

        return redacted(location)
    return location


def cmd_copy(args: argparse.Namespace) -> int:
    """Copy every row and log line of SRC into the empty store DST."""
    if args.source == args.destination:
        eprint(f"{PROG} copy: SRC and DST are the same store")
        return EXIT_USAGE
    try:
        from sessiontape.storage.backends.transfer import StoreNotEmpty, copy_store
    except ImportError as exc:
        return say_extra_missing(f"{PROG} copy", "copying", "postgres", exc)

    def progress(table: str, rows: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{table}: {rows} rows\x1b[K")

    try:
        summary = copy_store(args.source, args.destination, source_logs=args.from_logs,
                             destination_logs=args.to_logs, progress=progress)
    except StoreNotEmpty as exc:
        eprint(printable(f"{PROG} copy: {exc}"))
        return EXIT_FAILURE
    except OSError as exc:
        eprint(printable(f"{PROG} copy: {exc}"))
        return EXIT_FAILURE
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K")
    for problem in summary.problems:
        eprint(f"{PROG} copy: warning: {printable(problem)}")
    if args.json:
        print_json(summary.to_json())
    else:
        rows = ", ".join(f"{count} {table}" for table, count in summary.rows.items())
        print(printable(f"copied {_named(args.source)} to {_named(args.destination)}: {rows}; "
                        f"{summary.log_lines} log lines of {summary.conversations} "
                        "conversations"))
    return EXIT_FAILURE if summary.problems else EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    """What a store holds: its schema version, conversations, items, log lines and hosts."""
    location = store_location(args.store)
    if not isinstance(location, str):
        facts: dict[str, Any] = {"store": str(location), "kind": "sqlite",
                                 "exists": Path(location).exists()}
    else:
        try:
            from sessiontape.storage.backends.postgres import store_facts
        except ImportError as exc:
            return say_extra_missing(f"{PROG} info", "a PostgreSQL store", "postgres", exc)
        try:
            facts = store_facts(location)
        except OSError as exc:
            eprint(printable(f"{PROG} info: {exc}"))
            return EXIT_FAILURE
    print_fields(facts, as_json=args.json)
    return EXIT_OK


def _store_usage(args: argparse.Namespace) -> int:
    args.store_parser.print_help(sys.stderr)
    return EXIT_USAGE


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``store`` verb and its subcommands."""
    store = verbs.add_parser(
        "store", help=VERBS["store"].help,
        description="The item store: a SQLite file (skilled_crew's) or a PostgreSQL database "
                    "that many hosts share (docs/postgres.md).")
    store.set_defaults(handler=_store_usage, store_parser=store)
    sub = store.add_subparsers(dest="store_verb", metavar="SUBCOMMAND")
    copy = sub.add_parser(
        "copy", help="copy a store into an empty one (SQLite <-> PostgreSQL), streaming",
        description="Copy every row of SRC (session_items, compaction's archive and log, the "
                    "links) into the empty store DST, ids and item JSON byte for byte, and "
                    "the replay log's lines: a SQLite store's are the JSONL files under its "
                    "logs root, a PostgreSQL store's its sessiontape_log table. Each of SRC "
                    "and DST is a SQLite file or a postgresql:// URL. Exit 1 when DST is not "
                    "empty (nothing is written), a server cannot be reached, or a log line "
                    "could not be copied (each said).")
    copy.add_argument("source", metavar="SRC", help="a SQLite file or a postgresql:// URL")
    copy.add_argument("destination", metavar="DST", help="a SQLite file or a postgresql:// URL")
    copy.add_argument("--from-logs", type=Path, default=None, metavar="DIR",
                      help="the logs root of a SQLite SRC (default: the skillet one)")
    copy.add_argument("--to-logs", type=Path, default=None, metavar="DIR",
                      help="the logs root of a SQLite DST (default: the skillet one)")
    copy.add_argument("--json", action="store_true", help="print what was copied as JSON")
    copy.set_defaults(handler=cmd_copy)
    info = sub.add_parser(
        "info", help="what a store holds",
        description="The store's kind and location (a URL without its password); for "
                    "PostgreSQL its schema version, conversations, items, archived items, "
                    "log lines and the hosts that wrote them.")
    store_option(info)
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(handler=cmd_info)
