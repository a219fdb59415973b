"""``sessiontape paths``: where sessiontape reads and writes."""

from __future__ import annotations

import argparse

from sessiontape.storage.paths import resolved_paths

from . import VERBS
from .console import EXIT_OK, print_fields, project_option


def cmd_paths(args: argparse.Namespace) -> int:
    """Print where sessiontape reads and writes."""
    paths = resolved_paths(args.project)
    print_fields(paths, as_json=args.json)
    return EXIT_OK


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``paths`` verb."""
    paths = verbs.add_parser(
        "paths", help=VERBS["paths"].help,
        description="Print the AgentUse session root of a project and the skillet "
                    "state, cache and config directories, as the environment resolves them.")
    project_option(paths)
    paths.add_argument("--json", action="store_true", help="print one JSON object")
    paths.set_defaults(handler=cmd_paths)
