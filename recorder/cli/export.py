"""``sessiontape export``: recorded conversations written in another tool's format."""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from sessiontape.storage.catalog.conversation import LedgerConversation, LedgerSourceError
from sessiontape.storage.catalog.index import CatalogUnavailable
from sessiontape.storage.catalog.sessions import SessionInfo, export_key
from sessiontape.storage.exports.agentrun import export_agentrun
from sessiontape.storage.exports.atif import export_atif
from sessiontape.storage.exports.html import export_html
from sessiontape.storage.exports.ledger import LedgerSummary, export_ledger
from sessiontape.storage.exports.markdown import export_markdown
from sessiontape.storage.exports.session_events import export_session_events
from sessiontape.storage.exports.summary import ExportSummary
from sessiontape.storage.paths import Locations

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    eprint,
    plural,
    print_json,
    printable,
    project_option,
    reading_store_option,
)
from .finding import lookup, oldest_first

PROG = "sessiontape export"


def _selected(args: argparse.Namespace) -> Iterator[SessionInfo] | int:
    """The conversations to export, oldest first (when two conversations repeat a layout's
    id, the older one keeps it): each ``--session`` once, else every conversation (of
    ``--user``) streamed from the catalog one at a time; or an exit code."""
    if not args.session:
        return oldest_first(PROG, args.project, args.user)
    found: dict[tuple[str | None, str], SessionInfo] = {}
    where = Locations.resolve(project_root=args.project)
    for name in args.session:
        info = lookup(PROG, name, args.user, where)
        if isinstance(info, int):
            return info
        found.setdefault((info.user_id, info.session_name), info)
    return iter(sorted(found.values(), key=export_key))


def _conversation(info: SessionInfo) -> LedgerConversation:
    return LedgerConversation(info.user_id, info.session_name, info.agentuse_dir,
                              info.log_path, info.origin)


def _export_otel(out: Path, conversations: Iterable[LedgerConversation], *, force: bool,
                 strict: bool) -> ExportSummary:
    from sessiontape.storage.exports.otel import export_otel  # the [otel] extra's

    return export_otel(out, conversations, force=force, strict=strict)


# each: (out, conversations, *, force, strict) -> its summary
EXPORTS: dict[str, Callable[..., ExportSummary]] = {
    "ledger": export_ledger, "session-events": export_session_events,
    "markdown": export_markdown, "html": export_html, "agentrun": export_agentrun,
    "atif": export_atif, "otel": _export_otel}


def _headers(given: list[str]) -> dict[str, str] | None:
    """``--header KEY=VALUE`` options as a mapping (None: the OTEL_EXPORTER_OTLP_HEADERS
    environment variable's, which the exporter reads)."""
    if not given:
        return None
    pairs = [header.partition("=") for header in given]
    return {key.strip(): value.strip() for key, _, value in pairs}


def _send(args: argparse.Namespace, conversations: Iterable[LedgerConversation]
          ) -> ExportSummary:
    from sessiontape.storage.exports.otel import send_otel  # the [otel] extra's

    return send_otel(args.endpoint, conversations, strict=bool(args.session),
                     headers=_headers(args.header))


def _summary_line(summary: ExportSummary, sent_to: str | None) -> str:
    wrote = (f"sent {plural(summary.conversations, 'conversation')} to {sent_to}: "
             if sent_to is not None else
             f"exported {plural(summary.conversations, 'conversation')} to {summary.path}: ")
    if not isinstance(summary, LedgerSummary):  # one count, of its UNIT
        return wrote + plural(summary.written, summary.UNIT)
    return (wrote + f"{plural(summary.sessions, 'session')} "
            f"({plural(summary.subagents, 'subagent')}), "
            f"{plural(summary.messages, 'message')}, {plural(summary.turns, 'turn')}, "
            f"{plural(summary.tool_calls, 'tool call')}")


