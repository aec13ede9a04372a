"""The HTML report opened in headless Chromium (Debian's `chromium`): every plot the
page names is loaded and decoded by the browser, not just referenced; and what a
reader sees first, in a 1280x800 window, is the verdict and the headline table,
with the provenance folded below every result."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from report_data import BENCH_TABLES, CHECKS, bench_line, everything

from fidelnet.report import PLOT_KINDS, render

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make install adds it)"
)

WIDTH, HEIGHT = 1280, 800

# Appended to a copy of the page: after load (every image decoded or failed), record
# what the browser laid out, as JSON in an attribute of <body>.
PROBE = """<script>
window.addEventListener("load", () => {
  const top = (el) => el.getBoundingClientRect().top + window.scrollY;
  const bottom = (el) => el.getBoundingClientRect().bottom + window.scrollY;
  const imgs = [...document.querySelectorAll("img[data-plot]")];
  const ok = imgs.filter((i) => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100);
  const verdict = document.getElementById("verdict");
  const headline = document.getElementById("headline");
  const prov = document.getElementById("provenance");
  const results = [...document.querySelectorAll("section.result")];
  const blocks = [...document.querySelectorAll("body > *")]
    .filter((el) => el.tagName !== "SCRIPT")
    .map((el) => [el.id || el.className || el.tagName.toLowerCase(), top(el)]);
  const probe = {
    width: window.innerWidth,
    height: window.innerHeight,
    images: imgs.length,
    decoded: ok.length,
    kinds: [...new Set(ok.map((i) => i.dataset.plot))].sort(),
    results: [...new Set(ok.map((i) => i.dataset.result))].sort(),
    verdict: verdict && {
      top: top(verdict), bottom: bottom(verdict), level: verdict.dataset.level,
      border: getComputedStyle(verdict).borderLeftColor, text: verdict.innerText,
    },
    headline: headline && {
      top: top(headline), rows: headline.tBodies[0].rows.length,
      cells: [...headline.querySelectorAll("td[data-level]")].map(
        (td) => [td.dataset.level, getComputedStyle(td).backgroundColor]),
    },
    provenance: prov && { top: top(prov), open: prov.open, tag: prov.tagName.toLowerCase(),
      height: prov.getBoundingClientRect().height,
      shown: [...prov.children].filter((c) => c.checkVisibility()).map((c) => c.tagName) },
    resultsBottom: Math.max(0, ...results.map(bottom)),
    resultSections: results.length,
    blocks,
  };
  document.body.setAttribute("data-probe", JSON.stringify(probe));
});
</script>"""


def probe(page: Path, tmp_path: Path) -> dict[str, Any]:
    """Open ``page`` (with the probe) in headless Chromium; what the probe recorded."""
    assert CHROMIUM is not None
    copy = page.with_name("probe.html")
    copy.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    p = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--disable-gpu",
            "--hide-scrollbars",
            "--allow-file-access-from-files",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={WIDTH},{HEIGHT}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            copy.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    body = re.search(r'<body[^>]*data-probe="([^"]*)"', p.stdout)
    assert body, p.stdout[:500]
    got: dict[str, Any] = json.loads(html.unescape(body.group(1)))
    # Headless Chromium keeps room for a window frame (the page's own height is less
    # than asked), but a page's layout depends on its width only (no vh units), so
    # "on the first screen" is a top in page coordinates under HEIGHT.
    assert got["width"] == WIDTH, got
    got["firstScreen"] = [name for name, y in got["blocks"] if y < HEIGHT]
    return got


def assert_answer_first(got: dict[str, Any]) -> None:
    """The verdict banner and the headline table are on the first screen; the
    provenance is a closed <details> below every result section."""
    verdict, headline, prov = got["verdict"], got["headline"], got["provenance"]
    assert verdict is not None and headline is not None and prov is not None, got
    assert verdict["top"] < HEIGHT and verdict["bottom"] < HEIGHT, verdict  # all of it
    assert headline["top"] < HEIGHT, (headline, got["firstScreen"])
    assert got["firstScreen"][:2] == ["header", "verdict"]  # by id, else class
    assert "floor" not in got["firstScreen"] and "provenance" not in got["firstScreen"]
    assert prov["tag"] == "details" and prov["open"] is False
    assert prov["shown"] == ["SUMMARY"] and prov["height"] < 60, prov  # folded: one line
    assert got["resultSections"] > 0
    assert prov["top"] >= got["resultsBottom"], (prov, got["resultsBottom"])


def test_report_plots_load_in_headless_chromium(tmp_path: Path) -> None:
    got = probe(render(everything(), tmp_path), tmp_path)
    assert got["images"] >= 5, got
    assert got["decoded"] == got["images"], got  # every plot loaded and decoded
    assert set(got["kinds"]) == set(PLOT_KINDS)


def test_reader_sees_the_verdict_and_the_headline_first(tmp_path: Path) -> None:
    got = probe(render(everything(), tmp_path, [CHECKS]), tmp_path)
    assert_answer_first(got)
    # the title, the verdict, the checks, then the results (all of it on the first screen)
    assert got["firstScreen"] == ["header", "verdict", "extra-table", "overview"]
    verdict = got["verdict"]
    assert verdict["level"] == "untrusted"
    assert verdict["border"] == "rgb(198, 40, 40)"  # red
    assert "UNTRUSTED — 1 of 5 results untrusted" in verdict["text"]
    assert "receiver dropped 1,204 packets" in verdict["text"]
    cells = dict(got["headline"]["cells"])
    assert got["headline"]["rows"] == 5
    assert set(cells) == {"trusted", "degraded", "untrusted", "not-judged"}
    assert cells["trusted"] == "rgb(232, 245, 233)"  # green
    assert cells["not-judged"] == "rgb(240, 240, 240)"  # grey: never shown as trusted
    assert len(set(cells.values())) == 4


def test_bench_line_report_leads_with_the_answer_and_overlays_the_stacks(
    tmp_path: Path,
) -> None:
    got = probe(render(bench_line(), tmp_path, BENCH_TABLES), tmp_path)
    assert_answer_first(got)
    assert got["verdict"]["level"] == "untrusted"
    assert got["decoded"] == got["images"], got
    compared = [r for r in got["results"] if r.startswith("compare-")]
    # one plot per rate for both stacks (latency and rate), one for the searches
    assert compared == [
        "compare-cbr-84B-300-kpps",
        "compare-cbr-84B-50-kpps",
        "compare-cbr-84B-search",
    ], got["results"]
    assert not [r for r in got["results"] if r.startswith("all-udp")]
