"""The machine's neighbour-table limits: raised by what a run needs, given back
exactly, whatever another run did meanwhile; table-full counts read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fidelnet.kernel import neigh


def _tree(root: Path, t1: int = 128, t2: int = 512, t3: int = 1024) -> str:
    d = root / "neigh" / "default"
    d.mkdir(parents=True)
    for name, v in (("gc_thresh1", t1), ("gc_thresh2", t2), ("gc_thresh3", t3)):
        (d / name).write_text(f"{v}\n")
    return str(d)


def _val(d: str, name: str) -> int:
    return int((Path(d) / name).read_text())


def test_needed_is_every_pair_capped() -> None:
    assert neigh.needed(64) == 4032
    assert neigh.needed(1) == 0
    assert neigh.needed(100_000) == neigh.MAX_ENTRIES


def test_small_runs_change_nothing(tmp_path: Path) -> None:
    d = _tree(tmp_path)
    records: list[dict[str, Any]] = []
    assert neigh.fit(neigh.needed(10), lambda k, **f: records.append(f), (d,)) == {}
    assert records == [] and _val(d, "gc_thresh3") == 1024


def test_raise_is_recorded_first_and_given_back_by_overlapping_runs(tmp_path: Path) -> None:
    d = _tree(tmp_path)
    seen: list[tuple[str, int, int]] = []

    def record(kind: str, **f: Any) -> None:
        assert kind == "sysctl_add"
        seen.append((Path(f["path"]).name, f["delta"], _val(d, Path(f["path"]).name)))

    a = neigh.fit(4032, record, (d,))
    assert seen == [("gc_thresh3", 4032, 1024), ("gc_thresh2", 4032, 512)]  # before writing
    assert (_val(d, "gc_thresh2"), _val(d, "gc_thresh3")) == (4544, 5056)
    b = neigh.fit(20_000, lambda k, **f: None, (d,))  # a second run, overlapping
    assert _val(d, "gc_thresh3") == 25_056
    for path, delta in reversed(list(a.items())):  # the first run ends first
        neigh.undo(path, delta)
    assert (_val(d, "gc_thresh2"), _val(d, "gc_thresh3")) == (20_512, 21_024)
    for path, delta in reversed(list(b.items())):
        neigh.undo(path, delta)
    assert (_val(d, "gc_thresh1"), _val(d, "gc_thresh2"), _val(d, "gc_thresh3")) == (
        128,
        512,
        1024,
    )


def test_table_fulls_summed_over_cpus_and_tables(tmp_path: Path) -> None:
    head = "entries  allocs   destroys hash_grows lookups  hits     res_failed table_fulls\n"
    arp = tmp_path / "arp_cache"
    arp.write_text(head + "0 1 2 3 4 5 6 00002834\n0 1 2 3 4 5 6 00002715\n")
    nd = tmp_path / "ndisc_cache"
    nd.write_text(head + "0 0 0 0 0 0 0 00000001\n")
    assert neigh.table_fulls((str(arp), str(nd), str(tmp_path / "none"))) == 0x2834 + 0x2715 + 1
