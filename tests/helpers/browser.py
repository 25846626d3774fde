"""A real browser for the tests of pages tracekit writes (report.html, the docs site): Chromium driven by
Playwright (the ``browser`` fixture in conftest.py launches it once per session)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CHROMIUM = os.environ.get("TRACEKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def open_page(browser, path: Path):
    """The page at ``path``, every request that is not the file itself refused and counted, every console
    error and uncaught exception kept."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    seen = {"errors": [], "requests": []}
    page.on("console", lambda message: seen["errors"].append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))

    def route(request_route):
        if request_route.request.url == path.as_uri():
            return request_route.continue_()
        seen["requests"].append(request_route.request.url)
        return request_route.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_function("() => window.tracekit && window.tracekit.ready === true", timeout=10_000)
    return page, seen
