"""The capacity check: does an experiment ask more than this machine carries
faithfully? Answered before anything is built.

Each traffic item is a :class:`Demand`: packets per second over a path, and how
many links of each backend the path crosses. What one packet costs the machine is
fitted from the calibrated breaking points of chains of 1, 3 and 6 links
(:func:`cost_model`: a fixed part, the generator, receiver and first hop, plus a
part per link, per backend), so the rate a path of any length carries without loss
is estimated from the chains measured, and the demand is compared with it. Items
run one after the other, so each is judged alone. CPU-limited nodes are judged
together: their ``cpu`` shares add up.

A :class:`Finding` says what is over, by how much, and what would help (a lower
rate, fewer hops, and, once virtual time exists, a time dilation factor). Callers
print findings as warnings, or refuse to start with ``--strict``.

Bit rates are compared too, where calibration found a rate a backend could not
carry (the mean of its 10 ms windows under 97 % of the rate): the engine at 1 Gbit/s
of full-size frames on the reference machine. The packet capacity is measured with
64-byte frames, so for large frames it is an upper bound, and the bit-rate check is
what catches them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fidelnet.fidelity.profile import Profile

__all__ = ["FAITHFUL_RATE", "Demand", "Finding", "assess", "cost_model", "rate_limit"]


@dataclass(frozen=True)
class Demand:
    """One traffic item's forwarding work."""

    name: str
    pps: float
    hops: Mapping[str, float] = field(default_factory=dict)
    """Links on the path per backend (``tc`` for tc-shaped and bare veth links,
    ``engine``); for several flows at once, averaged over them by their rates."""
    what: str = ""
    bps: Mapping[str, float] = field(default_factory=dict)
    """Bits per second (L2 frames) the item puts on each backend's links, where it
    is known."""


@dataclass(frozen=True)
class Finding:
    """An experiment asks more than the machine carries faithfully."""

    subject: str
    ratio: float
    """Work asked over capacity (above 1)."""
    message: str


def _pps(v: float) -> str:
    return f"{v / 1000:,.0f} kpps" if v >= 10_000 else f"{v:,.0f} pps"


def _backend(name: str) -> str:
    return "bare veth or tc" if name == "tc" else name


def cost_model(profile: Profile, backend: str) -> tuple[float, float] | None:
    """Seconds of the machine one packet costs on a chain of ``backend`` links:
    ``(fixed, per_link)``, fitted (least squares) to the inverse of the calibrated
    breaking points, ``1 / pps = fixed + per_link x links``; None when the profile
    has no chain of that backend. With one chain length, all of it is per link."""
    points = [
        (float(f.links), 1.0 / f.breaking_pps)
        for f in profile.forwarding
        if f.backend == backend and f.layout == "chain" and f.breaking_pps > 0
    ]
    if not points:
        return None
    if len({x for x, _ in points}) < 2:
        x, t = points[0]
        return 0.0, t / x
    n = len(points)
    mx = sum(x for x, _ in points) / n
    mt = sum(t for _, t in points) / n
    slope = sum((x - mx) * (t - mt) for x, t in points) / sum((x - mx) ** 2 for x, _ in points)
    if slope <= 0:  # longer chains were not slower: no per-link cost to see
        return mt, 0.0
    return max(0.0, mt - slope * mx), slope


def _measured(profile: Profile, backend: str) -> str:
    chains = sorted(
        (f.links, f.breaking_pps)
        for f in profile.forwarding
        if f.backend == backend and f.layout == "chain"
    )
    return ", ".join(f"{links} link{'s' if links > 1 else ''} {_pps(pps)}" for links, pps in chains)


FAITHFUL_RATE = 0.97
"""A backend carried a rate faithfully when the mean of its 10 ms windows reached
this share of it."""


def rate_limit(profile: Profile, backend: str) -> tuple[float, float] | None:
    """``(carried, failed)``: the highest calibrated rate ``backend`` carried
    faithfully and the lowest it did not, when calibration found one it did not."""
    seen = [r for r in profile.rate_accuracy if r.backend == backend and r.windows > 0]
    failed = [r.rate_bps for r in seen if r.mean_ratio < FAITHFUL_RATE]
    if not failed:
        return None
    lowest_failed = min(failed)
    carried = [
        r.rate_bps for r in seen if r.mean_ratio >= FAITHFUL_RATE and r.rate_bps < lowest_failed
    ]
    return (max(carried) if carried else 0.0), lowest_failed


def _bits(v: float) -> str:
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} bit/s"


def _rate_findings(d: Demand, profile: Profile) -> list[Finding]:
    out = []
    for backend, bps in sorted(d.bps.items()):
        limit = rate_limit(profile, backend)
        if limit is None or bps <= limit[0]:
            continue
        carried, failed = limit
        got = next(
            r.mean_ratio
            for r in profile.rate_accuracy
            if r.backend == backend and r.rate_bps == failed
        )
        known = bps >= failed
        out.append(
            Finding(
                d.name,
                bps / carried if carried else math.inf,
                f"traffic {d.name} ({d.what or _pps(d.pps)}) puts {_bits(bps)} on "
                f"{_backend(backend)} links; calibration saw them carry "
                f"{_bits(carried)} faithfully but only {100 * got:.0f} % of {_bits(failed)}"
                + (
                    ", so expect an untrusted verdict"
                    if known
                    else ": between the two the result is not known, watch the verdict"
                ),
            )
        )
    return out


def assess(
    demands: Iterable[Demand],
    profile: Profile | None,
    *,
    cpu_asked: float = 0.0,
) -> list[Finding]:
    """What in ``demands`` (and the CPU-limited nodes' summed ``cpu_asked``, a share
    of the whole machine) exceeds the machine; empty when all fits. Without a
    profile only the CPU is judged."""
    found: list[Finding] = []
    if cpu_asked > 1.0 + 1e-9:
        found.append(
            Finding(
                "cpu",
                cpu_asked,
                f"CPU-limited nodes ask for {100 * cpu_asked:.0f} % of the machine in "
                "total: their limits cannot all hold at once; lower their cpu shares",
            )
        )
    if profile is None:
        return found
    for d in demands:
        found += _rate_findings(d, profile)
        fixed = 0.0
        per_packet = 0.0
        parts = []
        for backend, hops in sorted(d.hops.items()):
            if hops <= 0:
                continue
            model = cost_model(profile, backend)
            if model is None:
                continue
            fixed = max(fixed, model[0])
            per_packet += model[1] * hops
            parts.append(
                f"{hops:g} {_backend(backend)} link{'s' if hops != 1 else ''} "
                f"(calibrated chains without loss: {_measured(profile, backend)})"
            )
        cost = fixed + per_packet
        if cost <= 0:
            continue
        fit_pps = 1.0 / cost
        load = d.pps / fit_pps
        if load <= 1.0:
            continue
        found.append(
            Finding(
                d.name,
                load,
                f"traffic {d.name} ({d.what or _pps(d.pps)}) crosses "
                + " and ".join(parts)
                + f"; this machine forwards about {_pps(fit_pps)} on such a path without "
                f"loss, and {_pps(d.pps)} is {load:.1f}x that, so expect an untrusted "
                f"verdict. What would help: at most {_pps(fit_pps)}, fewer hops, or (once "
                f"virtual time exists) a time dilation factor of at least {math.ceil(load)}",
            )
        )
    return found
