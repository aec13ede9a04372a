"""The HTML report opened in headless Chromium (Debian's `chromium`): every plot the
page names is loaded and decoded by the browser, not just referenced."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_report_html import everything  # the report tests' synthetic results

from fidelnet.report import render

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Appended to a copy of the page: after load, record how many images decoded.
PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = [...document.querySelectorAll("img[data-plot]")];
  const ok = imgs.filter((i) => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100);
  document.body.setAttribute("data-images", String(imgs.length));
  document.body.setAttribute("data-decoded", String(ok.length));
  const kinds = [...new Set(ok.map((i) => i.dataset.plot))].sort();
  document.body.setAttribute("data-kinds", kinds.join(","));
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make install adds it)")
def test_report_plots_load_in_headless_chromium(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    page = render(everything(), tmp_path)
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    p = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--disable-gpu",
            "--allow-file-access-from-files",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    body = re.search(r"<body[^>]*>", p.stdout)
    assert body, p.stdout[:500]
    attrs = dict(re.findall(r'data-(images|decoded|kinds)="([^"]*)"', body.group(0)))
    assert int(attrs["images"]) >= 5, attrs
    assert attrs["decoded"] == attrs["images"], attrs  # every plot loaded and decoded
    assert set(attrs["kinds"].split(",")) == {
        "hdr",
        "rate",
        "worst-case",
        "zero-loss",
        "tcp-goodput",
    }
