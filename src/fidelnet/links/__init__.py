"""Runtime links: a veth pair between two nodes, shaped by the kernel ``tc`` backend.

Until the link engine lands, rate limits (``bw``, ``max_queue_size``) are applied by
HTB on each end's egress. Delay, jitter and loss need ``sch_netem``, which some
kernels lack: they are refused with an error before any kernel object is made,
never dropped silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fidelnet.errors import UnsupportedError
from fidelnet.kernel import tc
from fidelnet.topology.spec import LinkParams, LinkSpec

if TYPE_CHECKING:
    from fidelnet.nodes.intf import Interface

__all__ = ["Link", "unsupported_params"]


class Link:
    """A link between two interfaces."""

    def __init__(self, spec: LinkSpec, intf1: Interface, intf2: Interface) -> None:
        self.spec = spec
        self.intf1 = intf1
        self.intf2 = intf2
        intf1.link = self
        intf2.link = self

    def __repr__(self) -> str:
        a, b = self.intf1, self.intf2
        return f"<Link {a.node.name}:{a.name}<->{b.node.name}:{b.name}>"

    def __str__(self) -> str:
        return f"{self.intf1.name}<->{self.intf2.name}"

    def apply_params(self) -> None:
        """Shape each end's egress as the spec asks (a to b on intf1, b to a on intf2)."""
        for intf, params in (
            (self.intf1, self.spec.direction(self.spec.a)),
            (self.intf2, self.spec.direction(self.spec.b)),
        ):
            if params.bw is not None:
                tc.set_rate(intf.node.netlink(), intf.index, params.bw, params.max_queue_size)


def unsupported_params(params: LinkParams, where: str, has_netem: bool) -> None:
    """Raise for parameters the ``tc`` backend cannot honour on this kernel."""
    wanted = {
        k: v
        for k, v in (("delay", params.delay), ("jitter", params.jitter), ("loss", params.loss))
        if v is not None
    }
    if params.max_queue_size is not None and params.bw is None:
        wanted["max_queue_size"] = params.max_queue_size
    if not wanted:
        return
    names = ", ".join(f"{k}={v}" for k, v in wanted.items())
    if not has_netem:
        raise UnsupportedError(
            "sch_netem (the kernel's delay/loss qdisc)",
            f"{where}: {names}",
            "the userspace link engine (link='engine') will emulate these; until it "
            "lands, remove them or run on a kernel with sch_netem",
        )
    raise UnsupportedError(
        "netem support in fidelnet's tc backend (not yet written)",
        f"{where}: {names}",
        "it arrives with the link-engine issue",
    )
