"""The search syntax of ``sessiontape search`` (docs/cli.md, "Search syntax") as FTS5 queries.

The catalog's texts are indexed by FTS5's ``unicode61`` tokenizer: letters and digits make
words, everything else separates them. :func:`fts5_query` makes each whitespace-separated
term of a query a quoted FTS5 phrase (``gpt-4.1`` is the words ``gpt 4 1`` in a row), so
that any string is a valid query; upper-case ``OR``, ``AND`` and ``NOT`` between two terms
stay operators, ``"..."`` groups words into one phrase and a trailing ``*`` makes a prefix.
:func:`fts5_problem` says what is wrong with a query passed to FTS5 as is, without SQL.
"""

from __future__ import annotations

import re

__all__ = ["fts5_problem", "fts5_query"]

# A term: non-space characters and quoted parts, a quoted part running to the next quote or
# to the end of the query.
_TERM = re.compile(r'(?:"[^"]*"?|[^\s"])+')
_OPERATORS = ("OR", "AND", "NOT")


def fts5_query(query: str) -> str:
    """``query`` in the search syntax as an FTS5 query that is always valid ("" when it has
    no term). Each alternative (terms between ``OR``s) is its terms, ANDed, then ``NOT`` and
    each term that followed a ``NOT``: FTS5 binds ``NOT`` tighter than ``OR``, and ANDs the
    phrases in a row with no operator between them, ignoring those without a word."""
    terms = _TERM.findall(query.replace("\0", " "))
    alternatives: list[tuple[list[str], list[str]]] = [([], [])]
    operator = None
    for n, term in enumerate(terms):
        if term in _OPERATORS and operator is None and 0 < n < len(terms) - 1:
            operator = term
            continue
        if operator == "OR":
            alternatives.append(([], []))
        words, excluded = alternatives[-1]
        (excluded if operator == "NOT" else words).append(_phrase(term))
        operator = None
    return " OR ".join(" ".join([*words, *(f"NOT {word}" for word in excluded)])
                       for words, excluded in alternatives)


def _phrase(term: str) -> str:
    """``term`` as an FTS5 string (its quotes are spaces: they separate words anyway), with
    its trailing ``*``: a prefix."""
    prefix = "*" if term.endswith("*") else ""
    return '"' + " ".join(term.removesuffix(prefix).replace('"', " ").split()) + '"' + prefix


def fts5_problem(message: str) -> str:
    """What SQLite's ``message`` about a malformed FTS5 query says, in the query's terms."""
    if "unterminated string" in message:
        return "a quote is not closed"
    if near := re.search(r'syntax error near "(.*)"', message):
        return f"unexpected {near[1]!r}" if near[1] else "the query ends too soon"
    if column := re.search(r"no such column: (.*)", message):
        return f"unknown column {column[1]!r}"
    return message.removeprefix("fts5: ")
