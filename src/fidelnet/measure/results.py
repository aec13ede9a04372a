"""Typed measurement results and the result file that carries them.

Every measurement returns one of the models below. Saved, a result becomes a
:class:`ResultFile`: ``{"schema": "fidelnet.result/1", "kind": ..., "provenance":
{...}, "floor": {...} | null, "result": {...}}``, one JSON file per measurement in a
results directory, which ``fidelnet report DIR`` renders.

Units are in the field names: ``_ns`` nanoseconds, ``_s`` seconds, ``_pps`` packets
per second, ``_bps`` bits per second. Latency histograms travel as ``hdr``: a
base64 string of the HdrHistogram V2 compressed encoding (values in ns), which any
HdrHistogram implementation decodes (:func:`fidelnet.measure.latency.decode`).

A result the run knows to be distorted is not an error: it carries :class:`Flag`
entries (a stable ``code`` and a sentence for people), and the report shows them.
Every result measured inside a network also carries a ``verdict``
(:class:`fidelnet.fidelity.Verdict`: trusted, degraded or untrusted, with reasons)
and the ``monitor`` record it was judged from; both are None in files written
before verdicts existed, which the report shows as "not judged".
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from fidelnet.fidelity.record import MonitorRecord
from fidelnet.fidelity.verdict import Verdict
from fidelnet.measure.provenance import Provenance

__all__ = [
    "SCHEMA",
    "Flag",
    "FloorSummary",
    "Interval",
    "LatencySummary",
    "Result",
    "ResultFile",
    "SelftestResult",
    "TcpFlowResult",
    "TcpInterval",
    "TcpResult",
    "Trial",
    "UdpFlowResult",
    "UdpResult",
    "ZeroLossResult",
    "load_result",
    "save_result",
]

SCHEMA = "fidelnet.result/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Flag(_Model):
    """Something the run knows about a number: ``code`` is stable (for scripts),
    ``message`` says what and why."""

    code: str
    message: str


class LatencySummary(_Model):
    """One-way latency percentiles in ns; ``hdr`` is the whole histogram."""

    count: int
    min_ns: int
    mean_ns: float
    p50_ns: int
    p90_ns: int
    p99_ns: int
    p999_ns: int
    p9999_ns: int
    max_ns: int
    hdr: str | None = None


class Interval(_Model):
    """One step of the receiver's series (``t_s`` from the first received packet)."""

    t_s: float
    packets: int
    duplicates: int = 0
    """Of ``packets``, duplicates (a sequence number already received)."""
    frame_bytes: int
    rate_pps: float
    rate_bps: float
    latency_max_ns: int | None = None
    latency_p50_ns: int | None = None
    latency_p99_ns: int | None = None


class UdpFlowResult(_Model):
    id: int
    src: str
    dst: str
    dst_addr: str
    sent: int
    received: int
    unique: int
    lost: int
    loss_ratio: float
    duplicates: int
    reordered: int
    latency: LatencySummary
    jitter: LatencySummary | None = None
    """How much each packet's latency differs from the flow's packet before it."""
    first_seq: int | None = None
    """The first sequence number that arrived, and its send time (CLOCK_REALTIME ns)."""
    first_send_ns: int | None = None
    max_seq: int | None = None
    """The highest sequence number that arrived, and its send time."""
    max_seq_send_ns: int | None = None


class Gap(_Model):
    """A jump in one flow's sequence numbers at the receiver: ``after_seq`` arrived,
    then ``before_seq``, with ``lost`` between them never arriving (``filled`` came
    late). Send and receive times are CLOCK_REALTIME ns."""

    flow: int
    after_seq: int
    after_send_ns: int
    before_seq: int
    before_send_ns: int
    before_rx_ns: int
    lost: int
    filled: int = 0


class Outage(_Model):
    """Packets lost in a row, told from the packets (:mod:`fidelnet.measure.outage`):
    from the first lost packet's send time to the send time of the first packet
    received after it (to the end of sending when none was)."""

    flow: int
    start_ns: int
    """When the first lost packet was sent (CLOCK_REALTIME ns; one packet interval
    after the last one received before it)."""
    end_ns: int
    """When the first packet received after it was sent."""
    start_s: float
    """``start_ns`` in seconds after the traffic's first packet was sent."""
    duration_s: float
    lost: int
    late: int = 0
    """Packets of the outage that arrived late (reordered), not lost."""
    recovered: bool = True
    """False: no packet of the flow arrived after it."""


