"""How a running link applies parameters, goes down and up, and reports counters:
one driver per backend.

- :class:`TcDriver` (backends ``tc`` and ``veth``): qdiscs on each end's egress;
  a change that the kernel cannot do (delay without ``sch_netem``) is refused before
  anything changes, naming the engine as the alternative.
- :class:`EngineDriver` (backend ``engine``): requests to the run's ``linkd``; both
  directions change in one request, which the daemon applies whole or not at all.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fidelnet.errors import KernelError, UnsupportedError
from fidelnet.kernel import bpf, nic, tc
from fidelnet.links import tcshape
from fidelnet.links.choice import Choice, bpf_loss, tc_gaps
from fidelnet.links.endpoints import EndpointChoice
from fidelnet.links.engine import LinkEngine
from fidelnet.links.engine_params import direction_seed, to_engine
from fidelnet.topology.spec import LinkParams

if TYPE_CHECKING:
    from fidelnet.nodes.intf import Interface

log = logging.getLogger(__name__)

__all__ = ["EngineDriver", "LinkDriver", "StatePlan", "TcDriver"]

_STAGE_S = 0.005
"""An engine link's interfaces come up this long before the engine restores it."""


def _nothing() -> None:
    return None


def _undilated() -> float:
    return 1.0


@dataclass
class StatePlan:
    """A link going down or up at an instant known ahead, ``at_ns``
    (CLOCK_REALTIME). The timeline calls ``ahead`` ``lead_s`` seconds before the
    instant (when it is not None), then ``now`` at the instant: it returns when
    the path changed (CLOCK_REALTIME ns). ``cancel`` forgets what is not done yet.
    ``exact``: the backend changes the path at ``at_ns`` itself, however late the
    timeline calls ``now`` (an engine link: ``now`` only moves the carrier)."""

    at_ns: int
    now: Callable[[], int]
    ahead: Callable[[], None] | None = None
    lead_s: float = 0.0
    cancel: Callable[[], None] = _nothing
    exact: bool = False


class LinkDriver:
    """The backend side of one link."""

    def __init__(self, choice: Choice) -> None:
        self.choice = choice

    @property
    def backend(self) -> str:
        return self.choice.backend

    def apply(
        self,
        ends: tuple[Interface, Interface],
        ab: LinkParams | None,
        ba: LinkParams | None,
        where: str,
        *,
        initial: bool = False,
    ) -> None:
        """Apply new full parameters to the directions given (None: unchanged)."""
        raise NotImplementedError

    def gaps(self, ab: LinkParams | None, ba: LinkParams | None) -> list[str]:
        """What this backend cannot do of the parameters given (nothing, but for tc)."""
        del ab, ba
        return []

    def set_up(self, ends: tuple[Interface, Interface], up: bool) -> int:
        """Both ends down or up; returns when the path changed (CLOCK_REALTIME ns):
        down, as the first end goes; up, once the second end is.

        Up, a switch's end comes up first: the end that comes up first has no
        carrier until its peer is up, and a host that sends then (an ARP request
        for the traffic it was sending) loses it and retries a second later
        (measured: a 2 s flap of a host's link cost 2.97 s of traffic). Then the
        kernel is made to apply both carriers at once (:func:`nic.sync_carrier`)
        instead of on a later kernel worker."""
        at = time.time_ns()
        order = sorted(ends, key=lambda i: i.node.kind != "switch") if up else ends
        for intf in order:
            intf.set_up(up)
        if up:
            for intf in ends:
                try:
                    nic.sync_carrier(intf.node.netns, intf.name)
                except KernelError as exc:
                    log.debug("%s", exc)
        return time.time_ns() if up else at

    def plan_state(self, ends: tuple[Interface, Interface], up: bool, at_ns: int) -> StatePlan:
        """Plan the link going down or up at ``at_ns`` (CLOCK_REALTIME). Here nothing
        can be done ahead: the timeline does it all at the instant."""
        return StatePlan(at_ns, lambda: self.set_up(ends, up))

    def stats(self, ends: tuple[Interface, Interface]) -> dict[str, Any]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "reason": self.choice.reason}

    def remove(self) -> None:
        """Forget the link's backend state before its interfaces are deleted."""
        self.close()

    def close(self) -> None:
        """Release what the driver holds in this process (the run is ending, or the
        link moved to another driver)."""


