"""``sessiontape sessions``: list, show, fork, rename, clear, prune and locate recorded
conversations."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import orjson

from sessiontape.storage.backends import store_location
from sessiontape.storage.catalog.selection import STATUSES
from sessiontape.storage.paths import Locations
from sessiontape.storage.times import shown_time

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    Style,
    cost_text,
    eprint,
    filters_given,
    plural,
    print_csv,
    print_fields,
    print_json,
    printable,
    project_option,
    reading_store_option,
    say_extra_missing,
    store_option,
    table,
    terminal_width,
    use_color,
    when,
)
from .finding import (
    ambiguous_user,
    answering_catalog,
    conversations,
    lookup,
    store_problem,
)

if TYPE_CHECKING:
    from sessiontape.storage.backends.postgres import PostgresStore
    from sessiontape.storage.catalog.fork import ForkResult
    from sessiontape.storage.catalog.sessions import SessionInfo

PROG = "sessiontape sessions"


FAILED = ("error", "crashed")  # the statuses the list marks with a ✗ (in red on a terminal)


def _locations(args: argparse.Namespace) -> Locations:
    """The store, logs and the AgentUse root of ``--project`` (default: the current
    directory's project)."""
    return Locations.resolve(project_root=args.project)


def _lookup(args: argparse.Namespace, where: Locations, *,
            by_id: bool = True) -> SessionInfo | int:
    """The conversation NAME names, or the exit code after saying why there is none."""
    return lookup(PROG, args.name, args.user, where, by_id=by_id)


def _store_refuses(what: str, where: Locations) -> bool:
    """Whether the item store cannot be written (damaged, read-only): then ``what`` is
    refused in one line saying why, before anything is read or changed."""
    from sessiontape.storage.db import writing_problem

    return store_problem(PROG, f"{what}, nothing was changed", writing_problem(where.store_file))


def _warn(problems: list[str]) -> None:
    for problem in problems:
        eprint(f"{PROG}: warning: {printable(problem)}")


# -- list -------------------------------------------------------------------------------


def _status_cell(status: str | None) -> str:
    """A status as the table shows it: ``✗`` before a failed (``error``) or crashed one, so
    that it stands out without colour too."""
    if status is None:
        return "-"
    return f"✗ {status}" if status in FAILED else status


def _at_least_one(text: str) -> int:
    """``--limit``: a whole number from 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"at least 1 session: {text!r}")
    return int(text)


# ``sessions list --csv``'s columns: --json's keys that hold one value each.
LIST_CSV = ("session_name", "user_id", "origin", "turns", "items", "archived_items",
            "compactions", "tokens", "cost", "last_activity", "status", "agent", "agentuse_id",
            "agentuse_dir", "log_path")


def cmd_list(args: argparse.Namespace) -> int:
    """Every conversation (``--user``, ``--since``, ``--status``, ``--limit``), newest first:
    a table, ``--json`` or ``--csv``."""
    listed = conversations(PROG, args.project, args.user, since=args.since,
                           statuses=args.status, limit=args.limit)
    if isinstance(listed, int):
        return listed
    for each in listed:
        _warn(each.problems)
    if args.json:  # each object as stored: one line each
        print_json([orjson.Fragment(each.json) for each in listed])
        return EXIT_OK
    if args.csv:
        print_csv(LIST_CSV, ([each.data()[key] for key in LIST_CSV] for each in listed))
        return EXIT_OK
    sessions = [each.data() for each in listed]
    if not sessions:
        since = args.since and shown_time(int(args.since.timestamp() * 1000))
        eprint(f"{PROG}: no recorded sessions" + filters_given((
            ("user", args.user), ("since", since), ("status", args.status))))
        return EXIT_OK
    style = Style(use_color())
    header = ["NAME", "USER", "TURNS", "ITEMS", "TOKENS", "COST", "LAST ACTIVITY", "STATUS",
              "ORIGIN"] + (["AGENTUSE DIR"] if args.paths else [])
    rows = [[printable(info["session_name"], one_line=True),
             printable(info["user_id"] or "-", one_line=True),
             str(info["turns"]), str(info["items"]),
             "-" if info["tokens"] is None else str(info["tokens"]), cost_text(info["cost"]),
             shown_time(info["last_ms"]), _status_cell(info["status"]), info["origin"]]
            + ([printable(info["agentuse_dir"] or "-", one_line=True)] if args.paths else [])
            for info in sessions]
    path = {len(header) - 1} if args.paths else set()  # shortened keeping its end
    lines = table([header, *rows], right={2, 3, 4, 5}, shrink={0, 1, *path}, keep_end=path,
                  width=terminal_width())
    print(f"{style.bold}{lines[0]}{style.reset}")
    for info, line in zip(sessions, lines[1:], strict=True):
        failed = info["status"] in FAILED
        print(f"{style.red}{line}{style.reset}" if failed else line)
    return EXIT_OK


# -- show -------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    where = _locations(args)
    found = _lookup(args, where)
    if isinstance(found, int):
        return found
    from sessiontape.storage.catalog.sessions import NoSuchTurnError

    from .show import print_session  # the transcript's readers: loaded for this verb only

    try:
        return print_session(found, where, full=args.full, as_json=args.json, warn=_warn,
                             turn=args.turn, last=args.last)
    except NoSuchTurnError as exc:
        eprint(f"{PROG} show: no turn {exc.turn}: "
               f"{printable(repr(found.session_name), one_line=True)} has "
               f"{plural(exc.count, 'turn')}")
        return EXIT_USAGE


def _turn_count(text: str) -> int:
    """An argument that counts turns: a whole number from 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a turn number (1, 2, ...): {text!r}")
    return int(text)


# -- clear ------------------------------------------------------------------------------


def _confirm(question: str) -> bool:
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


@contextmanager
def _server(args: argparse.Namespace) -> Iterator[PostgresStore | None]:
    """The PostgreSQL store the verb changes (``--store URL`` or ``$SESSIONTAPE_STORE``),
    or None for the SQLite file. The verb has read it through this host's mirror (main
    brought it up to date): it changes the store first, then the mirror as it changes a
    file store (the mirror is rebuilt from the store at the next reading anyway)."""
    location = store_location(args.store)
    if not isinstance(location, str):
        yield None
        return
    from sessiontape.storage.backends.postgres import PostgresStore

    store = PostgresStore(location)
    try:
        yield store
    finally:
        store.close_sync()


def cmd_clear(args: argparse.Namespace) -> int:
    where = _locations(args)
    if _store_refuses(f"not clearing {args.name!r}", where):
        return EXIT_FAILURE
    found = _lookup(args, where, by_id=False)
    if isinstance(found, int):
        return found
    info = found
    whose = f" of {info.user_id!r}" if info.user_id is not None else f" ({info.origin})"
    if not args.yes:
        if not sys.stdin.isatty():
            eprint(f"{PROG}: refusing to clear {info.session_name!r} without a terminal to "
                   "confirm on; pass --yes")
            return EXIT_USAGE
        eprint(printable(f"This removes session {info.session_name!r}{whose}:"))
        if info.user_id is not None:
            eprint(f"  {plural(info.items, 'stored item')}, "
                   f"{plural(info.archived, 'archived item')}, "
                   f"{plural(info.compactions, 'compaction')} and its link in {where.store_file}")
            eprint(printable(f"  log {info.log_path or '-'}"))
        eprint(printable(f"  AgentUse tree {info.agentuse_dir or '-'}"))
        if not _confirm("Remove it?"):
            eprint(f"{PROG}: nothing removed")
            return EXIT_FAILURE
    from sessiontape.storage.catalog.sessions import clear_session

    with _server(args) as server:
        on_server = None
        if server is not None and info.user_id is not None:
            from sessiontape.storage.backends.postgres import delete_conversations

            try:
                on_server = delete_conversations(server, [(info.user_id, info.session_name)])
            except OSError as exc:
                eprint(printable(f"{PROG}: not clearing {info.session_name!r}: {exc}"))
                return EXIT_FAILURE
    result = clear_session(info, locations=where)
    if on_server is not None:  # the store's rows, not the mirror's
        result.rows = on_server
    for kept in result.kept:
        eprint(f"{PROG}: warning: {printable(str(kept))}")
    if args.json:
        print_json({"session_name": info.session_name, "user_id": info.user_id,
                    "origin": info.origin, **result.to_json()})
    else:
        rows = ", ".join(f"{count} from {table}" for table, count in result.rows.items())
        print(printable(f"cleared {info.session_name!r}{whose}: {rows or 'no store rows'}"))
        for path in result.removed_paths:
            print(printable(f"removed {path}"))
    return EXIT_FAILURE if result.kept else EXIT_OK


# -- path -------------------------------------------------------------------------------


def cmd_path(args: argparse.Namespace) -> int:
    where = _locations(args)
    info = None
    if args.name is not None:
        found = _lookup(args, where)
        if isinstance(found, int):
            return found
        info = found
    from sessiontape.storage.catalog.sessions import session_locations

    paths = session_locations(info, locations=where)
    print_fields(paths, as_json=args.json)
    return EXIT_OK


# -- fork -------------------------------------------------------------------------------


def _fork_summary(result: ForkResult) -> str:
    """One line: what was forked where, and which layouts the session did not have."""
    archive = " (from the compaction archive)" if result.from_archive else ""
    copied = {"store": f"{plural(result.rows, 'stored item')}{archive}",
              "log": f"log {result.log_path}", "agentuse": f"AgentUse {result.agentuse_dir}"}
    text = (f"forked {result.source_name!r} at turn {result.at_turn} of {result.source_turns} as "
            f"{result.session_name!r} of {result.user_id!r}: "
            + ", ".join(copied[layout] for layout in result.forked))
    if result.missing:
        text += f"; not forked, {result.source_name!r} has none: {', '.join(result.missing)}"
    return text


def cmd_fork(args: argparse.Namespace) -> int:
    """Fork NAME at --at-turn as --as (see docs/cli.md, "sessions fork")."""
    # The fork writes every layout: its writers are loaded for this verb only.
    from sessiontape.storage.catalog.fork import ForkError, TurnRangeError, fork_session

    if not args.new_name:
        eprint(f"{PROG}: --as is empty: the new session needs a name")
        return EXIT_USAGE
    where = _locations(args)
    if _store_refuses(f"not forking {args.name!r}", where):
        return EXIT_FAILURE
    found = _lookup(args, where)
    if isinstance(found, int):
        return found
    _warn(found.problems)
    if found.user_id is None:
        eprint(printable(f"{PROG}: {found.session_name!r} is an AgentUse session without a "
                         "user, stored items or log; only a conversation can be forked"))
        return EXIT_FAILURE
    tree = found.agentuse_dir if found.agentuse_dir and found.agentuse_dir.is_dir() else None
    try:
        result = fork_session(where.store_file, found.user_id, found.session_name,
                              args.new_name, agentuse_dir=tree, log_path=found.log_path,
                              logs_root=where.logs_root, at_turn=args.at_turn)
    except ForkError as exc:
        eprint(printable(f"{PROG}: {exc}"))
        return EXIT_USAGE if isinstance(exc, TurnRangeError) else EXIT_FAILURE
    except OSError as exc:  # a layout that cannot be written: what was written is removed
        eprint(printable(f"{PROG}: forking {found.session_name!r} failed, nothing was "
                         f"written: {exc}", one_line=True))
        return EXIT_FAILURE
    with _server(args) as server:
        if server is not None:  # the fork, made in the mirror, written to the store
            from sessiontape.storage.backends.postgres import ConversationExists
            from sessiontape.storage.backends.transfer import push_conversation

            try:
                push_conversation(server, where.store_file, result.log_path, found.user_id,
                                  args.new_name)
            except (ConversationExists, OSError) as exc:
                eprint(printable(f"{PROG}: forking {found.session_name!r} failed, nothing "
                                 f"was written to the store: {exc}", one_line=True))
                return EXIT_FAILURE
    if args.json:
        print_json(result.to_json())
    else:
        print(printable(_fork_summary(result)))
    return EXIT_OK


# -- rename -----------------------------------------------------------------------------


def cmd_rename(args: argparse.Namespace) -> int:
    """Rename NAME to NEW in every layout (see docs/cli.md, "sessions rename")."""
    import sqlite3

    from sessiontape.storage.catalog.sessions import RenameError, SessionBusyError, rename_session

    where = _locations(args)
    if _store_refuses(f"not renaming {args.name!r}", where):
        return EXIT_USAGE
    found = _lookup(args, where)
    if isinstance(found, int):
        return found
    with _server(args) as server:
        if server is not None and found.user_id is not None and args.new_name:
            from sessiontape.storage.backends.postgres import (
                ConversationExists,
                rename_conversation,
            )

            try:
                rename_conversation(server, found.user_id, found.session_name,
                                    args.new_name)
            except ConversationExists as exc:
                eprint(printable(f"{PROG}: not renaming {found.session_name!r}: {exc}",
                                 one_line=True))
                return EXIT_USAGE
            except OSError as exc:
                eprint(printable(f"{PROG}: renaming {found.session_name!r} failed, nothing "
                                 f"was changed: {exc}", one_line=True))
                return EXIT_FAILURE
    try:
        result = rename_session(found, args.new_name, locations=where)
    except (RenameError, SessionBusyError) as exc:
        eprint(printable(f"{PROG}: not renaming {found.session_name!r}: {exc}", one_line=True))
        return EXIT_USAGE
    except (OSError, sqlite3.Error) as exc:  # half-way: what was done is undone
        eprint(printable(f"{PROG}: renaming {found.session_name!r} failed, nothing was "
                         f"changed: {exc}", one_line=True))
        return EXIT_FAILURE
    if args.json:
        print_json(result.to_json())
        return EXIT_OK
    print(printable(f"renamed {result.old_name!r} of {result.user_id!r} to "
                    f"{result.new_name!r}", one_line=True))
    rows = ", ".join(f"{count} in {table}" for table, count in result.rows.items() if count)
    print(f"  store rows: {rows or 'none'}")
    print(printable(f"  log {result.log_path or '-'}", one_line=True))
    print(printable(f"  AgentUse tree {result.agentuse_dir or '-'}", one_line=True))
    return EXIT_OK


# -- prune ------------------------------------------------------------------------------


def _prune_line(entry: dict[str, Any]) -> str:
    """One conversation of a prune: its name, user, last activity, turns and size."""
    return printable(f"  {entry['session_name']}  user {entry['user_id'] or '-'}  last "
                     f"{shown_time(entry['last_ms'])}  {plural(entry['turns'], 'turn')}  "
                     f"{plural(entry['items'], 'stored item')}  {entry['bytes']} bytes",
                     one_line=True)


def cmd_prune(args: argparse.Namespace) -> int:
    """Remove the conversations older than --older-than (see docs/cli.md, "sessions
    prune")."""
    from sessiontape.storage.catalog.sessions import prune_sessions
    from sessiontape.storage.times import parse_since

    try:
        cutoff = int(parse_since(args.older_than).timestamp() * 1000)
    except ValueError as exc:
        eprint(f"{PROG}: --older-than: {exc}")
        return EXIT_USAGE
    where = _locations(args)
    if not args.dry_run and _store_refuses("not pruning", where):
        return EXIT_FAILURE
    from sessiontape.storage.names import AmbiguousUserError

    user = args.user
    if user is not None:  # as people type one, as every verb takes it
        try:
            with answering_catalog(PROG, args.project) as catalog:
                user = catalog.user(user)
        except AmbiguousUserError as exc:
            return ambiguous_user(PROG, exc)
    options = {"include_agentuse": args.include_agentuse, "locations": where}
    planned = prune_sessions(cutoff, user, dry_run=True, **options)
    if not args.dry_run and planned.removed and not args.yes:
        if not sys.stdin.isatty():
            eprint(f"{PROG}: refusing to remove {plural(len(planned.removed), 'session')} "
                   "without a terminal to confirm on; pass --yes (or --dry-run)")
            return EXIT_USAGE
        eprint(f"This removes {plural(len(planned.removed), 'session')} last active before "
               f"{shown_time(cutoff)}, in every layout:")
        for entry in planned.to_json()["removed"]:
            eprint(_prune_line(entry))
        if not _confirm("Remove them?"):
            eprint(f"{PROG}: nothing removed")
            return EXIT_FAILURE
    if not args.dry_run:
        with _server(args) as server:
            if server is not None:
                from sessiontape.storage.backends.postgres import delete_conversations

                pairs = [(one.info.user_id, one.info.session_name)
                         for one in planned.removed if one.info.user_id is not None]
                try:
                    delete_conversations(server, pairs)
                except OSError as exc:
                    eprint(printable(f"{PROG}: nothing removed: {exc}"))
                    return EXIT_FAILURE
    result = planned if args.dry_run else prune_sessions(cutoff, user, **options)
    report = result.to_json()
    if args.json:
        print_json(report)
    else:
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {plural(len(report['removed']), 'session')} last active before "
              f"{shown_time(cutoff)}")
        for entry in report["removed"]:
            print(_prune_line(entry))
    for entry in report["failed"]:
        eprint(printable(f"{PROG}: not removed: {entry['session_name']} of "
                         f"{entry['user_id'] or '-'}: {entry['error']}", one_line=True))
    for entry in report["removed"]:
        _warn(entry.get("kept", []))
    return EXIT_FAILURE if report["failed"] else EXIT_OK


