"""One link direction's :class:`LinkParams` as the engine's ``DirectionParams``
(``crates/link-core/src/params.rs``): integers in nanoseconds, bits per second and
bytes, probabilities in 0..1, a trace as its list of milliseconds.

Seeds: a direction's seed is derived from the link's seed and the direction's
name, so the two directions draw independent streams and the same seed gives the
same run again. A link without a seed gets one from the run, recorded with the
link's backend in the state file and in results.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fidelnet.links.tcshape import DEFAULT_QUEUE
from fidelnet.links.trace import read_trace
from fidelnet.topology.spec import LinkParams

__all__ = ["direction_seed", "to_engine"]

_U64 = (1 << 64) - 1


def direction_seed(seed: int, direction: str) -> int:
    """A 64-bit seed for ``direction`` (e.g. ``"h1:h1-eth0>s1"``) from ``seed``."""
    digest = hashlib.blake2b(f"{seed}/{direction}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & _U64


def to_engine(params: LinkParams, seed: int, where: str = "params") -> dict[str, Any]:
    """The engine's parameters for one direction."""
    out: dict[str, Any] = {"seed": seed}
    if params.bw is not None:
        out["rate_bps"] = max(1, round(params.bw))
    if params.trace is not None:
        out["trace_ms"] = read_trace(f"{where}.trace", params.trace)
    if params.overhead:
        out["overhead_bytes"] = params.overhead
    if params.delay:
        out["delay_ns"] = round(params.delay * 1e9)
    if params.jitter:
        out["jitter_ns"] = round(params.jitter * 1e9)
    if params.jitter_dist is not None:
        out["jitter_dist"] = params.jitter_dist
    if params.reorder:
        out["reorder"] = True
    ge = params.loss_model
    if ge is not None:
        out["loss"] = {
            "model": "gilbert_elliott",
            "p": ge.p / 100,
            "r": ge.r / 100,
            "loss_good": ge.loss_good / 100,
            "loss_bad": ge.loss_bad / 100,
        }
    elif params.loss:
        out["loss"] = {"model": "random", "probability": params.loss / 100}
    if params.duplicate:
        out["duplicate"] = params.duplicate / 100
    if params.corrupt:
        out["corrupt"] = params.corrupt / 100
    shaped = params.bw is not None or params.trace is not None
    if params.max_queue_size is not None:
        out["queue_packets"] = params.max_queue_size
    elif shaped and params.queue_bytes is None:
        out["queue_packets"] = DEFAULT_QUEUE
    if params.queue_bytes is not None:
        out["queue_bytes"] = params.queue_bytes
    if params.queue is not None:
        out["queue"] = params.queue
    return out
