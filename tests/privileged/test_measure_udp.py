"""pktgen through real namespaces: zero loss on a clean path, the loss an engine
link injects, and the zero-loss search converging to an engine link's capacity.
Tolerances are statistical (binomial bands) or physical (a packet's wire time),
never per-sample timing."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from _precision import precise
from fidelnet import Network
from fidelnet.errors import ValidationError
from fidelnet.measure import latency
from fidelnet.measure.packets import udp, zero_loss_rate
from fidelnet.measure.pktgen import find_pktgen
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged


def pair(params: LinkParams | None = None, backend: str | None = None) -> Network:
    spec = TopologySpec(auto_static_arp=True)
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    link = LinkSpec("h1", "h2", params_ab=params or LinkParams())
    if backend:
        link.backend = backend  # type: ignore[assignment]
    spec.add_link(link)
    return Network(spec)


@pytest.fixture(autouse=True)
def _needs_pktgen() -> None:
    find_pktgen()  # a missing binary is an install defect: fail, do not skip


def test_zero_loss_at_low_rate_over_a_bare_veth(tmp_path: Path) -> None:
    with pair() as net:
        r = udp(net, "h1", "h2", 2000, duration=1.0, flows=2, hdr_log=str(tmp_path / "l.hlog"))
    assert r.rate_reached
    assert r.sent == 2000 and r.lost == 0 and r.unique == 2000
    assert r.duplicates == 0 and r.malformed == 0 and r.socket_drops == 0
    assert [f.sent for f in r.flows] == [1000, 1000]
    assert r.latency.count == 2000 and 0 < r.latency.min_ns <= r.latency.p50_ns <= r.latency.max_ns
    assert r.latency.p50_ns < 5_000_000  # a veth hop: far below 5 ms
    hist = latency.decode(r.latency.hdr or "")
    assert hist.get_total_count() == 2000
    # ~10 intervals of 100 ms at ~200 packets each (the first and last are partial).
    assert sum(i.packets for i in r.intervals) == 2000
    middle = [i.rate_pps for i in r.intervals[1:-1]]
    assert middle and all(1800 <= x <= 2200 for x in middle), middle
    assert (tmp_path / "l.hlog").read_text().startswith("#")
    assert not r.flags


def test_engine_loss_is_seen_within_the_binomial_band() -> None:
    n = 10_000
    with pair(LinkParams(loss=10.0, seed=7), backend="engine") as net:
        r = udp(net, "h1", "h2", 5000, duration=n / 5000)
        engine = net.links[0].stats()["ab"]
    assert r.sent == n
    # 99.9 % band of Binomial(n, 0.1): mean 1000, sd 30.
    sd = math.sqrt(n * 0.1 * 0.9)
    assert abs(r.lost - n * 0.1) < 3.3 * sd, r.lost
    # Every loss is the engine's: its drop counter matches what pktgen missed, give or
    # take the other frames the engine carried (the pre-run ping, IPv6 neighbour
    # discovery), which can be lost too.
    others = engine["rx_packets"] - r.sent
    assert 0 <= others < 50, engine
    assert r.lost <= engine["drops"]["loss"] <= r.lost + others, (r.lost, engine)
    assert r.socket_drops == 0


def test_zero_loss_search_converges_to_engine_capacity() -> None:
    # 4 Mbit/s and 64-byte frames: the engine counts L2 frames without FCS (60 B),
    # so the capacity is 4e6 / 480 = 8333 pps.
    capacity = 4e6 / (60 * 8)

    def measure() -> Any:
        with pair(LinkParams(bw=4e6, max_queue_size=100), backend="engine") as net:
            z = zero_loss_rate(
                net, "h1", "h2", low_pps=1000, high_pps=20_000, trial_s=1.0, resolution_pps=200
            )
        decided = {t.rate_pps: t for t in z.trials}
        assert z.pdr_pps >= z.ndr_pps
        assert len(decided) <= 12
        return z

    def miss(z: Any) -> str | None:
        # Each rate was offered in full (a trial the generator fell short of, on a
        # busy machine, is run again: the last trial at each rate is the one that
        # counts). Just below capacity nothing is lost; above it the 100-packet queue
        # overflows within a 1 s trial once the excess exceeds 100 packets, i.e. at
        # capacity + 100 pps. NDR must land in that bracket (less one resolution step).
        decided = {t.rate_pps: t for t in z.trials}
        short = [t for t in decided.values() if t.generator_limited]
        if short or not capacity - 200 <= z.ndr_pps <= capacity + 100 + 200:
            return f"NDR {z.ndr_pps:.0f} pps, generator short in {short}, trials {z.trials}"
        return None

    precise(measure, miss)


def test_bad_input_is_refused_before_anything_runs() -> None:
    with pair() as net:
        for kwargs, field in (
            ({"rate_pps": 0.0}, "rate_pps"),
            ({"rate_pps": 100.0, "duration": 0.0}, "duration"),
            ({"rate_pps": 100.0, "duration": -2.0}, "duration"),
        ):
            with pytest.raises(ValidationError) as exc:
                udp(net, "h1", "h2", **kwargs)  # type: ignore[arg-type]
            assert exc.value.field == field
        with pytest.raises(ValidationError) as exc:
            udp(net, "h1", "h9", 100.0)
        assert exc.value.field == "dst" and "h2" in str(exc.value)


def test_unreachable_rate_is_reported_with_the_rate_reached() -> None:
    with pair() as net:
        r = udp(net, "h1", "h2", 50e6, duration=0.5)
    assert not r.rate_reached
    codes = {f.code: f.message for f in r.flags}
    assert "rate_not_reached" in codes
    assert f"{r.achieved_pps:.0f} pps" in codes["rate_not_reached"]
    assert 0 < r.achieved_pps < 50e6
