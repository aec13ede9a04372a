"""The pytest plugin without root: outcomes of small test files run with pytester
(skips, usage errors, teardown on failure against a stand-in Network), the results
directory in failure reports, and the messages of fidelnet.testing.asserts."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hdrh.histogram import HdrHistogram

import fidelnet.network
from fidelnet.measure.latency import summary_from_histogram
from fidelnet.measure.results import (
    Flag,
    LatencySummary,
    TcpFlowResult,
    TcpResult,
    UdpFlowResult,
    UdpResult,
)
from fidelnet.testing import (
    assert_goodput_at_least,
    assert_jain_at_least,
    assert_latency_at_most,
    assert_loss_at_most,
    assert_no_flags,
    assert_reachable,
    plugin,
)
from fidelnet.topology import TopologySpec

pytest_plugins = ["pytester"]


# -- a stand-in for fidelnet.Network ------------------------------------------------


class FakeNet:
    """Records what the fixture does with it; same signature as fidelnet.Network."""

    made: list[FakeNet] = []
    fail_start = False
    stop_logs: str | None = None
    stop_raises = False

    def __init__(
        self,
        spec: TopologySpec | None = None,
        *,
        run_id: str | None = None,
        command: str = "",
        node_classes: dict[str, type] | None = None,
        engine_args: list[str] | None = None,
    ) -> None:
        self.spec = spec
        self.command = command
        self.events: list[str] = []
        self.is_open = False
        self.run_id = f"fake{len(FakeNet.made):02d}"
        self.nodes = dict.fromkeys(spec.nodes if spec else [])
        FakeNet.made.append(self)

    def start(self) -> FakeNet:
        self.events.append("start")
        self.is_open = True
        if FakeNet.fail_start:
            self.stop()  # as Network.start rolls back
            raise RuntimeError("bridge refused")
        return self

    def stop(self) -> None:
        self.events.append("stop")
        self.is_open = False
        if FakeNet.stop_logs:
            logging.getLogger("fidelnet").error(FakeNet.stop_logs)
        if FakeNet.stop_raises:
            raise OSError("netlink socket closed")


@pytest.fixture
def fake_net(monkeypatch: pytest.MonkeyPatch) -> type[FakeNet]:
    monkeypatch.setattr(FakeNet, "made", [])
    monkeypatch.setattr(fidelnet.network, "Network", FakeNet)
    monkeypatch.setattr(plugin, "_is_root", lambda: True)
    return FakeNet


# -- registration and cost ----------------------------------------------------------


def test_the_entry_point_registers_the_plugin(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.get_plugin("fidelnet") is plugin


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.fidelnet_topology(spec_or_factory, **network_kwargs)*"]
    )


def test_loading_the_plugin_imports_no_network_code() -> None:
    # Beyond the fidelnet package itself, loading the plugin imports only its own
    # modules: the network, measurement and result code wait for the fixtures.
    code = textwrap.dedent(
        """
        import sys, pytest, fidelnet
        before = set(sys.modules)
        import fidelnet.testing.plugin
        print(sorted(set(sys.modules) - before))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == str(
        ["fidelnet.testing", "fidelnet.testing.asserts", "fidelnet.testing.plugin"]
    )


# -- skips and usage errors ---------------------------------------------------------


def test_without_root_every_form_skips_with_the_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plugin, "_is_root", lambda: False)
    pytester.makepyfile(
        """
        import pytest
        from fidelnet.topology import linear

        @pytest.mark.fidelnet_topology("linear,3")
        def test_string(fidelnet_net):
            raise RuntimeError("must not run")

        @pytest.mark.fidelnet_topology(lambda: linear(2))
        def test_factory(fidelnet_net):
            raise RuntimeError("must not run")

        class TestFixture:
            @pytest.fixture
            def fidelnet_topology(self):
                return linear(2)

            def test_it(self, fidelnet_net):
                raise RuntimeError("must not run")
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=3)
    assert result.stdout.str().count("needs root (creates network namespaces)") == 3


def test_no_topology_is_a_usage_error_even_without_root(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plugin, "_is_root", lambda: False)
    pytester.makepyfile(
        """
        def test_it(fidelnet_net):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*fidelnet_net: no topology; give the test a topology: @pytest.mark.fidelnet_topology*"]
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('"linear,x"', "*the fidelnet_topology marker's argument: topo:*"),
        ("42", "*the fidelnet_topology marker's argument is int, not a topology*"),
        ("lambda: {}", "*returned dict, not a TopologySpec*"),
        ('"linear,2", "linear,3"', "*the fidelnet_topology marker takes one topology, got 2*"),
        ('"linear,2", nonsense=1', "*keyword arguments do not fit fidelnet.Network*nonsense*"),
    ],
)
def test_bad_topologies_are_usage_errors(
    pytester: pytest.Pytester, fake_net: type[FakeNet], marker: str, message: str
) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.fidelnet_topology({marker})
        def test_it(fidelnet_net):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])
    assert fake_net.made == []


