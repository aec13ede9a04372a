"""iperf3 argument lists and reading its -J output (recorded on this machine; see
tests/unit/data/iperf3/record.py for how each file was made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.measure import iperf3

DATA = Path(__file__).parent / "data" / "iperf3"


def text(name: str) -> str:
    return (DATA / name).read_text()


def report(name: str) -> iperf3.Report:
    return iperf3.parse(text(name), name)


# -- argument lists ---------------------------------------------------------------------------


def test_server_argv() -> None:
    assert iperf3.server_argv(5201, 0.1) == [
        *("iperf3", "-s", "-1", "-J", "-i", "0.1", "-p", "5201"),
    ]


def test_client_argv_with_and_without_window() -> None:
    base = ["iperf3", "-c", "10.0.0.2", "-p", "5202", "-t", "10", "-i", "0.1", "-J"]
    assert iperf3.client_argv("10.0.0.2", 5202, 10, 0.1) == base
    assert iperf3.client_argv("10.0.0.2", 5202, 10, 0.1, 14480) == [*base, "-w", "14480"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("-h", 5201, 10, 0.1), "addr"),
        (("10.0.0.2; reboot", 5201, 10, 0.1), "addr"),
        (("10.0.0.2", 0, 10, 0.1), "port"),
        (("10.0.0.2", 70000, 10, 0.1), "port"),
        (("10.0.0.2", 5201, 2.5, 0.1), "duration"),
        (("10.0.0.2", 5201, 0, 0.1), "duration"),
        (("10.0.0.2", 5201, 10, 0.05), "interval"),
        (("10.0.0.2", 5201, 10, 0.1, 0), "window"),
    ],
)
def test_client_argv_refuses_bad_values(args: tuple[object, ...], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        iperf3.client_argv(*args)  # type: ignore[arg-type]
    assert info.value.field == field


# -- successful runs ----------------------------------------------------------------------------


def test_loopback_client() -> None:
    c = report("loopback_client.json")
    assert c.role == "client"
    assert c.version == "iperf 3.12"
    assert c.mss == 22016  # loopback's 64 KiB MTU
    assert c.sock_bufsize is None  # no -w
    assert len(c.intervals) == 30
    assert c.intervals[0].start_s == 0
    assert all(0.09 < iv.seconds < 0.11 for iv in c.intervals)
    assert c.retransmits is not None and c.retransmits >= 0
    assert c.sent_bytes == sum(iv.bytes for iv in c.intervals)
    assert c.congestion == "bbr"


def test_loopback_server_intervals_add_up_to_its_total() -> None:
    s = report("loopback_server.json")
    assert s.role == "server"
    assert s.mss is None  # the server reports 0
    assert s.retransmits is None
    assert s.received_bytes == sum(iv.bytes for iv in s.intervals)
    assert s.received_bps == pytest.approx(
        8 * sum(iv.bytes for iv in s.intervals) / s.intervals[-1].end_s
    )


def test_interval_rate() -> None:
    iv = iperf3.Interval(1.0, 1.1, 125_000)
    assert iv.seconds == pytest.approx(0.1)
    assert iv.bps == pytest.approx(10e6)
    assert iperf3.Interval(1.0, 1.0, 10).bps == 0.0


def test_window_is_reported_as_asked_and_doubled_by_the_kernel() -> None:
    c = report("link10m_window_client.json")
    s = report("link10m_window_server.json")
    assert c.sock_bufsize == 14480
    assert c.sndbuf_actual == c.rcvbuf_actual == 2 * 14480  # Linux keeps half for itself
    assert s.sock_bufsize == 14480  # the server took -w from the client's parameters
    assert c.mss == 1448


# -- failures --------------------------------------------------------------------------------


def test_connection_refused_names_the_process_and_carries_iperf3s_error() -> None:
    with pytest.raises(MeasurementError) as info:
        iperf3.parse(text("refused_client.json"), "iperf3 client of flow h1->h2:5201")
    message = str(info.value)
    assert "iperf3 client of flow h1->h2:5201" in message
    assert "unable to connect to server: Connection refused" in message


@pytest.mark.parametrize("name", ["bufsize_client.json", "bufsize_server.json"])
def test_socket_buffer_failure(name: str) -> None:
    with pytest.raises(MeasurementError, match="socket buffer size not set correctly"):
        report(name)


@pytest.mark.parametrize(
    ("output", "match"),
    [
        ("", "wrote nothing"),
        ("   \n", "wrote nothing"),
        ("iperf3: error - unable to connect", "unreadable iperf3 output"),
        ("[1, 2]", "not a JSON object"),
        ('{"start": {}, "intervals": [], "end": {}}', "reported no test"),
    ],
)
def test_unreadable_output(output: str, match: str) -> None:
    with pytest.raises(MeasurementError, match=match):
        iperf3.parse(output, "iperf3 server of flow h1->h2:5201")


def test_truncated_output_is_unreadable() -> None:
    whole = text("loopback_server.json")
    with pytest.raises(MeasurementError, match="unreadable iperf3 output"):
        iperf3.parse(whole[: len(whole) // 2], "server")


def test_an_interval_without_bytes_is_refused() -> None:
    data = json.loads(text("loopback_server.json"))
    del data["intervals"][3]["sum"]["bytes"]
    with pytest.raises(MeasurementError, match="interval 3 lacks"):
        iperf3.parse(json.dumps(data), "server")
