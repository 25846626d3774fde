"""Names in markup, escaped by the context they land in. A kernel, range, operator or file name may hold
anything ("<!--<script>", "</script>", "|", "[x](javascript:...)"): each output writes it so that no
parser of that output takes it for markup, and it reads back as the text it is.

- Markdown text (``md_text``): HTML's ``<``, ``>`` and an entity-like ``&`` as character references (which
  every Markdown renderer, CommonMark, GitHub's and Python-Markdown alike, shows as the character and none
  takes for HTML); Markdown's own punctuation backslash-escaped; ``~`` and ``$`` (GitHub's strikethrough
  and maths, which Python-Markdown cannot backslash-escape) as references too.
- Markdown code spans (``md_code``): the text as it is between backtick fences longer than any run of
  backticks in it (a code span's content is never markup).
- Markdown sentences with code spans (``md_prose``): notes and messages, whose `...` are code.
- HTML from that Markdown (``html_inline``): the subset tracekit writes, so report.html shows what a
  Markdown renderer shows of report.md.
- Data in an HTML ``<script>`` element (``script_json``): JSON with ``<``, ``>``, ``&`` and the line and
  paragraph separators as \\u escapes, so no tag, comment or script state can begin inside it.

Control and invisible formatting characters are written as escapes first (``safe_text.printable``).
"""

from __future__ import annotations

import json
import re
from html import escape, unescape

from tracekit.render.safe_text import printable

# What a Markdown renderer takes for markup inside a line (at a line's start, more: headings, lists and
# quotes never start with a name here). Each pass is one C-level scan (a million cells is normal); a
# replacement only puts punctuation where punctuation was, so the later passes see the same neighbours.
_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~]|$)")  # a backslash that would escape what follows (or end a line)
_AMPERSAND = re.compile(r"&(?=#?\w+;)")  # one that starts an entity reference
_ALWAYS = [("<", "&lt;"), (">", "&gt;"), ("~", "&#126;"), ("$", "&#36;")]  # HTML tags, GitHub's ~~ and maths
_ALWAYS += [(character, "\\" + character) for character in "`*[]|"]  # code spans, emphasis, links, table cells
# "_" between two letters or digits is plain text in CommonMark (no intraword emphasis with underscores),
# so kernel_names_like_this stay readable; "#" after a space may close a heading
# (each pattern starts with its character, so the scan jumps from one to the next)
_UNDERSCORE = re.compile(r"_(?:(?<![^\W_]_)|(?![^\W_]))")
_HASH = re.compile(r"#(?<!\S#)")
_SPECIAL = re.compile(r"[\\&<>~$`*\[\]|_#]")


def md_text(text: str) -> str:
    """``text`` as Markdown that renders as exactly that text, in a paragraph, a heading or a table cell."""
    text = printable(text)
    if not _SPECIAL.search(text):
        return text
    if "\\" in text:
        text = _BACKSLASH.sub(_escaped, text)
    if "&" in text:
        text = _AMPERSAND.sub("&amp;", text)
    for character, written in _ALWAYS:
        text = text.replace(character, written)
    if "_" in text:
        text = _UNDERSCORE.sub(_escaped, text)
    return _HASH.sub(_escaped, text) if "#" in text else text


def _escaped(found: re.Match) -> str:
    # (a function: a replacement template holding a backslash is parsed again on every call)
    return "\\" + found.group()


def md_code(text: str) -> str:
    """``text`` as a Markdown code span (not for table cells: GitHub splits cells at a "|" even there)."""
    text = printable(text)
    runs = [len(run) for run in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    # one space each side is dropped from a code span's content: pad when the text needs its ends kept
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_prose(text: str) -> str:
    """A sentence of plain text in which `...` marks code (tracekit's notes and messages) as Markdown:
    each code part a code span, the rest text. A name holding a backtick may pair wrongly with another,
    which changes what looks like code, never what is markup."""
    parts = re.split(r"`([^`\n]+)`", text)
    return "".join(md_code(part) if index % 2 else md_text(part) for index, part in enumerate(parts))


# The Markdown inline syntax tracekit writes: code spans, backslash escapes, character references.
_MD_INLINE = re.compile(
    r"(?<!`)(?P<fence>`+)(?!`)(?P<code>.+?)(?<!`)(?P=fence)(?!`)"
    r"|\\(?P<escaped>[!-/:-@\[-`{-~])"
    r"|(?P<reference>&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});)"
)


def html_inline(markdown: str) -> str:
    """A line of tracekit's Markdown (``md_text``, ``md_code``) as HTML: code spans as ``<code>``,
    escapes and references as their characters, everything else text; nothing of it is markup."""
    parts, done = [], 0
    for found in _MD_INLINE.finditer(markdown):
        parts.append(escape(markdown[done : found.start()]))
        done = found.end()
        if found.group("code") is not None:
            code = found.group("code")
            if len(code) > 2 and code.startswith(" ") and code.endswith(" ") and code.strip():
                code = code[1:-1]
            parts.append(f"<code>{escape(code)}</code>")
        elif found.group("escaped") is not None:
            parts.append(escape(found.group("escaped")))
        else:
            parts.append(escape(unescape(found.group("reference"))))
    parts.append(escape(markdown[done:]))
    return "".join(parts)


# In a <script> element the HTML parser looks for "</script", "<!--" and "-->" (which move it into and
# out of its escaped states), never for JSON's structure: none of these characters may appear raw.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_json(data: object) -> str:
    """``data`` as JSON to embed in an HTML ``<script>`` element: JSON.parse reads back the same values."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for character, replacement in _SCRIPT_ESCAPES.items():
        text = text.replace(character, replacement)
    return text
