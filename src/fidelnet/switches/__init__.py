"""Switch datapaths: what forwards frames between a switch's ports.

Every switch lives in the run's fabric namespace; its ports are the switch's ends of
its links. Two datapaths, each one module behind :class:`~fidelnet.switches._base.Datapath`:

- ``bridge`` (:mod:`.bridge`): a Linux bridge per switch, the kernel's STP when asked.
- ``bpf`` (:mod:`.bpf`): one tc BPF learning switch for all the run's switches,
  with no device of its own per switch; a Linux bridge costs the kernel an RCU
  barrier when it is deleted, which made teardown the larger part of big runs.
- ``ovs`` (:mod:`.ovs`): a bridge of the run's own Open vSwitch (its own
  ``ovsdb-server`` and ``ovs-vswitchd``), only where asked for.

``auto`` (the default) takes ``bpf`` for switches without STP where the program and
``bpftool`` are installed, and ``bridge`` otherwise (docs/switches.md). A fake for
unit tests is in :mod:`.fake`.
"""

from __future__ import annotations

from fidelnet.switches._base import DATAPATHS, Datapath, choose, make, ovs_env, preflight

__all__ = ["DATAPATHS", "Datapath", "choose", "make", "ovs_env", "preflight"]
