"""``sessiontape replay``: a recorded session replayed against its recorded model answers."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from sessiontape.storage.paths import Locations

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    eprint,
    print_json,
    printable,
    reading_store_option,
    warnings_in_one_line,
)
from .finding import lookup

PROG = "sessiontape replay"
DEMO_AGENT = "Trip planner"  # the bundled demo's, replayed without --agent


def _agent(args: argparse.Namespace, recorded_agent: str | None) -> Any:
    """The agent to replay: --agent's, else the demo's for a demo session; None after
    saying why there is none."""
    from .agent_loader import AgentLoadError, load_agent

    if args.agent is not None:
        try:
            return load_agent(args.agent)
        except AgentLoadError as exc:
            eprint(printable(f"{PROG}: --agent {args.agent}: {exc}"))
            return None
    if recorded_agent == DEMO_AGENT:
        from .demo_world import demo_agent

        return demo_agent(1)
    eprint(printable(f"{PROG}: give the agent to replay with --agent MODULE:ATTR (the "
                     f"recording names {recorded_agent or 'no agent'}; only the bundled "
                     "demo's is known without it)"))
    return None


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay NAME and say where it diverges: exit 0 identical, 1 diverged."""
    warnings_in_one_line()
    where = Locations.resolve(project_root=args.project)
    found = lookup(PROG, args.name, args.user, where)
    if isinstance(found, int):
        return found
    agent = _agent(args, found.agent)
    if agent is None:
        return EXIT_USAGE
    from sessiontape.replay import replay_session

    try:
        report = asyncio.run(replay_session(found, agent, turn=args.turn,
                                            recorded_tools=args.recorded_tools,
                                            record_as=args.record_as))
    except ValueError as exc:
        eprint(printable(f"{PROG}: {exc}"))
        return EXIT_USAGE
    if args.json:
        print_json(report.to_json())
    else:
        print(report.explain())
    return EXIT_OK if report.identical else EXIT_FAILURE


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = verbs.add_parser(
        "replay", help=VERBS["replay"].help,
        description="Run an agent on a recorded session's prompts with a model that answers "
                    "each call with the recorded response, offline, and report turn by turn "
                    "where the run diverges (instructions, a tool's output, a tool it no "
                    "longer has, a call the recording lacks, the final answer). Exit 0 when "
                    "identical, 1 on divergence. Nothing is written to the recorded session.")
    parser.add_argument("name", metavar="NAME", help="the session (its name or AgentUse id)")
    parser.add_argument("--user", default=None, metavar="U", help="the session's user")
    parser.add_argument("--turn", type=int, default=None, metavar="N",
                        help="replay turn N only (the turns before it are its history)")
    parser.add_argument("--agent", default=None, metavar="MODULE:ATTR",
                        help="the agent to replay (module:attr or path/to/file.py:attr; "
                             "default: the bundled demo's, for a demo session)")
    parser.add_argument("--recorded-tools", action="store_true",
                        help="tools return their recorded outputs instead of running")
    parser.add_argument("--record-as", default=None, metavar="SESSION",
                        help="record the replay into SESSION (never into NAME)")
    parser.add_argument("--project", type=Path, default=None, metavar="DIR",
                        help="the project whose AgentUse sessions to read")
    parser.add_argument("--json", action="store_true", help="the report as one JSON object")
    reading_store_option(parser)
    parser.set_defaults(handler=cmd_replay)
