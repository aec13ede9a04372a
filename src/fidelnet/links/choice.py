"""Which backend carries a link: ``tc`` (the kernel), ``engine`` (linkd), or a bare
veth pair when nothing is asked of the link.

:func:`tc_gaps` lists, for one direction's parameters, what the ``tc`` backend cannot
honour on a kernel with the qdiscs in ``caps``; :func:`choose` applies the link's
requested backend: ``tc`` must honour everything or the run stops with an error
that names the missing piece and the engine as the alternative; ``engine`` is
taken as asked; ``auto`` takes ``tc`` when it can do all that is asked (and a plain
veth pair when nothing is asked), the engine otherwise. The reason for each choice
is kept, recorded in the run state and reported with results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fidelnet.errors import UnsupportedError
from fidelnet.kernel.tc import HTB_MAX_RATE
from fidelnet.topology.spec import LinkParams

__all__ = ["NEEDS_QDISCS", "Choice", "bpf_loss", "choose", "engine_gaps", "tc_gaps"]

Backend = Literal["veth", "tc", "engine", "hw"]

NEEDS_QDISCS: tuple[str, ...] = ("htb", "netem", "pfifo", "bfifo", "bpf_loss")
"""What the tc backend may use, probed once per run when a link needs shaping: its
qdiscs, and ``bpf_loss``, random loss by a BPF classifier where there is no netem
(:func:`bpf_loss`)."""

_NETEM_FIELDS = ("delay", "jitter", "loss", "duplicate", "corrupt")


@dataclass(frozen=True)
class Choice:
    """The backend of one link and why it was chosen."""

    backend: Backend
    reason: str


def bpf_loss(params: LinkParams, caps: frozenset[str]) -> bool:
    """Whether the tc backend does ``params``' loss with a BPF classifier: random loss
    on a kernel without netem but with BPF (:mod:`fidelnet.kernel.bpf`)."""
    return bool(params.loss) and "netem" not in caps and "bpf_loss" in caps


def tc_gaps(params: LinkParams, caps: frozenset[str]) -> list[str]:
    """What the tc backend cannot do for ``params`` on a kernel with ``caps``."""
    gaps: list[str] = []
    netem = [f for f in _NETEM_FIELDS if getattr(params, f)]
    if bpf_loss(params, caps):
        netem.remove("loss")
    if netem and "netem" not in caps:
        gaps.append(f"{', '.join(netem)} need sch_netem, which this kernel lacks")
    if params.bw is not None and params.bw > HTB_MAX_RATE:
        gaps.append(f"bw above {HTB_MAX_RATE / 1e9:.1f} Gbit/s (HTB's 32-bit rate)")
    if params.bw is not None and "htb" not in caps:
        gaps.append("bw needs sch_htb, which this kernel lacks")
    if params.jitter and not params.reorder:
        gaps.append("jitter without reordering (netem reorders jittered packets)")
    if params.jitter_dist == "normal":
        gaps.append("normal jitter (netem distribution tables are not loaded by this backend)")
    for name, what in (
        ("loss_model", "Gilbert-Elliott loss"),
        ("trace", "a delivery trace"),
        ("overhead", "per-packet overhead"),
        ("seed", "a seed (netem's random choices cannot be seeded)"),
    ):
        if getattr(params, name) is not None:
            gaps.append(what)
    if params.queue == "hifi":
        gaps.append("the hifi queue")
    if params.queue == "fq":
        if params.bw is None:
            gaps.append("the fq queue without bw (a veth queue never builds up)")
        netem_fq = [f for f in _NETEM_FIELDS if getattr(params, f) and f != "loss"]
        if params.loss and not bpf_loss(params, caps):
            netem_fq.append("loss")
        if netem_fq:
            gaps.append(f"the fq queue with {', '.join(netem_fq)} (netem below each flow class)")
    if (params.max_queue_size or params.queue_bytes) and params.bw is None:
        gaps.append("a queue limit without bw (a veth queue never builds up)")
    return gaps


def engine_gaps(params: LinkParams) -> list[str]:
    """What the engine backend cannot honour for ``params``."""
    if params.queue == "fq":
        return ["the fq queue (the engine's queues are droptail and hifi)"]
    return []


def choose(
    requested: str, ab: LinkParams, ba: LinkParams, caps: frozenset[str], where: str
) -> Choice:
    """The backend for a link whose directions have ``ab`` and ``ba``."""
    engine = sorted(set(engine_gaps(ab)) | set(engine_gaps(ba)))
    if requested == "engine":
        if engine:
            raise UnsupportedError(
                "; ".join(engine), f"{where} (backend engine)", "choose backend 'tc' or 'auto'"
            )
        return Choice("engine", "asked for")
    empty = ab.is_empty() and ba.is_empty()
    gaps = sorted(set(tc_gaps(ab, caps)) | set(tc_gaps(ba, caps)))
    if requested == "hw":
        if gaps:
            raise UnsupportedError(
                "; ".join(gaps),
                f"{where} (backend hw: real interfaces, shaped by the kernel's qdiscs)",
                "drop what the tc backend cannot do, or give this link backend 'engine'",
            )
        return Choice("hw", "asked for: a pair from hardware_pairs")
    if gaps and engine:
        raise UnsupportedError(
            "; ".join(gaps + engine),
            f"{where} (neither tc nor the engine can do all of it)",
            "drop the fq queue, or what the tc backend cannot do",
        )
    if requested == "tc":
        if gaps:
            raise UnsupportedError(
                "; ".join(gaps),
                f"{where} (backend tc)",
                "the engine backend does all of this: choose backend 'engine' or 'auto'",
            )
        return Choice("tc", "asked for")
    if empty:
        return Choice("veth", "nothing asked of the link")
    if not gaps:
        if bpf_loss(ab, caps) or bpf_loss(ba, caps):
            return Choice("tc", "the kernel can do all that is asked (loss by a BPF classifier)")
        return Choice("tc", "the kernel can do all that is asked")
    return Choice("engine", "tc cannot: " + "; ".join(gaps))
