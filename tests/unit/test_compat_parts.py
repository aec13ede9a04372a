"""Pieces of the Mininet layer that need no network: units, rates, ping parsing, and the
real-time CPU shares ``CPULimitedHost(sched='rt')`` asks of the core."""

from __future__ import annotations

from pathlib import Path

import pytest

from fidelnet.compat._intf import TCIntf, tc_params
from fidelnet.compat._nettests import NetTests, format_rate
from fidelnet.compat.link import Intf, TCLink, end_params, is_tc
from fidelnet.compat.util import custom
from fidelnet.errors import KernelError, UnitError, UnsupportedError, ValidationError
from fidelnet.kernel import cgroups


def test_tc_params_reads_mininet_units() -> None:
    lp = tc_params({"bw": 10, "delay": "5ms", "jitter": "1ms", "loss": 2}, "l")
    assert (lp.bw, lp.delay, lp.jitter, lp.loss) == (10e6, 0.005, 0.001, 2)
    assert tc_params({"bw": "1Gbit"}, "l").bw == 1e9
    # Zero delay or loss means none, as in Mininet.
    assert tc_params({"bw": 1, "delay": 0, "loss": 0}, "l").delay is None
    assert tc_params({"loss": 0}, "l").loss is None
    with pytest.raises(UnitError):
        tc_params({"delay": 5}, "l")
    with pytest.raises(UnitError):
        tc_params({"loss": 150}, "l")
    with pytest.raises(ValidationError):
        tc_params({"bw": 1, "max_queue_size": "big"}, "l")


def test_tc_only_for_tc_interfaces() -> None:
    assert is_tc(TCIntf) and is_tc(custom(TCIntf, bw=5)) and not is_tc(Intf)
    assert end_params(Intf, {"bw": 10}, "l") is None
    lp = end_params(custom(TCIntf, bw=5), {}, "l")
    assert lp is not None and lp.bw == 5e6
    assert TCLink.__mro__[1].__name__ == "Link"


def test_format_rate_like_iperf() -> None:
    assert format_rate(9.57e6) == "9.57 Mbits/sec"
    assert format_rate(41.23e9) == "41.2 Gbits/sec"
    assert format_rate(941e6) == "941 Mbits/sec"
    assert format_rate(512.0) == "512 bits/sec"
    assert format_rate(8e6, "M") == "0.95 MBytes/sec"
    assert format_rate(2e6, "k") == "2000 Kbits/sec"


def test_parse_ping_output() -> None:
    ok = (
        "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n"
        "64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.065 ms\n\n"
        "--- 10.0.0.2 ping statistics ---\n"
        "1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"
        "rtt min/avg/max/mdev = 0.065/0.070/0.080/0.001 ms\n"
    )
    assert NetTests._parsePing(ok) == (1, 1)
    assert NetTests._parsePingFull(ok) == (1, 1, 0.065, 0.070, 0.080, 0.001)
    assert NetTests._parsePing("connect: Network is unreachable") == (1, 0)
    lost = "1 packets transmitted, 0 received, 100% packet loss, time 0ms"
    assert NetTests._parsePing(lost) == (1, 0)
    assert NetTests._parsePingFull(lost)[:2] == (1, 0)


def _rt_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    parent = tmp_path / "fidelnet-abc123"
    kids = (parent / "h1", parent / "h2")
    for d in (parent, *kids):
        d.mkdir(parents=True)
        (d / "cpu.rt_period_us").write_text("1000000\n")
        (d / "cpu.rt_runtime_us").write_text("0\n")
    return parent, kids[0], kids[1]


