"""The rules of fidelnet.measure.tcp on recorded iperf3 output: warm-up, the sender's
discrepancy, the bottleneck check and its accounting, the window rule, Jain, the
bidirectional note, and argument checks that come before anything runs.

The recordings are real runs on this machine (tests/unit/data/iperf3/record.py):
``link10m_cubic`` and ``link10m_window`` went over a 10 Mbit/s engine link with 5 ms
of delay (RTT 10 ms); the paths here describe that link by hand.
"""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from fidelnet import Network
from fidelnet.errors import ValidationError
from fidelnet.measure import iperf3
from fidelnet.measure.path import Hop
from fidelnet.measure.path import Path as NetPath
from fidelnet.measure.results import TcpResult
from fidelnet.measure.tcp import (
    BIDIRECTIONAL_NOTE,
    FRAME_OVERHEAD_BYTES,
    FlowPlan,
    analyse,
    default_warmup,
    measured,
    suggest_for,
    suggest_window,
    tcp,
    wire_rate,
)
from fidelnet.topology import LinkParams

DATA = Path(__file__).parent / "data" / "iperf3"
MBIT = 1e6


def reports(name: str) -> tuple[iperf3.Report, iperf3.Report]:
    return (
        iperf3.parse((DATA / f"{name}_client.json").read_text(), "client"),
        iperf3.parse((DATA / f"{name}_server.json").read_text(), "server"),
    )


def hop(bw: float | None = 10e6, delay: float = 0.005, overhead: int | None = None) -> Hop:
    return Hop(
        link_index=2,
        link="s2-s1",
        src="s1",
        dst="s2",
        direction="ba",
        backend="engine",
        params=LinkParams(bw=bw, delay=delay, overhead=overhead),
    )


def plan(link: Hop, src: str = "h1", dst: str = "h2", port: int = 5201) -> FlowPlan:
    there = NetPath(src, dst, "10.0.0.2", (link,))
    return FlowPlan(src, dst, port, there, rtt_s=2 * link.delay_s)


def run(name: str, link: Hop, *, window_applied: bool = False) -> TcpResult:
    return analyse(
        [plan(link)],
        [reports(name)],
        warmup=1.0,
        interval=0.1,
        duration=6,
        window_applied=window_applied,
    )


# -- warm-up -------------------------------------------------------------------------------------


def test_default_warmup_is_one_second_or_four_rtts() -> None:
    assert default_warmup(0.0) == 1.0
    assert default_warmup(0.010) == 1.0
    assert default_warmup(0.25) == 1.0
    assert default_warmup(0.5) == pytest.approx(2.0)


def test_warmup_intervals_are_shown_but_not_counted() -> None:
    client, server = reports("link10m_cubic")
    result = analyse([plan(hop())], [(client, server)], warmup=1.0, interval=0.1, duration=6)
    flow = result.flows[0]
    warm = [iv for iv in flow.intervals if iv.warmup]
    assert len(warm) == 10 and all(iv.t_s < 1.0 for iv in warm)
    kept = [iv for iv in server.intervals if iv.start_s >= 0.95]
    expected = 8 * sum(iv.bytes for iv in kept) / sum(iv.seconds for iv in kept)
    assert flow.goodput_bps == pytest.approx(expected)
    assert flow.measured_s == pytest.approx(sum(iv.seconds for iv in kept))
    # Slow start is in the first intervals: the whole-run figure is lower.
    assert flow.receiver_bps < flow.goodput_bps
    assert server.intervals[0].bps < 0.9 * flow.goodput_bps


def test_an_interval_starting_a_little_early_still_counts() -> None:
    intervals = [iperf3.Interval(0.999, 1.1, 1), iperf3.Interval(0.899, 0.999, 1)]
    assert measured(intervals, warm=1.0, interval=0.1) == [0]


def test_intervals_are_a_tenth_of_a_second() -> None:
    result = run("link10m_window", hop())
    starts = [iv.t_s for iv in result.flows[0].intervals]
    steps = [b - a for a, b in pairwise(starts)]
    assert all(abs(step - 0.1) < 0.01 for step in steps), steps


# -- sender against receiver --------------------------------------------------------------------


def test_sender_running_ahead_is_flagged_with_both_numbers() -> None:
    # CUBIC fills the link's 1000-packet queue: the sender counts what it wrote into
    # its socket, 10.2 Mbit/s, while 9.56 Mbit/s arrived.
    result = run("link10m_cubic", hop())
    flow = result.flows[0]
    assert flow.sender_bps == pytest.approx(10.217 * MBIT, rel=1e-3)
    assert flow.goodput_bps == pytest.approx(9.563 * MBIT, rel=1e-3)
    flags = [f for f in result.flags if f.code == "sender_receiver_discrepancy"]
    assert len(flags) == 1
    message = flags[0].message
    assert "h1->h2:5201" in message
    assert "10.217 Mbit/s" in message and "9.563 Mbit/s" in message
    assert "6.8% apart" in message


