"""The HTML report (fidelnet.report.render, render_dir) and `fidelnet report DIR`."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_data import (  # the report tests' synthetic results
    FLAG_HOSTILE,
    FLAG_RATE,
    FLOOR,
    HOSTILE,
    everything,
    rf,
    tcp,
    udp,
    zero_loss,
)

from fidelnet.cli.report import report
from fidelnet.measure.results import save_result
from fidelnet.report import PLOT_KINDS, ReportError, render, render_dir

# --- HTML checking ------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class Page(HTMLParser):
    """Checks that tags balance and collects the <img> elements and flag texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.imgs: list[dict[str, str | None]] = []
        self.flags: list[str] = []
        self.errors: list[str] = []
        self.tags: set[str] = set()
        self._flag_depth: int | None = None
        self.doctype = False

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a)
        if tag in VOID:
            return
        self.stack.append(tag)
        if "flag" in (a.get("class") or "").split() and self._flag_depth is None:
            self._flag_depth = len(self.stack)
            self.flags.append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        if self._flag_depth == len(self.stack):
            self._flag_depth = None
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._flag_depth is not None:
            self.flags[-1] += data


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    assert page.doctype
    assert page.errors == []
    assert page.stack == []
    return page


# --- render -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Page]:
    out = tmp_path_factory.mktemp("report")
    page = render(
        everything(),
        out,
        tables=[("fidelnet vs mininet", ["metric", HOSTILE], [["p99", "12 µs"], [None, 3]])],
    )
    text = page.read_text(encoding="utf-8")
    return out, text, parse(text)


def test_page_and_plots_exist(rendered: tuple[Path, str, Page]) -> None:
    out, _text, page = rendered
    assert (out / "report.html").is_file()
    assert page.imgs
    for img in page.imgs:
        src = img["src"]
        assert src is not None
        assert src.startswith("plots/") and src.endswith(".png")
        data = (out / src).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert img["alt"]
        assert img["data-plot"]


def test_every_kind_of_plot_is_there(rendered: tuple[Path, str, Page]) -> None:
    _out, _text, page = rendered
    by_result: dict[str | None, set[str | None]] = {}
    for img in page.imgs:
        by_result.setdefault(img["data-result"], set()).add(img["data-plot"])
    assert by_result["udp-100k"] == {"hdr", "rate", "worst-case", "cpu"}  # monitored
    assert by_result["udp-700k"] == {"hdr", "rate", "worst-case", "cpu"}
    assert by_result["search"] == {"zero-loss", "hdr"}
    assert by_result["iperf"] == {"tcp-goodput"}
    assert by_result["selftest"] == {"hdr", "rate", "worst-case"}
    together = [k for k in by_result if k.startswith("all-udp")]
    assert together, by_result  # two UDP runs: drawn together too, per stack and shape
    assert all(by_result[k] == {"hdr", "rate"} for k in together)
    assert not [k for k in by_result if k.startswith("compare")]  # one stack: nothing to overlay
    assert {img["data-plot"] for img in page.imgs} <= set(PLOT_KINDS)


def test_self_contained_no_script_no_external(rendered: tuple[Path, str, Page]) -> None:
    _out, text, page = rendered
    assert "script" not in page.tags
    assert "link" not in page.tags
    assert "http://" not in text and "https://" not in text
    assert "<style>" in text


def test_every_flag_is_shown(rendered: tuple[Path, str, Page]) -> None:
    _out, text, page = rendered
    for flag in (FLAG_RATE, FLAG_HOSTILE, *zero_loss().flags, *tcp().flags):
        assert any(flag.message in f and flag.code in f for f in page.flags), flag
    assert 'class="flag"' in text


def test_hostile_strings_are_escaped(rendered: tuple[Path, str, Page]) -> None:
    _out, text, _page = rendered
    assert HOSTILE not in text
    assert "<b>bad</b>" not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text
    assert "resolution &amp; range &lt;coarse&gt;" in text


def test_provenance_header(rendered: tuple[Path, str, Page]) -> None:
    _out, text, _page = rendered
    for want in (
        "fidelnet measure udp",
        "fidelnet measure tcp --to h9",
        "2025-03-01T12:00:00+00:00",
        "pktgen 0.1.0",
        "EPYC 7551P",
        "kernel 6.1.0",
        "link:tc: 3",
        "sha256:ab12",
    ):
        assert want in text, want


