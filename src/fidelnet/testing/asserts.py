"""Assertions on a network and on measurements that say what was measured.

Each helper raises :class:`AssertionError` whose message puts the measured value
beside the expected one, with what was measured and the result's flags::

    latency p99.9 = 1.84 ms > 1.00 ms allowed (h1->h2, 10000 pps, flags: receiver_socket_drops)

Messages carry the measurement's fidelity verdict too. An assertion on a
measurement the run judged ``untrusted`` neither passes nor fails on that number:
it raises :class:`InconclusiveError` (an ``AssertionError``, so the test fails)
whose message starts with ``inconclusive`` and gives the reasons, unless the error
cannot have changed the answer (a passed latency bound or a loss bound with only
engine lateness against it, :mod:`fidelnet.fidelity.bounds`).
:func:`set_untrusted` (``"warn"``) turns that into a warning
(:class:`UntrustedMeasurementWarning`) and judges the number as it is.

A measurement that cannot be judged (nothing sent, no packet received) fails too,
with a message that says so; arguments that make no sense (a loss ratio of 5, an
unknown flow) raise :class:`ValueError`. Thresholds take numbers in the units of the
names (a ratio, seconds, bit/s) or strings with units (``"1%"``, ``"2ms"``,
``"90Mbit"``).

This module imports nothing heavy: the result models are duck-typed.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from typing import TypeAlias

    from fidelnet.measure.results import (
        Flag,
        LatencySummary,
        SelftestResult,
        TcpFlowResult,
        TcpResult,
        Trial,
        UdpFlowResult,
        UdpResult,
        ZeroLossResult,
    )
    from fidelnet.network import Network
    from fidelnet.nodes.node import Node

    LossResult: TypeAlias = UdpResult | UdpFlowResult | Trial
    LatencyResult: TypeAlias = UdpResult | UdpFlowResult | Trial | LatencySummary
    FlaggedResult: TypeAlias = UdpResult | ZeroLossResult | SelftestResult | TcpResult

__all__ = [
    "InconclusiveError",
    "UntrustedMeasurementWarning",
    "assert_goodput_at_least",
    "assert_jain_at_least",
    "assert_latency_at_most",
    "assert_loss_at_most",
    "assert_no_flags",
    "assert_reachable",
    "assert_trusted",
    "set_untrusted",
]


class InconclusiveError(AssertionError):
    """The assertion judged a measurement its run knows to be wrong (``untrusted``):
    neither a pass nor a failure."""


class UntrustedMeasurementWarning(UserWarning):
    """An assertion judged an untrusted measurement as it is (``set_untrusted("warn")``)."""


_UNTRUSTED: dict[str, str] = {"mode": "inconclusive"}


def set_untrusted(mode: Literal["inconclusive", "warn"]) -> None:
    """What an assertion on an untrusted measurement does: ``inconclusive`` (the
    default: raise :class:`InconclusiveError`) or ``warn`` (judge the number, and
    warn)."""
    if mode not in ("inconclusive", "warn"):
        raise ValueError(f"untrusted: must be inconclusive or warn (got {mode!r})")
    _UNTRUSTED["mode"] = mode


# Percentiles a LatencySummary carries; any other comes from the HDR histogram.
_SUMMARY_FIELDS = {
    0.0: "min_ns",
    50.0: "p50_ns",
    90.0: "p90_ns",
    99.0: "p99_ns",
    99.9: "p999_ns",
    99.99: "p9999_ns",
    100.0: "max_ns",
}


# -- formatting ---------------------------------------------------------------------


def _num(x: float) -> str:
    a = abs(x)
    return f"{x:.2f}" if a < 10 else f"{x:.1f}" if a < 100 else f"{x:.0f}"


def _time(seconds: float) -> str:
    a = abs(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if a >= scale:
            return f"{_num(seconds / scale)} {unit}"
    return f"{seconds * 1e9:.0f} ns"


def _rate(bps: float) -> str:
    a = abs(bps)
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if a >= scale:
            return f"{_num(bps / scale)} {unit}"
    return f"{bps:.0f} bit/s"


def _percent(ratio: float) -> str:
    p = ratio * 100
    if p == 0:
        return "0 %"
    return f"{p:.2f} %" if abs(p) >= 0.01 else f"{p:.2g} %"


def _percentile_name(percentile: float) -> str:
    if percentile == 100:
        return "max"
    if percentile == 0:
        return "min"
    return f"p{percentile:g}"


def _flags(result: object) -> str | None:
    flags: list[Flag] | None = getattr(result, "flags", None)
    if flags is None:
        return None
    return "flags: " + ", ".join(f.code for f in flags) if flags else "no flags"


def _flows(flows: Sequence[TcpFlowResult]) -> str:
    each = ", ".join(f"{f.src}->{f.dst} {_rate(f.goodput_bps)}" for f in flows)
    return f"{len(flows)} flow{'s' if len(flows) != 1 else ''}: {each}"


def _context(result: object, *, flags: bool = True, verdict: bool = True) -> str:
    """``h1->h2, 10000 pps, flags: ...``: what was measured, for messages."""
    parts: list[str] = []
    src, dst = getattr(result, "src", None), getattr(result, "dst", None)
    if src is not None and dst is not None:
        parts.append(f"{src}->{dst}")
    pps = getattr(result, "requested_pps", None)
    if pps is None:
        pps = getattr(result, "rate_pps", None)  # a zero-loss trial
    if pps is not None:
        parts.append(f"{pps:.0f} pps")
    tcp_flows = getattr(result, "flows", None)
    if getattr(result, "kind", None) == "tcp" and tcp_flows is not None:
        parts.append(_flows(tcp_flows))
    if flags and (f := _flags(result)) is not None:
        parts.append(f)
    judged = getattr(result, "verdict", None)
    if verdict and judged is not None:
        parts.append(f"verdict: {judged.summary(2)}")
    return f" ({', '.join(parts)})" if parts else ""


def _trust(result: object, measured: str, passes: bool, decided: bool = False) -> None:
    """Raise :class:`InconclusiveError` (or warn) when ``result`` is untrusted and its
    error may have changed the answer; ``decided`` says it cannot have."""
    __tracebackhide__ = True
    verdict = getattr(result, "verdict", None)
    if verdict is None or verdict.level != "untrusted" or decided:
        return
    reasons = "; ".join(r.message for r in verdict.problems()[:3])
    message = (
        f"inconclusive: {measured} ({'passes' if passes else 'fails'}), but the "
        f"measurement is untrusted: {reasons}{_context(result, verdict=False)}"
    )
    if _UNTRUSTED["mode"] == "warn":
        warnings.warn(message, UntrustedMeasurementWarning, stacklevel=3)
        return
    raise InconclusiveError(message)


# -- arguments ----------------------------------------------------------------------


def _seconds(value: float | str) -> float:
    from fidelnet.topology.units import parse_duration

    s = parse_duration("seconds", value, bare_unit=1.0)
    if s < 0:
        raise ValueError(f"seconds must not be negative (got {value!r})")
    return s


def _bps(value: float | str) -> float:
    from fidelnet.topology.units import parse_rate

    r = parse_rate("bps", value, bare_unit=1.0)
    if r < 0:
        raise ValueError(f"bps must not be negative (got {value!r})")
    return r


def _ratio(value: float | str) -> float:
    if isinstance(value, str):
        from fidelnet.topology.units import parse_percent

        if not value.strip().endswith("%"):
            raise ValueError(f"ratio: a string needs a % sign (got {value!r})")
        return parse_percent("ratio", value) / 100
    if not 0 <= value <= 1:
        hint = f'; for {value} % write "{value}%" or {value / 100:g}' if 1 < value <= 100 else ""
        raise ValueError(f"ratio must be between 0 and 1 (got {value!r}{hint})")
    return float(value)


def _need(result: object, attr: str, what: str) -> Any:
    if not hasattr(result, attr):
        raise TypeError(f"{what} needs a result with {attr!r}; got {type(result).__name__}")
    return getattr(result, attr)


# -- the assertions -----------------------------------------------------------------


def assert_reachable(
    net: Network, hosts: Iterable[str | Node] | None = None, timeout: float = 1.0
) -> None:
    """Every ordered pair of ``hosts`` (default: every host of ``net``) answers one
    ping; the message lists the pairs that did not."""
    __tracebackhide__ = True
    nodes = (
        list(net.hosts) if hosts is None else [net[h] if isinstance(h, str) else h for h in hosts]
    )
    results = net.ping_pairs(nodes, timeout)
    names = ", ".join(n.name for n in nodes)
    if not results:
        raise AssertionError(f"reachability: no pair of hosts with an address to ping ({names})")
    failed = [f"{a}->{b}" for (a, b), ok in results.items() if not ok]
    if failed:
        shown = ", ".join(failed[:20]) + (
            f", ... {len(failed) - 20} more" if len(failed) > 20 else ""
        )
        raise AssertionError(
            f"unreachable: {len(failed)} of {len(results)} pairs got no ping reply: {shown} "
            f"(pinged every ordered pair of {names}, timeout {_time(timeout)})"
        )


def assert_loss_at_most(result: LossResult, ratio: float | str) -> None:
    """Loss (``loss_ratio``: a fraction, 0..1) of a pktgen run, one of its flows or a
    zero-loss trial is at most ``ratio`` (``0.01`` or ``"1%"``)."""
    __tracebackhide__ = True
    allowed = _ratio(ratio)
    loss = float(_need(result, "loss_ratio", "assert_loss_at_most"))
    sent = int(_need(result, "sent", "assert_loss_at_most"))
    lost = getattr(result, "lost", None)
    if lost is None:
        lost = sent - int(getattr(result, "received", 0))
    if sent == 0:
        raise AssertionError(f"loss cannot be judged: nothing was sent{_context(result)}")
    verdict = getattr(result, "verdict", None)
    if verdict is not None:
        from fidelnet.fidelity.bounds import loss_decided

        decided = loss_decided(verdict, getattr(result, "monitor", None))
        _trust(result, f"loss = {_percent(loss)}", loss <= allowed, decided)
    if loss > allowed:
        raise AssertionError(
            f"loss = {_percent(loss)} ({lost} of {sent} lost) > {_percent(allowed)} allowed"
            f"{_context(result)}"
        )


def assert_latency_at_most(result: LatencyResult, percentile: float, seconds: float | str) -> None:
    """One-way latency at ``percentile`` (50, 90, 99, 99.9, 99.99 and 0/100 for
    min/max from the summary; any other from the HDR histogram) is at most
    ``seconds`` (``0.001`` or ``"1ms"``)."""
    __tracebackhide__ = True
    if not 0 <= percentile <= 100:
        raise ValueError(f"percentile must be between 0 and 100 (got {percentile!r})")
    allowed = _seconds(seconds)
    inner = getattr(result, "latency", None)
    summary = cast("LatencySummary", inner if inner is not None else result)
    count = int(_need(summary, "count", "assert_latency_at_most"))
    name = _percentile_name(percentile)
    if count == 0:
        raise AssertionError(
            f"latency {name} cannot be judged: no packet was received{_context(result)}"
        )
    field = _SUMMARY_FIELDS.get(float(percentile))
    if field is not None:
        value_ns = int(getattr(summary, field))
    else:
        if not summary.hdr:
            raise ValueError(
                f"latency {name}: this result has no HDR histogram, only "
                + ", ".join(_percentile_name(p) for p in _SUMMARY_FIELDS)
            )
        from fidelnet.measure.latency import decode

        value_ns = int(decode(summary.hdr).get_value_at_percentile(percentile))
    verdict = getattr(result, "verdict", None)
    if verdict is not None:
        from fidelnet.fidelity.bounds import latency_decided

        decided = latency_decided(verdict, value_ns, allowed * 1e9) is not None
        _trust(
            result, f"latency {name} = {_time(value_ns / 1e9)}", value_ns <= allowed * 1e9, decided
        )
    if value_ns > allowed * 1e9:
        raise AssertionError(
            f"latency {name} = {_time(value_ns / 1e9)} > {_time(allowed)} allowed{_context(result)}"
        )


def _flow(result: TcpResult, flow: int | tuple[str, str]) -> tuple[int, TcpFlowResult]:
    flows = list(result.flows)
    if isinstance(flow, int):
        if not -len(flows) <= flow < len(flows):
            raise ValueError(f"flow {flow}: the result has {len(flows)} flows")
        return flow % len(flows), flows[flow]
    for i, f in enumerate(flows):
        if (f.src, f.dst) == tuple(flow):
            return i, f
    have = ", ".join(f"({f.src!r}, {f.dst!r})" for f in flows)
    raise ValueError(f"flow {flow!r}: no such flow (the result has {have})")


def assert_goodput_at_least(
    tcp_result: TcpResult, bps: float | str, flow: int | tuple[str, str] | None = None
) -> None:
    """Receiver-side goodput of a :func:`fidelnet.measure.tcp` result is at least
    ``bps`` (``90e6`` or ``"90Mbit"``): the total, or one flow's (an index or a
    ``(src, dst)`` pair)."""
    __tracebackhide__ = True
    required = _bps(bps)
    flows = _need(tcp_result, "flows", "assert_goodput_at_least")
    if not flows:
        raise AssertionError("goodput cannot be judged: the result has no flow")
    if flow is None:
        value = float(tcp_result.total_goodput_bps)
        label = "total goodput"
        context = _context(tcp_result)
    else:
        i, f = _flow(tcp_result, flow)
        value = float(f.goodput_bps)
        label = f"goodput {f.src}->{f.dst}"
        flags = _flags(tcp_result)
        context = f" (flow {i} of {len(flows)}, {flags})"
    _trust(tcp_result, f"{label} = {_rate(value)}", value >= required)
    if value < required:
        raise AssertionError(f"{label} = {_rate(value)} < {_rate(required)} required{context}")


def assert_jain_at_least(tcp_result: TcpResult, value: float) -> None:
    """Jain's fairness index of the flows' goodputs (1 = equal shares, 1/n = one
    flow has everything) is at least ``value``."""
    __tracebackhide__ = True
    if not 0 < value <= 1:
        raise ValueError(f"a Jain index lies in (0, 1]; got {value!r}")
    flows = _need(tcp_result, "flows", "assert_jain_at_least")
    index = tcp_result.jain
    if index is None:
        if len(flows) < 2:
            raise ValueError(f"Jain's index needs two flows or more; the result has {len(flows)}")
        from fidelnet.measure.fairness import jain

        index = jain(f.goodput_bps for f in flows)
    _trust(tcp_result, f"Jain's fairness index = {index:.3f}", index >= value)
    if index < value:
        raise AssertionError(
            f"Jain's fairness index = {index:.3f} < {value:.3f} required{_context(tcp_result)}"
        )


def assert_no_flags(result: FlaggedResult, allow: Iterable[str] = ()) -> None:
    """The result carries no flag, except those whose ``code`` is in ``allow``."""
    __tracebackhide__ = True
    allowed = {allow} if isinstance(allow, str) else set(allow)
    flags: list[Flag] = _need(result, "flags", "assert_no_flags")
    unexpected = [f for f in flags if f.code not in allowed]
    if unexpected:
        kind = getattr(result, "kind", type(result).__name__)
        lines = "\n".join(f"  {f.code}: {f.message}" for f in unexpected)
        raise AssertionError(
            f"{len(unexpected)} unexpected flag{'s' if len(unexpected) != 1 else ''} on the "
            f"{kind} result{_context(result, flags=False)}:\n{lines}"
        )


def assert_trusted(result: FlaggedResult, *, allow_degraded: bool = True) -> None:
    """The run's verdict on ``result`` is ``trusted`` (or ``degraded``, unless
    ``allow_degraded`` is false); the message gives its reasons."""
    __tracebackhide__ = True
    verdict = getattr(result, "verdict", None)
    if verdict is None:
        raise AssertionError(
            f"no verdict: the {getattr(result, 'kind', type(result).__name__)} result was not "
            f"judged (measured with monitor=False, or read from an old file){_context(result)}"
        )
    ok = {"trusted", "degraded"} if allow_degraded else {"trusted"}
    if verdict.level not in ok:
        raise AssertionError(f"verdict {verdict.summary(5)}{_context(result, flags=True)}")
