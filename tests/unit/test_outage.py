"""Outages told from pktgen's sequence gaps: start, duration within one packet
interval, lost packets, late ones, flows that never came back, events' windows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fidelnet.measure import outage
from fidelnet.measure.results import Gap, LatencySummary, UdpFlowResult, UdpResult

T0 = 1_700_000_000 * 10**9
IV = 100_000  # 10 kpps: one packet every 100 us


def _lat(max_ns: int = 50_000) -> LatencySummary:
    return LatencySummary(
        count=1, min_ns=1, mean_ns=1.0, p50_ns=1, p90_ns=1, p99_ns=1, p999_ns=1, p9999_ns=1,
        max_ns=max_ns,
    )  # fmt: skip


def _result(gaps: list[Gap], sent: int = 30_000, max_seq: int | None = 29_999,
            first_seq: int = 0) -> UdpResult:  # fmt: skip
    flow = UdpFlowResult(
        id=0, src="a", dst="b", dst_addr="10.0.0.2", sent=sent, received=1, unique=1, lost=0,
        loss_ratio=0.0, duplicates=0, reordered=0, latency=_lat(),
        first_seq=None if max_seq is None else first_seq,
        first_send_ns=None if max_seq is None else T0 + first_seq * IV,
        max_seq=max_seq, max_seq_send_ns=None if max_seq is None else T0 + max_seq * IV,
    )  # fmt: skip
    return UdpResult(
        src="a", dst="b", size=64, pattern="cbr", requested_pps=10_000.0,
        achieved_pps=10_000.0, rate_reached=True, duration_s=3.0, sent=sent, received=1,
        unique=1, lost=0, loss_ratio=0.0, duplicates=0, reordered=0, malformed=0,
        socket_drops=0, receive_pps=0.0, latency=_lat(), flows=[flow], intervals=[],
        interval_s=0.1, first_send_ns=T0, last_send_ns=T0 + (sent - 1) * IV, gaps=gaps,
    )  # fmt: skip


def _gap(after: int, before: int, filled: int = 0) -> Gap:
    return Gap(
        flow=0, after_seq=after, after_send_ns=T0 + after * IV, before_seq=before,
        before_send_ns=T0 + before * IV, before_rx_ns=T0 + before * IV + 50_000,
        lost=before - after - 1 - filled, filled=filled,
    )  # fmt: skip


def test_a_gap_is_an_outage_from_the_first_lost_to_the_first_received_again() -> None:
    # 9,999 arrived, then 29,999: 10,000..29,998 (sent from 1 s to 2.9998 s) were lost.
    got = outage.outages(_result([_gap(9_999, 29_999)]))
    assert len(got) == 1
    o = got[0]
    assert o.start_ns == T0 + 10_000 * IV and o.start_s == pytest.approx(1.0)
    assert o.end_ns == T0 + 29_999 * IV and o.duration_s == pytest.approx(1.9999)
    assert o.lost == 19_999 and o.recovered


def test_late_packets_are_not_lost_and_small_gaps_can_be_left_out() -> None:
    res = _result([_gap(100, 105, filled=1), _gap(5_000, 5_002)])
    got = outage.outages(res)
    assert [(o.lost, o.late) for o in got] == [(3, 1), (1, 0)]
    assert [o.lost for o in outage.outages(res, min_lost=2)] == [3]


def test_a_flow_that_never_comes_back_ends_in_an_outage_that_did_not_recover() -> None:
    res = _result([], sent=30_000, max_seq=9_999)
    (o,) = outage.outages(res)
    assert not o.recovered and o.lost == 20_000
    assert o.start_ns == T0 + 10_000 * IV
    assert o.duration_s == pytest.approx(2.0)  # to when the packet after the last was due
    nothing = outage.outages(_result([], max_seq=None))
    assert len(nothing) == 1 and nothing[0].lost == 30_000 and not nothing[0].recovered


def test_a_flow_that_starts_late_has_a_leading_outage() -> None:
    (o,) = outage.outages(_result([], first_seq=500))
    assert o.start_ns == T0 and o.lost == 500 and o.duration_s == pytest.approx(0.05)


def test_around_an_event_sums_what_followed_it_until_the_next_one() -> None:
    res = _result([_gap(100, 200), _gap(9_999, 10_500), _gap(10_600, 10_700), _gap(20_000, 20_010)])
    at = T0 + 10_000 * IV  # the event; packets 9,999..10,000 were in flight
    got = outage.around(res, at, until_ns=T0 + 15_000 * IV)
    assert [o.lost for o in got.outages] == [500, 99]
    # From the first lost (10,000) to the first received after the last gap (10,700).
    assert got.outage_s == pytest.approx(700 * IV / 1e9)
    assert got.lost == 599 and got.recovered and got.delay_s == pytest.approx(0.0)
    # An outage already going on at the event is its own (packets in flight, queued).
    early = outage.around(res, T0 + 10_020 * IV, until_ns=T0 + 15_000 * IV)
    assert [o.lost for o in early.outages] == [500, 99] and early.delay_s is not None
    assert early.delay_s < 0
    assert outage.around(res, T0 + 25_000 * IV).outages == ()
    assert outage.around(res, T0 + 25_000 * IV).outage_s == 0.0


def test_the_report_plots_a_flow_around_its_events(tmp_path: Any) -> None:
    from fidelnet.measure.results import EventRecord, Interval
    from fidelnet.report import plots

    res = _result([_gap(9_999, 29_999)])
    ivs = [
        Interval(t_s=i * 0.1, packets=0 if 10 <= i < 30 else 1000, frame_bytes=64_000,
                 rate_pps=0.0 if 10 <= i < 30 else 10_000.0, rate_bps=5.12e6,
                 latency_max_ns=None if 10 <= i < 30 else 90_000, latency_p50_ns=50_000,
                 latency_p99_ns=None if 10 <= i < 30 else 80_000)
        for i in range(30)
    ]  # fmt: skip
    res = res.model_copy(
        update={
            "intervals": ivs,
            "outages": outage.outages(res),
            "events": [
                EventRecord(name="cut:down", action="down", target="s1-h2", at_s=1.0,
                            late_s=3e-5, took_s=7e-4, effective_s=1.0, outage_s=2.0,
                            lost=19_999, late_packets=0, recovered=True),
                EventRecord(name="cut:up", action="up", target="s1-h2", at_s=3.0,
                            late_s=3e-5, took_s=7e-4, effective_s=3.0),
            ],
        }
    )  # fmt: skip
    fig = plots.around_events_figure("load", res)
    rate_ax, lat_ax = fig.axes[:2]
    assert len(plots.series_lines(fig)) == 1  # the rate
    assert len([ln for ln in lat_ax.get_lines() if ln.get_gid() == "series"]) == 2  # p99, max
    assert len(rate_ax.patches) == 1  # the outage, shaded
    spans = rate_ax.patches[0].get_extents()
    assert spans.width > 0
    dotted = [ln for ln in rate_ax.get_lines() if ln.get_linestyle() == ":"]
    assert [float(np.asarray(ln.get_xdata())[0]) for ln in dotted] == [1.0, 3.0]
    assert plots.around_events("load", res, tmp_path / "ev.png").is_file()


def test_latency_before_during_and_after_an_event() -> None:
    from fidelnet.measure.results import Interval

    def iv(i: int, p99: int | None, mx: int | None, dups: int = 0) -> Interval:
        return Interval(t_s=i * 0.1, packets=1, frame_bytes=64, rate_pps=1.0, rate_bps=1.0,
                        latency_max_ns=mx, latency_p99_ns=p99, latency_p50_ns=p99,
                        duplicates=dups)  # fmt: skip

    ivs = [iv(i, 50_000, 60_000, dups=1) for i in range(10)]  # 0-1 s: calm
    ivs += [iv(10, 70_000, 9_000_000, 4), iv(11, None, None), iv(12, 80_000, 2_000_000, 2)]
    ivs += [iv(i, 55_000, 65_000) for i in range(13, 30)]
    res = _result([]).model_copy(update={"intervals": ivs})
    got = outage.latency_around(res, at_s=1.0, outage_end_s=1.15)
    assert got.before_p99_ns == 50_000
    assert got.during_max_ns == 9_000_000  # the intervals from 1.0 to 1.25 s
    assert got.after_p99_ns == 55_000
    assert got.duplicates_during == 6  # those of 1.0-1.25 s, not the second before
    assert outage.latency_around(_result([]), 1.0, None).before_p99_ns is None
