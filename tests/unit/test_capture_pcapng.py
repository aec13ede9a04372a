"""The capture's pcapng stream, read back by tcpdump (a reader fidelnet did not write)
and block by block (issue 38's live capture)."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fidelnet.kernel.capture import PcapngWriter


def _frame(payload: bytes) -> bytes:
    """An Ethernet frame with an IPv4 UDP datagram 10.0.0.1:5000 -> 10.0.0.2:6000."""
    udp = struct.pack("!HHHH", 5000, 6000, 8 + len(payload), 0) + payload
    total = 20 + len(udp)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 1, 0, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))  # fmt: skip
    return bytes(6 * [2]) + bytes(6 * [4]) + b"\x08\x00" + ip + udp


def _blocks(data: bytes) -> list[tuple[int, bytes]]:
    out, off = [], 0
    while off < len(data):
        kind, total = struct.unpack_from("<II", data, off)
        assert total % 4 == 0 and struct.unpack_from("<I", data, off + total - 4)[0] == total
        out.append((kind, data[off + 8 : off + total - 4]))
        off += total
    assert off == len(data)
    return out


def test_blocks_are_whole_and_carry_nanosecond_times_and_directions() -> None:
    buf = io.BytesIO()
    w = PcapngWriter(buf, "h1-eth0", comment="fidelnet run abc, h1:h1-eth0")
    w.packet(1_700_000_000_123_456_789, _frame(b"x" * 3), 45, outbound=True)
    w.packet(1_700_000_000_223_456_789, _frame(b"yy"), 44, outbound=False)
    blocks = _blocks(buf.getvalue())
    assert [k for k, _ in blocks] == [0x0A0D0D0A, 1, 6, 6]
    shb = blocks[0][1]
    assert struct.unpack_from("<IHH", shb) == (0x1A2B3C4D, 1, 0)
    epb = blocks[2][1]
    _if, hi, lo, caplen, wire = struct.unpack_from("<IIIII", epb)
    assert (hi << 32 | lo) == 1_700_000_000_123_456_789 and caplen == 45 and wire == 45


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
def test_tcpdump_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "c.pcapng"
    with open(path, "wb") as f:
        w = PcapngWriter(f, "h1-eth0")
        for i in range(3):
            w.packet(
                1_700_000_000_000_000_000 + i * 1_000_000, _frame(b"z" * i), 42 + i, i % 2 == 0
            )
    out = subprocess.run(
        ["tcpdump", "-nn", "-r", str(path), "--nano", "-tt"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(out) == 3, out
    assert (
        out[0].startswith("1700000000.000000000") and "10.0.0.1.5000 > 10.0.0.2.6000: UDP" in out[0]
    )
    assert out[2].startswith("1700000000.002000000")
