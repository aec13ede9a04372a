"""The report leads with the answer: the verdict banner, the callers' tables and the
headline table first; each result opens with its verdict and reasons; compared
stacks overlaid; the floor after the results; the provenance folded, deduplicated,
at the end."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_data import (
    BENCH_TABLES,
    CHECKS,
    DEGRADED,
    DROPS,
    FLOOR,
    HOSTILE,
    TRUSTED,
    UNTRUSTED,
    bench_line,
    everything,
    judged,
    monitor,
    rf,
    tcp,
    udp,
    zero_loss,
)
from test_report_html import parse

from fidelnet.fidelity.verdict import Verdict
from fidelnet.measure.results import ResultFile
from fidelnet.report import render
from fidelnet.report.markup import Plots, e
from fidelnet.report.verdicts import quantity


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("layout")
    text = render(everything(), out, [CHECKS]).read_text(encoding="utf-8")
    parse(text)  # balanced, escaped
    return text


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("bench")
    text = render(bench_line(), out, BENCH_TABLES).read_text(encoding="utf-8")
    parse(text)
    return out, text


@pytest.fixture
def no_drawing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plots named on the page but not drawn: for tests of the HTML around them."""

    def figure(self: Plots, kind: str, slug: str, alt: str, caption: str, draw: object) -> str:
        return (
            f'<figure><img src="plots/{e(slug)}-{e(kind)}.png" alt="{e(alt)}" '
            f'data-plot="{e(kind)}" data-result="{e(slug)}"></figure>'
        )

    monkeypatch.setattr(Plots, "figure", figure)


def at(text: str, needle: str) -> int:
    i = text.find(needle)
    assert i >= 0, needle
    return i


def section_of(text: str, slug: str) -> str:
    start = at(text, f'id="r-{slug}"')
    end = text.find("</section>", start)
    return text[start:end]


def banner_of(text: str) -> str:
    start = at(text, '<section id="verdict"')
    return text[start : text.index("</section>", start)]


def headline_rows(text: str) -> list[str]:
    start = at(text, '<table id="headline">')
    table = text[start : text.index("</table>", start)]
    return re.findall(r"<tr><td>.*?</tr>", table)


# --- order ------------------------------------------------------------------------


def test_the_page_leads_with_the_answer(page: str) -> None:
    order = [
        at(page, "<h1>"),
        at(page, 'id="verdict"'),
        at(page, "Checks: line"),
        at(page, 'id="headline"'),
        at(page, 'id="all-udp"'),
        at(page, 'id="r-udp-100k"'),
        at(page, 'id="r-selftest"'),
        at(page, 'id="floor"'),
        at(page, '<details id="provenance">'),
        at(page, "<footer>"),
    ]
    assert order == sorted(order)
    assert '<details id="provenance" open' not in page  # folded


# --- the verdict banner -------------------------------------------------------------


def test_banner_shows_the_worst_level_counts_and_top_reasons(page: str) -> None:
    b = banner_of(page)
    assert 'data-level="untrusted"' in b and 'class="verdict verdict-untrusted"' in b
    assert "UNTRUSTED</span> — 1 of 5 results untrusted: receiver dropped 1,204 packets" in b
    assert '<a href="#r-udp-700k">udp-700k</a>' in b
    for count in ("1 untrusted", "1 degraded", "2 not judged", "1 trusted"):
        assert count in b, count
    assert "every core busy" in b  # the next reasons, worst first
    assert "no verdict in the file: iperf, selftest" in b
    assert HOSTILE not in b and "&lt;script&gt;" in b


def files(*verdicts: Verdict | None) -> list[tuple[str, ResultFile]]:
    return [
        (f"udp-{i}", rf(f"udp-{i}", judged(udp(50e3 * (i + 1)), v), FLOOR))
        for i, v in enumerate(verdicts)
    ]


@pytest.mark.parametrize(
    ("verdicts", "level", "says"),
    [
        ((TRUSTED, TRUSTED), "trusted", "all 2 results trusted"),
        ((TRUSTED, None), "not-judged", "1 of 2 results not judged"),
        ((None, None), "not-judged", "none of the 2 results carries a verdict"),
        ((None, DEGRADED, TRUSTED), "degraded", "1 of 3 results degraded: a sleeping thread"),
        ((UNTRUSTED,), "untrusted", "udp-0</a>: receiver dropped 1,204 packets"),
        ((None,), "not-judged", "no verdict in the result file"),
    ],
)
@pytest.mark.usefixtures("no_drawing")
def test_banner_level(
    tmp_path: Path, verdicts: tuple[Verdict | None, ...], level: str, says: str
) -> None:
    b = banner_of(render(files(*verdicts), tmp_path).read_text())
    assert f'data-level="{level}"' in b
    assert says in b


