"""Reading ``fidelnet-pktgen``'s JSON documents into results: the sender's and the
receiver's reports of one run become a :class:`UdpResult` (:func:`combine`), with
its flows, interval series, sequence gaps and flags."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fidelnet.errors import MeasurementError
from fidelnet.measure import latency
from fidelnet.measure.results import Flag, Gap, Interval, UdpFlowResult, UdpResult

if TYPE_CHECKING:
    from fidelnet.measure.pktgen import TrafficSpec

__all__ = ["combine"]


def _flows(
    src: str, dst: str, addr: str, sent: dict[str, Any], got: dict[str, Any]
) -> list[UdpFlowResult]:
    by_id = {int(f["id"]): f for f in got.get("flows", [])}
    out = []
    for f in sent.get("flows", []):
        fid = int(f["id"])
        r = by_id.get(fid, {})
        n_sent = int(f["sent"])
        unique = int(r.get("unique", 0))
        lost = max(n_sent - unique, 0)
        out.append(
            UdpFlowResult(
                id=fid,
                src=src,
                dst=dst,
                dst_addr=str(f.get("dst", addr)),
                sent=n_sent,
                received=int(r.get("received", 0)),
                unique=unique,
                lost=lost,
                loss_ratio=lost / n_sent if n_sent else 0.0,
                duplicates=int(r.get("duplicates", 0)),
                reordered=int(r.get("reordered", 0)),
                latency=latency.summary_from_json(r.get("latency"), r.get("latency_hdr")),
                jitter=latency.summary_from_json(r.get("jitter"), r.get("jitter_hdr"))
                if r.get("jitter")
                else None,
                first_seq=_opt_int(r, "first_seq") if r.get("received") else None,
                first_send_ns=_opt_int(r, "first_send_ns") if r.get("received") else None,
                max_seq=_opt_int(r, "max_seq") if r.get("received") else None,
                max_seq_send_ns=_opt_int(r, "max_seq_send_ns") if r.get("received") else None,
            )
        )
    return out


def _opt_int(doc: dict[str, Any], key: str) -> int | None:
    value = doc.get(key)
    return int(value) if value is not None else None


def _gaps(got: dict[str, Any]) -> list[Gap]:
    return [
        Gap(
            flow=int(g["flow"]),
            after_seq=int(g["after_seq"]),
            after_send_ns=int(g["after_send_ns"]),
            before_seq=int(g["before_seq"]),
            before_send_ns=int(g["before_send_ns"]),
            before_rx_ns=int(g["before_rx_ns"]),
            lost=int(g["lost"]),
            filled=int(g.get("filled", 0)),
        )
        for g in got.get("gaps", [])
    ]


def _intervals(got: dict[str, Any]) -> tuple[list[Interval], float]:
    step = float(got.get("interval_ms", 100)) / 1000.0
    out = []
    for iv in got.get("intervals", []):
        packets = int(iv["packets"])
        frame_bytes = int(iv.get("frame_bytes", 0))
        out.append(
            Interval(
                t_s=int(iv["t_ns"]) / 1e9,
                packets=packets,
                duplicates=int(iv.get("duplicates", 0)),
                frame_bytes=frame_bytes,
                rate_pps=packets / step,
                rate_bps=frame_bytes * 8 / step,
                latency_max_ns=iv.get("latency_max_ns"),
                latency_p50_ns=iv.get("latency_p50_ns"),
                latency_p99_ns=iv.get("latency_p99_ns"),
            )
        )
    return out, step


def _flags(spec: TrafficSpec, sent: dict[str, Any], got: dict[str, Any]) -> list[Flag]:
    flags = []
    if not sent.get("rate_reached", True):
        flags.append(
            Flag(
                code="rate_not_reached",
                message=(
                    f"the sender was asked for {spec.rate_pps:.0f} pps and reached "
                    f"{float(sent.get('achieved_pps', 0)):.0f} pps: the generator, not the "
                    "network, limits this run"
                ),
            )
        )
    if int(sent.get("send_errors", 0)):
        flags.append(
            Flag(
                code="send_errors",
                message=f"{sent['send_errors']} packets could not be sent (ENOBUFS/short sends)",
            )
        )
    drops = int(got.get("socket_drops", 0))
    if drops:
        flags.append(
            Flag(
                code="receiver_socket_drops",
                message=(
                    f"{drops} packets were dropped in the receiver's socket buffer: part of the "
                    "loss is the receiver's, not the network's"
                ),
            )
        )
    malformed = int(got.get("malformed", {}).get("total", 0))
    if malformed:
        flags.append(Flag(code="malformed", message=f"{malformed} malformed packets were received"))
    if int(got.get("userspace_timestamps", 0)):
        flags.append(
            Flag(
                code="userspace_timestamps",
                message=(
                    f"{got['userspace_timestamps']} packets had no kernel receive timestamp; "
                    "their latency includes the receiver's wake-up"
                ),
            )
        )
    if int(got.get("negative_latency", 0)):
        flags.append(
            Flag(
                code="negative_latency",
                message=f"{got['negative_latency']} packets arrived before they were sent "
                "(clock problem): left out of the histogram",
            )
        )
    return flags


def combine(
    src: str,
    dst: str,
    dst_addr: str,
    spec: TrafficSpec,
    sent: dict[str, Any],
    got: dict[str, Any],
    sender_cpu: int | None = None,
    receiver_cpu: int | None = None,
    hdr_log: str | None = None,
) -> UdpResult:
    """A UdpResult from the sender's and the receiver's JSON documents."""
    try:
        flows = _flows(src, dst, dst_addr, sent, got)
        intervals, step = _intervals(got)
        n_sent = int(sent["sent"])
        unique = int(got.get("unique", 0))
        lost = max(n_sent - unique, 0)
        span_ns = int(got.get("last_rx_ns") or 0) - int(got.get("first_rx_ns") or 0)
        received = int(got.get("received", 0))
        return UdpResult(
            src=src,
            dst=dst,
            size=spec.size,
            pattern=spec.pattern,
            mode=spec.mode,
            burst=spec.burst if spec.pattern == "burst" else None,
            requested_pps=float(spec.rate_pps),
            achieved_pps=float(sent["achieved_pps"]),
            rate_reached=bool(sent["rate_reached"]),
            duration_s=float(spec.duration),
            sent=n_sent,
            received=received,
            unique=unique,
            lost=lost,
            loss_ratio=lost / n_sent if n_sent else 0.0,
            duplicates=int(got.get("duplicates", 0)),
            reordered=int(got.get("reordered", 0)),
            malformed=int(got.get("malformed", {}).get("total", 0)),
            socket_drops=int(got.get("socket_drops", 0)),
            receive_pps=(received - 1) / (span_ns / 1e9) if span_ns > 0 else 0.0,
            latency=latency.summary_from_json(got.get("latency"), got.get("latency_hdr")),
            flows=flows,
            intervals=intervals,
            interval_s=step,
            first_send_ns=_opt_int(sent, "first_send_ns"),
            last_send_ns=_opt_int(sent, "last_send_ns"),
            behind_max_ns=int(sent.get("behind_max_ns", 0)),
            gaps=_gaps(got),
            gaps_dropped=int(got.get("gaps_dropped", 0)),
            jitter=latency.summary_from_json(got["jitter"]) if got.get("jitter") else None,
            worst=[(int(t), int(lat), int(f)) for t, lat, f in got.get("worst", [])],
            sender_cpu=sender_cpu,
            receiver_cpu=receiver_cpu,
            hdr_log=hdr_log,
            flags=_flags(spec, sent, got),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MeasurementError(f"pktgen output unreadable: {exc!r}") from exc
