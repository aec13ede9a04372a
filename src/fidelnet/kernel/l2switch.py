"""The BPF learning switch (``bpf/l2switch.bpf.c``, built by ``make install``): loading
it, attaching it to switch ports, and filling its maps.

Once per run (:func:`load`): ``bpftool`` loads the object into a private bpffs
mounted for the load only (recorded as a ``mount`` in the run state first, so a crash
leaves nothing ``fidelnet clean`` cannot remove); this process opens the program and
each map from their pins (``BPF_OBJ_GET``), then the pins are dropped and the bpffs
unmounted. From then on the descriptors this process holds, and each port's tc
filter, keep the program and its maps alive; they go with the run (the filters with
the ports, the descriptors with :meth:`SwitchProgram.close`).

Per port (:meth:`SwitchProgram.attach`): a clsact qdisc and a ``cls_bpf``
direct-action filter on its ingress, at a priority after every filter fidelnet's
links put there (:data:`INGRESS_PRIO`). The maps are written with ``bpf(2)`` map
updates from this process; their values are interface indexes of the fabric
namespace, which the program resolves in the namespace of the packet.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from fidelnet.errors import KernelError, UnsupportedError
from fidelnet.kernel import bpf, rtnl, xdp
from fidelnet.kernel.netlink import Netlink

__all__ = [
    "COUNTERS",
    "INGRESS_PRIO",
    "OBJECT",
    "SwitchProgram",
    "find_object",
    "load",
    "missing",
]

OBJECT = "l2switch.bpf.o"
COUNTERS = (
    "forwarded",
    "flooded",
    "flood_copies",
    "learnt",
    "same_port",
    "link_local",
    "switch_down",
    "not_a_port",
    "runt",
    "no_port",
    "port_blocked",
    "snooped",
    "pruned",
    "mld_joined",
    "mld_left",
    "trunk_pruned",
)
"""The program's counters, in the order of its ``enum counter``."""

INGRESS_PRIO = 10
"""The switch filter's priority on a port's clsact ingress: after a link's mirred
redirect (priority 1) and its loss filter (2)."""

MAX_SWITCHES = 65536
MAX_SLOTS = 65536
_MAPS = (
    "sw_ports",
    "sw_state",
    "sw_flood",
    "sw_fdb",
    "sw_mdb",
    "sw_mrouter",
    "sw_groups",
    "sw_global",
    "sw_stats",
)
_BPF_MAP_LOOKUP_ELEM, _BPF_MAP_UPDATE_ELEM, _BPF_MAP_DELETE_ELEM = 1, 2, 3
_BPF_MAP_GET_NEXT_KEY, _BPF_OBJ_GET = 4, 7
_SW_SNOOP = 1
_PORT_TRUNK = 1
_PORT_PRUNE = 2
_CLSACT = 0xFFFF0000
_INGRESS = 0xFFFFFFF2  # TC_H_CLSACT | TC_H_MIN_INGRESS
_ETH_P_ALL = 0x0003


def find_object() -> str:
    """The built program: $FIDELNET_BPF_DIR, the virtualenv's share/fidelnet/bpf, or
    the source tree's build/bpf."""
    root = Path(__file__).resolve().parents[3]
    for c in (
        os.environ.get("FIDELNET_BPF_DIR", ""),
        str(Path(sys.prefix) / "share" / "fidelnet" / "bpf"),
        str(root / "build" / "bpf"),
    ):
        if c and os.path.isfile(os.path.join(c, OBJECT)):
            return os.path.join(c, OBJECT)
    raise UnsupportedError(
        f"the BPF switch program {OBJECT} (`make install` builds it with clang)",
        "switch datapath bpf",
        "set FIDELNET_BPF_DIR to where it is, or use datapath: bridge",
    )


def missing() -> str | None:
    """Why the BPF switch cannot run here, or None when it can (object and bpftool)."""
    if shutil.which("bpftool") is None:
        return "bpftool (`make install` installs it; Debian: apt-get install bpftool)"
    try:
        find_object()
    except UnsupportedError as exc:
        return exc.feature
    return None


