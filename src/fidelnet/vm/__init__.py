"""VM nodes (issue 12, being built): the guest agent's tool, the guest image, QEMU.

What exists so far: :mod:`fidelnet.vm.agent` (the host side of ``fidelnet-vm``:
the argvs that run a program or a shell in a guest through its multiplexer).
"""
