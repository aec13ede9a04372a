"""Virtual time in nodes (issue 11, first part): a network built with a time dilation
factor preloads the clock shim into every process of its nodes, so `sleep` in a
node's shell and a program's own clock run TDF times slower than the wall clock;
`set_tdf` changes the factor for all of them at once; the clock page goes with the
run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fidelnet import Network
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged


def _pair() -> TopologySpec:
    t = TopologySpec()
    t.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    t.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    t.add_link(LinkSpec("h1", "h2"))
    return t


def test_a_dilated_network_slows_every_process_in_its_nodes() -> None:
    with Network(_pair(), tdf=4.0) as net:
        h1, h2 = net["h1"], net["h2"]
        page = net.vt_page
        assert page is not None and os.path.exists(page.path)
        began = time.monotonic()
        h1.cmd("sleep 0.5")
        wall = time.monotonic() - began
        assert 1.8 <= wall <= 3.2, wall
        out, err, code = h2.pexec(
            ["python3", "-c", "import time; t = time.monotonic(); time.sleep(0.2); "
             "print(time.monotonic() - t)"],
        )  # fmt: skip
        assert code == 0, err
        assert 0.19 <= float(out) <= 0.3, out
        assert " 0% packet loss" in h1.cmd("ping -c 2 -i 0.2 -W 2 10.0.0.2")
        net.set_tdf(1.0)
        began = time.monotonic()
        h1.cmd("sleep 0.5")
        assert 0.45 <= time.monotonic() - began <= 1.2
        path = page.path
    assert not os.path.exists(path)


def test_an_undilated_network_has_no_page_and_refuses_set_tdf() -> None:
    from fidelnet.errors import StateError

    with Network(_pair()) as net:
        assert net.vt_page is None
        assert "LD_PRELOAD" not in net.node_env()
        with pytest.raises(StateError, match="no virtual time"):
            net.set_tdf(2.0)


def test_a_static_program_in_a_dilated_node_is_named_in_the_provenance(tmp_path: Path) -> None:
    import subprocess

    from fidelnet.measure.provenance import collect

    src = tmp_path / "s.c"
    src.write_text("int main(void) { return 0; }\n")
    prog = tmp_path / "static-prog"
    subprocess.run(["gcc", "-static", "-o", str(prog), str(src)], check=True, timeout=60)
    with Network(_pair(), tdf=2.0) as net:
        net["h1"].cmd(str(prog))
        net.set_tdf(3.0, reason="test")
        vt = collect(net).virtual_time
    assert vt["tdf"] == 3.0
    assert [(e["tdf"], e["reason"]) for e in vt["timeline"]] == [(2.0, "start"), (3.0, "test")]
    assert vt["unreached"] == [{"path": str(prog), "why": "static"}]