class TcDriver(LinkDriver):
    """Kernel qdiscs (or, until something is asked, a bare veth pair). In a dilated
    run, ``tdf`` gives the factor now: rates are divided by it, delays multiplied
    (:func:`fidelnet.links.tcshape.dilated`)."""

    def __init__(
        self,
        choice: Choice,
        caps: Callable[[], frozenset[str]],
        tdf: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(choice)
        self.caps = caps  # probed on first need: a bare veth link may never ask
        self.tdf = tdf or _undilated
        # Keyed by (node, interface index): indexes repeat across namespaces.
        self._whole_packets: set[tuple[str, int]] = set()  # segmentation off
        self._counters: dict[tuple[str, int], int] = {}  # BPF loss counter maps

    def apply(
        self,
        ends: tuple[Interface, Interface],
        ab: LinkParams | None,
        ba: LinkParams | None,
        where: str,
        *,
        initial: bool = False,
    ) -> None:
        pairs = [(intf, p) for intf, p in zip(ends, (ab, ba), strict=True) if p is not None]
        gaps = self.gaps(ab, ba)
        if gaps:
            raise UnsupportedError(
                "; ".join(gaps),
                f"{where} (built on the {self.backend} backend)",
                "the engine backend does all of this: build the link with backend "
                "'engine', or leave its backend 'auto' so that it moves to the engine",
            )
        for intf, params in pairs:
            nl = intf.node.netlink()
            if params.is_empty():
                if not initial:
                    tc.clear_root(nl, intf.index)
                    tc.remove_bpf_filter(nl, intf.index)
                continue
            in_bpf = bpf_loss(params, self.caps())
            key = (intf.node.name, intf.index)
            if in_bpf and key not in self._whole_packets:
                # Loss acts on each frame: the device must get wire packets, not
                # super-frames (a stolen 64 KiB frame would be 45 packets lost).
                out, err, code = intf.node.pexec(nic.segmentation_off_argv(intf.name))
                if code != 0:
                    raise KernelError(f"{where}: {intf}: segmentation off: {(out + err)[:200]}")
                self._whole_packets.add(key)
            counter = None
            if in_bpf:
                counter = self._counters.get(key)
                if counter is None:
                    counter = self._counters[key] = bpf.counter()
            real = tcshape.dilated(params, self.tdf())
            tcshape.apply(
                nl, intf.index, real, change=not initial, bpf_loss=in_bpf, counter_fd=counter
            )
            if self.choice.backend == "veth":
                self.choice = Choice("tc", "shaped at runtime")

    def gaps(self, ab: LinkParams | None, ba: LinkParams | None) -> list[str]:
        shaped = [p for p in (ab, ba) if p is not None and not p.is_empty()]
        caps = self.caps() if shaped else frozenset()
        return sorted({g for p in shaped for g in tc_gaps(p, caps)})

    def stats(self, ends: tuple[Interface, Interface]) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.backend}
        for key, intf in zip(("ab", "ba"), ends, strict=True):
            d: dict[str, Any] = {"qdiscs": tc.qdisc_stats(intf.node.netlink(), intf.index)}
            counter = self._counters.get((intf.node.name, intf.index))
            if counter is not None:  # random loss by BPF: what it took, as the engine's
                d["drops"] = {"loss": bpf.read_counter(counter)}
            out[key] = d
        return out

    def close(self) -> None:
        for fd in self._counters.values():
            os.close(fd)
        self._counters.clear()


class EngineDriver(LinkDriver):
    """A link carried by the run's link engine daemon."""

    def __init__(
        self,
        choice: Choice,
        engine: LinkEngine,
        name: str,
        seed: int,
        endpoint: EndpointChoice | None = None,
    ) -> None:
        super().__init__(choice)
        self.engine = engine
        self.name = name
        self.seed = seed
        self.endpoint = endpoint or EndpointChoice("tap", "moved at runtime beside a veth")

    def engine_params(self, params: LinkParams, direction: str, where: str) -> dict[str, Any]:
        seed = params.seed if params.seed is not None else self.seed
        return to_engine(params, direction_seed(seed, f"{self.name}/{direction}"), where)

    def apply(
        self,
        ends: tuple[Interface, Interface],
        ab: LinkParams | None,
        ba: LinkParams | None,
        where: str,
        *,
        initial: bool = False,
    ) -> None:
        del ends, initial
        self.engine.set_link(
            self.name,
            None if ab is None else self.engine_params(ab, "ab", f"{where}.ab"),
            None if ba is None else self.engine_params(ba, "ba", f"{where}.ba"),
        )

    def set_up(self, ends: tuple[Interface, Interface], up: bool) -> int:
        """The engine stops carrying first when the link goes down, and starts last
        when it comes up: the link is cut and restored by one control message each,
        in the engine's own instant, while the interfaces' carrier (what nodes and
        routing daemons see) follows within a millisecond (docs/events.md)."""
        if up:
            super().set_up(ends, True)  # carrier back; the engine still carries nothing
        sent = time.time_ns()
        applied = self.engine.set_state(self.name, up)
        if not up:
            super().set_up(ends, False)
        return _realtime(applied, sent)

    def plan_state(self, ends: tuple[Interface, Interface], up: bool, at_ns: int) -> StatePlan:
        """The engine is told now and changes the path at ``at_ns`` itself, to its
        own clock's precision, whatever the timeline's delays; the carrier follows
        at the instant (down) or comes up 5 ms ahead (up), as with :meth:`set_up`."""
        offset = realtime_offset_ns()
        applied, planned = self.engine.plan_state(self.name, up, at_ns - offset)
        effective = at_ns if planned else applied + offset

        def now() -> int:
            if not up:
                LinkDriver.set_up(self, ends, False)
            return effective

        def ahead() -> None:
            LinkDriver.set_up(self, ends, True)

        def cancel() -> None:
            # The state the carrier says: what the timeline has done so far.
            self.engine.set_state(self.name, ends[0].is_up())

        return StatePlan(at_ns, now, ahead if up else None, _STAGE_S, cancel, exact=planned)

    def stats(self, ends: tuple[Interface, Interface]) -> dict[str, Any]:
        del ends
        out: dict[str, Any] = dict(self.engine.stats(self.name).get(self.name, {}))
        out["backend"] = "engine"
        return out

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "engine_link": self.name,
            "seed": self.seed,
            "endpoint": self.endpoint.kind,
            "endpoint_reason": self.endpoint.reason,
        }

    def remove(self) -> None:
        if self.engine.alive():
            self.engine.remove_link(self.name)


def realtime_offset_ns() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of three brackets (a
    preemption between two clock reads would put milliseconds into it)."""
    best: tuple[int, int] | None = None
    for _ in range(3):
        a = time.time_ns()
        m = time.monotonic_ns()
        b = time.time_ns()
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2 - m)
    assert best is not None
    return best[1]


def _realtime(applied_mono_ns: int | None, fallback_ns: int) -> int:
    """The engine's CLOCK_MONOTONIC instant on CLOCK_REALTIME (``fallback_ns`` when
    the engine did not say)."""
    if applied_mono_ns is None:
        return fallback_ns
    return applied_mono_ns + realtime_offset_ns()
