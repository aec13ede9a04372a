"""Testing network software with fidelnet under pytest.

- :mod:`fidelnet.testing.plugin`: the pytest plugin (registered as ``fidelnet``
  through the ``pytest11`` entry point): the ``fidelnet_topology`` marker and the
  ``fidelnet_net``, ``fidelnet_topology`` and ``fidelnet_results`` fixtures;
- :mod:`fidelnet.testing.asserts`: assertions whose messages carry the measured
  value, the expected one, the result's flags and its fidelity verdict; on an
  untrusted measurement they raise :class:`InconclusiveError`.

::

    import pytest
    from fidelnet.measure import udp
    from fidelnet.testing import assert_latency_at_most, assert_loss_at_most

    @pytest.mark.fidelnet_topology("linear,2")
    def test_path(fidelnet_net):
        r = udp(fidelnet_net, "h1", "h2", rate_pps=10_000, duration=1.0)
        assert_loss_at_most(r, 0.001)
        assert_latency_at_most(r, 99.9, "1ms")

See docs/pytest-plugin.md. Importing this package is cheap (no network code).
"""

from __future__ import annotations

from fidelnet.testing.asserts import (
    InconclusiveError,
    UntrustedMeasurementWarning,
    assert_goodput_at_least,
    assert_jain_at_least,
    assert_latency_at_most,
    assert_loss_at_most,
    assert_no_flags,
    assert_reachable,
    assert_trusted,
    set_untrusted,
)

__all__ = [
    "InconclusiveError",
    "UntrustedMeasurementWarning",
    "assert_goodput_at_least",
    "assert_jain_at_least",
    "assert_latency_at_most",
    "assert_loss_at_most",
    "assert_no_flags",
    "assert_reachable",
    "assert_trusted",
    "set_untrusted",
]