def test_key_numbers(rendered: tuple[Path, str, Page]) -> None:
    _out, text, _page = rendered
    for want in (
        "100 kpps",  # requested
        "270 kpps",  # received at 700 kpps offered
        "61.4 %",  # loss at 700 kpps
        "socket drops",
        "p99.9",
        "NDR (no loss)",
        "250 kpps",
        "375 kpps",
        "96 Mbit/s",  # total goodput
        "0.9998",  # Jain
    ):
        assert want in text, want


def test_extra_tables(rendered: tuple[Path, str, Page]) -> None:
    _out, text, _page = rendered
    assert "fidelnet vs mininet" in text
    assert "<td>12 µs</td>" in text
    assert "<td>—</td>" in text


def test_floor_shown_without_warning(rendered: tuple[Path, str, Page]) -> None:
    _out, text, _page = rendered
    assert "40 µs" in text  # the floor's p99.9
    assert "floor not measured" not in text.lower()


def test_floor_warning_when_none(tmp_path: Path) -> None:
    results = [("udp", rf("udp", udp(50e3)))]
    text = render(results, tmp_path).read_text()
    parse(text)
    assert "floor not measured" in text.lower()
    assert "fidelnet measure selftest" in text


def test_floor_missing_for_some_results(tmp_path: Path) -> None:
    results = [("with", rf("with", udp(50e3), FLOOR)), ("without", rf("without", udp(60e3)))]
    text = render(results, tmp_path).read_text()
    assert "No floor recorded with: without" in text


def test_output_elsewhere_keeps_plot_paths_right(tmp_path: Path) -> None:
    out = tmp_path / "results"
    page = render([("udp", rf("udp", udp(50e3)))], out, output=tmp_path / "site" / "r.html")
    imgs = parse(page.read_text()).imgs
    assert imgs
    for img in imgs:
        src = img["src"]
        assert src is not None and src.startswith("../results/plots/")
        assert (page.parent / src).is_file()


def test_same_labels_get_distinct_plots(tmp_path: Path) -> None:
    results = [("a b", rf("x", udp(50e3))), ("a/b", rf("y", udp(60e3)))]
    imgs = parse(render(results, tmp_path).read_text()).imgs
    srcs = [img["src"] for img in imgs]
    assert len(srcs) == len(set(srcs))


def test_render_needs_results(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no results"):
        render([], tmp_path)


# --- render_dir and the command -----------------------------------------------------


def write_results(d: Path, n: int = 5) -> None:
    for label, doc in everything()[:n]:
        save_result(d, label, doc.result, doc.provenance, doc.floor)


def test_render_dir_skips_other_json(tmp_path: Path) -> None:
    write_results(tmp_path)
    (tmp_path / "notes.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "broken.json").write_text("{")
    page = render_dir(tmp_path)
    assert page == tmp_path / "report.html"
    text = page.read_text()
    parse(text)
    assert "notes.json" in text and "broken.json" in text
    assert text.count('class="result ') == 5


def test_render_dir_without_results(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text("[]")
    with pytest.raises(ReportError, match="no fidelnet result files"):
        render_dir(tmp_path)


def test_cli_writes_the_report(tmp_path: Path) -> None:
    write_results(tmp_path, 1)
    (tmp_path / "notes.json").write_text(json.dumps({"hello": 1}))
    result = CliRunner(mix_stderr=False).invoke(report, [str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    assert str(tmp_path / "report.html") in result.stdout
    assert "notes.json" in result.stderr
    assert "not a fidelnet result file" in result.stderr
    assert (tmp_path / "report.html").is_file()
    assert any((tmp_path / "plots").glob("*.png"))


def test_cli_output_option(tmp_path: Path) -> None:
    write_results(tmp_path, 1)
    out = tmp_path / "elsewhere" / "page.html"
    result = CliRunner(mix_stderr=False).invoke(report, [str(tmp_path), "--output", str(out)])
    assert result.exit_code == 0, result.stderr
    assert out.is_file()


def test_cli_empty_dir_fails_clearly(tmp_path: Path) -> None:
    result = CliRunner(mix_stderr=False).invoke(report, [str(tmp_path)])
    assert result.exit_code != 0
    assert "no fidelnet result files" in result.stderr


def test_cli_missing_dir_fails_clearly(tmp_path: Path) -> None:
    result = CliRunner(mix_stderr=False).invoke(report, [str(tmp_path / "nope")])
    assert result.exit_code != 0
    assert "does not exist" in result.stderr
