"""report.html of a large trace in a real browser: its size, and how long Chromium takes from navigation to
a drawn, interactive timeline (the page's script sets ``tracekit.ready`` once every timeline is drawn).

    python benchmarks/bench_report_html.py benchmarks/data/kernels_1m.sqlite [--repeat 3]

Needs Playwright and a Chromium (Debian's: scripts/install-chromium.sh; or TRACEKIT_CHROMIUM=PATH).
Prints one line per load and the page's size; the report is written under benchmarks/data/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("TRACEKIT_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        raise SystemExit("no Chromium: scripts/install-chromium.sh (as root on Debian) or TRACEKIT_CHROMIUM=PATH")
    folder = HERE / "data" / f"report-{args.trace.stem}"
    started = time.perf_counter()
    tracekit = Path(sys.executable).with_name("tracekit")
    subprocess.run([str(tracekit), "report", str(args.trace), "-o", str(folder), "--html"], check=True)
    print(f"report (report.md and report.html): {time.perf_counter() - started:.1f} s")
    page_path = (folder / "report.html").resolve()
    print(f"report.html: {page_path.stat().st_size / 1e6:.1f} MB")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for _ in range(args.repeat):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))
            begun = time.perf_counter()
            page.goto(page_path.as_uri(), wait_until="commit")
            page.wait_for_function("() => window.tracekit && window.tracekit.ready === true", timeout=120_000)
            ready = time.perf_counter() - begun
            zoom = page.evaluate("""() => { const t = tracekit.timelines[0], s = performance.now();
                t.zoomTo(t.extent[1] / 2, t.extent[1] / 2 + t.extent[1] / 100); return performance.now() - s; }""")
            count = page.evaluate("tracekit.timelines[0].count")
            print(
                f"drawn and interactive {ready:.2f} s after navigation; a zoom redraws in {zoom:.0f} ms; "
                f"{count:,} ops; page errors: {len(errors)}"
            )
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
