"""The shared clock page of a dilated group of processes, as ``shim/vt.c`` reads it.

Layout (little-endian, 72 bytes at the start of a 4096-byte file)::

    u32 magic "fnVt"   u32 version 1   u32 seq   u32 pad   f64 tdf
    3 x (i64 real_ns, i64 virt_ns)      realtime, monotonic, boottime anchors

A reader's virtual time on clock family c is ``virt_ns + (real - real_ns) / tdf``.
The writer (:meth:`TimePage.set_tdf`) makes ``seq`` odd, writes, makes it even: a
reader that saw it odd or changed reads again (a seqlock). Every anchor moves to one
real instant with the virtual time it had there, so a TDF change never makes a
clock jump.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import time
from pathlib import Path

from fidelnet.errors import UnsupportedError, ValidationError

__all__ = ["MAX_TDF", "TimePage", "preload_env", "shim_path"]

MAGIC = 0x74566E66
VERSION = 1
SIZE = 4096
MAX_TDF = 1000.0
"""The largest time dilation factor taken (a second of virtual time is then 17 minutes)."""
_HEAD = struct.Struct("<IIIId")
_ANCHOR = struct.Struct("<qq")
_CLOCKS = (time.CLOCK_REALTIME, time.CLOCK_MONOTONIC, time.CLOCK_BOOTTIME)
SHIM_NAME = "libfidelnet-vt.so"


def check_tdf(tdf: object, field: str = "tdf") -> float:
    """``tdf`` as a float, or a ValidationError naming ``field``."""
    if isinstance(tdf, bool) or not isinstance(tdf, int | float):
        raise ValidationError(field, "must be a number", tdf)
    value = float(tdf)
    if not math.isfinite(value) or not 0 < value <= MAX_TDF:
        raise ValidationError(field, f"must be > 0 and at most {MAX_TDF:g}", tdf)
    return value


class TimePage:
    """The page at ``path`` (created, or replaced), with virtual time equal to real
    time at creation on every clock, passing ``tdf`` times slower from then on."""

    def __init__(self, path: str | os.PathLike[str], tdf: float = 1.0) -> None:
        self.path = Path(path)
        self.tdf = check_tdf(tdf)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, SIZE)
            self._map = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._seq = 0
        self.history: list[tuple[float, float, str]] = [(time.time(), self.tdf, "start")]
        """Every factor the page has had: (wall-clock time, TDF, why), oldest first."""
        self._lock()
        now = [time.clock_gettime_ns(c) for c in _CLOCKS]
        self._anchors = [(r, r) for r in now]
        self._publish()

    def _lock(self) -> None:
        """Make ``seq`` odd: from here until :meth:`_publish` readers wait, so none
        reads an old anchor at a real time past the new one's (a clock would step
        back at a TDF increase)."""
        self._seq += 1
        struct.pack_into("<I", self._map, 8, self._seq)

    def _publish(self) -> None:
        struct.pack_into("<d", self._map, 16, self.tdf)
        for i, (real, virt) in enumerate(self._anchors):
            _ANCHOR.pack_into(self._map, 24 + 16 * i, real, virt)
        struct.pack_into("<II", self._map, 0, MAGIC, VERSION)
        self._seq += 1  # even: consistent
        struct.pack_into("<I", self._map, 8, self._seq)

    def virtual_ns(self, clock: int = time.CLOCK_MONOTONIC) -> int:
        """The virtual time now on ``clock`` (a realtime, monotonic or boottime id)."""
        i = _family(clock)
        real, virt = self._anchors[i]
        return virt + int((time.clock_gettime_ns(_CLOCKS[i]) - real) / self.tdf)

    def set_tdf(self, tdf: float, reason: str = "set_tdf") -> None:
        """Change the TDF now: every clock keeps the virtual time it has at this real
        instant and goes on at the new rate (no jump, never backwards). ``reason``
        goes into :attr:`history`."""
        new = check_tdf(tdf)
        self._lock()
        anchors = []
        for i, c in enumerate(_CLOCKS):
            real = time.clock_gettime_ns(c)
            r0, v0 = self._anchors[i]
            anchors.append((real, v0 + int((real - r0) / self.tdf)))
        self._anchors = anchors
        self.tdf = new
        self._publish()
        self.history.append((time.time(), new, reason))

    def close(self) -> None:
        self._map.close()


def _family(clock: int) -> int:
    for i, c in enumerate(_CLOCKS):
        if clock == c:
            return i
    if clock in (time.CLOCK_MONOTONIC_RAW,):
        return 1
    raise ValidationError("clock", "a realtime, monotonic or boottime clock", clock)


def shim_path() -> str:
    """Where ``libfidelnet-vt.so`` is: $FIDELNET_VT_SHIM, the virtualenv's
    ``lib/fidelnet``, or the source tree's ``build/shim``."""
    import sys

    root = Path(__file__).resolve().parents[3]
    for c in (
        os.environ.get("FIDELNET_VT_SHIM", ""),
        str(Path(sys.prefix) / "lib" / "fidelnet" / SHIM_NAME),
        str(root / "build" / "shim" / SHIM_NAME),
    ):
        if c and os.path.isfile(c):
            return c
    raise UnsupportedError(
        f"the clock shim ({SHIM_NAME})", "virtual time", "run `make install`, which builds it"
    )


def preload_env(page: TimePage, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the shim preloaded and the page named."""
    out = dict(os.environ if env is None else env)
    shim = shim_path()
    preload = out.get("LD_PRELOAD", "")
    out["LD_PRELOAD"] = f"{shim} {preload}".strip() if shim not in preload else preload
    out["FIDELNET_VT_PAGE"] = str(page.path)
    return out
