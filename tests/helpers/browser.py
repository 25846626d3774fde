"""A real browser for the tests of pages tracekit writes (report.html, the docs site): Chromium driven by
Playwright (the ``browser`` fixture in conftest.py launches it once per session)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CHROMIUM = os.environ.get("TRACEKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def open_page(
    browser,
    path: Path,
    wait_for: str | None = "() => window.tracekit && window.tracekit.ready === true",
    init_script: str | None = None,
):
    """The page at ``path``, every request that is not the file itself refused and counted, every console
    error, uncaught exception and dialog (alert, confirm, prompt: dismissed) kept; ``wait_for``: a script
    condition to wait for (report.html's own script has run); ``init_script``: run before the page's own."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    seen = {"errors": [], "requests": [], "dialogs": []}
    page.on("console", lambda message: seen["errors"].append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    page.on("dialog", lambda dialog: (seen["dialogs"].append(dialog.message), dialog.dismiss()))

    def route(request_route):
        if request_route.request.url == path.as_uri():
            request_route.continue_()
        else:
            seen["requests"].append(request_route.request.url)
            request_route.abort()

    page.route("**/*", route)
    if init_script:
        page.add_init_script(init_script)
    page.goto(path.as_uri())
    if wait_for:
        page.wait_for_function(wait_for, timeout=10_000)
    return page, seen