def cmd_export(args: argparse.Namespace) -> int:
    """Write the chosen conversations into a new file of ``--format`` (or send them to
    ``--endpoint``) and say what it holds."""
    usage = _usage_error(args)
    if usage is not None:
        eprint(f"{PROG}: {usage}")
        return EXIT_USAGE
    selected = _selected(args)
    if isinstance(selected, int):
        return selected
    try:
        if args.endpoint is not None:
            summary = _send(args, map(_conversation, selected))
        else:
            summary = EXPORTS[args.format](args.out, map(_conversation, selected),
                                           force=args.force, strict=bool(args.session))
    except ImportError as exc:  # an optional extra that is not installed
        eprint(printable(f"{PROG}: {exc}"))
        return EXIT_FAILURE
    except FileExistsError:
        eprint(printable(f"{PROG}: {args.out} already exists; pass --force to replace it"))
        return EXIT_USAGE
    except LedgerSourceError as exc:
        eprint(printable(f"{PROG}: {exc}; nothing written"))
        return EXIT_FAILURE
    except CatalogUnavailable as exc:  # the catalog failed while it was read
        reason = str(exc).removesuffix("; reading the sessions directly")
        eprint(printable(f"{PROG}: {reason}; nothing written"))
        return EXIT_FAILURE
    except (OSError, sqlite3.Error) as exc:
        eprint(printable(f"{PROG}: cannot write {args.out}: {exc}"))
        return EXIT_FAILURE
    except RuntimeError as exc:  # OtelSendError: the endpoint did not take the spans
        if args.endpoint is None:
            raise
        eprint(printable(f"{PROG}: {exc}"))
        return EXIT_FAILURE
    finally:
        close = getattr(selected, "close", None)  # the catalog, when the export stopped early
        if close is not None:
            close()
    for problem in summary.problems:
        eprint(f"{PROG}: warning: {printable(problem)}")
    for skipped in summary.skipped:
        eprint(f"{PROG}: warning: skipped {printable(skipped)}")
    if args.json:
        print_json(summary.to_json())
    else:
        print(printable(_summary_line(summary, args.endpoint)))
    return EXIT_OK


def _usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of ``--out``, ``--endpoint`` and ``--format``."""
    if args.endpoint is not None and args.format != "otel":
        return "--endpoint sends OpenTelemetry spans: use it with --format otel"
    if args.endpoint is not None and args.out is not None:
        return "give --out FILE or --endpoint URL, not both"
    if args.endpoint is None and args.out is None:
        return "--out FILE is required" + (" (or --endpoint URL)" if args.format == "otel"
                                           else "")
    if args.header and args.endpoint is None:
        return "--header goes with --endpoint"
    return None


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``export`` verb."""
    export = verbs.add_parser(
        "export", help=VERBS["export"].help,
        description="Write recorded conversations into a new file in another tool's "
                    "format. ledger: a SQLite file in the Agents Ledger's format, the tables "
                    "agent_sessions (subagents included, linked to the call that ran them), "
                    "agent_messages, agent_turns and agent_tool_calls. session-events: a "
                    "JSONL file of Agent Sessions' SessionEvent, one a line (docs/interop.md). "
                    "markdown: a transcript to read or share, each turn with its tool calls, "
                    "subagents quoted under the call that ran them, tokens and cost. html: "
                    "the same as one self-contained page (no script, no external URL). "
                    "agentrun: agentrun's Message lines (JSONL), each turn closed by a "
                    "result with its usage and cost. atif: one ATIF v1.8 trajectory a line "
                    "(JSONL), subagents embedded. otel: OpenTelemetry GenAI spans "
                    "(invoke_agent, chat, execute_tool), one OTLP/JSON request a line, or "
                    "sent to an OTLP/HTTP endpoint with --endpoint (needs the [otel] "
                    "extra). "
                    "Each conversation is read from its AgentUse tree with the turns of its "
                    "replay log that tree lacks (skilled_crew's), else from its replay log. "
                    "The file is created 0600 and appears whole or not at all.",
        epilog="Exit status: 0 written; 1 unknown --session, a named session with nothing "
               "to export, a write error (nothing is written), the [otel] extra missing, "
               "or an endpoint that did not take the spans; 2 usage error, an "
               "ambiguous name, or FILE exists without --force. Without --session a "
               "conversation with nothing to export (only stored items) is skipped with a "
               "warning.")
    export.add_argument("--format", required=True, choices=tuple(EXPORTS),
                        help="the format to write (ledger: Mnemonic's Agents Ledger, SQLite; "
                             "session-events: Agent Sessions' SessionEvent lines, JSONL; "
                             "markdown: a transcript; html: a self-contained page; "
                             "agentrun: agentrun Message lines, JSONL; atif: ATIF v1.8 "
                             "trajectories, JSONL; otel: OpenTelemetry spans, OTLP/JSON)")
    export.add_argument("--out", type=Path, metavar="FILE", help="the file to create")
    export.add_argument("--endpoint", default=None, metavar="URL",
                        help="with --format otel: send the spans to this OTLP/HTTP traces "
                             "endpoint (e.g. http://127.0.0.1:4318/v1/traces) instead of "
                             "writing a file")
    export.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                        help="with --endpoint: an HTTP header to send (repeatable; default: "
                             "the OTEL_EXPORTER_OTLP_HEADERS environment variable's)")
    export.add_argument("--session", action="append", default=None, metavar="NAME",
                        help="a conversation to export, by name or AgentUse id prefix as "
                             "`sessions show` takes it (repeatable; default: every "
                             "conversation `sessions list` lists)")
    export.add_argument("--user", default=None, metavar="U",
                        help="only conversations of this user id")
    project_option(export)
    export.add_argument("--force", action="store_true", help="replace FILE if it exists")
    export.add_argument("--json", action="store_true",
                        help="print the counts and the path as one JSON object")
    reading_store_option(export)
    export.set_defaults(handler=cmd_export)
