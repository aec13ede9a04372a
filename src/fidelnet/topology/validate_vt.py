"""Checks of a dilated topology (``TopologySpec.tdf``, :mod:`fidelnet.vt`): the factor,
and what virtual time does not reach yet, refused rather than run wrongly."""

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
    for i, link in enumerate(spec.links):
        if not (link.direction(link.a).is_empty() and link.direction(link.b).is_empty()):
            yield ValidationError(
                f"links[{i}].params",
                "links that follow the time dilation factor are not built yet: with tdf, "
                "links must be unshaped for now (docs/virtual-time.md)",
                "tdf",
            )
    for name, node in spec.nodes.items():
        if node.backend != "netns":
            yield ValidationError(
                f"nodes.{name}.backend",
                "virtual time reaches namespace nodes only for now",
                node.backend,
                ["netns"],
            )