def cmd_materialize(args: argparse.Namespace) -> int:
    """Write the conversations of a PostgreSQL store out on this host (logs and trees)."""
    location = store_location(args.store)
    if not isinstance(location, str):
        eprint(printable(f"{PROG} materialize: {location} is a SQLite store, kept on this "
                         "host already: give a postgresql:// URL (--store or "
                         "$SESSIONTAPE_STORE)"))
        return EXIT_USAGE
    import asyncio  # (not at the top: list and show load no asyncio)

    try:
        from sessiontape.materialize import materialize
    except ImportError as exc:
        return say_extra_missing(f"{PROG} materialize", "a PostgreSQL store", "postgres", exc)
    try:
        done = asyncio.run(materialize(location, user_id=args.user,
                                       session_name=args.session_name))
    except OSError as exc:
        eprint(printable(f"{PROG} materialize: {exc}"))
        return EXIT_FAILURE
    kept = [one for one in done if one.log.outcome.startswith("kept")]
    if args.json:
        print_json([one.to_json() for one in done])
    else:
        for one in done:
            print(printable(f"{one.log.user_id}/{one.log.session_name}: log {one.log.outcome} "
                            f"({plural(one.log.lines, 'line')}, {one.log.path}); tree "
                            f"{one.tree_outcome}" + (f" ({one.tree})" if one.tree else "")))
        if not done:
            print("no conversation in the store")
    return EXIT_FAILURE if kept else EXIT_OK


