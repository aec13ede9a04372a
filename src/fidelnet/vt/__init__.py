"""Virtual time (issue 11, first part): the shared clock page and the preload shim.

A dilated group of processes (a node, later a whole connected part of a topology)
shares one small page: the time dilation factor (TDF) and one anchor pair per clock
family. ``libfidelnet-vt.so`` (``shim/vt.c``, built by ``make install``), preloaded
into every process of the group, turns every time read and every wait of the
program into virtual time. See docs/virtual-time.md for what is covered and what is
not there yet.
"""

from fidelnet.vt.page import TimePage, preload_env, shim_path

__all__ = ["TimePage", "preload_env", "shim_path"]
