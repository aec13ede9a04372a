"""Virtual time for a run (issue 11): the run's clock page, and what its nodes'
processes and links do to follow it.

A network built with ``tdf`` (``Network(spec, tdf=4)``, ``TopologySpec.tdf``) has one
:class:`~fidelnet.vt.page.TimePage`, a file in the state directory recorded before it
exists, and:

- every process started in one of its nodes (shells, ``cmd``, ``popen``, their
  children) has the clock shim preloaded on it;
- its link engine reads the same page (``fidelnet-linkd --clock-page``): engine
  links run their rates, delays and queues in virtual time;
- its ``tc`` links are shaped at the rate divided by the TDF, delays multiplied
  (:func:`fidelnet.links.tcshape.dilated`);
- each node's namespace has ``net.ipv4.tcp_rto_min_us`` scaled by the TDF, so that
  TCP's minimum retransmission timeout is 200 virtual ms (it applies to sockets
  opened after it is set).

``Network.set_tdf`` changes the factor of every node and engine link at one instant
(one write of the page), then re-shapes the ``tc`` links and rescales the RTO.

Programs the shim cannot reach (static binaries, Go) are found as they start
(:mod:`fidelnet.vt.reach`): a warning, and the result's provenance (:func:`describe`).

Not there yet (docs/virtual-time.md): VM nodes.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import weakref
from typing import TYPE_CHECKING, Any

from fidelnet.errors import FidelnetError, StateError, ValidationError
from fidelnet.kernel.state import STATE_DIR
from fidelnet.links.drivers import TcDriver
from fidelnet.topology.spec import AutoTdf, TopologySpec
from fidelnet.vt.adapt import Adaptor
from fidelnet.vt.page import TimePage, check_tdf, shim_path
from fidelnet.vt.reach import Watch

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.nodes.node import Node

__all__ = [
    "RTO_MIN_US",
    "describe",
    "enable",
    "env",
    "node_added",
    "open_page",
    "set_tdf",
    "started",
    "stopping",
    "tdf_arg",
]

_adaptors: weakref.WeakKeyDictionary[Network, Adaptor] = weakref.WeakKeyDictionary()

log = logging.getLogger("fidelnet")

RTO_MIN_US = 200_000
"""Linux's minimum TCP retransmission timeout (``TCP_RTO_MIN``), in µs."""
_RTO_KEY = "net.ipv4.tcp_rto_min_us"


def tdf_arg(spec: TopologySpec, tdf: object, field: str = "tdf") -> None:
    """Apply ``Network(spec, tdf=...)``: a number, ``"auto"`` (:class:`AutoTdf`'s
    defaults) or an :class:`AutoTdf`; anything else is refused naming ``field``."""
    if tdf == "auto":
        tdf = AutoTdf()
    if isinstance(tdf, AutoTdf):
        low = check_tdf(tdf.low, f"{field}.low")
        high = check_tdf(tdf.high, f"{field}.high")
        start = check_tdf(tdf.start, f"{field}.start")
        if not low <= start <= high:
            raise ValidationError(
                f"{field}.start", f"must be within low ({low:g}) and high ({high:g})", start
            )
        if not 0.05 <= tdf.period_s <= 60:
            raise ValidationError(f"{field}.period_s", "must be 0.05 to 60 seconds", tdf.period_s)
        if not 0.1 <= tdf.target_busy <= 0.95:
            raise ValidationError(f"{field}.target_busy", "must be 0.1 to 0.95", tdf.target_busy)
        spec.tdf, spec.tdf_auto = start, tdf
        return
    if isinstance(tdf, str):
        raise ValidationError(field, "a number, or auto", tdf, ["auto"])
    spec.tdf, spec.tdf_auto = check_tdf(tdf, field), None


def started(net: Network) -> None:
    """The network is built: start its adaptor when its TDF is ``auto``."""
    auto = net.spec.tdf_auto
    if auto is None or net.vt_page is None or net in _adaptors:
        return
    adaptor = Adaptor(net, auto)
    _adaptors[net] = adaptor
    adaptor.start()


def stopping(net: Network) -> None:
    """The network is being torn down: its adaptor stops first."""
    adaptor = _adaptors.pop(net, None)
    if adaptor is not None:
        adaptor.stop()


def open_page(net: Network) -> None:
    """The run's clock page, when its topology is dilated (recorded first)."""
    if net.spec.tdf is None or net.vt_page is not None:
        return
    shim_path()  # a clear error now rather than undilated programs later
    path = os.path.join(STATE_DIR, f"{net.run_id}-vt.page")
    net.state_record("file", path=path)
    net.vt_page = TimePage(path, net.spec.tdf)
    watch = os.path.join(STATE_DIR, f"{net.run_id}-vt.log")
    net.state_record("file", path=watch)
    net.vt_watch = Watch(watch)


