"""Names that try to be markup: each must come out of every output as the text it is.

They cover the HTML parser's states (a comment, a script's double-escaped state, ``</script>``, raw-text
and plaintext elements), attributes (quotes), Markdown (tables' pipes, emphasis, links, code spans,
headings, entities, backslashes), template languages, line and paragraph separators (a JavaScript
string's line ends), a newline, a bidirectional override and a very long name. Traces built here carry
them as kernel names, NVTX range names and torch.profiler operator names.
"""

from __future__ import annotations

from pathlib import Path

from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder

HOSTILE_NAMES = [
    "<!--<script>",
    "</script>",
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "<svg onload=alert(1)>",
    "<style>*{display:none}</style>",
    "<plaintext>",
    "<![CDATA[x]]>",
    "-->",
    "<!--",
    "line\u2028separator\u2029paragraph",
    "&lt;b&gt; &amp; &#60;",
    "`code` and ``` fences ``` `",
    "a | b || c",
    "*bold* _em_ __x__ [x](javascript:alert(1)) ![i](x)",
    "two\nlines",
    "it's \"quoted\" ' onmouseover='alert(1)",
    "${alert(1)} {{7*7}} {% raw %}",
    "# heading ~~strike~~ $x$ \\* \\",
    "\u202eexe.txt",
    "long<b>" + "k" * 3_000 + "</b>",
]

# A file name cannot hold "/" (nor NUL): the payloads a path can carry.
HOSTILE_FILE_NAMES = [
    "<!--<script>",
    '"><img src=x onerror=alert(1)>',
    "<svg onload=alert(1)> `x` | *y*",
]


def hostile_export(path: Path, names: list[str]) -> Path:
    """An nsys export of two steps: each name is a kernel (its short name too, so the report's base-name
    tables hold it) and an NVTX range around its launch, inside "step" and "forward"."""
    b = ExportBuilder("2026.2")
    for base in (0, 1_000_000):
        b.push_pop(base, base + 900_000, "step")
        b.push_pop(base + 100, base + 800_000, "forward")
        for index, name in enumerate(names):
            at = base + 1_000 + index * 20_000
            b.push_pop(at, at + 5_000 + index, name)
            b.kernel(at + 6_000, at + 16_000 + index * 10, name, short=name, launch_at=at + 100, stream=7 + index % 3)
    return b.write(path)


def hostile_kineto(path: Path, names: list[str]) -> Path:
    """A torch.profiler trace: each name is an operator (``cpu_op``) launching a kernel of that name."""
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 0, 900_000, cat="user_annotation")
    for index, name in enumerate(names):
        at = 1_000 + index * 20_000
        b.event("X", "cpu_op", name, 100, 100, at, 5_000)
        b.launch("cudaLaunchKernel", at + 100, 10, correlation=index + 1)
        b.kernel(name, at + 6_000, 10_000 + index, correlation=index + 1, stream=7 + index % 3)
    return b.write(path)
