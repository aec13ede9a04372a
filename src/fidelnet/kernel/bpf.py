"""Small BPF programs built from their instructions, with no compiler or object file.

:func:`loss_program` is random loss for kernel (tc) links where the kernel has no
``sch_netem``: a ``cls_bpf`` direct-action classifier on the sending interface's
clsact egress that takes each packet with probability ``p`` (the kernel's per-CPU
pseudo-random numbers) before the root qdisc, so a lost packet uses no rate and no
queue space, as with netem and the engine.

A lost packet is *stolen* (``TC_ACT_STOLEN``), not dropped (``TC_ACT_SHOT``): a
drop at egress is reported to the sending socket as ``ENOBUFS``, and senders react
to that as to a local queue overflow, not to loss on a wire (``ping`` sends the
same request again; TCP holds its segment and retries without any loss signal).
A stolen packet is reported as sent, so it is lost as on a wire. That is also why
this is a cls_bpf filter and not a tcx program: tcx programs cannot steal.

:func:`load` returns the program's file descriptor; the caller hands it to the
filter (:func:`fidelnet.kernel.tc.set_bpf_filter`) and closes it: the filter holds
the program from then on, and it goes with the interface.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import struct

from fidelnet.errors import KernelError

__all__ = ["load", "loss_program"]

_SYS_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280, "ppc64le": 361, "s390x": 351}
_BPF_PROG_LOAD = 5
_BPF_PROG_TYPE_SCHED_CLS = 3
_FUNC_GET_PRANDOM_U32 = 7
TC_ACT_OK, TC_ACT_STOLEN = 0, 4

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)

_MOV64_K = 0xB7  # BPF_ALU64 | BPF_MOV | BPF_K
_CALL = 0x85  # BPF_JMP | BPF_CALL
_EXIT = 0x95  # BPF_JMP | BPF_EXIT
_JLT32_K = 0xA6  # BPF_JMP32 | BPF_JLT | BPF_K: unsigned 32-bit compare


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def loss_program(p: float) -> bytes:
    """Instructions that take a packet with probability ``p`` (0 < p <= 1):
    ``if (bpf_get_prandom_u32() < p * 2**32) return TC_ACT_STOLEN; return
    TC_ACT_OK``."""
    if not 0 < p <= 1:
        raise ValueError(f"loss probability {p} outside (0, 1]")
    threshold = round(p * 2**32)
    if threshold >= 2**32:  # p == 1: every packet
        return _insn(_MOV64_K, dst=0, imm=TC_ACT_STOLEN) + _insn(_EXIT)
    signed = threshold - 2**32 if threshold >= 2**31 else threshold  # imm is an s32
    return (
        _insn(_CALL, imm=_FUNC_GET_PRANDOM_U32)
        + _insn(_JLT32_K, dst=0, off=2, imm=signed)
        + _insn(_MOV64_K, dst=0, imm=TC_ACT_OK)
        + _insn(_EXIT)
        + _insn(_MOV64_K, dst=0, imm=TC_ACT_STOLEN)
        + _insn(_EXIT)
    )


def load(insns: bytes, name: str = "fidelnet_loss") -> int:
    """Load ``insns`` as a tc classifier (BPF_PROG_TYPE_SCHED_CLS); its descriptor,
    close-on-exec, for the caller to close."""
    number = _SYS_BPF.get(platform.machine())
    if number is None:
        raise KernelError(f"bpf: no syscall number known for {platform.machine()}")
    code = ctypes.create_string_buffer(insns, len(insns))
    license_ = ctypes.create_string_buffer(b"GPL")
    # union bpf_attr for BPF_PROG_LOAD, up to expected_attach_type (72 bytes): type,
    # insn_cnt, insns, license, log_level, log_size, log_buf, kern_version,
    # prog_flags, prog_name, prog_ifindex, expected_attach_type.
    attr = struct.pack(
        "<IIQQIIQII16sII",
        _BPF_PROG_TYPE_SCHED_CLS,
        len(insns) // 8,
        ctypes.addressof(code),
        ctypes.addressof(license_),
        0,
        0,
        0,
        0,
        0,
        name.encode()[:15].ljust(16, b"\0"),
        0,
        0,
    )
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = _libc.syscall(number, _BPF_PROG_LOAD, buf, len(attr))
    if fd < 0:
        err = ctypes.get_errno()
        raise KernelError(f"bpf: loading {name} ({len(insns) // 8} instructions): "
                          f"{os.strerror(err)}")  # fmt: skip
    return int(fd)