# -- teardown -----------------------------------------------------------------------


def test_the_network_is_stopped_whatever_the_test_does(
    pytester: pytest.Pytester, fake_net: type[FakeNet]
) -> None:
    pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.fidelnet_topology("linear,2", command="ci")

        def test_passes(fidelnet_net):
            assert fidelnet_net.is_open

        def test_fails(fidelnet_net):
            assert fidelnet_net.run_id == "nothing like it"

        def test_raises(fidelnet_net):
            raise RuntimeError("boom")
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    assert len(fake_net.made) == 3
    assert all(n.events == ["start", "stop"] for n in fake_net.made)
    assert {n.command for n in fake_net.made} == {"ci"}
    assert list(fake_net.made[0].nodes) == ["s1", "h1", "s2", "h2"]
    # the failure report names the run and its nodes
    result.stdout.fnmatch_lines(["*- fidelnet network -*", "run fake01: nodes s1, h1, s2, h2"])


def test_the_network_is_stopped_when_the_session_is_ended_early(
    pytester: pytest.Pytester, fake_net: type[FakeNet]
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.fidelnet_topology("minimal")
        def test_exits(fidelnet_net):
            pytest.exit("stopping the session", returncode=3)
        """
    )
    assert pytester.runpytest().ret == 3
    assert [n.events for n in fake_net.made] == [["start", "stop"]]


def test_a_marker_spec_is_copied_for_each_test(
    pytester: pytest.Pytester, fake_net: type[FakeNet]
) -> None:
    pytester.makepyfile(
        """
        import pytest
        from fidelnet.topology import linear

        SPEC = linear(2)
        pytestmark = pytest.mark.fidelnet_topology(SPEC)

        def test_one(fidelnet_net):
            assert fidelnet_net.spec is not SPEC and fidelnet_net.spec == SPEC

        def test_two(fidelnet_net):
            assert fidelnet_net.spec is not SPEC
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)
    assert fake_net.made[0].spec is not fake_net.made[1].spec


def test_a_network_that_does_not_start_is_a_setup_error(
    pytester: pytest.Pytester, fake_net: type[FakeNet], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FakeNet, "fail_start", True)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.fidelnet_topology("minimal")
        def test_it(fidelnet_net):
            raise AssertionError("must not run")
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*RuntimeError: bridge refused*"])
    assert fake_net.made[0].events[-1] == "stop"


def test_teardown_problems_are_errors_not_swallowed(
    pytester: pytest.Pytester, fake_net: type[FakeNet], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FakeNet, "stop_logs", "run fake00: teardown: veth h1-eth0 still exists")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.fidelnet_topology("minimal")
        def test_it(fidelnet_net):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_it*",
            "*fidelnet_net: teardown of run fake00 was incomplete:",
            "*run fake00: teardown: veth h1-eth0 still exists",
        ]
    )


def test_an_exception_in_teardown_is_an_error(
    pytester: pytest.Pytester, fake_net: type[FakeNet], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FakeNet, "stop_raises", True)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.fidelnet_topology("minimal")
        def test_it(fidelnet_net):
            assert False
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(["*OSError: netlink socket closed*"])


# -- the results directory ----------------------------------------------------------


