"""The capacity check without a kernel: demands from a scenario, findings against a
hand-made profile, and the CLI refusing with --strict before anything is built."""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path

import pytest

from fidelnet._version import __version__
from fidelnet.fidelity import profile as prof
from fidelnet.fidelity.capacity import Demand, assess
from fidelnet.fidelity.machine import machine
from fidelnet.fidelity.profile import Forwarding, Profile
from fidelnet.links.choice import Choice
from fidelnet.scenario import loads
from fidelnet.scenario.capacity import demands, path_links

SCENARIO = """
name: chain
topology:
  builder: {line: 6}
traffic:
  - {name: fast, type: pktgen, src: h1, dst: h6, rate: 400kpps, duration: 1s}
  - {name: slow, type: pktgen, src: h1, dst: h2, rate: 5kpps, duration: 1s}
  - {name: search, type: zero_loss, src: h1, dst: h6}
"""


def _profile(tc_pps: float = 36_000, engine_pps: float = 20_000) -> Profile:
    m = machine()

    def fwd(backend: str, links: int, pps: float) -> Forwarding:
        return Forwarding(
            backend=backend, layout="chain", links=links, frame_bytes=64,
            offered_pps=[pps], delivered_pps=[pps], breaking_pps=pps,
        )  # fmt: skip

    return Profile(
        key=prof.machine_key(m),
        fidelnet=__version__,
        machine=m,
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(),
        seconds=1.0,
        command=["fidelnet", "calibrate"],
        steal_at_rest_pct=0.0,
        forwarding=[
            fwd("tc", 1, 150_000),
            fwd("tc", 5, tc_pps),
            fwd("engine", 1, engine_pps * 5),
        ],  # fmt: skip
    )


def test_path_links_shortest_with_entry_ends() -> None:
    sc = loads(SCENARIO)
    spec = sc.topology_spec()
    path = path_links(spec, "h1", "h6")
    assert [src for _i, src in path] == ["h1", "h2", "h3", "h4", "h5"]
    assert path_links(spec, "h1", "nowhere") == []


def test_demands_count_hops_per_backend_and_skip_searches() -> None:
    sc = loads(SCENARIO)
    spec = sc.topology_spec()
    choices = [Choice("veth", "nothing asked")] * 4 + [Choice("engine", "asked for")]
    wants, cpu = demands(sc, spec, choices)
    assert [(d.name, d.pps, dict(d.hops)) for d in wants] == [
        ("fast", 400_000, {"tc": 4, "engine": 1}),
        ("slow", 5_000, {"tc": 1}),
    ]
    assert cpu == 0


def test_over_capacity_is_found_with_numbers_and_what_helps() -> None:
    p = _profile()
    found = assess([Demand("fast", 400_000, {"tc": 5}, "pktgen 400kpps")], p)
    assert len(found) == 1
    f = found[0]
    # 1 / pps = fixed + per_link x links through (1, 150 k) and (5, 36 k): 5 links
    # carry 36 k, so 400 k is 11.1x that.
    assert f.subject == "fast" and round(f.ratio, 2) == round(400_000 / 36_000, 2)
    assert "crosses 5 bare veth or tc links" in f.message
    assert "1 link 150 kpps, 5 links 36 kpps" in f.message
    assert "forwards about 36 kpps on such a path without loss, and 400 kpps is 11.1x" in (
        f.message
    )
    assert "time dilation factor of at least 12" in f.message
    # Backends add up: 3 tc links and 1 engine link cost 27 µs a packet: 37 kpps.
    assert assess([Demand("mixed", 30_000, {"tc": 3, "engine": 1})], p) == []
    assert assess([Demand("mixed", 60_000, {"tc": 3, "engine": 1})], p)[0].ratio > 1


def test_no_profile_judges_only_cpu() -> None:
    assert assess([Demand("fast", 1e9, {"tc": 5})], None) == []
    (cpu,) = assess([], None, cpu_asked=1.5)
    assert cpu.subject == "cpu" and "150 % of the machine" in cpu.message


def test_strict_refuses_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fidelnet.cli.main import main
    from fidelnet.measure import verdicts

    monkeypatch.setenv("FIDELNET_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(verdicts, "_profile_cache", [])
    prof.save(_profile())
    f = tmp_path / "chain.yaml"
    f.write_text(SCENARIO)
    monkeypatch.setattr(
        sys, "argv", ["fidelnet", "test", str(f), "--strict", "--out", str(tmp_path / "out")]
    )
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error: chain: traffic fast (pktgen 400kpps, h1 to h6) crosses 5 bare" in err
    assert "--strict: nothing was built" in err
    assert "slow" not in err  # 5 kpps over one link fits
    assert not (tmp_path / "out").exists()


def test_cost_model_fits_fixed_and_per_link_parts() -> None:
    from fidelnet.fidelity.capacity import cost_model

    p = _profile()
    fixed, per_link = cost_model(p, "tc") or (0.0, 0.0)
    assert abs(fixed + per_link - 1 / 150_000) < 1e-9
    assert abs(fixed + 5 * per_link - 1 / 36_000) < 1e-9
    assert cost_model(p, "engine") == (0.0, 1 / 100_000)
    assert cost_model(p, "vm") is None


def test_a_bit_rate_calibration_could_not_carry_is_found() -> None:
    from fidelnet.fidelity.capacity import rate_limit
    from fidelnet.fidelity.profile import RateAccuracy

    def acc(bps: float, mean: float) -> RateAccuracy:
        return RateAccuracy(
            backend="engine", rate_bps=bps, windows=100, mean_ratio=mean, p1_ratio=mean,
            p99_ratio=mean,
        )  # fmt: skip

    p = _profile().model_copy(
        update={"rate_accuracy": [acc(10e6, 1.0), acc(100e6, 1.0), acc(1e9, 0.184)]}
    )
    assert rate_limit(p, "engine") == (100e6, 1e9)
    assert rate_limit(p, "tc") is None  # never failed: no known limit
    fast = Demand("big", 90_000, {"engine": 1}, "pktgen 90kpps", {"engine": 1.09e9})
    (f,) = [x for x in assess([fast], p) if "Gbit/s" in x.message]
    assert "puts 1.09 Gbit/s on engine links" in f.message
    assert "carry 100 Mbit/s faithfully but only 18 % of 1 Gbit/s" in f.message
    assert f.message.endswith("so expect an untrusted verdict")
    middle = Demand("mid", 1000, {"engine": 1}, "x", {"engine": 400e6})
    (g,) = assess([middle], p)
    assert "not known, watch the verdict" in g.message
    assert assess([Demand("ok", 1000, {"engine": 1}, "x", {"engine": 50e6})], p) == []
