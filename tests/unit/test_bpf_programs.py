"""The BPF programs fidelnet builds from instructions: their encoding, checked
against the instruction set (the kernel's verifier checks them again at load)."""

from __future__ import annotations

import struct

import pytest

from fidelnet.kernel.bpf import TC_ACT_OK, TC_ACT_STOLEN, loss_program


def insns(code: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("<BBhi", code[i : i + 8]) for i in range(0, len(code), 8)]


@pytest.mark.parametrize(("p", "threshold"), [(0.01, 42949673), (0.5, 2**31), (0.9, 3865470566)])
def test_loss_takes_a_packet_when_a_random_u32_is_below_p_times_2_32(
    p: float, threshold: int
) -> None:
    prog = insns(loss_program(p))
    assert prog[0] == (0x85, 0, 0, 7)  # call bpf_get_prandom_u32
    code, regs, off, imm = prog[1]
    assert (code, regs, off) == (0xA6, 0, 2)  # if w0 < imm (unsigned, 32-bit) goto +2
    assert imm % 2**32 == threshold
    assert prog[2] == (0xB7, 0, 0, TC_ACT_OK) and prog[3][0] == 0x95
    assert prog[4] == (0xB7, 0, 0, TC_ACT_STOLEN) and prog[5][0] == 0x95


def test_loss_of_one_takes_everything_and_bad_probabilities_are_refused() -> None:
    assert insns(loss_program(1.0)) == [(0xB7, 0, 0, TC_ACT_STOLEN), (0x95, 0, 0, 0)]
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="outside"):
            loss_program(bad)
