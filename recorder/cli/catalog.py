"""``sessiontape search``, ``usage`` and ``catalog``: questions answered from the catalog.

``search`` and ``usage`` bring the catalog (:mod:`sessiontape.storage.catalog.index`, a
cache of every conversation in the three layouts) up to date first, re-reading only what changed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from sessiontape.storage.catalog.index import (
    GROUP_KEYS,
    GROUPS,
    HIT_KEYS,
    KINDS,
    SCHEMA_VERSION,
    SNIPPET_END,
    SNIPPET_START,
    USAGE_SUMS,
    Catalog,
    CatalogUnavailable,
    SearchHit,
    SearchSyntaxError,
    UsageRow,
    default_catalog_path,
    stored_schema,
)
from sessiontape.storage.names import AmbiguousUserError
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
    print_json,
    printable,
    project_option,
    reading_store_option,
    use_color,
    when,
)
from .finding import Progress, ambiguous_user, answering_catalog, say_store_damage

# The JSON key that names a usage row's group.
# A usage row's sums, as --json and --csv name them.
# search --json's (and --csv's) keys.
USER_HELP = ("the exact user id, else the id with case ignored, else the id whose part "
             "before '@' U is (carol: carol@example.com), else the id whose log folder U "
             "names (carol_example_com); one that several users match that way exits 2 "
             "naming them")


def _hit_line(hit: SearchHit, style: Style) -> str:
    """``user/session  turn N  kind: snippet`` with the matches in bold on a terminal."""
    # Escaped piece by piece: the match markers are control characters printable escapes.
    pieces = " ".join(hit.snippet.split()).replace(SNIPPET_END, SNIPPET_START)
    snippet = "".join(printable(piece) if n % 2 == 0 else
                      f"{style.bold}{style.red}{printable(piece)}{style.reset}"
                      for n, piece in enumerate(pieces.split(SNIPPET_START)))
    where = f"{hit.user}/{hit.session}" if hit.user else hit.session
    turn = f"turn {hit.turn}" if hit.turn is not None else "turn ?"
    kind = printable(hit.kind + (f" {hit.tool}" if hit.tool else ""), one_line=True)
    label = f"{style.cyan}{printable(where, one_line=True)}{style.reset}"
    return f"{label}  {turn}  {style.dim}{kind}:{style.reset} {snippet}"


def _no_match(query: str, args: argparse.Namespace) -> str:
    """``no match for 'QUERY' (--user U, ...)``: the query and the filters given."""
    return f"no match for {query!r}" + filters_given((
        ("user", args.user), ("agent", args.agent), ("tool", args.tool), ("kind", args.kind),
        ("since", args.since and shown_time(int(args.since.timestamp() * 1000)))))


def cmd_search(args: argparse.Namespace) -> int:
    """Print the texts of every conversation that match QUERY; exit 1 when none does."""
    query = " ".join(args.query)
    try:
        with answering_catalog("sessiontape search", args.project) as catalog:
            hits = catalog.search(query, user=args.user, agent=args.agent, tool=args.tool,
                                  kind=args.kind, since=args.since, limit=args.limit,
                                  raw=args.raw)
    except AmbiguousUserError as exc:
        return ambiguous_user("sessiontape search", exc)
    except SearchSyntaxError as exc:
        eprint(f"sessiontape search: {exc}")
        return EXIT_USAGE
    except CatalogUnavailable as exc:
        eprint(f"sessiontape search: {exc}")
        return EXIT_FAILURE
    if args.json:
        print_json([hit.to_json() for hit in hits])
    elif args.csv:
        print_csv(HIT_KEYS, (list(hit.to_json().values()) for hit in hits))
    else:
        style = Style(use_color())
        for hit in hits:
            print(_hit_line(hit, style))
    if not hits:
        eprint(f"sessiontape search: {_no_match(query, args)}")
        return EXIT_FAILURE
    return EXIT_OK


def _usage_csv(rows: list[UsageRow], group: str, breakdown: bool) -> None:
    """The rows as CSV, the columns of --json; with ``breakdown``, a row per model in each
    group, after the group's own columns."""
    records = [row.to_json(group) for row in rows]
    if breakdown:
        records = [{key: value for key, value in record.items()
                    if key not in (*USAGE_SUMS, "models")} | model
                   for record in records for model in record.get("models", [])]
    header = [GROUP_KEYS[group], *(["user"] if group == "session" else []),
              *(["model"] if breakdown else []), *USAGE_SUMS]
    print_csv(header, ([record[key] for key in header] for record in records))


