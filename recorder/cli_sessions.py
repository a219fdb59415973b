"""``sessiontape sessions``: list, show, clear and locate recorded conversations."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    Style,
    eprint,
    print_json,
    printable,
    use_color,
)
from .sessions import (
    AmbiguousSessionError,
    SessionInfo,
    SessionLookupError,
    Usage,
    clear_session,
    find_session,
    list_sessions,
    session_locations,
    show_session,
)
from .transcript import render_turns

PROG = "sessiontape sessions"


def _cost(cost: float | None) -> str:
    if cost is None:
        return "-"
    return f"${cost:.4f}" if cost >= 0.01 or cost == 0 else f"${cost:.6f}"


def _local_time(info: SessionInfo) -> str:
    if info.last_ms is None:
        return "-"
    from datetime import datetime
    return datetime.fromtimestamp(info.last_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _usage_text(usage: Usage, main: Usage | None) -> str:
    text = f"{usage.input} in / {usage.output} out tokens, {_cost(usage.cost)}"
    if main is not None and (usage.tokens != main.tokens or usage.cost != main.cost):
        sub_in, sub_out = usage.input - main.input, usage.output - main.output
        text += f" (subagents {sub_in} in / {sub_out} out)"
    return text


def _lookup(query: str, user: str | None, *, by_id: bool = True) -> SessionInfo | int:
    """The session, or the exit code after saying why there is none."""
    try:
        return find_session(query, user, by_id=by_id)
    except AmbiguousSessionError as exc:
        eprint(f"{PROG}: {exc}:")
        for info in exc.candidates:
            eprint(printable(f"  {info.session_name}  user {info.user_id}"
                             f"  agentuse {info.agentuse_id or '-'}"))
        return EXIT_USAGE
    except SessionLookupError as exc:
        eprint(f"{PROG}: {exc}")
        return EXIT_FAILURE


def _warn(info: SessionInfo) -> None:
    for problem in info.problems:
        eprint(f"{PROG}: warning: {printable(problem)}")


# -- list -------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    sessions = list_sessions(args.user)
    for info in sessions:
        _warn(info)
    if args.json:
        print_json([info.to_json() for info in sessions])
        return EXIT_OK
    if not sessions:
        whose = f" of user {args.user!r}" if args.user is not None else ""
        eprint(f"{PROG}: no recorded sessions{whose}")
        return EXIT_OK
    style = Style(use_color())
    header = ["NAME", "USER", "TURNS", "ITEMS", "TOKENS", "COST", "LAST ACTIVITY", "AGENTUSE DIR"]
    rows = [[printable(info.session_name), printable(info.user_id), str(info.turns),
             str(info.items), str(info.usage.tokens) if info.usage else "-",
             _cost(info.usage.cost if info.usage else None), _local_time(info),
             printable(str(info.agentuse_dir)) if info.agentuse_dir else "-"]
            for info in sessions]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    numeric = {2, 3, 4, 5}

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) if i in numeric else c.ljust(w)
               for i, (c, w) in enumerate(zip(cells, widths, strict=False))]
        return "  ".join([*out, cells[-1]])

    print(f"{style.bold}{line(header)}{style.reset}")
    for row in rows:
        print(line(row))
    return EXIT_OK


# -- show -------------------------------------------------------------------------------


def _item_line(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    kind = item.get("type")
    if item.get("role") is not None and kind in (None, "message"):
        content = item.get("content")
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        return f"{item['role']}: {content}"
    if kind == "function_call":
        return f"function_call {item.get('name')}({item.get('arguments', '')})"
    if kind == "function_call_output":
        return f"function_call_output: {item.get('output')}"
    if kind == "reasoning":
        summary = item.get("summary") or []
        return "reasoning: " + " ".join(str(s.get("text", "")) for s in summary
                                        if isinstance(s, dict))
    return str(kind)


def cmd_show(args: argparse.Namespace) -> int:
    found = _lookup(args.name, args.user)
    if isinstance(found, int):
        return found
    view = show_session(found, full=args.full)
    _warn(found)
    if args.json:
        print_json(view.to_json())
        return EXIT_OK
    style = Style(use_color())
    info = found
    print(f"{style.bold}{printable(info.session_name)}{style.reset}  "
          f"user {printable(info.user_id)}  "
          f"{info.turns} turns  {info.items} items"
          + (f" (+{info.archived} archived)" if info.archived else ""))
    if info.usage is not None:
        print(f"usage: {_usage_text(info.usage, info.usage_main)}")
    print(printable(f"log: {info.log_path or '-'}"))
    print(printable(f"agentuse: {info.agentuse_dir or '-'}"))
    if not view.turns:
        print(f"{style.dim}(no turns in the replay log){style.reset}")
    for number, turn in enumerate(view.turns, 1):
        print(f"\n{style.bold}Turn {number}{style.reset}"
              + (f" {style.dim}{turn.turn.started}{style.reset}" if turn.turn.started else ""))
        for text in render_turns([turn.turn], color=style.reset != ""):
            print(text)
        if turn.usage is not None:
            print(f"{style.dim}  usage: {_usage_text(turn.usage, turn.usage_main)}{style.reset}")
    if view.archived is not None:
        print(f"\n{style.bold}Archived (compacted) items: {len(view.archived)}{style.reset}")
        for compaction_id, item in view.archived:
            text = " ".join(_item_line(item).split())
            text = text if len(text) <= 160 else text[:159] + "…"
            print(f"  {style.dim}[{compaction_id}]{style.reset} {text}")
    return EXIT_OK


# -- clear ------------------------------------------------------------------------------


def _confirm(question: str) -> bool:
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def cmd_clear(args: argparse.Namespace) -> int:
    found = _lookup(args.name, args.user, by_id=False)
    if isinstance(found, int):
        return found
    info = found
    if not args.yes:
        if not sys.stdin.isatty():
            eprint(f"{PROG}: refusing to clear {info.session_name!r} without a terminal to "
                   "confirm on; pass --yes")
            return EXIT_USAGE
        eprint(f"This removes session {info.session_name!r} of {info.user_id!r}:")
        eprint(f"  {info.items} stored items, {info.archived} archived items, "
               f"{info.compactions} compactions and its link in {session_locations()['store']}")
        eprint(printable(f"  log {info.log_path or '-'}"))
        eprint(printable(f"  AgentUse tree {info.agentuse_dir or '-'}"))
        if not _confirm("Remove it?"):
            eprint(f"{PROG}: nothing removed")
            return EXIT_FAILURE
    result = clear_session(info)
    for kept in result.kept:
        eprint(f"{PROG}: warning: {printable(str(kept))}")
    if args.json:
        print_json({"session_name": info.session_name, "user_id": info.user_id,
                    **result.to_json()})
    else:
        rows = ", ".join(f"{count} from {table}" for table, count in result.rows.items())
        print(f"cleared {info.session_name!r} of {info.user_id!r}: {rows or 'no store rows'}")
        for path in result.removed_paths:
            print(printable(f"removed {path}"))
    return EXIT_FAILURE if result.kept else EXIT_OK


# -- path -------------------------------------------------------------------------------


def cmd_path(args: argparse.Namespace) -> int:
    info = None
    if args.name is not None:
        found = _lookup(args.name, args.user)
        if isinstance(found, int):
            return found
        info = found
    where = session_locations(info)
    if args.json:
        print_json(where)
        return EXIT_OK
    width = max(map(len, where))
    for key, value in where.items():
        print(printable(f"{key.ljust(width)}  {value if value is not None else '-'}"))
    return EXIT_OK


# -- registration -----------------------------------------------------------------------


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sessions`` and its subcommands."""
    sessions = verbs.add_parser(
        "sessions", help="list, show, clear and locate recorded conversations",
        description="Recorded conversations, joined across the item store, the JSONL replay "
                    "logs and the AgentUse trees. Exit codes: 0 ok, 1 unknown session (or "
                    "a declined confirmation), 2 usage error or ambiguous name.")
    sub = sessions.add_subparsers(dest="sessions_verb", metavar="SUBCOMMAND", required=True)

    def user_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--user", default=None, metavar="U",
                            help="only sessions of this user id (default: any user)")

    listing = sub.add_parser(
        "list", help="every recorded session, newest first",
        description="Every session of the item store (and every link to an AgentUse tree), "
                    "newest first, with its turns (from its replay log), stored items, "
                    "tokens and cost, last activity and AgentUse directory. TOKENS (input + "
                    "output) and COST are summed over the message.json files of the AgentUse "
                    "session INCLUDING its subagents (each subagent's file holds only its own "
                    "calls, so nothing is counted twice; --json also gives usage_main, the "
                    "main agent alone). A replay log that belongs to no stored session (its "
                    "rows were cleared elsewhere, or skilled_crew wrote it) is listed too, "
                    "with 0 items; without an owner record its user and session are the "
                    "names in its path. Reads only.")
    user_option(listing)
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(handler=cmd_list)

    show = sub.add_parser(
        "show", help="the transcript of one session with per-turn usage",
        description="Print a session's transcript from its replay log: user>/agent> lines, "
                    "tool calls dimmed, and each turn's tokens and cost from its AgentUse "
                    "exchange (subagents included). NAME is a session name (exact), else a "
                    "prefix of its AgentUse session id (ULID). A name several users have "
                    "exits 2 with the candidates: choose with --user. Reads only.")
    show.add_argument("name", metavar="NAME_OR_ULID_PREFIX")
    user_option(show)
    show.add_argument("--full", action="store_true",
                      help="also print the items compaction moved to the archive")
    show.add_argument("--json", action="store_true",
                      help="print one JSON object (session, turns with steps and usage, "
                           "archived items with --full)")
    show.set_defaults(handler=cmd_show)

    clear = sub.add_parser(
        "clear", help="remove a session everywhere",
        description="Remove a session's stored items, archived items, compaction records "
                    "and AgentUse link (one transaction), its replay log with its owner "
                    "record, and its AgentUse tree. Asks y/N on a terminal; without one, "
                    "refuses (exit 2) unless --yes is given. NAME must be the exact name.")
    clear.add_argument("name", metavar="NAME")
    user_option(clear)
    clear.add_argument("--yes", "-y", action="store_true", help="do not ask")
    clear.add_argument("--json", action="store_true", help="print what was removed as JSON")
    clear.set_defaults(handler=cmd_clear)

    path = sub.add_parser(
        "path", help="where sessions (or one session) are kept",
        description="Without NAME: the item store, the logs root and the AgentUse root of "
                    "the current project. With NAME (or an AgentUse id prefix): that "
                    "session's store, log, log owner record and AgentUse directory "
                    "('-' for what it does not have). Reads only.")
    path.add_argument("name", nargs="?", default=None, metavar="NAME")
    user_option(path)
    path.add_argument("--json", action="store_true", help="print one JSON object")
    path.set_defaults(handler=cmd_path)
