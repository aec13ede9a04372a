"""The pytest plugin with real namespaces: a test that fails or raises leaves no
namespace and no state file behind, and a topology factory with an engine link
measured by pktgen and judged by the asserts."""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import pytest

from fidelnet import Network
from fidelnet.measure import save, udp
from fidelnet.measure.pktgen import find_pktgen
from fidelnet.testing import assert_latency_at_most, assert_loss_at_most, assert_reachable
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged
pytest_plugins = ["pytester"]


def netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def state_files() -> set[str]:
    return {os.path.basename(p) for p in glob.glob("/run/fidelnet/*.jsonl")}


def test_a_failing_test_leaves_no_namespace_and_no_state_file(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import subprocess
        from pathlib import Path

        import pytest
        from fidelnet.testing import assert_reachable

        pytestmark = pytest.mark.fidelnet_topology("linear,2")

        def seen(net):
            names = subprocess.run(
                ["ip", "netns", "list"], capture_output=True, text=True, check=True
            ).stdout.split()
            mine = sorted(n for n in names if n.startswith(f"fn{net.run_id}"))
            with Path("seen.txt").open("a") as f:
                f.write(f"{net.run_id} {' '.join(mine)}\\n")

        def test_fails(fidelnet_net):
            assert_reachable(fidelnet_net)
            seen(fidelnet_net)
            assert fidelnet_net.ping_all() == 100.0, "fails on purpose"

        def test_raises(fidelnet_net):
            seen(fidelnet_net)
            raise RuntimeError("raises on purpose")

        def test_they_were_torn_down_before_the_session_ended():
            # in this session, not by the interpreter's atexit safety net
            names = subprocess.run(
                ["ip", "netns", "list"], capture_output=True, text=True, check=True
            ).stdout
            for line in Path("seen.txt").read_text().splitlines():
                run_id = line.split()[0]
                assert f"fn{run_id}" not in names
                assert not Path(f"/run/fidelnet/{run_id}.jsonl").exists()
        """
    )
    before = (netns(), state_files())
    # A fresh interpreter: the plugin comes from the installed pytest11 entry point.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)
    after = (netns(), state_files())

    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(["*fails on purpose*", "*RuntimeError: raises on purpose*"])
    runs = [line.split() for line in (pytester.path / "seen.txt").read_text().splitlines()]
    assert len(runs) == 2 and runs[0][0] != runs[1][0]
    for run_id, *names in runs:
        # while the test ran, its network existed (so the comparison below means something)
        assert f"fn{run_id}-h1" in names and f"fn{run_id}-h2" in names, names
        assert not {n for n in after[0] if n.startswith(f"fn{run_id}")}
        assert f"{run_id}.jsonl" not in after[1]
    assert after[0] - before[0] == set()
    assert after[1] - before[1] == set()


def lossy_pair() -> TopologySpec:
    spec = TopologySpec(auto_static_arp=True)
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    link = LinkSpec("h1", "h2", params_ab=LinkParams(loss=10.0, seed=7))
    link.backend = "engine"
    spec.add_link(link)
    return spec


@pytest.mark.fidelnet_topology(lossy_pair, command="test_pytest_plugin_live")
def test_a_factory_engine_link_measured_and_judged(
    fidelnet_net: Network, fidelnet_results: Path
) -> None:
    find_pktgen()  # a missing binary is an install defect: fail, do not skip
    assert fidelnet_net.links[0].backend == "engine"
    r = udp(fidelnet_net, "h1", "h2", 5000, duration=1.0)
    save(fidelnet_results, "lossy", r, fidelnet_net)
    assert (fidelnet_results / "lossy.json").is_file()
    # 10 % loss on 5000 packets: sd 21 packets, so 5 % and 15 % are more than 11 sd away.
    assert_loss_at_most(r, 0.15)
    assert r.loss_ratio > 0.05, r.loss_ratio
    with pytest.raises(AssertionError) as exc:
        assert_loss_at_most(r, "1%")
    message = str(exc.value)
    assert message.startswith(f"loss = {r.loss_ratio * 100:.2f} % ({r.lost} of {r.sent} lost)")
    assert "> 1.00 % allowed (h1->h2, 5000 pps, " in message
    assert_latency_at_most(r, 95, "1s")  # a percentile the summary lacks: from the histogram


class TestTheTopologyFixture:
    @pytest.fixture
    def fidelnet_topology(self) -> str:
        return "linear,2"

    def test_override_gives_the_topology(self, fidelnet_net: Network) -> None:
        assert sorted(n.name for n in fidelnet_net.hosts) == ["h1", "h2"]
        assert_reachable(fidelnet_net, ["h1", "h2"])
