"""SR-IOV provisioning against a fake device tree (this machine has no SR-IOV NIC):
the plan is refused field by field before anything is written; VFs are made,
configured (VLAN base + i, spoof checking off, trusted) and paired; every PF is
recorded before it is touched, so a failure half-way is undone by the records."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fidelnet.errors import KernelError, ValidationError
from fidelnet.kernel import sriov


class FakeHost(sriov.Host):
    """A sysfs tree under ``root`` whose ``sriov_numvfs`` makes (or removes) VF
    netdevs as the kernel would, and a netlink that records VF settings."""

    def __init__(self, root: Path, pfs: dict[str, int | None], fail_on: str | None = None) -> None:
        super().__init__(str(root))
        self.vf_settings: dict[tuple[str, int], int] = {}
        self.fail_on = fail_on
        for pf, total in pfs.items():
            dev = root / "class" / "net" / pf / "device"
            dev.mkdir(parents=True)
            if total is not None:
                (dev / "sriov_totalvfs").write_text(f"{total}\n")
                (dev / "sriov_numvfs").write_text("0\n")

    def write(self, pf: str, name: str, value: str) -> None:
        if pf == self.fail_on and value != "0":
            raise KernelError(f"{pf}: writing {value} to device/{name}: device busy")
        super().write(pf, name, value)
        dev = Path(self._dev(pf))
        for old in dev.glob("virtfn*"):
            for f in sorted(old.rglob("*"), reverse=True):
                f.rmdir()
            old.rmdir()
        for i in range(int(value)):
            (dev / f"virtfn{i}" / "net" / f"{pf}v{i}").mkdir(parents=True)

    def set_vf(self, pf: str, vf: int, vlan: int) -> None:
        self.vf_settings[pf, vf] = vlan


def _records() -> tuple[list[dict[str, Any]], Any]:
    got: list[dict[str, Any]] = []

    def record(kind: str, **fields: Any) -> None:
        got.append({"kind": kind, **fields})

    return got, record


def test_vf_pairs_are_made_on_their_vlans_and_given_back(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, {"enp1s0f0": 8, "enp2s0f0": 8})
    recs, record = _records()
    plan = sriov.SriovPlan(("enp1s0f0", "enp2s0f0"), 3, 200)
    pairs = sriov.provision(plan, host, record, timeout=1.0)
    assert pairs == [("enp1s0f0v0", "enp2s0f0v0"), ("enp1s0f0v1", "enp2s0f0v1"),
                     ("enp1s0f0v2", "enp2s0f0v2")]  # fmt: skip
    assert host.vf_settings == {(pf, i): 200 + i for pf in plan.pfs for i in range(3)}
    assert [r["pf"] for r in recs] == ["enp1s0f0", "enp2s0f0"]
    assert all(r["kind"] == "sriov" and r["numvfs_before"] == 0 for r in recs)
    assert sriov.pairs_text(pairs).startswith("enp1s0f0v0:enp2s0f0v0,")
    for r in reversed(recs):
        sriov.release(r)
    for pf in plan.pfs:  # the kernel removes the VFs (and their settings) with the count
        assert host.read(pf, "sriov_numvfs") == "0"


def test_a_failure_half_way_is_undone_by_what_was_recorded(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, {"p0": 4, "p1": 4}, fail_on="p1")
    recs, record = _records()
    with pytest.raises(KernelError, match="device busy"):
        sriov.provision(sriov.SriovPlan(("p0", "p1"), 2, 10), host, record, timeout=1.0)
    # p0 was made and p1 was recorded before its write failed: both are in the records.
    assert [r["pf"] for r in recs] == ["p0", "p1"]
    assert host.read("p0", "sriov_numvfs") == "2"
    for r in reversed(recs):  # what teardown or `fidelnet clean` does
        sriov.release(r)
    assert host.read("p0", "sriov_numvfs") == "0"
    assert host.read("p1", "sriov_numvfs") == "0"


@pytest.mark.parametrize(
    ("pfs", "vfs", "vlan", "field", "words"),
    [
        (("p0", "p0"), 2, 10, "sriov.pfs[1]", "the same PF twice"),
        (("p0", "gone"), 2, 10, "sriov.pfs[1]", "no such interface"),
        (("p0", "plain"), 2, 10, "sriov.pfs[1]", "has no SR-IOV"),
        (("p0", "p1"), 9, 10, "sriov.vfs", "supports 8 VFs, 9 asked"),
        (("p0", "p1"), 2, 0, "sriov.vlan_base", "1..4094"),
        (("p0", "p1"), 4, 4093, "sriov.vlan_base", "past 4094"),
        (("p0", "used"), 2, 10, "sriov.pfs[1]", "already has 4 VFs"),
    ],
)
def test_bad_plans_are_refused_before_anything_is_written(
    tmp_path: Path, pfs: tuple[str, str], vfs: int, vlan: int, field: str, words: str
) -> None:
    host = FakeHost(tmp_path, {"p0": 8, "p1": 8, "plain": None, "used": 8})
    (tmp_path / "class/net/used/device/sriov_numvfs").write_text("4\n")
    recs, record = _records()
    with pytest.raises(ValidationError) as exc:
        sriov.provision(sriov.SriovPlan(pfs, vfs, vlan), host, record)
    assert exc.value.field == field and words in str(exc.value), str(exc.value)
    assert recs == []
    assert host.read("p0", "sriov_numvfs") == "0"


def test_a_pf_that_is_gone_has_nothing_left_to_release(tmp_path: Path) -> None:
    sriov.release({"kind": "sriov", "pf": "unplugged", "root": str(tmp_path), "numvfs_before": 0})
    assert not os.path.exists(tmp_path / "class")


def test_sriov_in_a_topology_counts_toward_the_pool_and_is_checked() -> None:
    from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
    from fidelnet.topology.spec import SriovSpec
    from fidelnet.topology.validate import problems

    t = TopologySpec(link_backend="hw")
    for n in ("h1", "h2", "h3"):
        t.add_node(NodeSpec(n))
    t.add_link(LinkSpec("h1", "h2"))
    t.add_link(LinkSpec("h2", "h3"))
    t.sriov = [SriovSpec(("enp1s0f0", "enp2s0f0"), 2, 100)]
    assert [str(p) for p in problems(t)] == []
    t.sriov = [SriovSpec(("enp1s0f0", "enp1s0f0"), 1, 4094)]
    got = [str(p) for p in problems(t)]
    assert any(g.startswith("sriov[0].pfs[1]: the same PF twice") for g in got)
    assert any(g.startswith("links[1].backend: 2 link(s) ask") for g in got)
