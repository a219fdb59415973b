"""``sessiontape demo``: one recorded turn of the bundled demo conversation."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from sessiontape.storage.names import DEFAULT_USER_ID

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    Style,
    plural,
    printable,
    store_option,
    use_color,
    warnings_in_one_line,
)


def cmd_demo(args: argparse.Namespace) -> int:
    """Run one recorded turn of the bundled demo conversation."""
    if args.model and not os.environ.get("OPENAI_API_KEY"):
        print("sessiontape demo: --model needs OPENAI_API_KEY (leave it out to run offline)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.user_email == "":  # an unset variable: no one to file the conversation under
        print("sessiontape demo: --user-email is empty", file=sys.stderr)
        return EXIT_USAGE
    from .finding import store_refuses_run

    if store_refuses_run("sessiontape demo", args.store):  # before the SDK is loaded
        return EXIT_FAILURE
    if args.session_name == "":  # an unset variable, not a request for the default
        print("sessiontape demo: --session-name is empty (leave it out for the demo's own "
              "session)", file=sys.stderr)
        return EXIT_USAGE
    from sessiontape.storage.skillet.log_reader import SessionLogReader

    from .conversation import Output
    from .demo_world import DEMO_SESSION, demo_paths, run_demo
    from .transcript import render_turns

    out = Output()
    warnings_in_one_line(fresh_line=out.fresh_line)
    args.session_name = args.session_name or DEMO_SESSION

    color = use_color()
    style = Style(color)
    bold, reset = style.bold, style.reset
    name, user = (printable(text, one_line=True) for text in (args.session_name, args.user_email))
    out.line(f"{bold}sessiontape demo{reset}: conversation '{name}' of {user}"
             f" ({'model ' + args.model if args.model else 'offline, scripted model'})")
    out.write("agent> ")
    result = asyncio.run(run_demo(user_id=args.user_email, session_name=args.session_name,
                                  model=args.model, on_text=out.write, store=args.store))
    out.line()
    if result.model_input_items is not None:
        print(f"\nTurn {result.earlier_turns + 1}: the model's first call got "
              f"{plural(result.model_input_items, 'input item')} "
              f"({result.model_input_items - 1} from earlier turns, replayed from the SQLite "
              "store).")
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


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` verb."""
    demo = verbs.add_parser(
        "demo", help=VERBS["demo"].help,
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
    store_option(demo, "record into")
    demo.set_defaults(handler=cmd_demo)
