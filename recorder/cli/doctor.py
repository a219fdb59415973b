"""``sessiontape doctor``: what is wrong with the recorded layouts, and ``--fix`` for what is
safe to repair (:mod:`sessiontape.storage.catalog.doctor`)."""

from __future__ import annotations

import argparse

from sessiontape.storage.catalog.doctor import ERROR, Finding, Repaired, diagnose, repair
from sessiontape.storage.paths import Locations

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_OK,
    Style,
    plural,
    print_json,
    printable,
    project_option,
    use_color,
)


def _finding_lines(finding: Finding, style: Style) -> list[str]:
    mark = f"{style.red}{finding.severity}{style.reset}" if finding.severity == ERROR \
        else f"{style.dim}{finding.severity}{style.reset}"
    lines = [f"{mark} {style.bold}{finding.kind}{style.reset} "
             f"{printable(str(finding.path), one_line=True)}",
             f"  {printable(finding.problem, one_line=True)}"]
    if finding.repair is not None:
        lines.append(f"  repair: {printable(finding.repair, one_line=True)}")
    return lines


def _repaired_line(done: Repaired) -> str:
    verdict = "fixed" if done.done else "not fixed"
    return printable(f"{verdict} {done.finding.kind} {done.finding.path}: {done.how}",
                     one_line=True)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print what is wrong and how to repair it (``--fix``: repair what is safe first, then
    print what remains); exit 1 while an error remains."""
    where = Locations.resolve(project_root=args.project)
    findings = diagnose(where)
    repaired: list[Repaired] = []
    if args.fix and any(finding.fixable for finding in findings):
        repaired = repair(findings, where)
        findings = diagnose(where)
    wrong = any(finding.severity == ERROR for finding in findings)
    if args.json:
        document = {"findings": [finding.to_json() for finding in findings]}
        if args.fix:
            document["repaired"] = [done.to_json() for done in repaired]
        print_json(document)
    else:
        style = Style(use_color())
        for done in repaired:
            print(_repaired_line(done))
        for finding in findings:
            print("\n".join(_finding_lines(finding, style)))
        if not wrong:
            notes = f" ({plural(len(findings), 'note')} of past damage)" if findings else ""
            print(f"nothing wrong{notes}")
    return EXIT_FAILURE if wrong else EXIT_OK


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``doctor`` verb."""
    doctor = verbs.add_parser(
        "doctor", help=VERBS["doctor"].help,
        description="Check the item store (damage), the links of conversations to their "
                    "AgentUse trees (moved, dangling, missing), the trees (files that do not "
                    "parse, exchanges a killed recorder left open), the replay logs (a torn "
                    "last line, malformed lines) and the catalog; print what is wrong and the "
                    "command that repairs it. Exit 0 when nothing is wrong (notes of past "
                    "damage, which nothing repairs, aside), 1 when something is.")
    doctor.add_argument("--fix", action="store_true",
                        help="repair what is safe first (relink moved trees, rebuild the "
                             "catalog, close dead exchanges, rebuild a damaged session.json, "
                             "end a torn log line), then print what remains; never deletes "
                             "or rewrites a log line or a stored item, never touches a "
                             "damaged item store")
    project_option(doctor)
    doctor.add_argument("--json", action="store_true",
                        help="an object: findings (kind, path, problem, repair, fixable, "
                             "severity, user_id, session_name, target); with --fix, "
                             "repaired (kind, path, done, how)")
    doctor.set_defaults(handler=cmd_doctor)
