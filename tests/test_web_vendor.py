"""The front-end libraries ``serve`` ships are the npm registry's, byte for byte.

recorder/web/static/vendor/ holds htmx, its SSE extension and uPlot, served from the
package (no CDN). Each file is compared with the one in the package ``npm ci --prefix
tests/js`` installs, at the version tests/js/package.json pins; the vendor README names
the same versions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from harness import REPO
from test_js_conformance import js_sdk  # noqa: F401 (installs tests/js/node_modules)

VENDOR = REPO / "recorder" / "web" / "static" / "vendor"
NODE_MODULES = REPO / "tests" / "js" / "node_modules"
SHIPPED = {  # vendored file -> its npm package and the file in it
    "htmx.min.js": ("htmx.org", "dist/htmx.min.js"),
    "sse.min.js": ("htmx-ext-sse", "dist/sse.min.js"),
    "uPlot.iife.min.js": ("uplot", "dist/uPlot.iife.min.js"),
    "uPlot.min.css": ("uplot", "dist/uPlot.min.css"),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_each_vendored_file_is_the_registrys(name: str) -> None:
    package, inside = SHIPPED[name]
    assert (VENDOR / name).read_bytes() == (NODE_MODULES / package / inside).read_bytes()


def test_the_pinned_versions_are_the_ones_the_readme_names() -> None:
    pinned = json.loads((REPO / "tests" / "js" / "package.json").read_text())["dependencies"]
    readme = (VENDOR / "README.md").read_text()
    for package, _ in SHIPPED.values():
        installed = json.loads((NODE_MODULES / package / "package.json").read_text())
        assert pinned[package] == installed["version"]
        assert re.search(rf"`{re.escape(package)}` {re.escape(pinned[package])}\b", readme), \
            package


def test_nothing_else_is_vendored() -> None:
    assert {p.name for p in Path(VENDOR).iterdir()} == {
        *SHIPPED, "README.md", "LICENSE.htmx", "LICENSE.htmx-ext-sse", "LICENSE.uPlot"}
