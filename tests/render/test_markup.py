"""render.markup: a name escaped for Markdown reads back as itself through the page's Markdown reader
(and Python-Markdown's), and JSON in a script element holds nothing the HTML parser reacts to."""

from __future__ import annotations

import json
from html import escape

import pytest
from helpers.hostile import HOSTILE_NAMES

from tracekit.render.markup import html_inline, md_code, md_prose, md_text, script_json
from tracekit.render.safe_text import printable


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_a_name_reads_back_as_itself(name):
    shown = escape(printable(name))
    assert html_inline(md_text(name)) == shown
    assert html_inline(md_code(name)) == f"<code>{shown}</code>"
    assert "<" not in md_text(name) and ">" not in md_text(name)


def test_markdown_escapes_only_what_a_renderer_would_read():
    # kernel names stay readable: underscores inside words, a lambda's "#", a reference-less "&"
    assert (
        md_text("ampere_sgemm_128x64_tn {lambda(int)#1} at::Tensor&")
        == "ampere_sgemm_128x64_tn {lambda(int)#1} at::Tensor&"
    )
    assert md_text("void k<float*>(T&)") == "void k&lt;float\\*&gt;(T&)"
    assert md_text("__x_ | [a](b) `c` &amp; ~$ #1 \\* C:\\path") == (
        "\\_\\_x\\_ \\| \\[a\\](b) \\`c\\` &amp;amp; &#126;&#36; \\#1 \\\\\\* C:\\path"
    )
    assert md_code("a`b") == "``a`b``" and md_code("`x`") == "`` `x` ``" and md_code("plain") == "`plain`"


def test_prose_keeps_its_code_spans():
    assert md_prose("range <b> not found: `tracekit ranges x<y>.sqlite` lists them") == (
        "range &lt;b&gt; not found: `tracekit ranges x<y>.sqlite` lists them"
    )
    assert html_inline(md_prose("run `a <b>` then *c*")) == "run <code>a &lt;b&gt;</code> then *c*"


def test_json_in_a_script_element():
    data = {"names": HOSTILE_NAMES, "n": [1, 2.5]}
    text = script_json(data)
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in text
    assert json.loads(text) == data