# -- registration -----------------------------------------------------------------------


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sessions`` and its subcommands."""
    sessions = verbs.add_parser(
        "sessions", help=VERBS["sessions"].help,
        description="Recorded conversations, joined across the item store, the JSONL replay "
                    "logs and the AgentUse trees. Exit codes: 0 ok, 1 unknown session (or "
                    "a declined confirmation, or clear or fork with an item store that is "
                    "damaged or cannot be written: nothing is changed), 2 usage error or "
                    "ambiguous name. A damaged item store is said in one line, with how to "
                    "repair it, and the logs and AgentUse trees answer.")
    sub = sessions.add_subparsers(dest="sessions_verb", metavar="SUBCOMMAND", required=True)

    def user_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--user", default=None, metavar="U",
                            help="only sessions of this user (default: any user; the "
                                 "AgentUse-only sessions, which have no user, only without "
                                 "--user), as people type one: the exact user id, else the "
                                 "id with case ignored, else the id whose part before '@' U "
                                 "is (carol: carol@example.com), else the id whose log "
                                 "folder U names (carol_example_com); one that several "
                                 "users match that way exits 2 naming them")
        project_option(parser)

    listing = sub.add_parser(
        "list", help="every recorded session, newest first",
        description="Every session, newest first: every pair of the item store (and every "
                    "link to an AgentUse tree), every replay log, and every session of the "
                    "project's AgentUse tree (--project, default the current directory) "
                    "that no link points to, each listed once, with its turns, stored "
                    "items, tokens and cost, last activity (UTC), STATUS (a failed, "
                    "'error', or crashed one marked with a ✗, red on a terminal) and "
                    "ORIGIN; --paths adds the AgentUse directory. On a terminal the "
                    "names (and paths) are shortened with … to fit its width. ORIGIN "
                    "(--json 'origin') says who wrote it: 'sessiontape' (it has "
                    "sessiontape's link, log owner record or compaction records, or its "
                    "session.json says sessiontape), 'agentuse' (a session of the AgentUse "
                    "tree without them: no user, its directory name as its name) or "
                    "'skilled_crew' (store rows or a log without them). TURNS come from "
                    "the replay log (each with the AgentUse exchange it names) and the "
                    "AgentUse exchanges no log turn names, else the AgentUse exchanges, "
                    "else the stored user messages. TOKENS (input + output) and COST are "
                    "summed over the turns: a turn's are its exchange's message.json "
                    "INCLUDING the subagents it ran (each subagent's file holds only its own "
                    "calls, so nothing is counted twice), else its log's model_call lines "
                    "(--json also gives usage_main, the main agent alone). A replay "
                    "log that belongs to no stored session (its rows were cleared "
                    "elsewhere, or skilled_crew wrote it) is listed with 0 items; without "
                    "an owner record its user and session are the names in its path. "
                    "Reads only.")
    user_option(listing)
    listing.add_argument("--since", type=when, default=None, metavar="WHEN",
                         help="only sessions last active since WHEN (10m, 2h, 1d, or an ISO "
                              "time), as search --since")
    listing.add_argument("--status", action="append", choices=STATUSES, default=None,
                         metavar="STATUS",
                         help="only sessions of this status (repeatable): running, "
                              "completed, error (or failed: the run ended with an error), "
                              "crashed (its recorder died), suspended (waiting for an "
                              "approval); a session without an AgentUse tree has none")
    listing.add_argument("-n", "--limit", type=_at_least_one, default=None, metavar="N",
                         help="only the N newest (after the other filters)")
    listing.add_argument("--paths", action="store_true",
                         help="add each session's AgentUse directory (AGENTUSE DIR)")
    formats = listing.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true",
                         help="print a JSON array (every field, paths included)")
    formats.add_argument("--csv", action="store_true",
                         help="print CSV: a header, then one row per session (" +
                              ", ".join(LIST_CSV) + ")")
    reading_store_option(listing)
    listing.set_defaults(handler=cmd_list)

    show = sub.add_parser(
        "show", help="the transcript of one session with per-turn usage",
        description="Print a session's transcript, each turn as a tree: its prompt, each "
                    "tool call with its result or error on one line (dimmed), each "
                    "subagent run indented under the call that ran it, its answer, its "
                    "tokens and cost. Turns come from the replay log, each with its "
                    "AgentUse exchange's parts (texts, reasoning, errors, subagents) and "
                    "usage, else from the log alone (subagent steps nested by "
                    "parentCallId; usage from its model_call lines), with the AgentUse "
                    "exchanges no log turn names in time order; for a session without a "
                    "log, from its AgentUse exchanges; for one with neither, from its "
                    "stored items. A turn a killed recording left open says [interrupted: "
                    "...], one stopped by Ctrl-C [stopped]. NAME is a session name (exact; an "
                    "AgentUse-only session's is its directory name), else a prefix of its "
                    "AgentUse session id (ULID). A name several users have, or a prefix of "
                    "several ids, exits 2 with the candidates: choose with --user or a "
                    "longer prefix. Reads only.")
    show.add_argument("name", metavar="NAME_OR_ULID_PREFIX")
    user_option(show)
    show.add_argument("--full", action="store_true",
                      help="also print the items compaction moved to the archive")
    show.add_argument("--json", action="store_true",
                      help="print one JSON object (session, turns with steps and usage, "
                           "the AgentUse parts and subagents or the stored items of turns "
                           "read from those, archived items with --full)")
    chosen = show.add_mutually_exclusive_group()
    chosen.add_argument("--turn", type=_turn_count, metavar="N",
                        help="only turn N (1-based, as shown); exit 2 if there is none")
    chosen.add_argument("--last", type=_turn_count, nargs="?", const=1, metavar="K",
                        help="only the last K turns (default 1)")
    reading_store_option(show)
    show.set_defaults(handler=cmd_show)

    clear = sub.add_parser(
        "clear", help="remove a session everywhere",
        description="Remove a session's stored items, archived items, compaction records "
                    "and AgentUse link (one transaction), its replay log with its owner "
                    "record, and its AgentUse tree (an AgentUse-only session: its tree). "
                    "Asks y/N on a terminal; without one, refuses (exit 2) unless --yes is "
                    "given. NAME must be the exact name.")
    clear.add_argument("name", metavar="NAME")
    user_option(clear)
    clear.add_argument("--yes", "-y", action="store_true", help="do not ask")
    clear.add_argument("--json", action="store_true", help="print what was removed as JSON")
    reading_store_option(clear)
    clear.set_defaults(handler=cmd_clear)

    path = sub.add_parser(
        "path", help="where sessions (or one session) are kept",
        description="Without NAME: the item store, the logs root and the AgentUse root of "
                    "the project (--project, default the current directory). With NAME (or "
                    "an AgentUse id prefix): that session's store, log, log owner record and "
                    "AgentUse directory ('-' for what it does not have; an AgentUse-only "
                    "session has no store). Reads only.")
    path.add_argument("name", nargs="?", default=None, metavar="NAME")
    user_option(path)
    path.add_argument("--json", action="store_true", help="print one JSON object")
    reading_store_option(path)
    path.set_defaults(handler=cmd_path)

    fork = sub.add_parser(
        "fork", help="a new session holding the first N turns of a session",
        description="Copy turns 1..N of a session to a new session NEW of the same user, in "
                    "each layout it has: its stored items (a turn starts at a user message; "
                    "for a compacted session, turn N as the log counts it, from the "
                    "archive when it lies in the compacted part), the lines of those turns "
                    "of its replay log, and a new AgentUse session beside its own with "
                    "exchanges 1..N, their parts and subagents (new ids; session.json's "
                    "forkedFrom names the original session and exchange). Continuing NEW "
                    "gives the model only those turns. The original is not changed. NAME "
                    "is found as by 'show'. Exit 1 when NEW exists (nothing is written) or "
                    "the layouts disagree on the number of turns, 2 when N is not one of "
                    "the turns.")
    fork.add_argument("name", metavar="NAME_OR_ULID_PREFIX")
    fork.add_argument("--at-turn", type=int, required=True, metavar="N",
                      help="the last turn copied (1 = the first)")
    fork.add_argument("--as", dest="new_name", required=True, metavar="NEW",
                      help="the new session's name (the user stays NAME's)")
    user_option(fork)
    fork.add_argument("--json", action="store_true", help="print what was made as JSON")
    reading_store_option(fork)
    fork.set_defaults(handler=cmd_fork)

    rename = sub.add_parser(
        "rename", help="give a session a new name, in every layout",
        description="Rename session NAME to NEW (the same user) in every layout: its rows "
                    "in the item store (items, archive, compaction records, link: one "
                    "transaction), its replay log (moved to NEW's log file name; its lines "
                    "are history and are not rewritten: a user_message keeps the "
                    "sessionName it was recorded with) and session.json's conversation in "
                    "its AgentUse tree. A failure half-way puts everything back. NAME is "
                    "found as by 'show'. Exit 2, nothing changed, when NEW exists in any "
                    "layout, NAME is being recorded (a run is going on), NAME is an "
                    "AgentUse-only session, or the item store is damaged or cannot be "
                    "written.")
    rename.add_argument("name", metavar="NAME_OR_ULID_PREFIX")
    rename.add_argument("new_name", metavar="NEW")
    user_option(rename)
    rename.add_argument("--json", action="store_true", help="print what was moved as JSON")
    reading_store_option(rename)
    rename.set_defaults(handler=cmd_rename)

    prune = sub.add_parser(
        "prune", help="remove every session last active before a time",
        description="Remove every session whose last activity (LAST ACTIVITY in 'list') is "
                    "older than DURATION, each as 'clear' removes one and each whole or "
                    "not at all (its log and tree are moved aside before its store rows "
                    "go; a failure puts them back, is reported, and the others go on). A "
                    "session being recorded is never removed. AgentUse-only sessions (no "
                    "user: AgentUse's own history) only with --include-agentuse. Asks y/N "
                    "once on a terminal; without one, refuses (exit 2) unless --yes or "
                    "--dry-run is given. Exit 1 when a session could not be removed.")
    prune.add_argument("--older-than", required=True, metavar="DURATION",
                       help="90d, 12h, 2w (s m h d w), or an ISO date or time")
    prune.add_argument("--dry-run", action="store_true",
                       help="list what would be removed (last activity, turns, size) and "
                            "change nothing")
    prune.add_argument("--include-agentuse", action="store_true",
                       help="also the AgentUse-only sessions of the project (--project)")
    user_option(prune)
    prune.add_argument("--yes", "-y", action="store_true", help="do not ask")
    prune.add_argument("--json", action="store_true",
                       help="print what was (or would be) removed as JSON")
    reading_store_option(prune)
    prune.set_defaults(handler=cmd_prune)

    materialize = sub.add_parser(
        "materialize", help="write a PostgreSQL store's conversations out on this host",
        description="Each host writes the AgentUse tree and the JSONL log of the turns it ran; "
                    "the store (--store URL or $SESSIONTAPE_STORE) has every host's. Writes "
                    "each conversation's log here whole (a log here with lines the store "
                    "lacks is kept as it is and reported: exit 1), and the AgentUse tree of "
                    "one with none here, rebuilt from its log under the directory name the "
                    "store links (docs/postgres.md). Then every verb reads them here.")
    store_option(materialize)
    materialize.add_argument("--user", default=None, metavar="U",
                             help="only this user's conversations (the exact user id)")
    materialize.add_argument("--session-name", default=None, metavar="S",
                             help="only conversations of this name")
    materialize.add_argument("--json", action="store_true",
                             help="print what was done, one object a conversation")
    materialize.set_defaults(handler=cmd_materialize)
