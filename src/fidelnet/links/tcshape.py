"""The ``tc`` backend: one link direction's parameters as qdiscs on the sending
interface's egress.

Rate: an HTB class with the burst sized from the rate (:func:`fidelnet.kernel.tc.
burst_for`), and below it a pfifo (``max_queue_size``) or bfifo (``queue_bytes``).
``queue: fq``: a fair queue of flow classes below the rate instead
(:data:`fidelnet.kernel.tc.FQ_CLASSES`, each with its own FIFO of the limit).
Delay, jitter, loss, duplicate and corrupt: netem, below the HTB class when there is
a rate, else at the root. netem's own limit counts the packets it delays as well as
those waiting, so it is raised by the packets one bandwidth-delay product holds
(Mininet's fixed limit drops packets in flight on long fat links). Everything is
read back after it is set. Random loss on a kernel without netem: a BPF classifier
ahead of the root qdisc (:mod:`fidelnet.kernel.bpf`), the sending device's
segmentation off so that it acts on wire packets. :func:`fidelnet.links.choice.
tc_gaps` has already refused what this backend cannot do.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from fidelnet.kernel import bpf, tc
from fidelnet.kernel.netlink import Netlink
from fidelnet.topology.spec import LinkParams

__all__ = ["DEFAULT_QUEUE", "apply", "dilated", "netem_options"]

DEFAULT_QUEUE = 1000
"""Packets a shaped queue holds when no limit is given (Linux's txqueuelen)."""
_MTU_FRAME = 1514


def dilated(params: LinkParams, tdf: float) -> LinkParams:
    """``params`` in real time for a run dilated by ``tdf`` (:mod:`fidelnet.vt`): the
    rate divided by it, delay and jitter multiplied, so that the dilated nodes see
    the rate and delays asked. Queue limits, loss and the rest are unchanged."""
    if tdf == 1.0:
        return params
    return dataclasses.replace(
        params,
        bw=None if params.bw is None else params.bw / tdf,
        delay=None if params.delay is None else params.delay * tdf,
        jitter=None if params.jitter is None else params.jitter * tdf,
    )


def netem_options(params: LinkParams, bpf_loss: bool = False) -> dict[str, Any] | None:
    """pyroute2's netem keywords for ``params``, or None when it needs no netem.
    ``bpf_loss``: the loss is a BPF classifier's, not netem's."""
    opts: dict[str, Any] = {}
    if params.delay:
        opts["delay"] = round(params.delay * 1e6)
    if params.jitter:
        opts["jitter"] = round(params.jitter * 1e6)
    if params.loss and not bpf_loss:
        opts["loss"] = params.loss
    if params.duplicate:
        opts["duplicate"] = params.duplicate
    if params.corrupt:
        opts["prob_corrupt"] = params.corrupt
    if not opts:
        return None
    queue = params.max_queue_size or DEFAULT_QUEUE
    in_flight = 0
    if params.bw and params.delay:
        in_flight = int(params.bw / 8 * (params.delay + (params.jitter or 0)) / _MTU_FRAME) + 1
    opts["limit"] = queue + in_flight
    return opts


def apply(
    nl: Netlink,
    index: int,
    params: LinkParams,
    *,
    change: bool = False,
    bpf_loss: bool = False,
    counter_fd: int | None = None,
) -> None:
    """Shape interface ``index``'s egress as ``params`` asks. ``change=True`` alters
    an existing shaping in place where the structure allows it (an HTB rate change
    keeps its queue); otherwise the root is replaced. ``bpf_loss``: the loss is a
    BPF classifier ahead of the root qdisc (replaced in one step on a change) that
    counts what it takes in ``counter_fd`` (:func:`fidelnet.kernel.bpf.counter`)."""
    netem = netem_options(params, bpf_loss)
    if bpf_loss and params.loss:
        fd = bpf.load(bpf.loss_program(params.loss / 100, counter_fd))
        try:
            tc.set_bpf_filter(nl, index, fd, "fidelnet_loss")
        finally:
            os.close(fd)
    elif change:
        tc.remove_bpf_filter(nl, index)
    fair = params.queue == "fq"
    if change and (fair or not _same_structure(nl, index, params, netem)):
        change = False
    if not change:
        tc.clear_root(nl, index)
    if params.bw is not None:
        queue = params.max_queue_size
        if netem is None and queue is None and params.queue_bytes is None:
            queue = DEFAULT_QUEUE
        tc.set_rate(
            nl,
            index,
            params.bw,
            None if netem else queue,
            None if netem else params.queue_bytes,
            change=change,
            flows=tc.FQ_CLASSES if fair else 0,
        )
    if netem is not None:
        tc.set_netem(nl, index, netem, under_rate=params.bw is not None, change=change)


def _same_structure(
    nl: Netlink, index: int, params: LinkParams, netem: dict[str, Any] | None
) -> bool:
    qdiscs = tc.qdisc_stats(nl, index)
    if any(int(str(q["handle"]).rstrip(":"), 16) >= tc.FLOW_MINOR for q in qdiscs):
        return False  # a fair queue is rebuilt
    kinds = {q["kind"] for q in qdiscs}
    has_rate = "htb" in kinds
    has_netem = "netem" in kinds
    return has_rate == (params.bw is not None) and has_netem == (netem is not None)
