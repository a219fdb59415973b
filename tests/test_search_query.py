"""The search syntax (``storage/catalog/search_query.py``) through ``Catalog.search``.

The module's catalog holds conversations recorded with the real SDK Runner on scripted
models, whose texts are what people type: hyphens, dots, ``+``, quotes, parentheses, lower-case
``and``/``or``/``not``/``near``. A plain query finds them as written and never raises;
upper-case ``OR``, ``NOT`` and ``AND``, ``"phrases"`` and ``prefix*`` keep their meaning;
``raw=True`` passes FTS5's own syntax, and a malformed raw query is one clear line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from agents import Agent
from harness import isolated
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted import final, model

from sessiontape import Recorder
from sessiontape.storage.catalog.index import (
    SNIPPET_END,
    SNIPPET_START,
    Catalog,
    SearchHit,
    SearchSyntaxError,
)
from sessiontape.storage.catalog.search_query import fts5_query
from sessiontape.storage.paths import Locations

# session: (prompt, answer), one turn each, user "ann"
CONVERSATIONS = {
    "mail": ("Draft the Follow-up e-mail to Ana", "Drafted it"),
    "models": ("Is gpt-4.1 good at C++?", "Yes: gpt-4.1 writes fine C++"),
    "words": ("Salt and pepper, near or not", "Seasoned"),
    "oslo": ("A rainy day in Oslo", "Take the ferry"),
    "faro": ("A sunny day in Faro", "Walk on the beach"),
    "both": ("Oslo or Faro in May?", "Faro is warmer"),
    "punct": ('Run "make test" (twice): x^2 + y:z', "Ran it"),
}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    with isolated(tmp_path_factory.mktemp("search")):
        async def main() -> None:
            for name, (prompt, answer) in CONVERSATIONS.items():
                async with Recorder("ann", name) as rec:
                    await rec.run(Agent(name="Planner", model=model(final(answer))), prompt)

        asyncio.run(main())
        with Catalog() as found:
            assert found.refresh(Locations.resolve()).problems == []
            yield found


def sessions(hits: list[SearchHit]) -> set[str]:
    return {hit.session for hit in hits}


def snippets(hits: list[SearchHit]) -> set[str]:
    return {hit.snippet.replace(SNIPPET_START, "[").replace(SNIPPET_END, "]") for hit in hits}


@pytest.mark.parametrize(("query", "found"), [
    ("Follow-up", {"Draft the [Follow-up] e-mail to Ana"}),
    ("follow-UP", {"Draft the [Follow-up] e-mail to Ana"}),
    ("e-mail", {"Draft the Follow-up [e-mail] to Ana"}),
    ("gpt-4.1", {"Is [gpt-4.1] good at C++?", "Yes: [gpt-4.1] writes fine C++"}),
    ("C++", {"Is gpt-4.1 good at [C]++?", "Yes: gpt-4.1 writes fine [C]++"}),
    ("and", {"Salt [and] pepper, near or not"}),
    ("near", {"Salt and pepper, [near] or not"}),
    ("NEAR", {"Salt and pepper, [near] or not"}),
    ("not", {"Salt and pepper, near or [not]"}),
    ("or", {"Salt and pepper, near [or] not", "Oslo [or] Faro in May?"}),
    ('make test"', {'Run "[make] [test]" (twice): x^2 + y:z'}),
    ("(twice):", {'Run "make test" ([twice]): x^2 + y:z'}),
    ("x^2 y:z", {'Run "make test" (twice): [x^2] + [y:z]'}),
    ("pepper,", {"Salt and [pepper], near or not"}),
])
def test_ordinary_text_is_searched_as_written(catalog: Catalog, query: str,
                                              found: set[str]) -> None:
    assert snippets(catalog.search(query)) == found


@pytest.mark.parametrize(("query", "found"), [
    ("Oslo OR Faro", {"oslo", "faro", "both"}),
    ("day Oslo OR sunny Faro", {"oslo", "faro"}),  # OR separates whole alternatives
    ("Oslo NOT Faro", {"oslo"}),
    ("day NOT Oslo sunny", {"faro"}),  # NOT takes the one term after it
    ("Faro AND May", {"both"}),
    ("Faro May", {"both"}),
    ('"rainy day"', {"oslo"}),
    ('"day rainy"', set()),
    ('"rainy d"*', {"oslo"}),
    ("fer*", {"oslo"}),
    ("fer", set()),
    ('"OR"', {"words", "both"}),  # a quoted operator is a word
    ("Oslo OR", {"both"}),  # an operator without a term on each side is a word
    ("AND pepper", {"words"}),
    ("pepper NOT", {"words"}),
    ("Oslo OR OR", {"oslo", "both", "words"}),  # the second OR is the word
    ('"rainy day', {"oslo"}),  # an unclosed quote runs to the end
])
def test_operators_phrases_and_prefixes(catalog: Catalog, query: str, found: set[str]) -> None:
    assert sessions(catalog.search(query)) == found


@pytest.mark.parametrize("query", ["", "   ", "+", '"', '""', "*", "()", "- -", "\0"])
def test_a_query_without_a_word_finds_nothing(catalog: Catalog, query: str) -> None:
    assert catalog.search(query) == []


def test_many_words_are_one_query(catalog: Catalog) -> None:
    assert sessions(catalog.search(" ".join(["Oslo"] * 2000))) == {"oslo", "both"}
    assert sessions(catalog.search(" OR ".join(["nowhere"] * 2000 + ["ferry"]))) == {"oslo"}


# Any text (lone surrogates and NUL included), and texts made of the syntax's own pieces.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=60)
PIECES = st.lists(st.sampled_from(['"', "(", ")", "*", ":", "^", "-", "+", "\0", " ", "OR",
                                   "AND", "NOT", "NEAR", "near", "Oslo", "Faro", "day", "é",
                                   "\ud800", "{", "}", ",", "'"]), max_size=12).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ANY_TEXT | PIECES)
def test_any_string_is_answered(catalog: Catalog, query: str) -> None:
    hits = catalog.search(query)
    assert all(isinstance(hit, SearchHit) and hit.session in CONVERSATIONS for hit in hits)


def test_the_translation() -> None:
    assert fts5_query("Follow-up gpt-4.1") == '"Follow-up" "gpt-4.1"'
    assert fts5_query('say "hi  there"* a"b') == '"say" "hi there"* "a b"'
    assert fts5_query("a OR b NOT c d AND e") == '"a" OR "b" "d" "e" NOT "c"'
    assert fts5_query("OR a NOT") == '"OR" "a" "NOT"'
    assert fts5_query("a\0b") == '"a" "b"'  # NUL separates words, as in the texts
    assert fts5_query(" \t") == ""


# -- raw ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "found"), [
    ("NEAR(rainy Oslo, 3)", {"oslo"}),
    ("(Oslo OR Faro) AND May", {"both"}),
    ("content:ferry", {"oslo"}),
    ("^Oslo", {"both"}),
])
def test_raw_is_fts5(catalog: Catalog, query: str, found: set[str]) -> None:
    assert sessions(catalog.search(query, raw=True)) == found


@pytest.mark.parametrize(("query", "problem"), [
    ('"unclosed', "a quote is not closed"),
    ("C++", "unexpected '+'"),
    ("AND", "unexpected 'AND'"),
    ("zanzibar NOT", "the query ends too soon"),
    ("(a", "the query ends too soon"),
    ("Follow-up", "unknown column 'up'"),
    ("col:umn", "unknown column 'col'"),
])
def test_a_malformed_raw_query_is_one_clear_line(catalog: Catalog, query: str,
                                                 problem: str) -> None:
    with pytest.raises(SearchSyntaxError) as raised:
        catalog.search(query, raw=True)
    assert str(raised.value) == f"invalid search query {query!r}: {problem}"
