"""Mininet's ``mininet.node``: nodes, hosts, switches and controllers on fidelnet.

- :class:`Node`, :class:`Host` (``_node``), :class:`CPULimitedHost` (``_cpuhost``),
  Containernet's :class:`Docker` (``_docker``);
- :class:`Switch`, :class:`LinuxBridge`, :class:`OVSSwitch` (= ``OVSKernelSwitch``),
  :class:`OVSBridge`, :class:`UserSwitch` on the run's own Open vSwitch, and
  :class:`IVSSwitch`, refused (``_switch``);
- :class:`Controller`, :class:`OVSController`, :class:`RemoteController`,
  :class:`NullController`, :class:`DefaultController`, :class:`Ryu`, :class:`NOX`,
  :func:`findController` (``_controller``).
"""

from __future__ import annotations

from fidelnet.compat._controller import (
    NOX,
    Controller,
    DefaultController,
    NullController,
    OVSController,
    RemoteController,
    Ryu,
    findController,
)
from fidelnet.compat._cpuhost import CPULimitedHost
from fidelnet.compat._docker import Docker
from fidelnet.compat._node import Host, Node
from fidelnet.compat._switch import (
    IVSSwitch,
    LinuxBridge,
    OVSBridge,
    OVSKernelSwitch,
    OVSSwitch,
    Switch,
    UserSwitch,
)
from fidelnet.compat._vmhost import VMHost, VMLinuxBridge

__all__ = [
    "NOX",
    "CPULimitedHost",
    "Controller",
    "DefaultController",
    "Docker",
    "Host",
    "IVSSwitch",
    "LinuxBridge",
    "Node",
    "NullController",
    "OVSBridge",
    "OVSController",
    "OVSKernelSwitch",
    "OVSSwitch",
    "RemoteController",
    "Ryu",
    "Switch",
    "UserSwitch",
    "VMHost",
    "VMLinuxBridge",
    "findController",
]
