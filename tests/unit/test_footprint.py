"""What a topology needs from the machine, and the limit named when it is too big."""

from __future__ import annotations

import resource

import pytest

from fidelnet.errors import ValidationError
from fidelnet.kernel.limits import Machine, raise_nofile
from fidelnet.topology import footprint as fp
from fidelnet.topology import line, linear

BIG = Machine(
    mem_available=64 << 30,
    nofile_soft=1024,
    nofile_hard=1 << 20,
    open_fds=10,
    pid_max=4 << 20,
    tasks=200,
    max_net_namespaces=1 << 20,
)


def test_footprint_counts_namespaces_switches_and_shells() -> None:
    spec = linear(100)  # 100 hosts, 100 switches
    need = fp.footprint(spec)
    assert (need.namespaces, need.switches, need.shells, need.tasks) == (101, 100, 0, 0)
    assert need.fds == 3 * 101 + fp.FDS_SPARE
    assert need.memory == 101 * fp.MEM_PER_NAMESPACE + 100 * fp.MEM_PER_SWITCH
    shells = fp.footprint(spec, shells=True)
    assert shells.tasks == 200 and shells.fds == need.fds + 3 * 200


def test_routed_line_has_no_fabric_namespace() -> None:
    assert fp.footprint(line(7)).namespaces == 7


def test_a_topology_that_fits_passes() -> None:
    assert fp.check(linear(1000), BIG).namespaces == 1001


@pytest.mark.parametrize(
    ("machine", "words"),
    [
        (
            Machine(64 << 30, 1024, 4096, 10, 1 << 22, 200, 1 << 20),
            ["open files", "RLIMIT_NOFILE=4096", "ulimit -Hn"],
        ),
        (Machine(512 << 20, 1024, 1 << 20, 10, 1 << 22, 200, 1 << 20), ["MiB of memory"]),
        (Machine(64 << 30, 1024, 1 << 20, 10, 1 << 22, 200, 1000), ["max_net_namespaces=1000"]),
    ],
)
def test_the_limit_passed_is_named(machine: Machine, words: list[str]) -> None:
    with pytest.raises(ValidationError) as info:
        fp.check(linear(2000), machine)
    assert info.value.field == "topology"
    assert "4000 nodes" in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_shells_count_against_free_tasks() -> None:
    tight = Machine(64 << 30, 1024, 1 << 20, 10, 32768, 30000, 1 << 20)
    fp.check(linear(2000), tight)  # no shells: no tasks
    with pytest.raises(ValidationError, match=r"need 4000 processes.*room for 2768"):
        fp.check(linear(2000), tight, shells=True)


def test_unknown_numbers_do_not_refuse() -> None:
    blind = Machine(None, -1, -1, 0, None, None, None)
    assert fp.check(linear(3000), blind, shells=True).tasks == 6000


def test_raise_nofile_never_lowers_and_stays_under_hard() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        assert raise_nofile(1) == soft
        wanted = soft + 10 if hard == resource.RLIM_INFINITY else hard
        got = raise_nofile(wanted)
        assert got >= min(wanted, soft + 10) or got == hard
        assert hard == resource.RLIM_INFINITY or got <= hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