@pytest.mark.usefixtures("no_drawing")
def test_files_without_verdicts_are_not_judged_never_trusted(tmp_path: Path) -> None:
    text = render(files(None, None), tmp_path).read_text()
    body = text[text.index("</style>") :]
    assert "verdict-trusted" not in body and ">trusted<" not in body
    assert text.count('<td class="verdict-not-judged" data-level="not-judged">not judged') == 2
    assert section_of(text, "udp-0").count('class="verdict-box verdict-not-judged"') == 1


# --- headline table -----------------------------------------------------------------


def test_headline_table_one_row_per_result_with_verdict_and_first_reason(page: str) -> None:
    rows = headline_rows(page)
    assert len(rows) == 5
    want = {
        "udp-100k": ("trusted", "100 kpps received of 100 kpps requested", "—"),
        "udp-700k": ("untrusted", "270 kpps received", "receiver dropped 1,204 packets"),
        "search": ("degraded", "NDR 250 kpps, PDR 375 kpps", "a sleeping thread woke up"),
        "iperf": ("not-judged", "total goodput 96 Mbit/s", "—"),
        "selftest": ("not-judged", "max send 900 kpps", "—"),
    }
    for row, (label, (level, headline, reason)) in zip(rows, want.items(), strict=True):
        assert f'<a href="#r-{label}">{label}</a>' in row
        assert f'<td class="verdict-{level}" data-level="{level}">' in row
        assert headline in row and reason in row


def test_a_verdict_column_in_a_callers_table_is_coloured(page: str) -> None:
    start = at(page, "Checks: line")
    table = page[start : page.index("</table>", start)]
    assert '<td class="verdict-trusted">trusted</td>' in table
    assert '<td class="verdict-untrusted">untrusted: receiver dropped 17 packets</td>' in table
    assert "<td>—</td>" in table  # no verdict: a plain cell


# --- per result ---------------------------------------------------------------------


def test_each_result_opens_with_its_verdict_and_every_reason(page: str) -> None:
    s = section_of(page, "udp-700k")
    box = at(s, 'class="verdict-box verdict-untrusted" data-level="untrusted"')
    assert box < at(s, "<table") < at(s, 'class="flags"')  # verdict, reasons, then flags
    assert "monitored, machine profile bench-2cpu" in s
    reasons = s[at(s, '<table class="reasons">') :]
    reasons = reasons[: reasons.index("</table>")]
    assert len(re.findall(r"<tr><td><code>", reasons)) == 3  # all of them, worst first
    assert reasons.index("socket_drops") < reasons.index("cpu_saturated")
    for cell in (
        '<td class="verdict-untrusted">untrusted</td>',
        "<td>receiver dropped 1,204 packets in its socket</td>",
        '<td class="num">1,204 packets</td>',
        '<td class="num">0 packets</td>',
        "<td>receiver</td>",
        '<td class="num">20 % of window</td>',
        '<td class="num">10 % of window</td>',
        "<td>monitor.cpu</td>",
        "<code>flag:&lt;b&gt;bad&lt;/b&gt;</code>",
        "<td>&lt;i&gt;measurement&lt;/i&gt;</td>",
    ):
        assert cell in reasons, cell
    trusted = section_of(page, "udp-100k")
    assert 'class="verdict-box verdict-trusted"' in trusted
    assert "near_floor" in trusted and "41 µs" in trusted and "40 µs" in trusted


def test_results_no_longer_repeat_their_provenance(page: str) -> None:
    for slug in ("udp-100k", "udp-700k", "search", "iperf", "selftest"):
        s = section_of(page, slug)
        assert "fidelnet measure" not in s and "2025-03-01T12:00:00" not in s, slug


def test_cpu_plot_only_with_a_monitor_record(page: str) -> None:
    cpu = re.findall(r'data-plot="cpu" data-result="([^"]+)"', page)
    assert cpu == ["udp-100k", "udp-700k"]
    assert "1.5 % of one core" in section_of(page, "udp-100k")


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (1204.0, "packets", "1,204 packets"),
        (12.54, "%", "12.5 %"),
        (1.2e6, "ns", "1.2 ms"),
        (0.005, "ratio", "0.5 %"),
        (3.0, None, "3"),
        (None, "%", "—"),
    ],
)
def test_reason_quantities(value: float | None, unit: str | None, shown: str) -> None:
    assert quantity(value, unit) == shown


# --- provenance and floor -----------------------------------------------------------


def test_provenance_shared_values_once_differing_values_once_each(page: str) -> None:
    prov = page[at(page, '<details id="provenance">') :]
    prov = prov[: prov.index("</details>")]
    assert "command differs between results" in prov
    # shared by all five: once on the whole page
    for shared in ("EPYC 7551P", "pktgen 0.1.0", "link:tc: 3, node:host: 2", "sha256:ab12"):
        assert page.count(shared) == 1, shared
        assert shared in prov
    # the command differs: each value once, with the results that carry it
    assert page.count("<code>fidelnet measure udp</code>") == 1
    assert page.count("<code>fidelnet measure tcp --to h9</code>") == 1
    assert "<td>udp-… (2 results), search, selftest</td>" in prov  # a stack in short


