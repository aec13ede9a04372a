"""The lines a verdict is drawn by, each documented, each overridable.

Every threshold comes in pairs where it can: crossing the first makes a result
``degraded``, crossing the second ``untrusted``. They are relative to the quantity
measured wherever there is one (engine lateness as a share of the link's configured
delay; timer wake-up error as a multiple of the machine's calibrated idle figure),
and absolute only where nothing else applies. The defaults were set from runs on
the project's reference machine (2 cores, a VM with steal): clean runs of the
overload benchmark (``bench/fidelity.py``) stay below every ``degraded`` line, its
injected overloads cross at least one; the figures are in docs/fidelity.md.

``Thresholds(**values)`` checks every value and their order before anything runs:
an impossible set (a degraded line above the untrusted one, a share above 100 %) is
a :class:`~fidelnet.errors.ValidationError` naming the field.
"""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, model_validator

from fidelnet.errors import ValidationError

__all__ = ["DEFAULT", "Thresholds", "parse"]


class Thresholds(BaseModel):
    """Verdict thresholds (see the module doc; units in the names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # No idle CPU on any core: share of the traffic window.
    all_cores_busy_pct: float = 97.0
    """A sample counts as saturated when every core is at least this busy."""
    saturated_degraded_pct: float = 10.0
    saturated_untrusted_pct: float = 30.0
    # CPU pressure (PSI some), mean over the traffic window.
    pressure_degraded_pct: float = 20.0
    pressure_untrusted_pct: float = 40.0
    # Steal, mean over the window, all cores.
    steal_degraded_pct: float = 5.0
    steal_untrusted_pct: float = 20.0
    # Engine lateness p99.9 as a share of the link's configured one-way delay.
    lateness_degraded_pct_of_delay: float = 10.0
    lateness_untrusted_pct_of_delay: float = 50.0
    # Engine lateness p99.9 on a link without delay (ns).
    lateness_degraded_ns: int = 500_000
    lateness_untrusted_ns: int = 5_000_000
    # Timer probe p99 wake-up error: the larger of an absolute floor and a multiple of
    # the profile's idle p99.
    timer_degraded_ns: int = 1_500_000
    timer_untrusted_ns: int = 10_000_000
    timer_profile_factor: float = 4.0
    # Throttled CFS periods of a CPU-limited node.
    throttled_degraded_pct: float = 5.0
    throttled_untrusted_pct: float = 20.0
    # Kernel drops on the path (veth backlog, non-shaping qdiscs), as a share of the
    # packets measured; any drop at all is at least degraded.
    kernel_drops_untrusted_ratio: float = 0.001
    # Generator: achieved over requested rate.
    generator_degraded_ratio: float = 0.99
    generator_untrusted_ratio: float = 0.95
    # A latency tail within this factor of the measurement floor is noted.
    floor_factor: float = 2.0
    # VM nodes: a vCPU thread busy this share of the traffic window limited the result.
    vm_vcpu_busy_pct: float = 95.0
    # One-way latency measured from or to a VM: the uncertainty of the guest clock
    # (set by fidelnet-vm sync) as a share of the median latency.
    vm_clock_degraded_pct_of_latency: float = 5.0
    vm_clock_untrusted_pct_of_latency: float = 50.0
    # Checks whose measurement is untrusted fail as inconclusive (JUnit error);
    # "warn" keeps the check's own status and adds the verdict to its message.
    untrusted_check: str = "inconclusive"

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = set(cls.model_fields)
        for key in data:
            if key not in known:
                raise ValidationError(f"thresholds.{key}", "unknown threshold", None, sorted(known))
        return data

    @model_validator(mode="after")
    def _order(self) -> Thresholds:
        pairs = [
            ("saturated", "pct"),
            ("pressure", "pct"),
            ("steal", "pct"),
            ("lateness", "pct_of_delay"),
            ("lateness", "ns"),
            ("timer", "ns"),
            ("throttled", "pct"),
            ("vm_clock", "pct_of_latency"),
        ]
        for name, unit in pairs:
            lo = getattr(self, f"{name}_degraded_{unit}")
            hi = getattr(self, f"{name}_untrusted_{unit}")
            if lo < 0:
                raise ValidationError(f"thresholds.{name}_degraded_{unit}", "must be >= 0", lo)
            if hi < lo:
                raise ValidationError(
                    f"thresholds.{name}_untrusted_{unit}",
                    f"must be at least {name}_degraded_{unit} ({lo})",
                    hi,
                )
        for key in (
            "all_cores_busy_pct",
            "saturated_degraded_pct",
            "saturated_untrusted_pct",
            "pressure_degraded_pct",
            "pressure_untrusted_pct",
            "steal_degraded_pct",
            "steal_untrusted_pct",
            "throttled_degraded_pct",
            "throttled_untrusted_pct",
            "vm_vcpu_busy_pct",
        ):
            if not 0 <= getattr(self, key) <= 100:
                raise ValidationError(
                    f"thresholds.{key}", "must be a percentage in [0, 100]", getattr(self, key)
                )
        if not 0 < self.generator_untrusted_ratio <= self.generator_degraded_ratio <= 1:
            raise ValidationError(
                "thresholds.generator_untrusted_ratio",
                "must satisfy 0 < generator_untrusted_ratio <= generator_degraded_ratio <= 1",
                self.generator_untrusted_ratio,
            )
        if self.timer_profile_factor < 1 or self.floor_factor < 1:
            raise ValidationError(
                "thresholds.timer_profile_factor", "factors must be >= 1", self.timer_profile_factor
            )
        if self.untrusted_check not in ("inconclusive", "warn"):
            raise ValidationError(
                "thresholds.untrusted_check",
                "unknown choice",
                self.untrusted_check,
                ["inconclusive", "warn"],
            )
        return self


def parse(values: dict[str, Any] | None) -> Thresholds:
    """Thresholds from a mapping (a scenario's ``fidelity.thresholds``, a config file):
    the defaults for what is not given; a type error names the field."""
    if not values:
        return DEFAULT
    try:
        return Thresholds(**values)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise ValidationError(f"thresholds.{loc}", err["msg"], err.get("input")) from None


DEFAULT = Thresholds()
