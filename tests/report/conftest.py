"""The browser the tests of report.html share (one Chromium per module)."""

from helpers.browser import browser

__all__ = ["browser"]
