"""Text from traces made safe to show: names are data, and a kernel, range or frame name may hold
anything (ESC sequences, newlines, a leading "=" that a spreadsheet would run). Light on imports: the
CLI uses it for every message."""

from __future__ import annotations

import re

# C0 controls (newline and tab included: one cell stays on one line), DEL and C1 controls: a kernel or
# range name holding ESC [ 2 J would clear the terminal of whoever prints or cats the output. And the
# invisible formatting characters: bidirectional embeddings, overrides and isolates (U+202E makes a name
# read backwards: "Trojan Source"), zero-width spaces and joiners, the byte order mark, soft hyphen.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
# What a spreadsheet takes for a formula at the start of a cell (OWASP's CSV-injection list).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def printable(text: str) -> str:
    """``text`` with every control and invisible formatting character written as an escape (``\\x1b``,
    ``\\n``, ``\\u202e``): shown, not obeyed."""
    if not CONTROL.search(text):
        return text
    return CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


def spreadsheet_safe(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: a leading ``'`` before what it would run as a formula
    (numbers such as -5 stay numbers). JSON and Parquet keep the raw value."""
    if text.startswith(FORMULA_START):
        try:
            float(text)
        except ValueError:
            return "'" + text
    return text
