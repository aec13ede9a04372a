"""The agents' clock probe on this machine's loopback: one clock, so the offset is
0 within the uncertainty the probe reports; nobody answering is a clear error."""

from __future__ import annotations

import socket

import pytest

from fidelnet.cluster.clock import Responder, probe
from fidelnet.errors import FidelnetError


def test_one_machine_is_its_own_clock_within_the_uncertainty() -> None:
    r = Responder("127.0.0.1", port=0)
    try:
        port = r.sock.getsockname()[1]
        got = probe("127.0.0.1", "127.0.0.1", port=port, count=16)
    finally:
        r.close()
    assert got.answered == 16
    assert 0 <= got.uncertainty_ns < 50_000_000  # a loaded 2-core machine: generous
    assert abs(got.offset_ns) <= got.uncertainty_ns + 1
    assert got.as_status()["offsetNs"] == got.offset_ns


def test_nobody_answering_is_an_error_naming_the_peer() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never answers
        with pytest.raises(FidelnetError, match=r"127\.0\.0\.1:\d+: no answer to 2 probes"):
            probe("127.0.0.1", "127.0.0.1", port=port, count=2, timeout=0.05)
