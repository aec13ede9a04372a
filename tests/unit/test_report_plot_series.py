"""The report's rate series end honestly (a last, partial interval is scaled to its
length or left out, never drawn as a drop to zero), the CPU plot, and the colours
and size comparisons use."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.collections import PolyCollection
from report_data import latency, monitor
from test_report_plots import RATES, is_png, xs, ys, zero_loss

from fidelnet.measure.results import (
    Interval,
    TcpFlowResult,
    TcpInterval,
    TcpResult,
    UdpResult,
)
from fidelnet.report import plots

RATE = 100_000.0  # pps
STEP = 0.1  # s


def series(last_packets: int, span_s: float, *, extra: bool = False) -> UdpResult:
    """A 2 s run at 100 kpps received in full: 20 intervals of 10,000 packets, the
    last one holding ``last_packets`` (and, with ``extra``, a 21st interval at 2.0 s
    with those instead), the receiver's first-to-last span ``span_s``."""
    counts = [10_000] * 20
    if extra:
        counts.append(last_packets)
    else:
        counts[-1] = last_packets
    received = sum(counts)
    return UdpResult(
        src="h1",
        dst="h2",
        size=84,
        pattern="cbr",
        requested_pps=RATE,
        achieved_pps=RATE,
        rate_reached=True,
        duration_s=2.0,
        sent=received,
        received=received,
        unique=received,
        lost=0,
        loss_ratio=0.0,
        duplicates=0,
        reordered=0,
        malformed=0,
        socket_drops=0,
        receive_pps=(received - 1) / span_s,  # as pktgen.combine computes it
        latency=latency(1),
        flows=[],
        intervals=[
            Interval(
                t_s=round(k * STEP, 3),
                packets=n,
                frame_bytes=n * 84,
                rate_pps=n / STEP,  # as pktgen._intervals computes it
                rate_bps=n * 84 * 8 / STEP,
            )
            for k, n in enumerate(counts)
        ],
        interval_s=STEP,
    )


def test_a_last_interval_cut_short_is_scaled_to_its_length() -> None:
    r = series(7_000, 1.97)  # the last packet came 0.07 s into the last interval
    assert r.intervals[-1].rate_pps == pytest.approx(70_000)  # what the file says
    pts = plots.rate_points(r)
    assert len(pts) == 20
    t, pps, bps = pts[-1]
    assert t == pytest.approx(1.9)
    assert pps == pytest.approx(RATE, rel=0.001)
    assert bps == pytest.approx(RATE * 84 * 8, rel=0.001)
    assert [p[1] for p in pts[:-1]] == [i.rate_pps for i in r.intervals[:-1]]  # the rest as is


def test_a_last_interval_of_a_few_packets_is_left_out() -> None:
    r = series(30, 2.0003, extra=True)  # 30 late packets open a 21st interval
    assert r.intervals[-1].rate_pps == pytest.approx(300)  # a drop to almost zero
    pts = plots.rate_points(r)
    assert len(pts) == 20
    assert min(p[1] for p in pts) == pytest.approx(RATE)


def test_a_full_last_interval_is_drawn_as_it_is() -> None:
    r = series(10_000, 1.99999)
    assert plots.rate_points(r) == [(i.t_s, i.rate_pps, i.rate_bps) for i in r.intervals]


def test_the_rate_plot_does_not_drop_at_the_end() -> None:
    cut = series(7_000, 1.97)
    late = series(30, 2.0003, extra=True)
    fig = plots.rate_over_time_figure([("cut", cut), ("late", late)], bits=True)
    for line in plots.series_lines(fig):
        assert min(ys(line)) == pytest.approx(RATE / 1e3, rel=0.001)
        assert max(xs(line)) == pytest.approx(1.9)
    bits = [line for line in fig.axes[1].get_lines() if line.get_gid() == "series"]
    assert all(min(ys(line)) == pytest.approx(RATE * 84 * 8 / 1e6, rel=0.001) for line in bits)


def tcp_run(last: TcpInterval) -> TcpResult:
    ivs = [TcpInterval(t_s=float(t), end_s=float(t + 1), goodput_bps=50e6) for t in range(9)]
    flow = TcpFlowResult(
        src="h1",
        dst="h2",
        port=5201,
        sender_bps=50e6,
        receiver_bps=50e6,
        goodput_bps=50e6,
        intervals=[*ivs, last],
        warmup_s=1.0,
    )
    return TcpResult(
        duration_s=9.5, interval_s=1.0, warmup_s=1.0, flows=[flow], total_goodput_bps=50e6
    )


