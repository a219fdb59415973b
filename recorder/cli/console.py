"""What every CLI verb shares: exit codes, colour, JSON output, diagnostics."""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import orjson

from sessiontape.storage.json_style import dumps_compact, dumps_pretty
from sessiontape.storage.text import cost_text, printable, surrogates_escaped

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Style",
    "cost_text",
    "eprint",
    "filters_given",
    "plural",
    "print_csv",
    "print_json",
    "printable",
    "project_option",
    "table",
    "terminal_width",
    "use_color",
    "warnings_in_one_line",
    "when",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

def plural(count: int, word: str) -> str:
    """``1 turn``, ``2 turns``: ``count`` and ``word``, with an ``s`` unless it is one."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def use_color(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never with ``NO_COLOR`` set."""
    stream = stream or sys.stdout
    return not os.environ.get("NO_COLOR") and bool(getattr(stream, "isatty", lambda: False)())


class Style:
    """ANSI styles that are empty strings when colour is off."""

    def __init__(self, color: bool) -> None:
        on = color
        self.bold = "\x1b[1m" if on else ""
        self.dim = "\x1b[2m" if on else ""
        self.red = "\x1b[31m" if on else ""
        self.cyan = "\x1b[36m" if on else ""
        self.heading = "\x1b[1;36m" if on else ""  # bold cyan, in one sequence
        self.reset = "\x1b[0m" if on else ""


def filters_given(filters: Iterable[tuple[str, Any]]) -> str:
    """`` (--user U, --since WHEN)``: the options of ``filters`` (name, value) that were
    given (a value that is not None; a list, each of its values), for a line saying that
    nothing matched them; empty when none was."""
    given = [f"--{name} {printable(str(each), one_line=True)}" for name, value in filters
             for each in (value if isinstance(value, list) else [value]) if each is not None]
    return f" ({', '.join(given)})" if given else ""


