"""Measurement: packet generator runs, zero-loss search, iperf done right, results.

Everything here runs inside a started :class:`fidelnet.Network` and returns typed
results (:mod:`fidelnet.measure.results`) that save as JSON with their provenance.
"""