@pytest.mark.parametrize(
    ("last", "kept"),
    [
        (TcpInterval(t_s=9.0, end_s=9.003, goodput_bps=0.0), False),  # a few ms: noise
        (TcpInterval(t_s=9.0, end_s=9.6, goodput_bps=50e6), True),  # iperf3 scaled it
        (TcpInterval(t_s=9.0, goodput_bps=0.0), True),  # no end: half of 1 s left by 9.5 s
        (TcpInterval(t_s=9.2, goodput_bps=0.0), False),  # no end: 0.3 s left
    ],
)
def test_tcp_drops_a_last_interval_shorter_than_half_a_step(last: TcpInterval, kept: bool) -> None:
    r = tcp_run(last)
    got = plots.tcp_points(r, r.flows[0])
    assert len(got) == (10 if kept else 9)
    (line,) = plots.series_lines(plots.tcp_goodput_figure([("iperf", r)]))
    assert len(xs(line)) == len(got)


# --- CPU ----------------------------------------------------------------------------


def test_cpu_plot_one_stacked_panel_per_core_window_and_pressure() -> None:
    rec = monitor(cores=2)
    fig = plots.cpu_per_core_figure(rec, title="run: CPU")
    assert len(fig.axes) == 2
    for ax, core in zip(fig.axes, rec.cpu.cores, strict=True):
        stacks = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(stacks) == 5  # user, system, softirq, irq, steal
        assert ax.get_ylim() == (0.0, 100.0)
        assert ax.get_ylabel() == f"cpu{core.cpu} (%)"
        (window,) = [p for p in ax.patches if p.get_gid() == "window"]
        x0, x1 = window.get_x(), window.get_x() + window.get_width()
        assert (x0, x1) == pytest.approx(rec.window_s)
        (pressure,) = [line for line in ax.get_lines() if line.get_gid() == "pressure"]
        assert ys(pressure) == pytest.approx(rec.cpu.pressure_pct)
    assert fig.axes[0].get_title() == "run: CPU"
    legend = fig.legends[0]
    names = [t.get_text() for t in legend.get_texts()]
    assert names == [
        "measured traffic",
        "user",
        "system",
        "softirq",
        "irq",
        "steal",
        "CPU pressure (PSI some)",
    ]
    # the stack's top is the busy share: softirq-heavy last core near 80 % in the window
    top = fig.axes[1].collections[-1].get_paths()[0].vertices[:, 1].max()
    assert 70 < top <= 100


def test_cpu_plot_without_pressure_and_on_many_cores(tmp_path: Path) -> None:
    fig = plots.cpu_per_core_figure(monitor(cores=1, pressure=False))
    assert len(fig.axes) == 1
    assert not [line for line in fig.axes[0].get_lines() if line.get_gid() == "pressure"]
    big = monitor(cores=12)  # the last core is the busiest
    fig = plots.cpu_per_core_figure(big)
    assert len(fig.axes) == 8
    assert fig.axes[-1].get_ylabel() == "cpu11 (%)"
    assert "busiest 8 of 12" in fig.axes[0].get_title()
    assert is_png(plots.cpu_per_core(big, tmp_path / "cpu.png"))


# --- colours and size for comparisons -----------------------------------------------


def test_colours_per_result_and_a_small_size() -> None:
    colors = ["tab:orange", "tab:blue", None]
    for fig in (
        plots.hdr_percentiles_figure(RATES, colors=colors, small=True),
        plots.rate_over_time_figure(RATES, colors=colors, small=True),
    ):
        got = [line.get_color() for line in plots.series_lines(fig)]
        assert got[:2] == ["tab:orange", "tab:blue"]
        assert tuple(fig.get_size_inches()) == pytest.approx((6.0, 3.6))
    fig = plots.zero_loss_trials_figure(
        [("a", zero_loss()), ("b", zero_loss())], colors=["tab:red", "tab:green"]
    )
    assert [line.get_color() for line in plots.series_lines(fig)] == ["tab:red", "tab:green"]