def test_rt_runtime_shares_the_parent(tmp_path: Path) -> None:
    """sched='rt' (limit.py): each node gets fraction x period of RT runtime, and the
    run-level group is raised first so the kernel accepts the children."""
    parent, h1, h2 = _rt_tree(tmp_path)
    cgroups.set_rt_runtime(str(h1), cgroups.CpuLimit(fraction=0.1, realtime=True), 2)
    assert (h1 / "cpu.rt_period_us").read_text() == "100000"
    assert (h1 / "cpu.rt_runtime_us").read_text() == "10000"
    assert (parent / "cpu.rt_runtime_us").read_text() == "100000"
    cgroups.set_rt_runtime(str(h2), cgroups.CpuLimit(fraction=0.1, realtime=True), 2)
    assert (parent / "cpu.rt_runtime_us").read_text() == "200000"
    cgroups.set_rt_runtime(str(h1), cgroups.CpuLimit(fraction=0.05, realtime=True), 2)
    assert (h1 / "cpu.rt_runtime_us").read_text() == "5000"
    assert (parent / "cpu.rt_runtime_us").read_text() == "150000"


def test_rt_share_is_per_cpu_runtime_on_few_cores(tmp_path: Path) -> None:
    """Real-time runtime is per CPU: a node with 10% of a 2-core machine runs on one
    core with 20% of it, so one busy process gets 10% of the machine, not 5%."""
    assert cgroups.realtime_cores(0.1, 2, 0) == (0,)
    assert cgroups.realtime_cores(0.1, 2, 1) == (1,)  # the next rt node: the next core
    assert cgroups.realtime_cores(0.5, 2, 0) == (0,)
    assert cgroups.realtime_cores(0.6, 2, 3) == (0, 1)
    assert cgroups.realtime_cores(0.25, 8, 1) == (2, 3)
    one = cgroups.CpuLimit(fraction=0.1, cores=(0,), realtime=True)
    assert cgroups.rt_runtime_us(one, 2) == 20_000
    every = cgroups.CpuLimit(fraction=0.1, realtime=True)  # on every core: 10% of each
    assert cgroups.rt_runtime_us(every, 2) == 10_000
    parent, h1, _ = _rt_tree(tmp_path)
    cgroups.set_rt_runtime(str(h1), one, 2)
    assert (h1 / "cpu.rt_runtime_us").read_text() == "20000"
    assert (parent / "cpu.rt_runtime_us").read_text() == "200000"
    with pytest.raises(ValidationError, match="needs at least 2"):
        cgroups.rt_runtime_us(cgroups.CpuLimit(fraction=0.6, cores=(0,), realtime=True), 2)


def test_rt_share_the_kernel_cannot_admit_is_refused_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel admits real-time groups whose per-CPU shares add up to at most its
    budget (95%): two hosts with 25% of a 2-core machine each need 50% of a core
    each, 100% together. The refusal says so, naming the node."""
    parent, h1, _ = _rt_tree(tmp_path)
    write = cgroups._write

    def budget(path: str, value: str) -> None:
        if path == str(parent / "cpu.rt_runtime_us") and int(value) > 950_000:
            raise KernelError(f"{path}: cannot write {value!r}: [Errno 22] Invalid argument")
        write(path, value)

    monkeypatch.setattr(cgroups, "_write", budget)
    (parent / "cpu.rt_runtime_us").write_text("500000\n")  # h2 holds 50% already
    quarter = cgroups.CpuLimit(fraction=0.25, cores=(0,), realtime=True)
    with pytest.raises(KernelError) as caught:
        cgroups.set_rt_runtime(str(h1), quarter, 2)
    said = str(caught.value)
    assert said.startswith("h1: a real-time share of 0.25 of 2 cores is 50% of each of 1")
    assert "would need 100% of a CPU's real-time budget" in said and "sched='cfs'" in said
    assert (h1 / "cpu.rt_runtime_us").read_text() == "0\n"  # left as it was


def test_rt_needs_the_v1_cpu_hierarchy(tmp_path: Path) -> None:
    fs = cgroups.CgroupFS(str(tmp_path / "unified"), None, None, 2)
    with pytest.raises(UnsupportedError, match="real-time"):
        fs.node_dirs("abc123", "h1", cgroups.CpuLimit(realtime=True))
