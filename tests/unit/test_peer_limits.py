"""The Mininet peer's sysctls: read before, written back after, only where changed."""

from __future__ import annotations

from pathlib import Path

from fidelnet.bench import peer_limits


def test_kept_gives_back_what_the_block_changed(tmp_path: Path) -> None:
    a, b, gone = tmp_path / "tcp_rmem", tmp_path / "backlog", tmp_path / "missing"
    a.write_text("4096\t131072\t6291456\n")
    b.write_text("1000\n")
    paths = (str(a), str(b), str(gone))
    with peer_limits.kept(paths) as saved:
        assert set(saved) == {str(a), str(b)}  # what cannot be read is left out
        a.write_text("10240 87380 16777216")  # as Mininet's fixLimits() writes them
        b.write_text("5000")
    assert a.read_text().split() == ["4096", "131072", "6291456"]
    assert b.read_text() == "1000"
    assert peer_limits.restore(peer_limits.snapshot(paths)) == []  # nothing differs now


def test_the_list_covers_mininet_fixlimits() -> None:
    names = {p.rsplit("/", 1)[1] for p in peer_limits.FIXLIMITS}
    assert {"tcp_rmem", "tcp_wmem", "netdev_max_backlog", "gc_thresh3", "max"} <= names
