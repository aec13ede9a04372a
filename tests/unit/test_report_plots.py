"""The report's plots (fidelnet.report.plots): files, axes, one line per result."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fidelnet.measure.latency import encode, summary_from_histogram
from fidelnet.measure.results import (
    FloorSummary,
    Interval,
    LatencySummary,
    TcpFlowResult,
    TcpInterval,
    TcpResult,
    Trial,
    UdpFlowResult,
    UdpResult,
    ZeroLossResult,
)
from fidelnet.report import plots

PNG = b"\x89PNG\r\n\x1a\n"


def latency(n: int = 5000, median_ns: float = 60_000, seed: int = 1) -> LatencySummary:
    rng = random.Random(seed)
    h = HdrHistogram(1, 60 * 10**9, 3)
    for _ in range(n):
        h.record_value(int(rng.lognormvariate(0, 0.35) * median_ns))
    h.record_value(int(median_ns * 40))  # one outlier: the tail an HDR plot is for
    return summary_from_histogram(h)


def udp(rate_pps: float, seed: int = 1, *, per_interval_latency: bool = True) -> UdpResult:
    rng = random.Random(seed)
    lat = latency(median_ns=50_000 + rate_pps / 10, seed=seed)
    received_pps = min(rate_pps, 270_000.0)
    intervals = [
        Interval(
            t_s=round(0.1 * (i + 1), 3),
            packets=int(received_pps / 10),
            frame_bytes=int(received_pps / 10) * 84,
            rate_pps=received_pps * rng.uniform(0.97, 1.03),
            rate_bps=received_pps * 84 * 8 * rng.uniform(0.97, 1.03),
            latency_max_ns=int(lat.p999_ns * rng.uniform(0.5, 3)) if per_interval_latency else None,
        )
        for i in range(50)
    ]
    sent = int(rate_pps * 5)
    received = int(received_pps * 5)
    flow = UdpFlowResult(
        id=0,
        src="h1",
        dst="h2",
        dst_addr="10.0.0.2",
        sent=sent,
        received=received,
        unique=received,
        lost=sent - received,
        loss_ratio=(sent - received) / sent,
        duplicates=0,
        reordered=0,
        latency=lat,
    )
    return UdpResult(
        src="h1",
        dst="h2",
        size=84,
        pattern="cbr",
        requested_pps=rate_pps,
        achieved_pps=rate_pps,
        rate_reached=True,
        duration_s=5.0,
        sent=sent,
        received=received,
        unique=received,
        lost=sent - received,
        loss_ratio=(sent - received) / sent,
        duplicates=0,
        reordered=0,
        malformed=0,
        socket_drops=0,
        receive_pps=received_pps,
        latency=lat,
        flows=[flow],
        intervals=intervals,
        interval_s=0.1,
    )


def zero_loss() -> ZeroLossResult:
    trials = []
    for i, (rate, loss) in enumerate(
        [(500e3, 0.2), (250e3, 0.0), (375e3, 0.05), (312e3, 0.0004), (281e3, 0.0)]
    ):
        sent = int(rate * 2)
        trials.append(
            Trial(
                rate_pps=rate,
                achieved_pps=rate * 0.999,
                sent=sent,
                received=int(sent * (1 - loss)),
                loss_ratio=loss,
                generator_limited=i == 0,
                socket_drops=0,
                latency=latency(1000, seed=i),
            )
        )
    return ZeroLossResult(
        src="h1",
        dst="h2",
        size=84,
        pattern="cbr",
        trial_s=2.0,
        resolution_pps=10e3,
        low_pps=0.0,
        high_pps=500e3,
        pdr_loss=0.005,
        ndr_pps=281e3,
        pdr_pps=312e3,
        trials=trials,
    )


def tcp(flows: int = 2, bottleneck: float | None = 100e6) -> TcpResult:
    rng = random.Random(3)
    fl = [
        TcpFlowResult(
            src=f"h{i + 1}",
            dst="h9",
            port=5201 + i,
            sender_bps=51e6,
            receiver_bps=50e6,
            goodput_bps=49e6,
            retransmits=12,
            intervals=[
                TcpInterval(t_s=float(t), goodput_bps=rng.uniform(40e6, 55e6)) for t in range(10)
            ],
            warmup_s=2.0,
        )
        for i in range(flows)
    ]
    return TcpResult(
        duration_s=10.0,
        interval_s=1.0,
        warmup_s=2.0,
        flows=fl,
        total_goodput_bps=98e6,
        jain=0.999,
        bottleneck_bps=bottleneck,
    )


FLOOR = FloorSummary(
    latency_p50_ns=9_000,
    latency_p999_ns=40_000,
    latency_max_ns=120_000,
    max_send_pps=900e3,
    measured_at="2025-01-01T00:00:00+00:00",
    source="selftest.json",
)

RATES = [("50 kpps", udp(50e3, 1)), ("300 kpps", udp(300e3, 2)), ("700 kpps", udp(700e3, 3))]


def xs(line: Line2D) -> list[float]:
    return [float(v) for v in np.asarray(line.get_xdata(), dtype=float)]


def ys(line: Line2D) -> list[float]:
    return [float(v) for v in np.asarray(line.get_ydata(), dtype=float)]


def is_png(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 1000 and path.read_bytes()[:8] == PNG


# --- files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "results", "kwargs"),
    [
        ("hdr_percentiles", RATES, {}),
        ("rate_over_time", RATES, {"bits": True}),
        ("worst_case_over_time", RATES, {"floor": FLOOR}),
        ("zero_loss_trials", [("search", zero_loss())], {}),
        ("tcp_goodput", [("iperf", tcp())], {}),
    ],
)
def test_each_plot_writes_a_png(
    tmp_path: Path,
    name: str,
    results: list[tuple[str, object]],
    kwargs: dict[str, object],
) -> None:
    func = getattr(plots, name)
    out = tmp_path / "sub" / f"{name}.png"
    got = func(results, out, **kwargs)
    assert got == out
    assert is_png(out)


def test_svg_is_written_next_to_the_png(tmp_path: Path) -> None:
    out = plots.hdr_percentiles(RATES[:1], tmp_path / "hdr.png", svg=True)
    assert is_png(out)
    svg = tmp_path / "hdr.svg"
    assert svg.is_file()
    assert b"<svg" in svg.read_bytes()[:1000]


def test_plots_do_not_use_pyplot() -> None:
    code = (
        "import sys, fidelnet.report.plots, fidelnet.report.html;"
        "assert 'matplotlib.pyplot' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- HDR percentile plot ------------------------------------------------------------


def tick_labels(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_xticklabels()]


def test_hdr_axes_are_log_log_with_percentile_ticks() -> None:
    fig = plots.hdr_percentiles_figure(RATES)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert ax.get_yscale() == "log"
    # 5001 samples: the tail reaches one sample in 5001, so the axis ends at 99.99%.
    assert tick_labels(fig) == ["0%", "90%", "99%", "99.9%", "99.99%"]
    assert "µs" in ax.get_ylabel()
    assert [line.get_label() for line in plots.series_lines(fig)] == [r[0] for r in RATES]


def test_hdr_axis_grows_with_the_number_of_samples() -> None:
    h = HdrHistogram(1, 60 * 10**9, 3)
    h.record_value(50_000, 2_000_000)
    h.record_value(900_000, 100)
    big = summary_from_histogram(h)
    fig = plots.hdr_percentiles_figure([("2M samples", big)])
    assert tick_labels(fig) == ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"]


def test_hdr_line_runs_from_min_to_max() -> None:
    lat = RATES[0][1].latency
    (line,) = plots.series_lines(plots.hdr_percentiles_figure(RATES[:1]))
    x, y = xs(line), ys(line)
    assert x[0] == 1.0
    assert x == sorted(x)
    assert y == sorted(y)  # percentiles never go down
    assert y[-1] == pytest.approx(lat.max_ns / 1e3)
    assert y[0] == pytest.approx(lat.min_ns / 1e3, rel=0.01)


def test_hdr_takes_flows_trials_and_summaries() -> None:
    r = RATES[0][1]
    sources: list[tuple[str, plots.LatencySource]] = [
        ("result", r),
        ("flow", r.flows[0]),
        ("trial", zero_loss().trials[1]),
        ("summary", r.latency),
    ]
    assert len(plots.series_lines(plots.hdr_percentiles_figure(sources))) == 4


def test_hdr_without_histogram_falls_back_to_the_summary() -> None:
    lat = RATES[0][1].latency.model_copy(update={"hdr": None})
    bad = RATES[0][1].latency.model_copy(update={"hdr": "bm90IGEgaGlzdG9ncmFt"})
    lines = plots.series_lines(plots.hdr_percentiles_figure([("a", lat), ("b", bad)]))
    assert [line.get_label() for line in lines] == ["a (summary only)", "b (summary only)"]
    assert all(line.get_linestyle() == "--" for line in lines)
    assert ys(lines[0])[-1] == pytest.approx(lat.max_ns / 1e3)


def test_hdr_skips_empty_distributions_and_says_so() -> None:
    empty = LatencySummary(
        count=0, min_ns=0, mean_ns=0, p50_ns=0, p90_ns=0, p99_ns=0, p999_ns=0, p9999_ns=0, max_ns=0
    )
    fig = plots.hdr_percentiles_figure([("nothing", empty)])
    assert plots.series_lines(fig) == []
    assert any("no latency" in t.get_text() for t in fig.axes[0].texts)


def test_hostile_labels_are_shown_literally(tmp_path: Path) -> None:
    labels = ["$\\frac{1", "_hidden", "<script>"]
    results = [(label, r) for label, (_, r) in zip(labels, RATES, strict=True)]
    fig = plots.hdr_percentiles_figure(results, title="cost $5")
    legend = fig.axes[0].get_legend()
    assert legend is not None
    shown = [t.get_text() for t in legend.get_texts()]
    assert shown == ["\\$\\frac{1", " _hidden", "<script>"]
    assert is_png(plots.save(fig, tmp_path / "hostile.png"))


def test_hdr_histogram_encoded_directly_is_read() -> None:
    h = HdrHistogram(1, 60 * 10**9, 3)
    for v in (10_000, 20_000, 30_000, 1_000_000):
        h.record_value(v)
    lat = summary_from_histogram(h).model_copy(update={"hdr": encode(h)})
    (line,) = plots.series_lines(plots.hdr_percentiles_figure([("four", lat)]))
    assert ys(line)[-1] == pytest.approx(1000, rel=0.001)


# --- rate, worst case ---------------------------------------------------------------


def test_rate_over_time_one_line_per_result_in_kpps() -> None:
    fig = plots.rate_over_time_figure(RATES)
    lines = plots.series_lines(fig)
    assert len(lines) == 3
    assert "kpps" in fig.axes[0].get_ylabel()
    assert fig.axes[0].get_xlabel() == "time (s)"
    top = max(ys(lines[2]))
    assert 250 < top < 290  # 700 kpps offered, about 270 kpps received


def test_rate_over_time_bits_adds_a_mbit_panel() -> None:
    fig = plots.rate_over_time_figure(RATES, bits=True)
    assert len(fig.axes) == 2
    assert "Mbit/s" in fig.axes[1].get_ylabel()
    assert sum(1 for line in fig.axes[1].get_lines() if line.get_gid() == "series") == 3


def test_worst_case_points_on_log_axis_with_floor() -> None:
    fig = plots.worst_case_over_time_figure(RATES, floor=FLOOR)
    ax = fig.axes[0]
    lines = plots.series_lines(fig)
    assert len(lines) == 3
    assert all(line.get_linestyle() == "None" and line.get_marker() == "o" for line in lines)
    assert ax.get_yscale() == "log"
    (floor,) = [line for line in ax.get_lines() if line.get_gid() == "floor"]
    assert ys(floor) == [40.0, 40.0]
    assert "p99.9" in str(floor.get_label())


def test_worst_case_without_floor_or_latency() -> None:
    fig = plots.worst_case_over_time_figure(RATES[:1])
    assert [line.get_gid() for line in fig.axes[0].get_lines()] == ["series"]
    blind = udp(10e3, per_interval_latency=False)
    fig = plots.worst_case_over_time_figure([("blind", blind)])
    assert plots.series_lines(fig) == []
    assert any("no per-interval" in t.get_text() for t in fig.axes[0].texts)


# --- zero loss, TCP -----------------------------------------------------------------


def test_zero_loss_trials_marks_loss_and_draws_ndr_pdr() -> None:
    fig = plots.zero_loss_trials_figure([("search", zero_loss())])
    ax = fig.axes[0]
    (series,) = plots.series_lines(fig)
    assert xs(series) == [1, 2, 3, 4, 5]
    assert ys(series) == [500, 250, 375, 312, 281]
    (ndr,) = [line for line in ax.get_lines() if line.get_gid() == "ndr"]
    (pdr,) = [line for line in ax.get_lines() if line.get_gid() == "pdr"]
    assert ys(ndr)[0] == 281
    assert ys(pdr)[0] == 312
    legend = ax.get_legend()
    assert legend is not None
    texts = [t.get_text() for t in legend.get_texts()]
    for want in ("no loss", "loss ≤ PDR threshold", "loss > PDR threshold", "generator-limited"):
        assert want in texts
    # every lossy trial is annotated with its loss
    assert sorted(t.get_text() for t in ax.texts) == ["0.04 %", "20 %", "5 %"]


def test_zero_loss_several_searches() -> None:
    fig = plots.zero_loss_trials_figure([("a", zero_loss()), ("b", zero_loss())])
    assert len(plots.series_lines(fig)) == 2
    assert sum(1 for line in fig.axes[0].get_lines() if line.get_gid() == "ndr") == 2


def test_tcp_goodput_per_flow_warmup_and_bottleneck() -> None:
    fig = plots.tcp_goodput_figure([("iperf", tcp(3))])
    ax = fig.axes[0]
    lines = plots.series_lines(fig)
    assert [line.get_label() for line in lines] == [
        "h1→h9:5201",
        "h2→h9:5202",
        "h3→h9:5203",
    ]
    assert "Mbit/s" in ax.get_ylabel()
    (cap,) = [line for line in ax.get_lines() if line.get_gid() == "bottleneck"]
    assert ys(cap)[0] == pytest.approx(100)
    spans = [p for p in ax.patches if "warm-up" in str(p.get_label())]
    assert len(spans) == 1


def test_tcp_goodput_without_bottleneck_and_several_results() -> None:
    fig = plots.tcp_goodput_figure([("a", tcp(1, None)), ("b", tcp(2, None))])
    assert [line.get_label() for line in plots.series_lines(fig)] == [
        "a h1→h9:5201",
        "b h1→h9:5201",
        "b h2→h9:5202",
    ]
    assert not [line for line in fig.axes[0].get_lines() if line.get_gid() == "bottleneck"]


def test_nines_labels() -> None:
    assert [plots.nines_label(k) for k in range(6)] == [
        "0%",
        "90%",
        "99%",
        "99.9%",
        "99.99%",
        "99.999%",
    ]
