"""``export --format html``: one self-contained page, opened in a real browser.

The conversations of ``test_markdown_export.py`` (a subagent and a failing tool; a tool
output and a prompt full of markup and escape sequences) are exported by the real
executable and opened in Debian's Chromium (``/usr/bin/chromium``, driven by Playwright)
at a phone's width: the page loads nothing but itself, runs no script, fits the screen,
shows each tool call collapsed with how it ended, and the subagent's run inside the call
that ran it; hostile records show as text, never as markup.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page
from test_markdown_export import HOSTILE_OUTPUT, HOSTILE_PROMPT, exported

PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    made = exported(tmp_path_factory, "html", ".html")
    for name, finished in made["done"].items():
        assert finished.returncode == 0, (name, finished.stderr)
    return made


def opened(browser: Browser, path: Path) -> tuple[Page, dict[str, list[Any]]]:
    """The page at a phone's width, with every request, console line and dialog it made."""
    page = browser.new_page(viewport=PHONE)
    seen: dict[str, list[Any]] = {"requests": [], "console": [], "dialogs": []}
    page.on("request", lambda request: seen["requests"].append(request.url))
    page.on("console", lambda message: seen["console"].append(message.text))
    page.on("dialog", lambda dialog: (seen["dialogs"].append(dialog.message), dialog.dismiss()))
    page.goto(path.as_uri())
    return page, seen


def test_the_page_loads_only_itself_runs_nothing_and_fits_a_phone(
        pages: dict[str, Any], browser: Browser) -> None:
    path = pages["base"] / "porto.html"
    page, seen = opened(browser, path)
    assert seen["requests"] == [path.as_uri()]
    assert page.evaluate("document.scripts.length") == 0
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.title() == "porto"
    assert seen["console"] == [] and seen["dialogs"] == []
    assert (path.stat().st_mode & 0o777) == 0o600
    summary = json.loads(pages["done"]["porto"].stdout)
    assert (summary["format"], summary["conversations"], summary["turns"]) == ("html", 1, 1)


def test_calls_are_collapsed_with_how_they_ended_and_open_on_the_subagents_run(
        pages: dict[str, Any], browser: Browser) -> None:
    page, _ = opened(browser, pages["base"] / "porto.html")
    summaries = page.locator("details.call > summary")
    assert summaries.all_inner_texts() == ["Guide calls helper: returned",
                                           "Guide calls fail: failed"]
    assert page.evaluate("[...document.querySelectorAll('details')].some(d => d.open)") is False
    answer = page.get_by_text("the tram is faster", exact=True)
    assert not answer.is_visible()
    summaries.first.click()
    assert answer.is_visible()
    assert page.locator("details.call .subagent").first.inner_text().startswith(
        "Subagent Helper")
    summaries.nth(1).click()
    assert "no such city: Atlantis" in page.locator("details.failed pre").last.inner_text()
    order = page.locator("body").inner_text()
    assert order.index("how do I get around?") < order.index("take the tram") \
        < order.index("Turn 1: ")


def test_hostile_records_show_as_text_and_never_as_markup(pages: dict[str, Any],
                                                          browser: Browser) -> None:
    page, seen = opened(browser, pages["base"] / "hostile.html")
    assert page.evaluate("document.scripts.length") == 0
    assert page.locator("img, b, h1 ~ h1").count() == 0
    assert page.locator("h1").all_inner_texts() == ["hostile"]
    assert page.locator(".prompt").inner_text() == HOSTILE_PROMPT
    page.locator("details.call > summary").first.click()
    outputs = page.locator("details.call pre").all_inner_texts()
    assert HOSTILE_OUTPUT.replace("\x1b", "\\x1b") in outputs
    assert seen["dialogs"] == [] and seen["console"] == []
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
