"""CPU limits against fake cgroup trees: v2 (cpu.max) and v1 (cfs quota, cpuset)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fidelnet.errors import UnsupportedError
from fidelnet.kernel import cgroups


def _v2_tree(root: Path, controllers: str) -> None:
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("")


def test_v2_cpu_max_from_fraction(tmp_path: Path) -> None:
    root = tmp_path / "unified"
    _v2_tree(root, "cpu cpuset memory pids")
    fs = cgroups.CgroupFS(str(root), None, None, ncpus=2)
    limit = cgroups.CpuLimit(fraction=0.25)
    [d] = fs.node_dirs("r1", "h1", limit)
    assert d == str(root / "fidelnet-r1" / "h1")
    # The kernel makes cpu.max when the controller is enabled; the fake tree mimics it.
    (root / "fidelnet-r1" / "h1").mkdir(parents=True)
    (root / "fidelnet-r1" / "cgroup.subtree_control").write_text("")
    (root / "fidelnet-r1" / "h1" / "cpu.max").write_text("max 100000\n")
    cgroups.create(fs, d, limit)
    # 0.25 of two cores = half a core = 50 ms per 100 ms period.
    assert (root / "fidelnet-r1" / "h1" / "cpu.max").read_text() == "50000 100000"


def test_v2_without_cpu_falls_back_to_v1(tmp_path: Path) -> None:
    root = tmp_path / "unified"
    _v2_tree(root, "memory pids")
    v1 = tmp_path / "cpu"
    (v1 / "fidelnet-r1" / "h1").mkdir(parents=True)
    for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us"):
        (v1 / "fidelnet-r1" / "h1" / f).write_text("-1\n")
    fs = cgroups.CgroupFS(str(root), str(v1), None, ncpus=2)
    limit = cgroups.CpuLimit(fraction=0.1)
    dirs = fs.node_dirs("r1", "h1", limit)
    assert dirs == [str(root / "fidelnet-r1" / "h1"), str(v1 / "fidelnet-r1" / "h1")]
    cgroups.create(fs, dirs[1], limit)
    assert (v1 / "fidelnet-r1" / "h1" / "cpu.cfs_quota_us").read_text() == "20000"
    assert (v1 / "fidelnet-r1" / "h1" / "cpu.cfs_period_us").read_text() == "100000"


def test_v1_cpuset_copies_parent_mems(tmp_path: Path) -> None:
    v1 = tmp_path / "cpuset"
    v1.mkdir()
    (v1 / "cpuset.cpus").write_text("0-1\n")
    (v1 / "cpuset.mems").write_text("0\n")
    node = v1 / "fidelnet-r1" / "h1"
    node.mkdir(parents=True)
    for d in (node.parent, node):
        (d / "cpuset.cpus").write_text("")
        (d / "cpuset.mems").write_text("")
    fs = cgroups.CgroupFS(None, None, str(v1), ncpus=2)
    limit = cgroups.CpuLimit(cores=(1,))
    [d] = fs.node_dirs("r1", "h1", limit)
    cgroups.create(fs, d, limit)
    assert (node / "cpuset.cpus").read_text() == "1"
    assert (node / "cpuset.mems").read_text() == "0"
    assert (node.parent / "cpuset.cpus").read_text() == "0-1"


def test_missing_controller_is_a_clear_error() -> None:
    fs = cgroups.CgroupFS(None, None, None, ncpus=2)
    with pytest.raises(UnsupportedError, match="cpu cgroup controller"):
        fs.node_dirs("r1", "h1", cgroups.CpuLimit(fraction=0.5))