def enable(net: Network, tdf: object, field: str = "tdf") -> None:
    """Dilate a run that is being built one node at a time (the Mininet layer: a
    host's ``tdf=``). A run has one factor: a second, different one is refused,
    naming ``field``; so is a run whose processes already run undilated (a node's
    shell started, the link engine running) or that has a VM node."""
    value = check_tdf(tdf, field)
    page = net.vt_page
    if page is not None:
        if value != page.tdf:
            raise ValidationError(
                field,
                f"a run has one time dilation factor, and this one's is {page.tdf:g} "
                "(net.set_tdf changes it for every node)",
                tdf,
            )
        return
    started = [n.name for n in net.nodes.values() if n.has_shell()]
    if started or net.engine is not None:
        what = f"node {started[0]}'s shell" if started else "the link engine"
        raise ValidationError(
            field,
            f"virtual time must be set before {what} started: give tdf to the first "
            "host, or Mininet(..., tdf=)",
            tdf,
        )
    for name, node in net.nodes.items():
        if node.spec.backend != "netns":
            raise ValidationError(
                f"nodes.{name}.backend",
                "virtual time reaches namespace nodes only for now",
                node.spec.backend,
                ["netns"],
            )
    net.spec.tdf = value
    if net.is_open:
        open_page(net)
        _follow(net, value)


def _follow(net: Network, tdf: float) -> None:
    """Shape the tc links for ``tdf`` and scale every node's TCP minimum RTO."""
    for link in net.links:
        if isinstance(link.driver, TcDriver):
            ab, ba = link.params("ab"), link.params("ba")
            if not (ab.is_empty() and ba.is_empty()):
                link.driver.apply((link.intf1, link.intf2), ab, ba, link.where)
    for node in net.nodes.values():
        _scale_rto(node, tdf)


def env(net: Network) -> dict[str, str]:
    """What a node's process gets in its environment for virtual time (nothing for an
    undilated run)."""
    page = net.vt_page
    if page is None:
        return {}
    out = {"LD_PRELOAD": shim_path(), "FIDELNET_VT_PAGE": str(page.path)}
    if net.vt_watch is not None:
        out["FIDELNET_VT_LOG"] = net.vt_watch.path
    return out


def node_added(net: Network, node: Node) -> None:
    """A node of a dilated run now exists: scale its TCP minimum RTO."""
    if net.vt_page is not None:
        _scale_rto(node, net.vt_page.tdf)


def _scale_rto(node: Node, tdf: float) -> None:
    if node.netns is None or node.kind == "switch":
        return  # never the machine's own namespace; switches hold no sockets
    try:
        node.interior().write_sysctl(_RTO_KEY, str(max(1, round(RTO_MIN_US * tdf))))
    except (OSError, FidelnetError) as exc:  # an older kernel: fixed per machine
        log.warning("%s: cannot scale the TCP minimum RTO to the TDF: %s", node.name, exc)


def describe(net: Network) -> dict[str, Any]:
    """A dilated run's virtual time for a result's provenance: the TDF now, every
    factor it had (wall-clock time, TDF, why) and the programs that ran undilated;
    empty for an undilated run."""
    page = net.vt_page
    if page is None:
        return {}
    unreached = net.vt_watch.poll() if net.vt_watch is not None else []
    auto = net.spec.tdf_auto
    return {
        "tdf": page.tdf,
        "auto": None
        if auto is None
        else {"low": auto.low, "high": auto.high, "target_busy": auto.target_busy},
        "timeline": [
            {
                "at": _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(),
                "tdf": f,
                "reason": why,
            }
            for t, f, why in page.history
        ],  # fmt: skip
        "unreached": [{"path": u.path, "why": u.why} for u in unreached],
    }


def set_tdf(net: Network, tdf: float, reason: str = "set_tdf") -> None:
    """Change the run's TDF now: every node's clocks and every engine link go on
    from where they are (one write of the page); then the ``tc`` links are shaped
    for the new factor and the nodes' TCP minimum RTO rescaled."""
    value = check_tdf(tdf)
    if net.vt_page is None:
        raise StateError(
            "this run has no virtual time: build it with tdf (Network(spec, tdf=1.0) "
            "to change the factor later)"
        )
    net.vt_page.set_tdf(value, reason)
    net.spec.tdf = value
    engine = net.engine
    if engine is not None and engine.alive():
        engine.request("clock")  # every engine loop re-arms its timer now
    _follow(net, value)
