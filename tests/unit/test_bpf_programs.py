"""The BPF programs fidelnet builds from instructions: their encoding, checked
against the instruction set (the kernel's verifier checks them again at load)."""

from __future__ import annotations

import struct

import pytest

from fidelnet.kernel.bpf import TC_ACT_OK, TC_ACT_STOLEN, flow_class_program, loss_program

STEAL = [(0xB7, 0, 0, TC_ACT_STOLEN), (0x95, 0, 0, 0)]
PASS = [(0xB7, 0, 0, TC_ACT_OK), (0x95, 0, 0, 0)]


def insns(code: bytes) -> list[tuple[int, int, int, int]]:
    assert len(code) % 8 == 0
    return [struct.unpack("<BBhi", code[i : i + 8]) for i in range(0, len(code), 8)]


@pytest.mark.parametrize(("p", "threshold"), [(0.01, 42949673), (0.5, 2**31), (0.9, 3865470566)])
def test_loss_takes_a_packet_when_a_random_u32_is_below_p_times_2_32(
    p: float, threshold: int
) -> None:
    prog = insns(loss_program(p))
    assert prog[0] == (0x85, 0, 0, 7)  # call bpf_get_prandom_u32
    code, regs, off, imm = prog[1]
    assert (code, regs, off) == (0x36, 0, 2)  # if w0 >= imm (unsigned, 32-bit): pass
    assert imm % 2**32 == threshold
    assert prog[2:] == STEAL + PASS


def test_with_a_counter_each_packet_taken_is_counted_first() -> None:
    prog = insns(loss_program(0.25, counter_fd=9))
    assert prog[0] == (0x85, 0, 0, 7)
    assert prog[1][:3] == (0x36, 0, len(prog) - 4)  # over the counting and the steal
    assert prog[2] == (0x18, 0x10 | 1, 0, 9) and prog[3] == (0, 0, 0, 0)  # r1 = map fd 9
    assert prog[4] == (0x62, 10, -4, 0)  # key 0 on the stack
    assert prog[7] == (0x85, 0, 0, 1)  # bpf_map_lookup_elem
    assert prog[8] == (0x15, 0, 2, 0)  # no element: skip the add
    assert prog[10] == (0xDB, 0x10 | 0, 0, 0)  # lock *(u64 *)(r0) += r1
    assert prog[-4:] == STEAL + PASS


def test_loss_of_one_takes_everything_and_bad_probabilities_are_refused() -> None:
    assert insns(loss_program(1.0)) == STEAL
    assert insns(loss_program(1.0, counter_fd=3))[-2:] == STEAL
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="outside"):
            loss_program(bad)


def test_flow_class_is_the_base_plus_the_flow_hash_modulo_n() -> None:
    prog = insns(flow_class_program(64, 0x10100))
    assert prog == [
        (0x85, 0, 0, 34),  # call bpf_get_hash_recalc (r1: the packet, as on entry)
        (0x97, 0, 0, 64),  # r0 %= 64
        (0x07, 0, 0, 0x10100),  # r0 += 1:100
        (0x95, 0, 0, 0),  # return r0: the class id
    ]
    for n, base in ((0, 0x10100), (2**16, 0x10100), (4, 0), (4, 2**31 - 2)):
        with pytest.raises(ValueError, match="flow classes"):
            flow_class_program(n, base)
