"""``export --format markdown``: a transcript people read, parsed as a renderer parses it.

The conversation of ``test_session_events.py`` (a subagent through ``as_tool``, a tool that
fails, an answer), recorded with the real SDK Runner, is exported by the real executable;
``markdown-it-py`` (CommonMark) parses the page. A second conversation holds hostile
records: backticks, ``</script>`` and escape sequences in a tool's output, a heading and
HTML in the prompt. Nothing recorded changes the page's structure or reaches a renderer as
HTML.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from harness import isolated, run_cli
from markdown_it import MarkdownIt
from markdown_it.token import Token
from scripted import call, final, model, tools_step, usage
from test_session_events import record

from sessiontape import Recorder

HOSTILE_OUTPUT = "```\n</script><script>alert(1)</script>\n\x1b[31mred\x1b[0m ````` end"
HOSTILE_PROMPT = "# not a heading\n<b>bold?</b> <img src=x onerror=alert(1)>"


@function_tool
def dump(what: str) -> str:
    """Dump something hostile."""
    return HOSTILE_OUTPUT


def record_hostile() -> None:
    agent = Agent(name="Dumper", tools=[dump], model=model(
        tools_step(call("dump", {"what": "```"}), u=usage(5, 1)),
        final("done <script>x</script>", usage(6, 1))))

    async def main() -> None:
        async with Recorder(user_id="eve", session_name="hostile") as rec:
            await rec.run(agent, HOSTILE_PROMPT)

    asyncio.run(main())


def exported(tmp_path_factory: pytest.TempPathFactory, form: str, suffix: str
             ) -> dict[str, Any]:
    """porto and hostile, recorded, each exported in ``form`` by the real executable to
    ``<base>/<name><suffix>``."""
    base = tmp_path_factory.mktemp(form)
    with isolated(base) as env:
        record()
        record_hostile()
        done = {name: run_cli("export", "--format", form, "--out", base / f"{name}{suffix}",
                              "--session", name, "--json", env=env)
                for name in ("porto", "hostile")}
    return {"done": done, "base": base}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return exported(tmp_path_factory, "markdown", ".md")


def page(world: dict[str, Any], name: str) -> tuple[str, list[Token]]:
    done = world["done"][name]
    assert done.returncode == 0, done.stderr
    text = (world["base"] / f"{name}.md").read_text()
    return text, MarkdownIt("commonmark").parse(text)


def headings(tokens: list[Token]) -> list[tuple[str, str]]:
    return [(t.tag, tokens[i + 1].content) for i, t in enumerate(tokens)
            if t.type == "heading_open"]


def test_a_turn_reads_in_the_runs_order_with_its_calls_subagent_and_cost(
        world: dict[str, Any]) -> None:
    text, tokens = page(world, "porto")
    assert headings(tokens) == [("h1", "porto"), ("h2", headings(tokens)[1][1])]
    assert headings(tokens)[1][1].startswith("Turn 1 · ") and "UTC" in headings(tokens)[1][1]
    order = [text.index(s) for s in (
        "> how do I get around?", "calls `helper`", "**Subagent Helper**",
        "> > tram or bus?", "> the tram is faster", "`helper` returned:", "calls `fail`",
        "`fail` failed:", "no such city: Atlantis", "take the tram", "*Turn 1: ")]
    assert order == sorted(order)
    fences = [t for t in tokens if t.type == "fence"]
    assert json.loads(fences[0].content) == {"input": "tram or bus?"}  # the call's arguments
    assert re.search(r"^\*Turn 1: \d+ tokens in, \d+ out, \$0\.\d+ · scripted/gpt-4\.1\*$",
                     text, re.M)
    assert "user `ann` · recorded by sessiontape" in text
    summary = json.loads(world["done"]["porto"].stdout)
    assert (summary["format"], summary["conversations"], summary["turns"]) == (
        "markdown", 1, 1)


def test_hostile_records_change_no_structure_and_reach_no_renderer_as_html(
        world: dict[str, Any]) -> None:
    text, tokens = page(world, "hostile")
    assert [tag for tag, _ in headings(tokens)] == ["h1", "h2"]  # the prompt's "#": text
    every = [*tokens, *(c for t in tokens for c in (t.children or []))]
    assert not [t for t in every if t.type in ("html_block", "html_inline")]
    assert "\x1b" not in text and "\\x1b[31mred" in text
    (output,) = [t for t in tokens if t.type == "fence" and "alert(1)" in t.content]
    assert output.content.rstrip("\n") == HOSTILE_OUTPUT.replace("\x1b", "\\x1b")
    rendered = MarkdownIt("commonmark").render(text)
    assert "<script" not in rendered and "<img" not in rendered and "<b>" not in rendered
    assert "done &lt;script&gt;x&lt;/script&gt;" in rendered  # shown, not run


def test_an_unknown_session_writes_nothing(world: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "none.md"
    done = run_cli("export", "--format", "markdown", "--out", out, "--session", "nope",
                   env=None)
    assert done.returncode == 1 and not out.exists()
