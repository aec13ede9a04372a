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

:func:`flow_class_program` spreads flows over the classes of an HTB qdisc for the
``fq`` queue: a classic (not direct-action) ``cls_bpf`` classifier on the HTB root
whose return value is the class id, ``base + skb_hash % n``. The hash is the
kernel's flow hash (addresses, ports, protocol), so every packet of a flow lands in
one class.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

from fidelnet.errors import KernelError

__all__ = ["counter", "flow_class_program", "load", "loss_program", "read_counter"]

_SYS_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280, "ppc64le": 361, "s390x": 351}
_BPF_MAP_CREATE, _BPF_MAP_LOOKUP_ELEM, _BPF_PROG_LOAD = 0, 1, 5
_BPF_MAP_TYPE_ARRAY = 2
_BPF_PSEUDO_MAP_FD = 1
_FUNC_MAP_LOOKUP_ELEM = 1
_BPF_PROG_TYPE_SCHED_CLS = 3
_FUNC_GET_PRANDOM_U32 = 7
_FUNC_GET_HASH_RECALC = 34
TC_ACT_OK, TC_ACT_STOLEN = 0, 4

_libc = ctypes.CDLL(None, use_errno=True)  # libc's symbols, without running ldconfig

_MOV64_K = 0xB7  # BPF_ALU64 | BPF_MOV | BPF_K
_CALL = 0x85  # BPF_JMP | BPF_CALL
_EXIT = 0x95  # BPF_JMP | BPF_EXIT
_JLT32_K = 0xA6  # BPF_JMP32 | BPF_JLT | BPF_K: unsigned 32-bit compare
_JGE32_K = 0x36  # BPF_JMP32 | BPF_JGE | BPF_K
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_LD_IMM64 = 0x18  # BPF_LD | BPF_IMM | BPF_DW (two slots)
_ST_W = 0x62  # BPF_ST | BPF_MEM | BPF_W
_MOV64_X = 0xBF  # BPF_ALU64 | BPF_MOV | BPF_X
_ADD64_K = 0x07  # BPF_ALU64 | BPF_ADD | BPF_K
_ATOMIC_ADD_DW = 0xDB  # BPF_STX | BPF_ATOMIC | BPF_DW, imm BPF_ADD
_MOD64_K = 0x97  # BPF_ALU64 | BPF_MOD | BPF_K


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def loss_program(p: float, counter_fd: int | None = None) -> bytes:
    """Instructions that take a packet with probability ``p`` (0 < p <= 1) and, given
    ``counter_fd`` (:func:`counter`), count each one taken::

        if (bpf_get_prandom_u32() >= p * 2**32) return TC_ACT_OK;
        if ((n = bpf_map_lookup_elem(counter, &zero))) __sync_fetch_and_add(n, 1);
        return TC_ACT_STOLEN;
    """
    if not 0 < p <= 1:
        raise ValueError(f"loss probability {p} outside (0, 1]")
    count = b"" if counter_fd is None else _count(counter_fd)
    steal = count + _insn(_MOV64_K, dst=0, imm=TC_ACT_STOLEN) + _insn(_EXIT)
    threshold = round(p * 2**32)
    if threshold >= 2**32:  # p == 1: every packet
        return steal
    signed = threshold - 2**32 if threshold >= 2**31 else threshold  # imm is an s32
    return (
        _insn(_CALL, imm=_FUNC_GET_PRANDOM_U32)
        + _insn(_JGE32_K, dst=0, off=len(steal) // 8, imm=signed)
        + steal
        + _insn(_MOV64_K, dst=0, imm=TC_ACT_OK)
        + _insn(_EXIT)
    )


def flow_class_program(n: int, base: int) -> bytes:
    """Instructions that return the class id ``base + bpf_get_hash_recalc(skb) % n``
    (``r1`` holds the packet on entry, as the helper wants it)::

        return base + bpf_get_hash_recalc(skb) % n;
    """
    if not 1 <= n < 2**16 or not 0 < base < 2**31 - n:
        raise ValueError(f"flow classes: n={n}, base={base:#x}")
    return (
        _insn(_CALL, imm=_FUNC_GET_HASH_RECALC)
        + _insn(_MOD64_K, dst=0, imm=n)
        + _insn(_ADD64_K, dst=0, imm=base)
        + _insn(_EXIT)
    )


def _count(map_fd: int) -> bytes:
    """Add one to element 0 of array map ``map_fd`` (r0-r2 and 4 stack bytes used)."""
    return (
        _insn(_LD_IMM64, dst=1, src=_BPF_PSEUDO_MAP_FD, imm=map_fd)
        + _insn(0)
        + _insn(_ST_W, dst=10, off=-4, imm=0)  # key = 0
        + _insn(_MOV64_X, dst=2, src=10)
        + _insn(_ADD64_K, dst=2, imm=-4)
        + _insn(_CALL, imm=_FUNC_MAP_LOOKUP_ELEM)
        + _insn(_JEQ_K, dst=0, off=2, imm=0)  # no element: count nothing
        + _insn(_MOV64_K, dst=1, imm=1)
        + _insn(_ATOMIC_ADD_DW, dst=0, src=1, off=0, imm=0)
    )


def _syscall(cmd: int, attr: bytes) -> int:
    number = _SYS_BPF.get(platform.machine())
    if number is None:
        raise KernelError(f"bpf: no syscall number known for {platform.machine()}")
    buf = ctypes.create_string_buffer(attr, len(attr))
    ret = int(_libc.syscall(number, cmd, buf, len(attr)))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def counter() -> int:
    """A one-element array map of a u64, for :func:`loss_program` to count in; its
    descriptor, close-on-exec, for the caller to close."""
    # map_type, key_size, value_size, max_entries, map_flags
    try:
        return _syscall(_BPF_MAP_CREATE, struct.pack("<IIIII", _BPF_MAP_TYPE_ARRAY, 4, 8, 1, 0))
    except OSError as exc:
        raise KernelError(f"bpf: creating a counter map: {exc}") from exc


def read_counter(map_fd: int) -> int:
    """The value a :func:`counter` holds."""
    key = ctypes.create_string_buffer(4)
    value = ctypes.create_string_buffer(8)
    # map_fd, pad, key, value, flags
    attr = struct.pack("<IIQQQ", map_fd, 0, ctypes.addressof(key), ctypes.addressof(value), 0)
    try:
        _syscall(_BPF_MAP_LOOKUP_ELEM, attr)
    except OSError as exc:
        raise KernelError(f"bpf: reading a counter map: {exc}") from exc
    return int(struct.unpack("<Q", value.raw)[0])


def load(insns: bytes, name: str = "fidelnet_loss") -> int:
    """Load ``insns`` as a tc classifier (BPF_PROG_TYPE_SCHED_CLS); its descriptor,
    close-on-exec, for the caller to close."""
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
    try:
        return _syscall(_BPF_PROG_LOAD, attr)
    except OSError as exc:
        raise KernelError(f"bpf: loading {name} ({len(insns) // 8} instructions): {exc}") from exc
