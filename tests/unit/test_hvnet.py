"""`fidelnet bench hvnet` without root: Mininet's plan of a topology with flows,
the flows' send rates, Table I from measured flows, the receiver's jitter and worst
events read into results, and figures on the report page."""

from __future__ import annotations

from pathlib import Path

import pytest

from fidelnet.bench.hvnet import HvnetOptions, peer_plan, topology
from fidelnet.bench.hvnet_report import Measured, table_one
from fidelnet.errors import ValidationError
from fidelnet.measure.flowset import FlowRun, frame_size
from fidelnet.measure.pktgen import TrafficSpec, combine
from fidelnet.measure.results import UdpResult
from fidelnet.topology.spec import FlowSpec


def test_the_topologies_are_seeded_and_checked(tmp_path: Path) -> None:
    opts = HvnetOptions(out=tmp_path, nodes=8, flows=6)
    a, b = topology(opts, 0), topology(opts, 0)
    assert [(x.a, x.b) for x in a.links] == [(x.a, x.b) for x in b.links]
    assert a.flows == b.flows and len(a.flows) == 6
    assert [(x.a, x.b) for x in topology(opts, 1).links] != [(x.a, x.b) for x in a.links]
    with pytest.raises(ValidationError, match="link"):
        HvnetOptions(out=tmp_path, link="wifi").check()
    with pytest.raises(ValidationError, match="pairs"):
        HvnetOptions(out=tmp_path, link="hw").check()
    with pytest.raises(ValidationError, match=r"flows\.hops"):
        HvnetOptions(out=tmp_path, nodes=3, degree=1.0, hops=(5, 5)).check()


def test_mininet_gets_the_same_links_routes_and_flow_rules(tmp_path: Path) -> None:
    spec = topology(HvnetOptions(out=tmp_path, nodes=6, flows=3), 0)
    plan = peer_plan(spec)
    assert plan["nodes"] == list(spec.nodes) and plan["routers"] == list(spec.nodes)
    first = spec.links[0]
    assert plan["links"][0][:2] == [first.a, first.b]
    assert plan["links"][0][4:] == [first.a_ip, first.b_ip]
    every = [argv for cmds in plan["commands"].values() for argv in cmds]
    assert all(isinstance(x, str) for argv in every for x in argv)
    rules = [argv for argv in every if argv[:3] == ["ip", "rule", "add"]]
    assert sorted(int(r[r.index("dport") + 1]) for r in rules) == sorted(
        p for f in spec.flows for p in [f.port] * f.hops
    )
    assert any(argv[:3] == ["ip", "route", "replace"] and "table" in argv for argv in every)


def test_a_flows_rate_counts_its_ip_packets() -> None:
    flow = FlowSpec("f1", ("h1", "h2", "h3"), 10_000, "udp", 2.904e6, 363)
    spec = FlowRun(flow, None, None, "10.0.0.2").spec(5.0, 1)  # type: ignore[arg-type]
    assert spec.size == frame_size(363) == 381
    assert spec.rate_pps == pytest.approx(1000.0)


def _result(max_ns: int, jitter_max_ns: int, worst: list[tuple[int, int, int]]) -> UdpResult:
    lat = {"count": 10, "min_ns": 1000, "mean_ns": 2000.0, "p50_ns": 2000, "p90_ns": 3000,
           "p99_ns": 4000, "p999_ns": 5000, "p9999_ns": max_ns, "max_ns": max_ns}  # fmt: skip
    jit = dict(lat, max_ns=jitter_max_ns, p9999_ns=jitter_max_ns)
    sent = {"role": "send", "sent": 10, "achieved_pps": 1000.0, "rate_reached": True,
            "flows": [{"id": 0, "sent": 10}]}  # fmt: skip
    got = {"role": "recv", "received": 10, "unique": 10, "latency": lat, "jitter": jit,
           "worst": [list(w) for w in worst],
           "flows": [{"id": 0, "received": 10, "unique": 10, "latency": lat, "jitter": jit}],
           "first_rx_ns": 0, "last_rx_ns": 9_000_000, "intervals": []}  # fmt: skip
    return combine("h1", "h3", "10.0.0.3", TrafficSpec(1000.0), sent, got)


def test_the_receivers_jitter_and_worst_events_reach_the_result() -> None:
    r = _result(9000, 700, [(5, 9000, 0), (7, 8000, 0)])
    assert r.worst == [(5, 9000, 0), (7, 8000, 0)]
    assert r.jitter is not None and r.jitter.max_ns == 700
    assert r.flows[0].jitter is not None and r.flows[0].jitter.max_ns == 700


def test_table_one_puts_each_hop_counts_worst_case_side_by_side(tmp_path: Path) -> None:
    spec = topology(HvnetOptions(out=tmp_path, nodes=6, flows=2, hops=(2, 2)), 0)
    names = [f.name for f in spec.flows]
    fast = Measured(1, "fidelnet", spec, {n: _result(10_000, 1_000, []) for n in names})
    slow = Measured(1, "mininet", spec, {n: _result(40_000, 8_000, []) for n in names})
    title, header, rows = table_one([fast, slow])
    assert title.startswith("Table I")
    assert header[:5] == ["hops", "flows", "fidelnet delay max µs", "mininet delay max µs",
                          "ratio fidelnet/mininet"]  # fmt: skip
    (row,) = rows
    assert row[:5] == ["2", "2", "10.0", "40.0", "0.25"]
    jitter_max = header.index("fidelnet jitter max µs")
    assert row[jitter_max : jitter_max + 3] == ["1.0", "8.0", "0.12"]


def test_the_report_shows_a_benchmarks_own_figures(tmp_path: Path) -> None:
    from fidelnet.report.overview import extra_figures

    img = tmp_path / "plots" / "x.png"
    img.parent.mkdir()
    img.write_bytes(b"\x89PNG")
    html = extra_figures([("Jitter <all>", img)], tmp_path)
    assert 'src="plots/x.png"' in html and "Jitter &lt;all&gt;" in html
    assert extra_figures([], tmp_path) == ""
