"""LinkParams as the engine's DirectionParams."""

from __future__ import annotations

from pathlib import Path

from fidelnet.links.engine_params import direction_seed, to_engine
from fidelnet.links.tcshape import DEFAULT_QUEUE, netem_options
from fidelnet.topology.spec import GilbertElliott, LinkParams


def test_units_and_probabilities() -> None:
    out = to_engine(
        LinkParams(bw=10e6, delay=0.01, jitter=0.002, loss=1.0, duplicate=0.5, corrupt=0.1), 9
    )
    assert out == {
        "seed": 9,
        "rate_bps": 10_000_000,
        "delay_ns": 10_000_000,
        "jitter_ns": 2_000_000,
        "loss": {"model": "random", "probability": 0.01},
        "duplicate": 0.005,
        "corrupt": 0.001,
        "queue_packets": DEFAULT_QUEUE,
    }


def test_unshaped_direction_has_no_queue_limit() -> None:
    assert to_engine(LinkParams(delay=0.001), 1) == {"seed": 1, "delay_ns": 1_000_000}


def test_gilbert_elliott_and_queue_choices(tmp_path: Path) -> None:
    trace = tmp_path / "t"
    trace.write_text("1\n1\n4\n")
    out = to_engine(
        LinkParams(
            loss_model=GilbertElliott(p=1, r=20, loss_good=0, loss_bad=50),
            queue="hifi",
            queue_bytes=30000,
            trace=str(trace),
            reorder=True,
            jitter_dist="normal",
        ),
        2,
    )
    assert out["loss"] == {
        "model": "gilbert_elliott",
        "p": 0.01,
        "r": 0.2,
        "loss_good": 0.0,
        "loss_bad": 0.5,
    }
    assert out["trace_ms"] == [1, 1, 4]
    assert out["queue"] == "hifi" and out["queue_bytes"] == 30000
    assert "queue_packets" not in out
    assert out["reorder"] is True and out["jitter_dist"] == "normal"


def test_direction_seeds_are_stable_and_distinct() -> None:
    a = direction_seed(42, "h1:h1-eth0/ab")
    assert a == direction_seed(42, "h1:h1-eth0/ab")
    assert a != direction_seed(42, "h1:h1-eth0/ba")
    assert a != direction_seed(43, "h1:h1-eth0/ab")
    assert 0 <= a < 2**64


def test_netem_limit_covers_the_packets_in_flight() -> None:
    opts = netem_options(LinkParams(bw=1e9, delay=0.05))
    assert opts is not None
    in_flight = int(1e9 / 8 * 0.05 / 1514) + 1
    assert opts == {"delay": 50_000, "limit": DEFAULT_QUEUE + in_flight}
    assert netem_options(LinkParams(bw=1e6)) is None
