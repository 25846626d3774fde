"""The docs site as a newcomer opens it: built once per session with ``mkdocs build --strict`` into a
temporary folder (or the one ``make test`` has just built, named by TRACEKIT_BUILT_SITE), then opened
from disk (file://) in Chromium. Every internal link lands on a page (not a folder listing, not a missing
file) and on an anchor that exists; the API reference's examples are code; the getting-started page
holds the README's sections; the tutorial's outputs fit the page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from helpers.paths import ROOT, SHARED_TRACES

pytestmark = [pytest.mark.slow, pytest.mark.shared]

WIDTH = 1280  # a laptop's browser window, px


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built site (its tutorial runs on ../shared: skipped when that or MkDocs is absent)."""
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install -e '.[docs]')")
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"the docs' tutorial runs on the real files in {SHARED_TRACES.parent}, which is absent")
    made = os.environ.get("TRACEKIT_BUILT_SITE")  # `make test` builds the site just before (`make docs`)
    if made and (Path(made) / "index.html").is_file():
        return Path(made)
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(folder)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return folder


@pytest.fixture
def page(browser):
    opened = browser.new_page(viewport={"width": WIDTH, "height": 900})
    yield opened
    opened.close()


def local_path(url: str) -> Path:
    return Path(unquote(urlsplit(url).path))


def test_every_link_works_from_disk(site, page):
    """From index.html, follow every link (and stylesheet, script, image) inside the site, page by page:
    each lands on a file, none on a folder (which a browser shows as a listing) or a missing file, and
    each #anchor exists on its page."""
    start = (site / "index.html").as_uri()
    queue, seen, ids = [start], {start}, {}
    links: list[tuple[str, str]] = []  # (from page, to url)
    while queue:
        url = queue.pop()
        page.goto(url, wait_until="domcontentloaded")
        assert not page.title().startswith("Index of"), url
        ids[url] = set(page.evaluate("() => Array.from(document.querySelectorAll('[id]'), e => e.id)"))
        found = page.evaluate(
            """() => [...Array.from(document.querySelectorAll('a[href]'), a => a.href),
                      ...Array.from(document.querySelectorAll('link[href]'), l => l.href),
                      ...Array.from(document.querySelectorAll('script[src], img[src]'), e => e.src)]"""
        )
        for target in found:
            if not target.startswith("file://") or not local_path(target).is_relative_to(site):
                continue  # elsewhere on the web (the theme's fonts, Perfetto UI)
            links.append((url, target))
            path = local_path(target)
            assert path.is_file(), f"{url} links to {target}: " + ("a folder" if path.is_dir() else "no such file")
            document = target.split("#")[0]
            if path.suffix == ".html" and document not in seen:
                seen.add(document)
                queue.append(document)
    pages = {path for path in site.rglob("*.html") if path.name != "404.html"}
    assert {local_path(url) for url in seen} == pages and len(pages) >= 20  # every page, reached by links
    for source, target in links:
        document, _, anchor = target.partition("#")
        if anchor and document in ids:
            assert unquote(anchor) in ids[document], f"{source} links to {target}: no such anchor"


def test_api_examples_are_code(site, page):
    """Each ``Examples:`` section of the API reference is a code block of ``>>>`` lines, never a quote."""
    page.goto((site / "reference" / "api.html").as_uri())
    quoted = page.evaluate("() => Array.from(document.querySelectorAll('blockquote'), b => b.textContent)")
    assert not [text for text in quoted if "tracekit." in text]
    examples = page.evaluate(
        "() => Array.from(document.querySelectorAll('pre code'), c => c.textContent).filter(t => t.includes('>>> '))"
    )
    assert len(examples) >= 19
    assert all(line.startswith((">>> ", "... ")) for text in examples for line in text.strip().splitlines())


def test_getting_started_is_the_readme_s(site, page):
    """The getting-started page shows the README's commands and where to run them, as the README has them."""
    page.goto((site / "getting-started.html").as_uri())
    blocks = page.evaluate("() => Array.from(document.querySelectorAll('pre code'), c => c.textContent.trim())")
    readme = (ROOT / "README.md").read_text()
    for block in ("source .venv/bin/activate\ncd ../shared/traces", "$ tracekit advise "):
        assert block in readme and any(block in shown for shown in blocks), block
    assert any(shown.startswith("make demo   # ") for shown in blocks)


def test_the_tutorial_s_outputs_fit_the_page(site, page):
    """Every table and printout of the tutorial fits the page's text column at a laptop's width (nothing
    cut at the right edge), and no table shows nanoseconds as floats ("240755667.0")."""
    page.goto((site / "tutorial.html").as_uri())
    outputs = page.evaluate(
        """() => Array.from(document.querySelectorAll('.tutorial-output'), out => ({
              width: out.getBoundingClientRect().width,
              widest: Math.max(...Array.from(out.querySelectorAll('table, pre'), e => e.getBoundingClientRect().width)),
              cells: Array.from(out.querySelectorAll('td'), td => td.textContent.trim())}))"""
    )
    assert len(outputs) >= 12
    for output in outputs:
        assert output["widest"] <= output["width"] + 0.5, output["widest"]
        assert not [cell for cell in output["cells"] if re.fullmatch(r"\d{6,}\.0", cell)]
    text = page.evaluate("() => document.querySelector('article').innerText")
    assert "__main__" not in text and "set() {}" not in text