def test_a_failed_test_names_its_results_directory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from fidelnet.measure import TcpResult, save

        def test_fails(fidelnet_results, tmp_path):
            assert fidelnet_results.parent == tmp_path and fidelnet_results.is_dir()
            r = TcpResult(duration_s=1, interval_s=1, warmup_s=0, flows=[], total_goodput_bps=0)
            save(fidelnet_results, "h1-h2", r)
            assert False, "on purpose"

        def test_passes(fidelnet_results):
            pass

        def test_fails_empty(fidelnet_results):
            assert False
        """
    )
    result = pytester.runpytest("--junitxml=j.xml")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*- fidelnet results -*",
            "*/test_fails0/fidelnet-results",
            "  h1-h2.json",
        ]
    )
    result.stdout.fnmatch_lines(["*/test_fails_empty0/fidelnet-results (empty)"])
    assert "test_passes0" not in out
    assert 'name="fidelnet_results"' in (pytester.path / "j.xml").read_text()


# -- asserts ------------------------------------------------------------------------


def latency_summary(p999_ns: int = 1_840_000, count: int = 10_000) -> LatencySummary:
    return LatencySummary(
        count=count,
        min_ns=20_000,
        mean_ns=60_000.0,
        p50_ns=50_000,
        p90_ns=80_000,
        p99_ns=400_000,
        p999_ns=p999_ns,
        p9999_ns=2_500_000,
        max_ns=3_000_000,
    )


def udp_result(
    lost: int = 120,
    sent: int = 10_000,
    latency: LatencySummary | None = None,
    flags: tuple[str, ...] = ("receiver_socket_drops",),
) -> UdpResult:
    lat = latency if latency is not None else latency_summary()
    got = sent - lost
    ratio = lost / sent if sent else 0.0
    flow = UdpFlowResult(
        id=0,
        src="h1",
        dst="h2",
        dst_addr="10.0.0.2",
        sent=sent,
        received=got,
        unique=got,
        lost=lost,
        loss_ratio=ratio,
        duplicates=0,
        reordered=0,
        latency=lat,
    )
    return UdpResult(
        src="h1",
        dst="h2",
        size=64,
        pattern="cbr",
        requested_pps=10_000.0,
        achieved_pps=10_000.0,
        rate_reached=True,
        duration_s=1.0,
        sent=sent,
        received=got,
        unique=got,
        lost=lost,
        loss_ratio=ratio,
        duplicates=0,
        reordered=0,
        malformed=0,
        socket_drops=17,
        receive_pps=float(got),
        latency=lat,
        flows=[flow],
        intervals=[],
        interval_s=0.1,
        flags=[Flag(code=c, message=f"{c} happened") for c in flags],
    )


def tcp_result(goodputs: tuple[float, ...] = (48e6, 48e6), jain: float | None = None) -> TcpResult:
    flows = [
        TcpFlowResult(
            src=f"h{i + 1}",
            dst="h9",
            port=5201 + i,
            sender_bps=g,
            receiver_bps=g,
            goodput_bps=g,
            intervals=[],
            warmup_s=1.0,
        )
        for i, g in enumerate(goodputs)
    ]
    return TcpResult(
        duration_s=6,
        interval_s=1,
        warmup_s=1,
        flows=flows,
        total_goodput_bps=sum(goodputs),
        jain=jain,
        flags=[Flag(code="tcp-window", message="window limits goodput")],
    )


def test_loss_message_and_thresholds() -> None:
    r = udp_result()
    assert_loss_at_most(r, 0.012)
    assert_loss_at_most(r, "1.2%")
    assert_loss_at_most(r.flows[0], 0.02)
    with pytest.raises(AssertionError) as exc:
        assert_loss_at_most(r, 0.01)
    assert str(exc.value) == (
        "loss = 1.20 % (120 of 10000 lost) > 1.00 % allowed "
        "(h1->h2, 10000 pps, flags: receiver_socket_drops)"
    )
    with pytest.raises(AssertionError, match=r"^loss = 1.20 % .* > 0 % allowed \(h1->h2\)$"):
        assert_loss_at_most(r.flows[0], 0)
    with pytest.raises(AssertionError, match="nothing was sent"):
        assert_loss_at_most(udp_result(lost=0, sent=0), 0.5)
    with pytest.raises(ValueError, match=r'for 5 % write "5%" or 0.05'):
        assert_loss_at_most(r, 5)
    with pytest.raises(TypeError, match="loss_ratio"):
        assert_loss_at_most(tcp_result(), 0.1)  # type: ignore[arg-type]


def test_latency_message_from_the_summary() -> None:
    r = udp_result()
    assert_latency_at_most(r, 99.9, "2ms")
    assert_latency_at_most(r, 50, 50e-6)
    assert_latency_at_most(r.latency, 100, "3ms")
    with pytest.raises(AssertionError) as exc:
        assert_latency_at_most(r, 99.9, 0.001)
    assert str(exc.value) == (
        "latency p99.9 = 1.84 ms > 1.00 ms allowed "
        "(h1->h2, 10000 pps, flags: receiver_socket_drops)"
    )
    with pytest.raises(AssertionError, match=r"^latency p50 = 50.0 µs > 40.0 µs allowed \(h1->h2"):
        assert_latency_at_most(r.flows[0], 50, "40us")
    with pytest.raises(AssertionError, match=r"^latency max = 3.00 ms > 2.00 ms allowed$"):
        assert_latency_at_most(r.latency, 100, "2ms")
    with pytest.raises(AssertionError, match="no packet was received"):
        assert_latency_at_most(udp_result(latency=latency_summary(count=0)), 99, 1.0)
    with pytest.raises(ValueError, match="no HDR histogram"):
        assert_latency_at_most(r, 95, 1.0)
    with pytest.raises(ValueError, match="between 0 and 100"):
        assert_latency_at_most(r, 999, 1.0)


def test_latency_at_any_percentile_from_the_histogram() -> None:
    hist = HdrHistogram(1, 60 * 10**9, 3)
    for us in range(1, 1001):
        hist.record_value(us * 1000)
    r = udp_result(latency=summary_from_histogram(hist), flags=())
    assert_latency_at_most(r, 95, "951us")
    with pytest.raises(
        AssertionError, match=r"^latency p95 = 950 µs > 900 µs allowed \(.*no flags\)"
    ):
        assert_latency_at_most(r, 95, "900us")
    with pytest.raises(AssertionError, match=r"^latency p75.5 = 755 µs > 700 µs"):
        assert_latency_at_most(r, 75.5, 700e-6)


def test_goodput_message_total_and_per_flow() -> None:
    t = tcp_result()
    assert_goodput_at_least(t, "96Mbit")
    assert_goodput_at_least(t, 48e6, flow=1)
    with pytest.raises(AssertionError) as exc:
        assert_goodput_at_least(t, "100Mbit")
    assert str(exc.value) == (
        "total goodput = 96.0 Mbit/s < 100 Mbit/s required "
        "(2 flows: h1->h9 48.0 Mbit/s, h2->h9 48.0 Mbit/s, flags: tcp-window)"
    )
    with pytest.raises(AssertionError) as exc:
        assert_goodput_at_least(t, 50e6, flow=("h2", "h9"))
    assert str(exc.value) == (
        "goodput h2->h9 = 48.0 Mbit/s < 50.0 Mbit/s required (flow 1 of 2, flags: tcp-window)"
    )
    with pytest.raises(ValueError, match=r"no such flow \(the result has \('h1', 'h9'\)"):
        assert_goodput_at_least(t, 1.0, flow=("h3", "h9"))
    with pytest.raises(ValueError, match="the result has 2 flows"):
        assert_goodput_at_least(t, 1.0, flow=2)


def test_jain_message() -> None:
    assert_jain_at_least(tcp_result(jain=0.9999), 0.99)
    unfair = tcp_result(goodputs=(90e6, 10e6))  # jain not given: computed from the flows
    with pytest.raises(AssertionError) as exc:
        assert_jain_at_least(unfair, 0.9)
    assert str(exc.value) == (
        "Jain's fairness index = 0.610 < 0.900 required "
        "(2 flows: h1->h9 90.0 Mbit/s, h2->h9 10.0 Mbit/s, flags: tcp-window)"
    )
    with pytest.raises(ValueError, match="two flows or more"):
        assert_jain_at_least(tcp_result(goodputs=(1e6,)), 0.9)
    with pytest.raises(ValueError, match=r"lies in \(0, 1\]"):
        assert_jain_at_least(unfair, 90)


def test_no_flags_message_and_allow() -> None:
    r = udp_result(flags=("receiver_socket_drops", "rate_not_reached"))
    assert_no_flags(udp_result(flags=()))
    assert_no_flags(r, allow=["receiver_socket_drops", "rate_not_reached"])
    with pytest.raises(AssertionError) as exc:
        assert_no_flags(r, allow="receiver_socket_drops")
    assert str(exc.value) == (
        "1 unexpected flag on the udp result (h1->h2, 10000 pps):\n"
        "  rate_not_reached: rate_not_reached happened"
    )
    with pytest.raises(AssertionError, match=r"^2 unexpected flags on the udp result \(h1->h2"):
        assert_no_flags(r)
    with pytest.raises(AssertionError) as exc:
        assert_no_flags(tcp_result())
    assert str(exc.value) == (
        "1 unexpected flag on the tcp result (2 flows: h1->h9 48.0 Mbit/s, h2->h9 48.0 Mbit/s):\n"
        "  tcp-window: window limits goodput"
    )


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name


class _PingNet:
    def __init__(self, names: list[str], down: set[tuple[str, str]]) -> None:
        self.hosts = [_Node(n) for n in names]
        self.down = down

    def __getitem__(self, name: str) -> _Node:
        return next(n for n in self.hosts if n.name == name)

    def ping_pairs(self, hosts: list[_Node], timeout: float) -> dict[tuple[str, str], bool]:
        return {
            (a.name, b.name): (a.name, b.name) not in self.down
            for a in hosts
            for b in hosts
            if a is not b
        }


def test_reachable_lists_the_pairs_that_failed() -> None:
    net: Any = _PingNet(["h1", "h2", "h3"], {("h1", "h3"), ("h3", "h1")})
    assert_reachable(net, ["h1", "h2"])
    with pytest.raises(AssertionError) as exc:
        assert_reachable(net)
    assert str(exc.value) == (
        "unreachable: 2 of 6 pairs got no ping reply: h1->h3, h3->h1 "
        "(pinged every ordered pair of h1, h2, h3, timeout 1.00 s)"
    )
    with pytest.raises(AssertionError, match="no pair of hosts"):
        assert_reachable(net, ["h1"])
