"""mininet.util on fidelnet: addresses, parsing, sorting, customized classes, log format."""

from __future__ import annotations

import pytest

from fidelnet.compat import log as mlog
from fidelnet.compat.topo import LinearTopo, Topo
from fidelnet.compat.util import (
    buildTopo,
    custom,
    customClass,
    ipAdd,
    ipParse,
    ipStr,
    irange,
    macColonHex,
    makeNumeric,
    natural,
    naturalSeq,
    netParse,
    specialClass,
    splitArgs,
)
from fidelnet.errors import ValidationError


def test_addresses() -> None:
    assert ipAdd(1) == "10.0.0.1"
    assert ipAdd(256) == "10.0.1.0"
    assert ipAdd(5, prefixLen=24, ipBaseNum=ipParse("192.168.1.0")) == "192.168.1.5"
    assert ipAdd(3, prefixLen=16, ipBaseNum=ipParse("172.16.9.9")) == "172.16.0.3"
    with pytest.raises(ValidationError):
        ipAdd(256, prefixLen=24)
    assert ipParse("10.0.0.1") == 0x0A000001
    assert ipParse("10.1") == 0x0A000001  # short forms fill zeros before the last part
    assert ipStr(0xC0A80101) == "192.168.1.1"
    assert netParse("10.0.0.0/8") == (0x0A000000, 8)
    assert netParse("192.168.0.1") == (0xC0A80001, 24)
    assert macColonHex(1) == "00:00:00:00:00:01"
    assert macColonHex(0x0A0B0C0D0E0F) == "0a:0b:0c:0d:0e:0f"


def test_numbers_and_sorting() -> None:
    assert list(irange(1, 3)) == [1, 2, 3]
    assert sorted(["h10", "h2", "h1", "s1"], key=natural) == ["h1", "h2", "h10", "s1"]
    assert naturalSeq(["h2", "s10"]) == [["h", 2, ""], ["s", 10, ""]]
    assert makeNumeric("3") == 3 and makeNumeric("2.5") == 2.5 and makeNumeric("x") == "x"
    assert splitArgs("tree,2,fanout=3,x=y") == ("tree", [2], {"fanout": 3, "x": "y"})


class _Thing:
    def __init__(self, *args: object, **kwargs: object) -> None:
        self.args, self.kwargs = args, kwargs


def test_custom_presets_parameters() -> None:
    make = custom(_Thing, bw=10)
    thing = make("a", bw=5, delay="1ms")
    assert thing.args == ("a",)
    assert thing.kwargs == {"bw": 10, "delay": "1ms"}  # the preset wins, as in Mininet
    assert make.fn_cls is _Thing and make.fn_params == {"bw": 10}  # type: ignore[attr-defined]


def test_special_and_custom_classes() -> None:
    cls = specialClass(_Thing, append=[1], defaults={"stp": 0})
    thing = cls("s1", stp=1)
    assert isinstance(thing, _Thing)
    assert thing.args == ("s1", 1) and thing.kwargs == {"stp": 1}
    picked = customClass({"thing": _Thing}, "thing,stp=1")
    assert picked("s1").kwargs == {"stp": 1}
    assert customClass({"thing": _Thing}, "thing") is _Thing
    with pytest.raises(ValidationError) as exc:
        customClass({"thing": _Thing}, "other")
    assert exc.value.choices == ("thing",)


def test_build_topo() -> None:
    topo = buildTopo({"linear": LinearTopo}, "linear,3")
    assert isinstance(topo, Topo) and topo.switches() == ["s1", "s2", "s3"]
    with pytest.raises(ValidationError) as exc:
        buildTopo({"linear": LinearTopo}, "ring,3")
    assert "linear" in str(exc.value)


def test_log_functions_join_and_add_no_newline(capsys: pytest.CaptureFixture[str]) -> None:
    mlog.setLogLevel("info")
    try:
        mlog.info("*** Adding", 3, "hosts")
        mlog.info(" done 100%\n")
        mlog.debug("hidden")
        mlog.lg.output("out %s\n")
    finally:
        mlog.setLogLevel("output")
    assert capsys.readouterr().err == "*** Adding 3 hosts done 100%\nout %s\n"
    with pytest.raises(ValidationError):
        mlog.setLogLevel("loud")
