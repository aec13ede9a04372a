"""``fidelnet bench vt``'s pieces without root: the paper's topologies, the plan the
Mininet peer builds, the tables and figures from measured points, and bad options
refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from fidelnet.bench.vt import PAIRS, Point, VtOptions, chain, groups, peer_plan
from fidelnet.bench.vt_report import figures, summarize
from fidelnet.errors import ValidationError


def test_the_chain_and_the_fifty_hosts() -> None:
    t = chain(40, 10e9, 10e-6, "bridge")
    assert len([n for n in t.nodes.values() if n.kind == "switch"]) == 40
    assert len(t.links) == 41 and t.datapath == "bridge"
    assert {(link.params.bw, link.params.delay) for link in t.links} == {(10e9, 10e-6)}
    g = groups(1e9, 100e-6, "ovs")
    assert len([n for n in g.nodes.values() if n.kind == "host"]) == 50
    assert len(g.links) == 54 and g.datapath == "ovs"
    # The five pairs hang off five different switches: no shared link.
    switch_of = {link.a: link.b for link in g.links if link.a.startswith("h")}
    assert len({switch_of[a] for a, _b in PAIRS}) == 5
    assert all(switch_of[a] == switch_of[b] for a, b in PAIRS)


def test_the_peer_builds_the_same_hosts_bridges_and_rates() -> None:
    plan = peer_plan(chain(2, 4e9, 50e-6, "bridge"))
    assert plan["nodes"] == ["h1", "h2"] and plan["switches"] == ["s1", "s2"]
    first = plan["links"][0]
    assert first[:2] == ["h1", "s1"] and first[4] == "10.0.0.1/24" and first[5] is None
    assert first[6] == {"bw": 4000.0}


def _points() -> list[Point]:
    out = []
    for stack, got in (("fidelnet-vt", 0.95), ("fidelnet", 0.5), ("mininet", 0.7)):
        for r in (1.0, 10.0):
            out.append(
                Point("a", r, stack, {"h1>h2": got * r * 1e9}, {"h1>h2": [1e9] * 3}, 4.0,
                      (1.0, 8.0) if stack == "fidelnet-vt" else (1.0, 1.0))
            )  # fmt: skip
        flows = {f"{a}>{b}": (0.99e9 if stack != "mininet" else 0.3e9 * (i + 1))
                 for i, (a, b) in enumerate(PAIRS)}  # fmt: skip
        out.append(Point("c", 2, stack, flows, {f: [v] * 4 for f, v in flows.items()}, 9.0))
    return out


def test_tables_and_figures_from_points(tmp_path: Path) -> None:
    opts = VtOptions(out=tmp_path, experiments=("a", "c"), switches=40)
    summary = summarize(opts, _points(), {"a": 60.0, "c": 20.0}, netem=False)
    a, c = summary["tables"]
    assert a["header"][:4] == [
        "link rate (Gbit/s)", "fidelnet, TDF 1-8 (auto) Gbit/s", "fidelnet, TDF 1 Gbit/s",
        "Mininet 2.3.0 Gbit/s",
    ]  # fmt: skip
    assert a["rows"][1][:4] == [
        "10",
        "9.50 (95 %) unjudged",
        "5.00 (50 %) unjudged",
        "7.00 (70 %) unjudged",
    ]
    jain_row = next(r for r in c["rows"] if r[0] == "Jain (phase 2)")
    assert jain_row[1] == "1.0000" and float(jain_row[3]) < 0.9
    assert any("no sch_netem" in n for n in summary["notes"])
    made = figures(tmp_path, _points())
    assert [p.name for _t, p in made] == ["vt-a.png", "vt-c.png"]
    assert all(p.stat().st_size > 1000 for _t, p in made)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"experiments": ("d",)}, "--experiments"),
        ({"switch": "p4"}, "--switch"),
        ({"switches": 0}, "--switches"),
        ({"rates_gbps": (0.0,)}, "--rates"),
        ({"duration": 0}, "--duration"),
        ({"tdf": 0.0}, "--tdf"),
    ],
)
def test_bad_options_are_refused_by_name(change: dict[str, object], field: str) -> None:
    opts = VtOptions(out=Path("/nonexistent"))
    for k, v in change.items():
        setattr(opts, k, v)
    with pytest.raises(ValidationError) as e:
        opts.check()
    assert e.value.field == field
