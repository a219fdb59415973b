"""``sessiontape serve`` in a real browser: Debian's Chromium driven by Playwright.

One recorded world (:func:`web_world.record_world`: ann/porto with a subagent and a failed
tool, eve/hostile full of markup, carol's markup name with a 10 MB output) and one real
``serve`` process for the module. The pages are clicked through as a person would: calls
open on their arguments, a subagent's run shows inside the call that ran it, recorded text
is only ever text, a huge output is cut until asked for, the sessions table filters, the
charts are drawn, and a turn recorded while a page is open shows there without a reload.
Every page loads only from the server itself and logs no error or warning.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from harness import isolated
from playwright.sync_api import Browser, ConsoleMessage, Page, expect
from scripted import PRICED_MODEL
from test_markdown_export import HOSTILE_PROMPT
from web_world import HUGE_CHARS, ODD_NAME, Server, add_turn, record_world

WAIT_MS = 30_000  # Playwright's waits: generous, they end as soon as the page is right


@dataclass
class World:
    base: Path
    server: Server


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("web")
    with isolated(base) as env:
        record_world()
        server = Server(env)
    with server:
        yield World(base, server)


@dataclass
class Seen:
    """What a page did: its requests, console lines, page errors and dialogs."""

    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.console.append(f"{message.type}: {message.text}")

    def assert_clean(self, origin: str) -> None:
        """No error, no warning, no dialog; every request to ``origin`` (or a data: URL)."""
        assert self.console == []
        assert self.errors == []
        assert self.dialogs == []
        assert self.requests
        elsewhere = [url for url in self.requests
                     if not url.startswith("data:") and _origin(url) != origin]
        assert elsewhere == []


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@pytest.fixture
def page(browser: Browser) -> Iterator[tuple[Page, Seen]]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    seen = Seen()
    opened.on("request", lambda request: seen.requests.append(request.url))
    opened.on("console", seen.on_console)
    opened.on("pageerror", lambda error: seen.errors.append(str(error)))
    opened.on("dialog", lambda dialog: (seen.dialogs.append(dialog.message), dialog.dismiss()))
    yield opened, seen
    context.close()


def live(page: Page, url: str) -> None:
    """Go to ``url`` and wait until its event stream is connected (the server sent its
    headers), so that what is recorded from now on reaches the page."""
    with page.expect_response(lambda response: urlsplit(response.url).path == "/events",
                              timeout=WAIT_MS):
        page.goto(url)


def open_session(page: Page, url: str, name: str) -> None:
    """From the sessions page, click the conversation ``name``."""
    page.goto(url)
    page.get_by_role("link", name=name, exact=True).click()
    page.wait_for_url("**/session/*")
    expect(page.locator("h1")).to_have_text(name)


def recorded(base: Path, user: str, session: str, text: str) -> None:
    """One more turn of ``user``/``session`` in the world's environment, recorded by the
    SDK's Runner on a thread of its own (its own event loop, beside Playwright's)."""
    failed: list[BaseException] = []

    def turn() -> None:
        try:
            add_turn(user, session, text)
        except BaseException as exc:  # handed to the test's thread
            failed.append(exc)

    with isolated(base):
        thread = threading.Thread(target=turn)
        thread.start()
        thread.join(120)
    assert not thread.is_alive() and failed == []


def call_of(page: Page, tool: str) -> Any:
    """The ``<details>`` of the (top-level) call of ``tool``."""
    return page.locator("#transcript details.call").filter(
        has=page.locator(f"> summary .tool:text-is('{tool}')"))


def test_click_through_the_sessions_to_a_transcript(
        world: World, page: tuple[Page, Seen], tmp_path: Path) -> None:
    tab, seen = page
    tab.goto(world.server.url)
    links = tab.locator("#rows tbody td a")
    expect(links.filter(has_text="porto")).to_have_count(1)
    expect(links.filter(has_text="hostile")).to_have_count(1)
    odd = tab.get_by_role("link", name=ODD_NAME, exact=True)
    expect(odd).to_be_visible()
    assert odd.text_content() == ODD_NAME
    assert tab.locator("#rows b").count() == 0

    tab.get_by_role("link", name="porto", exact=True).click()
    tab.wait_for_url("**/session/*")
    expect(tab.locator("h1")).to_have_text("porto")
    expect(tab.locator("#transcript .prompt").first).to_have_text("how do I get around?")
    helper, fail = call_of(tab, "helper"), call_of(tab, "fail")
    expect(helper).to_have_count(1)
    expect(fail).to_have_count(1)
    assert "failed" in (fail.get_attribute("class") or "").split()
    expect(tab.locator("#transcript details.call.failed .tool")).to_have_text(["fail"])
    subagent = helper.locator(".subagent")
    expect(subagent.locator("> .who")).to_have_text("Subagent Helper")
    expect(subagent).to_contain_text("the tram is faster")

    arguments = helper.locator("> .shown pre").first
    expect(arguments).to_be_hidden()
    helper.locator("> summary").click()
    expect(arguments).to_be_visible()
    expect(arguments).to_contain_text("tram or bus?")
    expect(subagent.get_by_text("the tram is faster", exact=True)).to_be_visible()

    shot = tmp_path / "session.png"
    tab.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 0
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    seen.assert_clean(_origin(world.server.url))


def test_a_turn_recorded_while_the_page_is_open_shows_without_a_reload(
        world: World, page: tuple[Page, Seen]) -> None:
    tab, seen = page
    open_session(tab, world.server.url, "porto")
    live(tab, tab.url)
    turns = tab.locator("#transcript section.turn")
    before = turns.count()
    assert before >= 1
    tab.evaluate("window.__marker = 1")

    recorded(world.base, "ann", "porto", "LIVE-ANSWER")
    expect(tab.locator("#transcript .said .text").get_by_text("LIVE-ANSWER", exact=True)
           ).to_be_visible(timeout=WAIT_MS)
    expect(turns).to_have_count(before + 1, timeout=WAIT_MS)
    expect(turns.last.locator(".prompt")).to_have_text("and then? (LIVE-ANSWER)")
    assert tab.evaluate("window.__marker") == 1

    live(tab, world.server.url)
    tab.evaluate("window.__marker = 2")
    recorded(world.base, "dan", "brand-new", "x")
    expect(tab.get_by_role("link", name="brand-new", exact=True)).to_be_visible(
        timeout=WAIT_MS)
    assert tab.evaluate("window.__marker") == 2
    seen.assert_clean(_origin(world.server.url))


def test_the_filter_box_and_the_status_select_narrow_the_table(
        world: World, page: tuple[Page, Seen]) -> None:
    tab, seen = page
    tab.goto(world.server.url)
    rows = tab.locator("#rows tbody tr")
    everything = rows.count()
    assert everything >= 3

    tab.locator("#q").fill("hostile")
    expect(rows).to_have_count(1, timeout=WAIT_MS)
    expect(rows.locator("td a")).to_have_text("hostile")

    tab.locator("#q").fill("")
    expect(rows).to_have_count(everything, timeout=WAIT_MS)
    tab.locator("#status").select_option("crashed")
    expect(tab.locator("#rows .count")).to_contain_text("matching", timeout=WAIT_MS)
    expect(rows.locator("td.empty")).to_have_text("No session matches.", timeout=WAIT_MS)
    tab.locator("#status").select_option("completed")
    expect(rows.locator("td.empty")).to_have_count(0, timeout=WAIT_MS)
    statuses = rows.locator(".status").all_text_contents()
    assert statuses and set(statuses) == {"completed"}
    assert rows.count() == len(statuses)
    seen.assert_clean(_origin(world.server.url))


def test_hostile_records_stay_text(world: World, page: tuple[Page, Seen]) -> None:
    tab, seen = page
    open_session(tab, world.server.url, "hostile")
    transcript = tab.locator("#transcript")
    expect(transcript.locator(".prompt")).to_have_text(HOSTILE_PROMPT)
    expect(transcript.get_by_text("done <script>x</script>", exact=True)).to_be_visible()
    dump = call_of(tab, "dump")
    dump.locator("> summary").click()
    output = dump.locator("> .shown pre").last
    expect(output).to_be_visible()
    expect(output).to_contain_text("</script><script>alert(1)</script>")
    for tag in ("script", "img", "b"):
        assert transcript.locator(tag).count() == 0, tag
    assert tab.evaluate("document.querySelectorAll('script:not([src])').length") == 0
    assert seen.dialogs == []
    seen.assert_clean(_origin(world.server.url))


def test_a_huge_output_is_cut_until_asked_for(world: World, page: tuple[Page, Seen]) -> None:
    tab, seen = page
    open_session(tab, world.server.url, ODD_NAME)
    call = call_of(tab, "fetch_everything")
    call.locator("> summary").click()
    output = call.locator("> .shown").last
    button = output.locator("button.all")
    expect(button).to_be_visible()
    expect(button).to_contain_text("show all")
    cut = output.locator("pre").text_content() or ""
    assert 0 < len(cut) <= 2100
    assert cut.startswith("line of output")

    button.click()
    expect(call.locator("button.all")).to_have_count(0, timeout=60_000)
    whole = "document.querySelector('#call-1 > .shown:last-of-type pre').textContent"
    tab.wait_for_function(f"{whole}.endsWith('THE END')", timeout=60_000)
    assert tab.evaluate(f"{whole}.length") == (HUGE_CHARS // 15) * 15 + len("THE END")
    assert tab.evaluate("1 + 1") == 2
    seen.assert_clean(_origin(world.server.url))


def test_the_usage_page_draws_its_charts(world: World, page: tuple[Page, Seen]) -> None:
    tab, seen = page
    tab.goto(world.server.url)
    tab.get_by_role("link", name="Usage", exact=True).click()
    tab.wait_for_url("**/usage")
    expect(tab.locator("#charts .chart")).to_have_count(2)
    expect(tab.locator("#charts .chart canvas").first).to_be_attached()
    for chart in tab.locator("#charts .chart").all():
        assert chart.locator("canvas").count() >= 1
    models = tab.locator("h2:text-is('By model') + .table tbody tr td:first-child")
    expect(models).to_contain_text([PRICED_MODEL])
    seen.assert_clean(_origin(world.server.url))