def _usage_cells(row: UsageRow, label: str) -> list[str]:
    return [printable(label, one_line=True), str(row.calls), f"{row.input_tokens:,}",
            f"{row.output_tokens:,}", f"{row.cached_tokens:,}", f"{row.reasoning_tokens:,}",
            cost_text(row.cost)]


def _usage_table(rows: list[UsageRow], group: str) -> list[str]:
    """Aligned lines: a header, each row (its models indented under it), a total line."""
    header = [GROUP_KEYS[group], "calls", "input", "output", "cached", "reasoning", "cost"]
    cells = []
    for r in rows:
        cells.append(_usage_cells(r, f"{r.user}/{r.key}" if group == "session" and r.user
                                  else r.key))
        cells += [_usage_cells(model, f"  {model.key}") for model in r.models]
    total = [sum(getattr(r, name) for r in rows) for name in USAGE_SUMS]
    cells.append(["total", str(total[0]), *(f"{n:,}" for n in total[1:-1]),
                  cost_text(total[-1])])
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
            for row in [header, *cells]]


def cmd_usage(args: argparse.Namespace) -> int:
    """Print tokens and cost per day, ISO week, month, session, model or agent (of one
    user; with each model's inside each group)."""
    try:
        with answering_catalog("sessiontape usage", args.project) as catalog:
            try:
                rows = catalog.usage(args.group, since=args.since, until=args.until,
                                     user=args.user, breakdown=args.breakdown)
            except AmbiguousUserError as exc:
                return ambiguous_user("sessiontape usage", exc)
            except ValueError as exc:  # --breakdown for model
                eprint(f"sessiontape usage: {exc}")
                return EXIT_USAGE
    except CatalogUnavailable as exc:
        eprint(f"sessiontape usage: {exc}")
        return EXIT_FAILURE
    if args.json:
        print_json([row.to_json(args.group) for row in rows])
    elif args.csv:
        _usage_csv(rows, args.group, args.breakdown)
    else:
        for line in _usage_table(rows, args.group):
            print(line)
    return EXIT_OK


def cmd_catalog_path(args: argparse.Namespace) -> int:
    """``catalog path``: where the catalog is (``--json``: whether it exists, its size and
    schema version too)."""
    path = default_catalog_path()
    if not args.json:
        print(printable(str(path)))
        return EXIT_OK
    try:
        size: int | None = path.stat().st_size
    except OSError:
        size = None
    print_json({"path": str(path), "exists": size is not None, "size": size,
                "schema_version": stored_schema(path)})
    return EXIT_OK


