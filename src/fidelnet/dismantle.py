"""Tearing a :class:`~fidelnet.network.Network` down: every process ended, every
object the run made removed (from its state file), then the wait for the kernel's own
cleanup of the namespaces (:mod:`fidelnet.kernel.nscleanup`).

The order matters: every node's processes are killed first, all at once, so each
node's close only reaps; then the node backends, the link engine, the switch
datapaths and the run's helpers end; only then are kernel objects removed, so no
process holds one open.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING

from fidelnet.kernel import nscleanup
from fidelnet.kernel.teardown import remove_all as remove_recorded
from fidelnet.vt import run as vt_run

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["remove_all", "stop"]

log = logging.getLogger("fidelnet")


def stop(net: Network, wait_kernel: bool, kernel_timeout: float) -> None:
    """Remove everything (``net.timings["teardown"]``), then, with ``wait_kernel``,
    wait for the kernel's cleanup (``net.timings["kernel_cleanup"]``)."""
    began = time.perf_counter()
    remove_all(net)
    net.timings["teardown"] = time.perf_counter() - began
    net.timings["kernel_cleanup"] = None
    if not wait_kernel:
        return
    done = nscleanup.wait_idle(timeout=kernel_timeout)
    net.timings["kernel_cleanup"] = done.seconds if done.finished else None
    if not done.finished:
        log.warning(
            "the kernel was still freeing network namespaces after %.0f s; stopped waiting",
            kernel_timeout,
        )
    elif done.seconds >= 1.0:
        log.info("the kernel freed the run's namespaces in %.1f s", done.seconds)


def remove_all(net: Network) -> None:
    state = net._state
    assert state is not None
    vt_run.stopping(net)  # the adaptive TDF leaves the run alone from here
    for node in net.nodes.values():  # all at once: then each close only reaps
        with contextlib.suppress(Exception):
            node.kill_processes()
    for node in net.nodes.values():
        try:
            node.close()
        except Exception as exc:  # teardown goes on: the cgroups end what is left
            log.warning("run %s: closing %s: %s", state.run_id, node.name, exc)
    if net.engine is not None:
        failure = net.engine.stop()
        if failure:
            net.engine_failure = failure
            log.error("run %s: the link engine had failed: %s", state.run_id, failure)
        net.engine = None
    for datapath in net.datapaths.values():
        datapath.close()
    net.datapaths.clear()
    if net._fabric_nl is not None:
        net._fabric_nl.close()
        net._fabric_nl = None
    if net.mount_template is not None:
        net.mount_template.close()
        net.mount_template = None
    if net._exec_server is not None:
        net._exec_server.close()
        net._exec_server = None
    problems = remove_recorded(state)
    for p in problems:
        log.error("run %s: teardown: %s", state.run_id, p)
    state.close(remove=not problems)
    net.forget()