def test_provenance_of_two_stacks_names_the_stacks(bench: tuple[Path, str]) -> None:
    _out, text = bench
    prov = text[at(text, '<details id="provenance">') :]
    assert "tools, backends and topology hash differ between results" in prov
    assert prov.count("fidelnet-… (3 results)") == 3  # tools, backends, topology hash
    assert prov.count("mininet-… (3 results)") == 3
    assert text.count("link:veth: 8, node:mininet: 9") == 1
    assert text.count("<code>fidelnet bench line</code>") == 1


def test_floor_after_the_results_names_all_results_briefly(bench: tuple[Path, str]) -> None:
    _out, text = bench
    floor = text[at(text, 'id="floor"') :]
    floor = floor[: floor.index("</section>")]
    assert "<td>all 6 results</td>" in floor
    assert at(text, 'id="floor"') > at(text, 'id="r-mininet-zero-loss-cbr"')


# --- stacks compared ----------------------------------------------------------------


def test_stacks_are_overlaid_per_rate_not_drawn_per_stack(bench: tuple[Path, str]) -> None:
    out, text = bench
    compare = text[at(text, '<section id="compare">') :]
    compare = compare[: compare.index("</section>")]
    assert "<h2>fidelnet and mininet compared</h2>" in compare
    assert "fidelnet blue, mininet orange" in compare
    imgs = re.findall(
        r'<img src="([^"]+)" alt="([^"]+)" data-plot="([^"]+)" data-result="([^"]+)"', compare
    )
    got = [(kind, result) for _src, _alt, kind, result in imgs]
    assert got == [
        ("zero-loss", "compare-cbr-84B-search"),
        ("hdr", "compare-cbr-84B-50-kpps"),
        ("rate", "compare-cbr-84B-50-kpps"),
        ("hdr", "compare-cbr-84B-300-kpps"),
        ("rate", "compare-cbr-84B-300-kpps"),
    ]
    for src, alt, _kind, _result in imgs:
        assert (out / src).is_file()
        assert "fidelnet" in alt and "mininet" in alt
    assert "fidelnet: NDR 250 kpps" in compare and "mininet: NDR 250 kpps" in compare
    assert 'id="all-udp"' not in text  # every UDP run has its counterpart


def test_overlay_lines_are_named_and_coloured_by_stack() -> None:
    from fidelnet.report import compare
    from fidelnet.report.plots import hdr_percentiles_figure, series_lines

    assert compare.stack_of("fidelnet-cbr-00050k") == "fidelnet"
    assert compare.stack_of("mininet-zero-loss-burst") == "mininet"
    runs = dict(bench_line())
    fig = hdr_percentiles_figure(
        [
            ("fidelnet", runs["fidelnet-cbr-00050k"].result),
            ("mininet", runs["mininet-cbr-00050k"].result),
        ],  # type: ignore[list-item]
        colors=compare.STACK_COLORS[:2],
        small=True,
    )
    lines = series_lines(fig)
    assert [line.get_label() for line in lines] == ["fidelnet", "mininet"]
    assert [line.get_color() for line in lines] == ["tab:blue", "tab:orange"]


@pytest.mark.usefixtures("no_drawing")
def test_a_stack_without_counterpart_keeps_its_runs_together(tmp_path: Path) -> None:
    results = [
        ("a-cbr-1", rf("a-cbr-1", udp(50e3))),
        ("b-cbr-1", rf("b-cbr-1", udp(50e3))),  # compared with a at 50 kpps
        ("a-cbr-2", rf("a-cbr-2", udp(100e3))),  # a alone at 100 and 200 kpps
        ("a-cbr-3", rf("a-cbr-3", udp(200e3))),
        ("z-search", rf("z-search", zero_loss())),  # one search: nothing to compare
        ("t", rf("t", tcp())),
    ]
    text = render(results, tmp_path).read_text()
    results_of = set(re.findall(r'data-result="([^"]+)"', text))
    assert "compare-cbr-84B-50-kpps" in results_of
    assert "compare-cbr-84B-search" not in results_of
    assert "all-udp-a-cbr" in results_of
    together = text[at(text, 'id="all-udp"') :]
    assert "one line per rate" in together


@pytest.mark.usefixtures("no_drawing")
def test_banner_groups_a_reason_many_results_share(tmp_path: Path) -> None:
    drops = Verdict.of([DROPS], monitored=True)
    results = [
        (f"r-{i}", rf(f"r-{i}", judged(udp(50e3), drops, monitor(seed=i)))) for i in range(4)
    ]
    b = banner_of(render(results, tmp_path).read_text())
    assert "4 of 4 results untrusted: receiver dropped 1,204 packets" in b
    assert "(and 3 other results)" in b
