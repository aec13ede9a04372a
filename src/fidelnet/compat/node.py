"""Mininet's ``mininet.node``: nodes, hosts, switches and controllers on fidelnet.

- :class:`Node`, :class:`Host`, :class:`CPULimitedHost` (``_node``);
- :class:`Switch`, :class:`LinuxBridge`, :class:`OVSSwitch` (= ``OVSKernelSwitch``),
  :class:`OVSBridge`, :class:`UserSwitch`, all learning switches (``_switch``);
- :class:`Controller`, :class:`OVSController`, :class:`RemoteController`,
  :class:`NullController`, :class:`DefaultController`, :func:`findController`:
  accepted, not run (``_controller``).
"""

from __future__ import annotations

from fidelnet.compat._controller import (
    Controller,
    DefaultController,
    NullController,
    OVSController,
    RemoteController,
    findController,
)
from fidelnet.compat._node import CPULimitedHost, Host, Node
from fidelnet.compat._switch import (
    LinuxBridge,
    OVSBridge,
    OVSKernelSwitch,
    OVSSwitch,
    Switch,
    UserSwitch,
)

__all__ = [
    "CPULimitedHost",
    "Controller",
    "DefaultController",
    "Host",
    "LinuxBridge",
    "Node",
    "NullController",
    "OVSBridge",
    "OVSController",
    "OVSKernelSwitch",
    "OVSSwitch",
    "RemoteController",
    "Switch",
    "UserSwitch",
    "findController",
]