class EventRecord(_Model):
    """An event during a flow (:mod:`fidelnet.events`): when it was planned and how
    late it started, and the outage told from the flow's packets after it (events
    that bring something up have none)."""

    name: str
    action: str
    target: str
    at_s: float
    """Planned, in seconds after the flow's first packet was due."""
    late_s: float
    took_s: float
    effective_s: float | None = None
    """When a link's path was actually cut or whole again, in seconds after the
    flow's first packet was due (an engine link's own instant)."""
    exact: bool = False
    """The backend changed the path at the planned instant itself (an engine link
    told ahead): ``effective_s`` is ``at_s`` whatever ``late_s`` says."""
    error: str | None = None
    outage_s: float | None = None
    lost: int | None = None
    late_packets: int | None = None
    duplicates: int | None = None
    """Duplicates received from the event to one interval after its outage (a
    flooding switch or a loop while the network reconverges)."""
    recovered: bool | None = None
    delay_s: float | None = None
    """From the event to the first lost packet's send time."""
    latency_p99_before_ns: int | None = None
    """The worst per-interval p99 latency in the second before the event."""
    latency_max_during_ns: int | None = None
    """The worst latency from the event to one interval after its outage."""
    latency_p99_after_ns: int | None = None
    """The worst per-interval p99 latency in the second after that."""


class UdpResult(_Model):
    """A pktgen run: what was asked, what the sender did, what the receiver saw."""

    kind: Literal["udp"] = "udp"
    src: str
    dst: str
    size: int
    pattern: str
    mode: str = "udp"
    burst: int | None = None
    requested_pps: float
    achieved_pps: float
    rate_reached: bool
    duration_s: float
    sent: int
    received: int
    unique: int
    lost: int
    loss_ratio: float
    duplicates: int
    reordered: int
    malformed: int
    socket_drops: int
    receive_pps: float
    latency: LatencySummary
    flows: list[UdpFlowResult]
    intervals: list[Interval]
    interval_s: float
    first_send_ns: int | None = None
    """When the first packet was sent (CLOCK_REALTIME ns)."""
    last_send_ns: int | None = None
    behind_max_ns: int = 0
    """The most the sender fell behind its schedule (a busy machine): packets due in
    that span went out late, bunched; a cut's loss count can differ from its length
    times the rate by that span times the rate."""
    gaps: list[Gap] = Field(default_factory=list)
    """Every jump in a flow's sequence numbers (at most 10,000; ``gaps_dropped`` more)."""
    gaps_dropped: int = 0
    jitter: LatencySummary | None = None
    """Jitter, all flows: each packet's latency change from its flow's packet before."""
    worst: list[tuple[int, int, int]] = Field(default_factory=list)
    """The highest latencies when asked for (``worst=`` of :func:`pktgen.run`):
    (receive time CLOCK_REALTIME ns, latency ns, flow id), by receive time."""
    events: list[EventRecord] = Field(default_factory=list)
    """Events run during the flow, each with the outage it caused."""
    outages: list[Outage] = Field(default_factory=list)
    """Every outage after the first event (from the packets)."""
    sender_cpu: int | None = None
    receiver_cpu: int | None = None
    hdr_log: str | None = None
    flags: list[Flag] = Field(default_factory=list)
    verdict: Verdict | None = None
    monitor: MonitorRecord | None = None


class Trial(_Model):
    """One trial of a zero-loss search."""

    rate_pps: float
    achieved_pps: float
    sent: int
    received: int
    loss_ratio: float
    generator_limited: bool
    socket_drops: int
    latency: LatencySummary


class ZeroLossResult(_Model):
    """RFC 2544 throughput search plus NDR/PDR (FD.io CSIT): the highest rate with no
    loss (NDR) and with at most ``pdr_loss`` (PDR, a ratio), every trial kept."""

    kind: Literal["zero_loss"] = "zero_loss"
    src: str
    dst: str
    size: int
    pattern: str
    burst: int | None = None
    trial_s: float
    resolution_pps: float
    low_pps: float
    high_pps: float
    pdr_loss: float
    ndr_pps: float
    pdr_pps: float
    generator_max_pps: float | None = None
    trials: list[Trial]
    flags: list[Flag] = Field(default_factory=list)
    verdict: Verdict | None = None
    monitor: MonitorRecord | None = None


