"""Checks of a dilated topology (``TopologySpec.tdf``, :mod:`fidelnet.vt`): the factor,
and what virtual time does not reach yet (VM nodes), refused rather than run wrongly.
A run has one factor, so no link can join two different ones."""

from __future__ import annotations

from collections.abc import Iterator

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import TopologySpec
from fidelnet.vt.page import check_tdf

__all__ = ["check_tdf_spec"]


def check_tdf_spec(spec: TopologySpec) -> Iterator[ValidationError]:
    if spec.tdf is None:
        return
    try:
        check_tdf(spec.tdf)
    except ValidationError as exc:
        yield exc
        return
    for name, node in spec.nodes.items():
        if node.backend != "netns":
            yield ValidationError(
                f"nodes.{name}.backend",
                "virtual time reaches namespace nodes only for now",
                node.backend,
                ["netns"],
            )
