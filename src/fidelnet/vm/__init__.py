"""VM nodes (issue 12, docs/vm.md): what the ``qemu`` node backend
(:mod:`fidelnet.nodes.qemu`) is made of.

- :mod:`fidelnet.vm.agent`: the host side of ``fidelnet-vm`` (run a program or a
  shell in a guest, wait for its agent, set its clock);
- :mod:`fidelnet.vm.image`: the guest image from Debian's packages;
- :mod:`fidelnet.vm.qemu`: QEMU's command line, QMP, the accelerator probe.
"""