class FloorSummary(_Model):
    """The measurement's own floor (``fidelnet measure selftest`` over a bare veth
    pair): the smallest latency it can see and the highest rate it can make."""

    latency_p50_ns: int
    latency_p999_ns: int
    latency_max_ns: int
    max_send_pps: float
    max_zero_loss_pps: float | None = None
    measured_at: str
    source: str


class SelftestResult(_Model):
    kind: Literal["selftest"] = "selftest"
    size: int
    runs: list[UdpResult]
    max_send_pps: float
    max_zero_loss_pps: float | None = None
    floor: FloorSummary
    flags: list[Flag] = Field(default_factory=list)
    verdict: Verdict | None = None
    monitor: MonitorRecord | None = None


class TcpInterval(_Model):
    """One receiver report interval: ``t_s`` its start (from the start of the test),
    ``goodput_bps`` the payload the receiver read in it. ``wire_bps`` is that as L2
    frames (see docs/measure-tcp.md); ``warmup`` marks intervals before the
    measured span (shown, not counted)."""

    t_s: float
    goodput_bps: float
    end_s: float | None = None
    bytes: int | None = None
    wire_bps: float | None = None
    warmup: bool = False


class TcpFlowResult(_Model):
    """One iperf3 flow: the receiver's goodput is the figure; the sender's is kept to
    show the discrepancy."""

    src: str
    dst: str
    port: int
    sender_bps: float
    receiver_bps: float
    goodput_bps: float
    retransmits: int | None = None
    window_bytes: int | None = None
    intervals: list[TcpInterval]
    warmup_s: float
    # sender_bps: the sender's figure over the measured span (the receiver's own span);
    # receiver_bps: iperf3's whole-run receiver figure (warm-up included);
    # goodput_bps: the receiver's mean after the warm-up, the figure to use.
    dst_addr: str | None = None
    path: list[str] = Field(default_factory=list)
    measured_s: float | None = None
    sender_total_bps: float | None = None
    sender_peak_bps: float | None = None
    wire_bps: float | None = None
    mss_bytes: int | None = None
    bottleneck_bps: float | None = None
    rtt_s: float | None = None
    suggested_window_bytes: int | None = None
    sndbuf_bytes: int | None = None
    rcvbuf_bytes: int | None = None
    congestion: str | None = None


class TcpResult(_Model):
    kind: Literal["tcp"] = "tcp"
    duration_s: float
    interval_s: float
    warmup_s: float
    flows: list[TcpFlowResult]
    total_goodput_bps: float
    jain: float | None = None
    bottleneck_bps: float | None = None
    suggested_window_bytes: int | None = None
    window_applied: bool = False
    note: str | None = None
    flags: list[Flag] = Field(default_factory=list)
    verdict: Verdict | None = None
    monitor: MonitorRecord | None = None
    rtt_s: float | None = None
    bidirectional: bool = False
    frame_overhead_bytes: int = 66
    exceeding_intervals: int = 0


Result = Annotated[
    UdpResult | ZeroLossResult | SelftestResult | TcpResult,
    Field(discriminator="kind"),
]


class ResultFile(_Model):
    """What a result JSON file holds."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["fidelnet.result/1"] = Field(default="fidelnet.result/1", alias="schema")
    kind: str
    name: str
    provenance: Provenance
    floor: FloorSummary | None = None
    result: Result


def save_result(
    path: str | os.PathLike[str],
    name: str,
    result: UdpResult | ZeroLossResult | SelftestResult | TcpResult,
    provenance: Provenance,
    floor: FloorSummary | None = None,
) -> Path:
    """Write ``result`` as a :class:`ResultFile` to ``path`` (a file, or a directory
    in which ``<name>.json`` is written). Returns the file's path."""
    target = Path(path)
    if target.is_dir():
        target = target / f"{name}.json"
    doc = ResultFile(kind=result.kind, name=name, provenance=provenance, floor=floor, result=result)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(json.dumps(doc.model_dump(mode="json", by_alias=True), indent=1) + "\n")
    tmp.replace(target)
    return target


def load_result(path: str | os.PathLike[str]) -> ResultFile:
    """Read a result file back (validated; a clear error names the bad field)."""
    return ResultFile.model_validate_json(Path(path).read_text())