def _possible_cpus() -> int:
    """The number of possible CPUs (a per-CPU map's value holds one slot each)."""
    try:
        with open("/sys/devices/system/cpu/possible", encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return os.cpu_count() or 1
    last = 0
    for part in text.split(","):
        last = max(last, int(part.split("-")[-1]))
    return last + 1


def _obj_get(path: str) -> int:
    name = ctypes.create_string_buffer(path.encode())
    # pathname, bpf_fd, file_flags
    return bpf._syscall(_BPF_OBJ_GET, struct.pack("<QII", ctypes.addressof(name), 0, 0))


def _map_op(cmd: int, fd: int, key: bytes, value: bytes | None, flags: int = 0) -> None:
    kbuf = ctypes.create_string_buffer(key, len(key))
    vbuf = ctypes.create_string_buffer(value, len(value)) if value is not None else None
    # map_fd, pad, key, value (or next_key), flags
    attr = struct.pack(
        "<IIQQQ",
        fd,
        0,
        ctypes.addressof(kbuf),
        ctypes.addressof(vbuf) if vbuf is not None else 0,
        flags,
    )
    bpf._syscall(cmd, attr)


class SwitchProgram:
    """The run's loaded switch program and its maps (descriptors held here)."""

    def __init__(self, prog_fd: int, maps: dict[str, int]) -> None:
        self.prog_fd = prog_fd
        self.maps = maps
        self._cpus = _possible_cpus()

    # -- ports ---------------------------------------------------------------------

    def attach(self, nl: Netlink, index: int) -> None:
        """The switch filter on interface ``index``'s ingress (clsact added if missing)."""
        # Both in one write: the qdisc (an existing one is fine), then the filter.
        qdisc, flt = rtnl.request(
            nl.ipr,
            [
                rtnl.clsact_msg(1, index),
                rtnl.bpf_filter_msg(
                    2, index, _INGRESS, INGRESS_PRIO, _ETH_P_ALL, self.prog_fd, "fidelnet_l2switch"
                ),
            ],
        )
        if qdisc not in (0, errno.EEXIST):
            raise KernelError(f"tc clsact on switch port {index}: {os.strerror(qdisc)}")
        if flt:
            raise KernelError(f"tc: the switch filter on port {index}: {os.strerror(flt)}")

    # -- maps --------------------------------------------------------------------

    def _update(self, name: str, key: bytes, value: bytes) -> None:
        try:
            _map_op(_BPF_MAP_UPDATE_ELEM, self.maps[name], key, value)
        except OSError as exc:
            raise KernelError(f"bpf switch: updating {name}: {exc}") from exc

    def set_switch(
        self, sw: int, slots: int, up: bool, gen: int = 0, snoop: bool = True, num: int = 0
    ) -> None:
        """Switch ``sw``: how many flood slots it has, whether it forwards, its
        generation (a new one forgets every address it learnt), whether it snoops
        MLD, and its depth-first number (:mod:`fidelnet.switches.regions`; 0: none)."""
        if not 0 < sw < MAX_SWITCHES or slots > MAX_SLOTS:
            raise KernelError(f"bpf switch: switch {sw} with {slots} ports is out of range")
        flags = _SW_SNOOP if snoop else 0
        value = struct.pack("<IIIIII", slots, int(up), gen & 0xFFFFFFFF, flags, num, 0)
        self._update("sw_state", struct.pack("<I", sw), value)

    def set_port(
        self,
        ifindex: int,
        sw: int,
        slot: int,
        up: bool,
        trunk: bool = False,
        gen: int = 0,
        region: tuple[int, int, int, int] | None = None,
    ) -> None:
        """Port ``ifindex`` is slot ``slot`` of switch ``sw``; up: it receives frames;
        trunk: its link leads to another switch, and ``region`` the numbers of the
        switches behind it, ``(lo, hi, xlo, xhi)``: lo..hi without xlo..xhi (None: all
        IPv6 multicast goes there); ``gen``: the MLD
        memberships learnt under another generation are forgotten."""
        prune = trunk and region is not None
        flags = (_PORT_TRUNK if trunk else 0) | (_PORT_PRUNE if prune else 0)
        lo, hi, xlo, xhi = region if region is not None and prune else (0, 0, 0, 0)
        value = struct.pack("<10I", sw, slot, up, flags, gen, lo, hi, xlo, xhi, 0)
        self._update("sw_ports", struct.pack("<I", ifindex), value)
        self._update(
            "sw_flood", struct.pack("<II", sw, slot), struct.pack("<I", ifindex if up else 0)
        )

    def remove_port(self, ifindex: int, sw: int, slot: int) -> None:
        """Forget port ``ifindex`` (its interface is about to go): no frame is sent to
        its index again, whatever device may later take that index."""
        self.set_port(ifindex, sw, slot, up=False)
        with contextlib.suppress(OSError):
            _map_op(_BPF_MAP_DELETE_ELEM, self.maps["sw_ports"], struct.pack("<I", ifindex), None)

    def stats(self) -> dict[str, int]:
        """The program's counters, summed over CPUs."""
        size = 8 * self._cpus
        out: dict[str, int] = {}
        for i, name in enumerate(COUNTERS):
            key = ctypes.create_string_buffer(struct.pack("<I", i), 4)
            value = ctypes.create_string_buffer(size)
            attr = struct.pack(
                "<IIQQQ",
                self.maps["sw_stats"],
                0,
                ctypes.addressof(key),
                ctypes.addressof(value),
                0,
            )
            try:
                bpf._syscall(_BPF_MAP_LOOKUP_ELEM, attr)
            except OSError as exc:
                raise KernelError(f"bpf switch: reading counters: {exc}") from exc
            out[name] = sum(struct.unpack(f"<{self._cpus}Q", value.raw))
        return out

    def fdb(self, sw: int) -> dict[str, int]:
        """Switch ``sw``'s learnt addresses: MAC -> port interface index."""
        fd = self.maps["sw_fdb"]
        out: dict[str, int] = {}
        key = b"\0" * 12
        first = True
        while True:
            cur = ctypes.create_string_buffer(key, 12)
            nxt = ctypes.create_string_buffer(12)
            attr = struct.pack(
                "<IIQQQ", fd, 0, 0 if first else ctypes.addressof(cur), ctypes.addressof(nxt), 0
            )
            try:
                bpf._syscall(_BPF_MAP_GET_NEXT_KEY, attr)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    return out
                raise KernelError(f"bpf switch: reading the address table: {exc}") from exc
            first = False
            key = nxt.raw
            if struct.unpack_from("<I", key)[0] != sw:
                continue
            value = ctypes.create_string_buffer(16)
            kb = ctypes.create_string_buffer(key, 12)
            look = struct.pack(
                "<IIQQQ", fd, 0, ctypes.addressof(kb), ctypes.addressof(value), 0
            )  # fmt: skip
            with contextlib.suppress(OSError):  # evicted meanwhile
                bpf._syscall(_BPF_MAP_LOOKUP_ELEM, look)
                mac = ":".join(f"{b:02x}" for b in key[4:10])
                out[mac] = struct.unpack_from("<I", value.raw)[0]

    def close(self) -> None:
        for fd in (self.prog_fd, *self.maps.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.maps = {}
        self.prog_fd = -1


def load(pins: str, record: Callable[[], None], gone: Callable[[], None]) -> SwitchProgram:
    """Load the switch program through a private bpffs at ``pins`` (``record`` is
    called before it is mounted, ``gone`` once it is unmounted again)."""
    obj = find_object()
    if shutil.which("bpftool") is None:
        raise UnsupportedError("bpftool", "switch datapath bpf", "use datapath: bridge")
    record()
    xdp.mount_bpffs(pins)
    prog_pin = os.path.join(pins, "prog")
    map_dir = os.path.join(pins, "maps")
    fds: dict[str, int] = {}
    prog_fd = -1
    try:
        p = subprocess.run(
            ["bpftool", "prog", "load", obj, prog_pin, "type", "classifier", "pinmaps", map_dir],
            capture_output=True,
            text=True,
            check=False,
        )
        if p.returncode != 0:
            raise KernelError(f"bpf switch: loading {obj}: {(p.stderr or p.stdout).strip()[-800:]}")
        prog_fd = _obj_get(prog_pin)
        for name in _MAPS:
            fds[name] = _obj_get(os.path.join(map_dir, name))
    except BaseException:
        for fd in (prog_fd, *fds.values()):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        xdp.drop_pins(prog_pin, map_dir, _MAPS)
        xdp.umount_bpffs(pins)
        gone()
    return SwitchProgram(prog_fd, fds)
