"""Which endpoint an engine link gets (fidelnet.links.endpoints), and the
validation of the fields that ask for one."""

from __future__ import annotations

import pytest

from fidelnet.errors import UnsupportedError, ValidationError
from fidelnet.links.endpoints import (
    LINK_MEMORY,
    MAX_AUTO_RATE,
    choose_endpoint,
    xsk_peer_name,
)
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.validate import problems

PLENTY = 100 * LINK_MEMORY
NONE = LinkParams()


def pick(requested: str, ab: LinkParams, ba: LinkParams = NONE, **kw: object) -> tuple[str, str]:
    args: dict[str, object] = {
        "where": "link h1-h2",
        "in_namespaces": True,
        "missing": None,
        "memory_left": PLENTY,
    }
    args.update(kw)
    c = choose_endpoint(requested, ab, ba, **args)  # type: ignore[arg-type]
    return c.kind, c.reason


def test_a_delayed_or_shaped_link_gets_af_xdp_for_its_arrival_stamps() -> None:
    for p in (LinkParams(delay=0.01), LinkParams(bw=10e6), LinkParams(loss=1.0)):
        kind, reason = pick("auto", p)
        assert kind == "af_xdp", p
        assert "stamps" in reason
    # one shaped direction is enough
    assert pick("auto", NONE, LinkParams(delay=0.001))[0] == "af_xdp"


def test_an_unshaped_link_keeps_taps_whose_super_frames_pass_whole() -> None:
    kind, reason = pick("auto", NONE, NONE)
    assert kind == "tap"
    assert "super-frames" in reason


def test_a_rate_above_the_limit_keeps_taps() -> None:
    kind, reason = pick("auto", LinkParams(bw=MAX_AUTO_RATE * 2), LinkParams(bw=10e6))
    assert kind == "tap"
    assert "Mbit/s or more" in reason
    assert pick("auto", LinkParams(bw=MAX_AUTO_RATE))[0] == "tap"
    assert pick("auto", LinkParams(bw=MAX_AUTO_RATE * 0.99))[0] == "af_xdp"


def test_auto_falls_back_to_tap_and_says_why() -> None:
    p = LinkParams(delay=0.01)
    kind, reason = pick("auto", p, missing="this kernel has no AF_XDP sockets")
    assert (kind, reason) == ("tap", "no AF_XDP: this kernel has no AF_XDP sockets")
    kind, reason = pick("auto", p, in_namespaces=False)
    assert kind == "tap" and "host namespace" in reason
    kind, reason = pick("auto", p, memory_left=LINK_MEMORY - 1)
    assert kind == "tap" and "memory" in reason


def test_asked_for_by_name() -> None:
    assert pick("tap", LinkParams(delay=0.01)) == ("tap", "asked for")
    assert pick("af_xdp", NONE) == ("af_xdp", "asked for")
    # the memory share binds auto only
    assert pick("af_xdp", NONE, memory_left=0)[0] == "af_xdp"


def test_af_xdp_asked_for_but_impossible_is_an_error_naming_the_field() -> None:
    with pytest.raises(UnsupportedError) as err:
        pick("af_xdp", NONE, missing="this kernel has no AF_XDP sockets")
    msg = str(err.value)
    assert "link h1-h2.endpoint" in msg and "no AF_XDP sockets" in msg and "'tap'" in msg
    with pytest.raises(UnsupportedError, match="host namespace"):
        pick("af_xdp", NONE, in_namespaces=False)


def test_peer_names_fit_ifnamsiz() -> None:
    assert xsk_peer_name("h1-eth0", 3) == "h1-eth0-x"
    long = "r12345-eth1234"
    assert xsk_peer_name(long, 7) == "fnx7"
    assert len(xsk_peer_name("a" * 13, 1)) <= 15


def _spec(**link: object) -> TopologySpec:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1"))
    spec.add_node(NodeSpec("h2"))
    ls = LinkSpec("h1", "h2")
    for k, v in link.items():
        setattr(ls, k, v)
    spec.add_link(ls)
    return spec


def test_validation_names_the_field_and_the_choices() -> None:
    found = problems(_spec(endpoint="xdp"))
    assert len(found) == 1
    e = found[0]
    assert isinstance(e, ValidationError)
    assert e.field == "links[0].endpoint"
    assert e.choices == ("auto", "tap", "af_xdp")
    spec = _spec()
    spec.engine_endpoint = "sock"  # type: ignore[assignment]
    (e,) = problems(spec)
    assert e.field == "engine_endpoint" and "af_xdp" in str(e)


def test_an_endpoint_on_a_tc_link_is_refused() -> None:
    (e,) = problems(_spec(endpoint="af_xdp", backend="tc"))
    assert e.field == "links[0].endpoint" and "backend is tc" in e.problem
    assert problems(_spec(endpoint="auto", backend="tc")) == []
    assert problems(_spec(endpoint="tap", backend="engine")) == []


@pytest.mark.parametrize("bad", [0, 65, -1, 2.0, True, "2"])
def test_engine_threads_out_of_range_are_refused_by_name(bad: object) -> None:
    spec = _spec()
    spec.engine_threads = bad  # type: ignore[assignment]
    (e,) = problems(spec)
    assert e.field == "engine_threads"
    assert str(e).startswith("engine_threads: must be a whole number from 1 to 64")


def test_engine_threads_in_range_are_accepted() -> None:
    for n in (1, 2, 64):
        spec = _spec()
        spec.engine_threads = n
        assert problems(spec) == []