def when(text: str) -> datetime:
    """An option's WHEN (``--since``, ``--until``): a duration back from now (``10m``,
    ``2h``, ``1d``) or an ISO time (:func:`~sessiontape.storage.times.parse_since`); a usage
    error otherwise."""
    from sessiontape.storage.times import parse_since

    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The terminal's width in columns (``COLUMNS`` first) when ``stream`` (stdout) is a
    terminal; None for a pipe or a file, whose lines are never cut."""
    stream = stream or sys.stdout
    if not getattr(stream, "isatty", lambda: False)():
        return None
    return shutil.get_terminal_size().columns


_NARROWEST = 8  # a shortened column keeps at least this many characters


def _cut(cell: str, width: int, keep_end: bool) -> str:
    if len(cell) <= width:
        return cell
    return "…" + cell[len(cell) - width + 1:] if keep_end else cell[:width - 1] + "…"


def table(rows: Sequence[Sequence[str]], *, right: Collection[int] = (),
          shrink: Collection[int] = (), keep_end: Collection[int] = (),
          width: int | None = None) -> list[str]:
    """``rows`` (the header first) as aligned lines, two spaces between columns, the
    columns in ``right`` right-aligned, the last one unpadded. With ``width``, the columns
    in ``shrink`` are narrowed, the widest first, until the lines fit (not below 8
    characters); a narrowed cell ends with ``…``, or starts with it in a ``keep_end``
    column (a path keeps its end; its header does not)."""
    count = len(rows[0])
    widths = [max(len(row[i]) for row in rows) for i in range(count)]
    over = sum(widths) + 2 * (count - 1) - width if width is not None else 0
    while over > 0:
        column = max(shrink, key=lambda i: widths[i], default=None)
        if column is None or widths[column] <= _NARROWEST:
            break
        widths[column] -= 1
        over -= 1
    lines = []
    for number, row in enumerate(rows):  # a header is cut at its end
        cells = [_cut(cell, widths[i], number > 0 and i in keep_end)
                 for i, cell in enumerate(row)]
        padded = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
                  for i, cell in enumerate(cells[:-1])]
        lines.append("  ".join([*padded, cells[-1]]))
    return lines


def print_json(value: Any, *, indent: bool = True, stream: TextIO | None = None) -> None:
    """One JSON document (``indent=False``: one line, for streams) on stdout. What orjson
    refuses (a lone surrogate, an integer beyond 64 bits) goes through
    :mod:`~sessiontape.storage.json_style`, which escapes it as JSON allows."""
    option = orjson.OPT_INDENT_2 if indent else 0
    try:
        data = orjson.dumps(value, option=option | orjson.OPT_NON_STR_KEYS, default=str)
    except orjson.JSONEncodeError:
        data = dumps_pretty(value) if indent else dumps_compact(value)
    (stream or sys.stdout).write(data.decode() + "\n")


def print_csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """``header``, then ``rows``, as CSV (RFC 4180: commas, quotes doubled inside quoted
    fields, CRLF line ends) on stdout, for ``--csv``. Values are raw (None an empty field, a
    float as Python writes it); only a lone surrogate, which no encoding writes, becomes its
    ``\\udXXX`` escape as :func:`printable` shows it."""
    def cell(value: Any) -> Any:
        return surrogates_escaped(value) if isinstance(value, str) else value

    writer = csv.writer(sys.stdout, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows([cell(value) for value in row] for row in rows)


def eprint(*parts: Any) -> None:
    """A diagnostic on stderr."""
    print(*parts, file=sys.stderr, flush=True)


def say_extra_missing(prog: str, what: str, extra: str, exc: ImportError) -> int:
    """Say that ``what`` needs the optional ``extra`` (and how to install it); the exit
    code (failure)."""
    eprint(printable(f"{prog}: {what} needs the {extra} extra "
                     f"(pip install 'sessiontape[{extra}]'): {exc}"))
    return EXIT_FAILURE


def warnings_in_one_line(fresh_line: Callable[[], None] | None = None) -> None:
    """The ``sessiontape`` logger's warnings (the recorder's: a layout it could not write)
    on stderr, each as its one line (control characters escaped), without the traceback it
    carries for a log file; ``fresh_line()`` is called first (a warning that comes while an
    answer is being printed starts on a line of its own)."""
    import logging

    class OneLine(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return printable(super().format(record), one_line=True)

        def formatException(self, ei: Any) -> str:
            return ""

    class OnItsOwnLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                text = self.format(record)
                if fresh_line is not None:
                    fresh_line()
                eprint(text)
            except Exception:
                self.handleError(record)

    handler = OnItsOwnLine()
    handler.setFormatter(OneLine())
    logger = logging.getLogger("sessiontape")
    logger.addHandler(handler)
    logger.propagate = False


def print_fields(fields: Mapping[str, Any], *, as_json: bool = False) -> None:
    """Named values: one JSON object (``as_json``), else one ``key  value`` line each, the
    keys aligned (None shown as ``-``, names escaped)."""
    if as_json:
        print_json(fields)
        return
    width = max(map(len, fields), default=0)
    for key, value in fields.items():
        print(printable(f"{key.ljust(width)}  {value if value is not None else '-'}"))


def store_option(parser: argparse.ArgumentParser, what: str = "read") -> None:
    """``--store LOCATION``: the item store a verb reads or writes, a SQLite file or a
    ``postgresql://`` URL (default: ``SESSIONTAPE_STORE``, else the skillet file)."""
    parser.add_argument("--store", default=None, metavar="URL",
                        help=f"the store to {what}: a postgresql:// URL (a store many hosts "
                             "share: docs/postgres.md) or a SQLite file (default: "
                             "$SESSIONTAPE_STORE, else the skillet store file)")


def reading_store_option(parser: argparse.ArgumentParser) -> None:
    """``--store URL`` on a verb that reads: a PostgreSQL store is read through this host's
    mirror of it, brought up to date first (``finding.read_from_store``, called by ``main``
    for every verb that sets ``reads_store``)."""
    parser.add_argument("--store", default=None, metavar="URL",
                        help="read a PostgreSQL store (every host's conversations; default: "
                             "$SESSIONTAPE_STORE when it is a postgresql:// URL), through "
                             "this host's mirror of it, brought up to date first "
                             "(docs/postgres.md)")
    parser.set_defaults(reads_store=True)


def project_option(parser: argparse.ArgumentParser) -> None:
    """``--project DIR``: the project whose AgentUse tree a verb reads (every verb says it
    the same way)."""
    parser.add_argument("--project", type=Path, default=None, metavar="DIR",
                        help="the project whose AgentUse tree is read (default: the current "
                             "directory; its git top level, as AgentUse hashes it)")
