"""The one door to METIS (through pymetis): a narrow, typed call.

pymetis 2025.2.2 types its Python layer only in part (the compiled module's stub
leaves most of it out), so nothing else imports it: this function takes plain
sequences, checks what METIS would otherwise reject with a crash or a warning, and
returns plain ints. METIS itself is deterministic for a given ``seed``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pymetis

__all__ = ["part_graph"]

_MAX_TOTAL = 2**30
"""Edge and vertex weights are scaled down so that their sums stay below this:
METIS sums them in ``idx_t``, which may be 32 bits wide."""


def _scaled(weights: Sequence[int]) -> list[int]:
    total = sum(weights)
    if total <= _MAX_TOTAL:
        return list(weights)
    return [max(1, w * _MAX_TOTAL // total) for w in weights]


def part_graph(
    nparts: int,
    xadj: Sequence[int],
    adjncy: Sequence[int],
    *,
    vweights: Sequence[int],
    eweights: Sequence[int],
    tpwgts: Sequence[float],
    seed: int,
) -> list[int]:
    """The part (0 to ``nparts - 1``) of each vertex of the graph in CSR form
    (``xadj``, ``adjncy``, both directions of each edge stored), minimising the
    summed weight of the cut edges while each part's vertex weight stays near its
    share ``tpwgts`` of the total. Weights are positive integers; ``tpwgts`` are
    positive and are normalised here."""
    n = len(vweights)
    if len(xadj) != n + 1 or len(adjncy) != len(eweights) or len(tpwgts) != nparts:
        raise ValueError("part_graph: inconsistent graph arrays")
    if nparts == 1 or n == 0:
        return [0] * n
    total = float(sum(tpwgts))
    shares = [float(t) / total for t in tpwgts]
    shares[-1] = max(0.0, 1.0 - sum(shares[:-1]))  # pymetis wants a sum of 1 within 1e-12
    result = pymetis.part_graph(
        nparts,
        pymetis.CSRAdjacency(list(xadj), list(adjncy)),
        vweights=_scaled(vweights),
        eweights=_scaled(eweights) if eweights else None,
        tpwgts=shares,
        recursive=nparts <= 8,  # METIS's advice: bisection for few parts, k-way beyond
        options=pymetis.Options(seed=seed),
    )
    return [int(p) for p in result.vertex_part]