def test_sender_and_receiver_agreeing_is_not_flagged() -> None:
    result = run("link10m_window", hop())
    flow = result.flows[0]
    assert abs(flow.sender_bps - flow.goodput_bps) < 0.01 * flow.goodput_bps
    assert result.flags == []


# -- the bottleneck ------------------------------------------------------------------------------


def test_wire_rate_accounting() -> None:
    assert FRAME_OVERHEAD_BYTES == 66
    assert wire_rate(1448.0, 1448) == pytest.approx(1514.0)
    # The engine link carried 10 Mbit/s of frames: the goodput plus 66 bytes per
    # segment comes to that within 0.2%, below the 1% tolerance.
    flow = run("link10m_window", hop()).flows[0]
    assert flow.wire_bps is not None
    assert flow.wire_bps == pytest.approx(10e6, rel=2e-3)
    assert flow.wire_bps <= 10e6 * 1.01


def test_within_capacity_is_not_flagged() -> None:
    result = run("link10m_window", hop(10e6))
    assert [f.code for f in result.flags] == []
    assert result.exceeding_intervals == 0
    assert result.bottleneck_bps == 10e6


def test_more_than_the_capacity_over_the_span_is_flagged() -> None:
    # The same run judged against a 9.8 Mbit/s link: 2% over the span (limit 1%), but
    # no interval more than 10% over.
    result = run("link10m_window", hop(9.8e6))
    flags = [f for f in result.flags if f.code == "exceeds_bottleneck"]
    assert len(flags) == 1
    assert "over the measured span" in flags[0].message
    assert "s1 to s2, 9.800 Mbit/s" in flags[0].message
    assert result.exceeding_intervals == 0


def test_intervals_above_ten_percent_are_counted() -> None:
    result = run("link10m_window", hop(8.5e6))
    flags = [f for f in result.flags if f.code == "exceeds_bottleneck"]
    assert len(flags) == 2
    measured_full = [
        iv
        for iv in result.flows[0].intervals
        if not iv.warmup and (iv.end_s or 0.0) - iv.t_s >= 0.05
    ]
    assert result.exceeding_intervals == len(measured_full)
    assert f"{len(measured_full)} report interval(s)" in flags[1].message


def test_per_packet_overhead_of_the_link_is_counted() -> None:
    # With 24 bytes counted per packet (preamble, FCS, gap), 1514-byte frames get
    # 10 Mbit/s x 1514 / 1538 of the link: the recorded run would be 1.5% over it.
    assert hop(overhead=24).frame_capacity_bps(1514) == pytest.approx(10e6 * 1514 / 1538)
    result = run("link10m_window", hop(10e6, overhead=24))
    assert [f.code for f in result.flags] == ["exceeds_bottleneck"]


def _server_with(change: dict[int, int]) -> iperf3.Report:
    """The recorded receiver with bytes added to (or taken from) some intervals."""
    _, server = reports("link10m_window")
    rows = list(server.intervals)
    for i, delta in change.items():
        rows[i] = replace(rows[i], bytes=rows[i].bytes + delta)
    return replace(server, intervals=tuple(rows))


def test_a_late_read_is_not_counted_against_the_link() -> None:
    # 40% of interval 30's bytes read only in interval 31: 31 is 40% over the link,
    # explained by 30's spare time.
    client, server = reports("link10m_window")
    moved = int(0.4 * server.intervals[30].bytes)
    late = _server_with({30: -moved, 31: moved})
    result = analyse([plan(hop())], [(client, late)], warmup=1.0, interval=0.1, duration=6)
    assert result.exceeding_intervals == 0
    more = _server_with({31: moved})  # 40% more with nothing missing before it
    result = analyse([plan(hop())], [(client, more)], warmup=1.0, interval=0.1, duration=6)
    assert result.exceeding_intervals == 1


def test_flows_sharing_a_link_are_checked_together() -> None:
    link = hop()
    both = [plan(link, "h1", "h3", 5201), plan(link, "h2", "h4", 5202)]
    recorded = reports("link10m_window")
    result = analyse(both, [recorded, recorded], warmup=1.0, interval=0.1, duration=6)
    flags = [f for f in result.flags if f.code == "exceeds_bottleneck"]
    assert flags and "h1->h3:5201, h2->h4:5202" in flags[0].message
    assert result.jain == 1.0
    assert result.total_goodput_bps == pytest.approx(2 * result.flows[0].goodput_bps)


def test_an_unshaped_path_has_no_bottleneck_to_check() -> None:
    result = run("link10m_window", hop(None))
    assert result.bottleneck_bps is None
    assert result.suggested_window_bytes is None
    assert result.flags == []


