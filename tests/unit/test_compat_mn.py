"""`fidelnet mn` option parsing: topologies, classes, link parameters, tests, scripts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fidelnet.cli.mn import parse, run_mn
from fidelnet.compat._switch import LearningSwitch
from fidelnet.compat.link import TCLink
from fidelnet.compat.node import LinuxBridge, NullController, RemoteController, VMHost
from fidelnet.compat.topo import Topo
from fidelnet.errors import UnitError, ValidationError


def test_topo_and_test() -> None:
    setup = parse(["--topo", "linear,3", "--test", "pingall"])
    assert isinstance(setup.topo, Topo)
    assert setup.topo.hosts() == ["h1", "h2", "h3"]
    assert setup.topo.switches() == ["s1", "s2", "s3"]
    assert setup.tests == ["pingall"]
    # No controller asked for: none, and plain learning switches on the topology's
    # datapath (the BPF switch where it runs); --switch lxbr asks for Linux bridges.
    assert setup.controllers == [NullController]
    assert setup.switch is LearningSwitch and setup.switch.fn_datapath is None
    assert parse(["--switch", "lxbr"]).switch is LinuxBridge


def test_torus_switches_run_stp() -> None:
    topo = parse(["--topo", "torus,3,3"]).topo
    assert all(topo.nodeInfo(s).get("stp") for s in topo.switches())


def test_unknown_topology_lists_the_valid_ones() -> None:
    with pytest.raises(ValidationError) as exc:
        parse(["--topo", "ring,3"])
    assert exc.value.field == "--topo"
    assert "linear,K[,N]" in exc.value.choices and "torus,X,Y[,N]" in exc.value.choices


def test_bad_topology_arguments() -> None:
    with pytest.raises(ValidationError, match="tree"):
        parse(["--topo", "tree,0"])


def test_link_tc_bw_is_megabits() -> None:
    setup = parse(["--link", "tc,bw=10"])
    assert issubclass(setup.link, TCLink)
    assert setup.link_params.bw == 10e6
    assert setup.link_params.delay is None
    setup = parse(["--link", "tc,bw=2.5,delay=5ms,loss=1"])
    assert setup.link_params.bw == 2.5e6
    assert setup.link_params.delay == pytest.approx(0.005)
    assert setup.link_params.loss == 1
    assert parse(["--link", "default"]).link_params.is_empty()


def test_link_delay_needs_a_unit() -> None:
    with pytest.raises(UnitError):
        parse(["--link", "tc,delay=5"])


def test_switch_host_controller_choices() -> None:
    setup = parse(
        ["--switch", "lxbr,stp=1", "--controller", "remote,ip=1.2.3.4", "--host", "cfs,cpu=.5"]
    )
    assert issubclass(setup.switch, LinuxBridge)
    assert setup.switch.fn_params == {"stp": 1}
    assert issubclass(setup.controllers[0], RemoteController)
    assert setup.host.fn_params == {"cpu": 0.5}
    with pytest.raises(ValidationError) as exc:
        parse(["--switch", "ivs"])
    assert "lxbr" in exc.value.choices
    assert issubclass(parse(["--host", "vm,memory=512M"]).host, VMHost)
    with pytest.raises(ValidationError) as exc:
        parse(["--host", "xen"])
    assert "vm" in exc.value.choices


def test_tests_several_ways() -> None:
    assert parse(["--test", "pingall,iperf"]).tests == ["pingall", "iperf"]
    assert parse(["--test", "pingall+iperfudp"]).tests == ["pingall", "iperfudp"]
    assert parse(["--test", "pingall", "--test", "none"]).tests == ["pingall", "none"]
    assert parse(["--test", "iperf,seconds=2"]).tests == ["iperf,seconds=2"]
    with pytest.raises(ValidationError) as exc:
        parse(["--test", "pingevery"])
    assert "pingall" in exc.value.choices


def test_script_and_its_arguments() -> None:
    setup = parse(["-v", "output", "ex.py", "-v", "--topo", "x"])
    assert setup.options.script == "ex.py"
    assert setup.options.script_args == ["-v", "--topo", "x"]
    assert setup.options.verbosity == "output"


def test_unknown_option_is_invalid_input() -> None:
    with pytest.raises(ValidationError, match="--frobnicate"):
        parse(["--frobnicate"])


def test_custom_file_topos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    custom = tmp_path / "mytopo.py"
    custom.write_text(
        "from mininet.topo import Topo\n"
        "class Pair(Topo):\n"
        "    def build(self, n=2):\n"
        "        s = self.addSwitch('s1')\n"
        "        for i in range(n):\n"
        "            self.addLink(self.addHost(f'a{i}'), s)\n"
        "topos = {'pair': Pair}\n"
    )
    setup = parse(["--custom", str(custom), "--topo", "pair,3"])
    assert setup.topo.hosts() == ["a0", "a1", "a2"]
    with pytest.raises(ValidationError) as exc:
        parse(["--custom", str(custom), "--topo", "trio"])
    assert "pair" in exc.value.choices


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"topos = {\n", ":1: SyntaxError"),
        (b"x = 1\ntopos = {'a': undefined_name}\n", ":2: raised NameError"),
        (b"\xff\xfe", "not UTF-8 text (byte 0)"),
        (b"x = 1\x00\n", "null bytes"),
    ],
)
def test_bad_custom_files_are_named_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, needle: str
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    custom = tmp_path / "bad.py"
    custom.write_bytes(content)
    with pytest.raises(ValidationError) as exc:
        parse(["--custom", str(custom)])
    assert exc.value.field == "--custom" and needle in str(exc.value), str(exc.value)


def test_a_custom_file_over_the_limit_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    big = tmp_path / "big.py"
    with big.open("wb") as f:
        f.truncate((4 << 20) + 1)
    with pytest.raises(ValidationError, match="the limit is 4194304 bytes"):
        parse(["--custom", str(big)])


def test_run_mn_invalid_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_mn(["--topo", "ring,3"]) == 2
    assert "unknown topology 'ring'" in capsys.readouterr().err
    assert run_mn(["--version"]) == 0


def test_ipv6_option() -> None:
    assert parse(["--topo", "linear,2"]).options.ipv6 == "on"
    assert parse(["--topo", "linear,2", "--ipv6", "off"]).options.ipv6 == "off"
    with pytest.raises(ValidationError) as exc:
        parse(["--ipv6", "maybe"])
    assert "--ipv6" in str(exc.value) and "maybe" in str(exc.value)
