"""`fidelnet doctor` from facts made by hand, and the kernel feature reader on fake files."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fidelnet import doctor
from fidelnet.cli.main import cli
from fidelnet.doctor import Facts, Line, ProfileFacts, diagnose, exit_code
from fidelnet.kernel import features
from fidelnet.kernel.features import Feature

NOW = _dt.datetime(2026, 11, 30, 12, 0, tzinfo=_dt.timezone.utc)


def _facts(**changes: Any) -> Facts:
    """A machine where everything fidelnet can use is there."""
    feats = {key: Feature("builtin", f"{cfg}=y") for key, (cfg, _m) in doctor.FEATURES.items()}
    feats.update(changes.pop("features", {}))
    base = Facts(
        root=True,
        release="6.1.0-test",
        features=feats,
        binaries={b: f"/opt/fn/{b}" for b in doctor.BINARIES},
        tools={t: f"/usr/bin/{t}" for t in doctor.TOOLS},
        cgroup_v2="/sys/fs/cgroup",
        cgroups={"cpu": "v2", "cpuset": "v2", "memory": "v2", "pids": "v2"},
        rt_runtime_us=950_000,
        rt_period_us=1_000_000,
        rt_group_file=True,
        af_xdp_missing=None,
        bpf_switch_missing=None,
        xdp_object="/opt/fn/bpf/fastpath.bpf.o",
        ovs_missing=None,
        ovs_datapath="system",
        dev_kvm=True,
        kvm_probe=(True, "a guest booted with KVM"),
        vm_image="/var/lib/fidelnet/vm/abc",
        mininet_python="/usr/bin/python3",
        profile=ProfileFacts(
            "/var/lib/fidelnet/profiles/k.json", True, NOW - _dt.timedelta(days=3)
        ),
        now=NOW,
    )
    return dataclasses.replace(base, **changes)


def _line(lines: list[Line], subject: str) -> Line:
    (found,) = [ln for ln in lines if ln.subject == subject]
    return found


def test_a_complete_machine_is_all_ok_and_can_run() -> None:
    lines = diagnose(_facts())
    assert [ln.status for ln in lines if ln.status != "ok"] == []
    assert exit_code(lines) == 0
    assert all(ln.fix == "" for ln in lines)
    subjects = [ln.subject for ln in lines]
    assert len(subjects) == len(set(subjects))  # one line each
    for s in ("netem", "VM nodes", "Open vSwitch", "8021q", "XDP", "AF_XDP", "cgroups",
              "real-time", "calibration", "tc", "iperf3", "chromium", "mininet"):  # fmt: skip
        assert s in subjects


def test_without_netem_delay_goes_to_the_engine() -> None:
    lines = diagnose(
        _facts(features={"netem": Feature("missing", "CONFIG_NET_SCH_NETEM is not set")})
    )
    netem = _line(lines, "netem")
    assert netem.status == "fallback" and "link engine" in netem.uses
    assert "CONFIG_NET_SCH_NETEM" in netem.fix
    assert exit_code(lines) == 0


def test_a_loadable_module_says_modprobe() -> None:
    lines = diagnose(
        _facts(features={"netem": Feature("module", "sch_netem.ko installed, not loaded")})
    )
    assert _line(lines, "netem").status == "ok"  # the kernel loads it on first use
    lines = diagnose(
        _facts(
            ovs_datapath="netdev",
            features={"openvswitch": Feature("module", "openvswitch.ko installed, not loaded")},
        )
    )
    ovs = _line(lines, "Open vSwitch")
    assert ovs.status == "fallback" and "netdev" in ovs.uses and ovs.fix == "modprobe openvswitch"


def test_without_netem_nor_engine_delay_is_refused_with_both_fixes() -> None:
    binaries = {b: f"/opt/fn/{b}" for b in doctor.BINARIES} | {"fidelnet-linkd": None}
    lines = diagnose(
        _facts(
            binaries=binaries,
            features={"netem": Feature("missing", "CONFIG_NET_SCH_NETEM is not set")},
        )
    )
    assert _line(lines, "link engine").status == "missing"
    netem = _line(lines, "netem")
    assert netem.status == "missing" and "make install" in netem.fix
    assert exit_code(lines) == 0  # delay is not essential: plain links still work


@pytest.mark.parametrize(
    ("changes", "subject", "fix_word"),
    [
        ({"root": False}, "privileges", "sudo"),
        ({"cgroup_v2": None}, "cgroups", "cgroup2"),
        (
            {"features": {"veth": Feature("missing", "CONFIG_VETH is not set")}},
            "veth",
            "CONFIG_VETH",
        ),
        ({"binaries": {"fidelnet-exec": None}}, "fidelnet-exec", "make install"),
    ],
)
def test_an_essential_missing_makes_exit_1(
    changes: dict[str, Any], subject: str, fix_word: str
) -> None:
    lines = diagnose(_facts(**changes))
    line = _line(lines, subject)
    assert line.essential and line.status == "missing" and fix_word in line.fix
    assert exit_code(lines) == 1


def test_kvm_tcg_and_an_unprobed_kvm() -> None:
    assert _line(diagnose(_facts(dev_kvm=False)), "VM nodes").uses.startswith("TCG")
    unprobed = _line(diagnose(_facts(kvm_probe=None)), "VM nodes")
    assert unprobed.status == "unknown" and "KVM if a guest boots" in unprobed.uses
    failed = _line(diagnose(_facts(kvm_probe=(False, "no boot in 20 s"))), "VM nodes")
    assert failed.status == "fallback" and "no boot in 20 s" in failed.found
    no_qemu = {t: f"/usr/bin/{t}" for t in doctor.TOOLS} | {"qemu-system-x86_64": None}
    assert _line(diagnose(_facts(tools=no_qemu)), "VM nodes").status == "missing"
    no_crun = {t: f"/usr/bin/{t}" for t in doctor.TOOLS} | {"crun": None}
    line = _line(diagnose(_facts(tools=no_crun)), "container nodes")
    assert line.status == "missing" and "apt-get install crun" in line.fix
    assert _line(diagnose(_facts()), "container nodes").status == "ok"


def test_missing_ovs_tools_xdp_and_af_xdp() -> None:
    lines = diagnose(
        _facts(
            ovs_missing="Open vSwitch (ovs-vswitchd missing)",
            xdp_object=None,
            af_xdp_missing="this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)",
        )
    )
    assert _line(lines, "Open vSwitch").status == "missing"
    xdp = _line(lines, "XDP")
    assert xdp.status == "missing" and "fastpath.bpf.o" in xdp.found
    afx = _line(lines, "AF_XDP")
    assert afx.status == "fallback" and "TAP" in afx.uses


def test_cgroup_and_real_time_gaps() -> None:
    lines = diagnose(_facts(cgroups={"memory": "v1"}, rt_group_file=False, rt_runtime_us=-1))
    cpu = _line(lines, "cpu limits")
    assert cpu.status == "missing" and "cpu and cpuset" in cpu.fix
    rt = _line(lines, "real-time")
    assert rt.status == "missing" and "unlimited" in rt.found and "RT_GROUP_SCHED" in rt.fix
    assert exit_code(lines) == 0


def test_the_profile_age_and_its_absence() -> None:
    fresh = _line(diagnose(_facts()), "calibration")
    assert fresh.status == "ok" and "3 days ago" in fresh.found
    old = ProfileFacts("/p.json", True, NOW - _dt.timedelta(days=200))
    stale = _line(diagnose(_facts(profile=old)), "calibration")
    assert stale.status == "fallback" and "200 days" in stale.found and "calibrate" in stale.fix
    none = ProfileFacts("/p.json", False, problem="this machine has no profile yet")
    absent = _line(diagnose(_facts(profile=none)), "calibration")
    assert absent.status == "fallback" and absent.found == "this machine has no profile yet"


def test_cli_json_and_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "gather", lambda: _facts(root=False))
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["can_run"] is False and doc["exit_code"] == 1
    assert {"subject", "status", "uses", "found", "fix", "essential"} <= set(doc["lines"][0])
    monkeypatch.setattr(doctor, "gather", _facts)
    table = CliRunner().invoke(cli, ["doctor"], terminal_width=160)
    assert table.exit_code == 0
    assert "netem" in table.output and "can build networks here" in table.output


# --- the kernel feature reader --------------------------------------------------------


def test_config_parse() -> None:
    text = 'CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\nCONFIG_D="x"\n# comment\n'
    assert features._parse_config(text) == {
        "CONFIG_A": "y",
        "CONFIG_B": "m",
        "CONFIG_C": "n",
        "CONFIG_D": "x",
    }


def _fake_tree(tmp_path: Path, builtin: str = "", dep: str = "") -> dict[str, Any]:
    (tmp_path / "sys").mkdir()
    mods = tmp_path / "lib" / "6.1.0-test"
    mods.mkdir(parents=True)
    (mods / "modules.builtin").write_text(builtin)
    (mods / "modules.dep").write_text(dep)
    return {
        "release": "6.1.0-test",
        "sys_module": str(tmp_path / "sys"),
        "proc_modules": "",
        "lib_modules": str(tmp_path / "lib"),
    }


def test_feature_presence_from_each_source(tmp_path: Path) -> None:
    where = _fake_tree(
        tmp_path,
        builtin="kernel/net/bridge/bridge.ko\n",
        dep=(
            "kernel/net/sched/sch_netem.ko.zst:\n"
            "kernel/net/8021q/8021q.ko.xz: kernel/net/802/garp.ko\n"
        ),
    )
    cfg = {"CONFIG_NET_SCH_HTB": "y", "CONFIG_NET_SCH_NETEM": "m", "CONFIG_OPENVSWITCH": "n",
           "CONFIG_VLAN_8021Q": "m", "CONFIG_BRIDGE": "y", "CONFIG_TUN": "m"}  # fmt: skip
    f = lambda key, mod: features.feature(key, mod, config=lambda _r: cfg, **where)  # noqa: E731
    assert f("CONFIG_NET_SCH_HTB", "sch_htb").presence == "builtin"
    assert f("CONFIG_NET_SCH_NETEM", "sch_netem") == Feature(
        "module", "sch_netem.ko installed, not loaded"
    )
    assert f("CONFIG_VLAN_8021Q", "8021q").presence == "module"
    assert f("CONFIG_OPENVSWITCH", "openvswitch") == Feature(
        "missing", "CONFIG_OPENVSWITCH is not set"
    )
    tun = f("CONFIG_TUN", "tun")
    assert tun.presence == "missing" and "not in" in tun.source and tun.usable is False
    (tmp_path / "sys" / "openvswitch").mkdir()  # loaded after all (a newer build)
    assert f("CONFIG_OPENVSWITCH", "openvswitch").presence == "loaded"
    loaded = features.feature(
        "CONFIG_X", "x_mod", config=lambda _r: {}, **(where | {"proc_modules": "x_mod 1 0\n"})
    )
    assert loaded.presence == "loaded"


def test_feature_without_any_source_is_unknown(tmp_path: Path) -> None:
    where = _fake_tree(tmp_path) | {"lib_modules": str(tmp_path / "nothing")}
    absent = features.feature("CONFIG_NET_SCH_NETEM", "sch_netem", config=lambda _r: {}, **where)
    assert absent.presence == "missing"  # a configuration without the key says so
    unknown = features.feature("CONFIG_NET_SCH_NETEM", "sch_netem", config=lambda _r: None, **where)
    assert unknown.presence == "unknown" and unknown.usable is None


def test_cgroup_controllers_from_a_fake_mountinfo(tmp_path: Path) -> None:
    unified = tmp_path / "unified"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("cpu pids\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        f"41 31 0:38 / {unified} rw,relatime - cgroup2 cgroup2 rw\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "22 1 0:21 / /proc rw - proc proc rw\n"
    )
    assert features.cgroup_controllers(str(mountinfo)) == {
        "cpu": "v2",
        "cpuacct": "v1",
        "memory": "v1",
        "pids": "v2",
    }


def test_gather_reads_this_machine_into_lines() -> None:
    facts = doctor.gather()  # read-only: files, one AF_XDP socket opened and closed
    lines = diagnose(facts)
    assert {ln.status for ln in lines} <= {"ok", "fallback", "missing", "unknown"}
    assert exit_code(lines) in (0, 1)
    assert set(facts.features) == set(doctor.FEATURES)
    assert set(facts.tools) == set(doctor.TOOLS)
    json.dumps(doctor.as_dict(lines, exit_code(lines)))  # the --json document serialises