def test_the_smallest_rate_on_the_path_is_the_bottleneck() -> None:
    fast, slow = hop(100e6, 0.001), replace(hop(10e6, 0.004), link_index=3, link="s3-s2")
    unshaped = replace(hop(None, 0.0), link_index=4, link="h1-s1")
    path = NetPath("h1", "h2", "10.0.0.2", (unshaped, fast, slow))
    assert path.bottleneck == slow
    assert path.capacity_bps == 10e6
    assert path.delay_s == pytest.approx(0.005)
    assert path.frame_capacity_bps(1514) == 10e6


# -- the window ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flows", "table_mb", "rule_bytes"),
    [
        (1, 15, 15_000_000),
        (2, 7.5, 7_500_000),
        (3, 5, 5_000_000),
        (4, 4, 3_750_000),
        (5, 4, 3_000_000),
    ],
)
def test_window_rule_against_hardin_table_ii(flows: int, table_mb: float, rule_bytes: int) -> None:
    # Hardin et al. Table II, 1 Gbit/s between data centres about 120 ms apart: the
    # bandwidth-delay product (15 MB) shared by the flows. Their table rounds 3.75 MB to
    # 4 MB and keeps 4 MB for 5 flows, which their own equation 1 puts at 3 MB; the
    # rule follows the equation.
    got = suggest_window(1e9, 0.120, flows)
    assert got == rule_bytes
    assert abs(got / 1e6 - table_mb) <= 1.0


def test_window_never_below_ten_segments() -> None:
    assert suggest_window(10e6, 0.010) == 14480  # BDP 12500 bytes < 10 x 1448
    assert suggest_window(10e6, 0.0) == 14480
    assert suggest_window(10e6, 0.010, mss=8948) == 89480
    with pytest.raises(ValidationError):
        suggest_window(10e6, 0.01, 0)


def test_window_counts_the_flows_on_the_same_bottleneck_direction() -> None:
    link = hop(1e9, 0.060)
    back = replace(link, direction="ab", src="s2", dst="s1")
    same = [plan(link, port=5201), plan(link, port=5202)]
    assert [suggest_for(p, same) for p in same] == [7_500_000, 7_500_000]
    opposite = [plan(link, port=5201), plan(back, "h2", "h1", 5202)]
    assert [suggest_for(p, opposite) for p in opposite] == [15_000_000, 15_000_000]


def test_suggestion_and_applied_window_in_the_result() -> None:
    result = run("link10m_window", hop(), window_applied=True)
    assert result.suggested_window_bytes == 14480
    assert result.window_applied is True
    flow = result.flows[0]
    assert flow.window_bytes == 14480 and flow.sndbuf_bytes == 28960
    assert flow.suggested_window_bytes == 14480


# -- several flows, bidirectional ---------------------------------------------------------------


def test_jain_of_unequal_flows_and_the_bidirectional_note() -> None:
    there, back = hop(), replace(hop(), direction="ab", src="s2", dst="s1")
    plans = [plan(there, "h1", "h2", 5201), plan(back, "h2", "h1", 5202)]
    result = analyse(
        plans,
        [reports("link10m_window"), reports("link10m_cubic")],
        warmup=1.0,
        interval=0.1,
        duration=6,
        bidirectional=True,
    )
    a, b = (f.goodput_bps for f in result.flows)
    assert result.jain == pytest.approx((a + b) ** 2 / (2 * (a * a + b * b)))
    assert result.bidirectional and result.note == BIDIRECTIONAL_NOTE
    assert "80%" in BIDIRECTIONAL_NOTE and "--bidir" in BIDIRECTIONAL_NOTE


def test_one_flow_has_no_jain_and_results_save_as_json() -> None:
    result = run("link10m_window", hop())
    assert result.jain is None
    doc = json.loads(result.model_dump_json())
    assert doc["kind"] == "tcp" and doc["flows"][0]["intervals"][0]["warmup"] is True


# -- arguments, checked before anything runs ------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"duration": 1}, "duration"),  # no second left after the 1 s warm-up
        ({"duration": 3, "warmup": 2.5}, "duration"),
        ({"duration": 2.5}, "duration"),
        ({"duration": 10, "warmup": -1}, "warmup"),
        ({"interval": 0.01}, "interval"),
        ({"window": 0}, "window"),
        ({"window": "64 furlongs"}, "window"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        tcp(Network(), [("h1", "h2")], **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_duration_error_names_the_warmup() -> None:
    with pytest.raises(ValidationError, match=r"duration: must exceed the warm-up \(2.5 s\)"):
        tcp(Network(), [("h1", "h2")], duration=3, warmup=2.5)


@pytest.mark.parametrize(
    ("pairs", "field"),
    [([], "pairs"), ([("h1",)], "pairs[0]"), ([("h1", "h9")], "pairs[0]")],
)
def test_bad_pairs(pairs: list[tuple[str, ...]], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        tcp(Network(), pairs)  # type: ignore[arg-type]
    assert info.value.field == field