def cmd_catalog_refresh(args: argparse.Namespace) -> int:
    """``catalog refresh [--full]``: bring the catalog up to date now and say what that
    did."""
    where = Locations.resolve(project_root=args.project)
    say_store_damage("sessiontape catalog", where)
    try:
        with Catalog() as catalog:
            summary = catalog.refresh(where, full=args.full,
                                      progress=Progress() if sys.stderr.isatty() else None)
    except CatalogUnavailable as exc:
        eprint(f"sessiontape catalog: {exc}")
        return EXIT_FAILURE
    for problem in summary.problems:
        eprint(f"sessiontape catalog: warning: {printable(problem)}")
    if args.json:
        print_json({"path": str(default_catalog_path()), **dataclasses.asdict(summary)})
        return EXIT_OK
    how = "rebuilt" if summary.rebuilt else "refreshed"
    print(printable(f"{how} {default_catalog_path()}: "
                    f"{plural(summary.conversations, 'conversation')}, "
                    f"{summary.reindexed} read, {summary.dropped} dropped"))
    return EXIT_OK


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``search`` and ``usage`` verbs."""
    search = verbs.add_parser(
        "search", help=VERBS["search"].help,
        description="Full-text search over the user messages, answers, reasoning, tool "
                    "arguments and tool outputs of every recorded conversation (sessiontape's, "
                    "AgentUse's and skilled_crew's), best matches first. QUERY (its words may "
                    "be separate arguments; '--' before one that starts with '-') finds the "
                    "texts holding all its words as written (gpt-4.1, e-mail, C++: punctuation "
                    'only separates words; case is ignored); "a phrase" keeps words together, '
                    "prefix* ends a word anywhere; upper-case OR between words gives "
                    "alternatives (rainy Oslo OR sunny Faro), NOT excludes the word after it, "
                    "AND is a space. Answered from the catalog, which is brought up to date "
                    "first. Exit status (as grep's): 0 when something matched, 1 when nothing "
                    "did (stderr says so; --json prints []), 2 for a usage error (a malformed "
                    "--raw query, a --user that means several users).")
    search.add_argument("query", metavar="QUERY", nargs="+")
    search.add_argument("--raw", action="store_true",
                        help="QUERY is SQLite FTS5's own syntax (NEAR, parentheses, ^); a "
                             "malformed one exits 2")
    search.add_argument("--user", default=None, metavar="U",
                        help=f"only this user's conversations: {USER_HELP}")
    search.add_argument("--agent", default=None, help="only texts of this agent")
    search.add_argument("--tool", default=None, help="only this tool's arguments and outputs")
    search.add_argument("--kind", default=None,
                        choices=KINDS,
                        help="only texts of this kind")
    search.add_argument("--since", type=when, default=None, metavar="WHEN",
                        help="only texts since WHEN (10m, 2h, 1d, or an ISO time)")
    search.add_argument("--limit", type=int, default=50, help="at most this many hits (50)")
    project_option(search)
    formats = search.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true",
                         help="an array of hits: session, user, turn (1-based), kind, snippet, "
                              "agent, tool, at")
    formats.add_argument("--csv", action="store_true",
                         help="CSV: a header, then a row per hit, the columns of --json")
    reading_store_option(search)
    search.set_defaults(handler=cmd_search)

    usage = verbs.add_parser(
        "usage", help=VERBS["usage"].help,
        description="Input, output, cached and reasoning tokens and cost (USD) of every "
                    "recorded model call, summed per day, ISO week (2025-W01) or month "
                    "(UTC), session, model or agent. A model is spelled provider/model, as "
                    "the replay log spells it, "
                    "whichever layout recorded the call (AgentUse's tree: provider:model). "
                    "Answered from the catalog, which is brought up to date first.")
    usage.add_argument("group", choices=GROUPS)
    usage.add_argument("--since", type=when, default=None, metavar="WHEN",
                       help="calls since WHEN (10m, 2h, 1d, or an ISO time)")
    usage.add_argument("--until", type=when, default=None, metavar="WHEN",
                       help="calls before WHEN")
    usage.add_argument("--user", default=None, metavar="U",
                       help=f"only this user's calls: {USER_HELP}")
    usage.add_argument("--breakdown", action="store_true",
                       help="each model's calls inside each group (not for model): indented "
                            "under it; --json: its 'models'; --csv: a row per model")
    project_option(usage)
    formats = usage.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true",
                         help="an array of rows: the group's key (day, week, month, session "
                              "and user, model, agent), calls, input_tokens, output_tokens, "
                              "cached_tokens, reasoning_tokens, cost")
    formats.add_argument("--csv", action="store_true",
                         help="CSV: a header, then a row per group (--breakdown: per model "
                              "in each group, its model column after the group's), the "
                              "columns of --json")
    reading_store_option(usage)
    usage.set_defaults(handler=cmd_usage)

    catalog = verbs.add_parser(
        "catalog", help=VERBS["catalog"].help,
        description="The catalog is the index (a cache) that sessions list and show, search "
                    "and usage answer from; each brings it up to date first (show: the "
                    "sessions its name selects). 'refresh --full' also states every log and "
                    "every file of every AgentUse tree, to see at once what no recorded turn "
                    "shows (an old session's file edited in place, an old log appended to "
                    "with no item stored, AgentUse continuing an old session sessiontape "
                    "logged), which otherwise shows within some refreshes (docs/formats.md, "
                    "'Catalog').")
    actions = catalog.add_subparsers(dest="catalog_verb", metavar="SUBCOMMAND", required=True)
    refresh = actions.add_parser(
        "refresh", help="bring the catalog up to date now and say what that did",
        description="Bring the catalog up to date now and say what that did: the "
                    "conversations it holds, those read again and those dropped.")
    refresh.add_argument("--full", action="store_true",
                         help="state every log and every file of every tree, not only "
                              "the recent ones")
    project_option(refresh)
    refresh.add_argument("--json", action="store_true",
                         help="an object: path, conversations, reindexed, dropped, listed, "
                              "store_pairs, rebuilt, problems")
    reading_store_option(refresh)
    refresh.set_defaults(handler=cmd_catalog_refresh)
    path = actions.add_parser(
        "path", help="where the catalog is",
        description=f"Where the catalog is (a cache: deleting it loses nothing). Reads only; "
                    f"makes no catalog. This sessiontape's catalog schema is "
                    f"{SCHEMA_VERSION}: a catalog of an older one is rebuilt, one of a "
                    f"newer one is not used.")
    path.add_argument("--json", action="store_true",
                      help="an object: path, exists, size (bytes; null without a file), "
                           "schema_version (the file's; null without a catalog there)")
    path.set_defaults(handler=cmd_catalog_path)
