"""The machine profile: what ``fidelnet calibrate`` measured this machine can carry.

A profile is one JSON file in ``/var/lib/fidelnet/profiles/`` (``FIDELNET_STATE_DIR``
moves ``/var/lib/fidelnet``), named by its key: the machine (``/etc/machine-id``,
CPU model and count, kernel) and the fidelnet version, because both change what is
measured. :func:`load` returns the profile of this machine and version, or None
with the reason (never present, corrupt, another machine, another version); a
caller warns once and goes on without it. :func:`save` writes atomically (a
temporary file renamed into place), so an interrupted calibration leaves no
partial profile behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from fidelnet._version import __version__
from fidelnet.fidelity.machine import Machine, machine

__all__ = [
    "PROFILE_SCHEMA",
    "CpuShare",
    "EngineRelease",
    "Forwarding",
    "Profile",
    "RateAccuracy",
    "RttUnderLoad",
    "TimerError",
    "load",
    "machine_key",
    "profile_dir",
    "profile_path",
    "save",
]

PROFILE_SCHEMA = "fidelnet.profile/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CpuShare(_Model):
    """N busy processes, each in a cgroup with a CFS share of ``share_pct`` of one
    core: what each got, per second (Mininet-HiFi Table 2)."""

    processes: int
    share_pct: float
    mean_pct: float
    max_error_pct: float
    """Largest per-second deviation of any process from its share, in points."""


class TimerError(_Model):
    """How late a 1 ms sleep wakes up (HiFi 3.2), idle and with busy processes on
    every core."""

    load: str
    count: int
    p50_ns: int
    p99_ns: int
    max_ns: int


class RateAccuracy(_Model):
    """A link backend shaping to ``rate_bps``: the received rate per 10 ms window
    (HiFi Fig. 2), as a ratio to the configured rate."""

    backend: str
    rate_bps: float
    windows: int
    mean_ratio: float
    p1_ratio: float
    p99_ratio: float


class Forwarding(_Model):
    """The forwarding capacity of ``links`` links of a backend in a ``layout``
    (parallel pairs or one chain), at offered loads: delivered packets and bits per
    second; ``breaking_pps`` the highest aggregate offered rate delivered within 1 %
    (HiFi Fig. 3/4)."""

    backend: str
    layout: str
    links: int
    frame_bytes: int
    offered_pps: list[float]
    delivered_pps: list[float]
    breaking_pps: float

    @property
    def breaking_bps(self) -> float:
        return self.breaking_pps * self.frame_bytes * 8


class RttUnderLoad(_Model):
    """Round-trip time over a bare veth pair, idle and with busy processes (HiFi
    Fig. 5)."""

    load: str
    count: int
    p50_ns: int
    p99_ns: int
    max_ns: int


class EngineRelease(_Model):
    """How late the link engine released packets on a 10 ms link (one run), at a
    real-time priority (0: the normal policy) and a spin before each departure: the
    settings calibration compares."""

    realtime_priority: int
    spin_us: int = 0
    """The longest spin before a departure (linkd ``--spin-us``), 0: none."""
    packets: int
    p50_ns: int
    p999_ns: int
    max_ns: int


class Profile(_Model):
    """A machine profile (see the module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: str = Field(default=PROFILE_SCHEMA, alias="schema")
    key: str
    fidelnet: str
    machine: Machine
    measured_at: str
    seconds: float
    command: list[str]
    steal_at_rest_pct: float
    cpu_shares: list[CpuShare] = Field(default_factory=list)
    timer: list[TimerError] = Field(default_factory=list)
    rate_accuracy: list[RateAccuracy] = Field(default_factory=list)
    forwarding: list[Forwarding] = Field(default_factory=list)
    rtt: list[RttUnderLoad] = Field(default_factory=list)
    floor_p50_ns: int | None = None
    floor_p999_ns: int | None = None
    floor_max_send_pps: float | None = None
    engine_release: list[EngineRelease] = Field(default_factory=list)
    engine_realtime_priority: int | None = None
    """The engine's real-time priority calibration chose for this machine (0: off),
    used by every later run; None: not measured, the built-in default applies."""
    engine_spin_us: int | None = None
    """The engine's spin before each departure calibration chose (0: off); None: not
    measured, the built-in default applies."""
    notes: list[str] = Field(default_factory=list)

    def timer_p99_ns(self, load: str = "idle") -> int | None:
        for t in self.timer:
            if t.load == load:
                return t.p99_ns
        return None

    def capacity_pps(self, backend: str, layout: str = "chain") -> tuple[float, int] | None:
        """The aggregate forwarding capacity (packet-hops per second) of ``backend``:
        the breaking point times the links it was measured over, and that count."""
        best: tuple[float, int] | None = None
        for f in self.forwarding:
            if f.backend == backend and f.layout == layout:
                hops = f.breaking_pps * (f.links if layout == "chain" else 1)
                if best is None or hops > best[0]:
                    best = (hops, f.links)
        return best


def _machine_id() -> str:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text:
            return text
    return platform.node()


def machine_key(m: Machine | None = None) -> str:
    """A short key for this machine and fidelnet version."""
    m = m or machine()
    raw = json.dumps([_machine_id(), m.cpu_model, m.cpus, m.kernel, __version__])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def profile_dir() -> Path:
    return Path(os.environ.get("FIDELNET_STATE_DIR", "/var/lib/fidelnet")) / "profiles"


def profile_path(key: str | None = None) -> Path:
    return profile_dir() / f"{key or machine_key()}.json"


def save(profile: Profile, path: Path | None = None) -> Path:
    """Write ``profile`` atomically; returns its path."""
    target = path or profile_path(profile.key)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(profile.model_dump(mode="json", by_alias=True), indent=1) + "\n")
    tmp.replace(target)
    return target


def load(path: Path | None = None) -> tuple[Profile | None, str]:
    """This machine's profile, or None and why not (a sentence for a warning)."""
    key = machine_key()
    target = path or profile_path(key)
    if not target.exists():
        others = sorted(profile_dir().glob("*.json")) if path is None else []
        hint = "run `fidelnet calibrate` (a few minutes) to measure what it can carry faithfully"
        if others:
            return None, (
                f"no profile for this machine and fidelnet {__version__} "
                f"({len(others)} for others in {profile_dir()}): {hint}"
            )
        return None, f"this machine has no profile yet: {hint}"
    try:
        profile = Profile.model_validate_json(target.read_text())
    except (OSError, ValueError, pydantic.ValidationError) as exc:
        first = str(exc).splitlines()[0][:160]
        return None, f"{target}: corrupt profile ignored ({first}); run `fidelnet calibrate` again"
    if profile.fidelnet != __version__:
        return None, (
            f"{target}: profile made by fidelnet {profile.fidelnet}, this is {__version__}: "
            "ignored; run `fidelnet calibrate` again"
        )
    if profile.key != key:
        return None, (
            f"{target}: profile of another machine ({profile.machine.hostname}, "
            f"{profile.machine.cpus} CPUs, kernel {profile.machine.kernel}): ignored"
        )
    return profile, ""
