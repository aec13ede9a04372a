"""fidelnet's stand-in for the ``mininet`` package: each module re-exports
``fidelnet.compat.<module>``. It is importable only when fidelnet puts its
directory on ``sys.path`` (``fidelnet mn``, ``fidelnet compat-path``)."""

FIDELNET = True
