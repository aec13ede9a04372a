"""Backend choice: tc when the kernel can do all that is asked, the engine otherwise."""

from __future__ import annotations

import pytest

from fidelnet.errors import UnsupportedError
from fidelnet.links.choice import choose, tc_gaps
from fidelnet.topology.spec import GilbertElliott, LinkParams

FULL = frozenset({"htb", "netem", "pfifo", "bfifo"})
NO_NETEM = frozenset({"htb", "pfifo", "bfifo"})
BPF = NO_NETEM | {"bpf_loss"}  # this machine: no netem, BPF classifiers
EMPTY = LinkParams()


def test_unshaped_link_is_a_plain_veth() -> None:
    assert choose("auto", EMPTY, EMPTY, NO_NETEM, "l").backend == "veth"


def test_rate_only_stays_in_the_kernel() -> None:
    c = choose("auto", LinkParams(bw=10e6), EMPTY, NO_NETEM, "l")
    assert c.backend == "tc"


def test_delay_without_netem_goes_to_the_engine_and_says_why() -> None:
    c = choose("auto", LinkParams(delay=0.01), LinkParams(delay=0.01), NO_NETEM, "l")
    assert c.backend == "engine"
    assert "sch_netem" in c.reason


def test_delay_with_netem_stays_in_the_kernel() -> None:
    assert choose("auto", LinkParams(delay=0.01), EMPTY, FULL, "l").backend == "tc"


def test_tc_requested_but_impossible_names_missing_piece_and_engine() -> None:
    with pytest.raises(UnsupportedError) as info:
        choose("tc", LinkParams(delay=0.01, loss=1.0), EMPTY, NO_NETEM, "link h1-s1")
    msg = str(info.value)
    assert "sch_netem" in msg and "engine" in msg and "link h1-s1" in msg


def test_engine_requested_is_taken_even_without_params() -> None:
    assert choose("engine", EMPTY, EMPTY, frozenset(), "l").backend == "engine"


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        (LinkParams(delay=0.01, jitter=0.001), "reorders"),
        (LinkParams(delay=0.01, jitter=0.001, reorder=True, jitter_dist="normal"), "normal"),
        (LinkParams(loss_model=GilbertElliott(1, 10)), "Gilbert-Elliott"),
        (LinkParams(bw=1e6, queue="hifi"), "hifi"),
        (LinkParams(trace="/x"), "trace"),
        (LinkParams(bw=1e6, seed=3), "seed"),
        (LinkParams(bw=1e6, overhead=24), "overhead"),
        (LinkParams(bw=100e9), "32-bit rate"),
        (LinkParams(max_queue_size=10), "queue limit without bw"),
    ],
)
def test_what_netem_kernels_still_cannot_do(params: LinkParams, needle: str) -> None:
    gaps = tc_gaps(params, FULL)
    assert any(needle in g for g in gaps), gaps


def test_jitter_with_reordering_allowed_is_fine_for_netem() -> None:
    assert tc_gaps(LinkParams(delay=0.01, jitter=0.001, reorder=True), FULL) == []


def test_random_loss_without_netem_stays_in_the_kernel_as_a_bpf_classifier() -> None:
    c = choose("auto", LinkParams(bw=100e6, loss=1.0), LinkParams(loss=2.0), BPF, "l")
    assert c.backend == "tc" and "BPF" in c.reason
    assert choose("tc", LinkParams(loss=1.0), EMPTY, BPF, "l").backend == "tc"
    # netem, where the kernel has it, keeps doing loss.
    assert "BPF" not in choose("auto", LinkParams(loss=1.0), EMPTY, FULL | BPF, "l").reason


@pytest.mark.parametrize(
    "params",
    [
        LinkParams(loss=1.0, delay=0.01),  # the delay needs netem or the engine
        LinkParams(loss=1.0, seed=3),  # kernel random numbers cannot be seeded
        LinkParams(loss=1.0, loss_model=GilbertElliott(p=1.0, r=10.0)),
        LinkParams(loss=1.0, duplicate=1.0),
    ],
)
def test_loss_with_what_bpf_cannot_do_goes_to_the_engine(params: LinkParams) -> None:
    assert choose("auto", params, EMPTY, BPF, "l").backend == "engine"
    assert tc_gaps(params, BPF)


def test_fq_needs_a_rate_and_stays_in_the_kernel() -> None:
    assert choose("auto", LinkParams(bw=10e6, queue="fq"), EMPTY, NO_NETEM, "l").backend == "tc"
    assert any("fq queue without bw" in g for g in tc_gaps(LinkParams(queue="fq"), FULL))
    # loss by the BPF classifier runs ahead of the fair queue; netem would go below it
    assert (
        choose("auto", LinkParams(bw=10e6, queue="fq", loss=1.0), EMPTY, BPF, "l").backend == "tc"
    )
    assert any("netem below each flow class" in g for g in tc_gaps(
        LinkParams(bw=10e6, queue="fq", delay=0.01), FULL))  # fmt: skip


def test_the_engine_has_no_fq_and_says_which_backend_has() -> None:
    with pytest.raises(UnsupportedError) as info:
        choose("engine", LinkParams(bw=10e6, queue="fq"), EMPTY, NO_NETEM, "link h1-s1")
    assert "fq queue" in str(info.value) and "'tc'" in str(info.value)
    with pytest.raises(UnsupportedError) as info:  # delay needs the engine, fq the kernel
        choose("auto", LinkParams(bw=10e6, delay=0.01, queue="fq"), EMPTY, NO_NETEM, "link h1-s1")
    msg = str(info.value)
    assert "sch_netem" in msg and "fq queue" in msg and "link h1-s1" in msg
