"""The fast path's input checks, before any kernel object exists."""

from __future__ import annotations

import pytest

from fidelnet.errors import ValidationError
from fidelnet.fastpath import preflight, wanted
from fidelnet.kernel import xdp
from fidelnet.topology import NodeSpec, TopologySpec
from fidelnet.topology.validate import problems


def spec(**node: object) -> TopologySpec:
    s = TopologySpec()
    s.add_node(NodeSpec("r1", kind="router"))
    s.add_node(NodeSpec("r2", kind="router", fastpath="xdp"))
    s.add_node(NodeSpec("h1", **node))  # type: ignore[arg-type]
    return s


def test_only_routers_and_only_xdp() -> None:
    errors = [str(e) for e in problems(spec(fastpath="xdp"))]
    assert any(
        e.startswith("nodes.h1.fastpath: only routers have a fast path, and h1 is a host")
        for e in errors
    ), errors
    bad = spec()
    bad.nodes["r2"].fastpath = "dpdk"  # type: ignore[assignment]
    bad.fastpath = "ebpf"  # type: ignore[assignment]
    errors = [str(e) for e in problems(bad)]
    assert "fastpath: unknown fast path (got 'ebpf'; valid: xdp)" in errors
    assert "nodes.r2.fastpath: unknown fast path (got 'dpdk'; valid: xdp)" in errors
    with pytest.raises(ValidationError):
        raise problems(bad)[0]


def test_which_routers_want_it() -> None:
    s = spec()
    assert wanted(s) == ["r2"]
    s.fastpath = "xdp"
    assert wanted(s) == ["r1", "r2"]  # hosts never


def test_missing_program_or_tool_is_refused_before_building(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setattr(xdp, "find_object", lambda: (_ for _ in ()).throw(
        xdp.FastPathError("fastpath: the XDP program fastpath.bpf.o was not found")
    ))  # fmt: skip
    with pytest.raises(xdp.FastPathError, match="was not found"):
        preflight(spec())
    preflight(TopologySpec())  # nothing asked: nothing checked
    monkeypatch.setattr(xdp, "find_object", lambda: "/x/fastpath.bpf.o")
    monkeypatch.setattr(xdp.shutil, "which", lambda _name: None)
    with pytest.raises(xdp.FastPathError, match="bpftool is not installed"):
        preflight(spec())
